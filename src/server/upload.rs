//! Reading host files for `upload_file`: only inside the folders the user allowed, only
//! regular files, and only up to a size checked before a byte is copied.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::sandbox::SandboxError;

/// Largest upload.
pub const MAX_UPLOAD: u64 = 100 << 20;

/// Reads `source` if it lies inside one of `roots` and outside `home`, the server's own
/// folder (all canonical), else refuses.
pub fn read_allowed(source: &str, roots: &[PathBuf], home: &Path) -> Result<(Vec<u8>, String), SandboxError> {
    if roots.is_empty() {
        return Err(SandboxError::InvalidArgument(
            "upload_file cannot read host files: no folder is allowed. Set CODE_SANDBOX_UPLOAD_DIRS to the folders it may read, or pass content_base64 instead".into(),
        ));
    }
    if source.contains('\0') {
        return Err(SandboxError::InvalidPath(
            "the source path contains a NUL character".into(),
        ));
    }
    let canonical = std::fs::canonicalize(Path::new(source)).map_err(|e| SandboxError::Io {
        context: format!("could not open the host file '{source}'"),
        source: e,
    })?;
    if !roots.iter().any(|r| canonical.starts_with(r)) {
        return Err(SandboxError::InvalidArgument(format!(
            "'{source}' is outside the folders upload_file may read ({}). Move the file there, or add its folder to CODE_SANDBOX_UPLOAD_DIRS",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if canonical.starts_with(home) {
        return Err(SandboxError::InvalidArgument(format!(
            "'{source}' is inside this server's own folder ({}), where sandboxes are kept; upload_file does not read there",
            home.display()
        )));
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading blocks until a writer comes; O_NONBLOCK returns at once,
        // and the check below then refuses anything that is not a regular file.
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts
        .open(&canonical)
        .map_err(SandboxError::io(format!("could not open '{source}'")))?;
    let md = file
        .metadata()
        .map_err(SandboxError::io(format!("could not inspect '{source}'")))?;
    if !md.is_file() {
        return Err(SandboxError::NotRegular { path: source.into() });
    }
    if md.len() > MAX_UPLOAD {
        return Err(SandboxError::TooLarge {
            path: source.into(),
            size: md.len(),
            limit: MAX_UPLOAD,
        });
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    file.take(MAX_UPLOAD + 1)
        .read_to_end(&mut bytes)
        .map_err(SandboxError::io(format!("could not read '{source}'")))?;
    if bytes.len() as u64 > MAX_UPLOAD {
        return Err(SandboxError::TooLarge {
            path: source.into(),
            size: bytes.len() as u64,
            limit: MAX_UPLOAD,
        });
    }
    let name = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "upload".into());
    Ok((bytes, name))
}
