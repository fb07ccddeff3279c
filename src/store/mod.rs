//! The storage layer: the `CommentStore` trait, one implementation per layout, and the only code
//! that talks to MongoDB.

mod bucketed;
mod discussions;
pub mod docs;
mod embedded;
pub mod embedded_db;
mod error;
mod metrics;
mod mongo;
mod per_comment;
mod scope;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

pub use discussions::Discussions;
pub use error::{StoreError, StoreResult};
pub use metrics::CommandCounter;
pub use mongo::{Store, StoreConfig};
pub use scope::ReadScope;

pub use crate::domain::tree::Listing;
use crate::domain::{Comment, Discussion, FullSlug, NewComment, Page, Slug, Window};

/// The result of posting a comment.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The stored comment.
    pub comment: Comment,
    /// True when the requested parent was too deep and the comment went to an ancestor.
    pub reattached: bool,
}

/// The comment operations every storage layout provides. Batched reads take many parents or roots
/// at once so that one level of a tree costs one query; `scope` is the per-request cache a layout
/// may use to read a document only once per request.
#[async_trait]
pub trait CommentStore: Send + Sync {
    /// Posts a top-level comment or a reply.
    async fn post_comment(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted>;

    /// One page of the discussion's comments.
    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>>;

    /// One page of a listing when the request reads nothing below the listed comments (no
    /// replies, parents or sub-discussions of them). A layout that can read such a page more
    /// cheaply than a full `list` overrides this; by default it is `list`.
    async fn list_shallow(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        self.list(scope, discussion, listing, window).await
    }

    /// The comments with these slugs (missing ones are left out).
    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Comment>>;

    /// One page of direct replies (oldest first) for each parent.
    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Comment>>>;

    /// One page of all descendants (threaded order) for each root.
    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Comment>>>;

    /// How many descendants each root has.
    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>>;
}

/// A layout implementation as the rest of the program holds it.
pub type DynCommentStore = Arc<dyn CommentStore>;
