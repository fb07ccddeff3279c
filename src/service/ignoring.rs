//! Ignoring people: a signed-in person's list of authors whose comments they do not want to
//! read (kept in their `people` document; masked per viewer when comments are shown).

use super::Services;
use crate::domain::{Author, DomainError, UserId};

/// Most people one person may ignore.
pub const MAX_IGNORED: usize = 1_000;

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
        if !done {
            return Err(DomainError::bad_input(format!(
                "you ignore {MAX_IGNORED} people already, the most one may: stop ignoring one \
                 first (ignoreUser with ignored: false)"
            )));
        }
        Ok(ignored)
    }

    /// The ids `user` ignores, in the order they were added.
    pub async fn ignored_by(&self, user: &str) -> Result<Vec<String>, DomainError> {
        Ok(self.storage.notifications().ignoring(user).await?)
    }
}
