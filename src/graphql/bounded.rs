//! A map bounded in entries and in bytes that drops the least recently used entry first: what
//! the per-process caches of the API (persisted queries, rendered HTML) keep their values in.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Values by key, at most `max_entries` of them and `max_bytes` bytes as their inserter counted
/// them, the least recently used dropped first.
pub(super) struct Bounded<K, V> {
    /// Value, last use and counted bytes, by key.
    entries: HashMap<K, (V, u64, usize)>,
    /// Keys by last use, oldest first.
    order: BTreeMap<u64, K>,
    /// Uses so far: the clock of `order`.
    clock: u64,
    /// Bytes kept.
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Bounded<K, V> {
    /// An empty map of at most `max_entries` entries (at least one) and `max_bytes` bytes.
    pub(super) fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            max_entries: max_entries.max(1),
            max_bytes,
        }
    }

    /// The value under `key`, which becomes the most recently used.
    pub(super) fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        let (value, used, _) = self.entries.get_mut(key)?;
        let previous = std::mem::replace(used, clock);
        let value = value.clone();
        if let Some(key) = self.order.remove(&previous) {
            self.order.insert(clock, key);
        }
        Some(value)
    }

    /// Keeps `value` under `key`, counted as `bytes`, dropping the least recently used entries
    /// until it fits. A value larger than the whole bound is not kept (and drops nothing); a key
    /// already kept keeps its value and becomes the most recently used.
    pub(super) fn insert(&mut self, key: K, value: V, bytes: usize) {
        if bytes > self.max_bytes || self.get(&key).is_some() {
            return;
        }
        while self.entries.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, _, size)) = self.entries.remove(&oldest) {
                self.bytes -= size;
            }
        }
        self.clock += 1;
        self.order.insert(self.clock, key.clone());
        self.entries.insert(key, (value, self.clock, bytes));
        self.bytes += bytes;
    }

    /// Bytes kept.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The keys, least recently used first.
    #[cfg(test)]
    pub(super) fn keys_by_use(&self) -> Vec<K> {
        self.order.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_past_either_bound() {
        let mut kept = Bounded::new(10, 300);
        for key in ["a", "b", "c"] {
            kept.insert(key, key.len(), 100);
        }
        assert_eq!(kept.keys_by_use(), ["a", "b", "c"]);
        assert_eq!(kept.get(&"a"), Some(1));
        kept.insert("d", 1, 100);
        assert_eq!(kept.keys_by_use(), ["c", "a", "d"]);
        assert_eq!(kept.bytes(), 300);
        assert_eq!(kept.get(&"b"), None);
        // Too large to keep at all: nothing is dropped for it.
        kept.insert("e", 1, 301);
        assert_eq!(kept.keys_by_use(), ["c", "a", "d"]);
        // A key kept already keeps its value.
        kept.insert("c", 7, 100);
        assert_eq!(kept.get(&"c"), Some(1));
        assert_eq!(kept.bytes(), 300);
        // Bounded in entries too.
        let mut kept = Bounded::new(2, usize::MAX);
        for key in ["a", "b", "c"] {
            kept.insert(key, (), 1);
        }
        assert_eq!(kept.keys_by_use(), ["b", "c"]);
    }
}
