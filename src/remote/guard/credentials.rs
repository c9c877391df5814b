use super::*;
use crate::tenancy::Quota;
use axum::body::Body;
use tower::ServiceExt as _;

/// Whatever the caller authenticated with stops at the guard: the service behind it (rmcp,
/// the tools, and through them E2B, code mode and sandboxes) never sees `Authorization`.
#[tokio::test]
async fn the_callers_credentials_stop_at_the_guard() {
    let dir = std::env::temp_dir().join(format!("guard-{}", uuid::Uuid::new_v4().simple()));
    let file = dir.join("tokens");
    let token = super::super::token_edit::add(&file, "alice").unwrap();
    let q = Quota {
        sandboxes: 1,
        memory_mb: 1,
        disk_mb: 1,
    };
    let local = Principal {
        name: "local".into(),
        quota: q,
        mcp_servers: Arc::from([]),
        hosts: None,
    };
    let guard = Arc::new(Guard::new(
        Auth {
            book: Some(super::super::tokens::TokenBook::open(file, q)),
            open_until_tokens: false,
            oauth: None,
            local,
            defaults: q,
        },
        "127.0.0.1:8765".parse().unwrap(),
        &[],
        &[],
        false,
        SessionCaps {
            per_principal: 4,
            total: 4,
        },
    ));
    let app = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(|req: Request| async move {
                let who = req.extensions().get::<Principal>().map(|p| p.name.to_string());
                let seen = req.headers().contains_key(header::AUTHORIZATION);
                format!("{who:?} {seen}")
            }),
        )
        .layer(axum::middleware::from_fn_with_state(guard, check));
    let req = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header(header::HOST, "127.0.0.1:8765")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(SESSION_HEADER, "unknown")
        .body(Body::empty())
        .unwrap();
    let r = app.oneshot(req).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body = axum::body::to_bytes(r.into_body(), 1 << 10).await.unwrap();
    assert_eq!(&body[..], b"Some(\"alice\") false");
    let _ = std::fs::remove_dir_all(dir);
}
