//! Binding: the runtime re-encoded so each function of [`BOUND`] first offers its call to a host
//! import, and runs its own code when the host declines.
//!
//! For a bound function `f` the module gains an import `host_kernels.f` (the same parameters,
//! an `i32` answer: 1 done, 0 declined) and, after its own functions, a copy of `f`'s body;
//! `f`'s body becomes "ask the host; if declined, call the copy". Imports come first in the
//! function index space, so every later index moves by the number of imports added, which the
//! re-encoder applies everywhere (calls, tables, exports, names). Memory, data and table slots
//! stay where they were, so memory images and saved states of the runtime stay valid.

use std::collections::HashMap;
use std::convert::Infallible;
use std::ops::Range;

use wasm_encoder::reencode::{Error as ReencodeError, Reencode, utils};
use wasm_encoder::{
    BlockType, CodeSection, EntityType, Function, FunctionSection, ImportSection, Instruction, TypeSection,
};
use wasmparser::{
    BinaryReader, CompositeInnerType, FunctionBody, KnownCustom, Name, Parser, Payload, TypeRef, ValType,
};

use super::table::{BOUND, Entry, MODULE};

/// What can stop a binding; the runtime is then used as it is, unbound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("the runtime module could not be read: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error("the runtime's {0} returns something other than nothing or an i32; it cannot be bound")]
    Returns(&'static str),
    #[error("the runtime has no import section to add the host kernels to")]
    NoImports,
    #[error("re-encoding the runtime failed: {0}")]
    Encode(String),
    #[error("the bound runtime is not a valid module: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}

/// One bound function of the module.
#[derive(Debug)]
struct Slot {
    entry: Entry,
    /// Its type (kept by the copy of its body).
    ty: u32,
    params: u32,
    /// Whether it returns an `i32` (OpenBLAS's kernels return 0), which the host's "done" gives.
    returns: bool,
    /// The type of its host import (appended to the type section).
    host_ty: u32,
    body: Range<usize>,
}

/// What the module holds that binding needs.
#[derive(Default)]
struct Plan {
    imported: u32,
    functions: u32,
    types: u32,
    imports_seen: bool,
    new_types: Vec<(Vec<ValType>, Vec<ValType>)>,
    slots: Vec<Slot>,
    by_func: HashMap<u32, usize>,
}

/// `wasm` with every function of [`BOUND`] it has bound; as it is when it has none (a module
/// without BLAS).
pub fn bind(wasm: &[u8]) -> Result<Vec<u8>, BindError> {
    let plan = plan(wasm)?;
    if plan.slots.is_empty() {
        return Ok(wasm.to_vec());
    }
    if !plan.imports_seen {
        return Err(BindError::NoImports);
    }
    let mut module = wasm_encoder::Module::new();
    let mut binder = Binder {
        plan: &plan,
        wasm,
        next: 0,
    };
    binder
        .parse_core_module(&mut module, Parser::new(0), wasm)
        .map_err(|e| BindError::Encode(format!("{e:?}")))?;
    let out = module.finish();
    wasmparser::validate(&out).map_err(BindError::Invalid)?;
    Ok(out)
}

fn plan(wasm: &[u8]) -> Result<Plan, BindError> {
    let mut plan = Plan::default();
    let mut signatures: Vec<Option<(Vec<ValType>, Vec<ValType>)>> = Vec::new();
    let mut func_types: Vec<u32> = Vec::new();
    let mut bodies: Vec<Range<usize>> = Vec::new();
    let mut names: HashMap<String, Option<u32>> = HashMap::new();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::TypeSection(reader) => {
                for group in reader {
                    for ty in group?.into_types() {
                        signatures.push(match &ty.composite_type.inner {
                            CompositeInnerType::Func(f) => Some((f.params().to_vec(), f.results().to_vec())),
                            _ => None,
                        });
                    }
                }
            }
            Payload::ImportSection(reader) => {
                plan.imports_seen = true;
                for import in reader.into_imports() {
                    if let TypeRef::Func(t) | TypeRef::FuncExact(t) = import?.ty {
                        func_types.push(t);
                        plan.imported += 1;
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for t in reader {
                    func_types.push(t?);
                }
            }
            Payload::CodeSectionEntry(body) => bodies.push(body.range()),
            Payload::CustomSection(custom) => {
                if let KnownCustom::Name(section) = custom.as_known() {
                    for sub in section {
                        if let Name::Function(map) = sub? {
                            for naming in map {
                                let naming = naming?;
                                names
                                    .entry(naming.name.to_string())
                                    .and_modify(|i| *i = None)
                                    .or_insert(Some(naming.index));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    plan.functions = func_types.len() as u32;
    plan.types = signatures.len() as u32;
    for entry in BOUND {
        let Some(Some(func)) = names.get(entry.name).copied() else {
            continue;
        };
        let Some(body) = func
            .checked_sub(plan.imported)
            .and_then(|d| bodies.get(d as usize))
        else {
            continue;
        };
        let ty = func_types[func as usize];
        let Some(Some((params, results))) = signatures.get(ty as usize) else {
            continue;
        };
        if !matches!(results.as_slice(), [] | [ValType::I32]) {
            return Err(BindError::Returns(entry.name));
        }
        let host = (params.clone(), vec![ValType::I32]);
        let at = match plan.new_types.iter().position(|t| *t == host) {
            Some(i) => i,
            None => {
                plan.new_types.push(host);
                plan.new_types.len() - 1
            }
        };
        plan.by_func.insert(func, plan.slots.len());
        plan.slots.push(Slot {
            entry: *entry,
            ty,
            params: params.len() as u32,
            returns: !results.is_empty(),
            host_ty: plan.types + at as u32,
            body: body.clone(),
        });
    }
    Ok(plan)
}

struct Binder<'a> {
    plan: &'a Plan,
    wasm: &'a [u8],
    /// The next defined function's position in the code section.
    next: u32,
}

type Failed = ReencodeError<Infallible>;

impl Binder<'_> {
    fn added(&self) -> u32 {
        self.plan.slots.len() as u32
    }

    /// `f`'s new body: ask the host import, else run the copy of the old body.
    fn trampoline(&self, slot_no: usize, slot: &Slot) -> Function {
        let host = self.plan.imported + slot_no as u32;
        let copy = self.plan.functions + self.added() + slot_no as u32;
        let mut f = Function::new([]);
        let args = |f: &mut Function| {
            for i in 0..slot.params {
                f.instruction(&Instruction::LocalGet(i));
            }
        };
        let gated = slot.entry.form.gate();
        if let Some((sizes, least)) = gated {
            // The sizes' product >= least, unsigned (a negative size passes, for the host to
            // refuse).
            for (i, &size) in sizes.iter().enumerate() {
                f.instruction(&Instruction::LocalGet(size));
                f.instruction(&Instruction::I64ExtendI32U);
                if i > 0 {
                    f.instruction(&Instruction::I64Mul);
                }
            }
            f.instruction(&Instruction::I64Const(least as i64));
            f.instruction(&Instruction::I64GeU);
            f.instruction(&Instruction::If(BlockType::Empty));
        }
        args(&mut f);
        f.instruction(&Instruction::Call(host));
        f.instruction(&Instruction::If(BlockType::Empty));
        if slot.returns {
            f.instruction(&Instruction::I32Const(0));
        }
        f.instruction(&Instruction::Return);
        f.instruction(&Instruction::End);
        if gated.is_some() {
            f.instruction(&Instruction::End);
        }
        args(&mut f);
        f.instruction(&Instruction::Call(copy));
        f.instruction(&Instruction::End);
        f
    }
}

impl Reencode for Binder<'_> {
    type Error = Infallible;

    fn function_index(&mut self, func: u32) -> Result<u32, Failed> {
        Ok(if func < self.plan.imported {
            func
        } else {
            func + self.added()
        })
    }

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), Failed> {
        utils::parse_type_section(self, types, section)?;
        for (params, results) in &self.plan.new_types {
            let params: Vec<_> = params
                .iter()
                .map(|t| self.val_type(*t))
                .collect::<Result<_, _>>()?;
            let results: Vec<_> = results
                .iter()
                .map(|t| self.val_type(*t))
                .collect::<Result<_, _>>()?;
            types.ty().function(params, results);
        }
        Ok(())
    }

    fn parse_import_section(
        &mut self,
        imports: &mut ImportSection,
        section: wasmparser::ImportSectionReader<'_>,
    ) -> Result<(), Failed> {
        utils::parse_import_section(self, imports, section)?;
        for slot in &self.plan.slots {
            imports.import(MODULE, slot.entry.name, EntityType::Function(slot.host_ty));
        }
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), Failed> {
        utils::parse_function_section(self, functions, section)?;
        for slot in &self.plan.slots {
            functions.function(slot.ty);
        }
        Ok(())
    }

    fn parse_function_body(&mut self, code: &mut CodeSection, func: FunctionBody<'_>) -> Result<(), Failed> {
        let index = self.plan.imported + self.next;
        self.next += 1;
        match self.plan.by_func.get(&index) {
            Some(&slot_no) => {
                code.function(&self.trampoline(slot_no, &self.plan.slots[slot_no]));
                Ok(())
            }
            None => utils::parse_function_body(self, code, func),
        }
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), Failed> {
        utils::parse_code_section(self, code, section)?;
        let wasm = self.wasm;
        for slot in &self.plan.slots {
            let body = FunctionBody::new(BinaryReader::new(&wasm[slot.body.clone()], slot.body.start));
            utils::parse_function_body(self, code, body)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
