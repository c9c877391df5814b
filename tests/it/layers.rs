//! The layering `docs/ARCHITECTURE.md` claims, checked against the source: no import circle
//! anywhere under `src/` or `xtask/src/`, the local backend's modules each importing only the
//! ones the document lists below them, and no module grown past the size a reader can hold.

use std::path::PathBuf;

use xtask::layers::{self, ModPath};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn circles_in(dir: &str, name: &str) -> Vec<String> {
    let graph = layers::read(&root().join(dir), name).expect("the sources parse");
    graph
        .circles()
        .into_iter()
        .map(|c| {
            c.iter()
                .map(|(a, b)| format!("{} -> {}", layers::show(a), layers::show(b)))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

#[test]
fn no_module_is_part_of_an_import_circle() {
    for (dir, name) in [("src", "mcp_code_sandbox"), ("xtask/src", "xtask")] {
        let circles = circles_in(dir, name);
        assert!(
            circles.is_empty(),
            "{dir} has import circles (see `cargo xtask layers`): {circles:#?}"
        );
    }
}

#[test]
fn the_checker_finds_a_circle_it_is_shown() {
    let dir = std::env::temp_dir().join(format!("mcs-layers-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\nmod c;\n");
    write("a.rs", "use crate::b::B;\npub struct A(B);\n");
    write("b.rs", "pub struct B;\nfn f() -> super::c::C { todo!() }\n");
    write("c.rs", "pub struct C;\nfn g(_: crate::a::A) {}\n");
    let graph = layers::read(&dir, "demo").unwrap();
    let circles = graph.circles();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert_eq!(circles[0].len(), 3, "a -> b -> c -> a: {circles:?}");
}

/// The modules a code block of the architecture document lists, in its order: the block
/// after `opening`, its entries at `indent` spaces.
fn documented_order(opening: &str, indent: usize) -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let block = doc
        .split(opening)
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has a code block after {opening:?}"));
    block
        .lines()
        .filter(|l| l.len() > indent && l[..indent].trim().is_empty() && !l[indent..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .map(|m| m.trim_end_matches(".rs").trim_end_matches('/').to_string())
        .collect()
}

#[test]
fn each_top_level_module_imports_only_modules_listed_below_it() {
    let order = documented_order("## Layers\n\n```\n", 0);
    let graph = layers::read(&root().join("src"), "mcp_code_sandbox").unwrap();
    for m in graph.edges.keys().filter(|m| m.len() == 1) {
        assert!(
            order.contains(&m[0]),
            "{} is not in ARCHITECTURE.md's layers",
            m[0]
        );
    }
    let rank = |m: &ModPath| m.first().and_then(|top| order.iter().position(|o| o == top));
    let mut upward = Vec::new();
    for (from, uses) in &graph.edges {
        for to in uses {
            if let (Some(i), Some(j)) = (rank(from), rank(to))
                && from[0] != to[0]
                && j <= i
            {
                upward.push(format!("{} -> {}", layers::show(from), layers::show(to)));
            }
        }
    }
    assert!(upward.is_empty(), "imports of modules listed above: {upward:#?}");
}

#[test]
fn each_local_backend_module_imports_only_modules_listed_below_it() {
    let order = documented_order("```\nwasm/\n", 2);
    let graph = layers::read(&root().join("src"), "mcp_code_sandbox").unwrap();
    let on_disk: Vec<String> = graph
        .edges
        .keys()
        .filter(|m| m.len() == 2 && m[0] == "wasm")
        .map(|m| m[1].clone())
        .collect();
    for m in &on_disk {
        assert!(order.contains(m), "wasm/{m} is not in ARCHITECTURE.md's list");
    }
    let rank = |m: &ModPath| -> Option<usize> {
        (m.len() >= 2 && m[0] == "wasm")
            .then(|| order.iter().position(|o| *o == m[1]))
            .flatten()
    };
    let mut upward = Vec::new();
    for (from, uses) in &graph.edges {
        let Some(i) = rank(from) else { continue };
        for to in uses {
            if let Some(j) = rank(to)
                && j <= i
                && from[1] != to[1]
            {
                upward.push(format!("{} -> {}", layers::show(from), layers::show(to)));
            }
        }
    }
    assert!(upward.is_empty(), "imports of modules listed above: {upward:#?}");
}

/// Modules that may be longer, and why: one shadow per WASI file call, each short.
const LONG_ALLOWED: &[&str] = &["src/wasm/vm/guest_fs/shadow.rs"];
const MAX_LINES: usize = 450;

#[test]
fn no_module_is_longer_than_a_reader_can_hold() {
    let mut files = crate::common::files_under(&root().join("src"), &["rs"]);
    files.extend(crate::common::files_under(&root().join("xtask/src"), &["rs"]));
    let long: Vec<String> = files
        .iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > MAX_LINES && !LONG_ALLOWED.contains(&rel.as_str())).then(|| format!("{rel}: {n} lines"))
        })
        .collect();
    assert!(long.is_empty(), "modules over {MAX_LINES} lines: {long:#?}");
}
