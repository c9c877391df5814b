//! Installs from a package index (`CODE_SANDBOX_INDEX_URL`): a real pypiserver on loopback
//! (pinned in tests/index/requirements.txt) serving real wheels the pinned cache lacks
//! (tests/index/packages.txt: requests and httpx with their dependencies, an older idna); then
//! requests and httpx, installed from it, reaching an allowed HTTPS host.

use crate::common::{self, Server, error_of, run};
use crate::network::Https;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// A server process on a loopback port; killed on drop.
pub(crate) struct Served {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` (given the port) and waits until `path` answers on it.
fn serve(cmd: impl Fn(u16) -> Command, path: &str) -> Served {
    let port = common::free_port();
    let child = cmd(port)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the index server");
    let served = Served { child, port };
    for _ in 0..300 {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            let _ = write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
            let mut head = [0u8; 12];
            if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200" {
                return served;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the index server did not answer {path} on port {port}");
}

/// The pinned wheels, downloaded once into tests/index/packages.
pub(crate) fn pinned_wheels() -> PathBuf {
    xtask::pyvenv::wheels(&common::repo_root().join("tests/index"), &|m| common::progress(m))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// pypiserver serving `dir` (see `xtask::pyvenv::pypiserver`).
pub(crate) fn pypiserver(dir: &Path) -> Served {
    let venv_dir = common::repo_root().join("tests/index");
    serve(|port| xtask::pyvenv::pypiserver(&venv_dir, dir, port), "/health")
}

fn installed(v: &Value) -> Vec<String> {
    v["installed"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p["name"].as_str().unwrap_or(""),
                p["version"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn packages_the_cache_lacks_come_from_the_index_and_requests_and_httpx_reach_an_allowed_host() {
    let wheels = pinned_wheels();
    let index = pypiserver(&wheels);
    let https = Https::start();
    let home = common::private_home();
    let home_s = home.display().to_string();
    let index_url = format!("http://127.0.0.1:{}/simple/", index.port);
    let allow = format!("127.0.0.1:{}", https.port);
    let ca = https.ca.display().to_string();
    let envs = [
        ("CODE_SANDBOX_HOME", home_s.as_str()),
        ("CODE_SANDBOX_INDEX_URL", index_url.as_str()),
        ("CODE_SANDBOX_ALLOW_HOSTS", allow.as_str()),
        ("CODE_SANDBOX_CA_FILE", ca.as_str()),
    ];
    let server = Server::start_with(&envs).await;
    let said = common::tool_description(&server.client, "install_package").await;
    assert!(said.contains("The user also set a package index"), "{said}");
    let sb = server.create().await;

    // requests and three of its dependencies come from the index; idna from the pinned cache.
    let v = server.install(&sb, "requests").await;
    let mut got = installed(&v);
    got.sort();
    assert_eq!(
        got,
        [
            "certifi 2026.10.19.post1",
            "idna 3.20",
            "requests 2.34.2",
            "urllib3 2.8.0"
        ],
        "{v}"
    );
    let v = server.install(&sb, "httpx").await;
    let mut got = installed(&v);
    got.sort();
    assert_eq!(
        got,
        ["anyio 4.16.0", "h11 0.16.0", "httpcore 1.0.9", "httpx 0.29.0"],
        "{v}"
    );

    // Both reach the allowed HTTPS host (certificates checked by the host, against the test CA):
    // plain gets, a JSON post, a streamed body, a session reused.
    let v = run(
        &server,
        &sb,
        &format!(
            "import requests, httpx\n\
             r = requests.get({csv:?})\n\
             posted = requests.post({echo:?}, json={{'a': 1}}).json()\n\
             streamed = sum(len(c) for c in requests.get({big:?}, stream=True).iter_content(65536))\n\
             s = requests.Session()\n\
             again = [s.get({csv:?}).status_code for _ in range(3)]\n\
             h = httpx.get({csv:?})\n\
             with httpx.Client() as c:\n\
             \x20   with c.stream('GET', {big:?}) as resp:\n\
             \x20       hstreamed = sum(len(x) for x in resp.iter_bytes())\n\
             \x20   hposted = c.post({echo:?}, content=b'12345').json()\n\
             (r.status_code, r.text.splitlines()[1], posted['echo'], streamed, again, h.status_code, h.text.splitlines()[2], hstreamed, hposted['received'])",
            csv = https.url("/data.csv"),
            echo = https.url("/echo"),
            big = https.url("/big?n=3000000"),
        ),
    )
    .await;
    assert_eq!(
        v["result"],
        "(200, 'Oslo,700', '{\"a\": 1}', 3000000, [200, 200, 200], 200, 'Bergen,290', 3000000, 5)",
        "{v}"
    );
    assert_eq!(v["network"][0]["host"], "127.0.0.1", "{v}");
    // httpx's async client too, requests in flight together.
    let v = run(
        &server,
        &sb,
        &format!(
            "import asyncio, httpx
async def main():
    async with httpx.AsyncClient() as c:
        rs = await asyncio.gather(*(c.get({csv:?}) for _ in range(3)))
        return [r.status_code for r in rs], rs[0].text.splitlines()[3]
asyncio.run(main())",
            csv = https.url("/data.csv"),
        ),
    )
    .await;
    assert_eq!(v["result"], "([200, 200, 200], 'Tromso,77')", "{v}");

    // A host not listed is a PermissionError naming the setting, from either library, and so is
    // the index itself: it serves installs, not sandbox code.
    let v = run(
        &server,
        &sb,
        &format!(
            "import requests, httpx\nout = []\n\
             for get in (requests.get, httpx.get):\n\
             \x20   for u in ('https://example.com/', {index_url:?}):\n\
             \x20       try:\n\
             \x20           get(u)\n\
             \x20           out.append('REACHED ' + u)\n\
             \x20       except PermissionError as e:\n\
             \x20           out.append('CODE_SANDBOX_ALLOW_HOSTS' in str(e))\n\
             out"
        ),
    )
    .await;
    assert_eq!(v["result"], "[True, True, True, True]", "{v}");

    // Another version of a package the sandbox has: said plainly, with what to do.
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb, "package_name": "idna==3.10"}),
        )
        .await;
    assert!(is_err, "{text}");
    assert!(
        text.contains("idna 3.20 is already installed in this sandbox")
            && text.contains("idna 3.10")
            && text.contains("new sandbox")
            && !text.contains("by another package"),
        "{text}"
    );

    // A version the cache lacks (it has idna 3.20) comes from the index too.
    let sb2 = server.create().await;
    let v = server.install(&sb2, "idna<3.20").await;
    assert_eq!(installed(&v), ["idna 3.10"], "{v}");
    let v = run(&server, &sb2, "import idna\nidna.__version__").await;
    assert_eq!(v["result"], "'3.10'", "{v}");

    // A name on neither: the error names the index and says what to do.
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb2, "package_name": "no-such-package-anywhere"}),
        )
        .await;
    assert!(is_err, "{text}");
    assert!(
        text.contains("neither in the local wheel cache nor on the package index")
            && text.contains(&index_url)
            && text.contains("CODE_SANDBOX_INDEX_URL"),
        "{text}"
    );
    server.stop().await;

    // Fetched wheels are kept: with the index gone, a new sandbox installs requests at once.
    drop(index);
    let server = Server::start_with(&envs).await;
    let sb = server.create().await;
    let v = server.install(&sb, "requests").await;
    assert!(installed(&v).contains(&"requests 2.34.2".to_string()), "{v}");
    let v = run(&server, &sb, "import requests\nrequests.__version__").await;
    assert_eq!(v["result"], "'2.34.2'", "{v}");
    // An install that needs the index while it is down says so.
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb, "package_name": "idna<3.10"}),
        )
        .await;
    assert!(
        is_err && text.contains("did not answer") && text.contains("CODE_SANDBOX_INDEX_URL"),
        "{text}"
    );
    server.stop().await;
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn a_wheel_whose_hash_differs_from_the_index_or_is_not_given_is_refused_and_nothing_lands() {
    let wheels = pinned_wheels();
    // A static PEP 503 index (CPython's http.server): h11 listed with a SHA-256 that is not its
    // own, anyio listed with none, and a project with only a compiled wheel.
    let root = std::env::temp_dir().join(format!("mcs-index-{}", uuid::Uuid::new_v4().simple()));
    for (project, file, fragment) in [
        (
            "h11",
            "h11-0.16.0-py3-none-any.whl",
            format!("#sha256={}", "0".repeat(64)),
        ),
        ("anyio", "anyio-4.16.0-py3-none-any.whl", String::new()),
    ] {
        let dir = root.join("simple").join(project);
        std::fs::create_dir_all(&dir).unwrap();
        if project == "h11" {
            let huge = root.join("simple").join("huge");
            std::fs::create_dir_all(&huge).unwrap();
            std::fs::write(huge.join("index.html"), vec![b' '; 17 << 20]).unwrap();
            let compiled = root.join("simple").join("ujson");
            std::fs::create_dir_all(&compiled).unwrap();
            let name = "ujson-5.10.0-cp312-cp312-manylinux_2_17_x86_64.whl";
            std::fs::write(
                compiled.join("index.html"),
                format!(
                    "<a href=\"../../files/{name}#sha256={}\">{name}</a>",
                    "1".repeat(64)
                ),
            )
            .unwrap();
        }
        std::fs::create_dir_all(root.join("files")).unwrap();
        std::fs::copy(wheels.join(file), root.join("files").join(file)).unwrap();
        std::fs::write(
            dir.join("index.html"),
            format!("<html><body><a href=\"../../files/{file}{fragment}\">{file}</a></body></html>"),
        )
        .unwrap();
    }
    let index = serve(
        |port| {
            let mut c = Command::new(xtask::pyvenv::PYTHON);
            c.args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
                "--directory",
            ])
            .arg(&root);
            c
        },
        "/simple/h11/",
    );
    let home = common::private_home();
    let home_s = home.display().to_string();
    let index_url = format!("http://127.0.0.1:{}/simple", index.port);
    // A listener that stands for any other address: the index links certifi there (with the
    // right hash), and nothing may ever connect to it. Listing it as a file host does not
    // help: it is an internal address, which only the index's own host may be.
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let other = elsewhere.local_addr().unwrap().port();
    let certifi = "certifi-2026.10.19.post1-py3-none-any.whl";
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        std::fs::read(wheels.join(certifi)).unwrap(),
    ));
    let page = root.join("simple").join("certifi");
    std::fs::create_dir_all(&page).unwrap();
    std::fs::write(
        page.join("index.html"),
        format!("<a href=\"http://127.0.0.1:{other}/files/{certifi}#sha256={hash}\">{certifi}</a>"),
    )
    .unwrap();
    // A wheel that unpacks outside its folder, with its true hash: fetched, then refused.
    let evil = "evil-1.0-py3-none-any.whl";
    let bytes = evil_wheel();
    let page = root.join("simple").join("evil");
    std::fs::create_dir_all(&page).unwrap();
    std::fs::write(root.join("files").join(evil), &bytes).unwrap();
    std::fs::write(
        page.join("index.html"),
        format!(
            "<a href=\"../../files/{evil}#sha256={}\">{evil}</a>",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes))
        ),
    )
    .unwrap();
    let listed = format!("127.0.0.1:{other}");
    let server = Server::start_with(&[
        ("CODE_SANDBOX_HOME", home_s.as_str()),
        ("CODE_SANDBOX_INDEX_URL", index_url.as_str()),
        ("CODE_SANDBOX_INDEX_FILE_HOSTS", listed.as_str()),
    ])
    .await;
    let sb = server.create().await;
    for (package, says) in [
        ("h11", "its SHA-256 is not the"),
        ("anyio", "the index gives no SHA-256 for it"),
    ] {
        let (is_err, _, text) = server
            .call_json(
                "install_package",
                json!({"sandbox_id": sb, "package_name": package}),
            )
            .await;
        assert!(is_err, "{text}");
        assert!(
            text.contains("was refused") && text.contains(says) && text.contains("Nothing was installed"),
            "{text}"
        );
    }
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb, "package_name": "certifi"}),
        )
        .await;
    assert!(is_err && text.contains("internal address"), "{text}");
    assert!(
        !text.contains(&hash) && !text.to_lowercase().contains("sha-256 is"),
        "nothing of a refused body is described: {text}"
    );
    assert!(
        matches!(elsewhere.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the server connected to an address the index pointed at"
    );
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb, "package_name": "evil"}),
        )
        .await;
    assert!(is_err && text.contains("was refused"), "{text}");
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb, "package_name": "ujson"}),
        )
        .await;
    assert!(is_err && text.contains("exists only as compiled"), "{text}");
    // A project page past 16 MiB is given up as it arrives, with a clear error.
    let (is_err, _, text) = server
        .call_json(
            "install_package",
            json!({"sandbox_id": sb, "package_name": "huge"}),
        )
        .await;
    assert!(
        is_err && text.contains("the index page of huge is over"),
        "{text}"
    );
    let v = run(&server, &sb, "import h11").await;
    assert_eq!(error_of(&v).0, "ModuleNotFoundError", "{v}");
    // Nothing was kept either, not even a part of a file.
    let kept: Vec<PathBuf> = walk(&home.join("index-wheels"));
    assert!(kept.is_empty(), "{kept:?}");
    server.stop().await;
    drop(index);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&home);
}

/// A wheel whose one file would land outside site-packages.
fn evil_wheel() -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    zip.start_file("../../escaped.py", opts).unwrap();
    zip.write_all(b"print('out')\n").unwrap();
    zip.start_file("evil-1.0.dist-info/METADATA", opts).unwrap();
    zip.write_all(b"Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
        .unwrap();
    zip.start_file("evil-1.0.dist-info/WHEEL", opts).unwrap();
    zip.write_all(b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        .unwrap();
    zip.finish().unwrap().into_inner()
}

/// Every file under `dir` (none when it does not exist).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[tokio::test]
async fn a_bad_index_url_stops_the_start_with_what_to_fix() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-code-sandbox"))
        .env("CODE_SANDBOX_HOME", common::runtime_home())
        .env("CODE_SANDBOX_INDEX_URL", "ftp://example.com/simple")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CODE_SANDBOX_INDEX_URL must be http:// or https://"),
        "{err}"
    );
}
