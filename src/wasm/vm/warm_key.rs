//! What names a warm image: everything its snapshot depends on (the runtime, the prelude,
//! the warm-up, the fixed preopen layout, wasmtime's version) and, for a compiled one, the
//! engine's settings. A change to any of them makes a new name, so an image is never used
//! with code it was not made from. Shared folders are not part of it: every interpreter
//! re-reads its preopens after it starts (`preopen_reset`), so one image serves any folders.

use sha2::{Digest, Sha256};

use super::compile::{DENSE_IMAGE_BYTES, WASMTIME_VERSION};
use super::engine::{self, Program};
use super::session::PRELUDE;

/// What the warm-up runs: the imports every sandbox then starts with.
pub const WARM_UP: &str = include_str!("../../../runtime/guest/warm_up.py");

/// The fixed guest paths and their order, as `preopens.rs` adds them: part of the key, since
/// the descriptors the image's code opened folders by come in this order.
const LAYOUT: &str = "/usr/local/lib,mpl-data,/usr/local/site-packages,/home/user,/tmp";
/// The cache name of the warm image for `plain`: what the snapshot depends on (see
/// [`snapshot_key`]) and the engine's settings (fuel included).
pub fn key(plain: &Program) -> String {
    key_of(
        &plain.files.module_sha256,
        &engine::engine_key(&plain.engine).to_le_bytes(),
    )
}

/// What a snapshot depends on, whatever compiles it: the runtime, the prelude, the warm-up,
/// the preopen layout and wasmtime's version. A shipped image is named by it.
pub fn snapshot_key(module_sha256: &str) -> String {
    key_of(module_sha256, b"portable")
}

fn key_of(module_sha256: &str, compiled_for: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [
        module_sha256.as_bytes(),
        PRELUDE.as_bytes(),
        WARM_UP.as_bytes(),
        LAYOUT.as_bytes(),
        // The image is instrumented too, so saved states can read its globals, and exports
        // libc's preopen reset; numpy's integers in it are 64-bit.
        b"instrumented+reset-preopens",
        super::code_patch::native_ints::VERSION.as_bytes(),
        super::kernels::binding().as_bytes(),
        WASMTIME_VERSION.as_bytes(),
        &DENSE_IMAGE_BYTES.to_le_bytes(),
        compiled_for,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    hex::encode(&h.finalize()[..12])
}
