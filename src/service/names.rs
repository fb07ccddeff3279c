//! Reserved display names: moderators reserve and release them (logged), and every signed-in
//! request is checked against this process's copy of them, never against the database. The
//! process that writes a reservation updates its copy at once; every process reads the whole
//! list again every [`NAMES_REFRESH`], so a reservation made elsewhere applies within that.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use super::{acted, Caller, Services};
use crate::domain::names::{reserved_refusal, PLACEHOLDER_NAMES};
use crate::domain::{name_key, DisplayName, DomainError, Event, Reason, ReservedName};
use crate::store::DynStorage;

/// How often a process reads the reserved names again.
pub const NAMES_REFRESH: Duration = Duration::from_secs(5);

/// The most names that may be reserved at once (each process keeps them all).
pub const MAX_RESERVED_NAMES: u64 = 10_000;

/// This process's copy of the reserved names, by name key (cloning shares it).
#[derive(Clone)]
pub(super) struct NameCopy {
    inner: Arc<Copied>,
}

struct Copied {
    storage: DynStorage,
    keys: RwLock<HashSet<String>>,
    /// Bumped by every local change: a read of the list that began before one is dropped.
    generation: AtomicU64,
    /// Whether the task that reads the list again is running.
    ticking: AtomicBool,
}

impl NameCopy {
    pub(super) fn new(storage: DynStorage) -> Self {
        Self {
            inner: Arc::new(Copied {
                storage,
                keys: RwLock::default(),
                generation: AtomicU64::new(0),
                ticking: AtomicBool::new(false),
            }),
        }
    }

    /// Whether the name's key is reserved in this copy; starts the refresh task on first use.
    fn holds(&self, key: &str) -> bool {
        self.start_ticking();
        self.inner
            .keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
    }

    /// Changes the copy at once (this process wrote the change).
    fn set(&self, key: String, reserved: bool) {
        let mut keys = self.inner.keys.write().unwrap_or_else(|p| p.into_inner());
        self.inner.generation.fetch_add(1, Ordering::SeqCst);
        match reserved {
            true => keys.insert(key),
            false => keys.remove(&key),
        };
    }

    /// Reads the whole list into the copy.
    async fn refresh(&self) -> Result<(), DomainError> {
        refresh(&self.inner).await
    }

    /// Starts the task that reads the list every [`NAMES_REFRESH`] (once, inside a runtime);
    /// it ends when the last handle on the copy is dropped.
    fn start_ticking(&self) {
        if self.inner.ticking.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.ticking.store(false, Ordering::SeqCst);
            return;
        };
        let weak: Weak<Copied> = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(NAMES_REFRESH).await;
                let Some(inner) = weak.upgrade() else { break };
                if let Err(err) = refresh(&inner).await {
                    tracing::warn!(error = %err, "could not read the reserved names again");
                }
            }
        });
    }
}

async fn refresh(inner: &Copied) -> Result<(), DomainError> {
    let began = inner.generation.load(Ordering::SeqCst);
    let all = inner.storage.names().poll(MAX_RESERVED_NAMES).await?;
    let keys: HashSet<String> = all.iter().map(|r| r.name.key()).collect();
    let mut kept = inner.keys.write().unwrap_or_else(|p| p.into_inner());
    if inner.generation.load(Ordering::SeqCst) == began {
        *kept = keys;
    }
    Ok(())
}

impl Services {
    /// Why a signed-in identity's name may not be used, if a moderator reserved it: checked
    /// against this process's copy (no database command). Names the API shows in place of
    /// authors are refused by the token check itself.
    pub fn name_refusal(&self, name: &str) -> Option<String> {
        self.names
            .holds(&name_key(name))
            .then(|| reserved_refusal(name))
    }

    /// Reads the reserved names into this process's copy (at start: afterwards it is read
    /// again every [`NAMES_REFRESH`]).
    pub async fn load_reserved_names(&self) -> Result<(), DomainError> {
        self.names.refresh().await
    }

    /// Reserves a display name: from now on no token may carry it (nor any spelling with the
    /// same name key), also one a user carries now. Reserving a reserved name replaces its
    /// reason. At most [`MAX_RESERVED_NAMES`]. Moderators only; logged.
    pub async fn reserve_name(
        &self,
        caller: &Caller,
        name: DisplayName,
        reason: Option<Reason>,
    ) -> Result<ReservedName, DomainError> {
        caller.must_moderate()?;
        if PLACEHOLDER_NAMES.iter().any(|p| name_key(p) == name.key()) {
            return Err(DomainError::bad_input(format!(
                "{:?} is always reserved: the API shows it in place of hidden authors",
                name.as_str()
            )));
        }
        let acted = acted(caller);
        let reserved = ReservedName {
            name,
            reason,
            by: caller.author().clone(),
            at: acted.at,
        };
        let storage = self.storage.clone();
        let copy = self.names.clone();
        let write = async move {
            let names = storage.names();
            let key = reserved.name.key();
            if names.count().await? >= MAX_RESERVED_NAMES
                && !names
                    .all(MAX_RESERVED_NAMES)
                    .await?
                    .iter()
                    .any(|r| r.name.key() == key)
            {
                return Err(DomainError::bad_input(format!(
                    "at most {MAX_RESERVED_NAMES} names may be reserved: release some first"
                )));
            }
            let events = vec![Event::NameReserved {
                acted,
                name: reserved.name.clone(),
                reason: reserved.reason.clone(),
            }];
            names.reserve(&reserved, &events).await?;
            copy.set(key, true);
            Ok((reserved, events))
        };
        let span = tracing::debug_span!("store.reserveName");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Releases a reserved name (any spelling with its name key): true when it was reserved,
    /// false when not, which changes nothing. Moderators only; logged when it was reserved.
    pub async fn release_name(&self, caller: &Caller, name: &str) -> Result<bool, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let copy = self.names.clone();
        let acted = acted(caller);
        let key = name_key(name);
        let write = async move {
            let announce = |reserved: &ReservedName| {
                vec![Event::NameReleased {
                    acted: acted.clone(),
                    name: reserved.name.clone(),
                }]
            };
            let removed = storage.names().release(&key, &announce).await?;
            copy.set(key, false);
            let events = removed.iter().flat_map(announce).collect();
            Ok((removed.is_some(), events))
        };
        let span = tracing::debug_span!("store.releaseName");
        Ok(self.run(caller, span, write).await?.value)
    }
}
