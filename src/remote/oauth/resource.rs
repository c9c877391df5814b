//! What this server is as an OAuth protected resource, from the settings: its canonical URL
//! (the audience tokens must name), the issuer it trusts, the scopes it requires, and where
//! its protected resource metadata (RFC 9728) is published. Checked once at start, so a typo
//! stops the server with the setting's name instead of refusing every sign-in later.

use url::Url;

use crate::config::OAuthSettings;

#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    #[error(
        "CODE_SANDBOX_PUBLIC_URL (--public-url) is required with CODE_SANDBOX_OAUTH_ISSUER: set it to the URL of /mcp as clients reach it, e.g. https://sandbox.example.com/mcp"
    )]
    NoPublicUrl,
    #[error(
        "CODE_SANDBOX_PUBLIC_URL (--public-url) is set but CODE_SANDBOX_OAUTH_ISSUER is not; set the issuer too, or unset the public URL"
    )]
    NoIssuer,
    #[error("{setting} '{value}' is not a usable URL ({why}); {hint}")]
    BadUrl {
        setting: &'static str,
        value: String,
        why: String,
        hint: &'static str,
    },
    #[error(
        "CODE_SANDBOX_OAUTH_PRINCIPAL_CLAIM is empty; name the claim that identifies a user, e.g. sub or email"
    )]
    NoClaim,
    #[error(
        "CODE_SANDBOX_OAUTH_CLIENT must be CLIENT_ID:SECRET (the client this server uses to introspect opaque tokens)"
    )]
    BadClient,
}

/// The checked OAuth settings.
#[derive(Clone, Debug)]
pub struct Resource {
    /// The public URL of `/mcp`, as written (normalised by `url`): tokens' `aud` must hold it.
    pub url: Url,
    pub issuer: Url,
    /// The issuer as configured, for comparison with metadata and `iss` claims, which must
    /// match it character for character (RFC 8414 §3.3).
    pub issuer_text: String,
    pub scopes: Vec<String>,
    pub claim: String,
    /// `(id, secret)` for token introspection.
    pub client: Option<(String, String)>,
}

const ISSUER_HINT: &str = "give the issuer URL exactly as the authorization server's metadata states it";

/// https, or http to a loopback address (a local IdP, tests).
fn secure_or_loopback(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        },
        _ => false,
    }
}

fn parse_url(setting: &'static str, value: &str, hint: &'static str) -> Result<Url, SettingError> {
    let bad = |why: String| SettingError::BadUrl {
        setting,
        value: value.to_string(),
        why,
        hint,
    };
    let url = Url::parse(value.trim()).map_err(|e| bad(e.to_string()))?;
    if !secure_or_loopback(&url) {
        return Err(bad("it must be https (http only to a loopback address)".into()));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(bad("it may hold no fragment and no user or password".into()));
    }
    Ok(url)
}

