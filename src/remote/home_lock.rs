//! One remote-mode server per home. Two on one `CODE_SANDBOX_HOME` each keep the ownership
//! records (`owners.json`) of their own sandboxes only, and the second to start rewrote the
//! file without the first's: alice's sandbox lost its owner, and a stdio server on the home
//! then showed it to the machine's user. An OS lock on a file in the home (released by the
//! OS however the holder ends, SIGKILL included) makes the second refuse, saying who holds it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// Held while the server runs; dropping it (or the process ending) frees the home.
#[derive(Debug)]
pub struct HomeLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum HomeLockError {
    #[error(
        "another remote-mode server ({holder}) is serving the home {home}: two on one home would strip each other's sandbox ownership records. Give each server a home of its own (CODE_SANDBOX_HOME), or stop the other first"
    )]
    Taken { home: String, holder: String },
    #[error("could not lock {path} to serve this home alone: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Takes the home for this process, or says which process has it.
pub fn claim(home: &Path) -> Result<HomeLock, HomeLockError> {
    let path = home.join("remote-server.lock");
    let io = |source| HomeLockError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(home).map_err(io)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(HomeLockError::Taken {
                home: home.display().to_string(),
                holder: if holder.is_empty() {
                    "process unknown".into()
                } else {
                    holder.chars().take(80).collect()
                },
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    // Who holds it, for the refusal the next one prints.
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "pid {}", std::process::id());
    let _ = file.flush();
    Ok(HomeLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_on_a_home_is_refused_until_the_first_ends() {
        let home = std::env::temp_dir().join(format!("home-lock-{}", uuid::Uuid::new_v4().simple()));
        let first = claim(&home).expect("the first claim");
        let second = claim(&home).expect_err("a second claim while the first holds");
        let text = second.to_string();
        assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
        assert!(text.contains("CODE_SANDBOX_HOME"), "{text}");
        drop(first);
        claim(&home).expect("free again once the first ends");
        let _ = std::fs::remove_dir_all(home);
    }
}
