//! The pages command of a post: the slug guard, the `$push` of a group of comments, and the counters of replies, in one ordered `update`.

use mongodb::bson::{doc, to_bson, Bson, Document};
use mongodb::ClientSession;

use super::shapes::reply_page_path;
use super::shapes::SEALED;
use super::shapes::{order_key, page_filter, thread_page_path, Target};
use super::Bucketed;
use crate::domain::{Comment, DiscussionId, Slug};
use crate::store::shared::bson::{as_i64, corrupt};
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::{StoreError, StoreResult};

/// A stored comment a post read: its page and its stored form.
pub(super) type Located = (i64, Comment);

/// A comment a reply counts on: its page and its slug.
pub(super) type Counted = (i64, Slug);

/// A post in progress: where posts go, the comment a reply is attached to and its thread's root
/// with their pages, and what is known about slugs.
pub(crate) struct PostState {
    pub(super) target: Target,
    pub(super) parent: Option<Counted>,
    /// The comment the reply is attached to was never voted on, as read or remembered: its
    /// counter statement checks that it still is not, and no copy counts the reply (see
    /// `copies`).
    pub(super) unvoted: bool,
    pub(super) root: Option<Counted>,
    /// The parent's and the root's pages are what the process remembered, not read: the pages
    /// command checks that the reply's counters found them.
    pub(super) known: bool,
    /// The slug last looked up, and whether it was free.
    pub(super) checked: Option<(Slug, bool)>,
    /// Room left on the target page, learned when a group of posts did not fit there.
    pub(super) room: Option<i64>,
}

/// What the `update` command on the pages did with its `$push`.
pub(super) enum Pushed {
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
    pub(super) async fn push(
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
            updates.extend(Self::reply_counters(discussion, comment, state, target)?);
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
        let checked = |state: &PostState| state.known || state.unvoted;
        if group.iter().any(|(_, state)| checked(state)) && changed(&reply) < changes {
            return Ok(Pushed::Stale);
        }
        Ok(Pushed::Stored)
    }

    /// The statements that count a new reply: `reply_count` and the reply's page in
    /// `reply_pages` on its parent, and `thread_total` and `thread_pages` on its thread's page.
    /// The parent is found by slug within the page the post read or remembered for it. A server may
    /// rewrite a whole page for each statement, so the thread's counts go in the push's statement when its root is on the page the reply goes to
    /// ([`threads_here`]), or else in the parent's when the root is on the parent's page.
    pub(super) fn reply_counters(
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
            match state.unvoted && slug == parent {
                // Still never voted on, so without a copy to count the reply in.
                true => q.insert(
                    "comments",
                    doc! { "$elemMatch": { "slug": slug.as_str(), "vseq": { "$exists": false } } },
                ),
                false => q.insert("comments.slug", slug.as_str()),
            };
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
pub(super) fn threads_here(state: &PostState, target: &Target) -> bool {
    matches!(&state.root, Some((page, _)) if *page == target.page)
}

/// Whether `key` is below the key at `path` in `keys` (or there is none).
pub(super) fn below_kept(keys: &Document, path: &str, key: &str) -> bool {
    keys.get_str(path).map_or(true, |kept| key < kept)
}

/// Documents an `update` command's statements changed, the pages an upsert created included.
pub(super) fn changed(reply: &Document) -> i64 {
    let modified = reply.get("nModified").and_then(as_i64).unwrap_or(0);
    let upserted = match reply.get("upserted") {
        Some(Bson::Array(upserted)) => i64::try_from(upserted.len()).unwrap_or(i64::MAX),
        _ => 0,
    };
    modified.saturating_add(upserted)
}

/// Documents an `update` command's statements matched and left as they were: `n` counts every
/// document matched (and every page an upsert created), `nModified` the matched ones changed.
pub(super) fn matched_unchanged(reply: &Document) -> i64 {
    reply.get("n").and_then(as_i64).unwrap_or(0) - changed(reply)
}

/// What an `update` command's reply says about its `$push`, the statement at `push`. A
/// duplicate key there is the upsert meeting an existing page that did not match; any other
/// write error, or a failed counter statement after a stored comment, is reported (the comment
/// is stored either way, so a failed counter is only logged: answering with an error would
/// invite a duplicate post).
pub(super) fn write_outcome(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_is_what_matched_and_changed_nothing() {
        // A server's replies to a guard and a push, in a transaction.
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
