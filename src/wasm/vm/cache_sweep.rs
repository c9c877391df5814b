//! Warm images the server no longer uses, removed from the cache. Each is about 300 MB, and a
//! new runtime, wasmtime, prelude or warm-up names a new one, so without this every upgrade
//! would leave one behind. Only images made a week ago or more go: two servers sharing a home
//! with different settings (fuel, another version) never take turns rebuilding theirs.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// How old an unused image must be before it is removed.
pub const AGE: Duration = Duration::from_secs(7 * 86_400);

/// Whether `stem` names a cached warm image (`warm-` and 24 hex digits), not a shipped one.
fn is_warm_image(stem: &str) -> bool {
    stem.strip_prefix("warm-")
        .is_some_and(|k| k.len() == 24 && k.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Removes every cached warm image in `dir` but `keep` (a file stem) made before `now - AGE`,
/// with its record; how many.
pub fn remove_old_warm_images(dir: &Path, keep: &str, now: SystemTime) -> usize {
    let mut removed = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let compiled = path.extension().is_some_and(|x| x == "cwasm");
        if !compiled || stem == keep || !is_warm_image(stem) {
            continue;
        }
        let made = e.metadata().and_then(|m| m.modified()).unwrap_or(now);
        if now.duration_since(made).unwrap_or_default() < AGE {
            continue;
        }
        tracing::info!("removing the warm image {stem}, unused by this version (made over a week ago)");
        if std::fs::remove_file(&path).is_ok() {
            let _ = std::fs::remove_file(path.with_extension("json"));
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_other_cached_images_older_than_a_week_are_removed() {
        let dir = std::env::temp_dir().join(format!("mcs-sweep-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let (current, old, young) = (
            "warm-aaaaaaaaaaaaaaaaaaaaaaaa",
            "warm-bbbbbbbbbbbbbbbbbbbbbbbb",
            "warm-cccccccccccccccccccccccc",
        );
        let shipped = "warm-dddddddddddddddddddddddd-x86_64-5848b102f6f3c7d1-portable";
        for stem in [current, old, young, shipped] {
            for ext in ["cwasm", "json"] {
                std::fs::write(dir.join(format!("{stem}.{ext}")), "x").unwrap();
            }
        }
        let now = SystemTime::now() + AGE + Duration::from_secs(60);
        let touch = |stem: &str, at: SystemTime| {
            let f = std::fs::File::options()
                .write(true)
                .open(dir.join(format!("{stem}.cwasm")))
                .unwrap();
            f.set_modified(at).unwrap();
        };
        touch(young, now - Duration::from_secs(3600));
        assert_eq!(remove_old_warm_images(&dir, current, now), 1);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want: Vec<String> = [current, young, shipped]
            .iter()
            .flat_map(|s| [format!("{s}.cwasm"), format!("{s}.json")])
            .collect();
        want.sort();
        assert_eq!(left, want);
        let _ = std::fs::remove_dir_all(dir);
    }
}
