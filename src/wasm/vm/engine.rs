//! The one shared wasmtime `Engine`, the compiled interpreter, and its on-disk cache.
//!
//! Compiling the 105 MB snapshot takes tens of seconds, so it happens once: the native code is
//! serialised to `cache/` under a key made of the module's SHA-256, the wasmtime version and the
//! engine's compile settings, and later starts map it back with `Module::deserialize_file`,
//! which also lets instances share the module's memory image copy-on-write.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Engine, InstancePre, Linker, Module};

use super::compile::{
    DENSE_IMAGE_BYTES, EngineError, WASMTIME_VERSION, compile, engine_config, io, load_compiled, write_aside,
};
use super::state::GuestState;
use super::{door, guest_fs, kernels};
use crate::runtime::{Layout, RuntimeFiles, Stage};
use crate::sandbox::mounts::Mounts;

/// How often the epoch advances: the granularity of timeouts and of yielding to other tasks.
pub const TICK: Duration = Duration::from_millis(10);

/// Which image a compiled runtime starts its interpreters from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Image {
    /// The runtime as shipped: each interpreter runs the prelude as its first turn.
    Plain,
    /// A snapshot taken after the prelude and the warm-up imports.
    Warm {
        /// The warm-up's monotonic clock when the snapshot was taken: interpreters started from
        /// the image count on from here, so no value recorded during the warm-up lies ahead.
        clock_offset: Duration,
        /// The image's linear memory: what each interpreter holds from its start.
        memory_bytes: u64,
    },
}

/// The compiled interpreter, ready to instantiate many times.
pub struct Program {
    pub engine: Engine,
    pub pre: InstancePre<GuestState>,
    pub files: RuntimeFiles,
    pub metered: bool,
    pub image: Image,
    /// Names this image in saved states: a state is only applied to the image it came from.
    /// It names the image, not its compiled code: a state is memory pages, globals and a
    /// clock, which the compiler and its settings (fuel metering included) do not change.
    pub id: String,
    /// Names older versions gave this same image (they also carried the engine's settings),
    /// so the states they saved still come back.
    pub aliases: Vec<String>,
    /// The shared folders every interpreter of it preopens, after the fixed ones. Not part of
    /// the image: the guest re-reads its preopens after every start and restore.
    pub mounts: Mounts,
    /// The image's initial memory, read once when a state is first saved: saved states keep
    /// only the pages that differ from it.
    base: tokio::sync::OnceCell<Arc<Vec<u8>>>,
}

pub fn engine_key(engine: &Engine) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

fn cache_key(engine: &Engine, files: &RuntimeFiles) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!(
        "python-{}-{}-wasmtime-{}-dense{}-{:016x}.cwasm",
        &files.module_sha256[..16],
        module_form(),
        WASMTIME_VERSION,
        DENSE_IMAGE_BYTES >> 20,
        h.finish()
    )
}

/// What was done to the runtime before compiling it (`compile::instrumented`): part of the
/// compiled module's name.
pub(super) const MODULE_FORM: &str = "instrumented-reset-native-ints-6";

/// [`MODULE_FORM`] with the host kernels' binding (which names what it binds).
fn module_form() -> String {
    format!("{MODULE_FORM}-{}", super::kernels::binding())
}

