//! install_package: the real pinned cache, and wheels the tests build (good, malicious,
//! native, conflicting) in a CODE_SANDBOX_WHEEL_DIR of their own.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::Server;
use serde_json::json;
use zip::write::SimpleFileOptions;

struct Wheel<'a> {
    name: &'a str,
    version: &'a str,
    tag: &'a str,
    requires: &'a [&'a str],
    files: Vec<(String, Vec<u8>)>,
    symlink: Option<(&'a str, &'a str)>,
    record_extra: Option<&'a str>,
    entry_points: Option<&'a str>,
}

impl<'a> Wheel<'a> {
    fn new(name: &'a str, version: &'a str) -> Self {
        Wheel {
            name,
            version,
            tag: "py3-none-any",
            requires: &[],
            files: vec![(
                format!("{name}/__init__.py"),
                format!("VALUE = '{name} {version}'\n").into_bytes(),
            )],
            symlink: None,
            record_extra: None,
            entry_points: None,
        }
    }

    fn write(&self, dir: &Path) -> PathBuf {
        let path = dir.join(format!(
            "{}-{}-{}.whl",
            self.name.replace('-', "_"),
            self.version,
            self.tag
        ));
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let o = SimpleFileOptions::default();
        let di = format!("{}-{}.dist-info", self.name.replace('-', "_"), self.version);
        let mut record = String::new();
        for (name, bytes) in &self.files {
            z.start_file(name.as_str(), o).unwrap();
            z.write_all(bytes).unwrap();
            record.push_str(&format!("{name},,\n"));
        }
        if let Some((link, target)) = self.symlink {
            z.add_symlink(link, target, o).unwrap();
        }
        let mut meta = format!(
            "Metadata-Version: 2.1\nName: {}\nVersion: {}\n",
            self.name, self.version
        );
        for r in self.requires {
            meta.push_str(&format!("Requires-Dist: {r}\n"));
        }
        z.start_file(format!("{di}/METADATA"), o).unwrap();
        z.write_all(meta.as_bytes()).unwrap();
        z.start_file(format!("{di}/WHEEL"), o).unwrap();
        z.write_all(b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
            .unwrap();
        if let Some(ep) = self.entry_points {
            z.start_file(format!("{di}/entry_points.txt"), o).unwrap();
            z.write_all(ep.as_bytes()).unwrap();
        }
        if let Some(extra) = self.record_extra {
            record.push_str(extra);
        }
        z.start_file(format!("{di}/RECORD"), o).unwrap();
        z.write_all(record.as_bytes()).unwrap();
        z.finish().unwrap();
        path
    }
}

fn wheel_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcs-wheels-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test]
async fn real_cache_installs_with_dependencies_and_knows_built_ins() {
    let s = Server::start().await;
    let id = s.create().await;
    let v = s.install(&id, "tabulate").await;
    assert_eq!(v["already_available"], true, "tabulate ships with the runtime");
    let v = s.install(&id, "Rich").await;
    let names: Vec<&str> = v["installed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for dep in ["rich", "pygments", "markdown-it-py", "mdurl"] {
        assert!(names.contains(&dep), "{dep} missing from {names:?}");
    }
    let v = s.run_ok(&id, "from rich.console import Console\nc = Console(width=40, record=True)\nc.print('[bold]hi[/bold] there')\nc.export_text()").await;
    assert!(v["result"].as_str().unwrap().contains("hi there"), "{v}");
    let (_, v, _) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "rich"}),
        )
        .await;
    assert_eq!(v["already_available"], true, "a second install is a no-op");
    let (_, v, text) = s
        .call_json("install_package", json!({"sandbox_id": id, "package_name": "?"}))
        .await;
    assert!(v["available"].as_array().unwrap().len() >= 30, "{text}");
    assert!(text.contains("humanize"), "{text}");
    // Another sandbox does not see it.
    let other = s.create().await;
    let (err, _) = s.exec(&other, "import rich").await;
    assert!(err, "packages are per sandbox");
    s.stop().await;
}

#[tokio::test]
async fn installs_count_against_the_disk_quota() {
    let s = Server::start_with(&[("CODE_SANDBOX_DISK_MB", "4")]).await;
    let id = s.create().await;
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "faker"}),
        )
        .await;
    assert!(err, "faker is far over 4 MiB unpacked: {text}");
    assert!(text.contains("disk quota"), "{text}");
    assert!(text.contains("Nothing was installed"), "{text}");
    let (err, _) = s.exec(&id, "import faker").await;
    assert!(err, "nothing of it is importable");
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "colorama"}),
        )
        .await;
    assert!(!err, "a small package still fits: {text}");
    let v = s.run_ok(&id, "import colorama\ncolorama.__name__").await;
    assert_eq!(v["result"], "'colorama'");
    let (_, v, _) = s.call_json("get_sandbox_status", json!({"sandbox_id": id})).await;
    assert!(
        v["disk_bytes"].as_u64().unwrap() > 50_000,
        "the install is counted: {v}"
    );
    s.stop().await;
}

