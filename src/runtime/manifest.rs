//! The pinned runtime manifest (`runtime/manifest.toml`), compiled into the binary so that a
//! copied binary still refuses any wheel but the one it was built for.

use std::sync::OnceLock;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Manifest {
    pub wheel: Wheel,
    pub artifacts: Artifacts,
    /// Data files the runtime's build left out, and the wheels they come from.
    #[serde(default)]
    pub package_data: Vec<DataWheel>,
}

/// A wheel (of the same version as the runtime's package) some data files are taken from.
#[derive(Debug, Deserialize)]
pub struct DataWheel {
    /// `name==version`, as pip is asked for it.
    pub spec: String,
    pub file: String,
    pub sha256: String,
    /// The platform pip is asked for (a compiled package's wheel); none for a pure one.
    #[serde(default)]
    pub platform: Option<String>,
    /// Members taken: a name, or a folder ending in `/` and all below it.
    pub members: Vec<String>,
    /// JPEG members are stored as PNG under the same name (the runtime's Pillow reads no JPEG).
    #[serde(default)]
    pub jpeg_as_png: bool,
}

#[derive(Debug, Deserialize)]
pub struct Wheel {
    pub name: String,
    pub version: String,
    pub file: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Deserialize)]
pub struct Artifacts {
    pub prefix: String,
    pub module: String,
    pub module_sha256: String,
    pub stdlib: String,
    pub stdlib_sha256: String,
    pub stdlib_guest_name: String,
    pub python_version: String,
}

const MANIFEST_TOML: &str = include_str!("../../runtime/manifest.toml");

/// The manifest this binary was built with.
pub fn manifest() -> &'static Manifest {
    static M: OnceLock<Manifest> = OnceLock::new();
    M.get_or_init(|| {
        // The file is part of the source tree and checked by a unit test; a parse failure is a
        // build defect, not user input.
        toml::from_str(MANIFEST_TOML).expect("runtime/manifest.toml is valid")
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn manifest_parses_and_pins_hex_digests() {
        let m = super::manifest();
        let data = m.package_data.iter().map(|d| &d.sha256);
        for d in [
            &m.wheel.sha256,
            &m.artifacts.module_sha256,
            &m.artifacts.stdlib_sha256,
        ]
        .into_iter()
        .chain(data)
        {
            assert_eq!(d.len(), 64);
            assert!(d.chars().all(|c| c.is_ascii_hexdigit()));
        }
        assert!(m.artifacts.stdlib_guest_name.ends_with(".zip"));
    }
}
