//! What `cargo xtask` and the integration tests share: installing pinned npm packages and
//! building the MCP Bundle, so a fresh clone's `cargo test --release` prepares what its tests
//! need through the same code the `cargo xtask` commands run.

pub mod advisories;
pub mod answer;
pub mod bundle;
pub mod cross;
pub mod debian;
pub mod deploy;
pub mod docs;
pub mod idp;
// The team server's image: buildah, Linux only.
#[cfg(unix)]
pub mod image;
pub mod layers;
pub mod lts;
pub mod macos;
pub mod made_once;
pub mod nested_cargo;
pub mod npm;
pub mod pyvenv;
pub mod registry;
// SeaweedFS's wheel on PyPI is Linux's.
#[cfg(unix)]
pub mod seaweed;
pub mod windows;
