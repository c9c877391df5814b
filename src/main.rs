//! The `mcp-code-sandbox` binary: serves MCP over stdio, or installs the runtime.

use std::process::ExitCode;
use std::sync::Arc;

use mcp_code_sandbox::config::{Command, MAX_REQUEST_BYTES, Settings};
use mcp_code_sandbox::runtime::Layout;
use mcp_code_sandbox::server::{SandboxServer, StdioTransport};
use mcp_code_sandbox::wasm::direct::install_and_load;
use rmcp::ServiceExt;
use tracing_subscriber::EnvFilter;

fn init_logging() {
    // stdout belongs to the MCP protocol: every log line goes to stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
}

fn main() -> ExitCode {
    let settings = Settings::load();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcp-code-sandbox: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match settings.command.clone() {
        Some(Command::InstallRuntime { from }) => install_runtime(&settings, from),
        None | Some(Command::Serve) => runtime.block_on(serve(settings)),
    };
    // Give blocking file tasks a moment to finish instead of cutting them off mid-way.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-code-sandbox: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn install_runtime(settings: &Settings, from: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let layout = Layout::new(settings.home_dir());
    let progress = |stage: mcp_code_sandbox::runtime::Stage| eprintln!("runtime: {stage}");
    install_and_load(&layout, from.as_deref(), settings.fuel_per_call > 0, &progress)?;
    eprintln!("runtime: installed under {}", layout.home.display());
    Ok(())
}

/// Each sandbox may hold a few hundred files open, each with a host twin (see
/// `wasm::guest_fs`); the usual soft limit of 1024 descriptors is too low for many sandboxes,
/// so it is raised towards the hard limit, as servers commonly do.
#[cfg(unix)]
fn raise_open_file_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed in.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        let wanted = lim.rlim_max.min(65_536);
        if lim.rlim_cur < wanted {
            lim.rlim_cur = wanted;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::warn!("could not raise the open-file limit; many sandboxes may run short");
            }
        }
    }
}

#[cfg(not(unix))]
fn raise_open_file_limit() {}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    raise_open_file_limit();
    let settings = Arc::new(settings);
    let backend = mcp_code_sandbox::app::backend(settings.clone())?;
    let server = SandboxServer::new(backend.clone(), settings.clone());
    tracing::info!("serving MCP over stdio ({} backend)", backend.backend());
    let transport = StdioTransport::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        MAX_REQUEST_BYTES,
        settings.result_budget(),
    );
    let service = server.serve(transport).await?;
    let quit = async {
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await?;
        anyhow::Ok(())
    };
    tokio::select! {
        r = service.waiting() => { r?; }
        r = quit => { r?; tracing::info!("signal received, shutting down"); }
    }
    backend.shutdown().await;
    Ok(())
}
