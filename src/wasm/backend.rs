//! The local backend behind the two traits: creating, listing and closing sandboxes, and
//! handing calls and installs to the parts that do them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::context::Context;
use super::files::WasmFiles;
use super::live::{self, Room};
use super::programs::Programs;
use super::registry::Registry;
use super::shutdown::Stopping;
use super::spare::Spare;
use super::vm::{self, MemoryBudget};
use super::{call, checkpoints, housekeeping, install, recovery, sandbox_limits};
use crate::config::Settings;
use crate::runtime::Layout;
use crate::sandbox::mounts::Mounts;
use crate::sandbox::{
    Admission, Checkpoint, CreateOptions, ExecOptions, Execution, InstallOutcome, Interpreter, Limits,
    SandboxError, SandboxFiles, SandboxInfo, SandboxStatus, Usage,
};
use crate::wheels::package_index::PackageIndex;

pub struct WasmBackend {
    settings: Arc<Settings>,
    spare: Spare,
    /// Bounds the calls running code at once, across sandboxes.
    calls: Arc<tokio::sync::Semaphore>,
    ctx: Arc<Context>,
    files: WasmFiles,
    /// `CODE_SANDBOX_INDEX_URL`, when set: installs fetch what the local cache lacks.
    index: Option<Arc<PackageIndex>>,
    /// The user's folders every sandbox reads in place.
    mounts: Mounts,
    stopping: Stopping,
}

impl WasmBackend {
    /// Sets up the backend and starts installing the runtime in the background. Kept
    /// sandboxes are taken over but for those in `leave` (another server's to take).
    pub fn new(
        settings: Arc<Settings>,
        leave: &std::collections::HashSet<String>,
    ) -> Result<Self, SandboxError> {
        let layout = Layout::new(settings.home_dir());
        let persist = settings
            .persist
            .then(|| Duration::from_secs(settings.retain_days.saturating_mul(86_400)));
        let registry =
            Arc::new(Registry::new(layout.clone(), persist)?.on_replica(settings.team.replica.clone()));
        let total = settings
            .total_memory_mb
            .map_or_else(vm::half_of_machine, |mb| mb.saturating_mul(1 << 20));
        recovery::recover(
            &registry,
            &|kept| sandbox_limits::clamp_kept(&settings, total, kept),
            &|id| leave.contains(id),
        );
        registry.empty_stale_trash();
        if let Some(url) = &settings.team.store {
            super::store_push::install(url, &settings.team, persist, layout.history_dir())
                .map_err(|e| SandboxError::InvalidArgument(e.to_string()))?;
        }
        let keep_bytes = settings.keep_bytes();
        tracing::info!("disk for kept sandboxes: {} MiB", keep_bytes >> 20);
        kernels_from(&settings);
        let named = Mounts::from_roots(&settings.read_roots()).hiding(&settings.home_canonical());
        let mounts = named.clone().indexed_in(&layout.cache_dir()).unwrap_or_else(|e| {
            tracing::warn!("/mnt cannot be listed in sandboxes ({e}); its folders can still be read");
            named
        });
        for m in mounts.iter() {
            tracing::info!("shared folder {} is {} (read-only)", m.guest(), m.host.display());
        }
        let programs = Programs::new(
            layout,
            settings.fuel_per_call > 0,
            settings.warm_image,
            mounts.clone(),
        );
        programs.start();
        housekeeping::start(
            &registry,
            (settings.idle_seconds > 0).then(|| Duration::from_secs(settings.idle_seconds)),
            keep_bytes,
        );
        tracing::info!("guest memory budget for all sandboxes: {} MiB", total >> 20);
        let index = PackageIndex::from_settings(&settings)?;
        let memory = MemoryBudget::new(total);
        memory.set_reclaim(live::reclaimer(&registry));
        let backend = WasmBackend {
            ctx: Arc::new(Context {
                memory,
                room: Room::new(registry.clone(), settings.max_sandboxes),
                programs,
                registry: registry.clone(),
            }),
            spare: Spare::default(),
            calls: Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_calls.max(1))),
            files: WasmFiles::new(registry),
            index,
            mounts,
            settings,
            stopping: Stopping::default(),
        };
        backend.warm_spare();
        Ok(backend)
    }

    /// Starts a spare interpreter with the default limits in the background.
    fn warm_spare(&self) {
        let (limits, _) = self.limits(&CreateOptions::default());
        self.spare.warm(&self.ctx, limits);
    }

    /// The pinned cache, the user's own folder of wheels, then what came from the index.
    fn wheel_dirs(&self) -> Vec<std::path::PathBuf> {
        let mut dirs = vec![Layout::new(self.settings.home_dir()).wheels_dir()];
        dirs.extend(self.settings.wheel_dir.clone());
        dirs.extend(self.index.as_ref().map(|i| i.cache().to_path_buf()));
        dirs
    }

    /// The limits a new sandbox really gets, and notes on what was clamped.
    fn limits(&self, opts: &CreateOptions) -> (Limits, Vec<String>) {
        sandbox_limits::for_new(&self.settings, self.ctx.memory.limit(), opts)
    }
}

