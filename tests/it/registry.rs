//! The MCP Registry's `server.json` for a release: made by xtask from the bundles in a folder,
//! valid against the registry's published schema (a pinned copy, checked to be the one
//! published) and within the rules the registry adds when it publishes.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::{assert_schema_valid, repo_root, schema_check};
use xtask::registry;

/// The SHA-256 of the schema as published for 2025-12-11: the pinned copy must be that file.
const SCHEMA_SHA256: &str = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0";

#[test]
fn server_json_names_every_bundle_by_its_sha256_and_is_valid_for_the_registry() {
    let pinned = std::fs::read(repo_root().join(registry::SCHEMA_COPY)).unwrap();
    assert_eq!(
        hex::encode(Sha256::digest(&pinned)),
        SCHEMA_SHA256,
        "the pinned schema is the published one"
    );
    let schema: Value = serde_json::from_slice(&pinned).unwrap();
    assert_eq!(schema["$id"], registry::SCHEMA_URL);

    let dist = std::env::temp_dir().join(format!("mcs-registry-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dist).unwrap();
    let names = [
        "mcp-code-sandbox-0.1.0-linux-x86_64.mcpb",
        "mcp-code-sandbox-0.1.0-windows-x86_64.mcpb",
    ];
    for (i, name) in names.iter().enumerate() {
        std::fs::write(dist.join(name), format!("bundle {i}").repeat(1000)).unwrap();
    }
    std::fs::write(dist.join("SHA256SUMS.txt"), "not a bundle").unwrap();
    let repo = registry::repository(Some("Example-Owner/mcp-code-sandbox".into())).unwrap();
    let out = registry::write(&dist, &repo, "0.1.0").unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_schema_valid(registry::SCHEMA_COPY, std::slice::from_ref(&doc));

    // The registry's own rules, beyond the schema.
    assert_eq!(
        doc["name"], "io.github.Example-Owner/mcp-code-sandbox",
        "the owner as GitHub spells it"
    );
    assert!(doc["description"].as_str().unwrap().chars().count() <= 100);
    let packages = doc["packages"].as_array().unwrap();
    let mcpb: Vec<&Value> = packages.iter().filter(|p| p["registryType"] == "mcpb").collect();
    assert_eq!(
        mcpb.len(),
        names.len(),
        "one package per bundle, nothing else: {doc:#}"
    );
    for (p, name) in mcpb.iter().zip(names) {
        let url = p["identifier"].as_str().unwrap();
        assert_eq!(
            url,
            format!("https://github.com/Example-Owner/mcp-code-sandbox/releases/download/v0.1.0/{name}")
        );
        let bytes = std::fs::read(dist.join(name)).unwrap();
        assert_eq!(p["fileSha256"], hex::encode(Sha256::digest(&bytes)));
        assert!(
            p.get("version").is_none() && p.get("registryBaseUrl").is_none(),
            "{p}"
        );
    }
    let oci = packages
        .iter()
        .find(|p| p["registryType"] == "oci")
        .expect("the OCI image");
    assert_eq!(oci["identifier"], "ghcr.io/example-owner/mcp-code-sandbox:0.1.0");
    assert!(
        oci.get("version").is_none() && oci.get("fileSha256").is_none(),
        "{oci}"
    );

    // The check refuses what the registry would: a document without its description.
    let mut bad = doc.clone();
    bad.as_object_mut().unwrap().remove("description");
    assert!(schema_check(registry::SCHEMA_COPY, &[bad]).is_err());
    let _ = std::fs::remove_dir_all(&dist);
}

#[test]
fn a_repository_that_is_not_owner_and_name_is_refused_with_what_to_give() {
    for bad in ["", "no-slash", "a/b/c", "owner/na me"] {
        let given = Some(bad.to_string()).filter(|s| !s.is_empty());
        if given.is_none() && std::env::var("GITHUB_REPOSITORY").is_ok() {
            continue;
        }
        let err = registry::repository(given).unwrap_err().to_string();
        assert!(err.contains("OWNER/NAME"), "{bad}: {err}");
    }
}
