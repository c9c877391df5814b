//! Where kept sandboxes go: the URL `CODE_SANDBOX_STORE` names, opened through Apache
//! Arrow's `object_store` with credentials read the standard way for each cloud (the
//! environment: `AWS_*`, `GOOGLE_*`, `AZURE_*`, and what those point at). The URL shown in
//! logs and errors is scheme, bucket and prefix only: nothing a credential could be in.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path;

/// The schemes a store URL may have.
const SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "file"];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "CODE_SANDBOX_STORE must be a URL such as s3://bucket/prefix, gs://bucket/prefix, \
         az://container/prefix or file:///path: {0}"
    )]
    Url(String),
    #[error("the store {store} could not be opened: {message}")]
    Open { store: String, message: String },
    #[error("the store {store} failed a request for {what}: {message}")]
    Request {
        store: String,
        what: String,
        message: String,
    },
    /// An object this server wrote came back as something else.
    #[error("the store {store} holds {what}: it cannot be read back")]
    Damaged { store: String, what: String },
    /// Another replica holds the sandbox's lease: it serves it, and this one must not write it.
    #[error("replica {holder} serves this sandbox now")]
    HeldBy { holder: String },
    /// Another replica wrote a newer generation than the one this replica's copy came from:
    /// the copy is stale and is never written over it.
    #[error(
        "{writer} wrote generation {generation} of this sandbox after this replica's copy was made; the copy here is replaced by it before its next use"
    )]
    Superseded { writer: String, generation: u64 },
    /// A push took longer than half the grace period, time after time: a sweep could delete
    /// the chunks it wrote first before its manifest named them.
    #[error(
        "writing to the store {store} took longer than half the sweep's grace period ({} s) each time, so the chunks written first could be swept before the manifest named them; raise CODE_SANDBOX_STORE_GRACE_SECONDS",
        half_grace.as_secs()
    )]
    Slow { store: String, half_grace: Duration },
    #[error("reading {path} for the store failed: {source}")]
    Local {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An opened store and the prefix everything of this server goes under.
#[derive(Clone, Debug)]
pub struct Store {
    pub objects: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// Scheme, bucket and prefix: for messages.
    pub shown: String,
    /// Whether the store can replace an object only if it is the version read (S3 and the
    /// clouds can; a local folder cannot, and is for one machine).
    pub conditional: bool,
}

/// The setting checked: a URL with a known scheme, a bucket (but for `file`) and no
/// credentials. The error never repeats the URL (it could hold a secret).
pub fn checked_url(raw: &str) -> Result<url::Url, StoreError> {
    let url = url::Url::parse(raw).map_err(|e| StoreError::Url(e.to_string()))?;
    if !SCHEMES.contains(&url.scheme()) {
        let e = format!(
            "the scheme {}: is not one of {}",
            url.scheme(),
            SCHEMES.join(", ")
        );
        return Err(StoreError::Url(e));
    }
    if url.scheme() != "file" && url.host_str().is_none_or(str::is_empty) {
        return Err(StoreError::Url(format!(
            "it names no bucket after {}://",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        let e = "credentials do not go in the URL: set them the way the cloud's tools read them";
        return Err(StoreError::Url(e.into()));
    }
    Ok(url)
}

/// What to show of `url`: scheme, bucket and path.
fn shown(url: &url::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.path()
    )
}

/// The prefixes of the variables a store's client reads: each cloud's own. object_store also
/// takes bare option names (`endpoint`, `allow_invalid_certificates`), which a variable set
/// for something else must never turn into a store setting.
const STORE_VARIABLES: [&str; 3] = ["AWS_", "GOOGLE_", "AZURE_"];

/// Opens the store `raw` names (checked by [`checked_url`]), reading credentials and
/// endpoint settings from the clouds' variables, as `object_store` (and their own tools) do.
pub fn open(raw: &str) -> Result<Store, StoreError> {
    // object_store's option names are the variables' names in lower case.
    let vars = std::env::vars().filter(|(k, _)| STORE_VARIABLES.iter().any(|p| k.starts_with(p)));
    open_with(raw, vars.map(|(k, v)| (k.to_ascii_lowercase(), v)))
}

/// [`open`] with these options (`aws_endpoint_url`, `aws_access_key_id`, ...) instead of the
/// environment's: for tools that look at a store beside the server.
pub fn open_with(
    raw: &str,
    options: impl IntoIterator<Item = (String, String)>,
) -> Result<Store, StoreError> {
    let url = checked_url(raw)?;
    let shown = shown(&url);
    if url.scheme() == "file" {
        // The URL's path as this platform names it (`file:///C:/kept` is `C:\kept` on Windows).
        let folder = url
            .to_file_path()
            .map_err(|()| StoreError::Url("a file URL must name a local folder".into()))?;
        std::fs::create_dir_all(&folder).map_err(|e| StoreError::Open {
            store: shown.clone(),
            message: e.to_string(),
        })?;
    }
    // reqwest here brings no crypto of its own: the process's (ring) unless one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (objects, prefix) = objects(&url, options).map_err(|e| StoreError::Open {
        store: shown.clone(),
        message: e.to_string(),
    })?;
    Ok(Store {
        objects: Arc::from(objects),
        prefix,
        conditional: url.scheme() != "file",
        shown,
    })
}

/// How long one request is retried before its caller hears that it failed: a call waiting on
/// the store is told to retry within seconds, not after `object_store`'s default three
/// minutes; pushes are tried again by the pusher itself (see `retry`).
const RETRY: object_store::RetryConfig = object_store::RetryConfig {
    backoff: object_store::BackoffConfig {
        init_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(2),
        base: 2.0,
    },
    max_retries: 4,
    retry_timeout: RETRY_FOR,
};

/// How long one try of a request may take, connecting and reading its answer included: a
/// store that accepts connections and never answers costs this, not the client's default 30 s.
/// With [`RETRY_FOR`], no request to the store takes more than [`REQUEST_BOUND`].
const TRY_FOR: Duration = Duration::from_secs(4);
/// No new try starts after this long.
const RETRY_FOR: Duration = Duration::from_secs(4);
/// The longest any request to the store takes before its caller hears that it failed.
pub const REQUEST_BOUND: Duration = Duration::from_secs(TRY_FOR.as_secs() + RETRY_FOR.as_secs());

fn client_options() -> object_store::ClientOptions {
    object_store::ClientOptions::new()
        .with_timeout(TRY_FOR)
        .with_connect_timeout(Duration::from_secs(2))
}

/// The client for `url`'s scheme, configured by `options` (names as `object_store` reads
/// them; others are ignored), retrying as [`RETRY`] says.
fn objects(
    url: &url::Url,
    options: impl IntoIterator<Item = (String, String)>,
) -> object_store::Result<(Box<dyn ObjectStore>, Path)> {
    use object_store::ObjectStoreScheme as Scheme;
    use object_store::{aws, azure, gcp};
    fn configured<B, K: std::str::FromStr>(
        builder: B,
        options: impl IntoIterator<Item = (String, String)>,
        set: fn(B, K, String) -> B,
    ) -> B {
        options.into_iter().fold(builder, |b, (k, v)| match k.parse() {
            Ok(key) => set(b, key, v),
            Err(_) => b,
        })
    }
    let (scheme, prefix) = Scheme::parse(url)?;
    let at = url.as_str();
    let objects: Box<dyn ObjectStore> = match scheme {
        Scheme::AmazonS3 => Box::new(
            configured(
                aws::AmazonS3Builder::new()
                    .with_url(at)
                    .with_client_options(client_options()),
                options,
                aws::AmazonS3Builder::with_config,
            )
            .with_retry(RETRY)
            .build()?,
        ),
        Scheme::GoogleCloudStorage => Box::new(
            configured(
                gcp::GoogleCloudStorageBuilder::new()
                    .with_url(at)
                    .with_client_options(client_options()),
                options,
                gcp::GoogleCloudStorageBuilder::with_config,
            )
            .with_retry(RETRY)
            .build()?,
        ),
        Scheme::MicrosoftAzure => Box::new(
            configured(
                azure::MicrosoftAzureBuilder::new()
                    .with_url(at)
                    .with_client_options(client_options()),
                options,
                azure::MicrosoftAzureBuilder::with_config,
            )
            .with_retry(RETRY)
            .build()?,
        ),
        _ => return object_store::parse_url_opts(url, options),
    };
    Ok((objects, prefix))
}

impl Store {
    /// `parts` under the prefix.
    pub fn path(&self, parts: &[&str]) -> Path {
        parts.iter().fold(self.prefix.clone(), |p, part| p.join(*part))
    }

    /// The object at `path` (`what` it is, for errors) and its version, if there is one and
    /// it is at most `most` bytes (a bigger one is an error: no object this server writes is).
    pub async fn read(
        &self,
        path: &Path,
        what: &str,
        most: u64,
    ) -> Result<Option<(bytes::Bytes, object_store::UpdateVersion)>, StoreError> {
        use object_store::ObjectStoreExt;
        let got = match self.objects.get(path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.failed(what, e)),
        };
        let version = object_store::UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        if got.meta.size > most {
            return Err(StoreError::Request {
                store: self.shown.clone(),
                what: what.to_string(),
                message: format!("it is {} bytes, more than any this server writes", got.meta.size),
            });
        }
        let bytes = got.bytes().await.map_err(|e| self.failed(what, e))?;
        Ok(Some((bytes, version)))
    }

    /// How to write an object this server read at `version` (none: it was absent), so that a
    /// writer that lost track fails instead of writing over another's: replace only that
    /// version, or create only if still absent. A store without conditional writes overwrites.
    pub fn put_mode(&self, version: Option<object_store::UpdateVersion>) -> object_store::PutMode {
        use object_store::PutMode;
        match (version, self.conditional) {
            (_, false) => PutMode::Overwrite,
            (Some(v), true) => PutMode::Update(v),
            (None, true) => PutMode::Create,
        }
    }

    /// `what` changed in the store while this replica wrote it: the write is tried again.
    pub fn changed(&self, what: &str) -> StoreError {
        StoreError::Request {
            store: self.shown.clone(),
            what: what.to_string(),
            message: "it changed while it was being written; it is written again".into(),
        }
    }

    /// An error of a request about `what`. The store's own message names its endpoint and the
    /// object's full key, so it goes to the log; the caller hears which kind of failure it was.
    pub fn failed(&self, what: &str, e: object_store::Error) -> StoreError {
        tracing::warn!("the store {} failed a request for {what}: {e}", self.shown);
        StoreError::Request {
            store: self.shown.clone(),
            what: what.to_string(),
            message: failure_kind(&e).to_string(),
        }
    }
}

