//! Where a package index's wheel links may lead: the index's own origin, and the hosts the
//! user lists in `CODE_SANDBOX_INDEX_FILE_HOSTS` (an index whose files live elsewhere, as the
//! public index's do). Anything else is refused before it is fetched, so an index cannot make
//! the server GET an arbitrary URL; a listed host must not resolve to an internal address,
//! redirects included. Only the index's own host may be internal (a local index).

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::outbound::internal_address::is_internal;

#[derive(Clone, Debug)]
pub struct FileHosts {
    index: Url,
    /// Lower-case host names or `host:port`.
    listed: Vec<String>,
}

impl FileHosts {
    /// `listed`: the setting's comma-separated hosts (`host`, `host:port` or a URL).
    pub fn new(index: &Url, listed: &str) -> FileHosts {
        let listed = listed
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                let h = h.to_ascii_lowercase();
                let bare = h.split_once("://").map_or(h.as_str(), |(_, rest)| rest);
                bare.trim_end_matches('/').to_string()
            })
            .collect();
        FileHosts {
            index: index.clone(),
            listed,
        }
    }

    fn own_origin(&self, url: &Url) -> bool {
        url.scheme() == self.index.scheme()
            && url.host_str() == self.index.host_str()
            && url.port_or_known_default() == self.index.port_or_known_default()
    }

    /// Whether `url` may be fetched, or why not (a sentence naming the setting).
    pub fn check(&self, url: &Url) -> Result<(), String> {
        if self.own_origin(url) {
            return Ok(());
        }
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "the package index links to a {}: URL, and only http(s) links are followed",
                url.scheme()
            ));
        }
        let with_port = url.port().map(|p| format!("{host}:{p}"));
        let listed = self
            .listed
            .iter()
            .any(|l| *l == host || Some(l) == with_port.as_ref());
        if !listed {
            return Err(format!(
                "the package index links to {host}, not to its own host; CODE_SANDBOX_INDEX_FILE_HOSTS must list {host} for its files to be fetched (only if you trust it)"
            ));
        }
        let ip = host.trim_start_matches('[').trim_end_matches(']').parse();
        if let Ok(ip) = ip
            && is_internal(ip)
        {
            return Err(format!(
                "the package index links to {host}, an internal address, which only the index's own host may be"
            ));
        }
        Ok(())
    }

    /// The resolver for the index's client: any address for the index's own host, only
    /// public ones for every other.
    pub fn resolver(&self) -> Arc<PublicOnly> {
        Arc::new(PublicOnly {
            own: self.index.host_str().unwrap_or_default().to_ascii_lowercase(),
        })
    }
}

pub struct PublicOnly {
    own: String,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let own = host == self.own;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !own && addrs.iter().any(|a| is_internal(a.ip())) {
                return Err(format!(
                    "{host} resolves to an internal address, which only the package index's own host may"
                )
                .into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_go_to_the_index_or_a_listed_public_host_only() {
        let index = Url::parse("http://127.0.0.1:8080/simple/").unwrap();
        let hosts = FileHosts::new(
            &index,
            "files.example.org, https://cdn.example.net:8443/, 10.0.0.5",
        );
        let ok = |u: &str| hosts.check(&Url::parse(u).unwrap());
        assert!(ok("http://127.0.0.1:8080/packages/a.whl").is_ok());
        assert!(ok("https://files.example.org/a.whl").is_ok());
        assert!(ok("https://cdn.example.net:8443/a.whl").is_ok());
        for (url, says) in [
            ("http://127.0.0.1:9999/a.whl", "CODE_SANDBOX_INDEX_FILE_HOSTS"),
            (
                "http://169.254.169.254/latest/meta-data",
                "CODE_SANDBOX_INDEX_FILE_HOSTS",
            ),
            ("https://cdn.example.net/a.whl", "CODE_SANDBOX_INDEX_FILE_HOSTS"),
            ("http://10.0.0.5/a.whl", "internal address"),
            ("ftp://files.example.org/a.whl", "only http(s)"),
        ] {
            let err = ok(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}
