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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mongodb::bson::{doc, to_bson, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::ClientSession;

use super::known::Location;
use super::shapes::{
    block_of, comments_of, order_key, page_filter, thread_page_path, Target, BLOCK_KEYS, FLOOR,
    NUM_PAGES, PAGE_BLOCKS, SEALED_MAX, SEALED_MIN,
};
use super::threads::{pages_with, reply_page_path};
use super::Bucketed;
use crate::domain::{Comment, Discussion, DiscussionId, Micros, Placement, Slug, SlugPart};
use crate::store::bson::{as_i64, corrupt, int_field};
use crate::store::docs::CommentDoc;
use crate::store::write::{Attempt, ParentPaths, PostSteps, Try, Waiting};
use crate::store::{StoreError, StoreResult};

/// Field set on a page once the discussion has moved on from it: no post may land there later,
/// whatever bucket size the poster runs with.
pub(super) const SEALED: &str = "sealed";
/// Discussions whose write target a process remembers (the map is emptied beyond this).
const REMEMBERED: usize = 10_000;
/// Most posts waiting for a discussion's turn that one try stores together (a page's room
/// bounds it too).
pub(super) const GROUP: usize = 64;

/// Where each discussion's posts go, as this process last saw it. A stale entry costs one
/// refused `$push` (the page is full or sealed) and a read of the current target.
/// Entries hold the discussion's count of moves between layouts: pages written by an earlier
/// stay in the bucketed layout are never a target.
#[derive(Clone, Default)]
pub(super) struct Targets(Arc<Mutex<HashMap<DiscussionId, (u64, Target)>>>);

impl Targets {
    fn get(&self, discussion: &Discussion) -> Option<Target> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&discussion.id)
            .filter(|(moves, _)| *moves == discussion.moves)
            .map(|(_, target)| target.clone())
    }

    fn set(&self, discussion: &Discussion, target: &Target) {
        let id = &discussion.id;
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= REMEMBERED && !map.contains_key(id) {
            map.clear();
        }
        let newer = map
            .get(id)
            .is_none_or(|(moves, known)| *moves != discussion.moves || known.page <= target.page);
        if newer {
            map.insert(id.clone(), (discussion.moves, target.clone()));
        }
    }
}

/// A stored comment a post read: its page and its stored form.
type Located = (i64, Comment);

/// A comment a reply counts on: its page and its slug.
type Counted = (i64, Slug);

/// A post in progress: where posts go, the comment a reply is attached to and its thread's root
/// with their pages, and what is known about slugs.
pub(in crate::store) struct PostState {
    target: Target,
    parent: Option<Counted>,
    root: Option<Counted>,
    /// The parent's and the root's pages are what the process remembered, not read: the pages
    /// command checks that the reply's counters found them.
    known: bool,
    /// The slug last looked up, and whether it was free.
    checked: Option<(Slug, bool)>,
    /// Room left on the target page, learned when a group of posts did not fit there.
    room: Option<i64>,
}

/// What the `update` command on the pages did with its `$push`.
enum Pushed {
    Stored,
    /// The page exists and did not take the comment (full, sealed, or created a moment ago).
    Refused,
    /// The guard found a slug of the group already stored: the transaction must not commit.
    Taken,
    /// A reply counter found no comment where the process remembered one: the transaction must
    /// not commit.
    Stale,
}

impl Bucketed {
    /// The page new comments go to, as the discussion records it.
    async fn target(&self, discussion: &Discussion) -> StoreResult<Target> {
        let id = &discussion.id;
        if let Some(known) = self.targets.get(discussion) {
            return Ok(known);
        }
        let doc = self
            .discussion_docs
            .find_one(doc! { "_id": id.as_str() })
            .projection(Target::projection())
            .await?;
        let target = Target::from_doc(doc);
        self.targets.set(discussion, &target);
        Ok(target)
    }

