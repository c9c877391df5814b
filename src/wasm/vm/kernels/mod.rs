//! Host kernels: the runtime's BLAS matrix products computed by native code.
//!
//! The runtime's OpenBLAS runs its generic WebAssembly kernel on one thread, many times slower
//! than the same product natively; numpy, scipy and scikit-learn spend their time there. So the
//! module is bound ([`bind`]): each entry point of [`table::BOUND`] (BLAS's gemm, and the inner
//! kernel every level-3 routine and LU ends in) first offers its call to the host, which reads
//! the arguments ([`args`], [`packed`]: every pointer and extent checked against the guest's
//! memory), computes the product on the guest's own memory with a native kernel ([`product`])
//! on a pool of its own ([`pool`]), tile by tile within the turn's deadline, and
//! answers "done"; anything it does not take (invalid, small, conjugated, overlapping) the
//! guest's own code runs as before. Numbers in, numbers out: no new capability reaches the
//! guest. `CODE_SANDBOX_HOST_KERNELS=0` leaves every product in the guest.

mod args;
mod bind;
mod link;
mod multiply;
mod packed;
mod pool;
mod product;
mod shapes;
mod sort;
mod table;
mod vector;

pub use bind::bind;
pub use link::add_to_linker;
pub use pool::{Setup, configure, threads};

/// Names the binding in cache keys: bump it when the trampoline changes; what
/// [`table::BOUND`] binds is named by [`binding`] itself.
pub const VERSION: &str = "host-kernels-9";

/// The binding as cache keys name it: [`VERSION`] and a digest of every bound function's
/// name, form and size gate (compiled into its trampoline), so a module bound by another table is never loaded from a cache (a
/// function added to the table without a new `VERSION` once was).
pub fn binding() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for e in table::BOUND {
        h.update(format!(
            "{}|{:?}|{:?}|{:?}\n",
            e.name,
            e.form,
            e.elem,
            e.form.gate()
        ));
    }
    format!("{VERSION}-{}", hex::encode(&h.finalize()[..6]))
}
