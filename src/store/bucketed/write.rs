//! Posting into buckets: the seed's loop made safe under concurrency (see docs/ARCHITECTURE.md).
//!
//! In the steady state a post is one `update` command on the pages (the `$push`, and for a reply
//! the parent's `reply_count` and the thread's `thread_total`, as ordered statements), the
//! discussion's counters, and the commit of the transaction that holds them where the deployment
//! has transactions. A guard statement ahead of the `$push` finds any page that holds the new
//! slug, and the transaction is abandoned if one does. A reply reads its parent and its thread's
//! root first (their pages, and the parent's full slug) unless the process knows where they are
//! (`known`); without transactions, every post reads whether its slug is free. The page new
//! comments go to is remembered per process. Posts that wait for the discussion's turn share the
//! writes: one `$push $each`, their counters in the same command, one discussion update.

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, Document};
use mongodb::ClientSession;

use super::known::Location;
use super::push::{below_kept, Counted, Located, PostState, Pushed};

/// What the process knows for a reply (see `Bucketed::known_reply`).
pub(super) type KnownReply = (Option<ParentPaths>, Option<Counted>, Option<Counted>, bool);
use super::shapes::SEALED;
use super::shapes::{
    block_of, comments_of, order_key, page_filter, page_id, BLOCK_KEYS, PAGE_BLOCKS,
};
use super::threads::pages_with;
use super::Bucketed;
use crate::domain::{Comment, Discussion, DiscussionId, Micros, Placement, Slug, SlugPart};
use crate::store::shared::bson::{as_i64, int_field};
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::skeleton::{Attempt, ParentPaths, PostPolicy, PostSteps, Try};

/// Most posts waiting for a discussion's turn that one try stores together (a page's room
/// bounds it too).
pub(super) const GROUP: usize = 64;

impl Bucketed {
    /// One read for a post: the stored comments among `slugs` (the parent, its thread's root,
    /// the new comment's slug), each with its page.
    pub(super) async fn locate(
        &self,
        id: &DiscussionId,
        slugs: &[&Slug],
    ) -> StoreResult<Vec<Located>> {
        let wanted: Vec<&str> = slugs.iter().map(|s| s.as_str()).collect();
        let pipeline = vec![
            doc! { "$match": pages_with(id, "comments.slug", wanted.iter().map(|s| Bson::from(*s))) },
            doc! { "$project": {
                "page": 1,
                "comments": { "$filter": {
                    "input": "$comments",
                    "cond": { "$in": ["$$this.slug", &wanted] },
                } },
            } },
        ];
        let mut cursor = self.pages.aggregate(pipeline).await?;
        let mut found = Vec::new();
        while cursor.advance().await? {
            let page: Document = cursor.deserialize_current()?;
            let number = int_field(&page, "page")?;
            for comment in comments_of(page, id)? {
                found.push((number, comment));
            }
        }
        Ok(found)
    }

    /// What the process knows of a reply's requested parent (its paths) and of the comment the
    /// reply is attached to and its thread's root (their pages), and whether the comment it is
    /// attached to was never voted on; `None` when it does not know all of it.
    pub(super) fn known_reply(
        &self,
        discussion: &Discussion,
        parent: &Slug,
        attached: Option<&Slug>,
    ) -> Option<KnownReply> {
        let requested = self.known.get(discussion, parent)?;
        let paths = ParentPaths {
            slug: parent.clone(),
            full_slug: requested.full_slug.clone(),
        };
        let Some(attached) = attached else {
            return Some((Some(paths), None, None, false));
        };
        let home = match attached == parent {
            true => requested,
            false => self.known.get(discussion, attached)?,
        };
        let root = (home.root_page, attached.ancestor_at(0));
        Some((
            Some(paths),
            Some((home.page, attached.clone())),
            Some(root),
            !home.voted,
        ))
    }

    /// Remembers where the comments a post read live (those whose thread's root it read too),
    /// where replies can use it (with transactions).
    pub(super) fn remember_found(&self, discussion: &Discussion, found: &[Located]) {
        if !self.writer.transactions {
            return;
        }
        let page_of = |slug: &Slug| found.iter().find(|(_, c)| &c.slug == slug).map(|f| f.0);
        self.known.remember(
            discussion,
            found.iter().filter_map(|(page, c)| {
                let location = Location {
                    page: *page,
                    root_page: page_of(&c.slug.ancestor_at(0))?,
                    full_slug: c.full_slug.clone(),
                    voted: super::copies::voted(c),
                };
                Some((c.slug.clone(), location))
            }),
        );
    }

    /// Whether a slug is in use anywhere in the discussion.
    pub(super) async fn slug_taken(&self, id: &DiscussionId, slug: &Slug) -> StoreResult<bool> {
        Ok(!self.locate(id, &[slug]).await?.is_empty())
    }
}

#[async_trait]
impl PostSteps for Bucketed {
    type State = PostState;

