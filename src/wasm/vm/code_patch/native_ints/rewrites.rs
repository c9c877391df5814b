//! Where numpy's compiled code chooses its default integer, and what each choice becomes.

use super::super::plan::{Op, Rewrite};
use super::layout::*;

pub const REWRITES: &[Rewrite] = &[
    Rewrite {
        // Not a change: it checks the layout `USER_CODE` walks is the one it was written for.
        function: "PyEval_GetGlobals",
        find: &[
            Op::I32Const(0),
            Op::I32Load(TSTATE),
            Op::I32Const(TSTATE_FRAME as i32),
            Op::I32Add,
            Op::I32Load(0),
        ],
        with: &[
            Op::I32Const(0),
            Op::I32Load(TSTATE),
            Op::I32Const(TSTATE_FRAME as i32),
            Op::I32Add,
            Op::I32Load(0),
        ],
        count: 1,
        why: "where the innermost frame is found",
    },
    Rewrite {
        function: "discover_descriptor_from_pylong",
        // Python's int of value -1 (the error value, when no error was set).
        find: &[Op::I32Const(NPY_LONG), DESCR],
        with: &[Op::LocalGet(2), Op::Call(PYLONG_DESCR)],
        count: 1,
        why: "a Python int in an array becomes int64 (np.array([1, 2, 3]))",
    },
    Rewrite {
        function: "discover_descriptor_from_pylong",
        find: &[
            Op::I32Const(NPY_LONG),
            Op::I32Const(NPY_LONGLONG),
            Op::LocalGet(2),
            Op::I64Const(1 << 31),
            Op::I64Add,
            Op::I64Const(1 << 32),
            Op::I64LtU,
            Op::Select,
            DESCR,
        ],
        with: &[Op::LocalGet(2), Op::Call(PYLONG_DESCR)],
        count: 1,
        why: "a Python int in an array becomes int64 (np.array([1, 2, 3]))",
    },
    Rewrite {
        function: "int_default_descriptor",
        find: &[Op::I32Const(NPY_LONG), DESCR],
        with: &[Op::Call(DEFAULT_DESCR)],
        count: 1,
        why: "Python ints alone resolve to int64 (np.where(c, 1, 0))",
    },
    Rewrite {
        function: "int_common_dtype",
        find: &[Op::I32Const(0), Op::I32Load(INTP_DTYPE)],
        with: &[Op::Call(DEFAULT_DTYPE)],
        count: 2,
        why: "a Python int with a bool array promotes to int64",
    },
    Rewrite {
        function: "_convert_from_any",
        find: &[Op::I32Const(NPY_LONG), DESCR],
        with: &[Op::Call(DEFAULT_DESCR)],
        count: 1,
        why: "np.dtype(int), dtype=int and astype(int) mean int64",
    },
    Rewrite {
        function: "PyArray_ArangeObj",
        find: &[Op::I32Const(NPY_LONG), DESCR],
        with: &[Op::Call(DEFAULT_DESCR)],
        count: 1,
        why: "np.arange of ints is int64",
    },
    Rewrite {
        function: "reducelike_promote_and_resolve",
        // From `typenum = NPY_INTP` to the end of the block that narrows it down.
        find: &[
            Op::I32Const(NPY_LONG),
            Op::LocalSet(9),
            Op::Block,
            Op::LocalGet(11),
            Op::I32Eqz,
            Op::BrIf(0),
            Op::Block,
            Op::LocalGet(10),
            Op::I32Const(32),
            Op::I32Add,
            Op::I32Load(0),
            Op::I32Const(3),
            Op::I32LeU,
            Op::BrIf(0),
            Op::LocalGet(11),
            Op::LocalSet(9),
            Op::Br(1),
            Op::End,
            Op::LocalGet(11),
            Op::I32Const(-2),
            Op::I32Add,
            Op::LocalTee(11),
            Op::I32Const(8),
            Op::I32GtU,
            Op::BrIf(0),
            Op::LocalGet(11),
            Op::I32Load8U(TO_INTP_TABLE),
            Op::LocalSet(9),
            Op::End,
        ],
        with: &[
            Op::LocalGet(10),
            Op::LocalGet(11),
            Op::Call(REDUCE_TYPE),
            Op::LocalSet(9),
        ],
        count: 1,
        why: "sums and products of integers narrower than 64 bits accumulate in 64 bits",
    },
    Rewrite {
        function: "ufunc_generic_fastcall",
        // The one-scalar shortcut stores a Python int as a 32-bit intp; it is skipped for
        // Python ints (compared with no type at all), so the general path decides.
        find: &[Op::LocalGet(11), Op::I32Const(PYLONG_TYPE), Op::I32Ne],
        with: &[Op::LocalGet(11), Op::I32Const(0), Op::I32Ne],
        count: 1,
        why: "a ufunc of one Python int gives int64 (np.negative(5))",
    },
    // Where numpy converts an array of counts or indices to intp, it asks for 'safe'
    // casting, which an int64 array (intp natively) fails against a 32-bit intp:
    // `np.repeat(a, np.array([2, 3]))` raised "Cannot cast array data from int64 to int32".
    // Each conversion below is forced instead, as take and fancy indexing already are.
    Rewrite {
        function: "PyArray_PutTo",
        find: &[
            Op::I32Const(0),
            Op::I32Const(0),
            Op::I32Const(NPY_ARRAY_DEFAULT),
            Op::I32Const(0),
            FROM_ANY,
        ],
        with: &[
            Op::I32Const(0),
            Op::I32Const(0),
            Op::I32Const(NPY_ARRAY_DEFAULT | FORCECAST),
            Op::I32Const(0),
            FROM_ANY,
        ],
        count: 1,
        why: "np.put takes int64 indices",
    },
    Rewrite {
        function: "PyArray_Repeat",
        find: &[
            Op::I32Const(0),
            Op::I32Const(1),
            Op::I32Const(NPY_ARRAY_DEFAULT),
            Op::I32Const(0),
            FROM_ANY,
        ],
        with: &[
            Op::I32Const(0),
            Op::I32Const(1),
            Op::I32Const(NPY_ARRAY_DEFAULT | FORCECAST),
            Op::I32Const(0),
            FROM_ANY,
        ],
        count: 1,
        why: "np.repeat takes int64 counts",
    },
    Rewrite {
        function: "PyArray_Choose",
        find: &[
            DESCR,
            Op::I32Const(0),
            Op::I32Const(0),
            Op::I32Const(0),
            Op::I32Const(0),
            FROM_ANY,
        ],
        with: &[
            DESCR,
            Op::I32Const(0),
            Op::I32Const(0),
            Op::I32Const(FORCECAST),
            Op::I32Const(0),
            FROM_ANY,
        ],
        count: 1,
        why: "np.choose takes int64 choices",
    },
    Rewrite {
        function: "PyArray_SearchSorted",
        // ALIGNED | NOTSWAPPED, the sorter's flags.
        find: &[
            Op::I32Const(NPY_LONG),
            DESCR,
            Op::I32Const(0x300),
            Op::Call("PyArray_FromArray"),
        ],
        with: &[
            Op::I32Const(NPY_LONG),
            DESCR,
            Op::I32Const(0x300 | FORCECAST),
            Op::Call("PyArray_FromArray"),
        ],
        count: 1,
        why: "np.searchsorted takes an int64 sorter",
    },
    Rewrite {
        function: "PyUFunc_GenericReduction",
        find: &[
            Op::I32Const(1),
            Op::I32Const(1),
            Op::I32Const(NPY_ARRAY_DEFAULT),
            Op::I32Const(0),
            FROM_ANY,
        ],
        with: &[
            Op::I32Const(1),
            Op::I32Const(1),
            Op::I32Const(NPY_ARRAY_DEFAULT | FORCECAST),
            Op::I32Const(0),
            FROM_ANY,
        ],
        count: 1,
        why: "ufunc.reduceat takes int64 indices",
    },
];
