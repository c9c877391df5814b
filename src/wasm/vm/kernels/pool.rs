//! The host kernels' own threads. A product runs here, never on the async threads, so a guest
//! multiplying in a loop cannot hold up other sandboxes, the protocol or `/healthz`; and the
//! guest's memory is only written while its call waits here (see [`Running`]).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// What the server was told to do with host kernels, once, at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub enabled: bool,
    /// Threads of the pool; 0 = one fewer than the machine's cores (at least one).
    pub threads: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            enabled: true,
            threads: 0,
        }
    }
}

static SETUP: OnceLock<Setup> = OnceLock::new();
static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

/// Sets how host kernels run; the first call counts (the server makes it before any sandbox
/// starts). Without it they run with the defaults.
pub fn configure(setup: Setup) {
    let _ = SETUP.set(setup);
}

pub fn setup() -> Setup {
    *SETUP.get_or_init(Setup::default)
}

/// The pool's size for `setup`.
pub fn threads(setup: Setup) -> usize {
    match setup.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1)),
        n => n,
    }
}

/// The pool, made on first use; none when host kernels are off or it could not be made (then
/// every product stays in the guest, and the log says why once).
pub fn pool() -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_init(|| {
        let setup = setup();
        if !setup.enabled {
            return None;
        }
        let made = rayon::ThreadPoolBuilder::new()
            .num_threads(threads(setup))
            .thread_name(|i| format!("host-kernel-{i}"))
            .build();
        match made {
            Ok(pool) => Some(pool),
            Err(e) => {
                tracing::warn!("host kernels are off: their threads could not be started ({e})");
                None
            }
        }
    })
    .as_ref()
}

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const FINISHED: u8 = 2;
const ABANDONED: u8 = 3;

/// A job's progress, shared between the waiting call and the pool.
struct Progress {
    state: AtomicU8,
    finished: Mutex<bool>,
    wake: Condvar,
}

/// A job handed to the pool. Dropping it (the call's future dropped: the sandbox closed, the
/// server stopping) does not return while the job still touches the guest's memory: a queued
/// job is called off, a running one is asked to stop and waited for (one tile at most).
pub struct Running {
    progress: Arc<Progress>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let p = &self.progress;
        if p.state
            .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return;
        }
        self.stop.store(true, Ordering::Release);
        let mut done = p.finished.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = p.wake.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Runs `job` on `pool` and waits for its answer without holding an async thread. `job` gets
/// a flag that turns true when the waiting call is dropped; it must return soon after.
pub async fn run<R, F>(pool: &rayon::ThreadPool, job: F) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(&std::sync::atomic::AtomicBool) -> R + Send + 'static,
{
    let progress = Arc::new(Progress {
        state: AtomicU8::new(QUEUED),
        finished: Mutex::new(false),
        wake: Condvar::new(),
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let running = Running {
        progress: progress.clone(),
        stop: stop.clone(),
    };
    pool.spawn(move || {
        if progress
            .state
            .compare_exchange(QUEUED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        // A panic in a kernel must not take the pool's thread (rayon would abort): it is the
        // call's failure, reported as such.
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&stop)));
        progress.state.store(FINISHED, Ordering::Release);
        *progress.finished.lock().unwrap_or_else(|e| e.into_inner()) = true;
        progress.wake.notify_all();
        let _ = tx.send(out.ok());
    });
    let answer = rx.await.ok().flatten();
    drop(running);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn pool() -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a pool")
    }

    #[tokio::test]
    async fn a_job_answers_and_a_panicking_one_is_none() {
        let pool = pool();
        assert_eq!(run(&pool, |_| 7).await, Some(7));
        assert_eq!(
            run(&pool, |_: &AtomicBool| -> u8 { panic!("kernel bug") }).await,
            None
        );
        assert_eq!(run(&pool, |_| 8).await, Some(8), "the pool survives a panic");
    }

    #[tokio::test]
    async fn a_dropped_call_waits_until_its_job_has_stopped() {
        let pool = pool();
        let touched = Arc::new(AtomicBool::new(false));
        let seen = touched.clone();
        let call = run(&pool, move |stop: &AtomicBool| {
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(50));
            seen.store(true, Ordering::Release);
        });
        let _ = tokio::time::timeout(Duration::from_millis(30), call).await;
        assert!(
            touched.load(Ordering::Acquire),
            "the drop returned before the job stopped"
        );
    }
}
