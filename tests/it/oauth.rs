//! Remote mode as an OAuth 2.1 resource server, against a real OpenID provider nobody here
//! wrote: panva's `oidc-provider` (tests/ts/idp.mjs, pinned in tests/ts/package.json), which
//! issues JWT access tokens for the resource a client asks for (RFC 8707), introspects opaque
//! ones, and rotates its keys when told. Each case is what a user or an attacker would send.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::common;
use crate::remote_harness::{Remote, http, initialize, post};

/// The OpenID provider, on a loopback port of its own.
pub struct Idp(xtask::idp::Idp);

impl Idp {
    pub async fn start() -> Idp {
        Idp(xtask::idp::start(&common::repo_root())
            .await
            .expect("the OpenID provider starts"))
    }

    pub fn issuer(&self) -> &str {
        &self.0.issuer
    }

    /// An access token from the client-credentials grant, for `resource`.
    pub async fn token(&self, client: &str, resource: &str, scope: &str) -> String {
        self.0
            .token(&http(), client, resource, scope)
            .await
            .expect("a token from the IdP")
    }

    /// A token the test route signs: with the IdP's own key or a stranger's, any claims.
    pub async fn mint(&self, claims: Value, alg: &str, signer: &str) -> String {
        self.mint_with(claims, alg, signer, json!({})).await
    }

    /// A token the test route signs with header fields of the test's choosing (`typ`, `crit`).
    pub async fn mint_with(&self, claims: Value, alg: &str, signer: &str, header: Value) -> String {
        let body: Value = http()
            .post(format!("{}/__test/mint", self.issuer()))
            .json(&json!({"claims": claims, "alg": alg, "signer": signer, "header": header}))
            .send()
            .await
            .expect("mint")
            .json()
            .await
            .expect("mint JSON");
        body["token"].as_str().expect("a token").to_string()
    }

    pub async fn rotate(&self) {
        let r = http()
            .post(format!("{}/__test/rotate", self.issuer()))
            .send()
            .await
            .expect("rotate");
        assert!(r.status().is_success());
    }
}

/// A server trusting `idp`, listening where its public URL says; `principals` get static
/// tokens; `lines` are written to the tokens file first (OAuth principals' quotas).
pub(crate) async fn server(idp: &Idp, principals: &[&str], lines: &str, envs: &[(&str, &str)]) -> Remote {
    // The public URL (the tokens' audience) must be known before start.
    let port = common::free_port();
    let public = format!("http://127.0.0.1:{port}/mcp");
    let listen = format!("127.0.0.1:{port}");
    let home = common::private_home();
    std::fs::write(home.join("tokens"), lines).expect("tokens lines");
    let tokens_file = home.join("tokens").display().to_string();
    let mut all: Vec<(&str, &str)> = vec![
        ("CODE_SANDBOX_LISTEN", &listen),
        ("CODE_SANDBOX_OAUTH_ISSUER", idp.issuer()),
        ("CODE_SANDBOX_PUBLIC_URL", &public),
        ("CODE_SANDBOX_TOKENS", &tokens_file),
    ];
    all.extend_from_slice(envs);
    let remote = Remote::start_in(home, principals, &all).await;
    assert_eq!(remote.url, public);
    remote
}

/// Status, `WWW-Authenticate` and body of an initialize request presenting `token`.
pub(crate) async fn attempt(url: &str, token: Option<&str>) -> (u16, String, String) {
    let r = post(url, token, &initialize()).send().await.expect("POST /mcp");
    let status = r.status().as_u16();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap_or("").to_string())
        .unwrap_or_default();
    (status, challenge, r.text().await.unwrap_or_default())
}

