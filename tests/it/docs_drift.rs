//! What the guide says about the repository itself, checked against it, so a newcomer's map
//! does not drift: every module named in ARCHITECTURE, the README short enough to scan, the
//! store's chunk layout, the trees and venvs the tests prepare, and what `.ci/run` runs.

use crate::common::{files_under, read_text as read, repo_root};

/// Whether `text` names `stem` as a file (`stem.rs`) or a room (`stem/`), as a whole word.
fn names(text: &str, stem: &str) -> bool {
    [format!("{stem}.rs"), format!("{stem}/")].iter().any(|form| {
        text.match_indices(form.as_str()).any(|(at, _)| {
            at == 0 || !text.as_bytes()[at - 1].is_ascii_alphanumeric() && text.as_bytes()[at - 1] != b'_'
        })
    })
}

#[test]
fn architecture_names_every_module() {
    let root = repo_root();
    let doc = read(&root.join("docs/ARCHITECTURE.md"));
    let files = files_under(&root.join("src"), &["rs"]);
    let unnamed: Vec<String> = files
        .iter()
        .map(|p| {
            p.strip_prefix(root.join("src"))
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .filter(|rel| !rel.contains("/tests/") && !rel.ends_with("tests.rs"))
        .filter(|rel| !["lib.rs", "main.rs"].contains(&rel.as_str()) && !rel.ends_with("/mod.rs"))
        .filter(|rel| {
            let stem = rel.rsplit('/').next().unwrap().trim_end_matches(".rs");
            !names(&doc, stem)
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "docs/ARCHITECTURE.md does not name {unnamed:#?}"
    );
}

/// The README's paragraphs (list items each one), outside code blocks and tables, by line count.
fn paragraphs(text: &str) -> Vec<(usize, String)> {
    let (mut out, mut fenced, mut current) = (Vec::new(), false, Vec::<&str>::new());
    let mut flush = |current: &mut Vec<&str>| {
        if !current.is_empty() {
            out.push((current.len(), current[0].to_string()));
            current.clear();
        }
    };
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fenced = !fenced;
            flush(&mut current);
            continue;
        }
        let item = t.starts_with("- ") || t.split_once(". ").is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        if fenced || t.is_empty() || t.starts_with('|') || t.starts_with('#') || item {
            flush(&mut current);
        }
        if !fenced && !t.is_empty() && !t.starts_with('|') && !t.starts_with('#') {
            current.push(line);
        }
    }
    flush(&mut current);
    out
}

#[test]
fn the_readme_is_a_front_page_that_scans() {
    let readme = read(&repo_root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 180,
        "README.md has {lines} lines; keep it to 180 (move detail into docs/)"
    );
    let long: Vec<_> = paragraphs(&readme).into_iter().filter(|(n, _)| *n > 6).collect();
    assert!(long.is_empty(), "README paragraphs over 6 lines: {long:#?}");
    let wide: Vec<&str> = readme
        .lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .flat_map(|l| l.split('|'))
        .map(str::trim)
        // A screenshot's cell is its alt text and path.
        .filter(|cell| cell.chars().count() > 250 && !(cell.starts_with("![") && cell.ends_with(')')))
        .collect();
    assert!(
        wide.is_empty(),
        "README table cells over 250 characters: {wide:#?}"
    );
    assert!(
        readme.contains("cargo test --release"),
        "the README names the test command CI runs"
    );
}

#[test]
fn the_paragraph_reader_finds_a_long_one() {
    let text = "a\nb\nc\nd\ne\nf\ng\n\n- one\n- two\n\n```\n1\n2\n3\n4\n5\n6\n7\n```\n";
    let found = paragraphs(text);
    assert_eq!(found.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [7, 1, 1]);
}

#[test]
fn persistence_states_the_chunk_layout_the_store_uses() {
    let dir = std::env::temp_dir().join(format!("mcs-drift-{}", uuid::Uuid::new_v4().simple()));
    let url = url::Url::from_directory_path(&dir).unwrap();
    let store = mcp_code_sandbox::store::location::open(url.as_str()).unwrap();
    let sha = "ab".repeat(32);
    let path = mcp_code_sandbox::store::space::chunk_path(&store, "k", &sha).to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(path.ends_with(&format!("principals/k/chunks/ab/{sha}")), "{path}");
    let doc = read(&repo_root().join("docs/persistence.md"));
    assert!(
        doc.contains("principals/<key>/chunks/<the SHA-256's first two hex digits>/<its SHA-256 in hex>"),
        "docs/persistence.md states the chunk layout as the store writes it ({path})"
    );
}

/// The folders under `tests/` holding `marker`: the trees or venvs the tests prepare.
fn prepared(marker: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(repo_root().join("tests"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join(marker).is_file())
        .map(|e| format!("`tests/{}`", e.file_name().to_string_lossy()))
        .collect();
    out.sort();
    out
}

#[test]
fn the_guide_lists_every_tree_and_venv_the_tests_prepare() {
    let root = repo_root();
    for page in ["docs/getting-started.md", "CONTRIBUTING.md"] {
        let text = read(&root.join(page));
        for folder in prepared("requirements.txt")
            .iter()
            .chain(&prepared("package-lock.json"))
        {
            assert!(text.contains(folder.as_str()), "{page} does not list {folder}");
        }
    }
}

#[test]
fn contributing_says_what_ci_runs_and_nothing_else() {
    let root = repo_root();
    let ci = read(&root.join(".ci/run"));
    let contributing = read(&root.join("CONTRIBUTING.md"));
    let section = contributing
        .split("## What CI runs")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("CONTRIBUTING.md has a section \"What CI runs\"");
    let run: Vec<String> = ci
        .lines()
        .map(|l| l.trim().trim_start_matches("nice -n 19 ").to_string())
        .filter(|l| l.starts_with("cargo ") && !l.starts_with("cargo install") && !l.contains("--version"))
        .collect();
    assert!(run.len() >= 8, "the commands read from .ci/run: {run:?}");
    for command in &run {
        assert!(
            section.contains(&format!("`{command}`")),
            "CONTRIBUTING's CI section does not name `{command}`"
        );
    }
    let listed = section
        .lines()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.trim().parse::<u32>().is_ok())
        })
        .flat_map(|l| l.split('`').skip(1).step_by(2))
        .filter(|c| c.starts_with("cargo "));
    for command in listed {
        assert!(
            run.iter().any(|r| r == command),
            "CONTRIBUTING says .ci/run runs `{command}`; it does not"
        );
    }
}
