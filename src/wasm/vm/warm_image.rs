//! Warm images: the interpreter snapshotted after the prelude and the warm-up imports
//! (numpy, pandas, matplotlib), so a sandbox starts with them imported, in milliseconds, and
//! all sandboxes share the image's pages copy-on-write.
//!
//! Building one runs the warm-up in a throwaway sandbox with the fixed folders every sandbox
//! gets (each interpreter re-reads libc's preopen table after it starts: `preopen_reset`),
//! checks it left no file open,
//! reads memory and globals through wasmtime-wizer's split API, and compiles the result once
//! into the cache. The cache entry's name is a hash of everything the image depends on; a
//! metadata file written last records the compiled file's size and SHA-256, so a partial entry
//! is detected when loaded and a damaged one just after; either is deleted and rebuilt.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use wasmtime::Val;
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

use super::build_dir::BuildDir;
use super::compile::{EngineError, in_background, write_aside};
use super::engine::{self, Image, Program};
use super::preopens::SessionConfig;
use super::session::Session;
use super::shipped::{self, WarmRecord};
use super::target::Target;
use super::warm_key::{WARM_UP, key, snapshot_key};
use crate::runtime::{Layout, RuntimeFiles};
use crate::sandbox::mounts::Mounts;

/// What the warm-up may take (it imports for about two seconds here).
const WARM_UP_TIME: Duration = Duration::from_secs(300);
/// Memory the warm-up's interpreter may grow to.
const WARM_UP_MEMORY: u64 = 2 << 30;

#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    #[error("the warm-up failed: {0}")]
    WarmUp(String),
    #[error("the warm-up left {0} file(s) open; an image cannot carry open files")]
    OpenFiles(usize),
    #[error("taking the snapshot failed: {0}")]
    Snapshot(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("could not start the warm-up interpreter: {0}")]
    Session(#[from] super::session::SessionError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WarmError + '_ {
    move |source| WarmError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the cache keeps beside a compiled image.
#[derive(Serialize, Deserialize)]
struct Meta {
    cwasm_sha256: String,
    /// Checked at every load (a partial file is caught at once); the SHA-256 is checked just
    /// after, in the background, since hashing the image takes a third of a second.
    #[serde(default)]
    cwasm_bytes: u64,
    clock_offset_ns: u64,
    memory_bytes: u64,
    build_seconds: f64,
    /// The snapshot's own SHA-256, before compiling. Two builds from the same inputs differ
    /// (the warm-up draws its hash secret and random state afresh), so saved states name the
    /// image by it: a state is never laid over another build's memory. Empty for an image
    /// cached before this was recorded, which keeps the name its saved states carry.
    #[serde(default)]
    snapshot_sha256: String,
}

/// A warm-up's snapshot, before any compile.
pub struct Snapshot {
    pub wasm: Vec<u8>,
    pub clock_offset: Duration,
    pub memory_bytes: u64,
    /// Names the image in saved states (see [`Meta::snapshot_sha256`]).
    pub sha256: String,
}

impl Snapshot {
    /// The image an interpreter starts from, and the name saved states give it.
    pub fn image_and_id(clock_offset_ns: u64, memory_bytes: u64, sha256: &str) -> (Image, String) {
        let image = Image::Warm {
            clock_offset: Duration::from_nanos(clock_offset_ns),
            memory_bytes,
        };
        (image, format!("warm-{}", sha256.get(..16).unwrap_or(sha256)))
    }
}

struct Paths {
    cwasm: PathBuf,
    meta: PathBuf,
}

fn paths(layout: &Layout, plain: &Program) -> Paths {
    let base = layout.cache_dir().join(format!("warm-{}", key(plain)));
    Paths {
        cwasm: base.with_extension("cwasm"),
        meta: base.with_extension("json"),
    }
}

fn sha256_of(path: &Path) -> Result<String, WarmError> {
    crate::runtime::file_digest(path)
        .map(|(sha, _)| sha)
        .map_err(|e| WarmError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })
}

