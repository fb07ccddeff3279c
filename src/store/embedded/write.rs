//! Posting: the embedded steps of the post skeleton (one guarded positional `$push` per group).

use async_trait::async_trait;
use mongodb::bson::{doc, to_document, Bson};
use mongodb::ClientSession;

use super::authored;
use super::shape::{chain_of, missing};
use super::*;
use crate::domain::{Comment, Discussion, DiscussionId, Micros, Slug, SlugPart};
use crate::store::api::ChangeKind;
use crate::store::changes;
use crate::store::discussions::open_for_posts;
use crate::store::shared::bson::{as_i64, corrupt};
use crate::store::shared::docs::{element_size, CommentDoc};
use crate::store::shared::error::is_too_large;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::skeleton::{Attempt, ParentPaths, PostPolicy, PostSteps, Try};

impl Embedded {
    /// Appends each comment of `group` (with the position of its parent, the top-level array
    /// when empty, how many replies that parent has, and the bytes it adds) to its parent's
    /// replies with one update, with its entry in the flat array of authors
    /// (`authored.rs`), guarded so that it lands only where and when it is right: each parent
    /// is still at its position with that many replies, no sibling has one of the slugs or a
    /// later time, the counted size stays under the cap, and the discussion is neither locked
    /// nor moved since `discussion` was read (the post may not have read it). Counters move in
    /// the same update. The parents' arrays must not nest (see [`nests`]).
    pub(super) async fn push(
        &self,
        discussion: &Discussion,
        group: &[Member<'_>],
    ) -> StoreResult<Guarded> {
        let id = &discussion.id;
        let mut growth = 0_i64;
        let mut arrays: Vec<(String, Vec<Bson>, Vec<&str>, i64)> = Vec::new();
        let mut inc = doc! { "comment_count": i64::try_from(group.len()).unwrap_or(i64::MAX) };
        let mut filter = open_for_posts(discussion);
        let mut tops = 0_i64;
        let mut entries: Vec<Bson> = Vec::new();
        // The next position in each parent's replies array (below the top level).
        let mut next: Vec<(String, usize)> = Vec::new();
        for Member {
            comment,
            parent_at,
            replies,
            bytes,
        } in group
        {
            let (comment, parent_at, bytes) = (*comment, *parent_at, bytes);
            let mut element =
                to_document(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?;
            element.insert(REPLIES, Bson::Array(Vec::new()));
            growth = growth.saturating_add(*bytes);
            let siblings = array_path(parent_at);
            let index = match arrays.iter().position(|(path, ..)| *path == siblings) {
                Some(index) => index,
                None => {
                    arrays.push((siblings.clone(), Vec::new(), Vec::new(), i64::MAX));
                    arrays.len() - 1
                }
            };
            let (_, elements, slugs, earliest) = &mut arrays[index];
            elements.push(Bson::Document(element));
            slugs.push(comment.slug.as_str());
            *earliest = (*earliest).min(comment.posted.0);
            let below_top = match (parent_at.get(1..), replies) {
                (Some(above), Some(count)) => {
                    let position = match next.iter_mut().find(|(path, _)| *path == siblings) {
                        Some((_, n)) => n,
                        None => {
                            // The parent has exactly the replies it was seen with.
                            filter.insert(format!("{siblings}.{count}"), doc! { "$exists": false });
                            next.push((siblings.clone(), *count));
                            &mut next.last_mut().ok_or_else(|| corrupt("a position"))?.1
                        }
                    };
                    let mut at = above.to_vec();
                    at.push(*position);
                    *position += 1;
                    at
                }
                (None, _) => Vec::new(),
                (Some(_), None) => return Err(corrupt("a reply's parent was not located")),
            };
            entries.push(Bson::Document(authored::entry(comment, &below_top)));
            match &comment.parent {
                Some(parent) => {
                    let at = element_path(parent_at);
                    filter.insert(format!("{at}.slug"), parent.as_str());
                    let counted = format!("{at}.reply_count");
                    let replies = inc.get(&counted).and_then(as_i64).unwrap_or(0);
                    inc.insert(counted, replies + 1);
                }
                None => tops += 1,
            }
        }
        let budget = self.budget(id, growth)?;
        filter.insert(BYTES, doc! { "$not": { "$gt": budget } });
        inc.insert(BYTES, growth);
        if tops > 0 {
            inc.insert("thread_count", tops);
        }
        let mut push = doc! {
            authored::AUTHORED: { "$each": entries, "$sort": authored::sorted() },
        };
        for (siblings, elements, slugs, earliest) in arrays {
            filter.insert(format!("{siblings}.slug"), doc! { "$nin": slugs });
            filter.insert(
                siblings.clone(),
                doc! { "$not": { "$elemMatch": { "posted": { "$gte": earliest } } } },
            );
            push.insert(siblings, doc! { "$each": elements });
        }
        let slugs: Vec<&Slug> = group.iter().map(|member| &member.comment.slug).collect();
        let mark = changes::mark_all(ChangeKind::Posted, &slugs);
        match self
            .coll
            .update_one(
                filter,
                doc! { "$push": push, "$inc": inc, "$set": { changes::FIELD: mark } },
            )
            .await
        {
            Ok(result) if result.matched_count == 1 => Ok(Guarded::Done),
            Ok(_) => Ok(Guarded::Refused { budget }),
            Err(err) if is_too_large(&err) => Err(self.too_large(id)),
            Err(err) => Err(err.into()),
        }
    }

    /// The most bytes the comments may count before growing by `growth` (`TooLarge` when even
    /// an empty discussion could not take it).
    pub(super) fn budget(&self, id: &DiscussionId, growth: i64) -> StoreResult<i64> {
        let budget = self
            .max_bytes
            .saturating_sub(METADATA_ALLOWANCE)
            .saturating_sub(growth);
        if budget < 0 {
            return Err(self.too_large(id));
        }
        Ok(budget)
    }

    /// After a refused write: the cap when the counted bytes leave no room, otherwise a retry
    /// (something else the write relied on changed).
    pub(super) fn refused(
        &self,
        id: &DiscussionId,
        at: &Located,
        budget: i64,
    ) -> StoreResult<Attempt> {
        if at.bytes > budget {
            return Err(self.too_large(id));
        }
        Ok(Attempt::Retry)
    }

    pub(super) fn too_large(&self, id: &DiscussionId) -> StoreError {
        StoreError::TooLarge(format!(
            "discussion {id} is full: the EMBEDDED layout keeps all of a discussion's comments in \
             one document, capped at {} bytes, and this comment does not fit. A moderator can move it to the BUCKETED or PER_COMMENT \
             layout, which have no size limit (`migrateDiscussion`); servers that promote full \
             discussions do so on their own.",
            self.max_bytes
        ))
    }
}

/// A comment of a group stored together.
pub(super) struct Member<'a> {
    /// The comment.
    comment: &'a Comment,
    /// Its parent's position (empty at the top level).
    parent_at: &'a [usize],
    /// How many replies its parent has (`None` at the top level).
    replies: Option<usize>,
    /// The bytes it adds to the counted size.
    bytes: i64,
}

/// The update path of the comment at `at`: `replies.0.replies.2`.
pub(super) fn element_path(at: &[usize]) -> String {
    at.iter()
        .map(|i| format!("{REPLIES}.{i}"))
        .collect::<Vec<_>>()
        .join(".")
}

/// The update path of the replies array of the comment at `at` (the top-level array when empty):
/// `replies.0.replies.2.replies`.
pub(super) fn array_path(at: &[usize]) -> String {
    if at.is_empty() {
        REPLIES.to_owned()
    } else {
        format!("{}.{REPLIES}", element_path(at))
    }
}

/// Whether the replies arrays of the comments at `a` and `b` (the top-level array when empty)
/// nest: one update cannot write both, as one holds the other.
pub(super) fn nests(a: &[usize], b: &[usize]) -> bool {
    a != b && (a.starts_with(b) || b.starts_with(a))
}

#[async_trait]
impl PostSteps for Embedded {
    type State = PostState;

    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        _part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, PostState)> {
        // A reply needs its parent's position first. A top-level comment is written blind and
        // reads the document only when a guard refuses it.
        let Some(parent) = parent else {
            return Ok((
                None,
                PostState {
                    chain: Vec::new(),
                    located: None,
                    alone: false,
                },
            ));
        };
        let chain = chain_of(parent);
        let located = self.locate_for_post(discussion, &chain).await?;
        let full_slug = located
            .full
            .last()
            .cloned()
            .ok_or_else(|| corrupt("the parent was not located"))?;
        let paths = ParentPaths {
            slug: parent.clone(),
            full_slug,
        };
        Ok((
            Some(paths),
            PostState {
                chain,
                located: Some(located),
                alone: false,
            },
        ))
    }

