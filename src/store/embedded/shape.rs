//! The tree of positions a process keeps of an embedded discussion it posts to.

use std::collections::HashMap;

use mongodb::bson::{Bson, RawArray, RawBsonRef, RawDocument};

use super::*;
use crate::domain::{Closing, Comment, DiscussionId, FullSlug, Slug};
use crate::store::discussions::closing_of;
use crate::store::shared::bson::{as_i64, corrupt};
use crate::store::shared::error::{StoreError, StoreResult};

/// What is known of a discussion document's tree: where each comment sits among its siblings,
/// its full slug, and how many direct replies it has and the latest time among them. Read from
/// the document in one pass; a process also keeps it per discussion between its own posts (see
/// [`Embedded::shapes`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Shape {
    /// The discussion's move count when read (a move makes it stale).
    pub(super) moves: u64,
    /// Whether the discussion was locked when read.
    pub(super) locked: bool,
    /// How it moderated new comments when read (as stored; `None`: the server's default).
    pub(super) moderation: Option<String>,
    /// Its guest policy, as a moderator set it (`None`: the server's default).
    pub(super) guests: Option<String>,
    /// When it closes, as a moderator set it (`None`: the server's default).
    pub(super) closing: Option<Closing>,
    /// The top-level comments.
    pub(super) top: Level,
    pub(super) nodes: HashMap<Slug, Node>,
    /// The bytes the discussion's comments take.
    pub(super) bytes: i64,
}

/// The direct replies of a comment (or the top-level comments).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Level {
    count: usize,
    latest: Option<i64>,
}

#[derive(Debug, Clone)]
pub(super) struct Node {
    index: usize,
    full: FullSlug,
    replies: Level,
}

impl Shape {
    /// Reads the tree of a raw discussion document (its move count is the caller's to set).
    pub(super) fn read(raw: &RawDocument) -> StoreResult<Shape> {
        fn replies_of(node: &RawDocument) -> StoreResult<Option<&RawArray>> {
            match node.get(REPLIES).map_err(corrupt)? {
                None | Some(RawBsonRef::Null) => Ok(None),
                Some(RawBsonRef::Array(items)) => Ok(Some(items)),
                Some(_) => Err(corrupt("replies is not an array")),
            }
        }
        /// Adds the comments of `items` (and below) and returns their level.
        fn level(items: Option<&RawArray>, nodes: &mut HashMap<Slug, Node>) -> StoreResult<Level> {
            let mut level = Level::default();
            for (index, item) in items.into_iter().flatten().enumerate() {
                let RawBsonRef::Document(c) = item.map_err(corrupt)? else {
                    return Err(corrupt("a comment is not a document"));
                };
                let posted = c
                    .get("posted")
                    .map_err(corrupt)?
                    .and_then(|p| as_i64(&Bson::try_from(p).ok()?));
                level.count += 1;
                level.latest = level.latest.max(posted);
                let replies = level_of(c, nodes)?;
                nodes.insert(
                    Slug::from_stored(c.get_str("slug").map_err(corrupt)?.to_owned()),
                    Node {
                        index,
                        full: FullSlug::from_stored(
                            c.get_str("full_slug").map_err(corrupt)?.to_owned(),
                        ),
                        replies,
                    },
                );
            }
            Ok(level)
        }
        fn level_of(node: &RawDocument, nodes: &mut HashMap<Slug, Node>) -> StoreResult<Level> {
            level(replies_of(node)?, nodes)
        }
        let number = |field: &str| -> StoreResult<i64> {
            Ok(raw
                .get(field)
                .map_err(corrupt)?
                .and_then(|b| as_i64(&Bson::try_from(b).ok()?))
                .unwrap_or(0))
        };
        let bytes = number(BYTES)?;
        let moves = u64::try_from(number("moves")?).unwrap_or(0);
        let locked = raw.get_bool("locked").unwrap_or(false);
        let moderation = raw.get_str("moderation").ok().map(str::to_owned);
        let guests = raw.get_str("guests").ok().map(str::to_owned);
        let closes = raw.get("closes").map_err(corrupt)?;
        let closes = closes.map(Bson::try_from).transpose().map_err(corrupt)?;
        let closing = closing_of(closes.as_ref()).map_err(StoreError::Corrupt)?;
        let mut nodes = HashMap::new();
        let top = level_of(raw, &mut nodes)?;
        Ok(Shape {
            moves,
            locked,
            moderation,
            guests,
            closing,
            top,
            nodes,
            bytes,
        })
    }

    /// Where `chain` (a comment's line of descent, top-level first) sits; `None` when a comment
    /// of it is not in the tree.
    pub(super) fn located(&self, chain: &[Slug]) -> Option<Located> {
        let mut path = Vec::with_capacity(chain.len());
        let mut full = Vec::with_capacity(chain.len());
        let mut replies = Vec::with_capacity(chain.len());
        let mut last_child = vec![self.top.latest];
        for slug in chain {
            let node = self.nodes.get(slug)?;
            path.push(node.index);
            full.push(node.full.clone());
            replies.push(node.replies.count);
            last_child.push(node.replies.latest);
        }
        Some(Located {
            path,
            full,
            replies,
            last_child,
            bytes: self.bytes,
        })
    }

    /// Adds a comment this process just stored, `growth` bytes large.
    pub(super) fn add(&mut self, comment: &Comment, growth: i64) {
        let level = match &comment.parent {
            None => Some(&mut self.top),
            Some(parent) => self.nodes.get_mut(parent).map(|n| &mut n.replies),
        };
        let Some(level) = level else {
            return;
        };
        let index = level.count;
        level.count += 1;
        level.latest = level.latest.max(Some(comment.posted.0));
        self.nodes.insert(
            comment.slug.clone(),
            Node {
                index,
                full: comment.full_slug.clone(),
                replies: Level::default(),
            },
        );
        self.bytes = self.bytes.saturating_add(growth);
    }
}

/// The error for a chain whose last comment is not in the discussion.
pub(super) fn missing(id: &DiscussionId, chain: &[Slug]) -> StoreError {
    let slug = chain.last().map_or("", Slug::as_str);
    StoreError::NotFound(format!("no comment {slug} in discussion {id}"))
}

/// The slugs of `slug`'s line of descent, top-level first, `slug` last.
pub(super) fn chain_of(slug: &Slug) -> Vec<Slug> {
    (0..=slug.depth()).map(|d| slug.ancestor_at(d)).collect()
}
