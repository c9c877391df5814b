//! Appending functions and globals after the module's own: the function, global and code
//! sections get new entries at their ends; every other section is copied as it is.

use wasm_encoder::{ConstExpr, Encode, GlobalType, RawSection, ValType};
use wasmparser::Parser;

use super::error::PatchError;
use super::index::ModuleIndex;
use super::plan::{Patch, Resolver};

/// Section ids of the binary format.
const FUNCTION: u8 = 3;
const GLOBAL: u8 = 6;
const CODE: u8 = 10;

pub fn helpers_and_globals(
    wasm: &[u8],
    module: &ModuleIndex,
    patch: &Patch,
    names: &Resolver<'_>,
) -> Result<Vec<u8>, PatchError> {
    if patch.helpers.is_empty() && patch.globals.is_empty() {
        return Ok(wasm.to_vec());
    }
    let mut types = Vec::new();
    let mut bodies = Vec::new();
    for h in patch.helpers {
        let key = (
            h.params.iter().map(to_parser).collect(),
            h.results.iter().map(to_parser).collect(),
        );
        types.push(*module.types.get(&key).ok_or(PatchError::NoType(h.name))?);
        let mut body = Vec::new();
        (h.body)(names)?.encode(&mut body);
        bodies.push(body);
    }
    let mut globals = Vec::new();
    for _ in patch.globals {
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        }
        .encode(&mut globals);
        ConstExpr::i32_const(0).encode(&mut globals);
    }
    for (section, needed) in [
        (&module.function_section, !patch.helpers.is_empty()),
        (&module.global_section, !patch.globals.is_empty()),
        (&module.code_section, !patch.helpers.is_empty()),
    ] {
        if needed && section.is_none() {
            return Err(PatchError::NoSection);
        }
    }
    let mut functions = Vec::new();
    for t in &types {
        t.encode(&mut functions);
    }
    let extra = [
        (
            FUNCTION,
            module.function_section.clone(),
            functions,
            patch.helpers.len(),
        ),
        (
            GLOBAL,
            module.global_section.clone(),
            globals,
            patch.globals.len(),
        ),
        (
            CODE,
            module.code_section.clone(),
            bodies.concat(),
            patch.helpers.len(),
        ),
    ];
    let mut out = wasm_encoder::Module::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let Some((id, range)) = payload?.as_section() else {
            continue;
        };
        let grown = extra
            .iter()
            .find(|(i, r, _, n)| *i == id && r.as_ref() == Some(&range) && *n > 0);
        let data = match grown {
            Some((_, _, added, n)) => grow(&wasm[range.clone()], added, *n as u32),
            None => wasm[range].to_vec(),
        };
        out.section(&RawSection { id, data: &data });
    }
    Ok(out.finish())
}

/// A vector section's content with `count` more entries, `added`, at its end.
fn grow(content: &[u8], added: &[u8], count: u32) -> Vec<u8> {
    let (old, at) = leb_u32(content);
    let mut data = Vec::with_capacity(content.len() + added.len() + 5);
    (old + count).encode(&mut data);
    data.extend_from_slice(&content[at..]);
    data.extend_from_slice(added);
    data
}

/// An unsigned LEB128 at the start of `bytes`: its value and length.
fn leb_u32(bytes: &[u8]) -> (u32, usize) {
    let mut value = 0u32;
    for (i, b) in bytes.iter().take(5).enumerate() {
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (value, i + 1);
        }
    }
    (value, 5)
}

fn to_parser(t: &ValType) -> wasmparser::ValType {
    match t {
        ValType::I32 => wasmparser::ValType::I32,
        ValType::I64 => wasmparser::ValType::I64,
        ValType::F32 => wasmparser::ValType::F32,
        ValType::F64 => wasmparser::ValType::F64,
        ValType::V128 => wasmparser::ValType::V128,
        // Helpers take and give numbers only.
        ValType::Ref(_) => wasmparser::ValType::I32,
    }
}
