//! Kept sandboxes are bounded by disk, not by count: past `CODE_SANDBOX_KEEP_MB`, the least
//! recently used suspended sandboxes are deleted (files, state and checkpoints), oldest first,
//! never one used within [`RECENT`], each deletion logged with its id and size. With a team's
//! store, only the copy on this disk goes (see [`super::store_push::copy_may_go`]).

use std::sync::Arc;

use super::record::Sandbox;
use super::registry::Registry;
use crate::sandbox::retention::{RECENT, Why};

/// Deletes least recently used suspended sandboxes until the suspended ones together hold at
/// most `budget` bytes, or only recently used ones are left. Returns how many were deleted.
pub async fn evict_over_budget(registry: &Arc<Registry>, budget: u64) -> usize {
    let mut kept = Vec::new();
    let mut total = 0u64;
    for sb in registry.all() {
        if !sb.is_busy() && !sb.is_live() {
            let bytes = sb.kept_bytes();
            total = total.saturating_add(bytes);
            kept.push((sb, bytes));
        }
    }
    if total <= budget {
        return 0;
    }
    // Longest unused first.
    kept.sort_by_cached_key(|(sb, _)| std::cmp::Reverse(sb.idle_for()));
    let mut deleted = 0;
    for (sb, bytes) in kept {
        if total <= budget {
            break;
        }
        let idle = sb.idle_for();
        // With a store nothing is lost by letting a copy go, however recent: it comes back.
        if idle < RECENT && super::store_push::pusher().is_none() {
            tracing::warn!(
                "kept sandboxes hold {} MiB, over CODE_SANDBOX_KEEP_MB ({} MiB), but every one left was used within the last hour",
                total >> 20,
                budget >> 20
            );
            break;
        }
        tracing::info!(
            "evicting kept sandbox {} ({} bytes, unused for {} h): kept sandboxes hold {} MiB, over CODE_SANDBOX_KEEP_MB ({} MiB)",
            sb.id,
            bytes,
            idle.as_secs() / 3600,
            total >> 20,
            budget >> 20
        );
        if let_go(registry, &sb, Why::Evicted).await {
            total = total.saturating_sub(bytes);
            deleted += 1;
        }
    }
    deleted
}

/// Past the retention period, with a store: the copies on this disk of sandboxes unused that
/// long go (the store deletes the sandboxes themselves once no replica wrote them that long).
pub async fn let_go_idle(registry: &Arc<Registry>, retain: std::time::Duration) {
    for sb in registry.idle(retain) {
        let_go(registry, &sb, Why::Retention).await;
    }
}

/// Deletes `sb`, or with a store lets go of its copy on this disk once the store has it;
/// whether its disk was freed.
async fn let_go(registry: &Arc<Registry>, sb: &Arc<Sandbox>, why: Why) -> bool {
    match super::store_push::copy_may_go(sb).await {
        None => {
            registry.delete(&sb.id, why).await;
            true
        }
        Some(true) => {
            tracing::info!(
                "{}: its copy on this disk is let go ({}); the store keeps it",
                sb.id,
                why.as_str()
            );
            registry.remove(&sb.id);
            true
        }
        Some(false) => {
            tracing::info!("{}: kept on this disk until the store has its last save", sb.id);
            false
        }
    }
}
