//! Checking paths that tools receive, before any backend touches a file.
//!
//! A path is accepted only if it names something inside the workspace by plain components:
//! no `..`, no NUL, no backslashes or drive letters, nothing absolute outside `/home/user`.
//! This is the first fence; the wasm backend's second is that every operation goes through a
//! `cap_std::fs::Dir` opened on the sandbox root, which also refuses symlink escapes.

use super::SandboxError;

/// The guest's working folder, where relative paths start.
pub const WORKSPACE: &str = "/home/user";

const MAX_PATH: usize = 4096;
const MAX_COMPONENT: usize = 255;

/// A checked path relative to the workspace root; empty means the root itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspacePath {
    parts: Vec<String>,
}

fn invalid(path: &str, why: &str) -> SandboxError {
    let shown: String = path.chars().take(80).collect();
    let ellipsis = if path.chars().count() > 80 { "..." } else { "" };
    SandboxError::InvalidPath(format!(
        "'{}{ellipsis}' {why}. Use a path relative to {WORKSPACE} (like 'data/input.csv') or an absolute one inside it",
        shown.escape_debug()
    ))
}

impl WorkspacePath {
    /// The workspace root.
    pub fn root() -> Self {
        WorkspacePath { parts: Vec::new() }
    }

    /// Parses a user path. `""`, `"."` and `"/home/user"` all name the root.
    pub fn parse(path: &str) -> Result<Self, SandboxError> {
        if path.len() > MAX_PATH {
            return Err(invalid(path, &format!("is longer than {MAX_PATH} bytes")));
        }
        if path.contains('\0') {
            return Err(invalid(path, "contains a NUL character"));
        }
        if path.contains('\\') {
            return Err(invalid(path, "contains a backslash; use '/' between folders"));
        }
        let b = path.as_bytes();
        if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
            return Err(invalid(path, "is a Windows drive path"));
        }
        if path.chars().any(|c| c.is_control()) {
            return Err(invalid(path, "contains control characters"));
        }
        let rel = if let Some(rest) = path.strip_prefix('/') {
            match rest.strip_prefix(&WORKSPACE[1..]) {
                Some(r) if r.is_empty() || r.starts_with('/') => r,
                _ if rest == "mnt" || rest.starts_with("mnt/") => {
                    return Err(SandboxError::InvalidPath(format!(
                        "'{}' is in /mnt, where the user's shared folders are read-only. Write under {WORKSPACE} instead; save_file copies a result out to the user's folders",
                        path.chars().take(80).collect::<String>().escape_debug()
                    )));
                }
                _ => return Err(invalid(path, "is outside the workspace")),
            }
        } else {
            path
        };
        let mut parts = Vec::new();
        for part in rel.split('/') {
            match part {
                "" | "." => {}
                ".." => return Err(invalid(path, "uses '..'")),
                p if p.len() > MAX_COMPONENT => {
                    return Err(invalid(
                        path,
                        &format!("has a name longer than {MAX_COMPONENT} bytes"),
                    ));
                }
                p => parts.push(p.to_string()),
            }
        }
        Ok(WorkspacePath { parts })
    }

    /// Parses a path that must name a file, not the workspace itself.
    pub fn parse_file(path: &str) -> Result<Self, SandboxError> {
        let p = Self::parse(path)?;
        if p.is_root() {
            return Err(invalid(path, "names the workspace folder, not a file"));
        }
        Ok(p)
    }

    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    /// Relative form, `.` for the root.
    pub fn relative(&self) -> String {
        if self.parts.is_empty() {
            ".".to_string()
        } else {
            self.parts.join("/")
        }
    }

    /// The absolute path the guest sees.
    pub fn guest(&self) -> String {
        if self.parts.is_empty() {
            WORKSPACE.to_string()
        } else {
            format!("{WORKSPACE}/{}", self.parts.join("/"))
        }
    }

    pub fn file_name(&self) -> Option<&str> {
        self.parts.last().map(String::as_str)
    }

    pub fn parent(&self) -> WorkspacePath {
        let mut parts = self.parts.clone();
        parts.pop();
        WorkspacePath { parts }
    }

    pub fn join(&self, name: &str) -> WorkspacePath {
        let mut parts = self.parts.clone();
        parts.push(name.to_string());
        WorkspacePath { parts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_and_workspace_absolute_paths() {
        assert_eq!(WorkspacePath::parse("a/b.txt").unwrap().relative(), "a/b.txt");
        assert_eq!(WorkspacePath::parse("./a//b.txt").unwrap().relative(), "a/b.txt");
        assert_eq!(
            WorkspacePath::parse("/home/user/a.csv").unwrap().relative(),
            "a.csv"
        );
        assert!(WorkspacePath::parse("/home/user").unwrap().is_root());
        assert!(WorkspacePath::parse("").unwrap().is_root());
        assert_eq!(WorkspacePath::parse("x").unwrap().guest(), "/home/user/x");
    }

    #[test]
    fn refuses_escapes_and_odd_names() {
        for bad in [
            "../../etc/passwd",
            "/etc/passwd",
            "C:\\Windows\\win.ini",
            "c:/x",
            "..\\x",
            "a\u{0}b",
            "a/../../b",
            "/home/username/x",
            "/home/userx",
            "a\nb",
        ] {
            let err = WorkspacePath::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid path"), "{bad:?} gave {err}");
        }
        let long = "a".repeat(100_000);
        assert!(WorkspacePath::parse(&long).is_err());
        assert!(WorkspacePath::parse(&"b".repeat(300)).is_err());
        assert!(WorkspacePath::parse_file("").is_err());
        assert!(WorkspacePath::parse_file("/home/user/").is_err());
    }
}

#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        /// Whatever the input, an accepted path is plain components inside the workspace.
        #[test]
        fn accepted_paths_never_escape(s in "(\\PC|/|\\.|\\\\|:|\u{0}){0,64}") {
            if let Ok(p) = WorkspacePath::parse(&s) {
                let rel = p.relative();
                prop_assert!(!rel.starts_with('/'));
                prop_assert!(rel.split('/').all(|c| c != ".." && !c.is_empty()));
                prop_assert!(!rel.contains('\\') && !rel.contains('\0'));
                prop_assert!(p.guest().starts_with(WORKSPACE));
            }
        }

        #[test]
        fn dot_dot_anywhere_is_refused(a in "[a-z]{0,8}", b in "[a-z]{0,8}") {
            let path = format!("{a}/../{b}");
            prop_assert!(WorkspacePath::parse(&path).is_err());
        }
    }
}