impl Resource {
    /// `None` when OAuth is off (no issuer, no public URL).
    pub fn from_settings(s: &OAuthSettings) -> Result<Option<Resource>, SettingError> {
        let issuer = s.issuer.as_deref().map(str::trim).filter(|v| !v.is_empty());
        let public = s.public_url.as_deref().map(str::trim).filter(|v| !v.is_empty());
        let (issuer_text, public) = match (issuer, public) {
            (None, None) => return Ok(None),
            (Some(_), None) => return Err(SettingError::NoPublicUrl),
            (None, Some(_)) => return Err(SettingError::NoIssuer),
            (Some(i), Some(p)) => (i, p),
        };
        let issuer = parse_url("CODE_SANDBOX_OAUTH_ISSUER", issuer_text, ISSUER_HINT)?;
        if issuer.query().is_some() {
            return Err(SettingError::BadUrl {
                setting: "CODE_SANDBOX_OAUTH_ISSUER",
                value: issuer_text.to_string(),
                why: "an issuer has no query".into(),
                hint: ISSUER_HINT,
            });
        }
        let url = parse_url(
            "CODE_SANDBOX_PUBLIC_URL",
            public,
            "give the URL of /mcp as clients reach it, e.g. https://sandbox.example.com/mcp",
        )?;
        let claim = s.principal_claim.trim().to_string();
        if claim.is_empty() {
            return Err(SettingError::NoClaim);
        }
        let client = match s.client.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => match c.split_once(':') {
                Some((id, secret)) if !id.is_empty() && !secret.is_empty() => {
                    Some((id.to_string(), secret.to_string()))
                }
                _ => return Err(SettingError::BadClient),
            },
        };
        Ok(Some(Resource {
            url,
            issuer,
            issuer_text: issuer_text.to_string(),
            scopes: s
                .scopes
                .as_deref()
                .unwrap_or("")
                .split([',', ' '])
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .collect(),
            claim,
            client,
        }))
    }

    /// The audience tokens must carry: the public URL as configured (a trailing slash, or
    /// its absence, is kept: RFC 8707 compares resource indicators as strings).
    pub fn audience(&self) -> String {
        let s = self.url.as_str();
        // `url` adds a `/` to a bare origin; the spec's canonical form has none.
        if self.url.path() == "/" && self.url.query().is_none() {
            s.trim_end_matches('/').to_string()
        } else {
            s.to_string()
        }
    }

    /// Where the protected resource metadata is, for this resource (RFC 9728 §3.1: the
    /// well-known segment goes between the origin and the path).
    pub fn metadata_url(&self) -> String {
        let origin = self.url.origin().ascii_serialization();
        let path = self.url.path().trim_end_matches('/');
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }

    /// The protected resource metadata document.
    pub fn metadata(&self) -> serde_json::Value {
        let mut doc = serde_json::json!({
            "resource": self.audience(),
            "authorization_servers": [self.issuer_text],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-code-sandbox",
        });
        if !self.scopes.is_empty() {
            doc["scopes_supported"] = serde_json::json!(self.scopes);
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(issuer: Option<&str>, public: Option<&str>) -> OAuthSettings {
        OAuthSettings {
            issuer: issuer.map(str::to_string),
            public_url: public.map(str::to_string),
            scopes: Some("mcp, tools".into()),
            principal_claim: "sub".into(),
            allow: None,
            client: None,
        }
    }

    #[test]
    fn urls_must_be_https_or_loopback_and_come_in_pairs() {
        let ok = Resource::from_settings(&settings(
            Some("https://idp.example.com/realms/team"),
            Some("https://sandbox.example.com/mcp"),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(ok.scopes, ["mcp", "tools"]);
        assert_eq!(
            ok.metadata_url(),
            "https://sandbox.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(ok.metadata()["resource"], "https://sandbox.example.com/mcp");
        assert!(
            Resource::from_settings(&settings(
                Some("http://127.0.0.1:9000"),
                Some("http://localhost:1/mcp")
            ))
            .unwrap()
            .is_some()
        );
        for (issuer, public, setting) in [
            (
                Some("http://idp.example.com"),
                Some("https://s.example.com/mcp"),
                "CODE_SANDBOX_OAUTH_ISSUER",
            ),
            (
                Some("https://idp.example.com"),
                Some("http://s.example.com/mcp"),
                "CODE_SANDBOX_PUBLIC_URL",
            ),
            (
                Some("not a url"),
                Some("https://s.example.com/mcp"),
                "CODE_SANDBOX_OAUTH_ISSUER",
            ),
            (Some("https://idp.example.com"), None, "CODE_SANDBOX_PUBLIC_URL"),
            (
                None,
                Some("https://s.example.com/mcp"),
                "CODE_SANDBOX_OAUTH_ISSUER",
            ),
        ] {
            let err = Resource::from_settings(&settings(issuer, public))
                .unwrap_err()
                .to_string();
            assert!(err.contains(setting), "{issuer:?} {public:?}: {err}");
        }
        assert!(Resource::from_settings(&settings(None, None)).unwrap().is_none());
    }
}
