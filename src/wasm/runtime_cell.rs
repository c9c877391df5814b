//! The interpreter, installed and compiled in the background the first time it is needed.
//!
//! The server must answer `initialize` within a second even on a machine that has never seen
//! the runtime, so installation runs on a blocking thread and tool calls wait for it briefly,
//! then report how far it got instead of hanging the client.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::vm::{CompiledRuntime, EngineError};
use crate::runtime::{self, Layout, RuntimeError, Stage};
use crate::sandbox::SandboxError;

#[derive(Clone)]
pub enum State {
    Idle,
    Installing(String),
    Ready(Arc<CompiledRuntime>),
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

pub struct RuntimeCell {
    layout: Layout,
    metered: bool,
    /// Updated with `send_replace`: a plain `send` is dropped while nobody is subscribed, which
    /// once lost the `Ready` of an install that finished before the first call came.
    tx: watch::Sender<State>,
    started: Mutex<bool>,
}

/// How long a tool call waits for an installation in progress before answering.
const PATIENCE: Duration = Duration::from_secs(20);

/// Installs (if needed) and loads the interpreter; the one path for xtask, CLI and server.
pub fn install_and_load(
    layout: &Layout,
    from: Option<&std::path::Path>,
    metered: bool,
    progress: &dyn Fn(Stage),
) -> Result<Arc<CompiledRuntime>, InstallError> {
    let files = runtime::install(layout, from, progress)?;
    progress(Stage::Compiling);
    let interp = CompiledRuntime::load(layout, files, metered)?;
    // The wheel cache is a convenience: without it the interpreter still works.
    if let Err(e) = crate::wheels::catalog::fetch(layout, &|m| tracing::info!("wheels: {m}")) {
        tracing::warn!("the package cache could not be filled ({e}); install_package will offer less");
    }
    progress(Stage::Ready);
    Ok(interp)
}

impl RuntimeCell {
    pub fn new(layout: Layout, metered: bool) -> Arc<Self> {
        let (tx, _) = watch::channel(State::Idle);
        Arc::new(RuntimeCell {
            layout,
            metered,
            tx,
            started: Mutex::new(false),
        })
    }

    /// Starts installing in the background unless that is under way or done.
    pub fn start(self: &Arc<Self>) {
        {
            let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
            if *started {
                return;
            }
            *started = true;
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let tx = me.tx.clone();
            let progress = |stage: Stage| {
                tracing::info!("runtime: {stage}");
                tx.send_replace(State::Installing(stage.to_string()));
            };
            let state = match install_and_load(&me.layout, None, me.metered, &progress) {
                Ok(interp) => State::Ready(interp),
                Err(e) => {
                    tracing::error!("runtime installation failed: {e}");
                    // Allow a later call to try again (the network may be back).
                    *me.started.lock().unwrap_or_else(|p| p.into_inner()) = false;
                    State::Failed(e.to_string())
                }
            };
            me.tx.send_replace(state);
        });
    }

    /// The interpreter, waiting a little for an installation in progress.
    pub async fn get(self: &Arc<Self>) -> Result<Arc<CompiledRuntime>, SandboxError> {
        if let State::Ready(i) = &*self.tx.borrow() {
            return Ok(i.clone());
        }
        if matches!(&*self.tx.borrow(), State::Idle | State::Failed(_)) {
            self.start();
        }
        let mut rx = self.tx.subscribe();
        let waited = tokio::time::timeout(
            PATIENCE,
            rx.wait_for(|s| matches!(s, State::Ready(_) | State::Failed(_))),
        )
        .await;
        match waited {
            Ok(Ok(state)) => match &*state {
                State::Ready(i) => Ok(i.clone()),
                State::Failed(msg) => Err(SandboxError::NotReady(format!(
                    "installing it failed: {msg}. Run `mcp-code-sandbox install-runtime` in a terminal to see the details"
                ))),
                _ => Err(SandboxError::NotReady("unexpected state".into())),
            },
            _ => {
                let stage = match &*self.tx.borrow() {
                    State::Ready(i) => return Ok(i.clone()),
                    State::Installing(s) => s.clone(),
                    _ => "starting".into(),
                };
                Err(SandboxError::NotReady(format!(
                    "it is being installed on first use ({stage}). Try again in a minute"
                )))
            }
        }
    }
}
