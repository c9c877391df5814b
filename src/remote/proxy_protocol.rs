//! The client's address behind a proxy. Deployed behind haproxy, every connection comes from
//! the proxy's address, so the limits kept per address (connections on probation, token
//! introspection's turns) would fold every client into one, and one client's junk would slow
//! everyone's sign-in. A connection from a peer listed in `CODE_SANDBOX_TRUSTED_PROXIES` may
//! start with a PROXY protocol header (v1 or v2, as haproxy's `send-proxy-v2` and
//! `check-send-proxy` send it); the client it names is the connection's address from then on.
//! A trusted peer's connection without one (a probe, an operator's curl) is served as it is;
//! a malformed header closes the connection. Nobody else's header is read: it is HTTP junk.

use std::net::SocketAddr;
use std::time::Duration;

use axum::serve::Listener;
use tokio::net::{TcpListener, TcpStream};

use crate::config::IpRange;

/// How long a trusted peer has to send its header (haproxy sends it with the connection).
const HEADER_WAIT: Duration = Duration::from_secs(2);
/// Longest header read: v2's fixed part, IPv6 addresses and haproxy's usual TLVs.
const MAX_HEADER: usize = 536;
/// What a v2 header starts with, and v1's.
const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
const V1_START: &[u8] = b"PROXY ";

pub struct ProxiedListener {
    inner: TcpListener,
    trusted: Vec<IpRange>,
}

impl ProxiedListener {
    pub fn new(inner: TcpListener, trusted: Vec<IpRange>) -> Self {
        ProxiedListener { inner, trusted }
    }
}

impl Listener for ProxiedListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            let (io, peer) = Listener::accept(&mut self.inner).await;
            if !self.trusted.iter().any(|r| r.contains(peer.ip())) {
                return (io, peer);
            }
            match tokio::time::timeout(HEADER_WAIT, client_of(&io)).await {
                Ok(Ok(client)) => return (io, client.unwrap_or(peer)),
                Ok(Err(why)) => tracing::warn!("closing a connection from the proxy at {peer}: {why}"),
                Err(_) => {
                    tracing::debug!("closing a connection from {peer}: no request or PROXY header in time")
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// The client a PROXY header at the start of `io` names (consuming the header), `None` when
/// the connection starts with anything else (left unread) or the header names no address
/// (a proxy's own health check).
async fn client_of(io: &TcpStream) -> Result<Option<SocketAddr>, String> {
    let mut buf = [0u8; MAX_HEADER];
    loop {
        let n = io.peek(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("it closed before sending anything".into());
        }
        let seen = &buf[..n];
        let could_be = |start: &[u8]| seen.starts_with(&start[..n.min(start.len())]);
        if !could_be(V2_SIGNATURE) && !could_be(V1_START) {
            return Ok(None);
        }
        match parse(seen) {
            Parsed::Header { len, client } => {
                consume(io, len).await?;
                return Ok(client);
            }
            Parsed::Incomplete if n < MAX_HEADER => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Parsed::Incomplete => return Err("its PROXY header is too long".into()),
            Parsed::Bad(why) => return Err(format!("its PROXY header is malformed: {why}")),
        }
    }
}

enum Parsed {
    /// A whole header of `len` bytes, naming `client` (`None` for LOCAL or UNKNOWN).
    Header {
        len: usize,
        client: Option<SocketAddr>,
    },
    Incomplete,
    Bad(String),
}

fn parse(bytes: &[u8]) -> Parsed {
    use ppp::{HeaderResult, PartialResult as _};
    let header = HeaderResult::parse(bytes);
    if header.is_incomplete() {
        return Parsed::Incomplete;
    }
    match header {
        HeaderResult::V2(Ok(h)) => {
            let client = match h.addresses {
                _ if h.command == ppp::v2::Command::Local => None,
                ppp::v2::Addresses::IPv4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                ppp::v2::Addresses::IPv6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                _ => None,
            };
            Parsed::Header {
                len: h.header.len(),
                client,
            }
        }
        HeaderResult::V1(Ok(h)) => {
            let client = match h.addresses {
                ppp::v1::Addresses::Tcp4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                ppp::v1::Addresses::Tcp6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                ppp::v1::Addresses::Unknown => None,
            };
            Parsed::Header {
                len: h.header.len(),
                client,
            }
        }
        HeaderResult::V2(Err(e)) => Parsed::Bad(e.to_string()),
        HeaderResult::V1(Err(e)) => Parsed::Bad(e.to_string()),
    }
}

/// Reads and drops the header's `len` bytes, which `peek` has already seen.
async fn consume(io: &TcpStream, mut len: usize) -> Result<(), String> {
    let mut sink = [0u8; MAX_HEADER];
    while len > 0 {
        io.readable().await.map_err(|e| e.to_string())?;
        match io.try_read(&mut sink[..len]) {
            Ok(0) => return Err("it closed inside its PROXY header".into()),
            Ok(n) => len -= n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_both_versions_name_the_client() {
        let v1 = b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 8765\r\nPOST /mcp HTTP/1.1\r\n";
        match parse(v1) {
            Parsed::Header { len, client } => {
                assert_eq!(len, 42, "the header and its CRLF, not the request");
                assert_eq!(client, Some("192.0.2.7:51000".parse().unwrap()));
            }
            _ => panic!("v1 not parsed"),
        }
        let addresses: ppp::v2::Addresses = (
            "198.51.100.9:40000".parse::<SocketAddr>().unwrap(),
            "10.0.0.1:8765".parse::<SocketAddr>().unwrap(),
        )
            .into();
        let v2 = ppp::v2::Builder::with_addresses(
            ppp::v2::Version::Two | ppp::v2::Command::Proxy,
            ppp::v2::Protocol::Stream,
            addresses,
        )
        .build()
        .unwrap();
        let mut stream = v2.clone();
        stream.extend_from_slice(b"GET /healthz HTTP/1.1\r\n");
        match parse(&stream) {
            Parsed::Header { len, client } => {
                assert_eq!(len, v2.len());
                assert_eq!(client, Some("198.51.100.9:40000".parse().unwrap()));
            }
            _ => panic!("v2 not parsed"),
        }
        assert!(matches!(parse(&v2[..10]), Parsed::Incomplete));
        assert!(matches!(parse(b"PROXY TCP4 not an address\r\n"), Parsed::Bad(_)));
    }

    #[tokio::test]
    async fn a_trusted_peer_is_read_and_anyone_else_passes_untouched() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = tcp.local_addr().unwrap();
        let trusted = vec!["127.0.0.1".parse::<IpRange>().unwrap()];
        let mut listener = ProxiedListener::new(tcp, trusted);
        let mut client = TcpStream::connect(at).await.unwrap();
        client
            .write_all(b"PROXY TCP4 192.0.2.7 10.0.0.1 51000 8765\r\nGET / HTTP/1.1\r\n")
            .await
            .unwrap();
        let (mut io, addr) = listener.accept().await;
        assert_eq!(addr, "192.0.2.7:51000".parse().unwrap());
        let mut rest = [0u8; 16];
        io.read_exact(&mut rest).await.unwrap();
        assert_eq!(
            &rest, b"GET / HTTP/1.1\r\n",
            "the request starts after the header"
        );
        let mut plain = TcpStream::connect(at).await.unwrap();
        plain.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        let (_, addr) = listener.accept().await;
        assert_eq!(
            addr.ip(),
            plain.local_addr().unwrap().ip(),
            "no header: the peer itself"
        );
    }
}
