//! Egress: guest code reaches the hosts the user allows (`CODE_SANDBOX_ALLOW_HOSTS`) and
//! nothing else. The server is a real HTTPS server on loopback (CPython's http.server and ssl,
//! tests/net/https_server.py) with a certificate from a test CA, trusted through
//! `CODE_SANDBOX_CA_FILE`.

use crate::common::{self, Server, error_of, run};

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
#[cfg(unix)]
use serde_json::json;

/// The HTTPS server, its CA file and its port; stopped on drop.
pub struct Https {
    child: std::process::Child,
    dir: PathBuf,
    pub port: u16,
    pub ca: PathBuf,
}

impl Https {
    pub fn start() -> Https {
        let dir = std::env::temp_dir().join(format!("mcs-net-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mcp-code-sandbox test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        std::fs::write(dir.join("cert.pem"), leaf.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), leaf_key.serialize_pem()).unwrap();
        let portfile = dir.join("port");
        let child = std::process::Command::new(xtask::pyvenv::PYTHON)
            .arg(common::repo_root().join("tests/net/https_server.py"))
            .args([dir.join("cert.pem"), dir.join("key.pem"), portfile.clone()])
            .spawn()
            .expect("python3 runs the test HTTPS server");
        let mut port = 0;
        for _ in 0..100 {
            if let Ok(p) = std::fs::read_to_string(&portfile) {
                port = p.trim().parse().unwrap();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(port > 0, "the HTTPS server started");
        Https { child, dir, port, ca }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Https {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(unix)]
fn hostname() -> String {
    let mut buf = [0u8; 256];
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(rc, 0);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[tokio::test]
async fn allowed_https_is_reached_by_urllib_http_client_and_pandas_within_the_byte_limit() {
    let https = Https::start();
    let allow = format!("127.0.0.1:{}", https.port);
    let ca = https.ca.display().to_string();
    let server = Server::start_with(&[
        ("CODE_SANDBOX_ALLOW_HOSTS", &allow),
        ("CODE_SANDBOX_CA_FILE", &ca),
        ("CODE_SANDBOX_NET_BYTES", "8000000"),
    ])
    .await;
    // The model is told what code may reach, instead of "no network".
    let said = common::tool_description(&server.client, "execute_code").await;
    assert!(
        said.contains(&format!(
            "Network: code may fetch over HTTPS (http:// where shown) from these hosts only: {allow}."
        )),
        "{said}"
    );
    let instructions = server
        .client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    assert!(
        instructions.contains("may reach only the hosts") && !instructions.contains("no network"),
        "{instructions}"
    );
    let sb = server.create().await;
    let v = run(
        &server,
        &sb,
        &format!(
            "import urllib.request, http.client, json, pandas as pd\n\
             text = urllib.request.urlopen({csv:?}).read().decode()\n\
             df = pd.read_csv({csv:?})\n\
             c = http.client.HTTPSConnection('127.0.0.1', {port})\n\
             c.request('POST', '/echo', body=b'hello host', headers={{'Content-Type': 'text/plain'}})\n\
             posted = json.loads(c.getresponse().read())\n\
             big = urllib.request.urlopen({big:?}).read()\n\
             moved = urllib.request.urlopen({redirect:?}).read().decode()\n\
             (text.splitlines()[1], int(df['population'].sum()), posted['received'], len(big), moved.splitlines()[0])",
            csv = https.url("/data.csv"),
            port = https.port,
            big = https.url("/big?n=5000000"),
            redirect = https.url(&format!("/redirect?to={}", https.url("/data.csv"))),
        ),
    )
    .await;
    assert_eq!(
        v["result"], "('Oslo,700', 1067, 10, 5000000, 'city,population')",
        "{v}"
    );
    // The result says what left the machine.
    assert_eq!(v["network"][0]["host"], "127.0.0.1", "{v}");
    assert!(v["network"][0]["bytes"].as_u64().unwrap() > 5_000_000, "{v}");

    // Past CODE_SANDBOX_NET_BYTES in one call: a clear error naming the setting.
    let v = run(
        &server,
        &sb,
        &format!(
            "import urllib.request\nlen(urllib.request.urlopen({:?}).read())",
            https.url("/big?n=9000000")
        ),
    )
    .await;
    let (_, value) = error_of(&v);
    assert!(value.contains("CODE_SANDBOX_NET_BYTES"), "{v}");
    server.stop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn everything_but_the_listed_hosts_is_refused() {
    let https = Https::start();
    let me = hostname();
    let allow = format!(
        "127.0.0.1:{p},localhost:{p},{me}:{p},*.example.org",
        p = https.port
    );
    let ca = https.ca.display().to_string();
    let server = Server::start_with(&[
        ("CODE_SANDBOX_ALLOW_HOSTS", &allow),
        ("CODE_SANDBOX_CA_FILE", &ca),
    ])
    .await;
    let sb = server.create().await;
    let p = https.port;
    let refused = [
        // Another port of an allowed address, and plain HTTP to it.
        format!("https://127.0.0.1:{}/data.csv", p + 1),
        format!("http://127.0.0.1:{p}/data.csv"),
        // A redirect from an allowed host to one that is not.
        https.url("/redirect?to=https://127.0.0.2/"),
        // The metadata service, and a private address, as IP literals.
        "https://169.254.169.254/latest/meta-data/".to_string(),
        "https://10.0.0.1/".to_string(),
        // The allowed loopback address in IPv6-mapped form (an entry matches only its own
        // address; decimal, octal and hex forms are the same address, see egress::rules).
        format!("https://[::ffff:127.0.0.1]:{p}/"),
        // A trailing dot, a look-alike (Cyrillic o), and a name under an allowed one that is not it.
        format!("https://localhost.:{p}/"),
        "https://example.org.evil.com/".to_string(),
        // A listed name (this machine's) that resolves to an internal address.
        format!("https://{me}:{p}/data.csv"),
        // Another scheme, asked for or as a redirect's target: only http(s) goes out.
        format!("ftp://127.0.0.1:{p}/data.csv"),
        https.url("/redirect?to=ftp://127.0.0.1/x"),
    ];
    let code = format!(
        "import urllib.request\nout = []\nfor u in {refused:?}:\n    try:\n        urllib.request.urlopen(u, timeout=20).read()\n        out.append(('REACHED', u))\n    except Exception as e:\n        out.append((type(e).__name__, str(e)))\nout"
    );
    let v = run(&server, &sb, &code).await;
    let text = v["result"].as_str().unwrap_or_default().to_string();
    assert!(!text.contains("REACHED"), "{text}");
    assert_eq!(text.matches("PermissionError").count(), refused.len(), "{text}");
    assert!(text.contains("CODE_SANDBOX_ALLOW_HOSTS"), "{text}");
    assert!(text.contains("internal address"), "{text}");
    assert!(text.contains("only http:// and https://"), "{text}");

    // What a library would refuse itself, sent to the host as it is: still refused there.
    let frames = [
        // The allowed address as userinfo in front of another host.
        format!("https://127.0.0.1:{p}@evil.example.com/"),
        // A look-alike of `localhost` (Cyrillic o), compared as its punycode.
        format!("https://l{}calhost:{p}/", '\u{43e}'),
        // The allowed address in decimal, for a port no entry names.
        format!("https://2130706433:{}/", p + 1),
    ];
    let code = format!(
        "import _host, json
[json.loads(_host.call(json.dumps({{'net': 1, 'op': 'open', 'method': 'GET', 'url': u, 'headers': [], 'body': ''}}).encode()))['error']['kind'] for u in {frames:?}]"
    );
    let v = run(&server, &sb, &code).await;
    assert_eq!(v["result"], "['denied', 'denied', 'denied']", "{v}");

    // An explicit `localhost` entry reaches loopback by that name, in any case.
    let v = run(
        &server,
        &sb,
        &format!("import urllib.request\n[urllib.request.urlopen(f'https://{{h}}:{p}/data.csv').read().decode().splitlines()[0] for h in ('localhost', 'LocalHost')]"),
    )
    .await;
    assert_eq!(v["result"], "['city,population', 'city,population']", "{v}");
    server.stop().await;
}

#[tokio::test]
async fn with_nothing_allowed_no_request_leaves_and_the_error_names_the_setting() {
    let https = Https::start();
    let server = Server::start().await;
    let said = common::tool_description(&server.client, "execute_code").await;
    assert!(!said.contains("Network:"), "{said}");
    let instructions = server
        .client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    assert!(instructions.contains("has no network"), "{instructions}");
    let said = common::tool_description(&server.client, "install_package").await;
    assert!(said.contains("Nothing is downloaded"), "{said}");
    let sb = server.create().await;
    let v = run(
        &server,
        &sb,
        &format!(
            "import urllib.request\nurllib.request.urlopen({:?})",
            https.url("/data.csv")
        ),
    )
    .await;
    let (name, value) = error_of(&v);
    assert_eq!(name, "PermissionError", "{v}");
    assert!(
        value.contains("network access is off") && value.contains("CODE_SANDBOX_ALLOW_HOSTS"),
        "{value}"
    );
    assert!(v.get("network").is_none(), "{v}");

    // Sockets stay unavailable, and a hand-made frame finds no host behind the door.
    let v = run(&server, &sb, "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 80), timeout=1)\nexcept Exception as e:\n    err = type(e).__name__\nerr").await;
    assert!(v["result"].as_str().is_some_and(|r| r.contains("Error")), "{v}");
    let v = run(
        &server,
        &sb,
        "import _host\n_host.call(b'{\"net\":1,\"op\":\"open\",\"method\":\"GET\",\"url\":\"https://127.0.0.1/\"}')",
    )
    .await;
    assert_eq!(v["result"], Value::Null, "{v}");
    let (name, _) = error_of(&v);
    assert_eq!(name, "ConnectionRefusedError", "no host answers the door: {v}");
    server.stop().await;
}

#[tokio::test]
async fn a_bad_allowlist_entry_stops_the_start_with_what_to_fix() {
    common::ensure_runtime();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_ALLOW_HOSTS", "https://api.example.com/path")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CODE_SANDBOX_ALLOW_HOSTS") && err.contains("api.example.com/path"),
        "{err}"
    );
}

#[tokio::test]
async fn a_principals_hosts_narrow_the_servers_list_and_never_widen_it() {
    let https = Https::start();
    let allow = format!("127.0.0.1:{},*.example.org", https.port);
    let ca = https.ca.display().to_string();
    let remote = crate::remote_harness::Remote::start(
        &["wide", "narrow hosts=*.example.org,127.0.0.2"],
        &[
            ("CODE_SANDBOX_ALLOW_HOSTS", allow.as_str()),
            ("CODE_SANDBOX_CA_FILE", ca.as_str()),
        ],
    )
    .await;
    let fetch = format!(
        "import urllib.request\ntry:\n    r = urllib.request.urlopen({:?}).read().decode().splitlines()[0]\nexcept PermissionError as e:\n    r = 'refused: ' + str(e)\nr",
        https.url("/data.csv")
    );
    let wide = remote.client("wide").await;
    let said = common::tool_description(&wide.client, "execute_code").await;
    assert!(
        said.contains(&format!("hosts only: {}.", allow.replace(',', ", "))),
        "{said}"
    );
    let sb = wide.create().await;
    let v = run(&wide, &sb, &fetch).await;
    assert_eq!(v["result"], "'city,population'", "{v}");

    // Its own list names 127.0.0.2, which the server's does not: still refused; and the
    // server's 127.0.0.1 is not on its list.
    let narrow = remote.client("narrow").await;
    // Told only what both lists allow.
    let said = common::tool_description(&narrow.client, "execute_code").await;
    assert!(said.contains("hosts only: *.example.org."), "{said}");
    let sb = narrow.create().await;
    let v = run(&narrow, &sb, &fetch).await;
    let said = v["result"].as_str().unwrap_or_default();
    assert!(said.contains("refused") && said.contains("hosts="), "{v}");
    let v = run(
        &narrow,
        &sb,
        &fetch.replace(
            &format!("127.0.0.1:{}", https.port),
            &format!("127.0.0.2:{}", https.port),
        ),
    )
    .await;
    let said = v["result"].as_str().unwrap_or_default();
    assert!(
        said.contains("refused") && said.contains("CODE_SANDBOX_ALLOW_HOSTS"),
        "{v}"
    );
    remote.terminate().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_secret_reaches_its_own_host_only_and_never_the_guest() {
    use sha2::Digest;
    let https = Https::start();
    let p = https.port;
    let value = "s3cret-value-7f1c";
    let file = https.dir.join("secrets");
    std::fs::write(&file, format!("# tokens\nAPI_TOKEN 127.0.0.1:{p} {value}\n")).unwrap();
    let allow = format!("127.0.0.1:{p},localhost:{p}");
    let ca = https.ca.display().to_string();
    let secrets = file.display().to_string();
    let env = [
        ("CODE_SANDBOX_ALLOW_HOSTS", allow.as_str()),
        ("CODE_SANDBOX_CA_FILE", ca.as_str()),
        ("CODE_SANDBOX_SECRETS", secrets.as_str()),
    ];

    // A file others may read stops the start, saying how to fix it.
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .envs(env)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("chmod 600"), "{err}");
    assert!(!err.contains(value));
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    let log = https.dir.join("server.log");
    let log_s = log.display().to_string();
    let mut logged_env = env.to_vec();
    logged_env.extend([("RUST_LOG", "info"), (common::LOG_TO, log_s.as_str())]);
    let server = Server::start_with(&logged_env).await;
    let sb = server.create().await;
    let code = format!(
        "import os, json, urllib.request, gc\n\
         token = os.environ['API_TOKEN']\n\
         req = urllib.request.Request('https://127.0.0.1:{p}/digest?key=' + token, headers={{'Authorization': 'Bearer ' + token}})\n\
         got = json.loads(urllib.request.urlopen(req).read())\n\
         other = urllib.request.Request('https://localhost:{p}/digest', headers={{'Authorization': 'Bearer ' + token}})\n\
         try:\n    urllib.request.urlopen(other)\n    refused = None\nexcept PermissionError as e:\n    refused = str(e)\n\
         seen = [o for o in gc.get_objects() if isinstance(o, str) and {value:?} in o]\n\
         (token, 'API_TOKEN' in os.environ, os.getenv('API_TOKEN') == token, got['auth'], got['key'], refused, len(seen), {value:?} in repr(dict(os.environ)))"
    );
    let (_, v, text) = server
        .call_json(
            "execute_code",
            json!({"sandbox_id": sb, "code": code, "timeout_seconds": 60}),
        )
        .await;
    let hex = |s: &str| hex::encode(sha2::Sha256::digest(s.as_bytes()));
    let result = v["result"].as_str().unwrap_or_default();
    assert!(
        result.starts_with("('__MCS_SECRET_API_TOKEN__', True, True, "),
        "{v}"
    );
    assert!(
        result.contains(&hex(&format!("Bearer {value}"))),
        "the server got the value in the header: {v}"
    );
    assert!(result.contains(&hex(value)), "and in the query: {v}");
    assert!(
        result.contains("carries the placeholder of the secret API_TOKEN"),
        "{v}"
    );
    assert!(
        result.ends_with(", 0, False)"),
        "the value never entered the guest: {v}"
    );
    assert!(
        !text.contains(value) && !v.to_string().contains(value),
        "nor the result"
    );
    server.stop().await;
    // Nor the log, which does record the requests.
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("127.0.0.1"), "{log}");
    assert!(!log.contains(value), "{log}");
}
