//! The interpreter, installed and compiled in the background the first time it is needed.
//!
//! The server must answer `initialize` within a second even on a machine that has never seen
//! the runtime, so installation runs on a blocking thread, and tool calls wait for it while
//! telling the client how far it got.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::vm::{self, EngineError, Image, Program, WarmError};
use super::warm_start::{self, LOAD_WAIT, Start, WarmPhase, fits};
use crate::host::lock::Locked;
use crate::runtime::{self, Layout, RuntimeError, Stage};
use crate::sandbox::SandboxError;
use crate::sandbox::call_scope;
use crate::sandbox::mounts::Mounts;

#[derive(Clone)]
pub enum State {
    Idle,
    Installing(String),
    Ready(Arc<Program>),
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

pub struct Programs {
    layout: Layout,
    /// The shared folders every program preopens (fixed for the server's life).
    mounts: Mounts,
    metered: bool,
    /// Build (or load) a warm image once the plain one is ready.
    warm_enabled: bool,
    /// The warm image, once built or loaded; sandboxes use the plain one until then.
    warm: Mutex<Option<Arc<Program>>>,
    /// The plain image when the first program ready was a bundle's warm image: compiled on
    /// demand, for a sandbox too small for the warm image or a state saved from the plain one.
    plain: tokio::sync::OnceCell<Arc<Program>>,
    /// How far the attempt at the warm image is.
    warm_phase: watch::Sender<WarmPhase>,
    /// Updated with `send_replace`: a plain `send` is dropped while nobody is subscribed, which
    /// once lost the `Ready` of an install that finished before the first call came.
    tx: watch::Sender<State>,
    started: Mutex<bool>,
    /// The warm-image build, so shutdown can stop it while the async runtime is still there
    /// (cut off by the runtime instead, wasmtime-wasi's blocking file calls panic).
    warm_task: Mutex<WarmTask>,
}

/// How long shutdown waits for a stopped warm-image build to end (it ends at its next file
/// call or time check, well under a second).
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

enum WarmTask {
    NotStarted,
    Running(tokio::task::JoinHandle<()>),
    /// Shutdown has begun: no build starts any more.
    Stopped,
}

/// How long restoring a saved state waits for the warm image it may need (building one
/// takes about a minute; loading one, a fraction of a second).
const WARM_WAIT: Duration = Duration::from_secs(240);

/// How long a tool call waits for the interpreter to be prepared before it answers that it is
/// still being prepared: under the 60 s Claude's clients (the TypeScript SDK's default request
/// timeout) wait, so a first call from a source build is answered, not given up on, and the
/// next call, once the compile is done, runs.
const PATIENCE: Duration = Duration::from_secs(40);

/// How often a call waiting for the interpreter reports progress.
const REPORT_EVERY: Duration = Duration::from_secs(2);

/// Installs (if needed) and loads the interpreter; the one path for xtask, CLI and server.
pub fn install_and_load(
    layout: &Layout,
    from: Option<&std::path::Path>,
    metered: bool,
    progress: &dyn Fn(Stage),
) -> Result<Arc<Program>, InstallError> {
    load_with(layout, from, metered, false, Mounts::default(), progress)
}

/// [`install_and_load`], where `shipped_warm` lets the warm image a bundle ships be the
/// program (when it checks out: nothing is compiled then).
fn load_with(
    layout: &Layout,
    from: Option<&std::path::Path>,
    metered: bool,
    shipped_warm: bool,
    mounts: Mounts,
    progress: &dyn Fn(Stage),
) -> Result<Arc<Program>, InstallError> {
    let files = runtime::install(layout, from, progress)?;
    let shipped = (shipped_warm && !metered)
        .then(|| {
            progress(Stage::Loading);
            vm::shipped_warm_image(&files, mounts.clone())
        })
        .flatten();
    let program = match shipped {
        Some(warm) => warm,
        None => Program::load(layout, files, metered, mounts, progress)?,
    };
    // The wheel cache is a convenience: without it the interpreter still works.
    if let Err(e) = crate::wheels::catalog::fetch(layout, &|m| tracing::info!("wheels: {m}")) {
        tracing::warn!("the package cache could not be filled ({e}); install_package will offer less");
    }
    progress(Stage::Ready);
    Ok(program)
}

/// Builds (or loads) the warm image for `plain` and waits for it, on a thread of its own: for
/// xtask and the tests, which have no server to build it in the background.
pub fn prepare_warm_image(plain: &Arc<Program>, layout: &Layout) -> Result<Arc<Program>, WarmError> {
    let (plain, layout) = (plain.clone(), layout.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| WarmError::WarmUp(format!("no async runtime for the warm-up: {e}")))?;
        rt.block_on(vm::warm_image(&plain, &layout))
    })
    .join()
    .unwrap_or_else(|_| Err(WarmError::WarmUp("the warm-up thread panicked".into())))
}

