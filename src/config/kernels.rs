//! Host kernels (the runtime's matrix products computed natively; see wasm/vm/kernels): on or
//! off, and how many threads they may use.

use clap::Args;

#[derive(Clone, Debug, Args)]
pub struct KernelSettings {
    /// Compute the sandboxes' BLAS matrix products (numpy's `@`, LAPACK's and scikit-learn's
    /// blocks) with native kernels on the sandbox's own memory: numbers in, numbers out, within
    /// the call's time limit. 0 (false) keeps every instruction that touches sandbox data in
    /// WebAssembly, several times slower for linear algebra.
    #[arg(long, env = "CODE_SANDBOX_HOST_KERNELS", default_value_t = true, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub host_kernels: bool,

    /// Threads the host kernels share among all sandboxes; 0 = one fewer than the machine's
    /// cores (at least one), leaving a core for the server.
    #[arg(long, env = "CODE_SANDBOX_KERNEL_THREADS", default_value_t = 0)]
    pub kernel_threads: usize,
}
