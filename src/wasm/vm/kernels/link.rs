//! The host side of the binding: one host function per bound import, which reads the call,
//! charges fuel, hands the product to the kernel pool and waits, within the turn's deadline.

use std::sync::atomic::Ordering;
use std::time::Instant;

use wasmtime::{Caller, Extern, ExternType, Linker, Module, Val};

use super::args;
use super::packed::{self, Packed};
use super::pool;
use super::product;
use super::shapes::{Base, Decline, Outcome, Product};
use super::sort::{self, Sort};
use super::table::{BOUND, Entry, Form, MODULE};
use super::vector::{self, Vector};
use crate::wasm::vm::turn::DeadlineReached;

/// The import's answers: the host computed the product, or the guest's own code must.
const DONE: i32 = 1;
const DECLINED: i32 = 0;

/// Products up to this many multiply-adds (a tenth of a millisecond or so) run on the thread
/// that runs the guest, as the guest's own code would: handing them to the pool and back
/// costs more than they take. Larger ones go to the pool.
const INLINE_WORK: u64 = 1 << 22;

/// Where the host functions find the running turn's deadline in the Store's data.
pub type Project<T> = fn(&T) -> Instant;

/// Links a host function for each `host_kernels` import `module` has (a module bound by
/// [`super::bind`]; an unbound one has none and needs nothing).
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    module: &Module,
    deadline: Project<T>,
) -> wasmtime::Result<()> {
    for import in module.imports().filter(|i| i.module() == MODULE) {
        let Some(entry) = BOUND.iter().find(|e| e.name == import.name()).copied() else {
            wasmtime::bail!(
                "the runtime imports {MODULE}.{}, which this server does not have",
                import.name()
            );
        };
        let ExternType::Func(ty) = import.ty() else {
            wasmtime::bail!(
                "the runtime imports {MODULE}.{} as something other than a function",
                entry.name
            );
        };
        linker.func_new_async(MODULE, entry.name, ty, move |caller, params, results| {
            Box::new(async move {
                results[0] = Val::I32(call(caller, entry, params, deadline).await?);
                Ok(())
            })
        })?;
    }
    Ok(())
}

async fn call<T: Send>(
    mut caller: Caller<'_, T>,
    entry: Entry,
    params: &[Val],
    deadline: Project<T>,
) -> wasmtime::Result<i32> {
    let Some(pool) = pool::pool() else {
        return Ok(DECLINED);
    };
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return Ok(DECLINED);
    };
    let job = match Job::read(&entry, params, memory.data(&caller)) {
        Ok(job) => job,
        Err(why) => {
            tracing::trace!("{}: left to the guest ({why:?})", entry.name);
            return Ok(DECLINED);
        }
    };
    tracing::trace!("{}: {} units of work on the host", entry.name, job.work());
    if !charge(&mut caller, job.work()) {
        return Ok(DECLINED);
    }
    let until = deadline(caller.data());
    if Instant::now() >= until {
        return Err(DeadlineReached.into());
    }
    let base = Base(memory.data_ptr(&caller));
    if job.work() <= INLINE_WORK {
        // SAFETY: as below; this thread runs the guest, which waits for this call.
        let outcome = unsafe { job.run(base, &|| Instant::now() >= until) };
        return finish(entry, outcome);
    }
    let outcome = pool::run(pool, move |stop| {
        let stop = || stop.load(Ordering::Acquire) || Instant::now() >= until;
        // SAFETY: `job` was checked against this memory just now; the guest waits in this
        // call (nothing else runs in its Store) until the job has finished or, if this call is
        // dropped, until it has stopped (`pool::Running`).
        unsafe { job.run(base, &stop) }
    })
    .await;
    match outcome {
        Some(outcome) => finish(entry, outcome),
        None => wasmtime::bail!(
            "the host kernel for {} failed; set CODE_SANDBOX_HOST_KERNELS=0 to run the runtime's own, and report it",
            entry.name
        ),
    }
}

fn finish(entry: Entry, outcome: Outcome) -> wasmtime::Result<i32> {
    match outcome {
        Outcome::Done => {
            crate::telemetry::metrics::host_kernel(entry.name);
            Ok(DONE)
        }
        Outcome::Stopped => Err(DeadlineReached.into()),
    }
}

/// With fuel metering on, a product costs one unit per multiply-add (the guest's own kernel
/// burns about three); one the fuel left cannot pay stays in the guest, which then runs out
/// of fuel as it would have.
fn charge<T>(caller: &mut Caller<'_, T>, work: u64) -> bool {
    let Ok(left) = caller.get_fuel() else {
        return true;
    };
    match left.checked_sub(work) {
        Some(rest) => caller.set_fuel(rest).is_ok(),
        None => false,
    }
}

/// A checked call, of either kind.
enum Job {
    Product(Product),
    /// Two products into one result, one after the other (syr2k).
    Pair([Product; 2]),
    Packed(Packed),
    Vector(Vector),
    Sort(Sort),
}

impl Job {
    fn read(entry: &Entry, params: &[Val], memory: &[u8]) -> Result<Job, Decline> {
        match entry.form {
            Form::Cblas | Form::Fortran | Form::CblasSyrk | Form::FortranSyrk => {
                args::read(entry, params, memory).map(Job::Product)
            }
            Form::FortranSyr2k => args::read_syr2k(entry.elem, params, memory).map(Job::Pair),
            Form::Packed => packed::read(entry.elem, params, memory).map(Job::Packed),
            Form::Level2(kind) => vector::read(kind, entry.elem, params, memory).map(Job::Vector),
            Form::Sort(keys) => sort::read(keys, params, memory).map(Job::Sort),
        }
    }

    fn work(&self) -> u64 {
        match self {
            Job::Product(p) => p.work(),
            Job::Pair([p, q]) => p.work().saturating_add(q.work()),
            Job::Packed(p) => p.work(),
            Job::Vector(v) => v.work(),
            Job::Sort(s) => s.work(),
        }
    }

    /// # Safety
    /// As [`product::compute`]: checked against the memory at `base`, untouched meanwhile.
    unsafe fn run(&self, base: Base, stop: &(dyn Fn() -> bool + Sync)) -> Outcome {
        match self {
            // SAFETY: as the caller promises.
            Job::Product(p) => unsafe { product::compute(p, base, stop) },
            // SAFETY: as the caller promises; the second reads what the first wrote only
            // through `c`, which neither reads as an operand.
            Job::Pair([p, q]) => match unsafe { product::compute(p, base, stop) } {
                Outcome::Done => unsafe { product::compute(q, base, stop) },
                Outcome::Stopped => Outcome::Stopped,
            },
            // One inner-kernel call is a block of the routine that makes it: small enough to
            // run whole once started.
            Job::Packed(p) if !stop() => {
                // SAFETY: as the caller promises.
                unsafe { packed::compute(p, base) };
                Outcome::Done
            }
            Job::Packed(_) => Outcome::Stopped,
            // A level-2 call reads its matrix once: no longer than reading it takes.
            Job::Vector(v) if !stop() => {
                // SAFETY: as the caller promises.
                unsafe { vector::compute(v, base) };
                Outcome::Done
            }
            Job::Vector(_) => Outcome::Stopped,
            // SAFETY: as the caller promises.
            Job::Sort(s) => unsafe { sort::compute(s, base, stop) },
        }
    }
}
