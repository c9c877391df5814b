//! A compiled module a bundle ships (the warm image, see `warm_image.rs`): compiled once, when
//! the bundle is built, for the baseline CPU of its architecture, so it loads on any machine
//! the bundle is for and a first start has nothing to compile (Cranelift needs most of a
//! minute on two cores).
//!
//! It lies in the bundle's `runtime/` folder beside a record of its size, SHA-256 and what it
//! was made from, and is used where it lies (nothing is copied into the home). The record is
//! checked before wasmtime maps the file, so native code never runs from bytes that changed
//! since the bundle was built; wasmtime then checks that this CPU and the engine's settings
//! suit the code (fuel metering, for one, does not). Whatever fails is left alone, and the
//! server prepares the interpreter in the home as it does without a bundle.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

use super::compile::{EngineError, WASMTIME_VERSION, io, portable_config, write_aside};
use super::target::Target;
use crate::runtime::{RuntimeFiles, file_digest};

/// What the bundle records beside a compiled module.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub(super) struct Record {
    cwasm_sha256: String,
    cwasm_bytes: u64,
    /// The runtime module it was compiled from, and by which wasmtime: a module for another
    /// runtime or wasmtime is foreign, whatever its hash.
    module_sha256: String,
    wasmtime: String,
    /// What its snapshot was made from and holds.
    pub warm: WarmRecord,
}

/// What a shipped warm image's record adds.
#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
pub(super) struct WarmRecord {
    /// The runtime, prelude, warm-up and layout it was made from (`warm_image::snapshot_key`).
    pub snapshot_key: String,
    pub snapshot_sha256: String,
    pub clock_offset_ns: u64,
    pub memory_bytes: u64,
}

fn record_path(cwasm: &Path) -> PathBuf {
    cwasm.with_extension("json")
}

/// Puts `cached` and its record into `dir` (linked where it can be); the file in `dir`.
pub(super) fn place(cached: &Path, dir: &Path) -> Result<PathBuf, EngineError> {
    let path = dir.join(cached.file_name().unwrap_or_default());
    for (from, to) in [
        (cached.to_path_buf(), path.clone()),
        (record_path(cached), record_path(&path)),
    ] {
        let _ = std::fs::remove_file(&to);
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(io(&to))?;
        }
    }
    Ok(path)
}

/// The engine that compiles for the baseline CPU of `target`.
pub(super) fn portable_engine(target: &Target) -> Result<Engine, EngineError> {
    let config = portable_config(target, false)?;
    Engine::new(&config).map_err(|e| EngineError::Engine(format!("{e:#}")))
}

/// The engine for this platform's shipped code.
#[cfg(test)]
fn host_portable_engine() -> Result<Engine, EngineError> {
    let target = Target::host().ok_or_else(|| {
        EngineError::Engine(format!(
            "no baseline CPU is known for {} on {}",
            std::env::consts::ARCH,
            std::env::consts::OS
        ))
    })?;
    portable_engine(&target)
}

/// Writes `compiled` to `path` and its record beside it, the record last: a file without one
/// is never taken for whole.
pub(super) fn write_with_record(
    files: &RuntimeFiles,
    path: &Path,
    compiled: &[u8],
    warm: WarmRecord,
) -> Result<(), EngineError> {
    let record = Record {
        cwasm_sha256: hex::encode(Sha256::digest(compiled)),
        cwasm_bytes: compiled.len() as u64,
        module_sha256: files.module_sha256.clone(),
        wasmtime: WASMTIME_VERSION.into(),
        warm,
    };
    let json = serde_json::to_vec_pretty(&record).map_err(|e| EngineError::Engine(e.to_string()))?;
    let rec = record_path(path);
    let _ = std::fs::remove_file(&rec);
    write_aside(path, compiled)?;
    write_aside(&rec, &json)
}

/// Why a shipped module was not used.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    #[error("its record is missing or unreadable ({0})")]
    Record(String),
    #[error("it was made from another runtime, prelude or warm-up, or by another wasmtime")]
    Foreign,
    #[error("it is {found} bytes, not the {expected} recorded")]
    Size { found: u64, expected: u64 },
    #[error("its SHA-256 is {found}, not the {expected} recorded")]
    Digest { found: String, expected: String },
    #[error("{0}")]
    Io(String),
    #[error("wasmtime refused it: {0}")]
    Wasmtime(String),
}

/// The module at `path`, once [`checked_file`] passed.
pub(super) fn map(engine: &Engine, path: &Path) -> Result<Module, Refused> {
    // SAFETY: the file has the SHA-256 recorded when the bundle compiled it, so these are the
    // bytes wasmtime wrote; wasmtime checks its header against this engine and CPU.
    unsafe { super::compile::load_compiled(engine, path) }.map_err(|e| Refused::Wasmtime(format!("{e:#}")))
}

