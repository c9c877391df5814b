//! Where a file tool's path points: a sandbox's workspace, or one of the user's folders
//! sandboxes read in place under `/mnt` (read host-side, never through the sandbox).

use crate::disk::dir_read;
use crate::sandbox::mounts::MountPath;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{Listing, SandboxError, blocking};
use crate::server::SandboxServer;

pub(super) enum Place {
    Workspace(WorkspacePath),
    /// `/mnt` itself: the shared folders.
    SharedRoot,
    Shared(MountPath),
}

impl Place {
    /// How results name it: relative for the workspace (as always), absolute under `/mnt`.
    pub fn shown(&self) -> String {
        match self {
            Place::Workspace(p) => p.relative(),
            _ => self.guest(),
        }
    }

    /// The absolute path the guest sees.
    pub fn guest(&self) -> String {
        match self {
            Place::Workspace(p) => p.guest(),
            Place::SharedRoot => crate::sandbox::mounts::MOUNT_ROOT.into(),
            Place::Shared(m) => m.guest(),
        }
    }
}

impl SandboxServer {
    pub(super) fn place(&self, path: &str) -> Result<Place, SandboxError> {
        match self.backend.mounts().resolve(path) {
            None => WorkspacePath::parse(path).map(Place::Workspace),
            Some(Ok(None)) => Ok(Place::SharedRoot),
            Some(Ok(Some(m))) => Ok(Place::Shared(m)),
            Some(Err(e)) => Err(e),
        }
    }

    /// A path that must name a file: the workspace or a shared folder itself is refused as
    /// an invalid path, before any sandbox is looked up.
    pub(super) fn file_place(&self, path: &str) -> Result<Place, SandboxError> {
        match self.place(path)? {
            Place::Workspace(p) if p.is_root() => WorkspacePath::parse_file(path).map(Place::Workspace),
            Place::Workspace(p) => Ok(Place::Workspace(p)),
            Place::Shared(m) if !m.rel.is_root() => Ok(Place::Shared(m)),
            folder => Err(SandboxError::InvalidPath(format!(
                "'{}' is a shared folder, not a file; list_files shows what is in it",
                folder.guest()
            ))),
        }
    }

    /// The shared folders answer for a sandbox that exists, like its own files do.
    async fn exists(&self, id: &str) -> Result<(), SandboxError> {
        self.backend.locate(id).await
    }

    pub(super) async fn list_place(&self, id: &str, place: &Place) -> Result<Listing, SandboxError> {
        match place {
            Place::Workspace(p) => self.backend.files().list(id, p).await,
            Place::SharedRoot => self
                .exists(id)
                .await
                .map(|_| Listing::whole(self.backend.mounts().entries())),
            Place::Shared(m) => {
                self.exists(id).await?;
                let m = m.clone();
                blocking(move || dir_read::list_shared(&m)).await
            }
        }
    }

    /// The file's bytes, up to `limit` (checked before reading).
    /// Streams the file at `place` into `out`, up to `limit` bytes (a larger one is refused);
    /// how many bytes it held.
    pub(super) async fn copy_place(
        &self,
        id: &str,
        place: &Place,
        limit: u64,
        out: std::fs::File,
    ) -> Result<u64, SandboxError> {
        match place {
            Place::Workspace(p) => self.backend.files().copy_out(id, p, limit, out).await,
            Place::SharedRoot => Err(SandboxError::IsDirectory { path: place.guest() }),
            Place::Shared(m) => {
                self.exists(id).await?;
                let m = m.clone();
                blocking(move || dir_read::copy_shared(&m, limit, out)).await
            }
        }
    }

    pub(super) async fn read_place(
        &self,
        id: &str,
        place: &Place,
        limit: u64,
    ) -> Result<Vec<u8>, SandboxError> {
        match place {
            Place::Workspace(p) => self.backend.files().read(id, p, limit).await,
            Place::SharedRoot => Err(SandboxError::IsDirectory { path: place.guest() }),
            Place::Shared(m) => {
                self.exists(id).await?;
                let m = m.clone();
                blocking(move || dir_read::read_shared(&m, limit)).await
            }
        }
    }
}
