//! What the tool call running on this task offers the code beneath it: a way to report
//! progress to the client, and the client's cancellation. The server opens one scope per call;
//! a backend that has to wait deep inside (for the runtime a first start is preparing, say)
//! reports through it without every signature on the way carrying it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::host::lock::Locked;

/// Sends one progress notification: the progress value and a message.
pub type Notify = Arc<dyn Fn(f64, String) + Send + Sync>;

/// One tool call's progress and cancellation.
pub struct CallScope {
    started: Instant,
    /// The last progress value sent: MCP asks for each to be larger than the one before.
    last: Mutex<f64>,
    /// `None` when the client gave no progress token.
    notify: Option<Notify>,
    cancel: CancellationToken,
    /// The remote principal making the call (none over stdio): events it causes name it.
    principal: Option<Arc<str>>,
    /// The sandbox the call acts on, once the backend knows it (see [`acting_on`]).
    sandbox: Mutex<Option<String>>,
}

impl CallScope {
    pub fn new(notify: Option<Notify>, cancel: CancellationToken, principal: Option<Arc<str>>) -> Arc<Self> {
        Arc::new(CallScope {
            started: Instant::now(),
            last: Mutex::new(0.0),
            notify,
            cancel,
            principal,
            sandbox: Mutex::new(None),
        })
    }

    pub fn principal(&self) -> Option<Arc<str>> {
        self.principal.clone()
    }

    pub fn sandbox(&self) -> Option<String> {
        self.sandbox.locked().clone()
    }

    /// Reports `message`, with the seconds since the call began as the progress value.
    pub fn report(&self, message: String) {
        let Some(notify) = &self.notify else { return };
        let value = {
            let mut last = self.last.locked();
            *last = self.started.elapsed().as_secs_f64().max(*last + 0.001);
            *last
        };
        notify(value, message);
    }

    /// Whether a client listens for progress.
    pub fn reports(&self) -> bool {
        self.notify.is_some()
    }
}

tokio::task_local! {
    static CURRENT: Arc<CallScope>;
}

/// Runs `f` as part of the call `scope` describes.
pub async fn scope<F: Future>(scope: Arc<CallScope>, f: F) -> F::Output {
    CURRENT.scope(scope, f).await
}

/// The call running on this task, if any.
pub fn current() -> Option<Arc<CallScope>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Reports progress of the call running on this task, if it has a client listening.
pub fn report(message: impl FnOnce() -> String) {
    if let Some(s) = current().filter(|s| s.reports()) {
        s.report(message());
    }
}

/// Records that the call running on this task acts on sandbox `id`, so what happens deeper
/// down without knowing the id (a package fetched) can be told to its owner.
pub fn acting_on(id: &str) {
    if let Some(s) = current() {
        *s.sandbox.locked() = Some(id.to_string());
    }
}

/// Resolves when the call running on this task is cancelled; never outside a call.
pub async fn cancelled() {
    match current() {
        Some(s) => s.cancel.cancelled().await,
        None => std::future::pending().await,
    }
}
