//! Checking an access token (OAuth 2.1 §5.2): a JWT (RFC 9068) against the issuer's keys,
//! or an opaque token by asking the issuer (RFC 7662). Either way the token must come from
//! the configured issuer, be meant for this server (its audience is the public URL, RFC
//! 8707: a token for another resource is refused, never passed on), be current, and carry
//! the required scopes. What comes out is the principal's name and the token's scopes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::Validation;
use jsonwebtoken::errors::ErrorKind;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::fetch::{self, FetchError};
use super::keys::IssuerKeys;
use super::resource::Resource;
use crate::lock::Locked as _;

/// Clock difference tolerated between the IdP and this server.
const LEEWAY_SECONDS: u64 = 60;
/// Introspection answers kept at most this long (and never past the token's expiry).
const INTROSPECTION_TTL: Duration = Duration::from_secs(300);
const INTROSPECTION_CACHE: usize = 10_000;

/// Who a valid token speaks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub principal: String,
    pub scopes: Vec<String>,
}

/// Why a token was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// 401 `invalid_token`: the client should get a new token.
    #[error("{0}")]
    Invalid(String),
    /// 403 `insufficient_scope`.
    #[error("the token lacks the scope(s) {}; sign in again granting them", .0.join(" "))]
    Scope(Vec<String>),
    /// 503: the issuer cannot be asked now.
    #[error("the authorization server cannot be reached to check the token ({0}); try again shortly")]
    Unavailable(#[source] FetchError),
}

fn invalid(why: impl Into<String>) -> Refusal {
    Refusal::Invalid(why.into())
}

/// The header's `alg` as written, when the token has a JWT's shape.
fn jwt_alg(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (Some(head), Some(_), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(head.trim_end_matches('='))
        .ok()?;
    let header: Value = serde_json::from_slice(&bytes).ok()?;
    Some(header.get("alg")?.as_str()?.to_string())
}

fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    let words = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
            Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
            _ => Vec::new(),
        }
    };
    // `scope` (RFC 9068, RFC 7662); `scp` (Entra ID, Okta).
    let mut all = claims.get("scope").map(words).unwrap_or_default();
    all.extend(claims.get("scp").map(words).unwrap_or_default());
    all
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub struct Verifier {
    resource: std::sync::Arc<Resource>,
    keys: std::sync::Arc<IssuerKeys>,
    http: reqwest::Client,
    /// SHA-256 of an opaque token → what introspection said, until when.
    introspected: Mutex<HashMap<[u8; 32], (Verified, Instant)>>,
    /// Introspections in flight at once, so a flood of made-up tokens is bounded.
    asking: tokio::sync::Semaphore,
}

impl Verifier {
    pub fn new(
        resource: std::sync::Arc<Resource>,
        keys: std::sync::Arc<IssuerKeys>,
        http: reqwest::Client,
    ) -> Self {
        Verifier {
            resource,
            keys,
            http,
            introspected: Mutex::new(HashMap::new()),
            asking: tokio::sync::Semaphore::new(8),
        }
    }

    pub async fn verify(&self, token: &str) -> Result<Verified, Refusal> {
        let verified = match jwt_alg(token) {
            Some(alg) => self.verify_jwt(token, &alg).await?,
            None => self.introspect(token).await?,
        };
        let missing: Vec<String> = self
            .resource
            .scopes
            .iter()
            .filter(|s| !verified.scopes.contains(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::Scope(missing));
        }
        Ok(verified)
    }

