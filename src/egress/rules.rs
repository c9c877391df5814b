//! The hosts guest code may reach (`CODE_SANDBOX_ALLOW_HOSTS`): `api.example.com`,
//! `*.example.org`, an IP address, optionally `:port`, and `http://` in front for plain HTTP
//! (HTTPS is the default and the only scheme otherwise).
//!
//! Hosts are compared after the WHATWG URL parser has normalised them (lower case, IDNA to
//! punycode, IPv4 in decimal, octal or hex to dotted form), so a look-alike never matches a
//! name it only resembles, and an IP address matches only an entry that is that address.

use std::net::IpAddr;

/// One entry of the allowlist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    pub https: bool,
    pub host: HostPattern,
    /// `None`: the scheme's default port only.
    pub port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    Name(String),
    /// `*.example.org`: any name below it (not the name itself).
    Below(String),
    Ip(IpAddr),
}

#[derive(Debug, thiserror::Error)]
#[error(
    "{entry:?} is not a host pattern ({why}); host patterns, in CODE_SANDBOX_ALLOW_HOSTS and in the secrets file alike, look like api.example.com, *.example.org, 127.0.0.1:8443 or http://intranet.local:8080 (https unless http:// is written)"
)]
pub struct RuleError {
    pub entry: String,
    pub why: String,
}

impl HostRule {
    pub fn parse(entry: &str) -> Result<HostRule, RuleError> {
        let bad = |why: &str| RuleError {
            entry: entry.to_string(),
            why: why.to_string(),
        };
        let text = entry.trim();
        let (https, rest) = match text.split_once("://") {
            Some(("https", rest)) => (true, rest),
            Some(("http", rest)) => (false, rest),
            Some(_) => return Err(bad("only http:// and https:// are schemes")),
            None => (true, text),
        };
        // A trailing slash, as a URL copied from a browser has, names the same host.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '@', '?', '#']) || rest.is_empty() {
            return Err(bad("a host, with an optional :port, and nothing else"));
        }
        let (wild, rest) = match rest.strip_prefix("*.") {
            Some(r) => (true, r),
            None => (false, rest),
        };
        // Let the URL parser normalise the host and port exactly as it will a request's.
        let scheme = if https { "https" } else { "http" };
        let url = reqwest::Url::parse(&format!("{scheme}://{rest}/")).map_err(|e| bad(&e.to_string()))?;
        let host = match url.host() {
            Some(url::Host::Domain(d)) => {
                if d.ends_with('.') {
                    return Err(bad("no trailing dot"));
                }
                if wild {
                    HostPattern::Below(d.to_string())
                } else {
                    HostPattern::Name(d.to_string())
                }
            }
            Some(url::Host::Ipv4(ip)) if !wild => HostPattern::Ip(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) if !wild => HostPattern::Ip(IpAddr::V6(ip)),
            Some(_) => return Err(bad("a wildcard goes only before a name")),
            None => return Err(bad("no host")),
        };
        Ok(HostRule {
            https,
            host,
            port: url.port(),
        })
    }

    /// Whether a request to `url` is what this entry allows.
    pub fn permits(&self, url: &reqwest::Url) -> bool {
        self.mismatch(url).is_none()
    }

    /// What about a request to `url` this entry does not allow (its scheme, port or host), or
    /// `None` when it allows it: a refusal says which, never "another host" of the same host.
    pub fn mismatch(&self, url: &reqwest::Url) -> Option<&'static str> {
        let scheme_ok = match url.scheme() {
            "https" => self.https,
            "http" => !self.https,
            _ => false,
        };
        let default = if self.https { 443 } else { 80 };
        let port_ok = url.port_or_known_default() == Some(self.port.unwrap_or(default));
        let host_ok = match (url.host(), &self.host) {
            (Some(url::Host::Domain(d)), HostPattern::Name(n)) => d == n,
            (Some(url::Host::Domain(d)), HostPattern::Below(n)) => is_below(d, n),
            (Some(url::Host::Ipv4(a)), HostPattern::Ip(b)) => IpAddr::V4(a) == *b,
            (Some(url::Host::Ipv6(a)), HostPattern::Ip(b)) => IpAddr::V6(a) == *b,
            _ => false,
        };
        if !host_ok {
            Some("another host")
        } else if !scheme_ok {
            Some(if self.https {
                "the same host over http, and the pattern allows only https (write http://HOST to allow http)"
            } else {
                "the same host over https, and the pattern allows only http"
            })
        } else if !port_ok {
            Some("the same host on another port than its pattern names")
        } else {
            None
        }
    }

    /// Whether every request this entry allows, `wider` allows too: what a principal's
    /// `hosts=` entry really reaches, since it narrows the server's list and never widens it.
    pub fn within(&self, wider: &HostRule) -> bool {
        let host = match (&self.host, &wider.host) {
            (a, b) if a == b => true,
            (HostPattern::Name(n), HostPattern::Below(d)) => is_below(n, d),
            (HostPattern::Below(n), HostPattern::Below(d)) => is_below(n, d),
            _ => false,
        };
        host && self.https == wider.https && self.port == wider.port
    }

    /// Whether this entry names the address itself (or `localhost`), which lets a request
    /// reach it though it is loopback or private.
    pub fn names_address(&self, ip: IpAddr) -> bool {
        match &self.host {
            HostPattern::Ip(a) => *a == ip,
            HostPattern::Name(n) => n == "localhost" && ip.is_loopback(),
            HostPattern::Below(_) => false,
        }
    }
}

