//! What compiled code depends on: the engine's settings, wasmtime's version and the module
//! compiled (the runtime, instrumented for snapshots). The cache in the home and the module a
//! bundle ships are both named from these, so they live below both.

use std::path::{Path, PathBuf};

use wasmtime::{Config, Engine, Module};

use super::target::Target;
use crate::runtime::RuntimeFiles;

/// Kept in step with the `=` pin in Cargo.toml; part of the cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// Largest memory image wasmtime maps copy-on-write however sparse it is; part of the cache key.
pub const DENSE_IMAGE_BYTES: u64 = 2 << 30;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("could not set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("could not compile the interpreter {path}: {message}")]
    Compile { path: PathBuf, message: String },
    #[error("could not link the interpreter: {0}")]
    Link(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Engine settings. Fuel changes the generated code, so it is part of the cache key.
pub fn engine_config(metered: bool) -> Config {
    let mut c = Config::new();
    // The runtime uses the standard exception-handling proposal (docs/RUNTIME-INTERFACE.md, "Engine settings").
    c.wasm_exceptions(true);
    c.epoch_interruption(true);
    c.consume_fuel(metered);
    // 8 MiB lets deep-but-legal recursion in C (json, re) finish; Python guards its own stack
    // and raises RecursionError before this is reached.
    c.max_wasm_stack(8 << 20);
    c.async_stack_size(10 << 20);
    c.memory_init_cow(true);
    // A warm image's memory is one large initialised range; mapping it copy-on-write (rather
    // than copying it into every sandbox) needs wasmtime to treat it as dense.
    c.memory_guaranteed_dense_image_size(DENSE_IMAGE_BYTES);
    c.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // The map from native code back to wasm offsets serves only wasm backtraces, which no one
    // reads (a trap is told by its code, Python's errors by Python): without it the compiled
    // interpreter, and so the bundle, is smaller by about a tenth.
    c.generate_address_map(false);
    c.parallel_compilation(true);
    c
}

pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EngineError + '_ {
    move |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The runtime module with its memories and mutable globals exported, as the warm-image
/// snapshot reads them (wasmtime-wizer's instrumentation; it only adds exports), and libc's
/// preopen reset (see `preopen_reset`). Every
/// interpreter runs this module, so a warm image needs no second compile of the runtime.
pub fn instrumented(files: &RuntimeFiles) -> Result<Vec<u8>, EngineError> {
    let (_, out) = wasmtime_wizer::Wizer::new()
        .instrument(&with_reset(files)?)
        .map_err(|e| EngineError::Compile {
            path: files.module.clone(),
            message: format!("instrumenting for snapshots failed: {e:#}"),
        })?;
    Ok(out)
}

/// The runtime module as every interpreter and every image runs it: numpy's default integer
/// made 64-bit (see `code_patch::native_ints`), libc's preopen reset exported (see
/// `preopen_reset`), and BLAS's matrix products bound to host kernels (see `kernels`).
pub fn with_reset(files: &RuntimeFiles) -> Result<Vec<u8>, EngineError> {
    let wasm = std::fs::read(&files.module).map_err(io(&files.module))?;
    let failed = |message: String| EngineError::Compile {
        path: files.module.clone(),
        message,
    };
    let wasm = super::code_patch::with_native_ints(&wasm).map_err(|e| failed(e.to_string()))?;
    let wasm = super::preopen_reset::with_reset_export(&wasm).map_err(|e| failed(e.to_string()))?;
    Ok(match super::kernels::bind(&wasm) {
        Ok(bound) => bound,
        Err(e) => {
            tracing::warn!("the runtime's matrix products stay in WebAssembly: {e}");
            wasm
        }
    })
}

/// The runtime compiled by `engine`, serialised: the long step (most of a minute on two cores).
pub fn compile(engine: &Engine, files: &RuntimeFiles) -> Result<Vec<u8>, EngineError> {
    engine
        .precompile_module(&instrumented(files)?)
        .map_err(|e| EngineError::Compile {
            path: files.module.clone(),
            message: format!("{e:#}"),
        })
}

/// A compiled module from its file: mapped where the system allows it (no copy, pages shared
/// between processes), else read into memory. Wine, some network drives and antivirus hooks
/// refuse to change a mapped file's pages to read-only or executable; the same bytes read
/// into memory work. An error is the mapping's, which says more.
///
/// # Safety
/// `path` must hold code wasmtime serialised: callers check its record or cache key first.
pub unsafe fn load_compiled(engine: &Engine, path: &Path) -> Result<Module, wasmtime::Error> {
    // SAFETY: as the caller promises.
    let mapped = match unsafe { Module::deserialize_file(engine, path) } {
        Ok(m) => return Ok(m),
        Err(e) => e,
    };
    let Ok(bytes) = std::fs::read(path) else {
        return Err(mapped);
    };
    // SAFETY: the same bytes.
    match unsafe { Module::deserialize(engine, &bytes) } {
        Ok(m) => {
            tracing::info!(
                "{} could not be mapped ({mapped:#}); it was loaded into memory instead",
                path.display()
            );
            Ok(m)
        }
        Err(_) => Err(mapped),
    }
}

/// Writes `bytes` to `path` aside and renames it into place, so a crash mid-write never leaves
/// a cut-off file under the name, and two writers never mix their bytes.
pub fn write_aside(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    crate::host::retry::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path)(e)
    })
}

/// The engine settings for code that must run on any CPU of `target`'s architecture: the
/// target named explicitly, so wasmtime leaves out the features it would detect on this
/// machine (and can compile for another platform). Measured here: CPU-bound Python runs as
/// fast as on natively tuned code.
pub fn portable_config(target: &Target, metered: bool) -> Result<Config, EngineError> {
    let mut c = engine_config(metered);
    c.target(target.triple)
        .map_err(|e| EngineError::Engine(format!("compiling for {}: {e:#}", target.triple)))?;
    Ok(c)
}

/// Runs `work` (a compile nobody is waiting on) on a thread of its own at a lower priority, so
/// the calls people wait for, and the saves at shutdown, get the cores first. Not tokio's
/// blocking pool: a lowered pool thread would slow later work, and the runtime waits for its
/// threads at exit, where a compile cut off by shutdown should simply end with the process.
pub async fn in_background<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name(name.to_string()).spawn(move || {
        // On Linux a nice value belongs to one thread (and the threads it starts, such as the
        // compiler's pool on first use); elsewhere it would lower the whole process.
        #[cfg(target_os = "linux")]
        // SAFETY: plain system calls on the calling thread's own id.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
        }
        let _ = tx.send(work());
    });
    match spawned {
        Ok(_) => rx.await.ok(),
        Err(e) => {
            tracing::warn!("could not start the {name} thread: {e}");
            None
        }
    }
}