/// The record of `path` if it is the whole file the record describes, made from this runtime
/// and the snapshot named `warm_key`.
pub(super) fn checked_file(files: &RuntimeFiles, path: &Path, warm_key: &str) -> Result<Record, Refused> {
    let raw = std::fs::read(record_path(path)).map_err(|e| Refused::Record(e.to_string()))?;
    let record: Record = serde_json::from_slice(&raw).map_err(|e| Refused::Record(e.to_string()))?;
    if record.module_sha256 != files.module_sha256
        || record.wasmtime != WASMTIME_VERSION
        || record.warm.snapshot_key != warm_key
    {
        return Err(Refused::Foreign);
    }
    let found = std::fs::metadata(path)
        .map_err(|e| Refused::Io(e.to_string()))?
        .len();
    if found != record.cwasm_bytes {
        return Err(Refused::Size {
            found,
            expected: record.cwasm_bytes,
        });
    }
    let (sha, _) = file_digest(path).map_err(|e| Refused::Io(e.to_string()))?;
    if sha != record.cwasm_sha256 {
        return Err(Refused::Digest {
            found: sha,
            expected: record.cwasm_sha256,
        });
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::vm::compile::{compile, engine_config};

    /// A runtime whose module is about the smallest there is (with the libc function every
    /// runtime is checked for): compiling it takes milliseconds.
    fn tiny_runtime(dir: &Path) -> RuntimeFiles {
        let wasm =
            wat::parse_str("(module (func $__wasilibc_reset_preopens) (func (export \"run\")))").unwrap();
        let module = dir.join("tiny.wasm");
        std::fs::write(&module, &wasm).unwrap();
        RuntimeFiles {
            dir: dir.to_path_buf(),
            module,
            module_sha256: hex::encode(Sha256::digest(&wasm)),
            lib_dir: dir.join("lib"),
            mpl_data: dir.join("mpl-data"),
            python_version: "3.15".into(),
            packages: Vec::new(),
            libraries: Vec::new(),
        }
    }

    fn warm(key: &str) -> WarmRecord {
        WarmRecord {
            snapshot_key: key.into(),
            snapshot_sha256: "0".repeat(64),
            clock_offset_ns: 1,
            memory_bytes: 1 << 20,
        }
    }

    fn refusal(engine: &Engine, files: &RuntimeFiles, path: &Path, key: &str) -> String {
        match checked_file(files, path, key).and_then(|_| map(engine, path)) {
            Ok(_) => panic!("{} was accepted", path.display()),
            Err(why) => why.to_string(),
        }
    }

    /// A damaged or mismatched shipped image is refused before wasmtime maps it, so it never
    /// runs; the server then prepares the interpreter in the home.
    #[test]
    fn only_the_whole_file_its_record_describes_is_mapped() {
        let dir = std::env::temp_dir().join(format!("mcs-shipped-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = tiny_runtime(&dir);
        let path = dir.join("warm-k-portable.cwasm");
        let compiled = compile(&host_portable_engine().unwrap(), &files).unwrap();
        write_with_record(&files, &path, &compiled, warm("k")).unwrap();
        let native = Engine::new(&engine_config(false)).unwrap();
        assert!(
            checked_file(&files, &path, "k")
                .and_then(|_| map(&native, &path))
                .is_ok(),
            "code for the baseline CPU loads in this machine's engine"
        );

        let metered = Engine::new(&engine_config(true)).unwrap();
        let why = refusal(&metered, &files, &path, "k");
        assert!(
            why.starts_with("wasmtime refused it"),
            "fuel metering changes the code: {why}"
        );

        let why = refusal(&native, &files, &path, "another prelude");
        assert!(why.contains("another runtime, prelude"), "{why}");
        let mut other = files.clone();
        other.module_sha256 = "0".repeat(64);
        let why = refusal(&native, &other, &path, "k");
        assert!(why.contains("another runtime"), "{why}");

        let mut flipped = compiled.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let why = refusal(&native, &files, &path, "k");
        assert!(why.contains("SHA-256"), "{why}");

        std::fs::write(&path, &compiled[..compiled.len() - 1]).unwrap();
        let why = refusal(&native, &files, &path, "k");
        assert!(why.contains("not the") && why.contains("recorded"), "{why}");

        std::fs::write(&path, &compiled).unwrap();
        std::fs::remove_file(record_path(&path)).unwrap();
        let why = refusal(&native, &files, &path, "k");
        assert!(why.contains("record is missing"), "{why}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