/// Whether `name` is a name below `domain` (`a.example.org` below `example.org`; not
/// `example.org` itself, nor `badexample.org`).
fn is_below(name: &str, domain: &str) -> bool {
    name.len() > domain.len() + 1
        && name.ends_with(domain)
        && name.as_bytes()[name.len() - domain.len() - 1] == b'.'
}

/// The entry as a user writes it (normalised), for telling the model what code may reach.
impl std::fmt::Display for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.https {
            f.write_str("http://")?;
        }
        match &self.host {
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Below(n) => write!(f, "*.{n}")?,
            HostPattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            HostPattern::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> reqwest::Url {
        reqwest::Url::parse(u).unwrap()
    }

    #[test]
    fn an_entry_is_within_the_same_or_a_wider_one_only() {
        let rule = |e: &str| HostRule::parse(e).unwrap();
        assert!(rule("api.example.org").within(&rule("*.example.org")));
        assert!(rule("*.eu.example.org").within(&rule("*.example.org")));
        assert!(rule("127.0.0.1:8443").within(&rule("127.0.0.1:8443")));
        assert!(
            !rule("example.org").within(&rule("*.example.org")),
            "a wildcard is below its name"
        );
        assert!(!rule("*.example.org").within(&rule("api.example.org")));
        assert!(
            !rule("api.example.org:8443").within(&rule("*.example.org")),
            "another port"
        );
        assert!(
            !rule("http://api.example.org").within(&rule("*.example.org")),
            "another scheme"
        );
        assert!(!rule("badexample.org").within(&rule("*.example.org")));
    }

    #[test]
    fn an_entry_is_shown_as_written_normalised() {
        for (entry, shown) in [
            ("API.Example.com", "api.example.com"),
            ("*.example.org:8443", "*.example.org:8443"),
            ("http://intranet.local:8080", "http://intranet.local:8080"),
            ("https://127.0.0.1:443", "127.0.0.1"),
            ("[::1]:9000", "[::1]:9000"),
        ] {
            assert_eq!(HostRule::parse(entry).unwrap().to_string(), shown);
        }
    }

    #[test]
    fn entries_match_only_what_they_name() {
        let api = HostRule::parse("api.example.com").unwrap();
        assert!(api.permits(&url("https://api.example.com/v1?q=1")));
        assert!(
            api.permits(&url("https://API.Example.COM/")),
            "the same name in other case"
        );
        assert!(!api.permits(&url("http://api.example.com/")), "https only");
        assert!(
            !api.permits(&url("https://api.example.com:8443/")),
            "another port"
        );
        assert!(!api.permits(&url("https://api.example.com.evil/")));
        assert!(!api.permits(&url("https://api.example.com@evil.org/")));
        assert!(!api.permits(&url("https://api.example.com./")), "a trailing dot");
        assert!(!api.permits(&url("https://xn--pple-43d.com/")));
        let star = HostRule::parse("*.example.org").unwrap();
        assert!(star.permits(&url("https://a.b.example.org/")));
        assert!(!star.permits(&url("https://example.org/")));
        assert!(!star.permits(&url("https://badexample.org/")));
        let ip = HostRule::parse("127.0.0.1:8443").unwrap();
        assert!(ip.permits(&url("https://127.0.0.1:8443/")));
        assert!(
            ip.permits(&url("https://2130706433:8443/")),
            "the same address in decimal"
        );
        assert!(!ip.permits(&url("https://localhost:8443/")));
        assert!(ip.names_address("127.0.0.1".parse().unwrap()));
        let plain = HostRule::parse("http://intranet.local:8080").unwrap();
        assert!(plain.permits(&url("http://intranet.local:8080/x")));
        assert!(!plain.permits(&url("https://intranet.local:8080/x")));
        // A look-alike in Unicode is compared as its punycode, never as the name it resembles.
        let apple = HostRule::parse("apple.com").unwrap();
        assert!(!apple.permits(&url("https://аpple.com/")));
        for bad in [
            "",
            "https://a.com/path",
            "user@a.com",
            "*.",
            "ftp://a.com",
            "*.1.2.3.4",
        ] {
            assert!(HostRule::parse(bad).is_err(), "{bad:?}");
        }
    }
}
