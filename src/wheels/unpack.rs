//! Unpacking a wheel into a private staging folder, refusing the whole wheel at the first
//! sign of trouble (docs/THREAT-MODEL.md, "Packages"): names outside the target, links, duplicates, archive
//! bombs, RECORD entries pointing outside, console scripts with path separators.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use super::WheelError;
use super::index::WheelFile;

pub const MAX_ENTRIES: usize = 20_000;
pub const MAX_TOTAL: u64 = 512 << 20;
pub const MAX_ENTRY: u64 = 128 << 20;
/// Largest uncompressed/compressed ratio for entries over 1 MiB.
pub const MAX_RATIO: u64 = 200;

fn refuse(w: &WheelFile, reason: impl Into<String>) -> WheelError {
    WheelError::Unsafe {
        file: w.file.clone(),
        reason: reason.into(),
    }
}

/// A relative path of plain components, or None.
pub fn safe_relative(name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains(['\\', '\0']) || name.starts_with('/') {
        return None;
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[1] == b':' {
        return None;
    }
    let p = Path::new(name);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Where an archive member goes: `.data/purelib|platlib/x` → `x`; other `.data` kinds are
/// dropped (no scripts or headers in a sandbox). Checked names only.
fn target_of(w: &WheelFile, name: &str) -> Result<Option<PathBuf>, WheelError> {
    let rel = safe_relative(name).ok_or_else(|| {
        refuse(
            w,
            format!("the entry '{}' points outside its folder", name.escape_debug()),
        )
    })?;
    let mut comps = rel.components();
    let first = comps
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    if first.ends_with(".data") {
        let kind = comps
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        let rest: PathBuf = comps.collect();
        return Ok(match kind.as_str() {
            "purelib" | "platlib" if !rest.as_os_str().is_empty() => Some(rest),
            _ => None,
        });
    }
    Ok(Some(rel))
}

fn is_symlink(mode: Option<u32>) -> bool {
    mode.is_some_and(|m| m & 0o170000 == 0o120000)
}

/// Unpacks `w` into `staging` (which must be private to the host); returns the top-level
/// names it created. `taken` holds paths other wheels of the same install already use.
pub fn unpack(
    w: &WheelFile,
    staging: &Path,
    taken: &mut HashSet<PathBuf>,
) -> Result<Vec<PathBuf>, WheelError> {
    let broken = |e: &dyn std::fmt::Display| WheelError::Broken {
        file: w.file.clone(),
        reason: e.to_string(),
    };
    let f = std::fs::File::open(&w.path).map_err(|e| broken(&e))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f)).map_err(|e| broken(&e))?;
    if zip.len() > MAX_ENTRIES {
        return Err(refuse(
            w,
            format!("it has {} entries, over the {MAX_ENTRIES} limit", zip.len()),
        ));
    }
    // First pass: every name, mode and size is checked before a byte is written.
    let mut seen = HashSet::new();
    let mut declared = 0u64;
    let mut plan = Vec::new();
    for i in 0..zip.len() {
        let e = zip.by_index_raw(i).map_err(|e| broken(&e))?;
        let name = e.name().to_string();
        if !seen.insert(name.clone()) {
            return Err(refuse(w, format!("the entry '{name}' appears twice")));
        }
        if is_symlink(e.unix_mode()) {
            return Err(refuse(w, format!("the entry '{name}' is a symbolic link")));
        }
        if e.is_dir() {
            safe_relative(name.trim_end_matches('/'))
                .ok_or_else(|| refuse(w, format!("the folder '{name}' points outside")))?;
            continue;
        }
        let size = e.size();
        if size > MAX_ENTRY {
            return Err(refuse(
                w,
                format!("the entry '{name}' is {size} bytes, over the {MAX_ENTRY} byte limit"),
            ));
        }
        if size > 1 << 20 && size / e.compressed_size().max(1) > MAX_RATIO {
            return Err(refuse(
                w,
                format!("the entry '{name}' compresses more than {MAX_RATIO}:1 (an archive bomb?)"),
            ));
        }
        declared += size;
        if declared > MAX_TOTAL {
            return Err(refuse(w, format!("it unpacks to more than {MAX_TOTAL} bytes")));
        }
        if let Some(target) = target_of(w, &name)? {
            if !taken.insert(target.clone()) {
                return Err(refuse(
                    w,
                    format!("'{}' is also provided by another package", target.display()),
                ));
            }
            plan.push((i, name, target));
        }
    }
    check_record_and_scripts(w, &mut zip)?;
    let mut top = Vec::new();
    let mut written = 0u64;
    for (i, name, target) in plan {
        let mut e = zip.by_index(i).map_err(|e| broken(&e))?;
        let dest = staging.join(&target);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| WheelError::Io {
                context: format!("creating {}", parent.display()),
                source: e,
            })?;
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dest)
            .map_err(|e| WheelError::Io {
                context: format!("writing {name}"),
                source: e,
            })?;
        // Sizes in headers can lie: the copy itself is bounded.
        let mut limited = (&mut e).take(MAX_ENTRY + 1);
        let n = std::io::copy(&mut limited, &mut out).map_err(|e| broken(&e))?;
        written += n;
        if n > MAX_ENTRY || written > MAX_TOTAL {
            return Err(refuse(w, "it unpacks to more than its headers declare"));
        }
        out.flush().map_err(|e| broken(&e))?;
        if let Some(Component::Normal(first)) = target.components().next() {
            let first = PathBuf::from(first);
            if !top.contains(&first) {
                top.push(first);
            }
        }
    }
    Ok(top)
}