#[async_trait]
impl Interpreter for WasmBackend {
    fn backend(&self) -> &'static str {
        "wasm"
    }

    fn python_version(&self) -> String {
        crate::runtime::manifest().artifacts.python_version.clone()
    }

    async fn create(&self, opts: CreateOptions) -> Result<SandboxInfo, SandboxError> {
        let (limits, notes) = self.limits(&opts);
        let program = self.ctx.programs.for_memory(limits.memory_mb).await?.program;
        let registry = &self.ctx.registry;
        // Each new sandbox is listed with its interpreter lock held, so another sandbox making
        // room at the same moment counts it as live (see `live`).
        let id = match self.spare.take(&limits, program.image, registry).await {
            Some(sb) => {
                let slot = sb.slot.lock().await;
                registry.publish(sb.clone());
                if let Err(e) = self.ctx.room.make(&sb.id).await {
                    drop(slot);
                    registry.unpublish(&sb.id);
                    self.spare.put_back(sb, program.image).await;
                    return Err(e);
                }
                sb.id.clone()
            }
            None => {
                let sb = registry.prepare(limits.clone())?;
                let mut slot = sb.slot.lock().await;
                registry.publish(sb.clone());
                if let Err(e) = self.ctx.ensure_session(&mut slot, &sb).await {
                    drop(slot);
                    registry.remove(&sb.id);
                    return Err(e);
                }
                sb.id.clone()
            }
        };
        crate::sandbox::events::opened(&id);
        self.warm_spare();
        Ok(SandboxInfo {
            sandbox_id: id,
            backend: "wasm".into(),
            python_version: program.files.python_version.clone(),
            workspace: crate::sandbox::paths::WORKSPACE.into(),
            limits,
            notes,
        })
    }

    async fn close(&self, id: &str) -> Result<(), SandboxError> {
        self.ctx.registry.close(id).await?;
        super::store_push::closed(id);
        Ok(())
    }

    async fn status(&self, id: &str) -> Result<SandboxStatus, SandboxError> {
        let sb = self.ctx.registry.get(id)?;
        Ok(sb.status().await)
    }

    async fn list(&self) -> Vec<SandboxStatus> {
        let mut out = Vec::new();
        for sb in self.ctx.registry.by_last_use() {
            out.push(sb.status().await);
        }
        out
    }

    async fn recently_used(&self) -> Vec<String> {
        self.ctx.registry.recently_used()
    }

    async fn suspend(&self, id: &str) -> Result<bool, SandboxError> {
        let sb = self.ctx.registry.get(id)?;
        Ok(!sb.is_busy() && live::suspend(&sb, "its owner's memory quota was needed").await)
    }

    fn usage(&self, id: &str) -> Result<Usage, SandboxError> {
        let sb = self.ctx.registry.get(id)?;
        Ok(Usage {
            memory_mb: sb.limits.memory_mb,
            live: sb.is_live(),
            disk_bytes: sb.quota.used(),
        })
    }

    fn exists(&self, id: &str) -> bool {
        self.ctx.registry.is_open(id) || super::folders::in_home(self.ctx.registry.layout(), id)
    }

    async fn execute(&self, id: &str, code: &str, opts: ExecOptions) -> Result<Execution, SandboxError> {
        let sb = self.ctx.registry.get(id)?;
        // Waits for the runtime before taking a call slot.
        self.ctx.programs.get().await?;
        // A background run was admitted under the server's budget for runs instead.
        let _permit = match opts.admission {
            Admission::Background => None,
            Admission::Interactive => Some(self.calls.clone().try_acquire_owned().map_err(|_| {
                SandboxError::CallCapacity(match self.settings.max_concurrent_calls {
                    1 => "1 call is already running code, the most allowed; wait for it to finish (or raise CODE_SANDBOX_MAX_CONCURRENT_CALLS)".into(),
                    n => format!("{n} calls are already running code, the most allowed; wait for one to finish (or raise CODE_SANDBOX_MAX_CONCURRENT_CALLS)"),
                })
            })?),
        };
        call::execute(&self.ctx, &sb, code, opts).await
    }

    async fn install_package(&self, id: &str, name: &str) -> Result<InstallOutcome, SandboxError> {
        install::install(&self.ctx, self.index.as_deref(), self.wheel_dirs(), id, name).await
    }

    async fn fork(&self, id: &str) -> Result<SandboxInfo, SandboxError> {
        let from = self.ctx.registry.get(id)?;
        let program = self.ctx.programs.for_memory(from.limits.memory_mb).await?.program;
        let into = self.ctx.registry.reserve(from.limits.clone())?;
        // In the same budget as its original (a principal's) before any file is copied, so
        // the copy is checked against it.
        if let Some(group) = from.quota.parent() {
            into.quota.move_under(group);
        }
        if let Err(e) = checkpoints::fork(&self.ctx, &from, &into).await {
            self.ctx.registry.remove(&into.id);
            return Err(e);
        }
        crate::sandbox::events::opened(&into.id);
        Ok(SandboxInfo {
            sandbox_id: into.id.clone(),
            backend: "wasm".into(),
            python_version: program.files.python_version.clone(),
            workspace: crate::sandbox::paths::WORKSPACE.into(),
            limits: into.limits.clone(),
            notes: Vec::new(),
        })
    }

    async fn checkpoint(&self, id: &str, name: Option<&str>) -> Result<Checkpoint, SandboxError> {
        let sb = self.ctx.registry.get(id)?;
        checkpoints::checkpoint(&self.ctx, &sb, name).await
    }

    async fn restore(&self, id: &str, checkpoint: &str) -> Result<Checkpoint, SandboxError> {
        let sb = self.ctx.registry.get(id)?;
        let wanted = checkpoints::image_of(&sb, checkpoint).await;
        let images = self.ctx.programs.images_for(wanted.as_deref()).await?;
        checkpoints::restore(&self.ctx, &sb, images, checkpoint).await
    }

    fn files(&self) -> &dyn SandboxFiles {
        &self.files
    }

    fn mounts(&self) -> Mounts {
        self.mounts.clone()
    }

    fn stop_running(&self) {
        self.ctx.registry.stop_running();
    }

    fn ready(&self) -> bool {
        self.ctx.programs.is_ready()
    }

    fn memory_budget(&self) -> Option<(u64, u64)> {
        Some((self.ctx.memory.used(), self.ctx.memory.limit()))
    }

    fn census(&self) -> Option<crate::sandbox::census::Census> {
        Some(self.ctx.registry.census())
    }

    fn keep_for(&self, id: &str, principal: &str) {
        super::store_push::assign(id, principal);
    }

    async fn hold(&self, id: &str) -> Result<(), SandboxError> {
        super::store_pull::hold(&self.ctx.registry, id).await
    }

    async fn resume_from_store(&self, id: &str, principal: &str) -> Result<bool, SandboxError> {
        let clamp = |kept| sandbox_limits::clamp_kept(&self.settings, self.ctx.memory.limit(), kept);
        super::store_pull::resume(&self.ctx.registry, id, principal, &clamp).await
    }

    fn join_disk_group(&self, id: &str, group: &str, limit_bytes: u64) {
        let joined = self.ctx.registry.join_disk_group(id, group, limit_bytes);
        joined.unwrap_or_else(|e| tracing::debug!("sandbox {id} joins no disk budget: {e}"));
    }

    fn store_waiting(&self) -> usize {
        super::store_push::waiting()
    }

    async fn settle_store(&self) {
        let bound = self.settings.team.store_drain();
        self.stopping.wait_for_store(&self.ctx, bound).await;
    }

    async fn shutdown(&self) {
        self.stopping.shutdown(&self.ctx, &self.spare).await;
    }
}

/// Host kernels as the settings say, said once in the log.
fn kernels_from(settings: &Settings) {
    let setup = vm::KernelSetup {
        enabled: settings.kernels.host_kernels,
        threads: settings.kernels.kernel_threads,
    };
    vm::configure_kernels(setup);
    if setup.enabled {
        let threads = vm::kernel_threads(setup);
        tracing::info!(
            "matrix products run on host kernels ({threads} thread(s); CODE_SANDBOX_HOST_KERNELS=0 keeps them in WebAssembly)"
        );
    } else {
        tracing::info!(
            "host kernels are off (CODE_SANDBOX_HOST_KERNELS=0): matrix products run in WebAssembly"
        );
    }
}
