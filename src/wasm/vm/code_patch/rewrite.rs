//! Same-length, in-place replacement of instruction runs in one function's body.

use std::ops::Range;

use wasm_encoder::{Encode, Instruction, MemArg};
use wasmparser::Operator;

use super::error::PatchError;
use super::index::ModuleIndex;
use super::plan::{Op, Resolver, Rewrite};

/// Applies `r` to `out` (a copy of `wasm`, the same length), checking its count.
pub fn in_place(
    out: &mut [u8],
    wasm: &[u8],
    module: &ModuleIndex,
    r: &Rewrite,
    names: &Resolver<'_>,
) -> Result<(), PatchError> {
    let body = module
        .body_of(r.function)
        .ok_or(PatchError::NoFunction(r.function))?;
    let runs = find_runs(wasm, body, r, names)?;
    if runs.len() != r.count {
        return Err(PatchError::Mismatch {
            function: r.function,
            why: r.why,
            found: runs.len(),
            expected: r.count,
        });
    }
    let bytes = encode(r.with, names)?;
    for run in runs {
        if bytes.len() > run.len() {
            return Err(PatchError::TooLong(r.function));
        }
        out[run.start..run.start + bytes.len()].copy_from_slice(&bytes);
        // `nop` fills the rest: it does nothing and compiles to nothing.
        out[run.start + bytes.len()..run.end].fill(0x01);
    }
    Ok(())
}

/// The byte ranges in `body` where `r.find` occurs, instruction for instruction.
fn find_runs(
    wasm: &[u8],
    body: Range<usize>,
    r: &Rewrite,
    names: &Resolver<'_>,
) -> Result<Vec<Range<usize>>, PatchError> {
    let reader = wasmparser::BinaryReader::new(&wasm[body.clone()], body.start);
    let mut ops = wasmparser::FunctionBody::new(reader).get_operators_reader()?;
    let mut seen: Vec<(Operator<'_>, usize)> = Vec::new();
    while !ops.eof() {
        let at = ops.original_position();
        seen.push((ops.read()?, at));
    }
    let end_of = |i: usize| seen.get(i).map_or(body.end, |(_, at)| *at);
    let n = r.find.len();
    let mut runs = Vec::new();
    let mut i = 0;
    while n > 0 && i + n <= seen.len() {
        let here = seen[i..i + n].iter().zip(r.find);
        if here.clone().all(|((op, _), want)| is(op, want, names)) {
            runs.push(seen[i].1..end_of(i + n));
            i += n;
        } else {
            i += 1;
        }
    }
    Ok(runs)
}

/// Whether the module's instruction `op` is the one `want` names.
fn is(op: &Operator<'_>, want: &Op, names: &Resolver<'_>) -> bool {
    let plain = |m: &wasmparser::MemArg| m.memory == 0;
    match (op, *want) {
        (Operator::I32Const { value }, Op::I32Const(v)) => *value == v,
        (Operator::I64Const { value }, Op::I64Const(v)) => *value == v,
        (Operator::Call { function_index }, Op::Call(name)) => names.func(name).ok() == Some(*function_index),
        (Operator::LocalGet { local_index }, Op::LocalGet(i))
        | (Operator::LocalSet { local_index }, Op::LocalSet(i))
        | (Operator::LocalTee { local_index }, Op::LocalTee(i)) => *local_index == i,
        (Operator::I32Load { memarg }, Op::I32Load(o))
        | (Operator::I32Load8U { memarg }, Op::I32Load8U(o)) => plain(memarg) && memarg.offset == o,
        (Operator::Block { blockty }, Op::Block) => *blockty == wasmparser::BlockType::Empty,
        (Operator::Br { relative_depth }, Op::Br(d)) | (Operator::BrIf { relative_depth }, Op::BrIf(d)) => {
            *relative_depth == d
        }
        (Operator::I32Add, Op::I32Add)
        | (Operator::I32Eqz, Op::I32Eqz)
        | (Operator::I32Ne, Op::I32Ne)
        | (Operator::I32LeU, Op::I32LeU)
        | (Operator::I32GtU, Op::I32GtU)
        | (Operator::I64Add, Op::I64Add)
        | (Operator::I64LtU, Op::I64LtU)
        | (Operator::Select, Op::Select)
        | (Operator::End, Op::End) => true,
        _ => false,
    }
}

/// The bytes of `ops`.
fn encode(ops: &[Op], names: &Resolver<'_>) -> Result<Vec<u8>, PatchError> {
    let mut bytes = Vec::new();
    let mem = |offset, align| MemArg {
        offset,
        align,
        memory_index: 0,
    };
    for op in ops {
        let instruction = match *op {
            Op::I32Const(v) => Instruction::I32Const(v),
            Op::I64Const(v) => Instruction::I64Const(v),
            Op::Call(name) => Instruction::Call(names.func(name)?),
            Op::LocalGet(i) => Instruction::LocalGet(i),
            Op::LocalSet(i) => Instruction::LocalSet(i),
            Op::LocalTee(i) => Instruction::LocalTee(i),
            Op::I32Load(offset) => Instruction::I32Load(mem(offset, 2)),
            Op::I32Load8U(offset) => Instruction::I32Load8U(mem(offset, 0)),
            Op::I32Add => Instruction::I32Add,
            Op::I32Eqz => Instruction::I32Eqz,
            Op::I32Ne => Instruction::I32Ne,
            Op::I32LeU => Instruction::I32LeU,
            Op::I32GtU => Instruction::I32GtU,
            Op::I64Add => Instruction::I64Add,
            Op::I64LtU => Instruction::I64LtU,
            Op::Select => Instruction::Select,
            Op::Block => Instruction::Block(wasm_encoder::BlockType::Empty),
            Op::End => Instruction::End,
            Op::Br(d) => Instruction::Br(d),
            Op::BrIf(d) => Instruction::BrIf(d),
        };
        instruction.encode(&mut bytes);
    }
    Ok(bytes)
}
