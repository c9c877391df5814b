//! Rewrites of the runtime's compiled code. The runtime cannot be rebuilt here (its sources
//! and toolchain are out of reach), yet a few of its compiled decisions must change (see
//! [`native_ints`]). A rewrite names a function, the exact instructions to find in it, how
//! often they occur, and what replaces them; the replacement is never longer than what it
//! replaces and is padded with `nop`, so every function index, data address and table entry
//! stays where it was. Helpers the rewrites call, and globals they keep, are appended after
//! the module's own, which moves nothing either. Memory images and saved states of the
//! runtime therefore stay valid across a rewrite.

mod append;
mod index;
pub mod native_ints;
mod rewrite;

use wasm_encoder::{Function, ValType};

pub use index::ModuleIndex;

/// One instruction as a rewrite names it: only the kinds the rewrites use, with calls by the
/// callee's name (a function of the module or a [`Helper`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    I32Const(i32),
    I64Const(i64),
    Call(&'static str),
    LocalGet(u32),
    LocalSet(u32),
    LocalTee(u32),
    I32Load(u64),
    I32Load8U(u64),
    I32Add,
    I32Eqz,
    I32Ne,
    I32LeU,
    I32GtU,
    I64Add,
    I64LtU,
    Select,
    Block,
    End,
    Br(u32),
    BrIf(u32),
}

/// A rewrite of one function: every run of `find` in it becomes `with`, and the function
/// must hold exactly `count` runs (so a different build of the function is refused, not
/// half-rewritten).
#[derive(Clone, Copy, Debug)]
pub struct Rewrite {
    pub function: &'static str,
    pub find: &'static [Op],
    pub with: &'static [Op],
    pub count: usize,
    /// What the change means, for the error a mismatch gives.
    pub why: &'static str,
}

/// A function appended to the module for the rewrites to call.
pub struct Helper {
    pub name: &'static str,
    pub params: &'static [ValType],
    pub results: &'static [ValType],
    pub body: fn(&Resolver<'_>) -> Result<Function, PatchError>,
}

/// A mutable `i32` global appended to the module, starting at 0.
pub struct Global {
    pub name: &'static str,
}

/// What a set of rewrites needs: its helpers and globals, and the rewrites themselves.
pub struct Patch {
    pub globals: &'static [Global],
    pub helpers: &'static [Helper],
    pub rewrites: &'static [Rewrite],
}

/// Indices and addresses by name, for helpers' bodies and rewrites' calls.
pub struct Resolver<'a> {
    wasm: &'a [u8],
    module: &'a ModuleIndex,
    patch: &'a Patch,
}

impl Resolver<'_> {
    /// The index of the module's function or helper `name`.
    pub fn func(&self, name: &'static str) -> Result<u32, PatchError> {
        if let Some(i) = self.patch.helpers.iter().position(|h| h.name == name) {
            return Ok(self.module.functions + i as u32);
        }
        self.module.function(name).ok_or(PatchError::NoFunction(name))
    }

    /// The index of the appended global `name`.
    pub fn global(&self, name: &'static str) -> Result<u32, PatchError> {
        let i = self.patch.globals.iter().position(|g| g.name == name);
        i.map(|i| self.module.globals + i as u32)
            .ok_or(PatchError::NoFunction(name))
    }

    /// The address of a NUL-terminated copy of `text` in the module's static data.
    pub fn c_string(&self, text: &'static str) -> Result<u32, PatchError> {
        self.module
            .c_string(self.wasm, text)
            .ok_or(PatchError::NoString(text))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("the runtime module could not be read: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error(
        "the runtime names no function {0} (or more than one): it is not the pinned runtime; reinstall it (delete the home's runtime folder and start again)"
    )]
    NoFunction(&'static str),
    #[error(
        "the runtime holds no string {0:?}: it is not the pinned runtime; reinstall it (delete the home's runtime folder and start again)"
    )]
    NoString(&'static str),
    #[error("the runtime has no function type a helper needs ({0}): a bug in the rewrite table")]
    NoType(&'static str),
    #[error(
        "{function} in the runtime holds {found} of the instructions to change ({why}), not {expected}: it is not the pinned runtime; reinstall it (delete the home's runtime folder and start again)"
    )]
    Mismatch {
        function: &'static str,
        why: &'static str,
        found: usize,
        expected: usize,
    },
    #[error("the runtime has no function, global or code section to add to: it is not the pinned runtime")]
    NoSection,
    #[error("the rewrite of {0} is longer than what it replaces (a bug in the rewrite table)")]
    TooLong(&'static str),
    #[error("the rewritten runtime is not a valid module: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}

/// The runtime with numpy's default integer made 64-bit for the user's code
/// ([`native_ints`]); a module without numpy (a plain CPython build) is returned as it is.
pub fn with_native_ints(wasm: &[u8]) -> Result<Vec<u8>, PatchError> {
    let module = ModuleIndex::read(wasm)?;
    if module.body_of(native_ints::MARKER).is_none() {
        return Ok(wasm.to_vec());
    }
    apply_to(wasm, &module, &native_ints::PATCH)
}

/// `wasm` with `patch` applied, validated.
#[cfg(test)]
pub fn apply(wasm: &[u8], patch: &Patch) -> Result<Vec<u8>, PatchError> {
    apply_to(wasm, &ModuleIndex::read(wasm)?, patch)
}

fn apply_to(wasm: &[u8], module: &ModuleIndex, patch: &Patch) -> Result<Vec<u8>, PatchError> {
    let names = Resolver { wasm, module, patch };
    let mut out = wasm.to_vec();
    for r in patch.rewrites {
        rewrite::in_place(&mut out, wasm, module, r, &names)?;
    }
    let out = append::helpers_and_globals(&out, module, patch, &names)?;
    wasmparser::validate(&out).map_err(PatchError::Invalid)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
