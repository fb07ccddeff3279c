//! What one request has read: its dataloaders and the store's read scope, forgotten at once
//! after a write.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;
use tracing::Instrument as _;

use super::*;
use crate::store::{DynStorage, ReadScope};

/// What one request has read: its dataloader (with its cache) and the store's read scope.
pub struct Reads {
    /// The request's dataloader.
    pub loader: loaders::Loaders,
    /// The store's per-request memo, which the loader shares.
    pub scope: Arc<ReadScope>,
    /// The ids the signed-in viewer ignores, read on first use.
    ignoring: OnceCell<Arc<HashSet<String>>>,
}

impl Reads {
    /// The ids `viewer` ignores, the first time a field needs them in this request (again
    /// after a write): from the process's recent lists, else one read of their `people`
    /// document; never for anonymous readers.
    pub async fn ignoring(
        &self,
        services: &crate::service::Services,
        viewer: &str,
    ) -> Result<Arc<HashSet<String>>, DomainError> {
        let read = || async {
            let ids = services
                .ignored_by(viewer)
                .instrument(tracing::debug_span!("store.ignoring"))
                .await?;
            Ok::<_, DomainError>(Arc::new(ids.iter().cloned().collect()))
        };
        self.ignoring.get_or_try_init(read).await.cloned()
    }
}

/// The reads of one request, forgotten all at once after a write.
pub struct RequestReads {
    storage: DynStorage,
    batches: Arc<batch::Batches>,
    current: Mutex<Arc<Reads>>,
}

impl RequestReads {
    pub(super) fn new(storage: DynStorage, batches: Arc<batch::Batches>) -> Self {
        let current = Mutex::new(Self::fresh(&storage, &batches));
        Self {
            storage,
            batches,
            current,
        }
    }

    fn fresh(storage: &DynStorage, batches: &Arc<batch::Batches>) -> Arc<Reads> {
        let scope = Arc::new(ReadScope::new());
        Arc::new(Reads {
            loader: loaders::request_loaders(storage.clone(), scope.clone(), batches.clone()),
            scope,
            ignoring: OnceCell::new(),
        })
    }

    /// The reads in effect now.
    pub fn current(&self) -> Arc<Reads> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Forgets everything read so far (after a write, so later fields see it): the loader and
    /// the scope are replaced, so no cache can be left behind.
    pub fn invalidate(&self) {
        let fresh = Self::fresh(&self.storage, &self.batches);
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
    }
}
