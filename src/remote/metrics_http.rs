//! `/metrics` on an address of its own (`CODE_SANDBOX_METRICS_LISTEN`), never on the MCP
//! port: metrics describe every principal's use, so only whoever can reach the operators'
//! address (Prometheus inside the cluster) reads them. Each scrape reads the levels (sandboxes
//! by state, memory, calls running and waiting) then renders every metric.

use std::sync::Arc;

use axum::Router;
use axum::response::IntoResponse;

use super::conns::{self, Limits};
use crate::sandbox::Interpreter;
use crate::telemetry::metrics::{Levels, Metrics};
use crate::tenancy::Tenancy;

/// Prometheus' text format, as its scrapers ask for it.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Connections the metrics port holds at once: a scraper or two, and room for a person with
/// curl. Its own cap, so a flood there never takes the descriptors the MCP port needs.
const MAX_CONNECTIONS: usize = 16;

/// Binds `addr` and serves `/metrics` there until the process ends, with the MCP listener's
/// header and body times (`timeouts`) and a connection cap of its own.
pub async fn start(
    addr: &str,
    timeouts: Limits,
    metrics: &'static Metrics,
    (backend, tenancy): (Arc<dyn Interpreter>, Arc<Tenancy>),
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || scrape(metrics, backend.clone(), tenancy.clone())),
        )
        .fallback(|| async {
            (
                http::StatusCode::NOT_FOUND,
                "not found: metrics are at /metrics\n",
            )
        });
    let limits = Limits {
        max_connections: MAX_CONNECTIONS,
        ..timeouts
    };
    let app = conns::with_body_timeout(app, limits);
    tokio::spawn(conns::serve(listener, app, limits, std::future::pending()));
    Ok(local)
}

async fn scrape(
    metrics: &'static Metrics,
    backend: Arc<dyn Interpreter>,
    tenancy: Arc<Tenancy>,
) -> impl IntoResponse {
    let sandboxes = backend.census().map_or_else(Vec::new, |c| c.by_state());
    let (used, total) = backend.memory_budget().unwrap_or((0, 0));
    let (running, waiting) = tenancy.call_load();
    let levels = Levels {
        sandboxes,
        memory_used_bytes: used,
        memory_total_bytes: total,
        calls_running: running as u64,
        calls_waiting: waiting as u64,
    };
    (
        [(http::header::CONTENT_TYPE, CONTENT_TYPE)],
        metrics.render(&levels),
    )
}
