//! States saved from a warm image this server no longer starts from (it was built again: an
//! upgrade, another prelude, a damaged cache). While that image is still in the cache (a
//! week), its memory is laid under the state's pages in an interpreter of the current plain
//! module, which has the same runtime's data where it keeps it (the rewrites in
//! `code_patch` move nothing), so the state comes back with the current code, and is saved as
//! the plain image's from then on (what it lacks is added by `upgrade`).

use std::sync::Arc;

use super::engine::Program;
use crate::runtime::Layout;

/// The memory of the older image saved states name `id`, when it is in the cache whole and
/// of the same runtime as `plain`.
pub async fn base(plain: &Arc<Program>, layout: &Layout, id: &str) -> Option<Arc<Vec<u8>>> {
    let older = super::warm_image::older(plain, layout, id)?;
    let theirs = older.base_memory().await.ok()?;
    let ours = plain.base_memory().await.ok()?;
    same_runtime(&ours, &theirs).then_some(theirs)
}

/// Where the pinned runtime keeps its read-only data (string literals, constant tables):
/// above the 16 MiB stack, below its writable data. Images of one runtime hold the same
/// bytes there; another runtime's would not.
const READ_ONLY: std::ops::Range<usize> = (16 << 20) + 4096..22 << 20;

fn same_runtime(plain: &[u8], older: &[u8]) -> bool {
    match (plain.get(READ_ONLY), older.get(READ_ONLY)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}
