//! Kept sandboxes are bounded by disk, not by count: past `CODE_SANDBOX_KEEP_MB`, the least
//! recently used suspended sandboxes are deleted (files, state and checkpoints), oldest first,
//! never one used within [`RECENT`], each deletion logged with its id and size.

use std::sync::Arc;

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
        if idle < RECENT {
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
        registry.delete(&sb.id, Why::Evicted).await;
        total = total.saturating_sub(bytes);
        deleted += 1;
    }
    deleted
}
