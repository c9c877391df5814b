use super::*;
use crate::tenancy::Quota;

fn guard(listen: &str, hosts: &[&str], origins: &[&str]) -> Guard {
    let q = Quota {
        sandboxes: 1,
        memory_mb: 1,
        disk_mb: 1,
    };
    Guard::new(
        Auth {
            book: None,
            open_until_tokens: false,
            oauth: None,
            local: Principal {
                name: "local".into(),
                quota: q,
                mcp_servers: std::sync::Arc::from([]),
                hosts: None,
            },
            defaults: q,
        },
        listen.parse().unwrap(),
        &hosts.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        &origins.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        false,
        SessionCaps {
            per_principal: 64,
            total: 1024,
        },
    )
}

#[test]
fn hosts_are_the_listen_names_ip_literals_or_listed_names() {
    let g = guard("127.0.0.1:8765", &["sandbox.example.com"], &[]);
    assert!(g.host_ok("127.0.0.1:8765"));
    assert!(g.host_ok("localhost:8765"));
    assert!(g.host_ok("[::1]:8765"));
    assert!(g.host_ok("sandbox.example.com"));
    assert!(g.host_ok("sandbox.example.com:443"));
    assert!(!g.host_ok("localhost:9999"));
    assert!(!g.host_ok("attacker.example:8765"));
    assert!(!g.host_ok(""));
    assert!(
        !g.host_ok("10.0.0.7:80"),
        "an IP literal on another port, not listed"
    );
    let g = guard("0.0.0.0:8765", &["10.0.0.7:80", "10.96.0.10"], &[]);
    assert!(g.host_ok("10.0.0.7:80"), "listed with its port");
    assert!(!g.host_ok("10.0.0.7:81"));
    assert!(g.host_ok("10.96.0.10:443"), "listed without a port: any port");
    assert!(g.host_ok("10.1.2.3:8765"), "any IP literal on the listen port");
}

#[test]
fn origins_are_same_origin_or_listed() {
    let g = guard("127.0.0.1:8765", &[], &["https://app.example.com/"]);
    assert!(g.origin_ok("https://app.example.com", "127.0.0.1:8765"));
    assert!(g.origin_ok("http://127.0.0.1:8765", "127.0.0.1:8765"));
    assert!(!g.origin_ok("http://evil.example", "127.0.0.1:8765"));
    assert!(!g.origin_ok("null", "127.0.0.1:8765"));
    assert!(!g.origin_ok("https://127.0.0.1:8765", "127.0.0.1:8765"));
    // Another of the server's own names (issue: `localhost` refused beside `127.0.0.1`).
    assert!(g.origin_ok("http://localhost:8765", "127.0.0.1:8765"));
    assert!(g.origin_ok("http://127.0.0.1:8765", "localhost:8765"));
    assert!(!g.origin_ok("http://localhost:9999", "127.0.0.1:8765"));
    assert!(!g.origin_ok("http://attacker.example:8765", "127.0.0.1:8765"));
}
