//! Checking an access token (OAuth 2.1 §5.2): a JWT (RFC 9068) against the issuer's keys,
//! or an opaque token by asking the issuer (RFC 7662). Either way the token must come from
//! the configured issuer, be meant for this server (its audience is the public URL, RFC
//! 8707: a token for another resource is refused, never passed on), be current, and carry
//! the required scopes. What comes out is the principal's name and the token's scopes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::Validation;
use jsonwebtoken::errors::ErrorKind;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::claims::{claim_shape, header_refusal, id_token_sign, jwt_alg, jwt_part, scopes_of};
use super::fetch::{self, FetchError};
use super::keys::IssuerKeys;
use super::resource::Resource;
use crate::host::lock::Locked as _;

/// Clock difference tolerated between the IdP and this server.
const LEEWAY_SECONDS: u64 = 60;
/// Introspection answers kept at most this long (and never past the token's expiry).
const INTROSPECTION_TTL: Duration = Duration::from_secs(300);
const INTROSPECTION_CACHE: usize = 10_000;
/// A token the issuer called inactive is not asked about again for this long: a client
/// repeating a made-up token costs the issuer one call, not one per request.
const REFUSAL_TTL: Duration = Duration::from_secs(60);
/// Introspections one client address may have going at once; its others wait behind them,
/// holding none of the server-wide ones, so one address's junk cannot delay another's sign-in.
const ASKING_PER_ADDRESS: usize = 1;

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
    /// SHA-256 of an opaque token the issuer called inactive → why, until when.
    refused: Mutex<HashMap<[u8; 32], (String, Instant)>>,
    /// Each client address's own turn at introspection.
    per_address: Mutex<HashMap<std::net::IpAddr, std::sync::Arc<tokio::sync::Semaphore>>>,
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
            refused: Mutex::new(HashMap::new()),
            per_address: Mutex::new(HashMap::new()),
            asking: tokio::sync::Semaphore::new(8),
        }
    }

    /// `from`: the client's address, whose introspections take turns among themselves.
    pub async fn verify(&self, token: &str, from: Option<std::net::IpAddr>) -> Result<Verified, Refusal> {
        let verified = match jwt_alg(token) {
            Some(alg) => self.verify_jwt(token, &alg).await?,
            None => self.introspect(token, from).await?,
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

    /// The principal the configured claim names, exactly as signed (see `tenancy::names`).
    fn principal(&self, claims: &Map<String, Value>) -> Result<String, Refusal> {
        let claim = &self.resource.claim;
        let name = match claims.get(claim) {
            Some(Value::String(s)) => s.clone(),
            // Only exact integers: past 2^53 a float makes different numbers one name.
            Some(Value::Number(n)) if n.is_u64() || n.is_i64() => n.to_string(),
            Some(Value::Number(n)) => {
                return Err(invalid(format!(
                    "the token's '{claim}' claim ({n}) is not an exact integer, so it cannot name you; ask the server's operator to name principals by a string claim (CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM)"
                )));
            }
            Some(other) => {
                return Err(invalid(format!(
                    "the token's '{claim}' claim is {}, not a string; ask the server's operator to name principals by another claim (CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM)",
                    if other.is_array() {
                        "an array"
                    } else {
                        "not a name"
                    }
                )));
            }
            None => {
                return Err(invalid(format!(
                    "the token has no '{claim}' claim to name you by (CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM); ask the server's operator to have the authorization server include it"
                )));
            }
        };
        crate::tenancy::names::check(&name)
            .map_err(|why| invalid(format!("the token's '{claim}' claim is not a usable name: {why}")))?;
        // An address the identity provider says it has not verified names no one.
        if claim == "email"
            && let Some(v) = claims.get("email_verified")
            && v != &Value::Bool(true)
        {
            return Err(invalid(
                "the token's email is not verified (email_verified is not true); verify it with your identity provider, then sign in again",
            ));
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
        if let Some(why) = jwt_part(token, 0).as_ref().and_then(header_refusal) {
            return Err(invalid(why));
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
                _ => jwt_part(token, 1)
                    .as_ref()
                    .and_then(claim_shape)
                    .unwrap_or_else(|| format!("the token is not valid: {e}")),
            })
        })?;
        // jsonwebtoken accepts an `iss` array that contains the issuer; the spec says a string.
        if let Some(why) = claim_shape(&data.claims) {
            return Err(invalid(why));
        }
        if data.claims.get("iss").and_then(Value::as_str) != Some(self.resource.issuer_text.as_str()) {
            return Err(invalid(format!(
                "the token is from another issuer; this server accepts tokens of {}",
                self.resource.issuer_text
            )));
        }
        let own_client = self.resource.client.as_ref().map(|(id, _)| id.as_str());
        if let Some(sign) = id_token_sign(&data.claims, own_client) {
            return Err(invalid(format!(
                "the token is an OpenID ID token ({sign}), not an access token; send the access token your sign-in gave"
            )));
        }
        Ok(Verified {
            principal: self.principal(&data.claims)?,
            scopes: scopes_of(&data.claims),
        })
    }

    async fn introspect(&self, token: &str, from: Option<std::net::IpAddr>) -> Result<Verified, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(known) = self.cached(&key) {
            return known;
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
        let address_turn = match from {
            Some(ip) => Some(self.address_turn(ip).await?),
            None => None,
        };
        let _turn = self
            .asking
            .acquire()
            .await
            .map_err(|_| invalid("the server is shutting down"))?;
        // Asked meanwhile by another request with the same token.
        if let Some(known) = self.cached(&key) {
            return known;
        }
        let answer = fetch::post_form(
            &self.http,
            &url,
            client,
            &[("token", token), ("token_type_hint", "access_token")],
        )
        .await
        .map_err(Refusal::Unavailable)?;
        drop(address_turn);
        let judged = self.judge(&answer);
        match &judged {
            Ok((verified, life)) => remember(&self.introspected, key, verified.clone(), *life),
            Err(Refusal::Invalid(why)) => remember(&self.refused, key, why.clone(), REFUSAL_TTL),
            Err(_) => {}
        }
        judged.map(|(v, _)| v)
    }

    /// What was said of this token before, while it holds.
    fn cached(&self, key: &[u8; 32]) -> Option<Result<Verified, Refusal>> {
        let now = Instant::now();
        if let Some((v, until)) = self.introspected.locked().get(key)
            && now < *until
        {
            return Some(Ok(v.clone()));
        }
        if let Some((why, until)) = self.refused.locked().get(key)
            && now < *until
        {
            return Some(Err(invalid(why.clone())));
        }
        None
    }

    /// Waits for `ip`'s turn to introspect.
    async fn address_turn(&self, ip: std::net::IpAddr) -> Result<tokio::sync::OwnedSemaphorePermit, Refusal> {
        let turn = {
            let mut m = self.per_address.locked();
            if m.len() >= INTROSPECTION_CACHE {
                m.retain(|_, s| std::sync::Arc::strong_count(s) > 1);
            }
            m.entry(ip)
                .or_insert_with(|| std::sync::Arc::new(tokio::sync::Semaphore::new(ASKING_PER_ADDRESS)))
                .clone()
        };
        turn.acquire_owned()
            .await
            .map_err(|_| invalid("the server is shutting down"))
    }

    /// The principal an introspection answer vouches for, and how long to believe it.
    fn judge(&self, answer: &Value) -> Result<(Verified, Duration), Refusal> {
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
        match claims.get("iss") {
            None => {}
            Some(Value::String(iss)) if *iss == self.resource.issuer_text => {}
            Some(_) => return Err(invalid("the token is from another issuer")),
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
        let exp = match claims.get("exp") {
            None => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                invalid(format!(
                    "the authorization server's introspection answer gives 'exp' as {v}, not a number of seconds; the token cannot be trusted"
                ))
            })?),
        };
        let now = now_seconds();
        if exp.is_some_and(|e| e.saturating_add(LEEWAY_SECONDS) < now) {
            return Err(invalid("the token has expired; sign in again"));
        }
        let verified = Verified {
            principal: self.principal(claims)?,
            scopes: scopes_of(claims),
        };
        let life = exp.map_or(INTROSPECTION_TTL, |e| Duration::from_secs(e.saturating_sub(now)));
        Ok((verified, life.min(INTROSPECTION_TTL)))
    }
}

/// Keeps `value` for `key` for `life`, within the cache's bound.
fn remember<V>(cache: &Mutex<HashMap<[u8; 32], (V, Instant)>>, key: [u8; 32], value: V, life: Duration) {
    let mut cache = cache.locked();
    if cache.len() >= INTROSPECTION_CACHE {
        let t = Instant::now();
        cache.retain(|_, (_, until)| *until > t);
        if cache.len() >= INTROSPECTION_CACHE {
            cache.clear();
        }
    }
    cache.insert(key, (value, Instant::now() + life));
}
