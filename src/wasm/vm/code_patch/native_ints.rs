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

use wasm_encoder::{BlockType, Function, Instruction as I, MemArg, ValType};

use super::{Global, Helper, Op, Patch, PatchError, Resolver, Rewrite};

/// numpy's type numbers on wasm32 (`NPY_TYPES`): `long` is 32 bits there, `long long` 64.
const NPY_LONG: i32 = 7;
const NPY_LONGLONG: i32 = 9;
const NPY_ULONGLONG: i32 = 10;

const DESCR: Op = Op::Call("PyArray_DescrFromType");
const FROM_ANY: Op = Op::Call("PyArray_FromAny");

/// `NPY_ARRAY_DEFAULT` (C-contiguous, aligned, writeable), and the flag that lets an array
/// convert without the 'safe' casting rule.
const NPY_ARRAY_DEFAULT: i32 = 0x501;
const FORCECAST: i32 = 0x10;

/// Addresses in the pinned runtime's memory: the `PyArray_DTypeMeta *` variables numpy's
/// `initialize_legacy_dtypemeta_aliases` fills (`_Intp_dtype`, `_Int64_dtype`), the type
/// object of Python's `int`, and the byte table `reducelike_promote_and_resolve` maps a small
/// integer type to `intp` or `uintp` with.
const INTP_DTYPE: u64 = 27_642_972;
const INT64_DTYPE: u64 = 27_642_964;
const PYLONG_TYPE: i32 = 26_106_228;
const TO_INTP_TABLE: u64 = 22_081_920;

/// Bumped whenever the rewrites change: part of the compiled module's and the warm image's
/// names, so nothing compiled from other rewrites is used.
pub const VERSION: &str = "native-ints-6";

/// The function that tells whether a module is one these rewrites are for: numpy is linked in.
pub const MARKER: &str = "discover_descriptor_from_pylong";

/// 1 when the innermost Python frame runs with `__main__`'s globals: the user's code.
pub const USER_CODE: &str = "code_sandbox_user_code";
const DEFAULT_DESCR: &str = "code_sandbox_default_int_descr";
const PYLONG_DESCR: &str = "code_sandbox_pylong_descr";
const DEFAULT_DTYPE: &str = "code_sandbox_default_int_dtype";
const REDUCE_TYPE: &str = "code_sandbox_reduce_type";
const CLASSIFY: &str = "code_sandbox_classify_globals";
/// What `CLASSIFY` says of a frame's globals.
const LIBRARY: i32 = 0;
const USER: i32 = 1;
const NUMPY: i32 = 2;
/// `__main__`'s dict, looked up on first use (0 until then).
const MAIN_DICT: &str = "code_sandbox_main_dict";
/// The interned strings `"__name__"` and `"__file__"`, made on first use.
const NAME_KEY: &str = "code_sandbox_name_key";
const FILE_KEY: &str = "code_sandbox_file_key";
/// The last dicts `CLASSIFY` was asked about, with its answers, and the slot to fill next.
const CACHE: [(&str, &str); 4] = [
    ("code_sandbox_dict_0", "code_sandbox_verdict_0"),
    ("code_sandbox_dict_1", "code_sandbox_verdict_1"),
    ("code_sandbox_dict_2", "code_sandbox_verdict_2"),
    ("code_sandbox_dict_3", "code_sandbox_verdict_3"),
];
const CACHE_NEXT: &str = "code_sandbox_cache_next";

/// CPython 3.15's layout on wasm32, as the pinned runtime's `PyEval_GetGlobals` reads it (a
/// rewrite below checks it still does): the static holding the current thread's state, its
/// innermost frame, and in a frame its code (tagged), previous frame, globals, next
/// instruction and owner; in a code object, where its instructions start.
const TSTATE: u64 = 27_561_516;
const TSTATE_FRAME: u64 = 56;
const FRAME_PREVIOUS: u64 = 4;
const FRAME_GLOBALS: u64 = 12;
const FRAME_INSTR: u64 = 28;
const FRAME_OWNER: u64 = 38;
const CODE_FIRST_TRACEABLE: u64 = 120;
const CODE_ADAPTIVE: i32 = 128;

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

