//! A save folder the user named before anything was saved into it: made on the first save
//! into it when the folder that would hold it exists (a user's "results" folder under
//! Documents), so `save_file` works from the first call; else the save fails naming the
//! folder and what to do. Only the named folder itself is made, never its parents.

use std::path::{Path, PathBuf};

use crate::config::folders::SaveFolder;
use crate::sandbox::SandboxError;

/// The folders a save may write into once the one it goes to exists, and that one if this
/// save made it.
#[derive(Debug)]
pub struct Ready {
    pub roots: Vec<PathBuf>,
    pub made: Option<PathBuf>,
}

/// Makes the named save folder `destination` lies in, if it is not there yet; the folders
/// there then. A relative destination goes into the first folder named, as in `save::destination`.
pub fn prepare(destination: &str, folders: &[SaveFolder], home: &Path) -> Result<Ready, SandboxError> {
    let given = Path::new(destination);
    let full = match folders.first() {
        Some(first) if !given.is_absolute() => named_path(first).join(given),
        _ => given.to_path_buf(),
    };
    let mut made = None;
    if let Some(missing) = folders.iter().find(|f| holds(f, &full)) {
        made = Some(make(missing, home)?);
    }
    let roots: Vec<PathBuf> = folders
        .iter()
        .filter_map(|f| match f {
            SaveFolder::Present(p) => Some(p.clone()),
            missing => made.clone().filter(|m| Some(m) == missing.would_be().as_ref()),
        })
        .collect();
    if roots.is_empty() {
        return Err(none_there(folders));
    }
    Ok(Ready { roots, made })
}

/// The folder as named (or as it is, when there).
fn named_path(f: &SaveFolder) -> &Path {
    match f {
        SaveFolder::Present(p) => p,
        SaveFolder::Missing { named, .. } => named,
    }
}

/// Whether `full` lies in `f`, a folder not there yet (as named, or where it would be made).
fn holds(f: &SaveFolder, full: &Path) -> bool {
    match f {
        SaveFolder::Present(_) => false,
        SaveFolder::Missing { named, .. } => {
            full.starts_with(named) || f.would_be().is_some_and(|at| full.starts_with(at))
        }
    }
}

/// Makes `f` (one level: its parent must exist), never inside the server's own folder.
fn make(f: &SaveFolder, home: &Path) -> Result<PathBuf, SandboxError> {
    let named = named_path(f);
    let Some(at) = f.would_be() else {
        return Err(SandboxError::InvalidArgument(format!(
            "the save folder '{}' (CODE_SANDBOX_SAVE_DIRS) does not exist, nor does the folder that would hold it. Ask the user to make it, or save into another of the folders they allowed",
            named.display()
        )));
    };
    if at.starts_with(home) {
        return Err(SandboxError::InvalidArgument(format!(
            "the save folder '{}' would be inside the server's own folder ({}); it is not made. Ask the user to name another folder in CODE_SANDBOX_SAVE_DIRS",
            named.display(),
            super::save::shown(home)
        )));
    }
    match std::fs::create_dir(&at) {
        Ok(()) => {
            tracing::info!("made the save folder {} on the first save into it", at.display());
        }
        // Made meanwhile (another save, or the user): as good.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && at.is_dir() => {}
        Err(e) => {
            return Err(SandboxError::InvalidArgument(format!(
                "the save folder '{}' could not be made ({e}); ask the user to make it, or save into another of the folders they allowed",
                named.display()
            )));
        }
    }
    std::fs::canonicalize(&at).map_err(|e| {
        SandboxError::InvalidArgument(format!(
            "the save folder '{}' was made but cannot be opened ({e}); try again",
            named.display()
        ))
    })
}

/// Why no folder can take this save: none is there, and it goes into none to be made.
fn none_there(folders: &[SaveFolder]) -> SandboxError {
    if folders.is_empty() {
        return super::save::off();
    }
    let listed: Vec<String> = folders
        .iter()
        .map(|f| named_path(f).display().to_string())
        .collect();
    SandboxError::InvalidArgument(format!(
        "none of the folders save_file may write into exists yet ({}). Save into one of them: it is made on the first save when the folder that would hold it exists",
        listed.join(", ")
    ))
}

#[cfg(test)]
mod tests;