impl Programs {
    pub fn new(layout: Layout, metered: bool, warm_enabled: bool, mounts: Mounts) -> Arc<Self> {
        let (tx, _) = watch::channel(State::Idle);
        Arc::new(Programs {
            layout,
            mounts,
            metered,
            warm_enabled,
            warm: Mutex::new(None),
            plain: tokio::sync::OnceCell::new(),
            warm_phase: watch::Sender::new(if warm_enabled {
                WarmPhase::Loading
            } else {
                WarmPhase::Settled
            }),
            tx,
            started: Mutex::new(false),
            warm_task: Mutex::new(WarmTask::NotStarted),
        })
    }

    /// Whether the interpreter is installed and compiled.
    pub fn is_ready(&self) -> bool {
        matches!(&*self.tx.borrow(), State::Ready(_))
    }

    /// Starts installing in the background unless that is under way or done.
    pub fn start(self: &Arc<Self>) {
        {
            let mut started = self.started.locked();
            if *started {
                return;
            }
            *started = true;
        }
        // At once, so a call that came after a failure waits for this attempt, not the last.
        self.tx
            .send_replace(State::Installing(Stage::Checking.to_string()));
        let me = self.clone();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let tx = me.tx.clone();
            let progress = |stage: Stage| {
                tracing::info!("runtime: {stage}");
                tx.send_replace(State::Installing(stage.to_string()));
            };
            // The first program: from a bundle, the warm image it ships; else the plain one.
            let state = match load_with(
                &me.layout,
                None,
                me.metered,
                me.warm_enabled,
                me.mounts.clone(),
                &progress,
            ) {
                Ok(program) if program.image != Image::Plain => {
                    tracing::info!(
                        "the warm image shipped with the bundle is in use: new sandboxes start from it"
                    );
                    *me.warm.locked() = Some(program.clone());
                    me.warm_phase.send_replace(WarmPhase::Settled);
                    State::Ready(program)
                }
                Ok(program) => {
                    if me.warm_enabled {
                        let mut task = me.warm_task.locked();
                        if matches!(*task, WarmTask::NotStarted) {
                            let build = handle.spawn(me.clone().build_warm(program.clone()));
                            *task = WarmTask::Running(build);
                        }
                    }
                    State::Ready(program)
                }
                Err(e) => {
                    tracing::error!("runtime installation failed: {e}");
                    // Allow a later call to try again (the network may be back).
                    *me.started.locked() = false;
                    State::Failed(e.to_string())
                }
            };
            me.tx.send_replace(state);
        });
    }

    /// The plain image: the ready program when that is it, else compiled now into the home
    /// (about a minute, once).
    async fn plain(self: &Arc<Self>) -> Result<Arc<Program>, SandboxError> {
        let ready = self.get().await?;
        if ready.image == Image::Plain {
            return Ok(ready);
        }
        self.plain
            .get_or_try_init(|| async {
                call_scope::report(|| {
                    "compiling the plain interpreter for this sandbox (once, about a minute)".into()
                });
                let (layout, files, metered) = (self.layout.clone(), ready.files.clone(), self.metered);
                let mounts = self.mounts.clone();
                let loaded = tokio::task::spawn_blocking(move || {
                    Program::load(&layout, files, metered, mounts, &|s| {
                        tracing::info!("plain interpreter: {s}")
                    })
                })
                .await;
                match loaded {
                    Ok(Ok(p)) => Ok(p),
                    Ok(Err(e)) => Err(SandboxError::NotReady(format!(
                        "compiling the plain interpreter failed: {e}"
                    ))),
                    Err(e) => Err(SandboxError::NotReady(format!(
                        "compiling the plain interpreter stopped: {e}"
                    ))),
                }
            })
            .await
            .cloned()
    }

    /// Stops a warm-image build under way (the next start builds it again) and starts none.
    /// The abort takes only at the build's next await, and a build still running when the
    /// runtime goes sees its blocking file calls cancelled, which wasmtime-wasi answers with a
    /// panic: shutdown awaits what this returns (beside its saves) before the runtime goes.
    pub fn stop(&self) -> impl std::future::Future<Output = ()> + use<> {
        let build = match std::mem::replace(&mut *self.warm_task.locked(), WarmTask::Stopped) {
            WarmTask::Running(build) if !build.is_finished() => Some(build),
            _ => None,
        };
        if let Some(build) = &build {
            // Once the image is in use only its check is left: nothing to tell.
            if self.warm.locked().is_none() {
                tracing::info!("stopping the warm-image build; the next start finishes it");
            }
            build.abort();
            // Nobody waits for an image that will not come.
            self.warm_phase.send_replace(WarmPhase::Settled);
        }
        async move {
            let Some(build) = build else { return };
            let began = std::time::Instant::now();
            match tokio::time::timeout(STOP_WAIT, build).await {
                Ok(_) => tracing::debug!("the warm-image build stopped in {:?}", began.elapsed()),
                Err(_) => tracing::warn!("the warm-image build did not stop within {STOP_WAIT:?}"),
            }
        }
    }

    /// Whether shutdown has begun (a build cut off then is no failure to report).
    fn stopping(&self) -> bool {
        matches!(*self.warm_task.locked(), WarmTask::Stopped)
    }

    async fn build_warm(self: Arc<Self>, plain: Arc<Program>) {
        tracing::info!("preparing the warm image (numpy, pandas, matplotlib imported)");
        for attempt in 0..2 {
            let (plain2, layout) = (plain.clone(), self.layout.clone());
            let cached = tokio::task::spawn_blocking(move || vm::warm_image_cached(&plain2, &layout))
                .await
                .unwrap_or(false);
            if !cached {
                self.warm_phase.send_replace(WarmPhase::Building);
            }
            match vm::warm_image(&plain, &self.layout).await {
                Ok(warm) => {
                    tracing::info!("warm image ready: new sandboxes start from it");
                    *self.warm.locked() = Some(warm);
                    self.warm_phase.send_replace(WarmPhase::Settled);
                }
                Err(_) if self.stopping() => break,
                Err(e) => {
                    tracing::warn!(
                        "the warm image could not be built ({e}); sandboxes start from the plain image"
                    );
                    break;
                }
            }
            // Checked after it is in use: hashing it would delay the first sandbox.
            let (plain2, layout) = (plain.clone(), self.layout.clone());
            let intact = tokio::task::spawn_blocking(move || vm::verify_warm_image(&plain2, &layout))
                .await
                .unwrap_or(false);
            if intact || attempt == 1 {
                break;
            }
            *self.warm.locked() = None;
        }
        self.warm_phase.send_replace(WarmPhase::Settled);
    }

    /// The images to resume a state made from image `wanted`: at once when that one is
    /// loaded, else once the warm one is settled. (Waiting for the warm image when the state
    /// needs the plain one made the first call after a restart take a minute whenever the
    /// warm image was still to be built.)
    pub async fn images_for(
        self: &Arc<Self>,
        wanted: Option<&str>,
    ) -> Result<Vec<Arc<Program>>, SandboxError> {
        let base = self.get().await?;
        let warm = self.warm.locked().clone();
        let mut now: Vec<_> = warm.into_iter().chain([base.clone()]).collect();
        if wanted.is_some_and(|w| now.iter().any(|i| i.answers_to(w))) {
            return Ok(now);
        }
        if base.image != Image::Plain && wanted.is_some_and(|w| w.starts_with("plain-")) {
            // Saved from the plain image, which a bundle's warm start did not load.
            now.push(self.plain().await?);
            return Ok(now);
        }
        self.images_settled().await
    }

    /// For a state saved from image `wanted` when no image loaded answers to it: the plain
    /// program to restore it in, and the memory of the older warm image it was saved from
    /// (`vm::older_image_base`), if that image is still in the cache.
    pub async fn older(self: &Arc<Self>, wanted: &str) -> Option<(Arc<Program>, Arc<Vec<u8>>)> {
        if !wanted.starts_with("warm-") {
            return None;
        }
        let plain = self.plain().await.ok()?;
        let base = vm::older_image_base(&plain, &self.layout, wanted).await?;
        Some((plain, base))
    }

    /// Every image, once the warm one is settled: a saved state may need either.
    async fn images_settled(self: &Arc<Self>) -> Result<Vec<Arc<Program>>, SandboxError> {
        let plain = self.get().await?;
        let mut rx = self.warm_phase.subscribe();
        let _ = tokio::time::timeout(WARM_WAIT, rx.wait_for(|p| *p == WarmPhase::Settled)).await;
        let warm = self.warm.locked().clone();
        Ok(warm.into_iter().chain([plain]).collect())
    }

    /// How a sandbox with `memory_mb` of memory starts: from the warm image when it leaves the
    /// sandbox room to work (waiting for it while it loads), else from the plain one, importing
    /// the warm modules itself when only the warm image's absence kept it from having them.
    pub async fn for_memory(self: &Arc<Self>, memory_mb: u64) -> Result<Start, SandboxError> {
        let base = self.get().await?;
        let mut rx = self.warm_phase.subscribe();
        let _ = tokio::time::timeout(LOAD_WAIT, rx.wait_for(|p| *p != WarmPhase::Loading)).await;
        let warm = self.warm.locked().clone();
        match warm {
            Some(w) if fits(&w, memory_mb) => Ok(Start::from(w)),
            Some(_) if base.image == Image::Plain => Ok(Start::from(base)),
            Some(_) => Ok(Start::from(self.plain().await?)),
            None => Ok(Start {
                preload: self.warm_enabled && !self.stopping() && warm_start::would_fit(memory_mb),
                program: base,
            }),
        }
    }

    /// The interpreter, waiting for a preparation in progress (telling the client how it
    /// goes, every few seconds, when it listens): from a bundle it takes a second or two. A
    /// compile from a source build takes longer than clients wait, so after [`PATIENCE`] the
    /// call answers that it is still being prepared, and the model calls again.
    pub async fn get(self: &Arc<Self>) -> Result<Arc<Program>, SandboxError> {
        if let State::Ready(i) = &*self.tx.borrow() {
            return Ok(i.clone());
        }
        if matches!(&*self.tx.borrow(), State::Idle | State::Failed(_)) {
            self.start();
        }
        let mut rx = self.tx.subscribe();
        let began = std::time::Instant::now();
        loop {
            let stage = match &*rx.borrow_and_update() {
                State::Ready(i) => return Ok(i.clone()),
                State::Failed(msg) => {
                    return Err(SandboxError::NotReady(format!(
                        "installing it failed: {msg}. Run `mcp-code-sandbox install-runtime` in a terminal to see the details"
                    )));
                }
                State::Installing(stage) => stage.clone(),
                State::Idle => "starting".to_string(),
            };
            let waited = began.elapsed();
            if waited >= PATIENCE {
                return Err(SandboxError::NotReady(format!(
                    "it is still being prepared, once, on this server's first start ({stage}; about a minute or two in all). Nothing was run and nothing is lost: make the same call again in a minute and it will run"
                )));
            }
            call_scope::report(|| {
                format!(
                    "preparing the Python interpreter (first start only): {stage}; waited {} s",
                    waited.as_secs()
                )
            });
            tokio::select! {
                _ = tokio::time::timeout(REPORT_EVERY, rx.changed()) => {}
                _ = call_scope::cancelled() => {
                    return Err(SandboxError::NotReady(
                        "the call was cancelled while the interpreter was being prepared".into(),
                    ));
                }
            }
        }
    }
}
