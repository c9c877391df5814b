//! The module graph of a crate, read from its source, so the layering that
//! `docs/ARCHITECTURE.md` claims ("each module imports only modules below it") is checked by a
//! test instead of trusted.
//!
//! A node is a module file; an edge is a use of something that module defines. A name a
//! module only re-exports (`pub use child::Thing`) counts as a use of the module that defines
//! it, so a facade does not make every child depend on its parent. Declaring a child
//! (`mod child;`) is not a use. Test code (`#[cfg(test)]` items and `tests.rs` files) is left
//! out: a test may reach anything.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Context;
use syn::visit::Visit;

/// A module's path from its crate root, such as `["wasm", "vm", "session"]`.
pub type ModPath = Vec<String>;

/// Every module of a crate and the modules each one uses.
pub struct Graph {
    pub edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

/// Reads every `.rs` file under `src` (a crate's source folder). `name` is the crate's own
/// name as a path root (a binary refers to its library by it).
pub fn read(src: &Path, name: &str) -> anyhow::Result<Graph> {
    let mut files = BTreeMap::new();
    collect(src, src, &mut files)?;
    let mut parsed = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file = syn::parse_file(&text).with_context(|| format!("parsing {}", path.display()))?;
        parsed.insert(module.clone(), file);
    }
    let modules: BTreeSet<ModPath> = parsed.keys().cloned().collect();
    let mut reexports = Exports::default();
    let mut uses: BTreeMap<ModPath, Vec<ModPath>> = BTreeMap::new();
    for (module, file) in &parsed {
        let mut reader = Reader {
            module,
            name,
            modules: &modules,
            paths: Vec::new(),
            reexports: HashMap::new(),
            globs: Vec::new(),
            inline: Vec::new(),
        };
        for item in &file.items {
            if !is_test(item_attrs(item)) {
                reader.visit_item(item);
            }
        }
        let defined = file.items.iter().filter_map(item_name).collect();
        reexports.defined.insert(module.clone(), defined);
        reexports.named.insert(module.clone(), reader.reexports);
        reexports.globs.insert(module.clone(), reader.globs);
        uses.insert(module.clone(), reader.paths);
    }
    let mut edges = BTreeMap::new();
    for (module, paths) in uses {
        let mut targets = BTreeSet::new();
        for path in paths {
            if let Some(target) = resolve(&path, &modules, &reexports, 8)
                && target != module
            {
                targets.insert(target);
            }
        }
        edges.insert(module, targets);
    }
    Ok(Graph { edges })
}

impl Graph {
    /// The circles: each a set of modules that reach one another, with the edges inside it.
    pub fn circles(&self) -> Vec<Vec<(ModPath, ModPath)>> {
        let mut tarjan = Tarjan {
            graph: self,
            index: HashMap::new(),
            low: HashMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            next: 0,
            found: Vec::new(),
        };
        for node in self.edges.keys() {
            if !tarjan.index.contains_key(node) {
                tarjan.visit(node);
            }
        }
        tarjan
            .found
            .into_iter()
            .map(|members| {
                let mut inside = Vec::new();
                for a in &members {
                    for b in &self.edges[a] {
                        if members.contains(b) {
                            inside.push((a.clone(), b.clone()));
                        }
                    }
                }
                inside.sort();
                inside
            })
            .collect()
    }
}

/// What each module makes visible besides its child modules: the items it defines, the names
/// it re-exports, and the modules it re-exports whole (`pub use types::*`).
#[derive(Default)]
struct Exports {
    defined: HashMap<ModPath, BTreeSet<String>>,
    named: HashMap<ModPath, HashMap<String, ModPath>>,
    globs: HashMap<ModPath, Vec<ModPath>>,
}

fn item_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Fn(f) => f.sig.ident.to_string(),
        syn::Item::Struct(s) => s.ident.to_string(),
        syn::Item::Enum(e) => e.ident.to_string(),
        syn::Item::Const(c) => c.ident.to_string(),
        syn::Item::Static(s) => s.ident.to_string(),
        syn::Item::Trait(t) => t.ident.to_string(),
        syn::Item::Type(t) => t.ident.to_string(),
        syn::Item::Macro(m) => m.ident.as_ref()?.to_string(),
        _ => return None,
    })
}

/// Writes a module path the way Rust does, `crate` for the root.
pub fn show(path: &[String]) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<ModPath, PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).with_extension("");
        let mut module: ModPath = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
        match module.last().map(String::as_str) {
            Some("tests") => continue,
            Some("mod" | "lib") => {
                module.pop();
            }
            // A binary's root (`main.rs`) stays a node of its own, beside the library's.
            _ => {}
        }
        out.insert(module, path);
    }
    Ok(())
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Mod(m) => &m.attrs,
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Struct(s) => &s.attrs,
        syn::Item::Enum(e) => &e.attrs,
        syn::Item::Const(c) => &c.attrs,
        syn::Item::Static(s) => &s.attrs,
        syn::Item::Trait(t) => &t.attrs,
        syn::Item::Type(t) => &t.attrs,
        _ => &[],
    }
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                let tokens = l.tokens.to_string();
                let words: Vec<&str> = tokens.split(|c: char| !c.is_alphanumeric() && c != '_').collect();
                words.contains(&"test") && !words.contains(&"not")
            })
    })
}