/// The cached image, if a whole and intact one is there; a damaged one is deleted.
fn load_cached(plain: &Program, p: &Paths) -> Option<Arc<Program>> {
    let raw = std::fs::read(&p.meta).ok()?;
    let damaged = |why: &str| {
        discard(p, why);
        None
    };
    let Ok(meta) = serde_json::from_slice::<Meta>(&raw) else {
        return damaged("its metadata does not parse");
    };
    if !whole(p, &meta) {
        return damaged("its size does not match the one recorded when it was built");
    }
    // SAFETY: the file is one this program serialised into its own cache, and its SHA-256
    // matches the one recorded when it was written.
    let module = match unsafe { super::compile::load_compiled(&plain.engine, &p.cwasm) } {
        Ok(m) => m,
        Err(e) => return damaged(&format!("{e:#}")),
    };
    // The snapshot's own digest names the image whatever compiled it; an image cached
    // before it was recorded keeps the name its saved states carry.
    let (image, id) = match meta.snapshot_sha256.get(..16) {
        Some(_) => Snapshot::image_and_id(meta.clock_offset_ns, meta.memory_bytes, &meta.snapshot_sha256),
        None => {
            let (image, _) = Snapshot::image_and_id(meta.clock_offset_ns, meta.memory_bytes, "");
            (image, format!("warm-{}", key(plain)))
        }
    };
    match plain.with_image(&module, image, id) {
        Ok(rt) => Some(rt),
        Err(e) => damaged(&e.to_string()),
    }
}

/// Whether a cached image for `plain` looks usable (its metadata and a file of the recorded
/// size): loading it is then milliseconds away, building it a minute or more.
pub fn is_cached(plain: &Program, layout: &Layout) -> bool {
    let p = paths(layout, plain);
    recorded(&p).is_some_and(|meta| whole(&p, &meta))
}

/// The cache entry's record, when there is one that parses.
fn recorded(p: &Paths) -> Option<Meta> {
    std::fs::read(&p.meta)
        .ok()
        .and_then(|b| serde_json::from_slice::<Meta>(&b).ok())
}

/// Whether the compiled image has the size recorded when it was written.
fn whole(p: &Paths, meta: &Meta) -> bool {
    std::fs::metadata(&p.cwasm).is_ok_and(|m| m.len() == meta.cwasm_bytes)
}

/// A cached warm image of another key (an earlier build: an upgrade, another prelude) that
/// saved states name `id`, loaded beside `plain`, if it is still in the cache whole.
pub fn older(plain: &Program, layout: &Layout, id: &str) -> Option<Arc<Program>> {
    let sha = id.strip_prefix("warm-").filter(|s| s.len() == 16)?;
    let entries = std::fs::read_dir(layout.cache_dir()).ok()?;
    entries.flatten().find_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let stem = name.strip_prefix("warm-")?.strip_suffix(".json")?;
        let base = layout.cache_dir().join(format!("warm-{stem}"));
        let p = Paths {
            cwasm: base.with_extension("cwasm"),
            meta: base.with_extension("json"),
        };
        let meta = recorded(&p)?;
        (meta.snapshot_sha256.get(..16) == Some(sha))
            .then(|| load_cached(plain, &p))
            .flatten()
    })
}

/// Whether the cached image for `plain` still has the SHA-256 it was built with; a damaged
/// one is deleted (so the next `build_or_load` rebuilds it).
pub fn verify_cached(plain: &Program, layout: &Layout) -> bool {
    let p = paths(layout, plain);
    let Some(meta) = recorded(&p) else {
        return false;
    };
    if sha256_of(&p.cwasm).is_ok_and(|sha| sha == meta.cwasm_sha256) {
        return true;
    }
    discard(&p, "it does not match its SHA-256");
    false
}

/// Deletes a cached image that cannot be used, saying why, so the next start rebuilds it.
fn discard(p: &Paths, why: &str) {
    tracing::warn!(
        "the cached warm image {} is unusable ({why}); rebuilding it",
        p.cwasm.display()
    );
    let _ = std::fs::remove_file(&p.meta);
    let _ = std::fs::remove_file(&p.cwasm);
}

/// The warm image for `plain`: from the cache, or built now (about a minute of compiling).
pub async fn build_or_load(plain: &Arc<Program>, layout: &Layout) -> Result<Arc<Program>, WarmError> {
    let p = paths(layout, plain);
    tracing::debug!("warm image cache entry: {}", p.meta.display());
    let ready = match load_cached(plain, &p) {
        Some(rt) => rt,
        None => {
            let dir = BuildDir::new(layout);
            build(plain, layout, &dir.0, &p, Instant::now()).await?
        }
    };
    let current = format!("warm-{}", key(plain));
    super::cache_sweep::remove_old_warm_images(&layout.cache_dir(), &current, std::time::SystemTime::now());
    Ok(ready)
}