    /// Page `full` is full: seal it (so no post lands there any more, and its last key is
    /// final), move the discussion on to the next page (a no-op when another post already did)
    /// and return where posts go now.
    async fn next_page(&self, discussion: &Discussion, full: &Target) -> StoreResult<Target> {
        let id = &discussion.id;
        let (full, keyed) = (full.page, full.keyed);
        let sealed = self
            .pages
            .find_one_and_update(
                page_filter(id, full, keyed),
                doc! { "$set": { SEALED: true } },
            )
            .projection(doc! { "last_key": 1, "count": 1 })
            .return_document(ReturnDocument::After)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("page {full} of {id} vanished")))?;
        let last_key = sealed.get_str("last_key").unwrap_or_default();
        let count = sealed.get("count").and_then(as_i64).unwrap_or(0);
        let doc = self
            .discussion_docs
            .find_one_and_update(
                doc! { "_id": id.as_str() },
                doc! {
                    "$max": { NUM_PAGES: full + 1, FLOOR: last_key, SEALED_MAX: count },
                    "$min": { SEALED_MIN: count },
                },
            )
            .projection(Target::projection())
            .return_document(ReturnDocument::After)
            .await?;
        let target = Target::from_doc(doc);
        self.targets.set(discussion, &target);
        Ok(target)
    }

    /// One read for a post: the stored comments among `slugs` (the parent, its thread's root,
    /// the new comment's slug), each with its page.
    async fn locate(&self, id: &DiscussionId, slugs: &[&Slug]) -> StoreResult<Vec<Located>> {
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
    /// reply is attached to and its thread's root (their pages); `None` when it does not know
    /// all of it.
    fn known_reply(
        &self,
        discussion: &Discussion,
        parent: &Slug,
        attached: Option<&Slug>,
    ) -> Option<(Option<ParentPaths>, Option<Counted>, Option<Counted>)> {
        let requested = self.known.get(discussion, parent)?;
        let paths = ParentPaths {
            slug: parent.clone(),
            full_slug: requested.full_slug.clone(),
        };
        let Some(attached) = attached else {
            return Some((Some(paths), None, None));
        };
        let home = match attached == parent {
            true => requested,
            false => self.known.get(discussion, attached)?,
        };
        let root = (home.root_page, attached.ancestor_at(0));
        Some((Some(paths), Some((home.page, attached.clone())), Some(root)))
    }

    /// Remembers where the comments a post read live (those whose thread's root it read too),
    /// where replies can use it (with transactions).
    fn remember_found(&self, discussion: &Discussion, found: &[Located]) {
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
                };
                Some((c.slug.clone(), location))
            }),
        );
    }

    /// Whether a slug is in use anywhere in the discussion.
    async fn slug_taken(&self, id: &DiscussionId, slug: &Slug) -> StoreResult<bool> {
        Ok(!self.locate(id, &[slug]).await?.is_empty())
    }

    /// One `update` command with ordered statements: the guard for the slugs in `unchecked`
    /// (in a transaction only), the `$push` of `group` (comments stored together, each with its
    /// post's state) into the target page (refused unless the page has room for all of them and
    /// is not sealed), then the counters of each reply's parent and thread. The counters run
    /// only when the push stored the comments.
    ///
    /// The guard is a multi-document update that changes nothing (`$inc` by 0) on the pages
    /// holding any of those slugs: the command's reply counts what it matched (`n`) apart from
    /// what the push and the counters changed (`nModified`, and the page an upsert created), so
    /// a slug already in use costs no command of its own to find.
    async fn push(
        &self,
        discussion: &DiscussionId,
        group: &[(&Comment, &PostState)],
        target: &Target,
        unchecked: &[&Slug],
        session: &mut ClientSession,
    ) -> StoreResult<Pushed> {
        let Some(((first, _), _)) = group.split_first() else {
            return Ok(Pushed::Stored);
        };
        let size = i64::try_from(group.len()).unwrap_or(i64::MAX);
        let mut elements = Vec::with_capacity(group.len());
        let (mut low, mut high, mut top, mut threaded) = (None::<String>, None::<String>, 0, 0);
        for (comment, state) in group {
            let key = order_key(comment.posted, &comment.slug);
            low = Some(low.map_or(key.clone(), |low| low.min(key.clone())));
            high = Some(high.map_or(key.clone(), |high| high.max(key)));
            top += i64::from(comment.parent.is_none());
            // The comments of threads this page starts: its top-level ones, and the replies
            // whose thread's root is on it (their page counts them here, not in a statement of
            // their own).
            threaded += i64::from(comment.parent.is_none() || threads_here(state, target));
            elements.push(to_bson(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?);
        }
        let mut q = page_filter(discussion, target.page, target.keyed);
        q.insert("count", doc! { "$lte": self.cap - size });
        q.insert(SEALED, doc! { "$exists": false });
        let mut counts = doc! { "count": size, "roots": top, "thread_total": threaded };
        if threaded > 0 {
            counts.insert(thread_page_path(target.page), threaded);
        }
        let mut updates = Vec::with_capacity(2 + 2 * group.len());
        if !unchecked.is_empty() {
            let slugs: Vec<&str> = unchecked.iter().map(|s| s.as_str()).collect();
            updates.push(doc! {
                "q": { "discussion_id": discussion.as_str(), "comments.slug": { "$in": slugs } },
                "u": { "$inc": { "count": 0_i64 } },
                "multi": true,
            });
        }
        let guards = updates.len();
        updates.push(doc! {
            "q": q,
            "u": {
                "$push": { "comments": { "$each": elements, "$sort": { "posted": 1, "slug": 1 } } },
                "$inc": counts,
                "$min": { "first_key": low.unwrap_or_default() },
                "$max": { "last_key": high.unwrap_or_default() },
            },
            "upsert": true,
        });
        for (comment, state) in group {
            updates.extend(self.reply_counters(discussion, comment, state, target)?);
        }
        // The push changes one page, and each counter its comment's.
        let changes = i64::try_from(updates.len() - guards).unwrap_or(i64::MAX);
        let reply = self
            .pages
            .update_statements(updates, self.writer.transactions, session)
            .await?;
        let pushed = write_outcome(&reply, guards, discussion, &first.slug)?;
        if !matches!(pushed, Pushed::Stored) {
            return Ok(pushed);
        }
        if guards > 0 && matched_unchanged(&reply) > 0 {
            return Ok(Pushed::Taken);
        }
        if group.iter().any(|(_, state)| state.known) && changed(&reply) < changes {
            return Ok(Pushed::Stale);
        }
        Ok(Pushed::Stored)
    }

    /// The statements that count a new reply: `reply_count` and the reply's page in
    /// `reply_pages` on its parent, and `thread_total` and `thread_pages` on its thread's page.
    /// The parent is found by slug within the page the post read or remembered for it. The
    /// development database rewrites a whole page for each statement, so the thread's counts go
    /// in the push's statement when its root is on the page the reply goes to
    /// ([`threads_here`]), or else in the parent's when the root is on the parent's page.
    fn reply_counters(
        &self,
        id: &DiscussionId,
        comment: &Comment,
        state: &PostState,
        target: &Target,
    ) -> StoreResult<Vec<Document>> {
        let Some(parent) = &comment.parent else {
            return Ok(Vec::new());
        };
        let root = comment.slug.ancestor_at(0);
        let page_of = |slug: &Slug| -> StoreResult<i64> {
            [&state.parent, &state.root]
                .into_iter()
                .flatten()
                .find(|(_, s)| s == slug)
                .map(|(page, _)| *page)
                .ok_or_else(|| StoreError::Corrupt(format!("comment {slug} of {id} has no page")))
        };
        let at = |slug: &Slug, update: Document| -> StoreResult<Document> {
            let mut q = page_filter(id, page_of(slug)?, target.keyed);
            q.insert("comments.slug", slug.as_str());
            Ok(doc! { "q": q, "u": update })
        };
        // The parent counts the reply, and the page it went to among its replies' pages.
        let mut counted = doc! {
            "comments.$.reply_count": 1_i64,
            reply_page_path("comments.$.", target.page): 1_i64,
        };
        // The thread's page counts it, and the page it went to among its thread's pages.
        let threaded = doc! { "thread_total": 1_i64, thread_page_path(target.page): 1_i64 };
        if threads_here(state, target) {
            return Ok(vec![at(parent, doc! { "$inc": counted })?]);
        }
        if *parent == root || page_of(parent)? == page_of(&root)? {
            counted.extend(threaded);
            return Ok(vec![at(parent, doc! { "$inc": counted })?]);
        }
        Ok(vec![
            at(parent, doc! { "$inc": counted })?,
            at(&root, doc! { "$inc": threaded })?,
        ])
    }
}

