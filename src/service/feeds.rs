//! Atom feeds of public comments: a discussion's newest comments (one bounded read of its
//! newest-first list, through the read cache), and the newest across the server (from the event
//! log, then the comments' current state by discussion). Deleted, held and rejected comments,
//! and placeholders, are never in a feed.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::Services;
use crate::domain::atom::{self, Entry, Feed, FEED_ENTRIES};
use crate::domain::tree::Listing;
use crate::domain::{
    Approval, Comment, CursorKind, Discussion, DiscussionId, DiscussionKey, DomainError,
    EventRecord, EventType, Micros, PageArgs, Paging, Slug,
};
use crate::store::ReadScope;

/// The event kinds that make a comment public for the first time: its post, or the approval
/// that published a held comment (`detail` "published").
const PUBLISHING: [EventType; 2] = [EventType::CommentPosted, EventType::CommentApproved];

impl Services {
    /// The feed of the discussion with `key`: its newest [`FEED_ENTRIES`] comments, newest
    /// first, less those deleted, held or rejected (so it may hold fewer: it is one bounded
    /// read of the newest-first list, never a search for more). `self_base` is what goes before
    /// the feed's path in its `self` link (the server's public address, or nothing). `None`
    /// when no discussion has the key. Two reads: the discussion by key and one page of its
    /// comments, each through the read cache when it is on.
    pub async fn discussion_feed(
        &self,
        key: &DiscussionKey,
        self_base: &str,
    ) -> Result<Option<Feed>, DomainError> {
        let keys = std::slice::from_ref(key);
        let Some(discussion) = self.storage.discussions().by_keys(keys).await?.pop() else {
            return Ok(None);
        };
        let first = i32::try_from(FEED_ENTRIES).unwrap_or(i32::MAX);
        let args = PageArgs {
            first: Some(first),
            ..PageArgs::default()
        };
        let paging = Paging::from_args(&args, CursorKind::Newest, FEED_ENTRIES, FEED_ENTRIES)?;
        let page = self
            .storage
            .layout(discussion.layout)?
            .list(
                &ReadScope::new(),
                &discussion,
                Listing::Chronological,
                &paging.window,
            )
            .await?;
        let newest = paging.finish(page).items;
        let mut entries = Vec::with_capacity(newest.len());
        for comment in newest.iter().filter(|c| shown(c)) {
            if let Some(entry) = self.entry(&discussion, comment).await? {
                entries.push(entry);
            }
        }
        Ok(Some(Feed {
            id: atom::discussion_feed_id(&discussion.id),
            title: format!("Comments on {}", discussion.title),
            self_link: format!(
                "{self_base}/feeds/discussion/{}.atom",
                atom::path_segment(key.as_str())
            ),
            alternate: discussion.url.clone(),
            empty_since: discussion.created,
            entries,
        }))
    }

    /// The feed of the newest [`FEED_ENTRIES`] comments published across the server, newest
    /// first, from the event log: one bounded range of its newest `comment.posted` and
    /// `comment.approved` events (of a held comment published), then the comments' current
    /// state, one read of the discussions and one read per discussion of its comments by slug.
    /// Comments deleted, held or rejected since, and those of discussions gone, are left out;
    /// when fewer than [`FEED_ENTRIES`] remain and the range was full, one more range (the
    /// events just before it) is read the same way, and no more: the feed may then hold fewer.
    /// It reaches back as far as the log keeps events (`THREADQL_EVENT_RETENTION_DAYS`).
    pub async fn recent_feed(&self, self_base: &str) -> Result<Feed, DomainError> {
        let mut entries = Vec::new();
        let mut seen = HashSet::new();
        let mut before: Option<String> = None;
        for _ in 0..2 {
            let events = self
                .storage
                .events()
                .latest(&PUBLISHING, before.as_deref(), FEED_ENTRIES)
                .await?;
            let full = events.len() == FEED_ENTRIES;
            before = events.last().map(|e| e.id.clone());
            let wanted: Vec<(DiscussionId, Slug)> = events
                .iter()
                .filter(|e| publishes(e))
                .filter_map(|e| Some((e.discussion.clone()?, e.slug.clone()?)))
                .filter(|key| seen.insert(key.clone()))
                .collect();
            entries.extend(self.current_entries(&wanted).await?);
            if entries.len() >= FEED_ENTRIES || !full {
                break;
            }
        }
        entries.truncate(FEED_ENTRIES);
        Ok(Feed {
            id: atom::RECENT_FEED_ID.to_owned(),
            title: "Recent comments".to_owned(),
            self_link: format!("{self_base}/feeds/recent.atom"),
            alternate: None,
            empty_since: Micros(0),
            entries,
        })
    }