/// Collects the absolute paths one module file names, and what it re-exports.
struct Reader<'a> {
    module: &'a ModPath,
    name: &'a str,
    modules: &'a BTreeSet<ModPath>,
    paths: Vec<ModPath>,
    reexports: HashMap<String, ModPath>,
    globs: Vec<ModPath>,
    /// The inline modules (`mod imp { ... }`) the reader is inside.
    inline: Vec<String>,
}

impl Reader<'_> {
    /// The module this file's paths are relative to: a binary root's children sit at the
    /// crate root.
    fn here(&self) -> ModPath {
        let mut here = if self.module.len() == 1 && self.module[0] == "main" {
            Vec::new()
        } else {
            self.module.clone()
        };
        here.extend(self.inline.iter().cloned());
        here
    }

    /// Makes a path absolute, or `None` for one outside the crate.
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let here = self.here();
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            s if s == self.name => Vec::new(),
            "self" => here.clone(),
            "super" => {
                let mut base = here.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            _ => {
                // A child module named without `self::` (Rust 2018 paths).
                let mut child = here.clone();
                child.push(first.clone());
                if self.modules.contains(&child) {
                    let mut full = here;
                    full.extend(segments.iter().cloned());
                    return Some(full);
                }
                return None;
            }
        };
        base.extend(segments[1..].iter().cloned());
        Some(base)
    }

    fn tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(prefix, &p.tree, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.named(prefix, n.ident.to_string(), n.ident.to_string(), public),
            syn::UseTree::Rename(r) => self.named(prefix, r.ident.to_string(), r.rename.to_string(), public),
            syn::UseTree::Glob(_) => {
                if let Some(path) = self.absolute(prefix) {
                    if public {
                        self.globs.push(path.clone());
                    }
                    self.paths.push(path);
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.tree(prefix, t, public);
                }
            }
        }
    }

    fn named(&mut self, prefix: &[String], ident: String, alias: String, public: bool) {
        let mut full = prefix.to_vec();
        if ident != "self" {
            full.push(ident);
        }
        if let Some(path) = self.absolute(&full) {
            if public {
                self.reexports.insert(alias, path.clone());
            }
            self.paths.push(path);
        }
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let public = !matches!(u.vis, syn::Visibility::Inherited);
        self.tree(&mut Vec::new(), &u.tree, public);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Inline modules are part of this file; test modules are left out.
        if !is_test(&m.attrs)
            && let Some((_, items)) = &m.content
        {
            self.inline.push(m.ident.to_string());
            for item in items {
                if !is_test(item_attrs(item)) {
                    self.visit_item(item);
                }
            }
            self.inline.pop();
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1
            && let Some(path) = self.absolute(&segments)
        {
            self.paths.push(path);
        }
        syn::visit::visit_path(self, p);
    }
}

/// The module that defines what `path` names: the longest module prefix, followed through
/// re-exports.
fn resolve(path: &[String], modules: &BTreeSet<ModPath>, exports: &Exports, depth: u8) -> Option<ModPath> {
    let owner = (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))?;
    let Some(next) = path.get(owner.len()) else {
        return Some(owner);
    };
    if depth == 0 || exports.defined.get(&owner).is_some_and(|d| d.contains(next)) {
        return Some(owner);
    }
    if let Some(target) = exports.named.get(&owner).and_then(|r| r.get(next))
        && target.as_slice() != path
    {
        let mut followed = target.clone();
        followed.extend(path[owner.len() + 1..].iter().cloned());
        return resolve(&followed, modules, exports, depth - 1).or(Some(owner));
    }
    for glob in exports.globs.get(&owner).into_iter().flatten() {
        let mut followed = glob.clone();
        followed.extend(path[owner.len()..].iter().cloned());
        if let Some(found) = resolve(&followed, modules, exports, depth - 1)
            && (found != *glob || exports.defined.get(glob).is_some_and(|d| d.contains(next)))
        {
            return Some(found);
        }
    }
    Some(owner)
}

struct Tarjan<'g> {
    graph: &'g Graph,
    index: HashMap<ModPath, usize>,
    low: HashMap<ModPath, usize>,
    stack: Vec<ModPath>,
    on: BTreeSet<ModPath>,
    next: usize,
    found: Vec<BTreeSet<ModPath>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: &ModPath) {
        self.index.insert(v.clone(), self.next);
        self.low.insert(v.clone(), self.next);
        self.next += 1;
        self.stack.push(v.clone());
        self.on.insert(v.clone());
        let targets = self.graph.edges.get(v).cloned().unwrap_or_default();
        for w in &targets {
            if !self.graph.edges.contains_key(w) {
                continue;
            }
            if !self.index.contains_key(w) {
                self.visit(w);
                let low = self.low[v].min(self.low[w]);
                self.low.insert(v.clone(), low);
            } else if self.on.contains(w) {
                let low = self.low[v].min(self.index[w]);
                self.low.insert(v.clone(), low);
            }
        }
        if self.low[v] == self.index[v] {
            let mut members = BTreeSet::new();
            while let Some(w) = self.stack.pop() {
                self.on.remove(&w);
                let done = &w == v;
                members.insert(w);
                if done {
                    break;
                }
            }
            if members.len() > 1 {
                self.found.push(members);
            }
        }
    }
}
