//! The threads background runs execute on: a tokio runtime of their own whose workers run at
//! the lowest CPU priority (nice 19 on Linux, where a nice value belongs to one thread), so a
//! CPU-bound run hands the cores to interactive calls the moment one needs them, and still
//! uses every idle cycle. Measured with `cargo xtask bench --remote`: without it, `1+1` took
//! 273 ms while two CPU-bound runs went on (0.77 ms with none). Elsewhere the workers run at
//! the normal priority (lowering it there would lower the whole process); the run budget still
//! bounds how many there are.

use std::future::Future;
use std::sync::OnceLock;

static POOL: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();

/// The runtime, made at first use with `workers` threads; `None` if it could not be made (the
/// runs then go on the server's own runtime).
fn pool(workers: usize) -> Option<&'static tokio::runtime::Runtime> {
    POOL.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("background-run")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
            .inspect_err(|e| tracing::warn!("background runs go at normal priority: {e}"))
            .ok()
    })
    .as_ref()
}

fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call on the calling thread's own id.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
}

/// Runs `work` on the low-priority pool (of `workers` threads) and waits for it; `None` if it
/// panicked there.
pub async fn at_low_priority<T: Send + 'static>(
    workers: usize,
    work: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    match pool(workers) {
        Some(rt) => rt.spawn(work).await.ok(),
        None => Some(work.await),
    }
}
