//! The numbers and names the rewrites use: numpy's type numbers, addresses in the pinned
//! runtime's memory, CPython's frame layout there, and the helpers' and globals' names.

use super::super::plan::Op;

/// numpy's type numbers on wasm32 (`NPY_TYPES`): `long` is 32 bits there, `long long` 64.
pub const NPY_LONG: i32 = 7;
pub const NPY_LONGLONG: i32 = 9;
pub const NPY_ULONGLONG: i32 = 10;

pub const DESCR: Op = Op::Call("PyArray_DescrFromType");
pub const FROM_ANY: Op = Op::Call("PyArray_FromAny");

/// `NPY_ARRAY_DEFAULT` (C-contiguous, aligned, writeable), and the flag that lets an array
/// convert without the 'safe' casting rule.
pub const NPY_ARRAY_DEFAULT: i32 = 0x501;
pub const FORCECAST: i32 = 0x10;

/// Addresses in the pinned runtime's memory: the `PyArray_DTypeMeta *` variables numpy's
/// `initialize_legacy_dtypemeta_aliases` fills (`_Intp_dtype`, `_Int64_dtype`), the type
/// object of Python's `int`, and the byte table `reducelike_promote_and_resolve` maps a small
/// integer type to `intp` or `uintp` with.
pub const INTP_DTYPE: u64 = 27_642_972;
pub const INT64_DTYPE: u64 = 27_642_964;
pub const PYLONG_TYPE: i32 = 26_106_228;
pub const TO_INTP_TABLE: u64 = 22_081_920;

/// Bumped whenever the rewrites change: part of the compiled module's and the warm image's
/// names, so nothing compiled from other rewrites is used.
pub const VERSION: &str = "native-ints-6";

/// The function that tells whether a module is one these rewrites are for: numpy is linked in.
pub const MARKER: &str = "discover_descriptor_from_pylong";

/// 1 when the innermost Python frame runs with `__main__`'s globals: the user's code.
pub const USER_CODE: &str = "code_sandbox_user_code";
pub const DEFAULT_DESCR: &str = "code_sandbox_default_int_descr";
pub const PYLONG_DESCR: &str = "code_sandbox_pylong_descr";
pub const DEFAULT_DTYPE: &str = "code_sandbox_default_int_dtype";
pub const REDUCE_TYPE: &str = "code_sandbox_reduce_type";
pub const CLASSIFY: &str = "code_sandbox_classify_globals";
/// What `CLASSIFY` says of a frame's globals.
pub const LIBRARY: i32 = 0;
pub const USER: i32 = 1;
pub const NUMPY: i32 = 2;
/// `__main__`'s dict, looked up on first use (0 until then).
pub const MAIN_DICT: &str = "code_sandbox_main_dict";
/// The interned strings `"__name__"` and `"__file__"`, made on first use.
pub const NAME_KEY: &str = "code_sandbox_name_key";
pub const FILE_KEY: &str = "code_sandbox_file_key";
/// The last dicts `CLASSIFY` was asked about, with its answers, and the slot to fill next.
pub const CACHE: [(&str, &str); 4] = [
    ("code_sandbox_dict_0", "code_sandbox_verdict_0"),
    ("code_sandbox_dict_1", "code_sandbox_verdict_1"),
    ("code_sandbox_dict_2", "code_sandbox_verdict_2"),
    ("code_sandbox_dict_3", "code_sandbox_verdict_3"),
];
pub const CACHE_NEXT: &str = "code_sandbox_cache_next";

/// CPython 3.15's layout on wasm32, as the pinned runtime's `PyEval_GetGlobals` reads it (a
/// rewrite below checks it still does): the static holding the current thread's state, its
/// innermost frame, and in a frame its code (tagged), previous frame, globals, next
/// instruction and owner; in a code object, where its instructions start.
pub const TSTATE: u64 = 27_561_516;
pub const TSTATE_FRAME: u64 = 56;
pub const FRAME_PREVIOUS: u64 = 4;
pub const FRAME_GLOBALS: u64 = 12;
pub const FRAME_INSTR: u64 = 28;
pub const FRAME_OWNER: u64 = 38;
pub const CODE_FIRST_TRACEABLE: u64 = 120;
pub const CODE_ADAPTIVE: i32 = 128;
