//! The compiled interpreter a bundle ships: compiled once, when the bundle is built, for the
//! baseline CPU of its architecture, so it loads on any machine the bundle is for and a first
//! start has nothing to compile (Cranelift needs most of a minute on two cores).
//!
//! It lies in the bundle's `runtime/` folder beside a record of its size and SHA-256, and is
//! used where it lies (nothing is copied into the home). The record is checked before wasmtime
//! maps the file, so native code never runs from bytes that changed since the bundle was
//! built; wasmtime then checks that this CPU and the engine's settings suit the code (fuel
//! metering, for one, does not). Whatever fails is left alone, and the interpreter is compiled
//! into the home as it is without a bundle.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

use super::compile::{
    DENSE_IMAGE_BYTES, EngineError, WASMTIME_VERSION, compile, io, portable_config, write_aside,
};
use crate::runtime::{BUNDLED_RUNTIME_DIR, RuntimeFiles, beside_binary, file_digest};

/// What the bundle records beside the compiled module.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Record {
    cwasm_sha256: String,
    cwasm_bytes: u64,
    /// The runtime module it was compiled from, and by which wasmtime: a module for another
    /// runtime or wasmtime is foreign, whatever its hash.
    module_sha256: String,
    wasmtime: String,
}

/// The file name, from everything the code depends on.
fn file_name(files: &RuntimeFiles) -> String {
    format!(
        "python-{}-instrumented-wasmtime-{}-dense{}-{}-portable.cwasm",
        &files.module_sha256[..16],
        WASMTIME_VERSION,
        DENSE_IMAGE_BYTES >> 20,
        std::env::consts::ARCH
    )
}

fn record_path(cwasm: &Path) -> PathBuf {
    cwasm.with_extension("json")
}

/// Puts the interpreter compiled for the baseline CPU into `dir` (a bundle's runtime folder),
/// with its record; for `cargo xtask bundle`. It is compiled once into `cache` (about a
/// minute) and taken from there while it still checks out. Returns the file in `dir`.
pub fn ship(files: &RuntimeFiles, dir: &Path, cache: &Path) -> Result<PathBuf, EngineError> {
    let cached = cache.join(file_name(files));
    if checked_file(files, &cached).is_err() {
        std::fs::create_dir_all(cache).map_err(io(cache))?;
        compile_into(files, &cached)?;
    }
    let path = dir.join(file_name(files));
    for (from, to) in [
        (cached.clone(), path.clone()),
        (record_path(&cached), record_path(&path)),
    ] {
        let _ = std::fs::remove_file(&to);
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(io(&to))?;
        }
    }
    Ok(path)
}

fn compile_into(files: &RuntimeFiles, path: &Path) -> Result<(), EngineError> {
    let config = portable_config(false).ok_or_else(|| {
        EngineError::Engine(format!(
            "no baseline CPU is known for {} on {}",
            std::env::consts::ARCH,
            std::env::consts::OS
        ))
    })?;
    let engine = Engine::new(&config).map_err(|e| EngineError::Engine(format!("{e:#}")))?;
    let compiled = compile(&engine, files)?;
    let record = Record {
        cwasm_sha256: hex::encode(Sha256::digest(&compiled)),
        cwasm_bytes: compiled.len() as u64,
        module_sha256: files.module_sha256.clone(),
        wasmtime: WASMTIME_VERSION.into(),
    };
    let json = serde_json::to_vec_pretty(&record).map_err(|e| EngineError::Engine(e.to_string()))?;
    // The record last: a file without one is never taken for whole.
    let rec = record_path(path);
    let _ = std::fs::remove_file(&rec);
    write_aside(path, &compiled)?;
    write_aside(&rec, &json)
}

/// Why a shipped module was not used.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("its record is missing or unreadable ({0})")]
    Record(String),
    #[error("it was compiled from another runtime or by another wasmtime")]
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

