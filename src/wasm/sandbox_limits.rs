//! The limits a wasm sandbox gets: what a request asked, clamped to what the runtime and the
//! server-wide memory budget allow, and the same bound on a kept sandbox's recorded limits.

use super::vm::WASM32_MAX_BYTES;
use crate::config::Settings;
use crate::sandbox::{CreateOptions, Limits};

/// Smallest memory limit that still starts the interpreter (its image alone is 40 MiB).
const MIN_MEMORY_MB: u64 = 64;

/// The limits a new sandbox really gets under `settings` and a memory budget of
/// `budget_bytes`, and notes on what was clamped.
pub fn for_new(settings: &Settings, budget_bytes: u64, opts: &CreateOptions) -> (Limits, Vec<String>) {
    let mut notes = Vec::new();
    let asked = opts.memory_mb.unwrap_or(settings.default_memory_mb);
    let budget_mb = budget_bytes >> 20;
    let most = (WASM32_MAX_BYTES >> 20).min(budget_mb).max(MIN_MEMORY_MB);
    let memory_mb = asked.clamp(MIN_MEMORY_MB, most);
    if memory_mb != asked {
        let why = if asked < MIN_MEMORY_MB {
            format!("the smallest that runs the interpreter is {MIN_MEMORY_MB} MiB")
        } else if most == WASM32_MAX_BYTES >> 20 {
            "32-bit WebAssembly addresses at most 4096 MiB".to_string()
        } else {
            format!("all sandboxes together may hold {budget_mb} MiB (CODE_SANDBOX_TOTAL_MEMORY_MB)")
        };
        notes.push(format!("memory_mb {asked} was clamped to {memory_mb}: {why}."));
    }
    let limits = Limits {
        timeout_seconds: settings.sandbox_timeout_seconds(opts.timeout_seconds),
        memory_mb,
        disk_bytes: settings.disk_mb.saturating_mul(1 << 20),
        output_bytes: settings.output_limit_bytes as u64,
        fuel_per_call: (settings.fuel_per_call > 0).then_some(settings.fuel_per_call),
    };
    (limits, notes)
}

/// The limits of a kept sandbox, read from its metadata on disk, bounded by what a request
/// could have asked for under these settings (an edited file must not raise them).
pub fn clamp_kept(settings: &Settings, total_memory: u64, kept: Limits) -> Limits {
    let most_mb = (WASM32_MAX_BYTES >> 20)
        .min(total_memory >> 20)
        .max(MIN_MEMORY_MB);
    Limits {
        timeout_seconds: settings.sandbox_timeout_seconds(Some(kept.timeout_seconds)),
        memory_mb: kept.memory_mb.clamp(MIN_MEMORY_MB, most_mb),
        disk_bytes: kept.disk_bytes.min(settings.disk_mb.saturating_mul(1 << 20)),
        output_bytes: kept.output_bytes.min(settings.output_limit_bytes as u64),
        fuel_per_call: (settings.fuel_per_call > 0).then_some(settings.fuel_per_call),
    }
}