/// `USER_CODE`'s body: walks the interpreter's frames from the innermost, as
/// `PyEval_GetGlobals` does (skipping frames that have not started), past numpy's own Python
/// code (which only passes the caller's request on), to the first other frame: 1 when it is
/// the user's code (`__main__`'s globals, or see [`classify`]), 0 for a library's or none.
fn user_code(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let main = r.global(MAIN_DICT)?;
    let (frame, globals, owner, code) = (0, 1, 2, 3);
    let mut f = Function::new([(4, ValType::I32)]);
    let mut s = f.instructions();
    s.global_get(main).i32_eqz().if_(BlockType::Empty);
    s.i32_const(r.c_string("__main__")? as i32)
        .call(r.func("PyImport_AddModule")?)
        .local_tee(frame);
    s.if_(BlockType::Empty)
        .local_get(frame)
        .call(r.func("PyModule_GetDict")?)
        .global_set(main);
    s.else_().call(r.func("PyErr_Clear")?).end().end();
    s.i32_const(0)
        .i32_load(word(TSTATE))
        .i32_load(word(TSTATE_FRAME))
        .local_set(frame);
    s.loop_(BlockType::Empty);
    s.local_get(frame)
        .i32_eqz()
        .if_(BlockType::Empty)
        .i32_const(LIBRARY)
        .return_()
        .end();
    s.block(BlockType::Empty);
    // Owned by the C stack or the interpreter: not a Python frame.
    s.local_get(frame)
        .i32_load8_s(byte(FRAME_OWNER))
        .local_tee(owner)
        .i32_const(2)
        .i32_gt_s()
        .br_if(0);
    s.local_get(owner).i32_const(1).i32_ne().if_(BlockType::Empty);
    // Not started yet: its instruction pointer is still before the code's first one.
    s.local_get(frame).i32_load(word(FRAME_INSTR));
    s.local_get(frame)
        .i32_load(word(0))
        .i32_const(-2)
        .i32_and()
        .local_tee(code);
    s.local_get(code)
        .i32_load(word(CODE_FIRST_TRACEABLE))
        .i32_const(1)
        .i32_shl()
        .i32_add();
    s.i32_const(CODE_ADAPTIVE).i32_add().i32_lt_u().br_if(1).end();
    s.local_get(frame)
        .i32_load(word(FRAME_GLOBALS))
        .local_tee(globals)
        .global_get(main)
        .i32_eq();
    s.if_(BlockType::Empty).i32_const(USER).return_().end();
    s.local_get(globals)
        .call(r.func(CLASSIFY)?)
        .local_tee(code)
        .i32_const(NUMPY)
        .i32_ne();
    s.if_(BlockType::Empty).local_get(code).return_().end();
    s.end();
    s.local_get(frame)
        .i32_load(word(FRAME_PREVIOUS))
        .local_set(frame)
        .br(0)
        .end();
    s.i32_const(0).end();
    Ok(f)
}

/// `CLASSIFY`'s body: what the dict `local 0` is the globals of: numpy's own code (its
/// `__name__` is `numpy` or starts with `numpy.`), the user's (a module whose `__file__` is a
/// path outside `/usr/local/`: the user's own files), or a library's (any other: a module
/// under `/usr/local/`, the runtime's and the installed packages', a compiled module, code
/// run with `exec`). Remembered for the last few dicts asked.
fn classify(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let (globals, verdict, text) = (0, 1, 2);
    let mut f = Function::new([(2, ValType::I32)]);
    let mut s = f.instructions();
    for (dict, answer) in CACHE {
        s.local_get(globals).global_get(r.global(dict)?).i32_eq();
        s.if_(BlockType::Empty)
            .global_get(r.global(answer)?)
            .return_()
            .end();
    }
    utf8_of(&mut s, r, globals, NAME_KEY, "__name__", text)?;
    starts_with(&mut s, text, b"numpy");
    s.local_get(text)
        .i32_load8_u(byte(5))
        .local_tee(verdict)
        .i32_eqz();
    s.local_get(verdict)
        .i32_const(i32::from(b'.'))
        .i32_eq()
        .i32_or()
        .i32_and();
    s.if_(BlockType::Empty).i32_const(NUMPY).local_set(verdict);
    s.else_();
    utf8_of(&mut s, r, globals, FILE_KEY, "__file__", text)?;
    starts_with(&mut s, text, b"/");
    starts_with(&mut s, text, b"/usr/local/");
    s.i32_eqz().i32_and().local_set(verdict).end();
    // Remembered in the slot after the last one filled.
    let next = r.global(CACHE_NEXT)?;
    for (slot, (dict, answer)) in CACHE.iter().enumerate() {
        s.global_get(next)
            .i32_const(slot as i32)
            .i32_eq()
            .if_(BlockType::Empty);
        s.local_get(globals)
            .global_set(r.global(dict)?)
            .local_get(verdict)
            .global_set(r.global(answer)?)
            .end();
    }
    s.global_get(next)
        .i32_const(1)
        .i32_add()
        .i32_const(CACHE.len() as i32 - 1)
        .i32_and()
        .global_set(next);
    s.local_get(verdict).end();
    Ok(f)
}

/// Sets `text` to the UTF-8 of the str `globals[key]` (0 when absent or not a str); the key
/// is interned into the global `key_global` on first use.
fn utf8_of(
    s: &mut wasm_encoder::InstructionSink<'_>,
    r: &Resolver<'_>,
    globals: u32,
    key_global: &'static str,
    key: &'static str,
    text: u32,
) -> Result<(), PatchError> {
    let g = r.global(key_global)?;
    s.global_get(g).i32_eqz().if_(BlockType::Empty);
    s.i32_const(r.c_string(key)? as i32)
        .call(r.func("PyUnicode_InternFromString")?)
        .global_set(g)
        .end();
    s.i32_const(0).local_set(text);
    s.local_get(globals)
        .global_get(g)
        .call(r.func("PyDict_GetItem")?)
        .local_tee(text);
    s.if_(BlockType::Empty)
        .local_get(text)
        .call(r.func("PyUnicode_AsUTF8")?)
        .local_tee(text)
        .i32_eqz();
    s.if_(BlockType::Empty).call(r.func("PyErr_Clear")?).end().end();
    Ok(())
}