pub(crate) async fn refused(url: &str, token: &str, why: &str) {
    let (status, challenge, body) = attempt(url, Some(token)).await;
    assert_eq!(status, 401, "{why}: {body}");
    assert!(
        challenge.contains("error=\"invalid_token\""),
        "{why}: {challenge}"
    );
    assert!(challenge.contains("resource_metadata="), "{why}: {challenge}");
    eprintln!("{why}: {body}");
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_from_a_real_openid_provider_are_checked_like_a_resource_server_must() {
    common::ensure_runtime();
    let idp = Idp::start().await;
    let remote = server(
        &idp,
        &["ci"],
        "agent-b - sandboxes=1\n",
        &[("CODE_SANDBOX_OAUTH_SCOPES", "mcp")],
    )
    .await;
    let url = remote.url.clone();
    let origin = url.trim_end_matches("/mcp").to_string();

    // Where to sign in, at both of RFC 9728's places, without a token and open to browsers.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = http().get(format!("{origin}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["resource"], url, "{doc}");
        assert_eq!(doc["authorization_servers"], json!([idp.issuer()]));
        assert_eq!(doc["scopes_supported"], json!(["mcp"]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }

    // No token: 401 whose challenge leads a client to the metadata.
    let (status, challenge, _) = attempt(&url, None).await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\""
        )),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp\""), "{challenge}");
    assert!(
        !challenge.contains("error="),
        "no token sent, no error: {challenge}"
    );

    // A good token of each signature algorithm the IdP uses.
    let a = idp.token("agent-a", &url, "mcp").await;
    for client in ["agent-es", "agent-ed"] {
        let t = idp.token(client, &url, "mcp").await;
        let (status, _, body) = attempt(&url, Some(&t)).await;
        assert_eq!(status, 200, "{client}: {body}");
    }
    let alice = remote.client_with_token(&a).await;
    let sb = alice.create().await;
    let v = alice.run_ok(&sb, "1+1").await;
    assert_eq!(v["result"], "2", "{v}");

    // A token for another resource: refused, never passed on.
    let other = idp.token("agent-a", "http://127.0.0.1:1/mcp", "mcp").await;
    refused(&url, &other, "another audience").await;
    let (_, _, body) = attempt(&url, Some(&other)).await;
    assert!(body.contains("another resource"), "{body}");

    // Forged: the IdP's key id, a stranger's key.
    let claims = json!({"sub": "agent-a", "aud": url, "scope": "mcp"});
    refused(
        &url,
        &idp.mint(claims.clone(), "RS256", "stranger").await,
        "forged RS256",
    )
    .await;
    refused(
        &url,
        &idp.mint(claims.clone(), "ES256", "stranger").await,
        "forged ES256",
    )
    .await;
    refused(&url, &idp.mint(claims.clone(), "none", "idp").await, "alg none").await;
    refused(
        &url,
        &idp.mint(claims.clone(), "HS256", "idp").await,
        "HMAC with the public key",
    )
    .await;
    // A good signature that lies about one thing.
    let mut expired = claims.clone();
    expired["exp"] = json!(now() - 3600);
    expired["iat"] = json!(now() - 7200);
    refused(&url, &idp.mint(expired, "RS256", "idp").await, "expired").await;
    let mut foreign = claims.clone();
    foreign["iss"] = json!("http://127.0.0.1:1");
    refused(&url, &idp.mint(foreign, "RS256", "idp").await, "another issuer").await;
    // Control: the same minted claims, honestly signed, pass (the refusals were for the lie).
    let (status, _, body) = attempt(&url, Some(&idp.mint(claims.clone(), "RS256", "idp").await)).await;
    assert_eq!(status, 200, "{body}");

    // Without the required scope: 403 insufficient_scope naming it.
    let narrow = idp.token("agent-noscope", &url, "other").await;
    let (status, challenge, body) = attempt(&url, Some(&narrow)).await;
    assert_eq!(status, 403, "{body}");
    assert!(challenge.contains("error=\"insufficient_scope\""), "{challenge}");
    assert!(challenge.contains("scope=\"mcp\""), "{challenge}");

    // Two OAuth principals are isolated; agent-b has its tokens-file line's quota.
    let b = idp.token("agent-b", &url, "mcp").await;
    let bob = remote.client_with_token(&b).await;
    let status_b = bob.ok("get_sandbox_status", json!({})).await;
    assert!(
        !status_b.to_string().contains(&sb),
        "agent-b sees agent-a's sandbox: {status_b}"
    );
    let (err, _, text) = bob
        .call_json("execute_code", json!({"sandbox_id": sb, "code": "1"}))
        .await;
    assert!(err, "agent-b ran code in agent-a's sandbox: {text}");
    bob.create().await;
    let (err, _, text) = bob.call_json("create_sandbox", json!({})).await;
    assert!(
        err && text.contains("sandboxes"),
        "agent-b's line allows one sandbox: {text}"
    );

    // A static token keeps working beside OAuth.
    let ci = remote.client("ci").await;
    assert_eq!(ci.run_ok(&ci.create().await, "6*7").await["result"], "42");

    // Key rotation: the IdP's keys change; new tokens work at once, old-key tokens stop.
    idp.rotate().await;
    let after = idp.token("agent-a", &url, "mcp").await;
    let (status, _, body) = attempt(&url, Some(&after)).await;
    assert_eq!(status, 200, "a token of the new key: {body}");
    refused(&url, &a, "a token of the retired key").await;

    // Nothing of the user's token reached the log.
    assert!(!remote.log_text().contains(&a), "the access token was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_allow_list_and_opaque_tokens_through_introspection() {
    common::ensure_runtime();
    let idp = Idp::start().await;
    let remote = server(
        &idp,
        &[],
        "",
        &[
            ("CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM", "email"),
            (
                "CODE_SANDBOX_OAUTH_ALLOW",
                "agent-a@example.com, @opaque.example, agent-opaque@example.com",
            ),
            ("CODE_SANDBOX_OAUTH_CLIENT", "sandbox-rs:sandbox-rs-secret"),
        ],
    )
    .await;
    let url = remote.url.clone();
    let a = idp.token("agent-a", &url, "mcp").await;
    let (status, _, body) = attempt(&url, Some(&a)).await;
    assert_eq!(status, 200, "{body}");
    let b = idp.token("agent-b", &url, "mcp").await;
    let (status, _, body) = attempt(&url, Some(&b)).await;
    assert_eq!(status, 403, "agent-b is not on the allow list: {body}");
    assert!(
        body.contains("agent-b@example.com") && body.contains("CODE_SANDBOX_OAUTH_ALLOW"),
        "{body}"
    );

    // An opaque token, checked by asking the IdP, names its principal by the email claim.
    let opaque = idp.token("agent-opaque", &url, "mcp").await;
    assert_eq!(
        opaque.matches('.').count(),
        0,
        "the IdP issued an opaque token: {opaque}"
    );
    let client = remote.client_with_token(&opaque).await;
    let sb = client.create().await;
    assert_eq!(client.run_ok(&sb, "2**10").await["result"], "1024");
    // An opaque token for another resource is refused by what introspection says.
    let elsewhere = idp.token("agent-opaque", "http://127.0.0.1:1/mcp", "mcp").await;
    refused(&url, &elsewhere, "an opaque token for another audience").await;
    refused(
        &url,
        "made-up-opaque-token",
        "an opaque token the IdP never issued",
    )
    .await;
}