/// Removes compiled modules of another form (from before the module was instrumented, or
/// before it exported libc's preopen reset): no version of this program loads them again
/// (about 290 MB each).
fn remove_outdated_forms(dir: &Path) {
    let current = format!("-{}-", module_form());
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("python-") && name.ends_with(".cwasm") && !name.contains(&current) {
            tracing::info!("removing an outdated compiled module {name}");
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Compiles the module to the cache unless a usable copy is there; returns the cache path.
fn precompile(engine: &Engine, layout: &Layout, files: &RuntimeFiles) -> Result<PathBuf, EngineError> {
    let dir = layout.cache_dir();
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let path = dir.join(cache_key(engine, files));
    if path.is_file() {
        return Ok(path);
    }
    write_aside(&path, &compile(engine, files)?)?;
    remove_outdated_forms(&dir);
    Ok(path)
}

/// The compiled interpreter: from the home's cache, else compiled now into the cache (a
/// bundle ships the warm image instead, see `warm_image::load_shipped`).
fn load(
    engine: &Engine,
    layout: &Layout,
    files: &RuntimeFiles,
    progress: &dyn Fn(Stage),
) -> Result<Module, EngineError> {
    let cached = layout.cache_dir().join(cache_key(engine, files));
    if cached.is_file() {
        progress(Stage::Loading);
        // SAFETY: the file is one this program serialised (written aside, then renamed into
        // our own cache folder); wasmtime also checks its header against this engine's settings.
        match unsafe { load_compiled(engine, &cached) } {
            Ok(m) => return Ok(m),
            Err(e) => {
                tracing::warn!(
                    "discarding an unusable compiled module {}: {e:#}",
                    cached.display()
                );
                std::fs::remove_file(&cached).map_err(io(&cached))?;
            }
        }
    }
    progress(Stage::Compiling);
    let path = precompile(engine, layout, files)?;
    // SAFETY: as above, freshly written by us.
    unsafe { load_compiled(engine, &path) }.map_err(|e| EngineError::Compile {
        path,
        message: format!("{e:#}"),
    })
}

/// WASI, the disk-quota shadows and the door, linked for `module`.
fn link(engine: &Engine, module: &Module) -> Result<InstancePre<GuestState>, EngineError> {
    let link = |e: wasmtime::Error| EngineError::Link(format!("{e:#}"));
    let mut linker: Linker<GuestState> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, GuestState::wasi).map_err(link)?;
    guest_fs::shadow::add_to_linker(&mut linker, GuestState::wasi_and_fs).map_err(link)?;
    door::add_to_linker(&mut linker, GuestState::inbox).map_err(link)?;
    kernels::add_to_linker(&mut linker, module, GuestState::deadline).map_err(link)?;
    linker.instantiate_pre(module).map_err(link)
}

impl Program {
    /// Builds the engine, loads (or compiles) the module, links WASI and the door, and starts
    /// the epoch ticker.
    pub fn load(
        layout: &Layout,
        files: RuntimeFiles,
        metered: bool,
        mounts: Mounts,
        progress: &dyn Fn(Stage),
    ) -> Result<Arc<Self>, EngineError> {
        let engine =
            Engine::new(&engine_config(metered)).map_err(|e| EngineError::Engine(format!("{e:#}")))?;
        let module = load(&engine, layout, &files, progress)?;
        let pre = link(&engine, &module)?;
        start_ticker(&engine);
        let id = format!("plain-{}", &files.module_sha256[..16]);
        let aliases = vec![format!("{id}-{:016x}", engine_key(&engine))];
        Ok(Arc::new(Program {
            engine,
            pre,
            files,
            metered,
            image: Image::Plain,
            id,
            aliases,
            mounts,
            base: Default::default(),
        }))
    }

    /// A program whose only image is `module` (a warm image a bundle ships), on an engine of
    /// its own: nothing else is loaded or compiled.
    pub fn from_image(
        engine: Engine,
        files: RuntimeFiles,
        module: &Module,
        image: Image,
        id: String,
        mounts: Mounts,
    ) -> Result<Arc<Self>, EngineError> {
        let pre = link(&engine, module)?;
        start_ticker(&engine);
        Ok(Arc::new(Program {
            engine,
            pre,
            files,
            metered: false,
            image,
            id,
            aliases: Vec::new(),
            mounts,
            base: Default::default(),
        }))
    }

    /// The same runtime started from another image of it, on the same engine.
    pub fn with_image(&self, module: &Module, image: Image, id: String) -> Result<Arc<Self>, EngineError> {
        Ok(Arc::new(Program {
            engine: self.engine.clone(),
            pre: link(&self.engine, module)?,
            files: self.files.clone(),
            metered: self.metered,
            image,
            id,
            aliases: Vec::new(),
            mounts: self.mounts.clone(),
            base: Default::default(),
        }))
    }

    /// Whether a saved state naming image `id` was made from this image.
    pub fn answers_to(&self, id: &str) -> bool {
        self.id == id || self.aliases.iter().any(|a| a == id)
    }

    /// The image's memory as instantiation leaves it, before any code runs.
    pub async fn base_memory(&self) -> Result<Arc<Vec<u8>>, EngineError> {
        self.base
            .get_or_try_init(|| async {
                let link = |e: wasmtime::Error| EngineError::Link(format!("{e:#}"));
                let state = GuestState {
                    wasi: wasmtime_wasi::WasiCtxBuilder::new().build_p1(),
                    fs: guest_fs::GuestFs::new(Arc::new(crate::disk::quota::DiskQuota::new(0)), Vec::new()),
                    limits: super::memory_budget::GuestLimiter::new(
                        super::memory_budget::WASM32_MAX_BYTES,
                        super::memory_budget::MemoryBudget::new(u64::MAX),
                    ),
                    inbox: Default::default(),
                    deadline: std::time::Instant::now() + Duration::from_secs(30),
                };
                let mut store = wasmtime::Store::new(&self.engine, state);
                store.limiter(|s| &mut s.limits);
                // Ticks beyond the current epoch, which wasmtime adds to it: u64::MAX would wrap
                // to a deadline already passed, and the first epoch check would trap.
                store.set_epoch_deadline(u64::MAX / 2);
                let instance = self.pre.instantiate_async(&mut store).await.map_err(link)?;
                let memory = instance
                    .get_memory(&mut store, "memory")
                    .ok_or_else(|| EngineError::Link("the module exports no memory".into()))?;
                Ok(Arc::new(memory.data(&store).to_vec()))
            })
            .await
            .cloned()
    }
}

/// One thread per engine advances the epoch; it holds only a weak handle, so it ends with
/// the engine.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    let _ = std::thread::Builder::new()
        .name("epoch-ticker".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        });
}
