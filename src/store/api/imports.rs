//! `ImportStore`: bringing comments in with their own times and slugs, and the record of what
//! was brought in.

use std::collections::HashSet;

use async_trait::async_trait;

use super::{Moved, Step};
use crate::domain::{Comment, DiscussionId, Layout, Slug};
use crate::store::shared::error::StoreResult;

/// Imports: moves that add comments, and the record of the source ids imported.
#[async_trait]
pub trait ImportStore: Send + Sync {
    /// Moves discussion `id` to layout `to`, another than its own, as
    /// [`super::MoveStore::migrate`] does, and adds on the way the comments of `adding` whose
    /// slugs it does not hold: an import of comments with their original times and slugs, which
    /// posts cannot make (a post takes the current time). The discussion's numbers, counts and
    /// pages come out as if every comment had been posted in time order; posts made meanwhile
    /// wait for the move and are kept. Run again after an interruption, it adds nothing twice.
    async fn import(
        &self,
        id: &DiscussionId,
        to: Layout,
        adding: &[Comment],
        report: &(dyn Fn(Step) + Send + Sync),
    ) -> StoreResult<Moved>;

    /// The layout an import keeps a discussion in before its move brings it into `layout` with
    /// the imported comments (see [`super::CommentStore::import_scratch`]).
    fn import_scratch(&self, layout: Layout) -> Layout;

    /// The source ids of the comments imported into the discussion (see
    /// [`ImportStore::record_imported`]).
    async fn imported(&self, id: &DiscussionId) -> StoreResult<HashSet<String>>;

    /// Records that the comments with these source ids (e.g. `disqus:1234`) were imported into
    /// the discussion, with their slugs; recording one again changes nothing.
    async fn record_imported(
        &self,
        id: &DiscussionId,
        entries: &[(String, Slug)],
    ) -> StoreResult<()>;
}