    /// With transactions, a top-level post and a reply to a comment the process knows read
    /// nothing: the guard of the pages command checks the new slug. Otherwise one read finds the
    /// parent, its thread's root and whether the first try's slug is free (with the write
    /// target, which the process usually remembers).
    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, PostState)> {
        let id = &discussion.id;
        let (attached, slug) = Placement::slug_under(parent, self.writer.max_depth, part);
        if self.writer.transactions {
            let known = match parent {
                None => Some((None, None, None, false)),
                Some(p) => self.known_reply(discussion, p, attached.as_ref()),
            };
            if let Some((paths, attached, root, unvoted)) = known {
                let state = PostState {
                    target: self.target(discussion).await?,
                    known: attached.is_some(),
                    parent: attached,
                    unvoted,
                    root,
                    checked: None,
                    room: None,
                };
                return Ok((paths, state));
            }
        }
        let root = attached.as_ref().map(|a| a.ancestor_at(0));
        let mut wanted: Vec<&Slug> = vec![&slug];
        wanted.extend(parent);
        wanted.extend(&attached);
        wanted.extend(&root);
        wanted.dedup();
        let (target, found) = tokio::try_join!(self.target(discussion), self.locate(id, &wanted))?;
        self.remember_found(discussion, &found);
        let pick = |want: Option<&Slug>| -> Option<Located> {
            let want = want?;
            found.iter().find(|(_, c)| &c.slug == want).cloned()
        };
        let requested = match parent {
            Some(p) => Some(pick(Some(p)).ok_or_else(|| {
                StoreError::NotFound(format!("no comment {p} in discussion {id}"))
            })?),
            None => None,
        };
        let paths = requested.as_ref().map(|(_, c)| c.into());
        let free = pick(Some(&slug)).is_none();
        let counted = |want: Option<&Slug>| pick(want).map(|(page, c)| (page, c.slug));
        let unvoted = pick(attached.as_ref()).is_some_and(|(_, c)| !super::copies::voted(&c));
        let state = PostState {
            target,
            parent: counted(attached.as_ref()),
            unvoted,
            root: counted(root.as_ref()),
            known: false,
            checked: Some((slug, free)),
            room: None,
        };
        Ok((paths, state))
    }

    /// A comment and its counters land together, in one transaction, and the posts waiting for
    /// the discussion's turn go into the page together. The read may come before the turn: the
    /// parent's and the root's pages never change, a slug taken meanwhile is caught by the next
    /// lookup or accepted as the layout's known race (ARCHITECTURE.md), and a page the
    /// discussion moved on from refuses the push.
    fn policy(&self) -> PostPolicy<'_, PostState> {
        PostPolicy {
            transaction: true,
            grouping: Some(&self.waiting),
        }
    }

    /// The write target this process learned while the post waited (the post ahead may have
    /// moved the discussion to a new page), so that the post does not pay for a refused push.
    /// A keyed page's id follows from its number: the page the post was pushed to.
    fn home(&self, discussion: &Discussion, state: &PostState) -> Option<Bson> {
        let target = &state.target;
        target
            .keyed
            .then(|| Bson::String(page_id(&discussion.id, target.page)))
    }

    fn after_turn(&self, discussion: &Discussion, state: &mut PostState) {
        if let Some(known) = self.targets.get(discussion) {
            if known.page > state.target.page {
                state.target = known;
            }
        }
    }

    /// Pages hold disjoint runs of the chronological order: a comment comes after the last key
    /// of the page before the current one.
    fn floor(&self, state: &PostState, _parent: Option<&Slug>) -> Option<Micros> {
        Some(state.target.floor_time())
    }

    /// The process remembers where a comment it stored lives (with transactions: without, every
    /// reply reads whether its slug is free anyway, and learns its parent in the same read).
    fn stored(&self, discussion: &Discussion, comment: &Comment, state: &PostState) {
        if !self.writer.transactions {
            return;
        }
        let page = state.target.page;
        let root_page = match (&comment.parent, &state.root) {
            (None, _) => page,
            (Some(_), Some((root_page, _))) => *root_page,
            (Some(_), None) => return,
        };
        let location = Location {
            page,
            root_page,
            full_slug: comment.full_slug.clone(),
            voted: super::copies::voted(comment),
        };
        self.known
            .remember(discussion, [(comment.slug.clone(), location)]);
    }

    /// One `$push` of the group's comments into the current page while it has room for them
    /// all and is not sealed, with upsert. A comment whose slug is taken (anywhere in the
    /// discussion, or by another comment of the group) tries again with a new one; comments
    /// beyond the page's known room wait for the next try. A duplicate key means the page
    /// exists and did not match: full or sealed (seal it and move the discussion on, a no-op
    /// when another post did), without room for the whole group (the next try takes what
    /// fits), or created by a concurrent post a moment ago (try it again).
    async fn attempt_group(
        &self,
        discussion: &Discussion,
        group: &mut [Try<'_, PostState>],
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        let id = &discussion.id;
        // The newest write target any of the posts knows.
        let Some(target) = group
            .iter()
            .map(|t| &t.state.target)
            .max_by_key(|t| t.page)
            .cloned()
        else {
            return Ok(());
        };
        let room = group
            .iter()
            .filter_map(|t| t.state.room)
            .min()
            .unwrap_or(self.cap)
            .min(self.cap);
        let mut chosen: Vec<usize> = Vec::new();
        for i in 0..group.len() {
            let comment = group[i].comment;
            // Slug uniqueness across pages: looked up once per slug, or (in a transaction)
            // guarded by the pages command (see ARCHITECTURE.md).
            let free = match &group[i].state.checked {
                Some((slug, free)) if *slug == comment.slug => Some(*free),
                _ if self.writer.transactions => None,
                _ => Some(!self.slug_taken(id, &comment.slug).await?),
            };
            let twin = chosen
                .iter()
                .any(|&j| group[j].comment.slug == comment.slug);
            let one = &mut group[i];
            one.state.target = target.clone();
            one.state.checked = free.map(|free| (comment.slug.clone(), free));
            one.outcome = if free == Some(false) || twin {
                Attempt::Retry
            } else if i64::try_from(chosen.len()).unwrap_or(i64::MAX) < room {
                chosen.push(i);
                Attempt::Stored
            } else {
                Attempt::Moved
            };
        }
        let members: Vec<(&Comment, &PostState)> = chosen
            .iter()
            .map(|&i| (group[i].comment, &*group[i].state))
            .collect();
        if members.is_empty() {
            return Ok(());
        }
        let unchecked: Vec<&Slug> = chosen
            .iter()
            .filter(|&&i| group[i].state.checked.is_none())
            .map(|&i| &group[i].comment.slug)
            .collect();
        let size = i64::try_from(members.len()).unwrap_or(i64::MAX);
        // The comments the replies are attached to that may have a copy, which counts them too.
        let copied: Vec<&Slug> = members
            .iter()
            .filter(|(_, state)| !state.unvoted)
            .filter_map(|(_, state)| state.parent.as_ref().map(|(_, slug)| slug))
            .collect();
        if !self.writer.transactions {
            self.count_in_copies(id, &copied, target.page, session)
                .await?;
        }
        let pushed = self
            .push(id, &members, &target, &unchecked, session)
            .await?;
        if matches!(pushed, Pushed::Stored) && self.writer.transactions {
            self.count_in_copies(id, &copied, target.page, session)
                .await?;
        }
        drop(copied);
        drop(members);
        drop(unchecked);
        if let Pushed::Stale = pushed {
            // Nothing of this try stays; the post starts again from a read.
            self.known.forget(id);
            return Err(StoreError::Moving(format!(
                "the comments of discussion {id} are not on the pages this process remembered"
            )));
        }
        if let Pushed::Taken = pushed {
            // Some slug of the group is in use: nothing of this try may stay (no post is
            // stored, so the transaction is abandoned), and each post draws a new slug.
            for &i in &chosen {
                group[i].outcome = Attempt::Retry;
            }
            return Ok(());
        }
        let (mut next, mut room) = (None, None);
        if let Pushed::Refused = pushed {
            let header = self
                .pages
                .find_one(page_filter(id, target.page, target.keyed))
                .projection(doc! { "count": 1, SEALED: 1 })
                .await?;
            if let Some(header) = header {
                let sealed = header.get_bool(SEALED).unwrap_or(false);
                let count = int_field(&header, "count")?;
                if sealed || count >= self.cap {
                    next = Some(self.next_page(discussion, &target).await?);
                } else if count + size > self.cap {
                    room = Some(self.cap - count);
                }
            }
        }
        for one in group.iter_mut() {
            if matches!(pushed, Pushed::Refused) && one.outcome == Attempt::Stored {
                one.outcome = Attempt::Moved;
            }
            if let Some(next) = &next {
                one.state.target = next.clone();
            }
            one.state.room = room;
        }
        Ok(())
    }

    /// The discussion counts the comments stored together in one update.
    async fn count_group(
        &self,
        discussion: &Discussion,
        group: &[Try<'_, PostState>],
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        let stored: Vec<&Try<'_, PostState>> = group
            .iter()
            .filter(|t| t.outcome == Attempt::Stored)
            .collect();
        // The block of each thread's page counts its comment; each page's block keeps its
        // first key.
        let (mut counts, mut keys) = (Document::new(), Document::new());
        for one in &stored {
            let (comment, state) = (one.comment, &one.state);
            let home = match (&comment.parent, &state.root) {
                (None, _) => state.target.page,
                (Some(_), Some((page, _))) => *page,
                // Not stored: `reply_counters` refuses a reply whose thread has no page.
                (Some(_), None) => continue,
            };
            let path = format!("{PAGE_BLOCKS}.{}", block_of(home));
            let n = counts.get(&path).and_then(as_i64).unwrap_or(0);
            counts.insert(path, n + 1);
            let path = format!("{BLOCK_KEYS}.{}", block_of(state.target.page));
            let key = order_key(comment.posted, &comment.slug);
            if below_kept(&keys, &path, &key) {
                keys.insert(path, key);
            }
        }
        let comments: Vec<&Comment> = stored.iter().map(|t| t.comment).collect();
        let mut more = Document::new();
        for (op, fields) in [("$inc", counts), ("$min", keys)] {
            if !fields.is_empty() {
                more.insert(op, fields);
            }
        }
        self.discussions
            .record_posts(discussion, &comments, more, session)
            .await
    }
}
