//! Dataloaders: batch the reads of one request so that one tree level costs one query. Each
//! batch has a `store.*` span (for traces) with the number of keys it loads.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};

use crate::domain::{
    Comment, Discussion, DiscussionId, DiscussionKey, DomainError, FullSlug, Page, Slug, Vote,
    Window,
};
use crate::store::{DynStorage, ReadScope, Report};

/// A loaded discussion, compared and hashed by id.
#[derive(Debug, Clone)]
pub struct DiscussionRef(pub Arc<Discussion>);

impl PartialEq for DiscussionRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}
impl Eq for DiscussionRef {}
impl Hash for DiscussionRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id.hash(state);
    }
}

/// A comment by slug (direct links, parents).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommentKey {
    /// Its discussion.
    pub discussion: DiscussionRef,
    /// Its slug.
    pub slug: Slug,
}

/// A page of a comment's direct replies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepliesKey {
    /// Its discussion.
    pub discussion: DiscussionRef,
    /// The parent.
    pub parent: Slug,
    /// The page.
    pub window: Window,
}

/// A page of a comment's sub-discussion.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubDiscussionKey {
    /// Its discussion.
    pub discussion: DiscussionRef,
    /// The root comment.
    pub root: FullSlug,
    /// The page.
    pub window: Window,
}

/// The size of a comment's sub-discussion.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubDiscussionCountKey {
    /// Its discussion.
    pub discussion: DiscussionRef,
    /// The root comment.
    pub root: FullSlug,
}

/// A user's vote on a comment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewerVoteKey {
    /// The voter (a token's `sub`).
    pub voter: String,
    /// The comment's discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
}

/// Whether a user follows a discussion.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewerFollowKey {
    /// The follower (a token's `sub`).
    pub user: String,
    /// The discussion.
    pub discussion: DiscussionId,
}

/// A comment's reports, for moderators.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReportsKey {
    /// Its discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
}

/// Reports a comment shows at most.
pub const REPORTS_SHOWN: usize = 20;

/// Loads everything a request reads, batched by key type, discussion and window.
pub struct StoreLoader {
    store: DynStorage,
    scope: Arc<ReadScope>,
}

/// The request's dataloader.
pub type Loaders = DataLoader<StoreLoader, HashMapCache>;

/// A fresh dataloader (and read scope) for one request; its batches run from `batches` (see
/// [`super::batch::drive`]), with no timer.
pub fn request_loaders(
    store: DynStorage,
    scope: Arc<ReadScope>,
    batches: Arc<super::batch::Batches>,
) -> Loaders {
    DataLoader::with_cache(
        StoreLoader { store, scope },
        move |batch| batches.spawn(batch),
        HashMapCache::default(),
    )
    .delay(std::time::Duration::ZERO)
}

/// Groups keys by something they share, keeping each group's keys in order.
fn group_by<K, G: Eq + Hash + Clone>(keys: &[K], group: impl Fn(&K) -> G) -> Vec<(G, Vec<&K>)> {
    let mut order: Vec<G> = Vec::new();
    let mut groups: HashMap<G, Vec<&K>> = HashMap::new();
    for key in keys {
        let g = group(key);
        groups
            .entry(g.clone())
            .or_insert_with(|| {
                order.push(g.clone());
                Vec::new()
            })
            .push(key);
    }
    order
        .into_iter()
        .filter_map(|g| groups.remove(&g).map(|ks| (g, ks)))
        .collect()
}

impl Loader<DiscussionId> for StoreLoader {
    type Value = Arc<Discussion>;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.discussions", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[DiscussionId],
    ) -> Result<HashMap<DiscussionId, Self::Value>, Self::Error> {
        let found = self.store.discussions().by_ids(keys).await?;
        Ok(found
            .into_iter()
            .map(|d| (d.id.clone(), Arc::new(d)))
            .collect())
    }
}

/// Discussions by the host page's key: one command for every key a request level asks for
/// (`discussionsByKeys`, `discussionByKey`, `_entities` by key).
impl Loader<DiscussionKey> for StoreLoader {
    type Value = Arc<Discussion>;
    type Error = DomainError;

    async fn load(
        &self,
        keys: &[DiscussionKey],
    ) -> Result<HashMap<DiscussionKey, Self::Value>, Self::Error> {
        let found = self.store.discussions().by_keys(keys).await?;
        Ok(found
            .into_iter()
            .filter_map(|d| Some((d.key.clone()?, Arc::new(d))))
            .collect())
    }
}

impl Loader<CommentKey> for StoreLoader {
    type Value = Arc<Comment>;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.comments", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[CommentKey],
    ) -> Result<HashMap<CommentKey, Arc<Comment>>, DomainError> {
        let mut out = HashMap::new();
        for (discussion, group) in group_by(keys, |k| k.discussion.clone()) {
            let slugs: Vec<Slug> = group.iter().map(|k| k.slug.clone()).collect();
            let layout = self.store.layout(discussion.0.layout)?;
            for comment in layout.by_slugs(&self.scope, &discussion.0, &slugs).await? {
                out.insert(
                    CommentKey {
                        discussion: discussion.clone(),
                        slug: comment.slug.clone(),
                    },
                    comment,
                );
            }
        }
        Ok(out)
    }
}

