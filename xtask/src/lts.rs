//! Whether the registry has a newer patch of the long-term-support line we pin (wasmtime 48,
//! security fixes backported until about 2028-08): said by `cargo xtask advisories`, never a
//! failure, since a patch is taken on purpose, for every wasmtime crate at once (they pin one
//! another exactly, so one crate's patch alone cannot be locked).

use std::path::Path;

use semver::Version;

/// The wasmtime crates this workspace pins with `=` in Cargo.toml.
pub const PINNED_LINE: &[&str] = &["wasmtime", "wasmtime-wasi", "wiggle", "wasmtime-wizer"];

/// One pinned crate: the version locked, and the registry's newest of its major line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinePatch {
    pub name: String,
    pub locked: Version,
    pub newest: Result<Version, String>,
}

/// The newest `name@major.*` the registry has, from `cargo info` run outside this workspace
/// (inside it, cargo info reports the locked version instead).
fn newest_of_line(name: &str, major: u64) -> Result<Version, String> {
    let out = crate::nested_cargo::command(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["info", "--quiet", &format!("{name}@{major}")])
        .current_dir(std::env::temp_dir())
        .output()
        .map_err(|e| format!("could not run cargo info: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("version: "))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| Version::parse(v).ok())
        .ok_or_else(|| {
            format!(
                "cargo info {name}@{major} said no version: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

/// Each pinned crate of the line, as locked in `lock`, beside the registry's newest patch.
pub fn check(lock: &Path) -> anyhow::Result<Vec<LinePatch>> {
    let locked = crate::advisories::locked(lock)?;
    let mut out = Vec::new();
    for name in PINNED_LINE {
        let Some(v) = locked.get(*name).and_then(|vs| vs.iter().max()) else {
            continue;
        };
        out.push(LinePatch {
            name: name.to_string(),
            locked: v.clone(),
            newest: newest_of_line(name, v.major),
        });
    }
    Ok(out)
}

/// What to tell the maintainer: one line per crate, and whether a bump can be made now.
pub fn report(patches: &[LinePatch]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut newest_all = None::<Version>;
    let mut behind = false;
    for p in patches {
        match &p.newest {
            Ok(n) if *n > p.locked => {
                lines.push(format!("{}: {n} is out; Cargo.lock has {}", p.name, p.locked));
                behind = true;
            }
            Ok(_) => lines.push(format!(
                "{}: {} is the newest {}.x",
                p.name, p.locked, p.locked.major
            )),
            Err(e) => lines.push(format!("{}: could not ask the registry ({e})", p.name)),
        }
        if let Ok(n) = &p.newest {
            newest_all = Some(newest_all.map_or(n.clone(), |m: Version| m.min(n.clone())));
        }
    }
    if behind {
        let common = newest_all.filter(|c| patches.iter().all(|p| *c > p.locked));
        lines.push(match common {
            Some(c) => format!(
                "every pinned wasmtime crate has {c}: set \"={c}\" for each in Cargo.toml and run `cargo update -p wasmtime`"
            ),
            None => "not every pinned wasmtime crate has the newer patch in the registry yet (they pin one another exactly): the bump waits until all do".into(),
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, locked: &str, newest: &str) -> LinePatch {
        LinePatch {
            name: name.into(),
            locked: Version::parse(locked).unwrap(),
            newest: Ok(Version::parse(newest).unwrap()),
        }
    }

    #[test]
    fn a_patch_only_some_crates_have_waits_and_one_all_have_is_offered() {
        let some = report(&[
            p("wasmtime", "48.0.8", "48.0.11"),
            p("wasmtime-wasi", "48.0.8", "48.0.8"),
        ]);
        assert!(some[0].contains("48.0.11 is out"), "{some:?}");
        assert!(some.last().unwrap().contains("waits"), "{some:?}");
        let all = report(&[
            p("wasmtime", "48.0.8", "48.0.11"),
            p("wasmtime-wasi", "48.0.8", "48.0.11"),
        ]);
        assert!(all.last().unwrap().contains("\"=48.0.11\""), "{all:?}");
        let none = report(&[p("wasmtime", "48.0.11", "48.0.11")]);
        assert_eq!(none.len(), 1, "{none:?}");
    }
}
