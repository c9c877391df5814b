//! Fetching the authorization server's documents: its metadata (RFC 8414, else OpenID
//! discovery), its keys, and introspection answers. Only URLs from the configured issuer's
//! own metadata are ever fetched, never one a token names (`jku`, `x5u`, `iss`): a token is
//! the attacker's input, and following it would make the server fetch where they say.

use std::time::Duration;

use url::Url;

use super::resource::Resource;

/// Largest document read from the authorization server.
const MAX_DOCUMENT: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("could not reach {url}: {source}")]
    Reach {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} answered more than {MAX_DOCUMENT} bytes")]
    TooLarge { url: String },
    #[error("{url} did not answer JSON: {source}")]
    NotJson {
        url: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the authorization server's metadata names the issuer '{found}', not CODE_SANDBOX_OAUTH_ISSUER '{configured}'; set the issuer exactly as the metadata says"
    )]
    IssuerMismatch { found: String, configured: String },
    #[error(
        "no metadata at {tried}: is CODE_SANDBOX_OAUTH_ISSUER the issuer URL (for Keycloak https://HOST/realms/REALM, for Auth0 https://TENANT.auth0.com/)?"
    )]
    NoMetadata { tried: String },
    #[error("the authorization server's metadata has no usable {field}")]
    Missing { field: &'static str },
    #[error("{field} '{url}' in the authorization server's metadata must be https (http only on loopback)")]
    Insecure { field: &'static str, url: String },
}

/// What the server needs from the authorization server's metadata.
#[derive(Clone, Debug)]
pub struct Endpoints {
    pub jwks_uri: Url,
    pub introspection: Option<Url>,
}

/// An HTTP client for the authorization server: bounded time, no redirects (a document that
/// moved is an operator's fix, not somewhere to follow), the extra trusted roots.
pub fn client(roots: Vec<reqwest::Certificate>) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .tls_certs_merge(roots)
        .build()
        .unwrap_or_default()
}

/// Reads an answer's body, at most [`MAX_DOCUMENT`] bytes, as JSON.
async fn json_body(url: &str, mut r: reqwest::Response) -> Result<serde_json::Value, FetchError> {
    let mut body = Vec::new();
    loop {
        match r.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_DOCUMENT {
                    return Err(FetchError::TooLarge { url: url.into() });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(source) => {
                return Err(FetchError::Reach {
                    url: url.into(),
                    source,
                });
            }
        }
    }
    serde_json::from_slice(&body).map_err(|source| FetchError::NotJson {
        url: url.into(),
        source,
    })
}

/// Sends a request for JSON to `url`; its answer's body, when it is a success.
async fn send(url: &Url, request: reqwest::RequestBuilder) -> Result<serde_json::Value, FetchError> {
    let shown = url.to_string();
    let r = request
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|source| FetchError::Reach {
            url: shown.clone(),
            source,
        })?;
    if !r.status().is_success() {
        return Err(FetchError::Status {
            url: shown,
            status: r.status().as_u16(),
        });
    }
    json_body(&shown, r).await
}

/// GETs a JSON document.
pub async fn get_json(http: &reqwest::Client, url: &Url) -> Result<serde_json::Value, FetchError> {
    send(url, http.get(url.clone())).await
}

/// POSTs a form with HTTP basic client authentication (introspection).
pub async fn post_form(
    http: &reqwest::Client,
    url: &Url,
    client: &(String, String),
    form: &[(&str, &str)],
) -> Result<serde_json::Value, FetchError> {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let request = http
        .post(url.clone())
        .basic_auth(&client.0, Some(&client.1))
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body);
    send(url, request).await
}

/// The metadata URLs to try, in order: RFC 8414's (the well-known segment before the
/// issuer's path), then OpenID discovery's (appended to it), as the MCP spec says.
fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
    .iter()
    .filter_map(|u| Url::parse(u).ok())
    .fold(Vec::new(), |mut all, u| {
        if !all.contains(&u) {
            all.push(u);
        }
        all
    })
}

fn endpoint(doc: &serde_json::Value, field: &'static str, issuer: &Url) -> Result<Option<Url>, FetchError> {
    let Some(text) = doc.get(field).and_then(|v| v.as_str()) else {
        return Ok(None);
    };
    let url = Url::parse(text).map_err(|_| FetchError::Missing { field })?;
    let loopback_issuer = issuer.scheme() == "http";
    let ok = url.scheme() == "https"
        || (url.scheme() == "http"
            && loopback_issuer
            && matches!(url.host_str(), Some("127.0.0.1" | "[::1]" | "localhost")));
    if !ok {
        return Err(FetchError::Insecure {
            field,
            url: text.into(),
        });
    }
    Ok(Some(url))
}

/// Discovers the authorization server's endpoints from its metadata.
pub async fn discover(http: &reqwest::Client, resource: &Resource) -> Result<Endpoints, FetchError> {
    let mut last = None;
    for url in metadata_urls(&resource.issuer) {
        let doc = match get_json(http, &url).await {
            Ok(doc) => doc,
            Err(e @ (FetchError::Status { .. } | FetchError::NotJson { .. })) => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let found = doc.get("issuer").and_then(|v| v.as_str()).unwrap_or("");
        if found != resource.issuer_text {
            return Err(FetchError::IssuerMismatch {
                found: found.into(),
                configured: resource.issuer_text.clone(),
            });
        }
        let jwks_uri =
            endpoint(&doc, "jwks_uri", &resource.issuer)?.ok_or(FetchError::Missing { field: "jwks_uri" })?;
        let introspection = endpoint(&doc, "introspection_endpoint", &resource.issuer)?;
        return Ok(Endpoints {
            jwks_uri,
            introspection,
        });
    }
    tracing::debug!("no authorization server metadata: {last:?}");
    Err(FetchError::NoMetadata {
        tried: metadata_urls(&resource.issuer)
            .iter()
            .map(Url::as_str)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_rfc_8414_and_openid_put_it() {
        let u = |s: &str| {
            metadata_urls(&Url::parse(s).unwrap())
                .iter()
                .map(|u| u.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            u("https://idp.example.com/realms/team"),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/realms/team",
                "https://idp.example.com/.well-known/openid-configuration/realms/team",
                "https://idp.example.com/realms/team/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            u("https://tenant.auth0.com/"),
            [
                "https://tenant.auth0.com/.well-known/oauth-authorization-server",
                "https://tenant.auth0.com/.well-known/openid-configuration",
            ]
        );
    }
}
