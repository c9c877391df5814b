//! Where things go in the store: everything of one principal under a prefix of its own, named
//! by a hash of the principal's name (names may hold any character; a hash is a safe path
//! segment and shows no one's name to whoever can list the bucket). A sandbox is looked up
//! only under the prefix of the principal asking, so another principal's sandbox is not
//! found, as on disk.

use sha2::{Digest, Sha256};

use super::location::Store;

/// The prefix segment of `principal`'s sandboxes and chunks.
pub fn key(principal: &str) -> String {
    let digest = Sha256::digest(format!("principal:{principal}").as_bytes());
    hex::encode(&digest[..16])
}

/// The longest sandbox id a server makes: `sbx-`, a replica name of up to 63 characters (a
/// StatefulSet pod's), `-`, 32 hex digits. Every id a replica makes must pass
/// [`plausible_id`], or no replica could resume it and the sweep could not read its manifest.
pub const MAX_ID: usize = 4 + 63 + 1 + 32;

/// Whether `id` is a plain sandbox id, safe as a path segment here and in the store: ids
/// asked for come from requests.
pub fn plausible_id(id: &str) -> bool {
    id.starts_with("sbx-")
        && id.len() <= MAX_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Where a principal's sandbox `id` keeps its manifest.
pub fn manifest_path(store: &Store, space: &str, id: &str) -> object_store::path::Path {
    store.path(&["principals", space, "sandboxes", id, "manifest.json"])
}

/// Where a principal's sandbox `id` keeps its lease.
pub fn lease_path(store: &Store, space: &str, id: &str) -> object_store::path::Path {
    store.path(&["principals", space, "sandboxes", id, "lease.json"])
}

/// Where a principal's chunk named `sha` is.
pub fn chunk_path(store: &Store, space: &str, sha: &str) -> object_store::path::Path {
    store.path(&["principals", space, "chunks", sha.get(..2).unwrap_or("00"), sha])
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_differ_by_principal_and_ids_are_plain() {
        assert_ne!(super::key("alice"), super::key("bob"));
        assert_eq!(super::key("alice").len(), 32);
        assert!(super::plausible_id("sbx-r0-0123abcd"));
        let longest = format!("sbx-{}-{}", "r".repeat(63), "0".repeat(32));
        assert_eq!(longest.len(), super::MAX_ID);
        assert!(super::plausible_id(&longest));
        for bad in [
            "sbx-../x",
            "SBX-1",
            "sbx-a/b",
            "x",
            &format!("sbx-{}", "a".repeat(97)),
        ] {
            assert!(!super::plausible_id(bad), "{bad}");
        }
    }
}