/// What kind of failure `e` is, in words that name no endpoint or key.
fn failure_kind(e: &object_store::Error) -> &'static str {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => "it is not there",
        E::Precondition { .. } | E::AlreadyExists { .. } | E::NotModified { .. } => {
            "another replica changed it meanwhile"
        }
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            "the store refused this server's credentials (the operator should check them)"
        }
        E::NotSupported { .. } | E::NotImplemented { .. } => "the store does not support this request",
        _ => "it did not answer in time or could not be reached",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_are_checked_and_never_carry_credentials() {
        assert!(checked_url("s3://bucket/kept").is_ok());
        assert!(checked_url("gs://bucket").is_ok());
        assert!(checked_url("file:///srv/kept").is_ok());
        for bad in [
            "bucket/kept",
            "http://x/y",
            "s3:///nobucket",
            "s3://key:secret@bucket/p",
        ] {
            let e = checked_url(bad).expect_err(bad).to_string();
            assert!(e.contains("s3://bucket/prefix"), "{bad}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[test]
    fn a_local_folder_opens_as_a_store_without_conditional_writes() {
        let dir = std::env::temp_dir().join(format!("mcs-store-{}", uuid::Uuid::new_v4().simple()));
        let url = url::Url::from_directory_path(&dir).expect("an absolute folder");
        let store = open(url.as_str()).expect("opens");
        assert!(!store.conditional);
        assert!(dir.is_dir());
        let _ = std::fs::remove_dir_all(dir);
    }
}
