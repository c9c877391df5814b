//! The guide stays true to the code: docs/settings.md is what `cargo xtask docs` makes from
//! src/config.rs, every `CODE_SANDBOX_` name the code reads is on it, the bundle's form
//! offers only settings the server knows, and every relative link in README.md and docs/
//! leads to a file (and a heading) that exists.

use std::collections::BTreeSet;

use crate::common;
use serde_json::json;

use common::read_text as read;

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
    let mut files = common::files_under(&root.join("src"), &["rs", "py"]);
    files.extend(common::files_under(&root.join("runtime/guest"), &["rs", "py"]));
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

/// The team store's schemas are made from the server's types, and they refuse what a reader
/// refuses (a path leaving its folder, a chunk not named by a SHA-256, another format), so the
/// tests that check real manifests against them check something.
#[test]
fn the_store_schemas_are_made_from_the_code_and_refuse_what_a_reader_refuses() {
    let root = common::repo_root();
    for (rel, text) in xtask::docs::store_schemas() {
        assert!(
            read(&root.join(rel)) == text,
            "{rel} is out of date: run `cargo xtask docs` and commit it"
        );
    }
    let manifest = serde_json::json!({
        "format": 1, "sandbox": "sbx-r0-0a1b", "generation": 2, "written_by": "r0",
        "written_at": "2026-12-07T03:00:00.5Z", "chunk_bytes": 4_194_304,
        "trees": {"workspace": [{"path": "data/a.csv", "bytes": 3, "chunks": ["ab".repeat(32)]}]},
    });
    let schema = "docs/schemas/store-manifest.schema.json";
    common::assert_schema_valid(schema, std::slice::from_ref(&manifest));
    let path = "/trees/workspace/0/path";
    for (at, bad) in [
        (path, json!("../outside")),
        (path, json!("data/../../x")),
        (path, json!("/etc/passwd")),
        (path, json!("a//b")),
        (path, json!("c:\\x")),
        ("/trees/workspace/0/chunks/0", json!("ABC")),
        ("/format", json!(3)),
        ("/sandbox", json!("../sbx")),
        ("/written_at", json!("yesterday")),
    ] {
        let mut m = manifest.clone();
        *m.pointer_mut(at).unwrap() = bad.clone();
        assert!(
            common::schema_check(schema, &[m]).is_err(),
            "the manifest schema took {at} = {bad}"
        );
    }
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

/// Counts and tool lists the guide states, against what the binary answers (issue 47): the
/// packages built in (Python packages apart from the C libraries beneath them), and the tools
/// (their number in words, each one's row in docs/tools.md).
#[tokio::test]
async fn documented_counts_and_tools_are_what_the_binary_says() {
    let s = common::Server::start().await;
    let v = s
        .ok("install_package", serde_json::json!({"package_name": "?"}))
        .await;
    let python = v["built_in"].as_array().expect("built_in").len();
    let native = v["built_with"].as_array().expect("built_with").len();
    let readme = read(&common::repo_root().join("README.md"));
    assert!(
        readme.contains(&format!("sympy and {} more Python packages", python - 6)),
        "README's count of packages besides the six it names is not {}",
        python - 6
    );
    assert!(
        readme.contains(&format!(
            "{python} Python packages built in (and {native} C libraries"
        )),
        "README's package counts are not {python} and {native}"
    );
    let tools = s.client.list_all_tools().await.expect("tools/list");
    let words = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    let count = words.get(tools.len()).expect("a number in words");
    let remote = read(&common::repo_root().join("docs/remote-mode.md"));
    assert!(
        remote.contains(&format!("the same {count} tools")),
        "docs/remote-mode.md's tool count is not {count}"
    );
    let listed = read(&common::repo_root().join("docs/tools.md"));
    for t in &tools {
        assert!(
            listed.contains(&format!("| `{}`", t.name)),
            "docs/tools.md has no row for {}",
            t.name
        );
    }
    s.stop().await;
}

/// The messages the troubleshooting page quotes are ones the binary says: each quoted piece
/// (split at `...`) is in the code, numbers standing for the placeholders they fill.
#[test]
fn troubleshooting_quotes_what_the_binary_says() {
    let root = common::repo_root();
    let mut files = common::files_under(&root.join("src"), &["rs", "py"]);
    files.extend(common::files_under(&root.join("runtime/guest"), &["rs", "py"]));
    let numbers = |t: &str| -> String {
        let mut out = String::new();
        let mut chars = t.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '{' {
                // A format placeholder (`{name}`, `{timeout_s:.0}`), not a block of code.
                let ahead: String = chars.clone().take_while(|d| *d != '}').take(41).collect();
                let placeholder = ahead.len() <= 40
                    && ahead
                        .chars()
                        .all(|d| d.is_ascii_alphanumeric() || "_:.?#".contains(d));
                if placeholder {
                    chars.nth(ahead.chars().count());
                    out.push('#');
                } else {
                    out.push(c);
                }
            } else if c.is_ascii_digit() {
                while chars.peek().is_some_and(|d| d.is_ascii_digit() || *d == '.') {
                    chars.next();
                }
                out.push('#');
            } else {
                out.push(c);
            }
        }
        out
    };
    let code: String = files.iter().map(|f| numbers(&read(f))).collect();
    let wheel = &mcp_code_sandbox::runtime::manifest().wheel;
    let pin = format!("{}=={}", wheel.name, wheel.version);
    let page = read(&root.join("docs/troubleshooting.md"));
    let mut checked = 0;
    for row in page.lines().filter(|l| l.starts_with("| ")) {
        let first = row.split(" | ").next().unwrap_or("").trim_start_matches("| ");
        for quoted in first.split('"').skip(1).step_by(2) {
            // The OS's own words follow the server's there (the pip row: a test runs it).
            let ours = quoted.split(": No such file").next().unwrap_or(quoted);
            for piece in ours.split("...").map(str::trim).filter(|p| p.len() >= 6) {
                let piece = piece.replace(&pin, "{name}=={version}");
                assert!(
                    code.contains(&numbers(&piece)),
                    "troubleshooting quotes {piece:?}, which the code never says"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} quotes found");
}

/// `n` as the guide writes numbers: 24,782.
fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Numbers the guide states that change with the code, against the code: the result view's
/// size (speed.md) is the page built into the binary; the proxy's numbers live in speed.md's
/// table only, not copied into the Kubernetes guide where they went stale.
#[test]
fn sizes_the_guide_states_are_the_codes() {
    let root = common::repo_root();
    let page = std::fs::metadata(root.join("src/server/view/result.html"))
        .expect("the view's page")
        .len();
    let speed = read(&root.join("docs/speed.md"));
    let said = format!("The result view is {} bytes", with_commas(page));
    assert!(
        speed.contains(&said),
        "docs/speed.md does not say {said:?}: the page changed; rerun `cargo xtask bench --views` and copy its note"
    );
    assert_eq!(with_commas(864_925), "864,925");
    let deploy = read(&root.join("docs/deploy-kubernetes.md"));
    assert!(
        !deploy.contains("calls/s"),
        "docs/deploy-kubernetes.md quotes bench numbers of its own; link docs/speed.md's table instead"
    );
}