    fn principal(&self, claims: &Map<String, Value>) -> Result<String, Refusal> {
        let claim = &self.resource.claim;
        let name = match claims.get(claim) {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Err(invalid(format!(
                    "the token has no '{claim}' claim to name you by (CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM); ask the server's operator to have the authorization server include it"
                )));
            }
        };
        if name.is_empty() || name.len() > 256 || name.chars().any(char::is_control) {
            return Err(invalid(format!(
                "the token's '{claim}' claim is not a usable name (empty, control characters, or over 256 bytes)"
            )));
        }
        Ok(name)
    }

    async fn verify_jwt(&self, token: &str, alg: &str) -> Result<Verified, Refusal> {
        if alg.eq_ignore_ascii_case("none") {
            return Err(invalid("the token is not signed (alg none); sign in again"));
        }
        if alg.starts_with("HS") {
            return Err(invalid(format!(
                "the token is signed with {alg}, a shared-secret algorithm; this server accepts only the issuer's public-key signatures"
            )));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            invalid(format!(
                "the token's header names an algorithm this server does not verify ({alg})"
            ))
        })?;
        let keys = self
            .keys
            .find(header.kid.as_deref())
            .await
            .map_err(Refusal::Unavailable)?;
        let Some(key) = keys.into_iter().find(|k| k.algorithms.contains(&header.alg)) else {
            return Err(invalid(match &header.kid {
                Some(kid) => format!(
                    "the token is signed with a key ('{kid}', {:?}) the issuer does not publish; sign in again",
                    header.alg
                ),
                None => "the token names no key (kid) and the issuer publishes none without one".into(),
            }));
        };
        let mut v = Validation::new(header.alg);
        v.algorithms = vec![header.alg];
        v.leeway = LEEWAY_SECONDS;
        v.validate_nbf = true;
        v.set_issuer(&[&self.resource.issuer_text]);
        v.set_audience(&[self.resource.audience()]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &v).map_err(|e| {
            invalid(match e.kind() {
                ErrorKind::ExpiredSignature => "the token has expired; sign in again".to_string(),
                ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_string(),
                ErrorKind::InvalidAudience => format!(
                    "the token is for another resource: its audience (aud) does not include {}; request it with resource={0}",
                    self.resource.audience()
                ),
                ErrorKind::InvalidIssuer => format!(
                    "the token is from another issuer; this server accepts tokens of {}",
                    self.resource.issuer_text
                ),
                ErrorKind::InvalidSignature => "the token's signature does not verify; sign in again".to_string(),
                ErrorKind::MissingRequiredClaim(c) => format!("the token has no '{c}' claim"),
                _ => format!("the token is not valid: {e}"),
            })
        })?;
        Ok(Verified {
            principal: self.principal(&data.claims)?,
            scopes: scopes_of(&data.claims),
        })
    }

    async fn introspect(&self, token: &str) -> Result<Verified, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some((v, until)) = self.introspected.locked().get(&key)
            && Instant::now() < *until
        {
            return Ok(v.clone());
        }
        let Some(client) = &self.resource.client else {
            return Err(invalid(
                "the token is not a JWT, and this server cannot introspect opaque tokens (its operator has not set CODE_SANDBOX_OAUTH_CLIENT); have the authorization server issue JWT access tokens for this resource",
            ));
        };
        let endpoints = self.keys.endpoints().await.map_err(Refusal::Unavailable)?;
        let Some(url) = endpoints.introspection else {
            return Err(invalid(
                "the token is not a JWT, and the authorization server offers no introspection endpoint; have it issue JWT access tokens for this resource",
            ));
        };
        let _turn = self
            .asking
            .acquire()
            .await
            .map_err(|_| invalid("the server is shutting down"))?;
        let answer = fetch::post_form(
            &self.http,
            &url,
            client,
            &[("token", token), ("token_type_hint", "access_token")],
        )
        .await
        .map_err(Refusal::Unavailable)?;
        let Some(claims) = answer.as_object() else {
            return Err(invalid(
                "the authorization server's introspection answer is not an object",
            ));
        };
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(invalid(
                "the token is not active (expired, revoked or unknown); sign in again",
            ));
        }
        if let Some(iss) = claims.get("iss").and_then(Value::as_str)
            && iss != self.resource.issuer_text
        {
            return Err(invalid("the token is from another issuer"));
        }
        let audience = self.resource.audience();
        let for_us = match claims.get("aud") {
            Some(Value::String(a)) => *a == audience,
            Some(Value::Array(a)) => a.iter().any(|x| x.as_str() == Some(audience.as_str())),
            _ => false,
        };
        if !for_us {
            return Err(invalid(format!(
                "the token is for another resource: its audience (aud) does not include {audience}"
            )));
        }
        let exp = claims.get("exp").and_then(Value::as_u64);
        let now = now_seconds();
        if exp.is_some_and(|e| e + LEEWAY_SECONDS < now) {
            return Err(invalid("the token has expired; sign in again"));
        }
        let verified = Verified {
            principal: self.principal(claims)?,
            scopes: scopes_of(claims),
        };
        let life = exp.map_or(INTROSPECTION_TTL, |e| Duration::from_secs(e.saturating_sub(now)));
        let mut cache = self.introspected.locked();
        if cache.len() >= INTROSPECTION_CACHE {
            let t = Instant::now();
            cache.retain(|_, (_, until)| *until > t);
            if cache.len() >= INTROSPECTION_CACHE {
                cache.clear();
            }
        }
        cache.insert(
            key,
            (verified.clone(), Instant::now() + life.min(INTROSPECTION_TTL)),
        );
        Ok(verified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwt_is_told_from_an_opaque_token_by_its_header() {
        assert_eq!(jwt_alg("eyJhbGciOiJub25lIn0.e30."), Some("none".into()));
        assert_eq!(jwt_alg("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"), Some("RS256".into()));
        assert_eq!(jwt_alg("opaque-token-value"), None);
        assert_eq!(jwt_alg("a.b.c.d"), None);
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let c = serde_json::json!({"scope": "mcp read", "scp": ["write"]});
        assert_eq!(scopes_of(c.as_object().unwrap()), ["mcp", "read", "write"]);
    }
}