    /// The entries of the comments `wanted`, in its order, as they are now: those still public
    /// in discussions that still exist. One read of the discussions, then one of comments by
    /// slug per discussion, at once.
    async fn current_entries(
        &self,
        wanted: &[(DiscussionId, Slug)],
    ) -> Result<Vec<Entry>, DomainError> {
        let mut by_discussion: BTreeMap<DiscussionId, Vec<Slug>> = BTreeMap::new();
        for (discussion, slug) in wanted {
            by_discussion
                .entry(discussion.clone())
                .or_default()
                .push(slug.clone());
        }
        if by_discussion.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<DiscussionId> = by_discussion.keys().cloned().collect();
        let discussions = self.storage.discussions().by_ids(&ids).await?;
        let reads = discussions.iter().map(|discussion| {
            let slugs = by_discussion
                .get(&discussion.id)
                .cloned()
                .unwrap_or_default();
            async move {
                let scope = ReadScope::new();
                let layout = self.storage.layout(discussion.layout)?;
                let found = layout.by_slugs(&scope, discussion, &slugs).await?;
                Ok::<_, DomainError>((discussion, found))
            }
        });
        let mut current: BTreeMap<(DiscussionId, Slug), (&Discussion, Arc<Comment>)> =
            BTreeMap::new();
        for (discussion, found) in futures::future::try_join_all(reads).await? {
            for comment in found.into_iter().filter(|c| shown(c)) {
                current.insert(
                    (discussion.id.clone(), comment.slug.clone()),
                    (discussion, comment),
                );
            }
        }
        let mut entries = Vec::with_capacity(current.len());
        for key in wanted {
            let Some((discussion, comment)) = current.get(key) else {
                continue;
            };
            if let Some(entry) = self.entry(discussion, comment).await? {
                entries.push(entry);
            }
        }
        Ok(entries)
    }

    /// The entry of a public comment (`None` without text, which a shown comment always has).
    async fn entry(
        &self,
        discussion: &Discussion,
        comment: &Comment,
    ) -> Result<Option<Entry>, DomainError> {
        let Some(html) = self.html_of(discussion, comment, false).await? else {
            return Ok(None);
        };
        let author = match comment.author.name.trim() {
            "" => "[anonymous]".to_owned(),
            name => name.to_owned(),
        };
        Ok(Some(Entry {
            id: atom::entry_id(&discussion.id, &comment.slug),
            title: format!("{author} on {}", discussion.title),
            author,
            published: comment.posted,
            updated: comment.edited.unwrap_or(comment.posted),
            link: discussion
                .url
                .as_deref()
                .map(|page| atom::comment_link(page, &comment.slug)),
            html,
        }))
    }
}

/// Whether a feed shows `comment`: public, not deleted, with its text.
fn shown(comment: &Comment) -> bool {
    comment.standing.is_public() && !comment.deleted && comment.text.is_some()
}

/// Whether an event made its comment public for the first time: a post, or an approval that
/// published a held comment (a restored placeholder or dismissed reports were public before,
/// and are in the feed by their post).
fn publishes(event: &EventRecord) -> bool {
    match event.kind {
        EventType::CommentPosted => true,
        EventType::CommentApproved => event.detail.as_deref() == Some(Approval::Published.as_str()),
        _ => false,
    }
}