#[tokio::test]
async fn custom_wheels_resolve_and_refuse_clearly() {
    let dir = wheel_dir();
    let mut good = Wheel::new("goodpkg", "1.2.0");
    good.requires = &[
        "gooddep>=1.0",
        "neverneeded; sys_platform == 'win32'",
        "alsonot; extra == 'docs'",
    ];
    good.write(&dir);
    Wheel::new("gooddep", "0.9").write(&dir);
    Wheel::new("gooddep", "1.1").write(&dir);
    let mut old = Wheel::new("needsoldnumpy", "1.0");
    old.requires = &["numpy<1"];
    old.write(&dir);
    let mut native = Wheel::new("nativepkg", "1.0");
    native.tag = "cp315-cp315-linux_x86_64";
    native.write(&dir);
    let s = Server::start_with(&[("CODE_SANDBOX_WHEEL_DIR", dir.to_str().unwrap())]).await;
    let id = s.create().await;

    s.exec(&id, "try:\n    import goodpkg\nexcept ImportError:\n    pass")
        .await;
    let v = s.install(&id, "goodpkg").await;
    assert_eq!(
        v["installed"],
        json!([{"name": "goodpkg", "version": "1.2.0"}, {"name": "gooddep", "version": "1.1"}])
    );
    let (err, v) = s
        .exec(&id, "import goodpkg, gooddep\n(goodpkg.VALUE, gooddep.VALUE)")
        .await;
    assert!(!err, "importable at once, even after a failed import: {v}");
    assert_eq!(v["result"], "('goodpkg 1.2.0', 'gooddep 1.1')");

    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "needsoldnumpy"}),
        )
        .await;
    assert!(err);
    assert!(
        text.contains("numpy<1") && text.contains("runtime has numpy"),
        "{text}"
    );
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "nativepkg"}),
        )
        .await;
    assert!(err);
    assert!(text.contains("compiled"), "{text}");
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "goodpkk"}),
        )
        .await;
    assert!(err);
    assert!(
        text.contains("Close matches") && text.contains("goodpkg"),
        "{text}"
    );
    for bad in ["../../etc", "x @ file:///etc/passwd", "https://example.com/x.whl"] {
        let (err, _, text) = s
            .call_json("install_package", json!({"sandbox_id": id, "package_name": bad}))
            .await;
        assert!(err);
        assert!(text.contains("not a plain package name"), "{bad}: {text}");
    }
    let (err, _, text) = s
        .call_json(
            "install_package",
            json!({"sandbox_id": id, "package_name": "goodpkg>=2"}),
        )
        .await;
    assert!(err, "{text}");
    s.stop().await;
}

#[tokio::test]
async fn malicious_wheels_are_refused_whole() {
    let dir = wheel_dir();
    let mut cases: Vec<(&str, Wheel)> = Vec::new();
    let mut w = Wheel::new("evil-dotdot", "1.0");
    w.files.push(("../escape.py".into(), b"x".to_vec()));
    cases.push(("evil-dotdot", w));
    let mut w = Wheel::new("evil-abs", "1.0");
    w.files.push(("/tmp/escape-abs.py".into(), b"x".to_vec()));
    cases.push(("evil-abs", w));
    let mut w = Wheel::new("evil-data", "1.0");
    w.files
        .push(("evil_data-1.0.data/purelib/../../escape.py".into(), b"x".to_vec()));
    cases.push(("evil-data", w));
    let mut w = Wheel::new("evil-link", "1.0");
    w.symlink = Some(("evil_link/passwd", "/etc/passwd"));
    cases.push(("evil-link", w));
    let mut w = Wheel::new("evil-record", "1.0");
    w.record_extra = Some("../../outside.py,,\n");
    cases.push(("evil-record", w));
    let mut w = Wheel::new("evil-script", "1.0");
    w.entry_points = Some("[console_scripts]\n../../bin/evil = evil_script:main\n");
    cases.push(("evil-script", w));
    for (_, w) in &cases {
        w.write(&dir);
    }
    let s = Server::start_with(&[("CODE_SANDBOX_WHEEL_DIR", dir.to_str().unwrap())]).await;
    let id = s.create().await;
    let site = s.home.join("scratch").join(&id).join("site-packages");
    for (name, _) in &cases {
        let (err, _, text) = s
            .call_json("install_package", json!({"sandbox_id": id, "package_name": name}))
            .await;
        assert!(err, "{name} was installed");
        assert!(
            text.contains("refused") || text.contains("not a plain"),
            "{name}: {text}"
        );
        let left: Vec<_> = std::fs::read_dir(&site).unwrap().collect();
        assert!(left.is_empty(), "{name} left files in site-packages: {left:?}");
    }
    assert!(!s.home.join("scratch").join(&id).join("escape.py").exists());
    assert!(!std::path::Path::new("/tmp/escape-abs.py").exists());
    let v = s.run_ok(&id, "1+1").await;
    assert_eq!(v["result"], "2");
    s.stop().await;
}

#[tokio::test]
async fn a_guest_cannot_plant_links_where_packages_go() {
    let s = Server::start().await;
    let id = s.create().await;
    let (err, v) = s
        .exec(
            &id,
            "import os\nos.symlink('/home/user', '/usr/local/site-packages/colorama')",
        )
        .await;
    assert!(err, "site-packages is read-only to the guest: {v}");
    let _ = s.install(&id, "colorama").await;
    let v = s
        .run_ok(
            &id,
            "import colorama, os\n(colorama.__file__, sorted(os.listdir('/home/user')))",
        )
        .await;
    assert_eq!(
        v["result"], "('/usr/local/site-packages/colorama/__init__.py', [])",
        "installed in place, nothing written through to the workspace"
    );
    s.stop().await;
}
