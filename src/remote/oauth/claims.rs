//! What a token says about itself, read before and after its signature is checked: a JWT's
//! parts, its header's demands (`crit`, `typ`), claims of the wrong JSON type named, the marks
//! of an OpenID ID token (which is not an access token, whatever its audience), and scopes.

use base64::Engine as _;
use serde_json::{Map, Value};

/// One part of a JWT-shaped token, decoded as a JSON object (unverified: for telling a JWT
/// from an opaque token, and for saying precisely what is wrong with one).
pub(super) fn jwt_part(token: &str, index: usize) -> Option<Map<String, Value>> {
    let mut parts = token.split('.');
    let (Some(head), Some(body), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let part = if index == 0 { head } else { body };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The header's `alg` as written, when the token has a JWT's shape.
pub(super) fn jwt_alg(token: &str) -> Option<String> {
    Some(jwt_part(token, 0)?.get("alg")?.as_str()?.to_string())
}

/// What in a JWT's header this server refuses before checking its signature: extensions it
/// must understand but does not (`crit`, RFC 7515 §4.1.11), and a type that says it is not
/// an access token (RFC 9068 §2.1 names `at+jwt`; plain `JWT` is what many issuers write).
pub(super) fn header_refusal(header: &Map<String, Value>) -> Option<String> {
    if let Some(crit) = header.get("crit") {
        return Some(format!(
            "the token's header marks extensions this server does not understand as critical (crit: {crit}); it cannot be accepted"
        ));
    }
    match header.get("typ") {
        None => None,
        Some(Value::String(t))
            if ["at+jwt", "application/at+jwt", "jwt"]
                .iter()
                .any(|ok| t.eq_ignore_ascii_case(ok)) =>
        {
            None
        }
        Some(t) => Some(format!(
            "the token's type (typ {t}) is not an access token's; send the access token your sign-in gave"
        )),
    }
}

/// A claim whose JSON type is not what the JWT and OAuth specs say, named.
pub(super) fn claim_shape(claims: &Map<String, Value>) -> Option<String> {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    for (claim, want) in [("iss", "a string"), ("sub", "a string")] {
        if let Some(v) = claims.get(claim).filter(|v| !v.is_string()) {
            return Some(format!(
                "the token's '{claim}' claim is {}; it must be {want}",
                kind(v)
            ));
        }
    }
    for claim in ["exp", "nbf", "iat"] {
        if let Some(v) = claims.get(claim).filter(|v| !v.is_number()) {
            return Some(format!(
                "the token's '{claim}' claim is {}; it must be a number of seconds",
                kind(v)
            ));
        }
    }
    match claims.get("aud") {
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => None,
        Some(Value::String(_)) | None => None,
        Some(v) => Some(format!(
            "the token's 'aud' claim is {}; it must be a string or an array of strings",
            kind(v)
        )),
    }
}

/// Whether claims are an OpenID ID token's rather than an access token's: ID tokens carry
/// `nonce` or hashes of what came with them, and name the client they were issued to as their
/// audience (an access token's audience is the resource).
pub(super) fn id_token_sign(claims: &Map<String, Value>, own_client: Option<&str>) -> Option<String> {
    if let Some(c) = ["nonce", "at_hash", "c_hash", "s_hash"]
        .into_iter()
        .find(|c| claims.contains_key(*c))
    {
        return Some(format!("it carries '{c}'"));
    }
    let audience: Vec<&str> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let clients = [claims.get("azp"), claims.get("client_id")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .chain(own_client);
    for client in clients {
        if audience.contains(&client) {
            return Some(format!("its audience names the client '{client}'"));
        }
    }
    None
}

pub(super) fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
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
    fn what_is_wrong_with_a_token_is_named() {
        let obj = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            claim_shape(&obj(serde_json::json!({"sub": ["alice"]}))).as_deref(),
            Some("the token's 'sub' claim is an array; it must be a string")
        );
        assert!(claim_shape(&obj(serde_json::json!({"iss": ["a"]}))).is_some());
        assert!(claim_shape(&obj(serde_json::json!({"exp": "9"}))).is_some());
        assert!(claim_shape(&obj(serde_json::json!({"sub": "a", "aud": ["x"], "exp": 1}))).is_none());
        assert!(header_refusal(&obj(serde_json::json!({"alg": "RS256", "crit": ["x"]}))).is_some());
        assert!(header_refusal(&obj(serde_json::json!({"alg": "RS256", "typ": "id_token+jwt"}))).is_some());
        assert!(header_refusal(&obj(serde_json::json!({"alg": "RS256", "typ": "at+jwt"}))).is_none());
        assert!(header_refusal(&obj(serde_json::json!({"alg": "RS256", "typ": "JWT"}))).is_none());
        let id = obj(serde_json::json!({"aud": ["https://s/mcp", "app"], "azp": "app"}));
        assert!(id_token_sign(&id, None).is_some());
        assert!(id_token_sign(&obj(serde_json::json!({"nonce": "n"})), None).is_some());
        let access = obj(serde_json::json!({"aud": "https://s/mcp", "client_id": "app"}));
        assert!(id_token_sign(&access, None).is_none());
        assert!(
            id_token_sign(
                &obj(serde_json::json!({"aud": ["https://s/mcp", "rs"]})),
                Some("rs")
            )
            .is_some()
        );
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let c = serde_json::json!({"scope": "mcp read", "scp": ["write"]});
        assert_eq!(scopes_of(c.as_object().unwrap()), ["mcp", "read", "write"]);
    }
}
