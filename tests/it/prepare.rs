//! What a fresh clone's `cargo test --release` installs by itself: only what the committed
//! lock files pin, with a message naming what is wrong or missing.

use std::path::Path;

fn folder_with(package: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcs-npm-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        crate::common::repo_root().join("tests/ts/package-lock.json"),
        dir.join("package-lock.json"),
    )
    .unwrap();
    std::fs::write(dir.join("package.json"), package).unwrap();
    dir
}

#[test]
fn a_package_json_out_of_step_with_its_lock_file_installs_nothing() {
    for (package, says) in [
        // A version the lock file does not hold.
        (
            r#"{"dependencies": {"@modelcontextprotocol/sdk": "1.32.1"}}"#,
            "package.json pins @modelcontextprotocol/sdk 1.32.1, the lock file holds 1.32.2",
        ),
        // A range, which npm would resolve to whatever is newest.
        (
            r#"{"dependencies": {"@modelcontextprotocol/sdk": "^1.32.2"}}"#,
            "not one exact version",
        ),
        // A package the lock file knows nothing of.
        (
            r#"{"dependencies": {"@modelcontextprotocol/sdk": "1.32.2", "left-pad": "1.3.0"}}"#,
            "left-pad 1.3.0, the lock file holds nothing",
        ),
    ] {
        let dir = folder_with(package);
        let err = xtask::npm::ensure(&dir, &|m| eprintln!("{m}"))
            .expect_err("a mismatch must be refused")
            .to_string();
        assert!(err.contains(says), "{err}");
        assert!(err.contains("commit both"), "says how to change a pin: {err}");
        assert!(!dir.join("node_modules").exists(), "nothing was installed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_missing_npm_is_named_with_what_to_install() {
    let pins = std::fs::read_to_string(crate::common::repo_root().join("tests/ts/package.json")).unwrap();
    let dir = folder_with(&pins);
    let err = xtask::npm::ensure_with(&dir, Path::new("/nonexistent/npm"), &|_| {})
        .expect_err("no npm, no install")
        .to_string();
    assert!(err.contains("npm is not on PATH"), "{err}");
    assert!(err.contains("install Node.js"), "{err}");
    assert!(!dir.join("node_modules").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The committed folders are in step: what the tests install is exactly what is pinned.
#[test]
fn the_committed_npm_folders_install_and_a_second_call_is_instant() {
    for dir in ["tests/ts", "tests/views", "tests/conformance", "xtask/mcpb"] {
        let path = crate::common::ensure_npm(dir);
        let started = std::time::Instant::now();
        let ran = std::cell::Cell::new(false);
        xtask::npm::ensure(&path, &|_| ran.set(true)).unwrap();
        assert!(!ran.get(), "{dir}: a second call ran npm again");
        let lock: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path.join("package-lock.json")).unwrap()).unwrap();
        let packages = lock["packages"].as_object().unwrap();
        for (name, spec) in lock["packages"][""]["dependencies"].as_object().unwrap() {
            let installed: serde_json::Value = serde_json::from_slice(
                &std::fs::read(path.join("node_modules").join(name).join("package.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(installed["version"], *spec, "{dir}: {name}");
            assert!(packages.contains_key(&format!("node_modules/{name}")));
        }
        eprintln!("{dir}: checked in {:?}", started.elapsed());
    }
}