#[test]
fn bad_oauth_settings_stop_the_start_naming_the_setting() {
    for (envs, setting) in [
        (
            vec![
                ("CODE_SANDBOX_OAUTH_ISSUER", "http://idp.example.com"),
                ("CODE_SANDBOX_PUBLIC_URL", "https://s.example.com/mcp"),
            ],
            "CODE_SANDBOX_OAUTH_ISSUER",
        ),
        (
            vec![("CODE_SANDBOX_OAUTH_ISSUER", "https://idp.example.com")],
            "CODE_SANDBOX_PUBLIC_URL",
        ),
        (
            vec![
                ("CODE_SANDBOX_OAUTH_ISSUER", "https://idp.example.com"),
                ("CODE_SANDBOX_PUBLIC_URL", "https://s.example.com/mcp"),
                ("CODE_SANDBOX_OAUTH_CLIENT", "no-secret"),
            ],
            "CODE_SANDBOX_OAUTH_CLIENT",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
            .env("CODE_SANDBOX_HOME", common::private_home())
            .env("CODE_SANDBOX_TRANSPORT", "http")
            .env("CODE_SANDBOX_LISTEN", "127.0.0.1:0")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run the server");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{envs:?} started");
        assert!(err.contains(setting), "{envs:?}: {err}");
    }
}
