//! The real OpenID provider the OAuth tests and bench sign in with (tests/ts/idp.mjs, panva's
//! `oidc-provider` pinned in tests/ts/package.json): started on a loopback port, and asked for
//! client-credentials tokens as an agent would.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

/// A running provider; it stops when this is dropped.
pub struct Idp {
    _child: tokio::process::Child,
    pub issuer: String,
}

/// Starts the provider of the repository at `root` (installing its npm packages first).
pub async fn start(root: &Path) -> anyhow::Result<Idp> {
    let dir = root.join("tests/ts");
    crate::npm::ensure(&dir, &|m| eprintln!("{m}"))?;
    let mut child = tokio::process::Command::new("node")
        .args(["idp.mjs", "0"])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let issuer = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(u) = line.strip_prefix("idp: ") {
                return Ok(u.to_string());
            }
        }
        anyhow::bail!("the OpenID provider exited before listening")
    })
    .await??;
    // It writes notices to stdout later: keep reading, or its next write kills it (EPIPE).
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Idp {
        _child: child,
        issuer,
    })
}

impl Idp {
    /// An access token from the client-credentials grant of `client` (its secret is
    /// `CLIENT-secret` in idp.mjs), for `resource`, with `scope`.
    pub async fn token(
        &self,
        http: &reqwest::Client,
        client: &str,
        resource: &str,
        scope: &str,
    ) -> anyhow::Result<String> {
        let r = http
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(format!("{client}-secret")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "client_credentials")
                    .append_pair("scope", scope)
                    .append_pair("resource", resource)
                    .finish(),
            )
            .send()
            .await?;
        let status = r.status();
        let body: serde_json::Value = r.json().await?;
        anyhow::ensure!(status.is_success(), "the IdP refused a token: {body}");
        body["access_token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("the IdP gave no token: {body}"))
    }
}
