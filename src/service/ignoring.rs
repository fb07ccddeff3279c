//! Ignoring people: a signed-in person's list of authors whose comments they do not want to
//! read (kept in their `people` document; masked per viewer when comments are shown).

use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;

use super::Services;
use crate::domain::{Author, DomainError, UserId};

/// Most people one person may ignore.
pub const MAX_IGNORED: usize = 1_000;

/// How long a process answers from an ignore list it read before reading it again: a change
/// made through this process shows at once, one made through another within this.
pub const IGNORING_KEPT_FOR: Duration = Duration::from_secs(5);

/// Ids the kept lists may hold together (each list weighs its length, plus one).
const KEPT_IDS: u64 = 200_000;

/// The ignore lists this process read lately (every signed-in read of comments needs its
/// viewer's: kept, it costs no command per request).
#[derive(Clone)]
pub(crate) struct IgnoreLists(Cache<String, Arc<[String]>>);

impl IgnoreLists {
    pub(crate) fn new() -> Self {
        Self(
            Cache::builder()
                .max_capacity(KEPT_IDS)
                .weigher(|_: &String, ids: &Arc<[String]>| {
                    u32::try_from(ids.len() + 1).unwrap_or(u32::MAX)
                })
                .time_to_live(IGNORING_KEPT_FOR)
                .build(),
        )
    }

    /// Forgets every list (an erasure pulled an id from many).
    pub(crate) fn forget_all(&self) {
        self.0.invalidate_all();
    }
}

impl Services {
    /// Ignores `target` for `viewer` (`ignored`), or stops ignoring them; answers `ignored`.
    /// Nobody ignores themselves (`BAD_USER_INPUT`) or a moderator (`FORBIDDEN`: someone a
    /// moderator token of that id made a mutation as, the ones `banUser` refuses too); a list
    /// holds [`MAX_IGNORED`] people (`BAD_USER_INPUT` past it). One's own setting: taken as
    /// the identity is, like follows (a ban does not stop it).
    pub async fn ignore_user(
        &self,
        viewer: &Author,
        target: UserId,
        ignored: bool,
    ) -> Result<bool, DomainError> {
        if target.as_str() == viewer.id {
            return Err(DomainError::bad_input("you cannot ignore yourself"));
        }
        if ignored && self.storage.moderation().is_moderator(&target).await? {
            return Err(DomainError::Forbidden(format!(
                "user {target} is a moderator: moderators cannot be ignored"
            )));
        }
        let notifications = self.storage.notifications();
        let done = notifications
            .set_ignoring(&viewer.id, target.as_str(), ignored, MAX_IGNORED)
            .await?;
        self.ignoring.0.invalidate(&viewer.id);
        if !done {
            return Err(DomainError::bad_input(format!(
                "you ignore {MAX_IGNORED} people already, the most one may: stop ignoring one \
                 first (ignoreUser with ignored: false)"
            )));
        }
        Ok(ignored)
    }

    /// The ids `user` ignores, in the order they were added: as this process read them within
    /// [`IGNORING_KEPT_FOR`] (at once after a change through it), else read.
    pub async fn ignored_by(&self, user: &str) -> Result<Arc<[String]>, DomainError> {
        if let Some(ids) = self.ignoring.0.get(user) {
            return Ok(ids);
        }
        let ids: Arc<[String]> = self.storage.notifications().ignoring(user).await?.into();
        self.ignoring.0.insert(user.to_owned(), ids.clone());
        Ok(ids)
    }
}
