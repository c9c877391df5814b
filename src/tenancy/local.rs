//! A stdio server is the machine's local user, one principal among those a remote-mode server
//! on the same `CODE_SANDBOX_HOME` served: it sees its own sandboxes and unowned ones, never
//! one that belongs to a remote principal (such an id answers exactly as an unknown one).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use super::owners::Owners;
use crate::sandbox::paths::WorkspacePath;
use crate::sandbox::{
    Checkpoint, CreateOptions, ExecOptions, Execution, InstallOutcome, Interpreter, Listing, SandboxError,
    SandboxFiles, SandboxInfo, SandboxStatus, Usage,
};

pub struct LocalView {
    inner: Arc<dyn Interpreter>,
    owners: Owners,
}

/// Sandboxes a remote-mode server on this home gave to its principals: a stdio server leaves
/// them where they are, so the remote server finds them at its next start (taking one over
/// would hold it from its owner for as long as the stdio server runs).
pub fn remote_owned(owners_file: PathBuf) -> std::collections::HashSet<String> {
    Owners::load(Some(owners_file)).remote_owned()
}

impl LocalView {
    /// `owners_file`: the ownership a remote-mode server keeps in the same home.
    pub fn wrap(inner: Arc<dyn Interpreter>, owners_file: PathBuf) -> Arc<dyn Interpreter> {
        Arc::new(LocalView {
            inner,
            owners: Owners::load(Some(owners_file)),
        })
    }

    fn mine(&self, id: &str) -> bool {
        self.owners
            .owner_of(id)
            .is_none_or(|p| &*p == super::names::LOCAL)
    }

    fn check(&self, id: &str) -> Result<(), SandboxError> {
        if self.mine(id) {
            Ok(())
        } else {
            Err(SandboxError::NotFound(id.to_string()))
        }
    }

    /// [`Self::check`], and with a team's store, the sandbox held here (brought back from the
    /// store when its copy on this disk was let go, or never was here).
    async fn found(&self, id: &str) -> Result<(), SandboxError> {
        self.check(id)?;
        self.inner
            .hold_or_resume(id, super::names::LOCAL)
            .await
            .map(|_| ())
    }
}

#[async_trait]
impl Interpreter for LocalView {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn python_version(&self) -> String {
        self.inner.python_version()
    }
    async fn create(&self, opts: CreateOptions) -> Result<SandboxInfo, SandboxError> {
        self.inner.create(opts).await
    }
    async fn close(&self, id: &str) -> Result<(), SandboxError> {
        self.found(id).await?;
        self.inner.close(id).await
    }
    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError> {
        self.found(id).await?;
        self.inner.status(id).await
    }
    async fn list(&self) -> Vec<SandboxStatus> {
        let mut all = self.inner.list().await;
        all.retain(|s| self.mine(&s.sandbox_id));
        all
    }
    async fn recently_used(&self) -> Vec<String> {
        let mut ids = self.inner.recently_used().await;
        ids.retain(|id| self.mine(id));
        ids
    }
    async fn suspend(&self, id: &str) -> Result<bool, SandboxError> {
        self.found(id).await?;
        self.inner.suspend(id).await
    }
    async fn locate(&self, id: &str) -> Result<(), SandboxError> {
        self.found(id).await?;
        self.usage(id).map(|_| ())
    }
    fn usage(&self, id: &str) -> Result<Usage, SandboxError> {
        self.check(id)?;
        self.inner.usage(id)
    }
    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError> {
        self.found(id).await?;
        self.inner.execute(id, code, opts).await
    }
    async fn install_package(&self, id: &str, name: &str) -> Result<InstallOutcome, SandboxError> {
        // `?` lists what can be installed, for no sandbox in particular.
        if name.trim() != "?" {
            self.check(id)?;
        }
        self.inner.install_package(id, name).await
    }
    async fn fork(&self, id: &str) -> Result<SandboxInfo, SandboxError> {
        self.found(id).await?;
        self.inner.fork(id).await
    }
    async fn checkpoint(&self, id: &str, name: Option<&str>) -> Result<Checkpoint, SandboxError> {
        self.found(id).await?;
        self.inner.checkpoint(id, name).await
    }
    async fn restore(&self, id: &str, checkpoint: &str) -> Result<Checkpoint, SandboxError> {
        self.found(id).await?;
        self.inner.restore(id, checkpoint).await
    }
    fn files(&self) -> &dyn SandboxFiles {
        self
    }
    fn mounts(&self) -> crate::sandbox::mounts::Mounts {
        self.inner.mounts()
    }
    fn stop_running(&self) {
        self.inner.stop_running()
    }
    async fn shutdown(&self) {
        self.inner.shutdown().await
    }
}

#[async_trait]
impl SandboxFiles for LocalView {
    async fn list(&self, id: &str, path: &WorkspacePath) -> Result<Listing, SandboxError> {
        self.found(id).await?;
        self.inner.files().list(id, path).await
    }
    async fn read(&self, id: &str, path: &WorkspacePath, limit: u64) -> Result<Vec<u8>, SandboxError> {
        self.found(id).await?;
        self.inner.files().read(id, path, limit).await
    }
    async fn write(&self, id: &str, path: &WorkspacePath, bytes: Vec<u8>) -> Result<u64, SandboxError> {
        self.found(id).await?;
        self.inner.files().write(id, path, bytes).await
    }
    async fn copy_out(
        &self,
        id: &str,
        path: &WorkspacePath,
        limit: u64,
        out: std::fs::File,
    ) -> Result<u64, SandboxError> {
        self.found(id).await?;
        self.inner.files().copy_out(id, path, limit, out).await
    }
}
