//! The open sandboxes of one backend, by id and in creation order.
//!
//! Both backends keep one; its order is creation order (the backends sort by last use where
//! that is what a listing wants).

use std::collections::HashMap;
use std::sync::Arc;

pub struct OpenSet<V> {
    map: HashMap<String, Arc<V>>,
    order: Vec<String>,
}

impl<V> Default for OpenSet<V> {
    fn default() -> Self {
        OpenSet {
            map: HashMap::new(),
            order: Vec::new(),
        }
    }
}

impl<V> OpenSet<V> {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn contains(&self, id: &str) -> bool {
        self.map.contains_key(id)
    }

    pub fn get(&self, id: &str) -> Option<Arc<V>> {
        self.map.get(id).cloned()
    }

    /// Adds `value` as the newest; an id already open is replaced and becomes the newest.
    pub fn insert(&mut self, id: String, value: Arc<V>) {
        if self.map.insert(id.clone(), value).is_some() {
            self.order.retain(|x| *x != id);
        }
        self.order.push(id);
    }

    /// Replaces an open sandbox's value where it stands in the order; false if `id` is not open.
    pub fn replace(&mut self, id: &str, value: Arc<V>) -> bool {
        match self.map.get_mut(id) {
            Some(v) => {
                *v = value;
                true
            }
            None => false,
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<Arc<V>> {
        let v = self.map.remove(id)?;
        self.order.retain(|x| x != id);
        Some(v)
    }

    /// Every open sandbox, oldest first.
    pub fn all(&self) -> Vec<Arc<V>> {
        self.order
            .iter()
            .filter_map(|id| self.map.get(id).cloned())
            .collect()
    }

    /// Every open id, oldest first.
    pub fn ids(&self) -> Vec<String> {
        self.order.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_creation_order_through_removals_and_replacements() {
        let mut s = OpenSet::default();
        for (id, v) in [("a", 1), ("b", 2), ("c", 3)] {
            s.insert(id.to_string(), Arc::new(v));
        }
        assert_eq!(s.ids(), ["a", "b", "c"]);
        assert_eq!(s.remove("c").map(|v| *v), Some(3));
        assert_eq!(s.ids(), ["a", "b"]);
        assert!(s.remove("zzz").is_none());
        s.insert("a".into(), Arc::new(10));
        assert_eq!(s.ids(), ["b", "a"], "a replaced id becomes the newest");
        assert_eq!(s.all().iter().map(|v| **v).collect::<Vec<_>>(), [2, 10]);
        assert_eq!(s.len(), 2);
        assert!(s.contains("b") && !s.contains("c"));
    }
}
