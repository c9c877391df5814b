//! The issuer's signing keys: discovered from its metadata, fetched from its `jwks_uri`,
//! cached, and fetched again when they age or when a token names a key not yet seen (the IdP
//! rotated). Fetches are spaced at least [`MIN_REFETCH`] apart, so tokens naming made-up key
//! ids cannot make the server hammer the IdP: such a request waits for the next allowed fetch.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};

use super::fetch::{self, Endpoints, FetchError};
use super::resource::Resource;

/// Fetches of the key set are at least this far apart.
pub const MIN_REFETCH: Duration = Duration::from_secs(5);
/// Keys older than this are fetched again at the next token (IdPs publish rotations ahead).
const MAX_AGE: Duration = Duration::from_secs(3600);

/// One public key and the algorithms it may verify.
#[derive(Clone)]
pub struct Key {
    pub decoding: DecodingKey,
    pub algorithms: Vec<Algorithm>,
}

#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Key>,
    /// Keys without a `kid`, for tokens without one.
    unnamed: Vec<Key>,
    fetched: Option<Instant>,
}

/// The issuer's endpoints and keys, kept fresh.
pub struct IssuerKeys {
    http: reqwest::Client,
    resource: Arc<Resource>,
    endpoints: tokio::sync::Mutex<Option<Endpoints>>,
    keys: RwLock<Arc<KeySet>>,
    /// One fetch at a time; the others wait for its result.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

/// The algorithms a JWK may verify: asymmetric ones only, narrowed to its `alg` when it
/// names one. Symmetric (`oct`) keys are never used: an HMAC "key" from a public key set is
/// known to everyone.
fn algorithms_of(jwk: &Jwk) -> Vec<Algorithm> {
    let family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => vec![],
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            _ => vec![],
        },
        AlgorithmParameters::OctetKey(_) => vec![],
    };
    let named = jwk.common.key_algorithm.and_then(|a| match a {
        KeyAlgorithm::RS256 => Some(Algorithm::RS256),
        KeyAlgorithm::RS384 => Some(Algorithm::RS384),
        KeyAlgorithm::RS512 => Some(Algorithm::RS512),
        KeyAlgorithm::PS256 => Some(Algorithm::PS256),
        KeyAlgorithm::PS384 => Some(Algorithm::PS384),
        KeyAlgorithm::PS512 => Some(Algorithm::PS512),
        KeyAlgorithm::ES256 => Some(Algorithm::ES256),
        KeyAlgorithm::ES384 => Some(Algorithm::ES384),
        KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
        _ => None,
    });
    match (named, jwk.common.key_algorithm) {
        (Some(a), _) => family.into_iter().filter(|f| *f == a).collect(),
        // It names an algorithm we do not verify with (HS256, RSA-OAEP...): not for us.
        (None, Some(_)) => vec![],
        (None, None) => family,
    }
}

