//! The platforms compiled code is made for: the one this server runs on, or one a bundle is
//! built for on another machine (wasmtime cross-compiles: a Windows or macOS bundle's warm
//! image is compiled on Linux, so those machines only build the binary). One table, so every
//! platform difference in naming compiled code lives here.

/// A platform the interpreter is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The triple wasmtime compiles for: the Rust target the server binary is built for, so
    /// the binary's own wasmtime takes the code as made for it.
    pub triple: &'static str,
    /// `std::env::consts::ARCH` on that platform.
    pub arch: &'static str,
    /// `std::env::consts::OS` on that platform.
    pub os: &'static str,
}

const TARGETS: &[Target] = &[
    Target {
        triple: "x86_64-unknown-linux-gnu",
        arch: "x86_64",
        os: "linux",
    },
    Target {
        triple: "aarch64-unknown-linux-gnu",
        arch: "aarch64",
        os: "linux",
    },
    Target {
        triple: "x86_64-apple-darwin",
        arch: "x86_64",
        os: "macos",
    },
    Target {
        triple: "aarch64-apple-darwin",
        arch: "aarch64",
        os: "macos",
    },
    Target {
        triple: "x86_64-pc-windows-gnu",
        arch: "x86_64",
        os: "windows",
    },
    Target {
        triple: "x86_64-pc-windows-msvc",
        arch: "x86_64",
        os: "windows",
    },
    Target {
        triple: "aarch64-pc-windows-msvc",
        arch: "aarch64",
        os: "windows",
    },
];

impl Target {
    /// The platform this binary was built for, when it is one of ours.
    pub fn host() -> Option<Target> {
        let env = if cfg!(target_env = "gnu") { "gnu" } else { "msvc" };
        TARGETS.iter().copied().find(|t| {
            t.arch == std::env::consts::ARCH
                && t.os == std::env::consts::OS
                && (t.os != "windows" || t.triple.ends_with(env))
        })
    }

    /// The platform a Rust target triple names (`cargo xtask bundle --target ...`).
    pub fn named(triple: &str) -> Option<Target> {
        TARGETS.iter().copied().find(|t| t.triple == triple)
    }

    /// Every platform, for messages that list them.
    pub fn all() -> impl Iterator<Item = &'static str> {
        TARGETS.iter().map(|t| t.triple)
    }

    /// The name MCP Bundles give the OS (Node's `process.platform`).
    pub fn bundle_platform(&self) -> &'static str {
        match self.os {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        }
    }

    /// What executables end with there.
    pub fn exe_suffix(&self) -> &'static str {
        if self.os == "windows" { ".exe" } else { "" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_platform_is_known_and_names_itself() {
        let host = Target::host().expect("the platforms the tests run on are known");
        assert_eq!(host.arch, std::env::consts::ARCH);
        assert_eq!(host.exe_suffix(), std::env::consts::EXE_SUFFIX);
        assert_eq!(Target::named(host.triple), Some(host));
    }

    #[test]
    fn windows_gnu_and_macos_are_named() {
        let w = Target::named("x86_64-pc-windows-gnu").expect("windows");
        assert_eq!((w.bundle_platform(), w.exe_suffix()), ("win32", ".exe"));
        let m = Target::named("aarch64-apple-darwin").expect("macos");
        assert_eq!((m.bundle_platform(), m.arch), ("darwin", "aarch64"));
        assert_eq!(Target::named("riscv64gc-unknown-linux-gnu"), None);
    }
}
