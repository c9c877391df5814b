//! numpy's default integer made 64-bit in the user's code, as on 64-bit Linux, macOS and
//! Windows. The runtime is wasm32, so numpy's default integer (`intp`, which numpy calls
//! `NPY_LONG` there) has 32 bits: `np.arange(3_000_000).sum()` wrapped around to a negative
//! number, silently.
//!
//! Natively the default integer and `intp` (what indexes memory) are one type; here they
//! cannot be, and the libraries (pandas, scikit-learn, scipy) were built and tested where
//! they are: given 64-bit defaults in their own code, they pass int64 arrays where their
//! compiled code takes `intp` ("Buffer dtype mismatch, expected 'intp_t'"). So the choice is
//! made by who asks: code running with `__main__`'s globals (what the sandbox's calls run,
//! and the functions they define) gets int64, as natively; a library's own code keeps the
//! 32-bit default it was made for. numpy's compiled choices are rewritten below to ask
//! [`USER_CODE`]; the ones numpy makes in Python (`np.int_`, counts from `bincount` and
//! `unique`) are made by the guest's `native_ints.py` the same way. Every sum and product
//! of integers accumulates in 64 bits for the user's code, and in 32 for a library's, as
//! before. Each rewrite was read off numpy 2.5.2's sources and the pinned runtime's code; a
//! runtime whose code differs is refused by the counts.

mod helpers;
mod layout;
mod rewrites;

use wasm_encoder::ValType;

use self::helpers::{classify, default_descr, default_dtype, pylong_descr, reduce_type, user_code};
use self::layout::*;
pub use self::layout::{MARKER, VERSION};
use self::rewrites::REWRITES;
use super::plan::{Global, Helper, Patch};

pub const PATCH: Patch = Patch {
    globals: &[
        Global { name: MAIN_DICT },
        Global { name: NAME_KEY },
        Global { name: FILE_KEY },
        Global { name: CACHE[0].0 },
        Global { name: CACHE[0].1 },
        Global { name: CACHE[1].0 },
        Global { name: CACHE[1].1 },
        Global { name: CACHE[2].0 },
        Global { name: CACHE[2].1 },
        Global { name: CACHE[3].0 },
        Global { name: CACHE[3].1 },
        Global { name: CACHE_NEXT },
    ],
    helpers: &[
        Helper {
            name: CLASSIFY,
            params: &[ValType::I32],
            results: &[ValType::I32],
            body: classify,
        },
        Helper {
            name: USER_CODE,
            params: &[],
            results: &[ValType::I32],
            body: user_code,
        },
        Helper {
            name: DEFAULT_DESCR,
            params: &[],
            results: &[ValType::I32],
            body: default_descr,
        },
        Helper {
            name: PYLONG_DESCR,
            params: &[ValType::I64],
            results: &[ValType::I32],
            body: pylong_descr,
        },
        Helper {
            name: DEFAULT_DTYPE,
            params: &[],
            results: &[ValType::I32],
            body: default_dtype,
        },
        Helper {
            name: REDUCE_TYPE,
            params: &[ValType::I32, ValType::I32],
            results: &[ValType::I32],
            body: reduce_type,
        },
    ],
    rewrites: REWRITES,
};