/// Runs the warm-up in a throwaway sandbox under `layout`'s scratch folder and takes its
/// snapshot (for a bundle, which compiles it for any CPU of its architecture).
pub async fn take_snapshot(plain: &Arc<Program>, layout: &Layout) -> Result<Snapshot, WarmError> {
    let dir = BuildDir::new(layout);
    snapshot(plain, &dir.0).await
}

async fn snapshot(plain: &Arc<Program>, dir: &Path) -> Result<Snapshot, WarmError> {
    let cfg = SessionConfig::throwaway(dir, WARM_UP_MEMORY).map_err(io(dir))?;
    let mut session = Session::start(plain, &cfg).await?;
    let out = session
        .turn(WARM_UP, WARM_UP_TIME, None, &CancellationToken::new())
        .await;
    if out.status != Ok(0) {
        return Err(WarmError::WarmUp(format!(
            "{:?}: {}",
            out.status,
            out.stderr.text.trim()
        )));
    }
    let opened = session.store.data().fs.opened();
    if opened > 0 {
        return Err(WarmError::OpenFiles(opened));
    }
    let clock_offset = session.clock_elapsed();
    let memory_bytes = session.memory_bytes() as u64;
    let original = super::compile::with_reset(&plain.files)?;
    let wizer = Wizer::new();
    let (cx, _) = wizer
        .instrument(&original)
        .map_err(|e| WarmError::Snapshot(format!("{e:#}")))?;
    let snapshot = wizer
        .snapshot(&cx, &mut Snapshotting(&mut session))
        .await
        .map_err(|e| WarmError::Snapshot(format!("{e:#}")))?;
    drop(session);
    drop(original);
    // Exports its globals and memory as the plain module does, for saved states.
    let (_, snapshot) = Wizer::new()
        .instrument(&snapshot)
        .map_err(|e| WarmError::Snapshot(format!("instrumenting the image: {e:#}")))?;
    Ok(Snapshot {
        sha256: hex::encode(Sha256::digest(&snapshot)),
        wasm: snapshot,
        clock_offset,
        memory_bytes,
    })
}

async fn build(
    plain: &Arc<Program>,
    layout: &Layout,
    dir: &Path,
    p: &Paths,
    started: Instant,
) -> Result<Arc<Program>, WarmError> {
    let Snapshot {
        wasm: snapshot,
        clock_offset,
        memory_bytes,
        sha256: snapshot_sha256,
    } = snapshot(plain, dir).await?;
    let engine = plain.engine.clone();
    let compiled = in_background("warm-image-compile", move || engine.precompile_module(&snapshot))
        .await
        .ok_or_else(|| WarmError::Snapshot("the compile thread ended without a result".into()))?
        .map_err(|e| WarmError::Snapshot(format!("compiling the image: {e:#}")))?;
    let cache = layout.cache_dir();
    std::fs::create_dir_all(&cache).map_err(io(&cache))?;
    // Written aside and renamed, the metadata last: a crash leaves no entry that looks whole.
    write_aside(&p.cwasm, &compiled)?;
    let meta = Meta {
        cwasm_sha256: hex::encode(Sha256::digest(&compiled)),
        cwasm_bytes: compiled.len() as u64,
        clock_offset_ns: u64::try_from(clock_offset.as_nanos()).unwrap_or(u64::MAX),
        memory_bytes,
        build_seconds: started.elapsed().as_secs_f64(),
        snapshot_sha256,
    };
    let json = serde_json::to_vec(&meta).map_err(|e| WarmError::Snapshot(e.to_string()))?;
    write_aside(&p.meta, &json)?;
    tracing::info!(
        "warm image built in {:.1} s ({} MiB of memory)",
        meta.build_seconds,
        memory_bytes >> 20
    );
    load_cached(plain, p).ok_or_else(|| WarmError::Snapshot("the image just built did not load".into()))
}

/// The file name of the warm image a bundle for `target` ships for `files`: its snapshot, and
/// the settings it was compiled with (a cached image compiled under other settings is not
/// shipped, and a server whose settings differ does not look for it).
fn shipped_name(files: &RuntimeFiles, engine: &wasmtime::Engine, target: &Target) -> String {
    format!(
        "warm-{}-{}-{:016x}-portable.cwasm",
        snapshot_key(&files.module_sha256),
        target.arch,
        engine::engine_key(engine)
    )
}