    /// A new comment must come after its latest sibling, so each `replies` array stays in
    /// posting order.
    fn floor(&self, state: &PostState, parent: Option<&Slug>) -> Option<Micros> {
        let level = parent.map_or(0, |p| p.depth() + 1);
        let at = state.located.as_ref()?;
        at.last_child.get(level).copied().flatten().map(Micros)
    }

    /// A post is one guarded update of the discussion document, counters included: no
    /// transaction. Concurrent posts to one document refuse each other (a sibling with the same
    /// or a later time fails the guard), so a process stores the posts that waited for their
    /// turn together, in one update. A reply's parent never moves in the document, and what else
    /// `prepare` took from the kept tree is refreshed when the turn comes (and checked by the
    /// guarded update).
    fn policy(&self) -> PostPolicy<'_, PostState> {
        PostPolicy {
            transaction: false,
            grouping: Some(&self.waiting),
        }
    }

    fn after_turn(&self, discussion: &Discussion, state: &mut PostState) {
        if state.located.is_some() {
            if let Some(at) = self.kept(discussion, &state.chain) {
                state.located = Some(at);
            }
        }
    }

    /// One guarded update stores the comments whose parents' arrays do not nest in each other
    /// (the database refuses an update of a path and of a path inside it); the others wait for
    /// the next try. A refused update reads the document afresh: comments that no longer fit
    /// under the cap together go one at a time, and a single one that does not fit is refused
    /// as too large; otherwise each tries again.
    async fn attempt_group(
        &self,
        discussion: &Discussion,
        group: &mut [Try<'_, PostState>],
        _session: &mut ClientSession,
    ) -> StoreResult<()> {
        let id = &discussion.id;
        let alone = group.iter().any(|t| t.state.alone);
        let mut chosen: Vec<(usize, Vec<usize>, i64)> = Vec::new();
        let mut size = 0_i64;
        for i in 0..group.len() {
            let one = &group[i];
            let parent_at = match &one.comment.parent {
                None => Vec::new(),
                Some(parent) => one
                    .state
                    .located
                    .as_ref()
                    .and_then(|at| at.path.get(..=parent.depth()))
                    .ok_or_else(|| corrupt("the parent was not located"))?
                    .to_vec(),
            };
            let growth = element_size(one.comment, true)?
                .saturating_add(ELEMENT_OVERHEAD)
                .saturating_add(authored::entry_size(one.comment)?);
            let twin = chosen
                .iter()
                .any(|(j, ..)| group[*j].comment.slug == one.comment.slug);
            let fits = chosen.is_empty()
                || (!alone
                    && self.budget(id, size.saturating_add(growth)).is_ok()
                    && chosen.iter().all(|(_, at, _)| !nests(at, &parent_at)));
            let one = &mut group[i];
            one.outcome = if twin {
                Attempt::Retry
            } else if fits {
                size = size.saturating_add(growth);
                chosen.push((i, parent_at, growth));
                Attempt::Stored
            } else {
                Attempt::Moved
            };
        }
        let members: Vec<Member<'_>> = chosen
            .iter()
            .map(|(i, at, growth)| Member {
                comment: group[*i].comment,
                parent_at: at.as_slice(),
                // The parent it is placed under (an ancestor of the one asked for, past the
                // depth cap).
                replies: group[*i].comment.parent.as_ref().and_then(|parent| {
                    let located = group[*i].state.located.as_ref()?;
                    located.replies.get(parent.depth()).copied()
                }),
                bytes: *growth,
            })
            .collect();
        match self.push(discussion, &members).await? {
            Guarded::Done => {
                for member in &members {
                    self.learn(discussion, member.comment, member.bytes);
                }
                for one in group.iter_mut() {
                    one.state.alone = false;
                }
            }
            Guarded::Refused { budget } => {
                let shape = self.read_kept(discussion).await?;
                let too_large = shape.bytes > budget;
                if too_large && members.len() == 1 {
                    return Err(self.too_large(id));
                }
                for one in group.iter_mut() {
                    one.state.located = Some(
                        shape
                            .located(&one.state.chain)
                            .ok_or_else(|| missing(id, &one.state.chain))?,
                    );
                    one.state.alone = too_large;
                    if one.outcome == Attempt::Stored {
                        one.outcome = if too_large {
                            Attempt::Moved
                        } else {
                            Attempt::Retry
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_nest_when_one_holds_the_other() {
        // The top-level array holds every other; a comment's replies hold its replies' replies.
        assert!(nests(&[], &[0]));
        assert!(nests(&[0, 2], &[0]));
        assert!(nests(&[0], &[0, 2, 1]));
        // The same array takes several pushes; siblings' and cousins' arrays are apart.
        assert!(!nests(&[], &[]));
        assert!(!nests(&[0, 2], &[0, 2]));
        assert!(!nests(&[0], &[1]));
        assert!(!nests(&[0, 1], &[0, 2, 1]));
    }

    #[test]
    fn paths_name_nested_arrays() {
        assert_eq!(array_path(&[]), "replies");
        assert_eq!(element_path(&[0, 2]), "replies.0.replies.2");
        assert_eq!(
            array_path(&[0, 2, 5]),
            "replies.0.replies.2.replies.5.replies"
        );
    }
}