impl Loader<RepliesKey> for StoreLoader {
    type Value = Page<Arc<Comment>>;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.replies", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[RepliesKey],
    ) -> Result<HashMap<RepliesKey, Page<Arc<Comment>>>, DomainError> {
        let mut out = HashMap::new();
        for ((discussion, window), group) in
            group_by(keys, |k| (k.discussion.clone(), k.window.clone()))
        {
            let parents: Vec<Slug> = group.iter().map(|k| k.parent.clone()).collect();
            let layout = self.store.layout(discussion.0.layout)?;
            let pages = layout
                .replies(&self.scope, &discussion.0, &parents, &window)
                .await?;
            for (parent, page) in pages {
                out.insert(
                    RepliesKey {
                        discussion: discussion.clone(),
                        parent,
                        window: window.clone(),
                    },
                    page,
                );
            }
        }
        Ok(out)
    }
}

impl Loader<SubDiscussionKey> for StoreLoader {
    type Value = Page<Arc<Comment>>;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.subDiscussions", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[SubDiscussionKey],
    ) -> Result<HashMap<SubDiscussionKey, Page<Arc<Comment>>>, DomainError> {
        let mut out = HashMap::new();
        for ((discussion, window), group) in
            group_by(keys, |k| (k.discussion.clone(), k.window.clone()))
        {
            let roots: Vec<FullSlug> = group.iter().map(|k| k.root.clone()).collect();
            let layout = self.store.layout(discussion.0.layout)?;
            let pages = layout
                .sub_discussions(&self.scope, &discussion.0, &roots, &window)
                .await?;
            for (root, page) in pages {
                out.insert(
                    SubDiscussionKey {
                        discussion: discussion.clone(),
                        root,
                        window: window.clone(),
                    },
                    page,
                );
            }
        }
        Ok(out)
    }
}

impl Loader<SubDiscussionCountKey> for StoreLoader {
    type Value = u64;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.subDiscussionCounts", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[SubDiscussionCountKey],
    ) -> Result<HashMap<SubDiscussionCountKey, u64>, DomainError> {
        let mut out = HashMap::new();
        for (discussion, group) in group_by(keys, |k| k.discussion.clone()) {
            let roots: Vec<FullSlug> = group.iter().map(|k| k.root.clone()).collect();
            let layout = self.store.layout(discussion.0.layout)?;
            let counts = layout
                .sub_discussion_counts(&self.scope, &discussion.0, &roots)
                .await?;
            for (root, n) in counts {
                out.insert(
                    SubDiscussionCountKey {
                        discussion: discussion.clone(),
                        root,
                    },
                    n,
                );
            }
        }
        Ok(out)
    }
}

/// The viewer's votes: one command for every comment a request level shows, whatever their
/// discussions.
impl Loader<ViewerVoteKey> for StoreLoader {
    type Value = Vote;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.viewerVotes", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[ViewerVoteKey],
    ) -> Result<HashMap<ViewerVoteKey, Vote>, DomainError> {
        let mut out = HashMap::new();
        for (voter, group) in group_by(keys, |k| k.voter.clone()) {
            let comments: Vec<(DiscussionId, Slug)> = group
                .iter()
                .map(|k| (k.discussion.clone(), k.slug.clone()))
                .collect();
            for ((discussion, slug), vote) in self.store.votes().votes_of(&voter, &comments).await?
            {
                out.insert(
                    ViewerVoteKey {
                        voter: voter.clone(),
                        discussion,
                        slug,
                    },
                    vote,
                );
            }
        }
        Ok(out)
    }
}

/// The viewer's follows: one command for every discussion a request level shows (a discussion
/// not followed has no value).
impl Loader<ViewerFollowKey> for StoreLoader {
    type Value = ();
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.viewerFollows", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[ViewerFollowKey],
    ) -> Result<HashMap<ViewerFollowKey, ()>, DomainError> {
        let mut out = HashMap::new();
        for (user, group) in group_by(keys, |k| k.user.clone()) {
            let discussions: Vec<DiscussionId> =
                group.iter().map(|k| k.discussion.clone()).collect();
            for discussion in self
                .store
                .notifications()
                .follows(&user, &discussions)
                .await?
            {
                out.insert(
                    ViewerFollowKey {
                        user: user.clone(),
                        discussion,
                    },
                    (),
                );
            }
        }
        Ok(out)
    }
}

/// The reports of every comment a request level shows, in one command (at most
/// [`REPORTS_SHOWN`] each, oldest first; a comment without reports has no value).
impl Loader<ReportsKey> for StoreLoader {
    type Value = Vec<Report>;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.reports", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[ReportsKey],
    ) -> Result<HashMap<ReportsKey, Vec<Report>>, DomainError> {
        let comments: Vec<(DiscussionId, Slug)> = keys
            .iter()
            .map(|k| (k.discussion.clone(), k.slug.clone()))
            .collect();
        let mut out: HashMap<ReportsKey, Vec<Report>> = HashMap::new();
        for report in self
            .store
            .held()
            .reports_of(&comments, REPORTS_SHOWN)
            .await?
        {
            let key = ReportsKey {
                discussion: report.discussion.clone(),
                slug: report.slug.clone(),
            };
            out.entry(key).or_default().push(report);
        }
        Ok(out)
    }
}

/// A guest whose details moderators see (`Comment.guestDetails`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GuestKey(pub String);

/// What is kept of every guest a request level shows, in one command.
impl Loader<GuestKey> for StoreLoader {
    type Value = crate::domain::GuestDetails;
    type Error = DomainError;

    #[tracing::instrument(level = "debug", name = "store.guestDetails", skip_all, fields(store.keys = keys.len()))]
    async fn load(
        &self,
        keys: &[GuestKey],
    ) -> Result<HashMap<GuestKey, crate::domain::GuestDetails>, DomainError> {
        let ids: Vec<String> = keys.iter().map(|k| k.0.clone()).collect();
        let found = self.store.guests().details_of(&ids).await?;
        Ok(found.into_iter().map(|(id, d)| (GuestKey(id), d)).collect())
    }
}