/// The module the bundle ships for `files`, checked and mapped; `None` without a bundle, or
/// (with a warning saying why) when the one there cannot be used.
pub fn load(engine: &Engine, files: &RuntimeFiles) -> Option<Module> {
    let path = beside_binary(BUNDLED_RUNTIME_DIR)?.join(file_name(files));
    if !path.is_file() {
        return None;
    }
    match checked(engine, files, &path) {
        Ok(module) => Some(module),
        Err(why) => {
            tracing::warn!(
                "not using the compiled interpreter shipped at {}: {why}. Compiling it instead (about a minute, once)",
                path.display()
            );
            None
        }
    }
}

fn checked(engine: &Engine, files: &RuntimeFiles, path: &Path) -> Result<Module, Refused> {
    checked_file(files, path)?;
    // SAFETY: the file has the SHA-256 recorded when the bundle compiled it, so these are the
    // bytes wasmtime wrote; wasmtime checks its header against this engine and CPU.
    unsafe { Module::deserialize_file(engine, path) }.map_err(|e| Refused::Wasmtime(format!("{e:#}")))
}

/// Whether `path` is the whole file its record describes, compiled from this runtime.
fn checked_file(files: &RuntimeFiles, path: &Path) -> Result<(), Refused> {
    let raw = std::fs::read(record_path(path)).map_err(|e| Refused::Record(e.to_string()))?;
    let record: Record = serde_json::from_slice(&raw).map_err(|e| Refused::Record(e.to_string()))?;
    if record.module_sha256 != files.module_sha256 || record.wasmtime != WASMTIME_VERSION {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::vm::compile::engine_config;

    /// A runtime whose module is the smallest there is: compiling it takes milliseconds.
    fn tiny_runtime(dir: &Path) -> RuntimeFiles {
        let wasm = b"\0asm\x01\0\0\0";
        let module = dir.join("tiny.wasm");
        std::fs::write(&module, wasm).unwrap();
        RuntimeFiles {
            dir: dir.to_path_buf(),
            module,
            module_sha256: hex::encode(Sha256::digest(wasm)),
            lib_dir: dir.join("lib"),
            mpl_data: dir.join("mpl-data"),
            python_version: "3.15".into(),
            packages: Vec::new(),
        }
    }

    fn refusal(engine: &Engine, files: &RuntimeFiles, path: &Path) -> String {
        match checked(engine, files, path) {
            Ok(_) => panic!("{} was accepted", path.display()),
            Err(why) => why.to_string(),
        }
    }

    #[test]
    fn only_the_whole_file_its_record_describes_is_mapped() {
        let dir = std::env::temp_dir().join(format!("mcs-shipped-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = tiny_runtime(&dir);
        let path = dir.join(file_name(&files));
        compile_into(&files, &path).unwrap();
        let native = Engine::new(&engine_config(false)).unwrap();
        assert!(
            checked(&native, &files, &path).is_ok(),
            "code for the baseline CPU loads in this machine's engine"
        );

        let metered = Engine::new(&engine_config(true)).unwrap();
        let why = refusal(&metered, &files, &path);
        assert!(
            why.starts_with("wasmtime refused it"),
            "fuel metering changes the code: {why}"
        );

        let record = std::fs::read(record_path(&path)).unwrap();
        let mut other = files.clone();
        other.module_sha256 = "0".repeat(64);
        std::fs::copy(&path, dir.join(file_name(&other))).unwrap();
        std::fs::write(record_path(&dir.join(file_name(&other))), &record).unwrap();
        let why = refusal(&native, &other, &dir.join(file_name(&other)));
        assert!(why.contains("another runtime"), "{why}");

        let whole = std::fs::read(&path).unwrap();
        let mut flipped = whole.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        let why = refusal(&native, &files, &path);
        assert!(why.contains("SHA-256"), "{why}");

        std::fs::write(&path, &whole[..whole.len() - 1]).unwrap();
        let why = refusal(&native, &files, &path);
        assert!(why.contains("not the") && why.contains("recorded"), "{why}");

        std::fs::write(&path, &whole).unwrap();
        std::fs::remove_file(record_path(&path)).unwrap();
        let why = refusal(&native, &files, &path);
        assert!(why.contains("record is missing"), "{why}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
