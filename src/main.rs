//! The `mcp-code-sandbox` binary: serves MCP over stdio or HTTP, installs the runtime, and
//! manages remote mode's tokens.

use std::process::ExitCode;
use std::sync::Arc;

use mcp_code_sandbox::config::{
    Command, DEFAULT_LOG_FILTER, MAX_REQUEST_BYTES, Settings, TokenAction, Transport,
};
use mcp_code_sandbox::remote;
use mcp_code_sandbox::runtime::Layout;
use mcp_code_sandbox::server::{SandboxServer, StdioTransport};
use mcp_code_sandbox::wasm::direct::{install_and_load, prepare_warm_image, warm_image_cached};
use rmcp::ServiceExt;
use tracing_subscriber::EnvFilter;

fn init_logging() {
    // stdout belongs to the MCP protocol: every log line goes to stderr.
    tracing_subscriber::fmt()
        // Every control character but an event's last newline is escaped: a name or id from
        // outside cannot add a line or recolour the terminal.
        .with_writer(|| mcp_code_sandbox::telemetry::log_safe::SafeStderr)
        .with_ansi(false)
        .with_env_filter(
            EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .init();
}

fn main() -> ExitCode {
    let settings = Settings::load();
    init_logging();
    // reqwest is built without a default TLS provider: every client in this process (E2B,
    // downstream HTTP servers, guest egress) uses this one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let async_rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcp-code-sandbox: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match settings.command.clone() {
        Some(Command::InstallRuntime { from }) => install_runtime(&settings, from),
        Some(Command::Token { action }) => token(&settings, action),
        None | Some(Command::Serve) => async_rt.block_on(serve(settings)),
    };
    // Give blocking file tasks a moment to finish instead of cutting them off mid-way.
    async_rt.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-code-sandbox: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn install_runtime(settings: &Settings, from: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let began = std::time::Instant::now();
    let layout = Layout::new(settings.home_dir());
    let progress = |stage: mcp_code_sandbox::runtime::Stage| eprintln!("runtime: {stage}");
    let metered = settings.fuel_per_call > 0;
    let plain = install_and_load(&layout, from.as_deref(), metered, &progress)?;
    // The server's first start then loads the warm image instead of building it for a minute
    // or two while the first sandboxes import pandas themselves.
    if settings.warm_image && !metered {
        if warm_image_cached(&plain, &layout) {
            eprintln!("runtime: the warm image is already built; checking it");
        } else {
            eprintln!(
                "runtime: building the warm image (numpy, pandas, matplotlib imported; a minute or two, once)"
            );
        }
        prepare_warm_image(&plain, &layout)?;
    }
    eprintln!(
        "runtime: installed under {} in {:.1} s",
        layout.home.display(),
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

fn token(settings: &Settings, action: TokenAction) -> anyhow::Result<()> {
    let file = settings.tokens_file();
    match action {
        TokenAction::Add { name } => {
            let token = remote::token_edit::add(&file, &name)?;
            // The token goes to stdout (to pipe into a secret store); the advice to stderr.
            println!("{token}");
            eprintln!(
                "token for '{name}' above; it is shown only this once (its SHA-256 is in {}).\n\
                 `mcp-code-sandbox --transport http` serves with this file{}; give the client `Authorization: Bearer <token>`.",
                file.display(),
                if settings.tokens.is_some() {
                    " while CODE_SANDBOX_TOKENS names it"
                } else {
                    " (the home's own)"
                }
            );
        }
        TokenAction::List => {
            for name in remote::token_edit::list(&file)? {
                println!("{name}");
            }
        }
        TokenAction::Remove { name } => {
            remote::token_edit::remove(&file, &name)?;
            eprintln!(
                "removed '{name}' from {}; its token stops working at its next request",
                file.display()
            );
        }
    }
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
    // Before the backend touches the home: a second remote-mode server there is refused.
    let _home = match settings.transport {
        Transport::Http => Some(remote::home_lock::claim(&settings.home_dir())?),
        Transport::Stdio => None,
    };
    if settings.transport == Transport::Http {
        remote::preflight(&settings).await?;
    }
    let network = mcp_code_sandbox::app::network(&settings)?;
    let backend = mcp_code_sandbox::app::backend(settings.clone())?;
    let code_mode = mcp_code_sandbox::app::code_mode(&settings, backend.as_ref());
    match settings.transport {
        Transport::Http => {
            let quit = async {
                if let Err(e) = quit_signal().await {
                    tracing::warn!("could not wait for signals: {e}");
                    std::future::pending::<()>().await;
                }
                tracing::info!("signal received, shutting down");
            };
            remote::serve(settings, backend, code_mode, network, quit).await?;
        }
        Transport::Stdio => {
            // The local user: a remote-mode server on the same home may have made sandboxes
            // that belong to its principals, and those stay theirs.
            let backend =
                mcp_code_sandbox::tenancy::LocalView::wrap(backend, settings.home_dir().join("owners.json"));
            let server = SandboxServer::new(backend.clone(), settings.clone())
                .with_code_mode(code_mode.clone())
                .with_network(network);
            tracing::info!("serving MCP over stdio ({} backend)", backend.backend());
            let transport = StdioTransport::new(
                tokio::io::stdin(),
                tokio::io::stdout(),
                MAX_REQUEST_BYTES,
                settings.transport_budget(),
            );
            let service = server.serve(transport).await?;
            let waiting = service.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                r = &mut waiting => { r?; }
                r = quit_signal() => {
                    r?;
                    tracing::info!("signal received, shutting down");
                    // Running calls stop now and answer that the server is shutting down; the
                    // service keeps running a moment so those answers reach the client.
                    backend.stop_running();
                    let _ = tokio::time::timeout(ANSWER_GRACE, &mut waiting).await;
                }
            }
            backend.shutdown().await;
            if let Some(g) = &code_mode {
                g.shutdown();
            }
        }
    }
    Ok(())
}

/// At a signal, how long the stdio service keeps running so that calls stopped by the
/// shutdown can send their answers.
const ANSWER_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// SIGTERM (service managers, containers) or Ctrl-C.
async fn quit_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    // Windows has no SIGTERM: Ctrl-C, the console closing, and the machine shutting down
    // end the server the same way (the last two leave it a few seconds).
    #[cfg(windows)]
    {
        use tokio::signal::windows;
        let (mut close, mut shutdown) = (windows::ctrl_close()?, windows::ctrl_shutdown()?);
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = close.recv() => {}
            _ = shutdown.recv() => {}
        }
    }
    #[cfg(not(any(unix, windows)))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
