//! `CommentStore`, the trait every layout implements: its reads, and the compare-and-set change
//! of a posted comment.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use mongodb::bson::Bson;

use crate::domain::tree::Listing;
use crate::domain::{Comment, Discussion, Event, FullSlug, Layout, Page, Slug, Window};
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

/// The slugs of `wanted` that `found` does not hold: what a layout's `by_homes` reads by slug
/// after reading the others at their homes.
pub(crate) fn not_at_home<C: std::borrow::Borrow<Comment>>(
    wanted: &[(Slug, Option<Bson>)],
    found: &[C],
) -> Vec<Slug> {
    wanted
        .iter()
        .map(|(slug, _)| slug)
        .filter(|slug| !found.iter().any(|c| &c.borrow().slug == *slug))
        .cloned()
        .collect()
}

/// The comment operations every storage layout provides. Batched reads take many parents or roots
/// at once so that one level of a tree costs one query; `scope` is the per-request cache a layout
/// may use to read a document only once per request.
#[async_trait]
pub trait CommentStore: Send + Sync {
    /// The layout a discussion moves to when a post does not fit in it any more (where the store
    /// is configured to promote), if there is one: the post is then made there.
    fn promotes_to(&self) -> Option<Layout>;

    /// Whether a post may start from the discussion as this process kept it after posting to
    /// it, without reading it first: true when the post's own write checks everything the post
    /// decides by (still unlocked, not moved, moderated as it was). A layout whose posts read
    /// the discussion's counters first keeps nothing.
    fn posts_from_kept(&self) -> bool;

    /// Whether ranked lists of the whole discussion (every comment, or the threads) are ranked
    /// in memory from the whole list, as a layout that reads the whole discussion anyway does,
    /// rather than read page by page from the tallies.
    fn ranks_in_memory(&self) -> bool;

    /// The layout an import keeps a discussion in before its move brings the discussion, with
    /// the imported comments, into this one: another layout, since an import is a move.
    fn import_scratch(&self) -> Layout;

    /// Replaces a comment's changeable fields (text, edit time and editor, revisions, tombstone)
    /// with those of `next`, only if they are still those of `current`. `Ok(false)` means the
    /// comment changed since it was read (read it again and retry, as the change skeleton does). `scope` is
    /// the one `current` was read in (a layout may use what that read saw to find the comment).
    /// `events` are written to the event log with the change (in its transaction), only when
    /// it is made.
    async fn replace(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
        events: &[Event],
    ) -> StoreResult<bool>;

    /// As [`CommentStore::replace`], in the caller's `session` (inside its transaction where
    /// the deployment has them), so that the caller's own writes commit with it or not at all;
    /// `Moving` while a move of the discussion holds it. What a vote writes to the comment's
    /// counters; its change mark is quiet (votes emit no event).
    async fn replace_in(
        &self,
        session: &mut mongodb::ClientSession,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool>;

    /// One page of the discussion's comments.
    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>>;

    /// One page of a listing when the request reads nothing below the listed comments (no
    /// replies, parents or sub-discussions of them). A layout that can read such a page more
    /// cheaply than a full `list` overrides this; by default it is `list`.
    async fn list_shallow(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        self.list(scope, discussion, listing, window).await
    }

    /// The `limit` comments that follow `after` in posting order (from the first without it):
    /// what a move and an export read, page by page.
    async fn posted_after(
        &self,
        discussion: &Discussion,
        after: Option<&Comment>,
        limit: usize,
    ) -> StoreResult<Page<Arc<Comment>>> {
        let cursor = after.map(|c| {
            crate::domain::paging::Cursor::of_comment(
                c,
                crate::domain::paging::CursorKind::Chronological,
            )
        });
        let window = Window::After { cursor, limit };
        self.list(
            &ReadScope::new(),
            discussion,
            Listing::Chronological,
            &window,
        )
        .await
    }

    /// The comments with these slugs (missing ones are left out).
    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Arc<Comment>>>;

    /// Where this request read the comment `slug` (the document that holds it), for a later
    /// [`Self::by_homes`]; `None` when it was not read or the layout has no such thing.
    fn home_of(&self, _scope: &ReadScope, _discussion: &Discussion, _slug: &Slug) -> Option<Bson> {
        None
    }

    /// The comments with these slugs, each with the home [`Self::home_of`] gave for it when it
    /// was read before, if any (missing ones are left out). A home may be out of date (a move
    /// writes new documents): a comment not found there is read by slug.
    async fn by_homes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        wanted: &[(Slug, Option<Bson>)],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let slugs: Vec<Slug> = wanted.iter().map(|(slug, _)| slug.clone()).collect();
        self.by_slugs(scope, discussion, &slugs).await
    }

    /// One page of direct replies (oldest first) for each parent.
    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Arc<Comment>>>>;

    /// One page of all descendants (threaded order) for each root.
    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Arc<Comment>>>>;

    /// How many descendants each root has.
    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>>;
}
