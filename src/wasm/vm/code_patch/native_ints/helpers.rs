//! The functions appended for the rewrites to call: who is asking (the user's code or a
//! library's), and the default integer, a Python int's type and a reduction's type by it.

use wasm_encoder::{BlockType, Function, Instruction as I, MemArg, ValType};

use super::super::error::PatchError;
use super::super::plan::Resolver;
use super::layout::*;

/// `USER_CODE`'s body: walks the interpreter's frames from the innermost, as
/// `PyEval_GetGlobals` does (skipping frames that have not started), past numpy's own Python
/// code (which only passes the caller's request on), to the first other frame: 1 when it is
/// the user's code (`__main__`'s globals, or see [`classify`]), 0 for a library's or none.
pub fn user_code(r: &Resolver<'_>) -> Result<Function, PatchError> {
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
pub fn classify(r: &Resolver<'_>) -> Result<Function, PatchError> {
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
pub fn default_descr(r: &Resolver<'_>) -> Result<Function, PatchError> {
    let mut f = Function::new([(0, ValType::I32)]);
    by_caller(&mut f, r, &[I::I32Const(NPY_LONGLONG)], &[I::I32Const(NPY_LONG)])?;
    f.instructions().call(r.func("PyArray_DescrFromType")?).end();
    Ok(f)
}

/// The descriptor for a Python int of value `local 0`: int64 for the user's code; for a
/// library's, intp when it fits, as numpy decides on wasm32.
pub fn pylong_descr(r: &Resolver<'_>) -> Result<Function, PatchError> {
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
pub fn default_dtype(r: &Resolver<'_>) -> Result<Function, PatchError> {
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
pub fn reduce_type(r: &Resolver<'_>) -> Result<Function, PatchError> {
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
