//! `ReadScope`: a per-request memo so a layout can read a document once per request.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

type Slot = Arc<dyn Any + Send + Sync>;

/// A per-request cache of loaded documents, keyed by a string the layout chooses. Concurrent
/// callers asking for the same key share one load.
#[derive(Default)]
pub struct ReadScope {
    slots: Mutex<HashMap<String, Slot>>,
}

impl ReadScope {
    /// A fresh, empty scope (one per request).
    pub fn new() -> Self {
        Self::default()
    }

    /// The value under `key`, loading it with `load` the first time it is asked for.
    pub async fn get_or_load<T, E, F, Fut>(&self, key: &str, load: F) -> Result<Arc<T>, E>
    where
        T: Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let cell: Arc<OnceCell<Arc<T>>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let slot = slots
                .entry(key.to_owned())
                .or_insert_with(|| Arc::new(OnceCell::<Arc<T>>::new()) as Slot)
                .clone();
            match slot.downcast::<OnceCell<Arc<T>>>() {
                Ok(cell) => cell,
                Err(_) => Arc::new(OnceCell::new()),
            }
        };
        cell.get_or_try_init(|| async { load().await.map(Arc::new) })
            .await
            .cloned()
    }

    /// The value under `key` if it was loaded already in this request (never loads).
    pub fn peek<T: Send + Sync + 'static>(&self, key: &str) -> Option<Arc<T>> {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()?;
        slot.downcast::<OnceCell<Arc<T>>>().ok()?.get().cloned()
    }

    /// Forgets everything (after a write in the same request).
    pub fn clear(&self) {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
