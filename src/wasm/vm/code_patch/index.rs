//! What the rewrites need to know of a module: each function's body and index by name, the
//! function types, how many functions and globals it has, where its sections lie, and the
//! bytes its data segments put in memory (to find the address of a C string).

use std::collections::HashMap;
use std::ops::Range;

use wasmparser::{
    CompositeInnerType, ConstExpr, DataKind, KnownCustom, Name, Operator, Parser, Payload, TypeRef, ValType,
};

use super::error::PatchError;

#[derive(Default)]
pub struct ModuleIndex {
    /// Function indices by name; a name given to several functions maps to none of them.
    pub by_name: HashMap<String, Option<u32>>,
    pub bodies: HashMap<u32, Range<usize>>,
    /// Each function type's index, by its (params, results).
    pub types: HashMap<(Vec<ValType>, Vec<ValType>), u32>,
    /// Imported and defined functions; imported and defined globals.
    pub functions: u32,
    pub globals: u32,
    /// The content (after the section's id and size) of these sections.
    pub function_section: Option<Range<usize>>,
    pub global_section: Option<Range<usize>>,
    pub code_section: Option<Range<usize>>,
    /// Active data segments at constant addresses: (address, bytes range in the module).
    data: Vec<(u32, Range<usize>)>,
}

impl ModuleIndex {
    pub fn read(wasm: &[u8]) -> Result<Self, PatchError> {
        let mut index = ModuleIndex::default();
        for payload in Parser::new(0).parse_all(wasm) {
            match payload? {
                Payload::TypeSection(reader) => index.read_types(reader)?,
                Payload::ImportSection(reader) => {
                    for import in reader.into_imports() {
                        match import?.ty {
                            TypeRef::Func(_) | TypeRef::FuncExact(_) => index.functions += 1,
                            TypeRef::Global(_) => index.globals += 1,
                            _ => {}
                        }
                    }
                }
                Payload::FunctionSection(reader) => index.function_section = Some(reader.range()),
                Payload::GlobalSection(reader) => {
                    index.global_section = Some(reader.range());
                    index.globals += reader.count();
                }
                Payload::CodeSectionStart { range, .. } => index.code_section = Some(range),
                Payload::CodeSectionEntry(body) => {
                    index.bodies.insert(index.functions, body.range());
                    index.functions += 1;
                }
                Payload::DataSection(reader) => {
                    for data in reader {
                        let data = data?;
                        if let DataKind::Active { offset_expr, .. } = data.kind
                            && let Some(at) = constant(&offset_expr)
                        {
                            index
                                .data
                                .push((at, data.range.end - data.data.len()..data.range.end));
                        }
                    }
                }
                Payload::CustomSection(custom) => index.read_names(custom.as_known())?,
                _ => {}
            }
        }
        Ok(index)
    }

    fn read_types(&mut self, reader: wasmparser::TypeSectionReader<'_>) -> Result<(), PatchError> {
        let mut at = 0u32;
        for group in reader {
            for ty in group?.into_types() {
                if let CompositeInnerType::Func(f) = &ty.composite_type.inner {
                    self.types
                        .entry((f.params().to_vec(), f.results().to_vec()))
                        .or_insert(at);
                }
                at += 1;
            }
        }
        Ok(())
    }

    fn read_names(&mut self, custom: KnownCustom<'_>) -> Result<(), PatchError> {
        let KnownCustom::Name(names) = custom else {
            return Ok(());
        };
        for subsection in names {
            let Name::Function(map) = subsection? else {
                continue;
            };
            for naming in map {
                let naming = naming?;
                self.by_name
                    .entry(naming.name.to_string())
                    .and_modify(|i| *i = None)
                    .or_insert(Some(naming.index));
            }
        }
        Ok(())
    }

    /// The index of the one function named `name`.
    pub fn function(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied().flatten()
    }

    pub fn body_of(&self, name: &str) -> Option<Range<usize>> {
        self.bodies.get(&self.function(name)?).cloned()
    }

    /// The memory address of the first NUL-terminated copy of `text` the data segments hold.
    pub fn c_string(&self, wasm: &[u8], text: &str) -> Option<u32> {
        let mut needle = vec![0u8];
        needle.extend_from_slice(text.as_bytes());
        needle.push(0);
        self.data.iter().find_map(|(address, range)| {
            let bytes = &wasm[range.clone()];
            let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice())?;
            Some(address + at as u32 + 1)
        })
    }
}

/// The value of a constant `i32.const N` expression.
fn constant(expr: &ConstExpr<'_>) -> Option<u32> {
    let mut ops = expr.get_operators_reader();
    match ops.read().ok()? {
        Operator::I32Const { value } => Some(value as u32),
        _ => None,
    }
}
