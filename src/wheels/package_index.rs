//! Installs from a package index (`CODE_SANDBOX_INDEX_URL`): before the ordinary resolver and
//! installer run, each requirement the local cache cannot satisfy is fetched from the index into
//! a cache folder of its own, checked against the index's SHA-256. Only the host talks to the
//! index; sandbox code never reaches it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::remote_index::{download, only_compiled, pick, project};
use super::{WheelError, normalize};

/// Most wheels one install may fetch from the index (a dependency tree that large is a mistake).
const MAX_FETCHES: usize = 64;
/// One page or wheel from the index, whole.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A package index and where its wheels are kept.
pub struct PackageIndex {
    url: reqwest::Url,
    client: reqwest::Client,
    cache: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexSetupError {
    /// Without the value itself, which may hold a token.
    #[error(
        "CODE_SANDBOX_INDEX_URL is not a URL ({why}); give the index's simple API, like https://host/simple/"
    )]
    BadUrl { why: String },
    #[error("CODE_SANDBOX_INDEX_URL must be http:// or https://, not '{0}'")]
    Scheme(String),
    #[error("the package index client could not be made: {0}")]
    Client(#[source] reqwest::Error),
}

impl PackageIndex {
    /// `url` is the index's simple API; `roots` are trusted besides the platform's store
    /// (`CODE_SANDBOX_CA_FILE`); fetched wheels go to `cache`.
    pub fn new(url: &str, roots: Vec<reqwest::Certificate>, cache: PathBuf) -> Result<Self, IndexSetupError> {
        // Project pages are joined to the base, which needs its trailing slash.
        let url = reqwest::Url::parse(&format!("{}/", url.trim().trim_end_matches('/')))
            .map_err(|e| IndexSetupError::BadUrl { why: e.to_string() })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(IndexSetupError::Scheme(url.scheme().to_string()));
        }
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(5))
            .tls_certs_merge(roots)
            .build()
            .map_err(IndexSetupError::Client)?;
        Ok(PackageIndex { url, client, cache })
    }

    /// Where fetched wheels are kept: one of the install's wheel folders.
    pub fn cache(&self) -> &Path {
        &self.cache
    }

    /// The index as the user may be shown it: without a password or token in the URL.
    pub fn shown(&self) -> String {
        let mut url = self.url.clone();
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url.to_string()
    }

    /// Until `resolves` (the resolver, against the wheel folders as they are now) succeeds,
    /// fetches the wheel of the requirement it reports missing. Another error is left for the
    /// install itself to report.
    pub async fn fill(
        &self,
        python: &str,
        resolves: impl Fn() -> Result<(), WheelError>,
    ) -> Result<(), WheelError> {
        let mut fetched: Vec<String> = Vec::new();
        for _ in 0..MAX_FETCHES {
            let missing = match resolves() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let Some(wanted) = missing.missing() else {
                return Ok(());
            };
            let name = normalize(wanted.name.as_ref());
            crate::sandbox::call_scope::report(|| format!("asking the package index for {name}"));
            let files = project(&self.client, &self.url, &name).await?;
            let Some((file, _)) = pick(&files, wanted, python) else {
                if only_compiled(&files, &name) {
                    return Err(WheelError::NativeOnly(name));
                }
                return Err(WheelError::NotOnIndex {
                    what: missing.missing_named().unwrap_or(name),
                    index: self.shown(),
                    python: python.to_string(),
                });
            };
            if fetched.contains(&file.filename) {
                // Fetched, yet still missing: the resolver's own error says why.
                return Ok(());
            }
            crate::sandbox::call_scope::report(|| format!("downloading {}", file.filename));
            download(&self.client, file, &self.cache).await?;
            tracing::info!("fetched {} from the package index", file.filename);
            fetched.push(file.filename.clone());
        }
        Err(WheelError::Conflict(format!(
            "installing it would fetch more than {MAX_FETCHES} wheels from the package index; install its parts one by one"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_is_shown_without_its_credentials_and_needs_http() {
        // The binary installs the provider in main.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cache = std::env::temp_dir();
        let index = PackageIndex::new(
            "https://reader:t0ken@packages.example.com/simple",
            Vec::new(),
            cache.clone(),
        )
        .unwrap();
        assert_eq!(index.shown(), "https://packages.example.com/simple/");
        for (url, says) in [
            ("file:///srv/simple", "must be http:// or https://"),
            ("not a url", "is not a URL"),
            ("https://reader:t0ken@[packages", "is not a URL"),
        ] {
            let err = PackageIndex::new(url, Vec::new(), cache.clone())
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(says) && !err.contains("t0ken"), "{err}");
        }
    }
}
