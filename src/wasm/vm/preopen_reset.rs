//! The runtime with wasi-libc's `__wasilibc_reset_preopens` exported. wasi-libc keeps the
//! table of preopened folders in linear memory, filled on first use: an image or a saved
//! state would otherwise carry the folders of the interpreter it was taken from, so a shared
//! folder added since would stay invisible (or one removed would be looked for). Calling the
//! reset after every start and restore makes the guest read its folders from the Store it
//! runs in, so no image, compiled module or state belongs to one set of shared folders.

use wasm_encoder::{ExportKind, ExportSection, Module, RawSection};
use wasmparser::{KnownCustom, Name, Parser, Payload};

/// The function the guest's libc offers for this (it frees the table and marks it unread).
pub const RESET: &str = "__wasilibc_reset_preopens";

#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    #[error("the runtime module could not be read: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error(
        "the runtime module names no function {RESET} (its libc cannot re-read its folders): \
         reinstall the pinned runtime (delete the home's runtime folder and start again)"
    )]
    Missing,
}

/// `wasm` with [`RESET`] exported under its own name; every other section as it was. A
/// module that already exports it is returned unchanged.
pub fn with_reset_export(wasm: &[u8]) -> Result<Vec<u8>, ResetError> {
    let index = function_named(wasm, RESET)?.ok_or(ResetError::Missing)?;
    let mut module = Module::new();
    let mut exported = false;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        if let Payload::ExportSection(reader) = &payload {
            let mut exports = ExportSection::new();
            for export in reader.clone() {
                let export = export?;
                if export.name == RESET {
                    return Ok(wasm.to_vec());
                }
                exports.export(export.name, kind(export.kind), export.index);
            }
            exports.export(RESET, ExportKind::Func, index);
            module.section(&exports);
            exported = true;
        } else if let Some((id, range)) = payload.as_section() {
            module.section(&RawSection {
                id,
                data: &wasm[range],
            });
        }
    }
    if !exported {
        // A module without exports has nothing to run; the runtime always has some.
        return Err(ResetError::Missing);
    }
    Ok(module.finish())
}

/// The index of the function the name section calls `name`.
fn function_named(wasm: &[u8], name: &str) -> Result<Option<u32>, ResetError> {
    for payload in Parser::new(0).parse_all(wasm) {
        let Payload::CustomSection(custom) = payload? else {
            continue;
        };
        let KnownCustom::Name(names) = custom.as_known() else {
            continue;
        };
        for subsection in names {
            let Name::Function(map) = subsection? else {
                continue;
            };
            for naming in map {
                let naming = naming?;
                if naming.name == name {
                    return Ok(Some(naming.index));
                }
            }
        }
    }
    Ok(None)
}

fn kind(kind: wasmparser::ExternalKind) -> ExportKind {
    use wasmparser::ExternalKind as K;
    match kind {
        K::Func | K::FuncExact => ExportKind::Func,
        K::Table => ExportKind::Table,
        K::Memory => ExportKind::Memory,
        K::Global => ExportKind::Global,
        K::Tag => ExportKind::Tag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module like the runtime in the parts that matter: a named, unexported function.
    fn module(names: bool) -> Vec<u8> {
        let mut text = String::from(
            "(module (func $keep (export \"run\") (result i32) i32.const 7)
                     (func $__wasilibc_reset_preopens))",
        );
        if !names {
            text = text.replace("$__wasilibc_reset_preopens", "");
        }
        wat::parse_str(&text).expect("the test module is valid text")
    }

    #[test]
    fn the_reset_is_exported_and_the_rest_kept() {
        let out = with_reset_export(&module(true)).expect("exported");
        let mut names = Vec::new();
        for payload in Parser::new(0).parse_all(&out) {
            if let Payload::ExportSection(r) = payload.expect("valid") {
                names.extend(r.into_iter().map(|e| e.expect("valid").name.to_string()));
            }
        }
        assert_eq!(names, ["run", RESET]);
        wasmparser::validate(&out).expect("still a valid module");
        assert_eq!(with_reset_export(&out).expect("again"), out, "exported once");
    }

    #[test]
    fn a_runtime_without_the_function_is_refused_with_what_to_do() {
        let err = with_reset_export(&module(false)).expect_err("no such function");
        assert!(err.to_string().contains("reinstall the pinned runtime"), "{err}");
    }
}