/// Pushes whether the NUL-terminated bytes at `text` (0: none) start with `prefix`.
fn starts_with(s: &mut wasm_encoder::InstructionSink<'_>, text: u32, prefix: &[u8]) {
    s.local_get(text).i32_const(0).i32_ne();
    for (i, b) in prefix.iter().enumerate() {
        s.local_get(text)
            .i32_load8_u(byte(i as u64))
            .i32_const(i32::from(*b))
            .i32_eq()
            .i32_and();
    }
}

fn word(offset: u64) -> MemArg {
    MemArg {
        offset,
        align: 2,
        memory_index: 0,
    }
}

fn byte(offset: u64) -> MemArg {
    MemArg {
        offset,
        align: 0,
        memory_index: 0,
    }
}

/// Pushes `then` if the caller is the user's code, else `otherwise`.
fn by_caller(
    f: &mut Function,
    r: &Resolver<'_>,
    then: &[I<'static>],
    otherwise: &[I<'static>],
) -> Result<(), PatchError> {
    for i in then.iter().chain(otherwise) {
        f.instruction(i);
    }
    f.instructions().call(r.func(USER_CODE)?).select();
    Ok(())
}

/// The default integer's descriptor: int64 for the user's code, intp for a library's.
fn default_descr(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let mut f = Function::new([(0, ValType::I32)]);
    by_caller(&mut f, r, &[I::I32Const(NPY_LONGLONG)], &[I::I32Const(NPY_LONG)])?;
    f.instructions().call(r.func("PyArray_DescrFromType")?).end();
    Ok(f)
}

/// The descriptor for a Python int of value `local 0`: int64 for the user's code; for a
/// library's, intp when it fits, as numpy decides on wasm32.
fn pylong_descr(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let mut f = Function::new([(0, ValType::I32)]);
    let fits = [
        I::I32Const(NPY_LONG),
        I::I32Const(NPY_LONGLONG),
        I::LocalGet(0),
        I::I64Const(1 << 31),
        I::I64Add,
        I::I64Const(1 << 32),
        I::I64LtU,
        I::Select,
    ];
    by_caller(&mut f, r, &[I::I32Const(NPY_LONGLONG)], &fits)?;
    f.instructions().call(r.func("PyArray_DescrFromType")?).end();
    Ok(f)
}

/// The default integer's DType (`PyArray_DTypeMeta *`), as `int_common_dtype` reads it.
fn default_dtype(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let load = |offset| {
        I::I32Load(MemArg {
            offset,
            align: 2,
            memory_index: 0,
        })
    };
    let mut f = Function::new([(0, ValType::I32)]);
    by_caller(
        &mut f,
        r,
        &[I::I32Const(0), load(INT64_DTYPE)],
        &[I::I32Const(0), load(INTP_DTYPE)],
    )?;
    f.instructions().end();
    Ok(f)
}

/// The type a sum or product of an array of type `local 1` (descriptor `local 0`)
/// accumulates in: numpy's rule ("at least intp", `typenum` when it is as wide), with
/// 64 bits for the user's code and intp's 32 for a library's.
fn reduce_type(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let (descr, typenum, user, offset, default) = (0, 1, 2, 3, 4);
    let mut f = Function::new([(3, ValType::I32)]);
    let mut s = f.instructions();
    s.call(r.func(USER_CODE)?).local_set(user);
    // int64 or intp: for bools, and types with no entry of their own below.
    s.i32_const(NPY_LONGLONG)
        .i32_const(NPY_LONG)
        .local_get(user)
        .select()
        .local_set(default);
    s.local_get(typenum)
        .i32_eqz()
        .if_(BlockType::Empty)
        .local_get(default)
        .return_()
        .end();
    // As wide as the accumulator already (itemsize at offset 32 of the descriptor): itself.
    let itemsize = MemArg {
        offset: 32,
        align: 2,
        memory_index: 0,
    };
    s.local_get(descr)
        .i32_load(itemsize)
        .i32_const(7)
        .i32_const(3)
        .local_get(user)
        .select()
        .i32_gt_u();
    s.if_(BlockType::Empty).local_get(typenum).return_().end();
    s.local_get(typenum)
        .i32_const(-2)
        .i32_add()
        .local_tee(offset)
        .i32_const(8)
        .i32_gt_u();
    s.if_(BlockType::Empty).local_get(default).return_().end();
    // Unsigned types sit at even offsets from type 2: uint64 or int64 for the user's code;
    // numpy's own table (uintp or intp) for a library's.
    s.i32_const(NPY_ULONGLONG)
        .local_get(offset)
        .i32_const(1)
        .i32_and()
        .i32_sub();
    let table = MemArg {
        offset: TO_INTP_TABLE,
        align: 0,
        memory_index: 0,
    };
    s.local_get(offset)
        .i32_load8_u(table)
        .local_get(user)
        .select()
        .end();
    Ok(f)
}

const REWRITES: &[Rewrite] = &[
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
