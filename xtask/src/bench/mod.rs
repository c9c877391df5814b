//! `cargo xtask bench`: medians over many runs, each beside a baseline measured in the same
//! process, so the ratios mean something on a noisy machine.
//!
//! The entry points here run the parts: [`stdio`] (one server's round trips and speed),
//! [`pandas`] (the data stack), [`persistence`], [`memory`], [`remote`] (with [`background`]), [`kept`] and
//! [`code_mode`] and [`network`] (with [`index`]), all
//! through [`harness`], printed by [`table`] beside [`baselines`].

mod background;
mod baselines;
mod cluster;
mod code_mode;
mod folders;
mod fresh;
mod harness;
mod index;
mod ints;
mod kept;
mod linalg;
mod memory;
mod network;
mod oauth;
mod pandas;
mod persistence;
mod remote;
pub mod scale;
pub mod scale_store;
mod stdio;
mod store;
mod table;
mod views;

use std::path::PathBuf;

use mcp_code_sandbox::runtime::Layout;
use mcp_code_sandbox::wasm::direct::{SessionConfig, install_and_load};

use self::baselines::WasiPython;
use self::table::print_table;

/// A part of the bench run on its own, with its own flag.
#[derive(Clone, Copy)]
pub enum Part {
    /// `--remote`: HTTP beside stdio, and throughput.
    Remote,
    /// `--kept`: 1,000 kept sandboxes (start, listing, 50 clients, eviction).
    Kept,
    /// `--fresh`: a first install, the bundle started on an empty home.
    Fresh,
    /// `--code-mode`: downstream tool calls from guest code, and the bytes the model receives.
    CodeMode,
    /// `--network`: fetches from guest code through the host beside native ones.
    Network,
    /// `--views`: read_table on a million rows beside native pandas, export_notebook.
    Views,
    /// `--scale`: replicas behind haproxy: its added latency, calls per second with 1 and 3.
    Scale,
    /// `--store`: kept sandboxes in a team store: resume from it, bytes sent, calls per second.
    Store,
    /// `--folders`: a 1 GiB CSV read in place, beside native pandas and an upload; save_file.
    Folders,
    /// `--ints`: integer work (create, add, sum, from a list, groupby-sum) beside native numpy
    /// and beside the 32-bit integers of a library's code.
    Ints,
    /// `--linalg`: matrix products, LAPACK, sorting and scikit-learn beside native numpy (one
    /// BLAS thread and all) and beside the sandbox without host kernels.
    Linalg,
}

/// Only the rows of `part`, with its note.
pub async fn run_part(part: Part, root: PathBuf, bin: PathBuf, home: PathBuf) -> anyhow::Result<()> {
    install_and_load(&Layout::new(&home), None, false, &|s| eprintln!("runtime: {s}"))?;
    let (rows, note) = match part {
        Part::Remote => {
            eprintln!("bench: remote mode (HTTP beside stdio, throughput)");
            let (mut rows, note) = remote::rows(&bin, &home).await?;
            rows.extend(background::rows(&bin, &home).await?);
            rows.extend(oauth::rows(&root, &bin, &home).await?);
            (rows, note)
        }
        Part::Kept => {
            eprintln!("bench: 1,000 kept sandboxes (start, listing, 50 clients, eviction)");
            kept::rows(&bin, &home).await?
        }
        Part::Network => {
            eprintln!("bench: network (fetches from guest code through the host, installs from an index)");
            let (mut rows, note) = network::rows(&bin, &home).await?;
            rows.extend(index::rows(&root, &bin, &home).await?);
            (rows, note)
        }
        Part::Scale => {
            eprintln!("bench: replicas behind haproxy (added latency, calls per second with 1 and 3)");
            scale::bench_rows(&root, &bin, &home).await?
        }
        Part::Store => {
            eprintln!("bench: a team store (resume from it beside from disk, bytes sent, calls per second)");
            store::rows(&root, &bin, &home).await?
        }
        Part::Views => {
            eprintln!("bench: views (read_table, export_notebook)");
            views::rows(&root, &bin, &home).await?
        }
        Part::Folders => {
            eprintln!("bench: the user's folders (read in place, save_file)");
            folders::rows(&root, &bin, &home).await?
        }
        Part::CodeMode => {
            eprintln!("bench: code mode (downstream calls from guest code)");
            code_mode::rows(&root, &bin, &home).await?
        }
        Part::Ints => ints::rows(&root, &bin, &home).await?,
        Part::Linalg => linalg::rows(&root, &bin, &home).await?,
        Part::Fresh => {
            let bundle = xtask::bundle::ensure_current(&root, &bin, &home).await?;
            fresh::rows(&bundle).await?
        }
    };
    print_table(rows);
    println!("\n{note}");
    Ok(())
}

/// Every row but the kept-sandbox ones (`cargo xtask bench [--fuel]`).
pub async fn run(bin: PathBuf, home: PathBuf, fuel: bool) -> anyhow::Result<()> {
    let layout = Layout::new(&home);
    let program = install_and_load(&layout, None, false, &|s| eprintln!("runtime: {s}"))?;
    let scratch = std::env::temp_dir().join(format!("mcs-bench-{}", std::process::id()));
    let cfg = SessionConfig::throwaway(&scratch, 1 << 30)?;
    let ip = stdio::in_process(&program, &cfg).await?;
    let wp = WasiPython::measure();

    let mut rows = stdio::rows(&bin, &home, &ip, &wp).await?;
    if fuel {
        eprintln!("bench: fuel metering (compiles the metered module once)");
        let metered = install_and_load(&layout, None, true, &|s| eprintln!("runtime (metered): {s}"))?;
        rows.push(stdio::fuel_row(&metered, &cfg, ip.cpu).await?);
    }
    rows.extend(pandas::rows(&bin, &home, &wp).await?);
    eprintln!("bench: fork, checkpoint, restore, save and restart");
    let persistence_note = persistence::rows(&bin, &home, &mut rows).await?;
    eprintln!("bench: remote mode (HTTP beside stdio, throughput)");
    let (remote_rows, remote_note) = remote::rows(&bin, &home).await?;
    rows.extend(remote_rows);
    let pandas_memory = pandas::memory_note(&bin, &home).await?;
    let memory = memory::note(&bin, &home, ip.numpy_bytes).await?;
    let _ = std::fs::remove_dir_all(&scratch);

    print_table(rows);
    if !wp.ran() {
        println!(
            "\nwasi-python's own host: skipped (its Python package and wasmtime-py are not importable here)."
        );
    }
    for note in memory
        .into_iter()
        .chain([persistence_note, remote_note])
        .chain(pandas_memory)
    {
        println!("\n{note}");
    }
    Ok(())
}