/// Whether a reply's thread starts on the page it goes to: the push's statement then counts it
/// in the page's `thread_total` and `thread_pages`.
fn threads_here(state: &PostState, target: &Target) -> bool {
    matches!(&state.root, Some((page, _)) if *page == target.page)
}

/// Whether `key` is below the key at `path` in `keys` (or there is none).
fn below_kept(keys: &Document, path: &str, key: &str) -> bool {
    keys.get_str(path).map_or(true, |kept| key < kept)
}

/// Documents an `update` command's statements changed, the pages an upsert created included.
fn changed(reply: &Document) -> i64 {
    let modified = reply.get("nModified").and_then(as_i64).unwrap_or(0);
    let upserted = match reply.get("upserted") {
        Some(Bson::Array(upserted)) => i64::try_from(upserted.len()).unwrap_or(i64::MAX),
        _ => 0,
    };
    modified.saturating_add(upserted)
}

/// Documents an `update` command's statements matched and left as they were: `n` counts every
/// document matched (and every page an upsert created), `nModified` the matched ones changed.
fn matched_unchanged(reply: &Document) -> i64 {
    reply.get("n").and_then(as_i64).unwrap_or(0) - changed(reply)
}

/// What an `update` command's reply says about its `$push`, the statement at `push`. A
/// duplicate key there is the upsert meeting an existing page that did not match; any other
/// write error, or a failed counter statement after a stored comment, is reported (the comment
/// is stored either way, so a failed counter is only logged: answering with an error would
/// invite a duplicate post).
fn write_outcome(
    reply: &Document,
    push: usize,
    id: &DiscussionId,
    slug: &Slug,
) -> StoreResult<Pushed> {
    let push = i64::try_from(push).unwrap_or(i64::MAX);
    let errors = match reply.get("writeErrors") {
        Some(Bson::Array(errors)) => errors.as_slice(),
        _ => &[],
    };
    for error in errors {
        let Bson::Document(error) = error else {
            continue;
        };
        let index = error.get("index").and_then(as_i64).unwrap_or(-1);
        let code = error.get("code").and_then(as_i64).unwrap_or(0);
        let message = error.get_str("errmsg").unwrap_or_default();
        match (index, code) {
            (i, 11000) if i == push => return Ok(Pushed::Refused),
            (i, _) if i <= push => {
                return Err(StoreError::Corrupt(format!(
                    "posting {slug} to {id} failed: {message} (code {code})"
                )))
            }
            _ => {
                tracing::error!(discussion = %id, %slug, code, message, "a reply counter was not updated")
            }
        }
    }
    if let Ok(concern) = reply.get_document("writeConcernError") {
        tracing::warn!(discussion = %id, %slug, ?concern, "post stored without its write concern");
    }
    Ok(Pushed::Stored)
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
                None => Some((None, None, None)),
                Some(p) => self.known_reply(discussion, p, attached.as_ref()),
            };
            if let Some((paths, attached, root)) = known {
                let state = PostState {
                    target: self.target(discussion).await?,
                    known: attached.is_some(),
                    parent: attached,
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
        let state = PostState {
            target,
            parent: counted(attached.as_ref()),
            root: counted(root.as_ref()),
            known: false,
            checked: Some((slug, free)),
            room: None,
        };
        Ok((paths, state))
    }

    /// The parent's and the root's pages never change, a slug taken meanwhile is caught by the
    /// next lookup or accepted as the layout's known race (ARCHITECTURE.md), and a page the
    /// discussion moved on from refuses the push: the read overlaps the post ahead.
    fn prepares_before_turn(&self) -> bool {
        true
    }

    /// The write target this process learned while the post waited (the post ahead may have
    /// moved the discussion to a new page), so that the post does not pay for a refused push.
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
        };
        self.known
            .remember(discussion, [(comment.slug.clone(), location)]);
    }

    /// Posts waiting for the discussion's turn go into the page together.
    fn grouping(&self) -> Option<&Waiting<PostState>> {
        Some(&self.waiting)
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
        let pushed = self
            .push(id, &members, &target, &unchecked, session)
            .await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_is_what_matched_and_changed_nothing() {
        // The replies of the development database to a guard and a push, in a transaction.
        let upserted = doc! { "n": 2, "nModified": 0, "upserted": [{ "index": 1, "_id": "d:1" }] };
        assert_eq!(matched_unchanged(&upserted), 1);
        let pushed = doc! { "n": 1, "nModified": 1 };
        assert_eq!(matched_unchanged(&pushed), 0);
        let created = doc! { "n": 1, "nModified": 0, "upserted": [{ "index": 1, "_id": "d:1" }] };
        assert_eq!(matched_unchanged(&created), 0);
        // A push and two reply counters, and a guard that found two pages.
        let counted = doc! { "n": 5_i64, "nModified": 3_i64 };
        assert_eq!(matched_unchanged(&counted), 2);
    }
}
