//! Secrets the guest never sees (`CODE_SANDBOX_SECRETS`): a file of `NAME HOST-PATTERN VALUE`
//! lines. The guest reads a placeholder as `os.environ["NAME"]`; the host puts the value in
//! place of the placeholder only in requests to a host the line's pattern matches (headers and
//! the URL's query), and refuses a request that carries the placeholder anywhere else.

use std::path::Path;

use super::rules::HostRule;

/// One secret: its name, where it may go, and its value (held by the host only).
pub struct Secret {
    pub name: String,
    pub rule: HostRule,
    value: String,
}

impl Secret {
    /// What the guest sees instead of the value: fixed per name, so a saved interpreter that
    /// kept it in a variable still gets the value substituted after a restart.
    pub fn placeholder(&self) -> String {
        format!("__MCS_SECRET_{}__", self.name)
    }

    pub fn value(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("rule", &self.rule)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("the secrets file {file} could not be read ({source}); fix CODE_SANDBOX_SECRETS")]
    Unreadable { file: String, source: std::io::Error },
    #[error(
        "the secrets file {file} may be read by other users (mode {mode:o}); run `chmod 600 {file}`, then start again"
    )]
    Open { file: String, mode: u32 },
    #[error("{file}:{line}: {why}; each line is `NAME HOST-PATTERN VALUE`")]
    Line { file: String, line: usize, why: String },
}

pub fn load(file: &Path) -> Result<Vec<Secret>, SecretsError> {
    let shown = file.display().to_string();
    let meta = std::fs::metadata(file).map_err(|source| SecretsError::Unreadable {
        file: shown.clone(),
        source,
    })?;
    if let Some(mode) = crate::host::marks::mode(&meta).filter(|m| m & 0o077 != 0) {
        return Err(SecretsError::Open { file: shown, mode });
    }
    let text = std::fs::read_to_string(file).map_err(|source| SecretsError::Unreadable {
        file: shown.clone(),
        source,
    })?;
    parse(&text).map_err(|(line, why)| SecretsError::Line {
        file: shown,
        line,
        why,
    })
}

fn parse(text: &str) -> Result<Vec<Secret>, (usize, String)> {
    let mut out: Vec<Secret> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, char::is_whitespace);
        let (Some(name), Some(pattern), Some(value)) = (parts.next(), parts.next(), parts.next()) else {
            return Err((n + 1, "it has fewer than three fields".into()));
        };
        let value = value.trim();
        let valid_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid_name {
            return Err((n + 1, format!("{name:?} is not an environment variable name")));
        }
        if value.is_empty() {
            return Err((n + 1, format!("{name} has no value")));
        }
        if out.iter().any(|s| s.name == name) {
            return Err((n + 1, format!("{name} is named twice")));
        }
        let rule = HostRule::parse(pattern).map_err(|e| (n + 1, e.to_string()))?;
        out.push(Secret {
            name: name.to_string(),
            rule,
            value: value.to_string(),
        });
    }
    Ok(out)
}

/// A request's parts after the secrets are put in: or the secret that may not go there.
pub fn substitute(
    secrets: &[Secret],
    url: &reqwest::Url,
    headers: &mut [(String, String)],
    body: &[u8],
) -> Result<reqwest::Url, String> {
    let mut url = url.clone();
    for s in secrets {
        let placeholder = s.placeholder();
        let in_url = url.as_str().contains(&placeholder);
        let in_headers = headers
            .iter()
            .any(|(k, v)| k.contains(&placeholder) || v.contains(&placeholder));
        let in_body = body
            .windows(placeholder.len().max(1))
            .any(|w| w == placeholder.as_bytes());
        if !(in_url || in_headers || in_body) {
            continue;
        }
        let wrong = if in_body {
            Some("in its body")
        } else {
            s.rule.mismatch(&url)
        };
        if let Some(wrong) = wrong {
            return Err(format!(
                "the request to {} carries the placeholder of the secret {} ({wrong}), which is sent only in the headers or query of requests its line's host pattern in CODE_SANDBOX_SECRETS allows (the same syntax as CODE_SANDBOX_ALLOW_HOSTS)",
                url.host_str().unwrap_or_default(),
                s.name,
            ));
        }
        if in_url {
            let query = url.query().map(|q| q.replace(&placeholder, &s.value));
            if url.path().contains(&placeholder) {
                return Err(format!(
                    "the placeholder of the secret {} is in the URL's path; it is put in only in headers and the query",
                    s.name
                ));
            }
            url.set_query(query.as_deref());
        }
        for (_, v) in headers.iter_mut() {
            if v.contains(&placeholder) {
                *v = v.replace(&placeholder, &s.value);
            }
        }
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_goes_only_to_its_host_and_only_in_headers_and_the_query() {
        let secrets = parse("# comment\nAPI_TOKEN api.example.com s3cret value\n").unwrap();
        assert_eq!(secrets[0].value(), "s3cret value");
        let p = secrets[0].placeholder();
        let to = |u: &str| reqwest::Url::parse(u).unwrap();
        let mut headers = vec![("Authorization".to_string(), format!("Bearer {p}"))];
        let url = substitute(
            &secrets,
            &to(&format!("https://api.example.com/v1?key={p}")),
            &mut headers,
            b"",
        )
        .unwrap();
        assert_eq!(headers[0].1, "Bearer s3cret value");
        assert!(
            url.as_str().contains("key=s3cret%20value") || url.as_str().contains("key=s3cret value"),
            "{url}"
        );
        let mut headers = vec![("Authorization".to_string(), format!("Bearer {p}"))];
        let e = substitute(&secrets, &to("https://evil.example.com/"), &mut headers, b"").unwrap_err();
        assert!(e.contains("another host"), "{e}");
        let e = substitute(&secrets, &to("http://api.example.com/"), &mut headers, b"").unwrap_err();
        assert!(
            e.contains("same host over http") && !e.contains("another host"),
            "{e}"
        );
        // The forms users write: a URL with its trailing slash is the same pattern.
        let copied = parse("API_TOKEN https://api.example.com/ v\n").unwrap();
        assert!(copied[0].rule.permits(&to("https://api.example.com/x")));
        assert!(substitute(&secrets, &to("https://api.example.com/"), &mut [], p.as_bytes()).is_err());
        assert!(
            substitute(
                &secrets,
                &to(&format!("https://api.example.com/{p}")),
                &mut [],
                b""
            )
            .is_err()
        );
        assert!(parse("A b").is_err());
        assert!(parse("1A api.example.com v").is_err());
        assert!(parse("A api.example.com/x v").is_err());
        assert!(parse("A a.com v\nA a.com w").is_err());
    }
}
