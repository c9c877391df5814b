//! Installs from a package index (`CODE_SANDBOX_INDEX_URL`): before the ordinary resolver and
//! installer run, each requirement the local cache cannot satisfy is fetched from the index into
//! a cache folder of its own, checked against the index's SHA-256. Only the host talks to the
//! index; sandbox code never reaches it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file_hosts::FileHosts;
use super::remote_index::{download, only_compiled, pick, project};
use super::{WheelError, normalize};
use crate::config::Settings;
use crate::sandbox::SandboxError;
use sha2::Digest as _;
use std::sync::Arc;

/// Most wheels one install may fetch from the index (a dependency tree that large is a mistake).
const MAX_FETCHES: usize = 64;
/// Most bytes the wheels fetched from one index keep on disk; past it the least recently
/// fetched go (a later install fetches them again).
const MAX_CACHE_BYTES: u64 = 1 << 30;
/// One page or wheel from the index, whole.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A package index and where its wheels are kept.
pub struct PackageIndex {
    url: reqwest::Url,
    client: reqwest::Client,
    cache: PathBuf,
    /// Where its wheel links may lead.
    hosts: FileHosts,
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
    /// The package index installs may fetch from (`CODE_SANDBOX_INDEX_URL`), or `None`. A bad URL
    /// or CA file stops the start with what to fix.
    pub fn from_settings(settings: &Settings) -> Result<Option<Arc<PackageIndex>>, SandboxError> {
        let Some(url) = settings.package_index_url() else {
            return Ok(None);
        };
        let roots = crate::outbound::tls_roots::load(settings.ca_file.as_deref())
            .map_err(|e| SandboxError::InvalidArgument(e.to_string()))?;
        // Beside the pinned cache, one folder per index: another index is another source.
        let cache = settings
            .home_dir()
            .join("index-wheels")
            .join(&hex::encode(sha2::Sha256::digest(url.trim().as_bytes()))[..16]);
        let index = PackageIndex::new(
            url,
            roots,
            cache,
            settings.index_file_hosts.as_deref().unwrap_or_default(),
        )
        .map_err(|e| SandboxError::InvalidArgument(e.to_string()))?;
        tracing::info!(
            "install_package may fetch from the package index {}",
            index.shown()
        );
        Ok(Some(Arc::new(index)))
    }

    /// `url` is the index's simple API; `roots` are trusted besides the platform's store
    /// (`CODE_SANDBOX_CA_FILE`); fetched wheels go to `cache`; `file_hosts` are the hosts
    /// besides the index's own its links may lead to (`CODE_SANDBOX_INDEX_FILE_HOSTS`).
    pub fn new(
        url: &str,
        roots: Vec<reqwest::Certificate>,
        cache: PathBuf,
        file_hosts: &str,
    ) -> Result<Self, IndexSetupError> {
        // Project pages are joined to the base, which needs its trailing slash.
        let url = reqwest::Url::parse(&format!("{}/", url.trim().trim_end_matches('/')))
            .map_err(|e| IndexSetupError::BadUrl { why: e.to_string() })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(IndexSetupError::Scheme(url.scheme().to_string()));
        }
        let hosts = FileHosts::new(&url, file_hosts);
        let follows = hosts.clone();
        // A redirect may lead only where a link may.
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 5 {
                return attempt.error("the package index redirected more than 5 times");
            }
            match follows.check(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(why) => attempt.error(why),
            }
        });
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(redirects)
            .dns_resolver(hosts.resolver())
            .tls_certs_merge(roots)
            .build()
            .map_err(IndexSetupError::Client)?;
        Ok(PackageIndex {
            url,
            client,
            cache,
            hosts,
        })
    }

    /// Where fetched wheels are kept: one of the install's wheel folders.
    pub fn cache(&self) -> &Path {
        &self.cache
    }

    /// Deletes a fetched wheel the installer refused (unsafe to unpack): it must not stay in
    /// the cache, taking disk and being refused again.
    pub fn forget_refused(&self, err: &WheelError) {
        if let WheelError::Unsafe { file, .. } = err
            && !file.contains(['/', '\\'])
            && !file.starts_with('.')
        {
            let path = self.cache.join(file);
            if std::fs::remove_file(&path).is_ok() {
                tracing::warn!("deleted {file}, fetched from the package index and refused at install");
            }
        }
    }

    /// Keeps the cache within [`MAX_CACHE_BYTES`], deleting the wheels fetched longest ago
    /// (never one this install just fetched).
    fn prune(&self, keep: &[String]) {
        let Ok(entries) = std::fs::read_dir(&self.cache) else {
            return;
        };
        let mut wheels: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let md = e.metadata().ok()?;
                let name = e.file_name().to_string_lossy().into_owned();
                if !md.is_file() || !name.ends_with(".whl") || keep.contains(&name) {
                    return None;
                }
                Some((md.modified().ok()?, md.len(), e.path()))
            })
            .collect();
        let kept: u64 = keep
            .iter()
            .filter_map(|n| std::fs::metadata(self.cache.join(n)).ok())
            .map(|m| m.len())
            .sum();
        let mut total = kept + wheels.iter().map(|w| w.1).sum::<u64>();
        wheels.sort();
        for (_, len, path) in wheels {
            if total <= MAX_CACHE_BYTES {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
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
            self.hosts.check(&file.url).map_err(|reason| WheelError::Unsafe {
                file: file.filename.clone(),
                reason,
            })?;
            crate::sandbox::call_scope::report(|| format!("downloading {}", file.filename));
            download(&self.client, file, &self.cache).await?;
            tracing::info!("fetched {} from the package index", file.filename);
            crate::sandbox::events::call_log(crate::sandbox::events::Severity::Info, || {
                format!("fetched {} from the package index", file.filename)
            });
            fetched.push(file.filename.clone());
            self.prune(&fetched);
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
            "",
        )
        .unwrap();
        assert_eq!(index.shown(), "https://packages.example.com/simple/");
        for (url, says) in [
            ("file:///srv/simple", "must be http:// or https://"),
            ("not a url", "is not a URL"),
            ("https://reader:t0ken@[packages", "is not a URL"),
        ] {
            let err = PackageIndex::new(url, Vec::new(), cache.clone(), "")
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(says) && !err.contains("t0ken"), "{err}");
        }
    }
}