/// Parses a JWKS document, skipping keys it cannot use (encryption keys, other curves,
/// malformed entries) instead of refusing the whole set.
fn parse_set(doc: &serde_json::Value) -> KeySet {
    let mut set = KeySet::default();
    for raw in doc.get("keys").and_then(|k| k.as_array()).into_iter().flatten() {
        if raw
            .get("use")
            .and_then(|u| u.as_str())
            .is_some_and(|u| u != "sig")
        {
            continue;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        let algorithms = algorithms_of(&jwk);
        if algorithms.is_empty() {
            continue;
        }
        let Ok(decoding) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let key = Key { decoding, algorithms };
        match jwk.common.key_id {
            Some(kid) => {
                set.by_kid.insert(kid, key);
            }
            None => set.unnamed.push(key),
        }
    }
    set
}

impl IssuerKeys {
    pub fn new(http: reqwest::Client, resource: Arc<Resource>) -> Self {
        IssuerKeys {
            http,
            resource,
            endpoints: tokio::sync::Mutex::new(None),
            keys: RwLock::new(Arc::new(KeySet::default())),
            fetching: tokio::sync::Mutex::new(None),
        }
    }

    /// The issuer's endpoints, discovered at first need and kept.
    pub async fn endpoints(&self) -> Result<Endpoints, FetchError> {
        let mut e = self.endpoints.lock().await;
        if let Some(found) = &*e {
            return Ok(found.clone());
        }
        let found = fetch::discover(&self.http, &self.resource).await?;
        tracing::info!(
            "OAuth: the issuer {} publishes its keys at {}{}",
            self.resource.issuer_text,
            found.jwks_uri,
            found
                .introspection
                .as_ref()
                .map(|u| format!(" and introspects tokens at {u}"))
                .unwrap_or_default()
        );
        *e = Some(found.clone());
        Ok(found)
    }

    fn cached(&self) -> Arc<KeySet> {
        self.keys.read().map(|k| k.clone()).unwrap_or_default()
    }

    /// The key for a token's `kid` (or, without one, the keys without one), fetching the set
    /// again when it is stale or does not have the key. `None`: the issuer does not publish it.
    pub async fn find(&self, kid: Option<&str>) -> Result<Vec<Key>, FetchError> {
        let lookup = |set: &KeySet| -> Vec<Key> {
            match kid {
                Some(k) => set.by_kid.get(k).cloned().into_iter().collect(),
                None => set.unnamed.clone(),
            }
        };
        let set = self.cached();
        let fresh = set.fetched.is_some_and(|t| t.elapsed() < MAX_AGE);
        let found = lookup(&set);
        if fresh && !found.is_empty() {
            return Ok(found);
        }
        let seen = set.fetched;
        match self.refetch(seen).await {
            Ok(()) => Ok(lookup(&self.cached())),
            // Stale keys still verify while the issuer cannot be reached.
            Err(e) if !found.is_empty() => {
                tracing::warn!(
                    "OAuth: could not refresh the issuer's keys ({e}); using the ones fetched before"
                );
                Ok(found)
            }
            Err(e) => Err(e),
        }
    }

    /// Fetches the key set unless another fetch finished since `seen`; waits out
    /// [`MIN_REFETCH`] since the last fetch first.
    async fn refetch(&self, seen: Option<Instant>) -> Result<(), FetchError> {
        let mut last = self.fetching.lock().await;
        if self.cached().fetched != seen {
            return Ok(());
        }
        if let Some(at) = *last {
            let since = at.elapsed();
            if since < MIN_REFETCH {
                tokio::time::sleep(MIN_REFETCH - since).await;
            }
        }
        *last = Some(Instant::now());
        let endpoints = self.endpoints().await?;
        let doc = fetch::get_json(&self.http, &endpoints.jwks_uri).await?;
        let mut set = parse_set(&doc);
        set.fetched = Some(Instant::now());
        tracing::info!(
            "OAuth: fetched {} signing key(s) from {}",
            set.by_kid.len() + set.unnamed.len(),
            endpoints.jwks_uri
        );
        if let Ok(mut k) = self.keys.write() {
            *k = Arc::new(set);
        }
        Ok(())
    }

    /// Warms the cache at start, so the first sign-in does not wait; a failure is only
    /// logged (the IdP may come up later; static tokens work meanwhile).
    pub async fn warm(&self) {
        if let Err(e) = self.refetch(None).await {
            tracing::warn!(
                "OAuth: could not fetch the issuer's metadata or keys yet ({e}); sign-ins are refused until it answers"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signature_keys_of_asymmetric_algorithms_are_kept() {
        let doc = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac", "alg": "HS256"},
            {"kty": "EC", "crv": "P-256", "kid": "ec",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "RSA", "kid": "junk", "n": 5},
        ]});
        let set = parse_set(&doc);
        let mut kids: Vec<_> = set.by_kid.keys().cloned().collect();
        kids.sort();
        assert_eq!(kids, ["ec", "ed"]);
        assert_eq!(set.by_kid["ec"].algorithms, [Algorithm::ES256]);
        assert_eq!(set.by_kid["ed"].algorithms, [Algorithm::EdDSA]);
    }
}
