//! The guide stays true to the code: docs/settings.md is what `cargo xtask docs` makes from
//! src/config.rs, every `CODE_SANDBOX_` name the code reads is on it, the bundle's form
//! offers only settings the server knows, and every relative link in README.md and docs/
//! leads to a file (and a heading) that exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "py") {
            out.push(p);
        }
    }
}

/// `CODE_SANDBOX_...` names in a text (a trailing `_` is a prefix in prose, not a name).
fn names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("CODE_SANDBOX_") {
        let name: String = text[i..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.ends_with('_') {
            out.insert(name);
        }
    }
    out
}

#[test]
fn the_settings_page_is_made_from_the_code_and_names_every_setting() {
    let root = common::repo_root();
    let page = read(&root.join("docs/settings.md"));
    assert!(
        page == xtask::docs::settings_page(),
        "docs/settings.md is out of date: run `cargo xtask docs` and commit it"
    );
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("runtime/guest"), &mut files);
    let documented = names_in(&page);
    let mut missing = BTreeSet::new();
    for f in &files {
        for name in names_in(&read(f)) {
            if !documented.contains(&name) {
                missing.insert(format!("{name} ({})", f.strip_prefix(&root).unwrap().display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named in the code but not on docs/settings.md: {missing:?}"
    );
}

#[test]
fn the_bundle_offers_only_settings_the_server_knows() {
    let known: BTreeSet<String> = xtask::docs::settings()
        .into_iter()
        .filter_map(|s| s.env)
        .collect();
    let manifest = xtask::bundle::manifest_for_check();
    let env = manifest["server"]["mcp_config"]["env"]
        .as_object()
        .expect("the manifest's env");
    assert!(!env.is_empty());
    for name in env.keys() {
        assert!(
            known.contains(name),
            "the bundle sets {name}, which the server does not read"
        );
    }
    for arg in manifest["server"]["mcp_config"]["args"].as_array().unwrap() {
        if let Some(flag) = arg.as_str().filter(|a| a.starts_with("--")) {
            let known_flag = xtask::docs::settings()
                .iter()
                .any(|s| s.flag.as_deref() == Some(flag));
            assert!(
                known_flag,
                "the bundle passes {flag}, which the server does not take"
            );
        }
    }
}

/// A heading's anchor as the repository host makes it.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// Relative link targets in a Markdown text (`](target)`), code blocks skipped.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        for (i, _) in line.match_indices("](") {
            let rest = &line[i + 2..];
            if let Some(end) = rest.find(')') {
                let target = &rest[..end];
                if !target.contains("://") && !target.starts_with("mailto:") {
                    out.push(target.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_readme_and_the_guide_resolves() {
    let root = common::repo_root();
    let mut pages = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            pages.push(e.path());
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page);
        for target in links(&text) {
            let (file, frag) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if !frag.is_empty()
                && path.extension().is_some_and(|x| x == "md")
                && !anchors(&read(&path)).contains(frag)
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
    let readme = read(&root.join("README.md"));
    assert!(
        readme.lines().count() <= 250,
        "README.md has {} lines; keep it to 250",
        readme.lines().count()
    );
    assert!(
        readme.contains("cargo test --release"),
        "the README names the test command CI runs"
    );
}

#[test]
fn the_link_checker_finds_a_broken_link() {
    assert_eq!(
        links("see [x](a.md#b) and [y](https://e.com) `[z](c)`"),
        ["a.md#b", "c"]
    );
    assert_eq!(
        anchor("Results you can look at (MCP Apps)"),
        "results-you-can-look-at-mcp-apps"
    );
    assert_eq!(anchor(" Other clients, by hand"), "other-clients-by-hand");
}
