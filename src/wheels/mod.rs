//! Packages for wasm sandboxes: pure-Python wheels from a pinned local cache, resolved and
//! unpacked on the host into one sandbox's site-packages. Nothing here touches the network at
//! run time; [`catalog::fetch`] fills the cache ahead of time with pip.

pub mod catalog;
pub mod file_hosts;
pub mod index;
pub mod install;
pub mod package_index;
pub mod remote_index;
pub mod resolve;
pub mod unpack;

/// PEP 503 normal form (the runtime's listing uses it too, so it lives there).
pub use crate::runtime::normalize;

#[derive(Debug, thiserror::Error)]
pub enum WheelError {
    #[error(
        "'{0}' is not a plain package name. Give a name like 'tabulate' (optionally with a version, like 'rich>=13'); paths and URLs are not accepted"
    )]
    BadName(String),
    #[error("no package named '{name}' is in the local wheel cache.{hint}")]
    Unknown {
        name: String,
        hint: String,
        /// What was asked for, so a package index may be asked for it instead.
        wanted: Box<pep508_rs::Requirement>,
    },
    #[error(
        "{by} needs {shown}, which is not in the local wheel cache; add its wheel to CODE_SANDBOX_WHEEL_DIR"
    )]
    DependencyMissing {
        by: String,
        shown: String,
        /// The dependency, so a package index may be asked for it instead.
        wanted: Box<pep508_rs::Requirement>,
    },
    #[error("{message}")]
    VersionMissing {
        message: String,
        /// The requirement as the user is shown it, with who needs it.
        named: String,
        /// What no cached version satisfies, so a package index may be asked for it instead.
        wanted: Box<pep508_rs::Requirement>,
    },
    #[error(
        "{what} is neither in the local wheel cache nor on the package index {index} (CODE_SANDBOX_INDEX_URL) as a pure-Python wheel for Python {python}; check the name and version, or add its wheel to CODE_SANDBOX_WHEEL_DIR"
    )]
    NotOnIndex {
        what: String,
        index: String,
        python: String,
    },
    #[error(
        "'{0}' exists only as compiled (platform-specific) wheels, and compiled extensions cannot load in the WebAssembly sandbox. Look for a pure-Python alternative"
    )]
    NativeOnly(String),
    #[error("{0}")]
    Conflict(String),
    #[error("wheel {file} was refused: {reason}. Nothing was installed")]
    Unsafe { file: String, reason: String },
    #[error("wheel {file} is unreadable: {reason}")]
    Broken { file: String, reason: String },
    #[error("could not install: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Fetch(String),
    #[error("{0}. Nothing was installed")]
    DiskFull(String),
}

impl WheelError {
    /// The requirement the local cache could not satisfy, when that is what went wrong (a
    /// package index may have it).
    pub fn missing(&self) -> Option<&pep508_rs::Requirement> {
        match self {
            WheelError::Unknown { wanted, .. }
            | WheelError::DependencyMissing { wanted, .. }
            | WheelError::VersionMissing { wanted, .. } => Some(wanted),
            _ => None,
        }
    }

    /// How a missing requirement is named to the user once the package index lacks it too.
    pub fn missing_named(&self) -> Option<String> {
        match self {
            WheelError::Unknown { name, .. } => Some(format!("'{name}'")),
            WheelError::DependencyMissing { by, shown, .. } => Some(format!("{shown} (needed by {by})")),
            WheelError::VersionMissing { named, .. } => Some(named.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn normalizes_per_pep_503() {
        assert_eq!(super::normalize("Friendly-Bard"), "friendly-bard");
        assert_eq!(super::normalize("FRIENDLY__bard"), "friendly-bard");
        assert_eq!(super::normalize("friendly.bard"), "friendly-bard");
        assert_eq!(super::normalize("jaraco_functools"), "jaraco-functools");
    }
}