fn check_record_and_scripts<R: Read + std::io::Seek>(
    w: &WheelFile,
    zip: &mut zip::ZipArchive<R>,
) -> Result<(), WheelError> {
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    for name in names {
        let leaf = name.rsplit('/').next().unwrap_or("");
        let in_dist_info = name.split('/').next().is_some_and(|d| d.ends_with(".dist-info"));
        if !in_dist_info || !(leaf == "RECORD" || leaf == "entry_points.txt") {
            continue;
        }
        let mut text = String::new();
        let read = zip
            .by_name(&name)
            .map(|e| e.take(8 << 20).read_to_string(&mut text));
        if !matches!(read, Ok(Ok(_))) {
            return Err(refuse(w, format!("{name} is unreadable")));
        }
        if leaf == "RECORD" {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let path = line.rsplitn(3, ',').last().unwrap_or(line).trim_matches('"');
                if safe_relative(path).is_none() {
                    return Err(refuse(w, format!("RECORD names '{path}', outside the package")));
                }
            }
        } else {
            let mut in_scripts = false;
            for line in text.lines().map(str::trim) {
                if line.starts_with('[') {
                    in_scripts = matches!(line, "[console_scripts]" | "[gui_scripts]");
                    continue;
                }
                if in_scripts && let Some((script, _)) = line.split_once('=') {
                    let script = script.trim();
                    if script.contains(['/', '\\']) || script.contains("..") {
                        return Err(refuse(
                            w,
                            format!("the console script '{script}' has a path in its name"),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::safe_relative;

    #[test]
    fn only_plain_relative_names_are_safe() {
        assert!(safe_relative("pkg/mod.py").is_some());
        for bad in [
            "../x",
            "/etc/x",
            "C:\\x",
            "c:x",
            "pkg.data/../../x",
            "a/../../b",
            "",
            "a\\b",
        ] {
            assert!(safe_relative(bad).is_none(), "{bad}");
        }
    }
}

#[cfg(test)]
mod fuzz {
    use std::collections::HashSet;
    use std::io::Write;

    use proptest::prelude::*;

    use super::*;

    fn wheel_with(names: &[String]) -> (tempdir::Dir, WheelFile) {
        let dir = tempdir::Dir::new();
        let path = dir.0.join("fuzz-1.0-py3-none-any.whl");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        for n in names {
            if z.start_file(n.as_str(), zip::write::SimpleFileOptions::default())
                .is_ok()
            {
                let _ = z.write_all(b"x");
            }
        }
        let _ = z.finish();
        let w = WheelFile {
            path,
            file: "fuzz-1.0-py3-none-any.whl".into(),
            name: "fuzz".into(),
            version: "1.0".parse().unwrap(),
            pure: true,
        };
        (dir, w)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let d = std::env::temp_dir().join(format!("mcs-fuzz-{}", uuid::Uuid::new_v4().simple()));
                std::fs::create_dir_all(&d).unwrap();
                Dir(d)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever names a wheel holds, nothing is ever written outside the staging folder.
        #[test]
        fn unpacking_never_writes_outside(names in proptest::collection::vec("(\\.\\./|/|[a-z]{1,4}/|\\.data/|purelib/|\\\\|C:){0,4}[a-z]{1,6}(\\.py)?", 1..6)) {
            let (dir, w) = wheel_with(&names);
            let staging = dir.0.join("staging");
            std::fs::create_dir_all(&staging).unwrap();
            let before: HashSet<_> = std::fs::read_dir(&dir.0).unwrap().flatten().map(|e| e.file_name()).collect();
            let _ = unpack(&w, &staging, &mut HashSet::new());
            let after: HashSet<_> = std::fs::read_dir(&dir.0).unwrap().flatten().map(|e| e.file_name()).collect();
            prop_assert_eq!(before, after, "a file appeared beside the staging folder");
            prop_assert!(!dir.0.parent().unwrap().join("x.py").exists());
        }
    }
}
