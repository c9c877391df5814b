//! A tiny wasm module through which the shadows call wasmtime-wasi's own functions.
//!
//! wasmtime-wasi's functions find their arguments in the *calling instance's* exported memory,
//! so they cannot be called straight from the host. The proxy is a second instance in the
//! guest's Store that imports the original functions, re-exports them, and exports a small
//! memory of its own: a shadow copies the arguments (paths, one chunk of data) into it, calls
//! through, and copies the results back. Both instances share the Store's one WASI context,
//! so descriptors mean the same thing in either.

use wasm_encoder::{
    CodeSection, EntityType, ExportKind, ExportSection, Function, FunctionSection, ImportSection,
    Instruction, MemorySection, MemoryType, Module, TypeSection, ValType,
};
use wasmtime::{Engine, InstancePre, Linker, Memory, Store, TypedFunc};

use crate::wasm::session::GuestState;

const MODULE: &str = "wasi_snapshot_preview1";

/// Where things go in the proxy's memory.
pub const OUT: usize = 0;
pub const IOV: usize = 16;
pub const PATH_A: usize = 1024;
/// Longest path a shadowed call accepts (longer: ENAMETOOLONG).
pub const PATH_MAX: usize = 16 << 10;
pub const PATH_B: usize = PATH_A + PATH_MAX;
pub const DATA: usize = 64 << 10;
/// Largest piece of one write passed through at a time.
pub const CHUNK: usize = 1 << 20;
const PAGES: u64 = ((DATA + CHUNK) / 65536) as u64;

use ValType::{I32, I64};

/// The proxied functions and their parameters (all return an errno as i32).
const FUNCTIONS: &[(&str, &[ValType])] = &[
    ("fd_write", &[I32, I32, I32, I32]),
    ("fd_pwrite", &[I32, I32, I32, I64, I32]),
    ("fd_tell", &[I32, I32]),
    ("fd_filestat_set_size", &[I32, I64]),
    ("fd_readdir", &[I32, I32, I32, I64, I32]),
    ("fd_close", &[I32]),
    ("fd_renumber", &[I32, I32]),
    ("path_open", &[I32, I32, I32, I32, I32, I64, I64, I32, I32]),
    ("path_create_directory", &[I32, I32, I32]),
    ("path_remove_directory", &[I32, I32, I32]),
    ("path_unlink_file", &[I32, I32, I32]),
    ("path_link", &[I32, I32, I32, I32, I32, I32, I32]),
    ("path_symlink", &[I32, I32, I32, I32, I32]),
    ("path_rename", &[I32, I32, I32, I32, I32, I32]),
];

/// The proxy's binary: for each function, an import and an export that just forwards.
fn encode() -> Vec<u8> {
    let mut types = TypeSection::new();
    let mut imports = ImportSection::new();
    let mut funcs = FunctionSection::new();
    let mut exports = ExportSection::new();
    let mut code = CodeSection::new();
    let n = FUNCTIONS.len() as u32;
    for (i, (name, params)) in FUNCTIONS.iter().enumerate() {
        let i = i as u32;
        types.ty().function(params.iter().copied(), [I32]);
        imports.import(MODULE, name, EntityType::Function(i));
        funcs.function(i);
        exports.export(name, ExportKind::Func, n + i);
        let mut body = Function::new([]);
        for p in 0..params.len() as u32 {
            body.instruction(&Instruction::LocalGet(p));
        }
        body.instruction(&Instruction::Call(i));
        body.instruction(&Instruction::End);
        code.function(&body);
    }
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: PAGES,
        maximum: Some(PAGES),
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    exports.export("memory", ExportKind::Memory, 0);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&funcs)
        .section(&memories)
        .section(&exports)
        .section(&code);
    module.finish()
}

/// Compiles the proxy and links it to the original WASI functions in `wasi_only`.
pub fn prepare(engine: &Engine, wasi_only: &Linker<GuestState>) -> wasmtime::Result<InstancePre<GuestState>> {
    let module = wasmtime::Module::new(engine, encode())?;
    wasi_only.instantiate_pre(&module)
}

/// `path_open(dirfd, dirflags, path, path_len, oflags, rights, rights_inheriting, fdflags, fd_out)`.
type PathOpen = TypedFunc<(i32, i32, i32, i32, i32, i64, i64, i32, i32), i32>;
/// `path_link(old_fd, old_flags, old_path, old_len, new_fd, new_path, new_len)`.
type PathLink = TypedFunc<(i32, i32, i32, i32, i32, i32, i32), i32>;

/// The proxy instance of one Store.
#[derive(Clone)]
pub struct Proxy {
    pub memory: Memory,
    pub fd_write: TypedFunc<(i32, i32, i32, i32), i32>,
    pub fd_pwrite: TypedFunc<(i32, i32, i32, i64, i32), i32>,
    pub fd_tell: TypedFunc<(i32, i32), i32>,
    pub fd_filestat_set_size: TypedFunc<(i32, i64), i32>,
    pub fd_readdir: TypedFunc<(i32, i32, i32, i64, i32), i32>,
    pub fd_close: TypedFunc<i32, i32>,
    pub fd_renumber: TypedFunc<(i32, i32), i32>,
    pub path_open: PathOpen,
    pub path_create_directory: TypedFunc<(i32, i32, i32), i32>,
    pub path_remove_directory: TypedFunc<(i32, i32, i32), i32>,
    pub path_unlink_file: TypedFunc<(i32, i32, i32), i32>,
    pub path_link: PathLink,
    pub path_symlink: TypedFunc<(i32, i32, i32, i32, i32), i32>,
    pub path_rename: TypedFunc<(i32, i32, i32, i32, i32, i32), i32>,
}

impl Proxy {
    pub async fn instantiate(
        pre: &InstancePre<GuestState>,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Self> {
        let instance = pre.instantiate_async(&mut *store).await?;
        let memory = instance
            .get_memory(&mut *store, "memory")
            .ok_or_else(|| wasmtime::format_err!("the WASI proxy exports no memory"))?;
        Ok(Proxy {
            memory,
            fd_write: instance.get_typed_func(&mut *store, "fd_write")?,
            fd_pwrite: instance.get_typed_func(&mut *store, "fd_pwrite")?,
            fd_tell: instance.get_typed_func(&mut *store, "fd_tell")?,
            fd_filestat_set_size: instance.get_typed_func(&mut *store, "fd_filestat_set_size")?,
            fd_readdir: instance.get_typed_func(&mut *store, "fd_readdir")?,
            fd_close: instance.get_typed_func(&mut *store, "fd_close")?,
            fd_renumber: instance.get_typed_func(&mut *store, "fd_renumber")?,
            path_open: instance.get_typed_func(&mut *store, "path_open")?,
            path_create_directory: instance.get_typed_func(&mut *store, "path_create_directory")?,
            path_remove_directory: instance.get_typed_func(&mut *store, "path_remove_directory")?,
            path_unlink_file: instance.get_typed_func(&mut *store, "path_unlink_file")?,
            path_link: instance.get_typed_func(&mut *store, "path_link")?,
            path_symlink: instance.get_typed_func(&mut *store, "path_symlink")?,
            path_rename: instance.get_typed_func(&mut *store, "path_rename")?,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_proxy_module_is_valid_wasm() {
        let engine = wasmtime::Engine::default();
        let module = wasmtime::Module::new(&engine, super::encode()).expect("valid");
        assert_eq!(module.imports().len(), super::FUNCTIONS.len());
        assert_eq!(module.exports().len(), super::FUNCTIONS.len() + 1);
    }
}
