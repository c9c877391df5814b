//! Rewrites of the runtime's compiled code. The runtime cannot be rebuilt here (its sources
//! and toolchain are out of reach), yet a few of its compiled decisions must change (see
//! [`native_ints`]). A rewrite names a function, the exact instructions to find in it, how
//! often they occur, and what replaces them; the replacement is never longer than what it
//! replaces and is padded with `nop`, so every function index, data address and table entry
//! stays where it was. Helpers the rewrites call, and globals they keep, are appended after
//! the module's own, which moves nothing either. Memory images and saved states of the
//! runtime therefore stay valid across a rewrite.

mod append;
mod error;
mod index;
pub mod native_ints;
mod plan;
mod rewrite;

pub use error::PatchError;
pub use index::ModuleIndex;
pub use plan::{Patch, Resolver};

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
