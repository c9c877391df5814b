//! The host side of the binding: one host function per bound import, which reads the call,
//! charges fuel, hands the product to the kernel pool and waits, within the turn's deadline.

use std::sync::atomic::Ordering;
use std::time::Instant;

use wasmtime::{Caller, Extern, ExternType, Linker, Module, Val};

use super::args::{self, Product};
use super::pool;
use super::product::{self, Base, Outcome};
use super::table::{BOUND, Entry, MODULE};
use crate::wasm::vm::turn::DeadlineReached;

/// The import's answers: the host computed the product, or the guest's own code must.
const DONE: i32 = 1;
const DECLINED: i32 = 0;

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
            wasmtime::bail!("the runtime imports {MODULE}.{}, which this server does not have", import.name());
        };
        let ExternType::Func(ty) = import.ty() else {
            wasmtime::bail!("the runtime imports {MODULE}.{} as something other than a function", entry.name);
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
    let Ok(product) = args::read(&entry, params, memory.data(&caller)) else {
        return Ok(DECLINED);
    };
    if !charge(&mut caller, &product) {
        return Ok(DECLINED);
    }
    let until = deadline(caller.data());
    if Instant::now() >= until {
        return Err(DeadlineReached.into());
    }
    let base = Base(memory.data_ptr(&caller));
    let outcome = pool::run(pool, move |stop| {
        let stop = || stop.load(Ordering::Acquire) || Instant::now() >= until;
        // SAFETY: `product` was checked against this memory just now; the guest waits in this
        // call (nothing else runs in its Store) until the job has finished or, if this call is
        // dropped, until it has stopped (`pool::Running`).
        unsafe { product::compute(&product, base, &stop) }
    })
    .await;
    match outcome {
        Some(Outcome::Done) => {
            crate::metrics::host_kernel(entry.elem.label());
            Ok(DONE)
        }
        Some(Outcome::Stopped) => Err(DeadlineReached.into()),
        None => wasmtime::bail!(
            "the host kernel for {} failed; set CODE_SANDBOX_HOST_KERNELS=0 to run the runtime's own, and report it",
            entry.name
        ),
    }
}

/// With fuel metering on, a product costs one unit per multiply-add (the guest's own kernel
/// burns about three); one the fuel left cannot pay stays in the guest, which then runs out
/// of fuel as it would have.
fn charge<T>(caller: &mut Caller<'_, T>, product: &Product) -> bool {
    let Ok(left) = caller.get_fuel() else {
        return true;
    };
    match left.checked_sub(product.work()) {
        Some(rest) => caller.set_fuel(rest).is_ok(),
        None => false,
    }
}
