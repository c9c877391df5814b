//! File names a guest chooses, against what the host's file system does with them. Linux takes
//! any name but `/` and NUL as its own. Windows treats some names as devices (`CON`, `NUL`,
//! `COM1`, ..., with any extension), takes `a:b` as a stream of `a`, drops trailing dots and
//! spaces, refuses `<>:"|?*` and control characters; and NTFS, like macOS's default APFS,
//! takes names that differ only in case or Unicode normalization for one file. A name that
//! would reach a device, or a file other than the one it names, is refused here, so the guest
//! gets a plain `OSError` instead of another file changing or vanishing.

use unicode_normalization::UnicodeNormalization;

/// How a host's file system treats names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameRules {
    /// Windows' reserved names and characters apply.
    pub windows: bool,
    /// Names equal after case folding and normalization are one file.
    pub folds: bool,
}

impl NameRules {
    /// This host's rules.
    pub fn host() -> NameRules {
        NameRules {
            windows: cfg!(windows),
            folds: cfg!(any(windows, target_os = "macos")),
        }
    }

    /// Linux's: every name is its own.
    pub const EXACT: NameRules = NameRules {
        windows: false,
        folds: false,
    };
}

/// Why a name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("'{0}' names a device on Windows")]
    Device(String),
    #[error("'{0}' holds a character Windows does not allow in a name")]
    Character(String),
    #[error("'{0}' ends in a dot or a space, which Windows drops")]
    Trailing(String),
}

const DEVICES: &[&str] = &["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$"];

/// `COM1`-`COM9` and `LPT1`-`LPT9`, with the superscript digits Windows also takes.
fn numbered_device(stem: &str) -> bool {
    let upper = stem.to_uppercase();
    let Some(rest) = upper.strip_prefix("COM").or_else(|| upper.strip_prefix("LPT")) else {
        return false;
    };
    matches!(
        rest,
        "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "\u{b9}" | "\u{b2}" | "\u{b3}"
    )
}

/// Whether one path component may be created or opened under `rules`.
pub fn check_component(name: &str, rules: NameRules) -> Result<(), Refused> {
    if !rules.windows || name == "." || name == ".." {
        return Ok(());
    }
    if name
        .chars()
        .any(|c| (c as u32) < 0x20 || matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*' | '\\'))
    {
        return Err(Refused::Character(name.into()));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(Refused::Trailing(name.into()));
    }
    // The stem before the first dot, with trailing spaces dropped as Windows does.
    let stem = name.split('.').next().unwrap_or(name).trim_end();
    if DEVICES.iter().any(|d| stem.eq_ignore_ascii_case(d)) || numbered_device(stem) {
        return Err(Refused::Device(name.into()));
    }
    Ok(())
}

/// Every component of a relative guest path.
pub fn check_path(path: &str, rules: NameRules) -> Result<(), Refused> {
    path.split('/')
        .filter(|c| !c.is_empty())
        .try_for_each(|c| check_component(c, rules))
}

/// The key two names share when the host takes them for one file.
pub fn fold_key(name: &str) -> String {
    name.nfc().flat_map(char::to_lowercase).collect()
}

/// Whether `a` and `b` are different names the host would take for one file.
pub fn collide(a: &str, b: &str, rules: NameRules) -> bool {
    rules.folds && a != b && fold_key(a) == fold_key(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOWS: NameRules = NameRules {
        windows: true,
        folds: true,
    };
    const MACOS: NameRules = NameRules {
        windows: false,
        folds: true,
    };

    #[test]
    fn devices_are_refused_in_any_case_and_with_any_extension() {
        for name in [
            "CON",
            "con",
            "Nul.txt",
            "aux.tar.gz",
            "COM1",
            "lpt9.log",
            "com\u{b9}",
            "CONIN$",
            "PRN .txt",
        ] {
            assert!(
                matches!(check_component(name, WINDOWS), Err(Refused::Device(_))),
                "{name}"
            );
            assert_eq!(check_component(name, NameRules::EXACT), Ok(()), "{name} on Linux");
        }
        for name in ["CONSOLE", "com10", "lpt0", "nul_", "icon.png", "COM"] {
            assert_eq!(check_component(name, WINDOWS), Ok(()), "{name}");
        }
    }

    #[test]
    fn streams_reserved_characters_and_trailing_dots_are_refused() {
        for name in [
            "a:b",
            "x<y",
            "q?",
            "star*",
            "pipe|",
            "quote\"",
            "tab\there",
            "back\\slash",
        ] {
            assert!(
                matches!(check_component(name, WINDOWS), Err(Refused::Character(_))),
                "{name}"
            );
        }
        for name in ["dot.", "space ", "both. "] {
            assert!(
                matches!(check_component(name, WINDOWS), Err(Refused::Trailing(_))),
                "{name}"
            );
        }
        assert_eq!(check_path("ok/fine.txt", WINDOWS), Ok(()));
        assert!(check_path("ok/NUL/x", WINDOWS).is_err());
        assert_eq!(check_path("a:b/c.", MACOS), Ok(()), "macOS takes these");
    }

    #[test]
    fn case_and_normalization_twins_collide_only_where_the_host_folds() {
        assert!(collide("a.txt", "A.txt", WINDOWS));
        assert!(
            collide("caf\u{e9}", "cafe\u{301}", MACOS),
            "NFC and NFD of one name"
        );
        assert!(collide("STRASSE", "strasse", MACOS));
        assert!(!collide("a.txt", "a.txt", WINDOWS), "the same name is no twin");
        assert!(!collide("a.txt", "A.txt", NameRules::EXACT));
        assert!(!collide("a.txt", "b.txt", WINDOWS));
    }
}
