//! `NotificationStore`: people's inboxes, the discussions they follow, their settings and
//! addresses, and the two background workers' claims (the fan-out off the event log, the mail).

use std::collections::HashSet;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::domain::notifications::{Notification, NotificationSettings};
use crate::domain::{DiscussionId, EventRecord, Micros};
use crate::store::shared::error::StoreResult;

/// One person, as far as notifications go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Person {
    /// Their user id.
    pub id: String,
    /// Their latest verified address.
    pub address: Option<String>,
    /// What they set (`None`: the site's defaults).
    pub settings: Option<NotificationSettings>,
    /// When their next message is due.
    pub mail_due: Option<Micros>,
    /// When they were last mailed.
    pub last_mailed: Option<Micros>,
    /// Failed tries of the message now due.
    pub mail_tries: u32,
}

/// A page of the discussions a person follows: each with the key that pages on from it.
pub type Following = Vec<(String, DiscussionId)>;

/// Inboxes, follows, settings, and the workers' claims.
#[async_trait]
pub trait NotificationStore: Send + Sync {
    /// `recipient`'s notifications newest first, before the id `before` (all when `None`), only
    /// unread ones with `unread_only`, at most `limit`: one range of `{recipient, _id}` (of
    /// `{recipient, read, _id}` for unread ones).
    async fn inbox(
        &self,
        recipient: &str,
        before: Option<&str>,
        unread_only: bool,
        limit: usize,
    ) -> StoreResult<Vec<Notification>>;

    /// How many of `recipient`'s notifications are unread: a count of one index range.
    async fn unread_count(&self, recipient: &str) -> StoreResult<u64>;

    /// Marks `recipient`'s unread notifications read, those up to the id `up_to` (every one
    /// when `None`); how many changed.
    async fn mark_read(&self, recipient: &str, up_to: Option<&str>) -> StoreResult<u64>;

    /// Follows (`true`) or unfollows `discussion` for `user`, at `at`; whether that changed it.
    async fn follow(
        &self,
        user: &str,
        discussion: &DiscussionId,
        follow: bool,
        at: Micros,
    ) -> StoreResult<bool>;

    /// Which of `discussions` `user` follows.
    async fn follows(
        &self,
        user: &str,
        discussions: &[DiscussionId],
    ) -> StoreResult<HashSet<DiscussionId>>;

    /// The discussions `user` follows, latest followed first, after the key `after`, at most
    /// `limit`.
    async fn following(
        &self,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Following>;

    /// How many discussions `user` follows (a count of one index range).
    async fn following_count(&self, user: &str) -> StoreResult<u64>;

    /// The followers of `discussion` who followed it by `by`, after the user `after` (by id),
    /// at most `limit` (fewer than `limit` only at the end).
    async fn followers(
        &self,
        discussion: &DiscussionId,
        by: Micros,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>>;

    /// The person `user` (`None`: they never set anything nor had an address).
    async fn person(&self, user: &str) -> StoreResult<Option<Person>>;

    /// The ids `user` ignores, in the order they were added (none without a `people`
    /// document): one read by `_id`.
    async fn ignoring(&self, user: &str) -> StoreResult<Vec<String>>;

    /// Adds `target` to the ids `user` ignores (`ignored`), or takes it out, in one update of
    /// their `people` document (`ignoring`, indexed); a list holds at most `cap` ids: adding
    /// one more to a full one changes nothing and answers `false`.
    async fn set_ignoring(
        &self,
        user: &str,
        target: &str,
        ignored: bool,
        cap: usize,
    ) -> StoreResult<bool>;

    /// Stores `user`'s settings.
    async fn set_settings(&self, user: &str, settings: &NotificationSettings) -> StoreResult<()>;

    /// Keeps `address` as `user`'s verified address, unless it is the one kept already.
    async fn remember_address(&self, user: &str, address: &str) -> StoreResult<()>;

    /// Of `users`, those with an address (the ones mail can reach), in batches of the index.
    async fn with_address(&self, users: &[String]) -> StoreResult<Vec<Person>>;

    /// Claims up to `limit` events whose notifications are due at `now`, for `token` until
    /// `until`: a claim that runs out is taken again (by any replica).
    async fn claim_events(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<EventRecord>>;

    /// Stores `notifications`; one stored already (the same id, or one comment's second
    /// notice to a person) is left as it is. How many were new.
    async fn insert(&self, notifications: &[Notification]) -> StoreResult<u64>;

    /// Ends the fan-out of the events `ids` that `token` still holds.
    async fn finish_events(&self, ids: &[String], token: &str) -> StoreResult<()>;

    /// Makes `user`'s next message due at `due` at the latest.
    async fn mail_due(&self, user: &str, due: Micros) -> StoreResult<()>;

    /// Claims up to `limit` people whose message is due at `now`, until `until`.
    async fn claim_mail(
        &self,
        now: Micros,
        until: Micros,
        limit: usize,
    ) -> StoreResult<Vec<Person>>;

    /// `user`'s unread notifications not mailed yet, oldest first, at most `limit`.
    async fn unmailed(&self, user: &str, limit: usize) -> StoreResult<Vec<Notification>>;

    /// Records a message to `user` sent at `at` (`None`: none was sent: nothing to say, or
    /// given up) holding `ids`: those count as mailed, and the person's message, claimed until
    /// `claimed`, is no longer due (unless a notification made it due again meanwhile).
    async fn mailed(
        &self,
        user: &str,
        ids: &[String],
        at: Option<Micros>,
        claimed: Micros,
    ) -> StoreResult<()>;

    /// Records a failed try of `user`'s message: due again at `retry`.
    async fn mail_failed(&self, user: &str, tries: u32, retry: Micros) -> StoreResult<()>;

    /// Every notification stored from now on, as it is stored (on any replica).
    fn received(&self) -> BoxStream<'static, Notification>;
}
