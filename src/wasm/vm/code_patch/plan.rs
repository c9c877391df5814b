//! What a set of rewrites is: the instructions it finds and puts in place, the helpers and
//! globals it appends, and the names they reach each other and the module by.

use wasm_encoder::{Function, ValType};

use super::error::PatchError;
use super::index::ModuleIndex;

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
    pub wasm: &'a [u8],
    pub module: &'a ModuleIndex,
    pub patch: &'a Patch,
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
