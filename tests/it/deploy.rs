//! What a team deploys: the proxy's configuration (one template, rendered for Kubernetes and
//! for loopback) accepted by haproxy itself, and the Kubernetes manifests built by kustomize
//! and validated against a current Kubernetes version's schemas (kubernetes-validate).

use std::path::Path;
use std::process::Command;

use crate::common;

/// The Kubernetes version the manifests are checked against.
const KUBERNETES: &str = "1.37.0";

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_kubernetes_proxy_config_is_the_templates_and_haproxy_accepts_it_and_the_loopback_one() {
    let root = common::repo_root();
    let want = xtask::deploy::kubernetes_config(&root).expect("render");
    let have = std::fs::read_to_string(root.join(xtask::deploy::KUBERNETES_CONFIG)).expect("read");
    assert!(
        have == want,
        "deploy/kubernetes/haproxy.cfg is stale: run `cargo xtask deploy`"
    );
    let loopback = xtask::deploy::render(
        &root,
        xtask::deploy::Site::Loopback,
        "127.0.0.1:18080",
        "email",
        &[xtask::deploy::Replica {
            name: "r1".into(),
            address: "127.0.0.1:1".into(),
        }],
    )
    .expect("render");
    let haproxy = xtask::debian::tool_for_test("the proxy's configuration test", "haproxy", "haproxy");
    let file = std::env::temp_dir().join(format!("haproxy-{}.cfg", uuid::Uuid::new_v4().simple()));
    std::fs::write(&file, &loopback).expect("write");
    for config in [
        root.join(xtask::deploy::KUBERNETES_CONFIG).as_path(),
        file.as_path(),
    ] {
        let (ok, text) = run(Command::new(&haproxy).arg("-c").arg("-f").arg(config));
        assert!(
            ok && text.contains("Configuration file is valid"),
            "{}: {text}",
            config.display()
        );
    }
    assert!(loopback.contains("jwt_payload_query('$.email')"));
    let _ = std::fs::remove_file(&file);
}

/// `kubectl kustomize` of `dir`.
fn kustomized(dir: &Path) -> String {
    let kubectl = xtask::debian::tool_for_test("the manifests' test", "kubectl", "kubernetes-client");
    let (ok, text) = run(Command::new(&kubectl).arg("kustomize").arg(dir));
    // Debian 12's kubernetes-client is kubectl 1.20, whose kustomize predates `envs`.
    let version = run(Command::new(&kubectl).args(["version", "--client"])).1;
    assert!(
        ok,
        "kubectl kustomize {}: {text}\n(kubectl: {}; the manifests need kubectl 1.27 or later)",
        dir.display(),
        version.trim()
    );
    text
}