/// Puts the warm image, compiled for the baseline CPU, into `dir` (a bundle's runtime folder)
/// with its record; for `cargo xtask bundle`. `plain` runs the warm-up; `files` are the
/// bundle's runtime. Made once into `cache` (a minute or two) and taken from there while it
/// still checks out. Returns the file in `dir`.
pub async fn ship(
    plain: &Arc<Program>,
    layout: &Layout,
    files: &RuntimeFiles,
    target: &Target,
    dir: &Path,
    cache: &Path,
) -> Result<PathBuf, WarmError> {
    let engine = shipped::portable_engine(target)?;
    let cached = cache.join(shipped_name(files, &engine, target));
    let key = snapshot_key(&files.module_sha256);
    if shipped::checked_file(files, &cached, &key).is_err() {
        std::fs::create_dir_all(cache).map_err(io(cache))?;
        let snap = take_snapshot(plain, layout).await?;
        let wasm = snap.wasm;
        let compiled = in_background("warm-image-compile", move || engine.precompile_module(&wasm))
            .await
            .ok_or_else(|| WarmError::Snapshot("the compile thread ended without a result".into()))?
            .map_err(|e| WarmError::Snapshot(format!("compiling the image: {e:#}")))?;
        let warm = WarmRecord {
            snapshot_key: key,
            snapshot_sha256: snap.sha256,
            clock_offset_ns: u64::try_from(snap.clock_offset.as_nanos()).unwrap_or(u64::MAX),
            memory_bytes: snap.memory_bytes,
        };
        shipped::write_with_record(files, &cached, &compiled, warm)?;
    }
    Ok(shipped::place(&cached, dir)?)
}

/// The warm image the bundle ships for `files`, checked (size, SHA-256, what it was made
/// from) and mapped, as the whole program: nothing is compiled. `None` without a bundle, or
/// (with a warning saying why) when the one there cannot be used. Its sandboxes see `mounts`.
pub fn load_shipped(files: &RuntimeFiles, mounts: Mounts) -> Option<Arc<Program>> {
    let target = Target::host()?;
    let portable = shipped::portable_engine(&target).ok()?;
    let path = crate::runtime::beside_binary(crate::runtime::BUNDLED_RUNTIME_DIR)?
        .join(shipped_name(files, &portable, &target));
    if !path.is_file() {
        return None;
    }
    let refused = |why: String| {
        tracing::warn!(
            "not using the warm image shipped at {}: {why}. Compiling the interpreter and building the image instead (a few minutes, once)",
            path.display()
        );
        None
    };
    let engine = match wasmtime::Engine::new(&super::compile::engine_config(false)) {
        Ok(e) => e,
        Err(e) => return refused(format!("{e:#}")),
    };
    let warm = match shipped::checked_file(files, &path, &snapshot_key(&files.module_sha256)) {
        Ok(r) => r.warm,
        Err(why) => return refused(why.to_string()),
    };
    let module = match shipped::map(&engine, &path) {
        Ok(m) => m,
        Err(why) => return refused(why.to_string()),
    };
    let (image, id) = Snapshot::image_and_id(warm.clock_offset_ns, warm.memory_bytes, &warm.snapshot_sha256);
    match Program::from_image(engine, files.clone(), &module, image, id, mounts) {
        Ok(p) => Some(p),
        Err(e) => refused(e.to_string()),
    }
}

/// The warm-up interpreter as wasmtime-wizer reads it: the instrumented module exports every
/// memory and mutable global under the names the snapshot asks for.
struct Snapshotting<'a>(&'a mut Session);

impl InstanceState for Snapshotting<'_> {
    async fn global_get(&mut self, name: &str, _type_hint: ValType) -> SnapshotVal {
        let s = &mut *self.0;
        let value = s
            .instance
            .get_global(&mut s.store, name)
            .map(|g| g.get(&mut s.store));
        match value {
            Some(Val::I32(v)) => SnapshotVal::I32(v),
            Some(Val::I64(v)) => SnapshotVal::I64(v),
            Some(Val::F32(v)) => SnapshotVal::F32(v),
            Some(Val::F64(v)) => SnapshotVal::F64(v),
            Some(Val::V128(v)) => SnapshotVal::V128(v.as_u128()),
            // The instrumented module exports exactly the globals wizer asks for; a missing
            // one would mean another module, and the image must not be built from it.
            _ => panic!("the instrumented module has no numeric global export {name}"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        let s = &mut *self.0;
        match s.instance.get_memory(&mut s.store, name) {
            Some(m) => contents(m.data(&s.store)),
            None => panic!("the instrumented module has no memory export {name}"),
        }
    }
}
