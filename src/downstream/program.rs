//! Finding a downstream server's program by full path, never by a bare name handed to the
//! system. Claude Desktop's Windows installer (MSIX) starts its children with `PATHEXT=.CPL`
//! and an empty `WINDIR`, so Windows' own search misses `npx.cmd`, `uvx.exe` and
//! `python.exe`; Rust's search on Windows tries only `.exe`. Here each folder of `PATH` is
//! tried in order with the extensions programs have on that platform.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What a program's file may end with: nothing elsewhere; on Windows, whatever `PATHEXT`
/// says, then the usual four however it is set.
fn extensions(windows: bool, pathext: Option<&str>) -> Vec<String> {
    if !windows {
        return vec![String::new()];
    }
    let mut out: Vec<String> = pathext
        .unwrap_or("")
        .split(';')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| e.starts_with('.') && e.len() > 1)
        .collect();
    for usual in [".exe", ".cmd", ".bat", ".com"] {
        if !out.iter().any(|e| e == usual) {
            out.push(usual.to_string());
        }
    }
    // A name that already ends in an extension is tried as it is first.
    out.insert(0, String::new());
    out
}

/// `command` as a full path: as given when it names a path (holds a separator), else the first
/// match in `path` (the `PATH` value) that is a file. `None` when nothing matches.
pub fn find(command: &str, path: Option<OsString>, windows: bool, pathext: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') || (windows && command.contains('\\')) {
        return Some(PathBuf::from(command));
    }
    let exts = extensions(windows, pathext);
    let has_ext = Path::new(command).extension().is_some();
    std::env::split_paths(&path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .flat_map(|dir| {
            exts.iter()
                .filter(|e| !e.is_empty() || !windows || has_ext)
                .map(move |e| dir.join(format!("{command}{e}")))
                .collect::<Vec<_>>()
        })
        .find(|p| p.is_file())
}

/// [`find`] for this process: its `PATH` and platform.
pub fn locate(command: &str) -> Option<PathBuf> {
    let pathext = std::env::var("PATHEXT").ok();
    find(
        command,
        std::env::var_os("PATH"),
        cfg!(windows),
        pathext.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder holding empty `files` (left in the temp folder: a few empty files).
    fn dir_with(files: &[&str]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("program-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&d).expect("a temp dir");
        for f in files {
            std::fs::write(d.join(f), "").expect("write");
        }
        d
    }

    #[test]
    fn windows_finds_cmd_and_exe_whatever_pathext_says() {
        let a = dir_with(&["npx.cmd"]);
        let b = dir_with(&["uvx.exe", "python.exe"]);
        let path = std::env::join_paths([a.as_path(), b.as_path()]).ok();
        // Claude Desktop's MSIX children see PATHEXT=.CPL.
        let npx = find("npx", path.clone(), true, Some(".CPL"));
        assert_eq!(npx, Some(a.as_path().join("npx.cmd")));
        assert_eq!(
            find("uvx", path.clone(), true, Some(".CPL")),
            Some(b.as_path().join("uvx.exe"))
        );
        assert_eq!(
            find("python.exe", path.clone(), true, None),
            Some(b.as_path().join("python.exe"))
        );
        assert_eq!(find("missing", path, true, None), None);
    }

    #[test]
    fn elsewhere_the_bare_name_is_found_in_path_order() {
        let a = dir_with(&[]);
        let b = dir_with(&["npx"]);
        let path = std::env::join_paths([a.as_path(), b.as_path()]).ok();
        assert_eq!(
            find("npx", path.clone(), false, None),
            Some(b.as_path().join("npx"))
        );
        assert_eq!(
            find("npx.cmd", path, false, None),
            None,
            "no Windows extensions elsewhere"
        );
        assert_eq!(
            find("./bin/server", None, false, None),
            Some(PathBuf::from("./bin/server"))
        );
    }
}
