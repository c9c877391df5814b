//! Who a request to `/mcp` comes from: a static bearer token of the tokens file, an OAuth
//! access token from the configured issuer, or (with neither set up) the machine's one local
//! user. And what a client is told when it is none of these: the 401 or 403 whose
//! `WWW-Authenticate` header starts an MCP client's sign-in.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::oauth::{OAuth, Refusal};
use super::tokens::TokenBook;
use crate::tenancy::{Principal, Quota};

pub struct Auth {
    /// `None`: no tokens file.
    pub book: Option<TokenBook>,
    /// Started token-less on loopback: the machine's local user is served until the tokens
    /// file exists, and never after.
    pub open_until_tokens: bool,
    pub oauth: Option<Arc<OAuth>>,
    /// The principal of a server with neither tokens nor OAuth (loopback only).
    pub local: Principal,
    /// Quotas of an OAuth principal without a line in the tokens file.
    pub defaults: Quota,
}

/// Why a request has no principal.
#[derive(Debug)]
pub enum Denied {
    NoToken,
    BadToken,
    OAuth(Refusal),
    NotAllowed(String),
    /// A sign-in named like a static token's principal.
    StaticName(String),
}

/// The bearer token of `Authorization`, if it has one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|t| !t.is_empty())
}

impl Auth {
    /// `from`: the client's address, when the connection knows it.
    pub async fn principal(
        &self,
        headers: &HeaderMap,
        from: Option<std::net::IpAddr>,
    ) -> Result<Principal, Denied> {
        let tokenless = match &self.book {
            None => true,
            Some(book) => self.open_until_tokens && !book.exists(),
        };
        if tokenless && self.oauth.is_none() {
            return Ok(self.local.clone());
        }
        let token = bearer(headers).ok_or(Denied::NoToken)?;
        if let Some(who) = self.book.as_ref().and_then(|b| b.authenticate(token)) {
            return Ok(who);
        }
        let Some(oauth) = &self.oauth else {
            return Err(Denied::BadToken);
        };
        let verified = oauth.verify(token, from).await.map_err(|r| {
            use crate::telemetry::metrics::{OAuthRefusal, oauth_refused};
            oauth_refused(match &r {
                Refusal::Invalid(_) => OAuthRefusal::Invalid,
                Refusal::Scope(_) => OAuthRefusal::Scope,
                Refusal::Unavailable(_) => OAuthRefusal::Unavailable,
            });
            Denied::OAuth(r)
        })?;
        if !oauth.admits(&verified.principal) {
            crate::telemetry::metrics::oauth_refused(crate::telemetry::metrics::OAuthRefusal::NotAllowed);
            return Err(Denied::NotAllowed(verified.principal));
        }
        // A tokens-file line of the same name gives its quotas, servers and hosts: the
        // operator who wrote `alice@example.com - sandboxes=2` means this user. A line with a
        // token is another principal, whose sandboxes a sign-in must never reach.
        let line = match &self.book {
            Some(b) => b
                .named(&verified.principal)
                .map_err(|_| Denied::StaticName(verified.principal.clone()))?,
            None => None,
        };
        Ok(line.unwrap_or_else(|| Principal {
            name: verified.principal.as_str().into(),
            quota: self.defaults,
            mcp_servers: Arc::from([]),
            hosts: None,
        }))
    }

    /// `Bearer` challenge parameters (RFC 6750 §3, RFC 9728 §5.1).
    fn challenge(&self, error: Option<&str>) -> String {
        let mut params = Vec::new();
        if let Some(o) = &self.oauth {
            params.push(format!("resource_metadata=\"{}\"", o.resource.metadata_url()));
            if !o.resource.scopes.is_empty() {
                params.push(format!("scope=\"{}\"", o.resource.scopes.join(" ")));
            }
        } else {
            params.push("realm=\"mcp-code-sandbox\"".to_string());
        }
        if let Some(e) = error {
            params.push(format!("error=\"{e}\""));
        }
        format!("Bearer {}", params.join(", "))
    }

    pub fn response(&self, denied: Denied) -> Response {
        let how = if self.oauth.is_some() {
            "sign in through your MCP client (this server uses OAuth; its metadata is at the resource_metadata URL of the WWW-Authenticate header)"
        } else {
            "send `Authorization: Bearer <token>`; the server's operator makes one with `mcp-code-sandbox token add NAME`"
        };
        match denied {
            Denied::NoToken => self.challenged(
                StatusCode::UNAUTHORIZED,
                None,
                &format!("this server needs a bearer token: {how}"),
            ),
            Denied::BadToken => self.challenged(
                StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                "the bearer token is not valid on this server (unknown or revoked); ask the server's operator for a new one",
            ),
            Denied::OAuth(r @ Refusal::Invalid(_)) => {
                self.challenged(StatusCode::UNAUTHORIZED, Some("invalid_token"), &r.to_string())
            }
            Denied::OAuth(r @ Refusal::Scope(_)) => {
                self.challenged(StatusCode::FORBIDDEN, Some("insufficient_scope"), &r.to_string())
            }
            Denied::OAuth(r @ Refusal::Unavailable(_)) => {
                tracing::warn!("OAuth: {r}");
                retry_later(StatusCode::SERVICE_UNAVAILABLE, &r.to_string(), "5")
            }
            Denied::StaticName(name) => plain(
                StatusCode::FORBIDDEN,
                &format!(
                    "'{name}' is the name of a principal with a static token on this server, so a sign-in cannot be it; ask the server's operator to rename that tokens line, or to name sign-ins by another claim (CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM)"
                ),
            ),
            Denied::NotAllowed(name) => plain(
                StatusCode::FORBIDDEN,
                &format!(
                    "{name} is not allowed on this server (CODE_SANDBOX_OAUTH_ALLOW); ask its operator to add you"
                ),
            ),
        }
    }

    fn challenged(&self, status: StatusCode, error: Option<&str>, text: &str) -> Response {
        let mut r = plain(status, text);
        if let Ok(v) = HeaderValue::from_str(&self.challenge(error)) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }
}

/// A refusal that says when to come back: `Retry-After: seconds`.
pub fn retry_later(status: StatusCode, text: &str, seconds: &'static str) -> Response {
    let mut r = plain(status, text);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static(seconds));
    r
}

pub fn plain(status: StatusCode, text: &str) -> Response {
    let mut r = Response::new(Body::from(format!("{text}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
