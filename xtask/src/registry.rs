//! The MCP Registry's description of a release (`server.json`): the server's name in the
//! registry's GitHub namespace, every platform's MCPB bundle by its release download URL and
//! SHA-256, and the OCI image. The release workflow writes it from all platforms' bundles and
//! publishes it; `cargo xtask bundle` writes one for the bundles in `dist/` when the
//! repository is known. Its form is the registry's published schema, pinned in
//! `docs/schemas/mcp-registry/` and checked in `tests/it/registry.rs`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The schema a `server.json` names and is checked against (a pinned copy of it).
pub const SCHEMA_URL: &str = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";
pub const SCHEMA_COPY: &str = "docs/schemas/mcp-registry/server-2025-12-11.schema.json";
/// What the registry shows (it takes at most 100 characters).
pub const DESCRIPTION: &str =
    "Run Python safely on your machine in WebAssembly sandboxes: numpy, pandas, plots, hard limits.";
/// The port the image's server listens on (`CODE_SANDBOX_LISTEN` in `image.rs`).
const IMAGE_PORT: u16 = 8765;

/// The GitHub repository (`owner/name`) releases are published from: `given`, else the one
/// GitHub Actions names.
pub fn repository(given: Option<String>) -> anyhow::Result<String> {
    let repo = given
        .or_else(|| std::env::var("GITHUB_REPOSITORY").ok())
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "name the GitHub repository releases are published from: --repository OWNER/NAME (GitHub Actions sets GITHUB_REPOSITORY)"
            )
        })?;
    let valid = repo.split_once('/').is_some_and(|(o, n)| {
        let part =
            |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        part(o) && part(n)
    });
    anyhow::ensure!(valid, "'{repo}' is not a GitHub repository's OWNER/NAME");
    Ok(repo)
}

/// The server's name in the registry: the GitHub namespace its publisher signs in to.
pub fn server_name(repository: &str) -> String {
    format!("io.github.{repository}")
}

/// The image the registry points at: GitHub's container registry, which takes lower case only.
pub fn image(repository: &str, version: &str) -> String {
    format!("ghcr.io/{}:{version}", repository.to_ascii_lowercase())
}

/// The `.mcpb` files in `dist`, by name.
fn bundles(dist: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dist)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dist.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "mcpb"))
        .collect();
    found.sort();
    anyhow::ensure!(
        !found.is_empty(),
        "no .mcpb bundle in {}: build them first",
        dist.display()
    );
    Ok(found)
}

fn sha256(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hash = Sha256::new();
    std::io::copy(&mut file, &mut hash)?;
    Ok(hex::encode(hash.finalize()))
}

/// `server.json` for `version` of `repository`, naming every bundle in `dist` as its release
/// download and the OCI image.
pub fn server_json(dist: &Path, repository: &str, version: &str) -> anyhow::Result<Value> {
    let mut packages = Vec::new();
    for bundle in bundles(dist)? {
        let file = bundle
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        packages.push(json!({
            "registryType": "mcpb",
            "identifier": format!("https://github.com/{repository}/releases/download/v{version}/{file}"),
            "fileSha256": sha256(&bundle)?,
            "transport": {"type": "stdio"},
        }));
    }
    packages.push(json!({
        "registryType": "oci",
        "identifier": image(repository, version),
        "runtimeHint": "docker",
        "transport": {"type": "streamable-http", "url": format!("http://localhost:{IMAGE_PORT}/mcp")},
        "environmentVariables": [{
            "name": "CODE_SANDBOX_TOKENS",
            "description": "A file of NAME SHA256HEX lines: the bearer tokens this team server accepts (mcp-code-sandbox token add NAME).",
            "isRequired": true,
        }],
    }));
    Ok(json!({
        "$schema": SCHEMA_URL,
        "name": server_name(repository),
        "title": "Code sandbox",
        "description": DESCRIPTION,
        "version": version,
        "repository": {"url": format!("https://github.com/{repository}"), "source": "github"},
        "packages": packages,
    }))
}

/// Writes `dist/server.json`; its path.
pub fn write(dist: &Path, repository: &str, version: &str) -> anyhow::Result<PathBuf> {
    let doc = server_json(dist, repository, version)?;
    let out = dist.join("server.json");
    std::fs::write(&out, serde_json::to_string_pretty(&doc)? + "\n")?;
    Ok(out)
}