/// kubernetes-validate's verdict on `manifests` (strict: unknown fields fail).
fn validated(manifests: &str) -> (bool, String) {
    let venv = xtask::pyvenv::ensure(&common::repo_root().join("tests/kubernetes"), &|m| {
        common::progress(m)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let file = std::env::temp_dir().join(format!("manifests-{}.yaml", uuid::Uuid::new_v4().simple()));
    std::fs::write(&file, manifests).expect("write");
    let got = run(Command::new(venv.join("bin/kubernetes-validate"))
        .args(["--strict", "-k", KUBERNETES])
        .arg(&file));
    let _ = std::fs::remove_file(&file);
    got
}

#[test]
fn the_manifests_build_and_validate_and_follow_the_settings() {
    let root = common::repo_root();
    let manifests = kustomized(&root.join("deploy/kubernetes"));
    let (ok, text) = validated(&manifests);
    assert!(ok, "{text}");
    for kind in [
        "StatefulSet",
        "Service",
        "Deployment",
        "ConfigMap",
        "Secret",
        "PodDisruptionBudget",
        "NetworkPolicy",
    ] {
        assert!(manifests.contains(&format!("kind: {kind}\n")), "no {kind}");
    }
    // The checker is not a formality: a wrong field fails it.
    let (ok, _) = validated(&manifests.replacen("replicas: 3", "replicas: three", 1));
    assert!(!ok, "kubernetes-validate accepted replicas: three");

    // The pod's memory is the interpreters' budget plus 1 GiB; the grace period outlasts the drain.
    let settings = std::fs::read_to_string(root.join("deploy/kubernetes/settings.env")).expect("read");
    let setting = |name: &str| -> u64 {
        settings
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in settings.env"))
    };
    let memory_gib = setting("CODE_SANDBOX_TOTAL_MEMORY_MB") / 1024 + 1;
    let limit = format!("memory: {memory_gib}Gi");
    assert_eq!(
        manifests.matches(&limit).count(),
        2,
        "request and limit {limit}: {manifests}"
    );
    let grace: u64 = manifests
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds: "))
        .and_then(|v| v.parse().ok())
        .expect("a grace period");
    assert!(
        grace >= setting("CODE_SANDBOX_DRAIN_SECONDS") + 15,
        "grace {grace}"
    );
    assert!(manifests.contains("readOnlyRootFilesystem: true") && manifests.contains("runAsNonRoot: true"));
}

/// The layout with kept sandboxes in an object store (issue 58): the base with its StatefulSet
/// replaced by a Deployment whose pods have no volume of their own, an autoscaler, the store's
/// settings and credentials apart, and haproxy finding replicas through DNS.
#[test]
fn the_store_layout_is_a_deployment_without_volumes_and_builds_validates_and_proxies() {
    let root = common::repo_root();
    let dir = root.join("deploy/kubernetes-store");
    let manifests = kustomized(&dir);
    let (ok, text) = validated(&manifests);
    assert!(ok, "{text}");
    for kind in [
        "Deployment",
        "HorizontalPodAutoscaler",
        "ConfigMap",
        "Secret",
        "Service",
    ] {
        assert!(manifests.contains(&format!("kind: {kind}\n")), "no {kind}");
    }
    assert!(
        !manifests.contains("kind: StatefulSet\n"),
        "the base's StatefulSet is left in"
    );
    assert!(!manifests.contains("volumeClaimTemplates"));
    assert!(
        manifests.contains("CODE_SANDBOX_STORE: s3://")
            && manifests.contains("CODE_SANDBOX_PERSIST: \"true\"")
    );
    assert!(
        manifests.contains("name: mcp-code-sandbox-store"),
        "the store's credentials"
    );
    assert!(
        manifests.contains("server-template replica"),
        "haproxy finds the replicas by DNS"
    );
    // A stopping pod lets calls finish, then waits for a store that is away, then is killed.
    let number = |key: &str| -> u64 {
        manifests
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .and_then(|v| v.trim().trim_matches('"').parse().ok())
            .unwrap_or_else(|| panic!("{key} in the manifests"))
    };
    let grace = number("terminationGracePeriodSeconds:");
    let drains = number("CODE_SANDBOX_DRAIN_SECONDS:") + number("CODE_SANDBOX_STORE_DRAIN_SECONDS:");
    assert!(grace >= drains + 15, "grace {grace} for drains of {drains} s");
    let haproxy = xtask::debian::tool_for_test("the proxy's configuration test", "haproxy", "haproxy");
    let (ok, text) = run(Command::new(&haproxy)
        .arg("-c")
        .arg("-f")
        .arg(dir.join("haproxy.cfg")));
    assert!(ok && text.contains("Configuration file is valid"), "{text}");
    // Routing by principal is the base's, word for word.
    let base = std::fs::read_to_string(root.join(xtask::deploy::KUBERNETES_CONFIG)).expect("read");
    let store = std::fs::read_to_string(dir.join("haproxy.cfg")).expect("read");
    let frontend = |cfg: &str| {
        cfg[cfg.find("frontend mcp").expect("a frontend")..cfg.find("backend replicas").expect("a backend")]
            .to_string()
    };
    assert_eq!(frontend(&base), frontend(&store));
}
