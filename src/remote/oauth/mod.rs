//! OAuth 2.1 for remote mode, as the MCP authorization spec asks of a server: it is a
//! protected resource in front of the user's own authorization server (Keycloak, Auth0,
//! Okta, Entra...), never one itself. It publishes where to sign in (protected resource
//! metadata, RFC 9728), and checks the access tokens clients bring (see [`verify`]).

mod allow;
mod claims;
mod fetch;
mod keys;
mod resource;
mod verify;

use std::sync::Arc;

pub use resource::{Resource, SettingError};
pub use verify::{Refusal, Verified};

use crate::config::OAuthSettings;

/// The OAuth side of the guard.
pub struct OAuth {
    pub resource: Arc<Resource>,
    keys: Arc<keys::IssuerKeys>,
    verifier: verify::Verifier,
    allow: allow::Allow,
}

impl OAuth {
    /// `None` when the settings do not turn OAuth on; an error naming the setting when they
    /// are wrong. `roots`: the extra trusted CAs (`CODE_SANDBOX_CA_FILE`).
    pub fn from_settings(
        s: &OAuthSettings,
        roots: Vec<reqwest::Certificate>,
    ) -> Result<Option<Arc<OAuth>>, SettingError> {
        let Some(resource) = Resource::from_settings(s)? else {
            return Ok(None);
        };
        let resource = Arc::new(resource);
        let http = fetch::client(roots);
        let keys = Arc::new(keys::IssuerKeys::new(http.clone(), resource.clone()));
        Ok(Some(Arc::new(OAuth {
            verifier: verify::Verifier::new(resource.clone(), keys.clone(), http),
            keys,
            allow: allow::Allow::new(s.allow.as_deref()),
            resource,
        })))
    }

    /// Fetches the issuer's metadata and keys now, so the first sign-in does not wait.
    pub async fn warm(&self) {
        self.keys.warm().await;
    }

    /// Who the token speaks for, if it is valid here.
    /// `from`: the client's address (its introspections take turns among themselves).
    pub async fn verify(&self, token: &str, from: Option<std::net::IpAddr>) -> Result<Verified, Refusal> {
        self.verifier.verify(token, from).await
    }

    /// Whether `CODE_SANDBOX_OAUTH_ALLOW` lets this principal in.
    pub fn admits(&self, principal: &str) -> bool {
        self.allow.admits(principal)
    }
}

/// GET (and the browser's preflight OPTIONS) of the protected resource metadata, with CORS
/// open to any origin: it is public, and browser-based clients read it before signing in.
pub fn metadata_route(oauth: Arc<OAuth>) -> axum::routing::MethodRouter {
    use axum::response::IntoResponse as _;
    use http::{HeaderValue, header};
    let cors = |mut r: axum::response::Response| {
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("mcp-protocol-version, content-type"),
        );
        r
    };
    let doc = oauth.resource.metadata().to_string();
    axum::routing::get(move || {
        let doc = doc.clone();
        async move { cors(([(header::CONTENT_TYPE, "application/json")], doc).into_response()) }
    })
    .options(move || async move { cors(http::StatusCode::NO_CONTENT.into_response()) })
}
