//! Which principal owns which sandbox, in creation order, kept in a small JSON file beside the
//! sandboxes so that after a restart each kept sandbox goes back to its owner and to no one else.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::host::lock::Locked;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Entry {
    sandbox_id: String,
    principal: String,
}

pub struct Owners {
    /// Where the list is kept; `None` keeps it in memory only.
    file: Option<PathBuf>,
    entries: Mutex<Vec<(String, Arc<str>)>>,
}

impl Owners {
    /// Reads the list (a missing or unreadable one starts empty: its sandboxes then belong to
    /// no one, which hides them rather than showing them to the wrong principal).
    pub fn load(file: Option<PathBuf>) -> Self {
        let entries = file
            .as_deref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|b| match serde_json::from_slice::<Vec<Entry>>(&b) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!("ignoring the sandbox owners list: {e}");
                    None
                }
            })
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.sandbox_id, Arc::from(e.principal)))
            .collect();
        Owners {
            file,
            entries: Mutex::new(entries),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(String, Arc<str>)>> {
        self.entries.locked()
    }

    /// Sandboxes given to a principal other than the machine's local user.
    pub fn remote_owned(&self) -> std::collections::HashSet<String> {
        self.lock()
            .iter()
            .filter(|(_, p)| &**p != super::names::LOCAL)
            .map(|(s, _)| s.clone())
            .collect()
    }

    pub fn owner_of(&self, id: &str) -> Option<Arc<str>> {
        self.lock().iter().find(|(s, _)| s == id).map(|(_, p)| p.clone())
    }

    /// `who`'s sandboxes, oldest first.
    pub fn owned_by(&self, who: &str) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, p)| &**p == who)
            .map(|(s, _)| s.clone())
            .collect()
    }

    pub fn add(&self, id: &str, who: &Arc<str>) {
        let mut e = self.lock();
        e.push((id.to_string(), who.clone()));
        self.save(&e);
    }

    /// Keeps only the entries `keep` accepts (sandboxes still open).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut e = self.lock();
        let before = e.len();
        e.retain(|(id, _)| keep(id));
        if e.len() != before {
            self.save(&e);
        }
    }

    /// Written aside and renamed, so a crash leaves the old list or the new, never a mix.
    fn save(&self, entries: &[(String, Arc<str>)]) {
        let Some(file) = &self.file else { return };
        let list: Vec<Entry> = entries
            .iter()
            .map(|(s, p)| Entry {
                sandbox_id: s.clone(),
                principal: p.to_string(),
            })
            .collect();
        let result = serde_json::to_vec_pretty(&list)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let tmp = file.with_extension("json.tmp");
                std::fs::write(&tmp, bytes)?;
                crate::host::retry::rename(&tmp, file)
            });
        if let Err(e) = result {
            tracing::warn!(
                "could not save the sandbox owners list to {}: {e}; after a restart, sandboxes made since may be hidden",
                file.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_survive_a_reload_and_stale_ones_go() {
        let dir = std::env::temp_dir().join(format!("owners-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("owners.json");
        let o = Owners::load(Some(file.clone()));
        let (a, b) = (Arc::from("alice"), Arc::from("bob"));
        o.add("s1", &a);
        o.add("s2", &b);
        o.add("s3", &a);
        let o = Owners::load(Some(file.clone()));
        assert_eq!(o.owned_by("alice"), vec!["s1", "s3"]);
        assert_eq!(o.owner_of("s2").as_deref(), Some("bob"));
        o.retain(|id| id != "s1");
        assert_eq!(Owners::load(Some(file)).owned_by("alice"), vec!["s3"]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
