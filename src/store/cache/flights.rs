//! Single-flight refills: of the concurrent misses of one cache key, one (the leader) reads the
//! database and the others wait for what it read. A leader that fails or is dropped hands its
//! waiters nothing, and they read for themselves.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use tokio::sync::watch;

/// What a flight hands its waiters: nothing yet, then what the leader read (`None`: nothing,
/// read for yourself).
type Landing<V> = Option<Option<V>>;

/// The refills in flight, by key.
pub(super) struct Flights<K, V> {
    inflight: Mutex<HashMap<K, watch::Receiver<Landing<V>>>>,
}

/// A caller's part in the refill of a key.
pub(super) enum Flight<'a, K: Hash + Eq + Clone, V: Clone> {
    /// This caller reads, and hands what it read to the others with [`Lead::land`].
    Lead(Lead<'a, K, V>),
    /// Another caller reads: [`wait`] for it.
    Wait(watch::Receiver<Landing<V>>),
}

/// The leader of a flight. Dropped without landing, it hands its waiters nothing.
pub(super) struct Lead<'a, K: Hash + Eq + Clone, V: Clone> {
    flights: &'a Flights<K, V>,
    key: K,
    landing: watch::Sender<Landing<V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Flights<K, V> {
    pub(super) fn new() -> Self {
        Self {
            inflight: Mutex::new(HashMap::new()),
        }
    }

    /// Joins the refill of `key`: leads it when none is in flight, else waits for it.
    pub(super) fn join(&self, key: &K) -> Flight<'_, K, V> {
        let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(waiting) = inflight.get(key) {
            return Flight::Wait(waiting.clone());
        }
        let (landing, waiting) = watch::channel(None);
        inflight.insert(key.clone(), waiting);
        Flight::Lead(Lead {
            flights: self,
            key: key.clone(),
            landing,
        })
    }

    /// How many refills are in flight.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Lead<'_, K, V> {
    /// The key this flight refills.
    pub(super) fn key(&self) -> &K {
        &self.key
    }

    /// Hands `value` to the waiters (store it first, so that a caller arriving once the flight
    /// has ended finds it stored).
    pub(super) fn land(self, value: V) {
        self.landing.send_replace(Some(Some(value)));
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Drop for Lead<'_, K, V> {
    fn drop(&mut self) {
        let mut inflight = self
            .flights
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        inflight.remove(&self.key);
        drop(inflight);
        // Not landed (failed, or dropped mid-read): the waiters read for themselves.
        self.landing.send_if_modified(|landing| {
            let unset = landing.is_none();
            if unset {
                *landing = Some(None);
            }
            unset
        });
    }
}

/// What the leader of the flight `waiting` read; `None` when it read nothing.
pub(super) async fn wait<V: Clone>(mut waiting: watch::Receiver<Landing<V>>) -> Option<V> {
    match waiting.wait_for(Option::is_some).await {
        Ok(landed) => landed.clone().flatten(),
        Err(_) => None,
    }
}
