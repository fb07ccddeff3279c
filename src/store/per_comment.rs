//! The per-comment layout: one document per comment in `comments` ("One Document per Comment").

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};
use mongodb::{ClientSession, Database};

use super::bson::{as_i64, corrupt, int_field, raw_comment_of, to_count};
use super::discussions::limit_plus_one;
use super::discussions::{ThreadPlace, LAST_POSTED, SUBTREE_SIZES};
use super::docs::{replace_update, unchanged_filter, CommentDoc};
use super::error::is_duplicate_key;
use super::metrics::Counted;
use super::migrate::{Lease, Movable};
use super::mongo::index_model as index;
use super::order::after_filter;
use super::subtree::{self, Head, Plan};
use super::thread_blocks;
use super::write::{self, Attempt, ParentPaths, PostSteps, Writer};
use super::{CommentStore, Discussions, Listing, Posted, ReadScope, StoreError, StoreResult};
use crate::domain::{
    Comment, Cursor, Discussion, DiscussionId, FullSlug, Micros, NewComment, Page, Slug, SlugPart,
    Window,
};

/// The per-comment layout.
pub struct PerComment {
    coll: Counted<CommentDoc>,
    raw: Counted<Document>,
    discussions: Discussions,
    writer: Writer,
}

impl PerComment {
    /// Name of the collection.
    pub const COLLECTION: &'static str = "comments";

    pub(super) fn new(db: &Database, discussions: Discussions, writer: Writer) -> Self {
        Self {
            coll: Counted::new(db, Self::COLLECTION, &writer.commands),
            raw: Counted::new(db, Self::COLLECTION, &writer.commands),
            discussions,
            writer,
        }
    }

    pub(super) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.coll
            .create_indexes([
                index("slug_unique", doc! { "discussion_id": 1, "slug": 1 }, true),
                index(
                    "chronological",
                    doc! { "discussion_id": 1, "posted": 1, "slug": 1 },
                    false,
                ),
                index(
                    "threaded",
                    doc! { "discussion_id": 1, "full_slug": 1 },
                    false,
                ),
                index(
                    "replies",
                    doc! { "discussion_id": 1, "parent": 1, "posted": 1, "slug": 1 },
                    false,
                ),
                index("sequence", doc! { "discussion_id": 1, "seq": 1 }, false),
                index(
                    "thread_sequence",
                    doc! { "discussion_id": 1, "thread_seq": 1 },
                    false,
                ),
            ])
            .await?;
        Ok(())
    }

    async fn find_page(
        &self,
        discussion: &Discussion,
        mut filter: Document,
        sort: Document,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        let skip = match window {
            Window::Offset { skip, .. } => *skip,
            Window::After { cursor, .. } => {
                if let Some(cursor) = cursor {
                    filter.extend(after_filter(cursor));
                }
                0
            }
        };
        let docs: Vec<CommentDoc> = self
            .coll
            .find(filter)
            .sort(sort)
            .skip(skip)
            .limit(limit_plus_one(window.limit()))
            .await?
            .try_collect()
            .await?;
        let items = docs
            .into_iter()
            .map(|d| d.into_comment(&discussion.id))
            .collect();
        Ok(Page::from_overfetch(items, window.limit()))
    }

    /// The replies of `parents` in `window`, from one aggregation over the replies index; with
    /// `upto`, only the replies posted at or before that time are read.
    async fn replies_read(
        &self,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
        upto: Option<i64>,
    ) -> StoreResult<Vec<(String, Page<Comment>)>> {
        // One parent is an equality: beside a range on `posted` (a cursor's, the bound's), the
        // development database reads a `parent $in` by scanning the discussion (165 ms at
        // 100 000 comments against 0.7 ms, measured).
        let parent = match parents {
            [one] => Bson::from(one.as_str()),
            _ => Bson::from(doc! { "$in": parents.iter().map(Slug::as_str).collect::<Vec<_>>() }),
        };
        let mut filter = doc! { "discussion_id": discussion.id.as_str(), "parent": parent };
        // A cursor's `posted >= t` goes into the index range; its tie-break (`$or`) is a stage
        // of its own, which the development database applies to what the range read (in one
        // `$match` it scans the discussion: 69 ms at 100 000 comments). mongod merges the two.
        let mut tie_break = None;
        if let Window::After {
            cursor: Some(cursor),
            ..
        } = window
        {
            let mut after = after_filter(cursor);
            if let Some(branches) = after.remove("$or") {
                tie_break = Some(doc! { "$match": { "$or": branches } });
            }
            filter.extend(after);
        }
        if let Some(upto) = upto {
            let mut posted = filter.get_document("posted").cloned().unwrap_or_default();
            posted.insert("$lte", upto);
            filter.insert("posted", posted);
        }
        let mut pipeline = vec![doc! { "$match": filter }];
        pipeline.extend(tie_break);
        pipeline.extend([
            doc! { "$sort": { "parent": 1, "posted": 1, "slug": 1 } },
            doc! { "$group": {
                "_id": "$parent",
                "items": { "$firstN": { "input": "$$ROOT", "n": group_take(window) } },
            } },
        ]);
        self.grouped_pages(discussion, pipeline, parents.len(), window)
            .await
    }

    /// Runs a `$group` pipeline whose groups (at most `groups`) hold an `items` array of comment
    /// documents. Every group comes in the first batch, so a level of a tree is one round trip
    /// however many parents it has; the groups are read as raw BSON and each item is decoded
    /// once, straight into a comment.
    async fn grouped_pages(
        &self,
        discussion: &Discussion,
        pipeline: Vec<Document>,
        groups: usize,
        window: &Window,
    ) -> StoreResult<Vec<(String, Page<Comment>)>> {
        let skip = match window {
            Window::Offset { skip, .. } => usize::try_from(*skip).unwrap_or(usize::MAX),
            Window::After { .. } => 0,
        };
        let groups: Vec<RawDocumentBuf> = self
            .raw
            .aggregate(pipeline)
            .batch_size(first_batch(groups))
            .with_type::<RawDocumentBuf>()
            .await?
            .try_collect()
            .await?;
        groups
            .iter()
            .map(|group| {
                let key = group.get_str("_id").map_err(corrupt)?.to_owned();
                let items = group
                    .get_array("items")
                    .map_err(corrupt)?
                    .into_iter()
                    .skip(skip)
                    .map(|item| raw_comment_of(item.map_err(corrupt)?, &discussion.id))
                    .collect::<StoreResult<Vec<_>>>()?;
                Ok((key, Page::from_overfetch(items, window.limit())))
            })
            .collect()
    }
}

/// A sequence that numbers comments of a listing in its order.
#[derive(Clone, Copy)]
struct Numbering {
    /// The comments' field.
    field: &'static str,
    /// Whether it numbers top-level comments only.
    top_level: bool,
}

impl Numbering {
    /// Every comment, in posting (chronological) order.
    const ALL: Numbering = Numbering {
        field: "seq",
        top_level: false,
    };
    /// Top-level comments, in posting order.
    const THREADS: Numbering = Numbering {
        field: "thread_seq",
        top_level: true,
    };

    /// How many comments the discussion numbered this way (as the request read it).
    fn total(self, discussion: &Discussion) -> u64 {
        match self.top_level {
            true => discussion.thread_count,
            false => discussion.comment_count,
        }
    }
}

impl PerComment {
    /// A page of a sequenced discussion read as one bounded range of its numbers: an offset
    /// window is numbers `skip+1 ..= skip+limit+1`, a cursor window the `limit+1` numbers after
    /// the cursor's comment (found by its slug). `None` when the numbers cannot answer (a
    /// cursor that names no numbered comment, or a range with a number missing); the caller
    /// then reads the page the general way.
    async fn numbered_page(
        &self,
        discussion: &Discussion,
        numbering: Numbering,
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        let field = numbering.field;
        let after = match window {
            Window::Offset { skip, .. } => i64::try_from(*skip).unwrap_or(i64::MAX / 2),
            Window::After { cursor: None, .. } => 0,
            Window::After {
                cursor: Some(Cursor::Chronological { posted, slug }),
                ..
            } => {
                let found = self
                    .raw
                    .find_one(
                        doc! { "discussion_id": discussion.id.as_str(), "slug": slug.as_str() },
                    )
                    .projection(doc! { field: 1, "posted": 1 })
                    .await?;
                // The cursor must be that comment's position (a cursor is the client's input).
                let number = found
                    .filter(|d| d.get_i64("posted").ok() == Some(posted.0))
                    .and_then(|d| d.get_i64(field).ok());
                match number {
                    Some(number) => number,
                    None => return Ok(None),
                }
            }
            Window::After { .. } => return Ok(None),
        };
        let want = limit_plus_one(window.limit());
        let docs: Vec<CommentDoc> = self
            .coll
            .find(doc! {
                "discussion_id": discussion.id.as_str(),
                field: { "$gt": after, "$lte": after.saturating_add(want) },
            })
            .sort(doc! { field: 1 })
            .await?
            .try_collect()
            .await?;
        // Every number up to the total the request knows must be there (a post that failed
        // without its transaction could leave one out).
        let total = i64::try_from(numbering.total(discussion)).unwrap_or(i64::MAX);
        let expected = want.min(total.saturating_sub(after).max(0));
        Ok(complete_page(
            discussion,
            docs,
            to_count(expected),
            window.limit(),
        ))
    }
}

impl PerComment {
    /// A threaded page of a discussion that keeps block counts of its threads, read as one
    /// range of whole threads (see `thread_blocks`). `None` when the counts cannot answer (a
    /// cursor that names no thread, a thread or a comment missing from what they promise); the
    /// caller then reads the page the general way.
    async fn threaded_page(
        &self,
        discussion: &Discussion,
        blocks: &[u64],
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        let want = u64::try_from(limit_plus_one(window.limit())).unwrap_or(u64::MAX);
        let id = discussion.id.as_str();
        let offset = match window {
            Window::Offset { skip, .. } => Some(*skip),
            Window::After { cursor: None, .. } => Some(0),
            Window::After { .. } => None,
        };
        let (range, skip, expected) = match (offset, window) {
            (Some(skip), _) => {
                let Some(span) = thread_blocks::span(blocks, skip, want) else {
                    return Ok(None);
                };
                let (first, _) = thread_blocks::threads_of(span.first);
                let (_, last) = thread_blocks::threads_of(span.last);
                let Some(roots) = self.roots(discussion, first, last).await? else {
                    return Ok(None);
                };
                let Some(cut) = thread_blocks::cut(&roots, skip - span.before, want) else {
                    return Ok(None);
                };
                let lo = roots[cut.first].full_slug.as_str().to_owned();
                let (_, hi) = roots[cut.last].full_slug.descendant_range();
                (doc! { "$gte": lo, "$lt": hi }, cut.skip, cut.expected)
            }
            (
                None,
                Window::After {
                    cursor: Some(Cursor::Threaded(after)),
                    ..
                },
            ) => {
                let root = after.ancestor_at(0);
                let found = self
                    .raw
                    .find_one(doc! { "discussion_id": id, "full_slug": root.as_str() })
                    .projection(doc! { "thread_seq": 1 })
                    .await?;
                let Some(thread) = found.and_then(|d| d.get_i64("thread_seq").ok()) else {
                    return Ok(None);
                };
                let next = i64::try_from(want).unwrap_or(i64::MAX / 2);
                let Some(later) = self.roots(discussion, thread + 1, thread + next).await? else {
                    return Ok(None);
                };
                let taken = thread_blocks::cover(&later, want);
                let (_, hi) = match taken {
                    0 => root.descendant_range(),
                    n => later[n - 1].full_slug.descendant_range(),
                };
                let promised: u64 = later[..taken].iter().map(|r| r.total).sum();
                (
                    doc! { "$gt": after.as_str(), "$lt": hi },
                    0,
                    promised.min(want),
                )
            }
            (None, _) => return Ok(None),
        };
        self.threaded_range(discussion, range, skip, want, expected, window.limit())
            .await
    }

    /// The comments in `range` of `full_slug`, in threaded order, `skip` of them skipped and at
    /// most `want` read: the page of `limit`, or `None` when fewer than `expected` came back
    /// (see [`complete_page`]).
    async fn threaded_range(
        &self,
        discussion: &Discussion,
        range: Document,
        skip: u64,
        want: u64,
        expected: u64,
        limit: usize,
    ) -> StoreResult<Option<Page<Comment>>> {
        let docs: Vec<CommentDoc> = self
            .coll
            .find(doc! { "discussion_id": discussion.id.as_str(), "full_slug": range })
            .sort(doc! { "full_slug": 1 })
            .skip(skip)
            .limit(i64::try_from(want).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?;
        Ok(complete_page(discussion, docs, expected, limit))
    }

    /// The top-level comments numbered `first ..= last` (fewer past the discussion's last
    /// thread), with their thread totals. `None` when one is missing or carries no total: the
    /// counts cannot be trusted then.
    async fn roots(
        &self,
        discussion: &Discussion,
        first: i64,
        last: i64,
    ) -> StoreResult<Option<Vec<thread_blocks::Root>>> {
        let docs: Vec<Document> = self
            .raw
            .find(doc! {
                "discussion_id": discussion.id.as_str(),
                "thread_seq": { "$gte": first, "$lte": last },
            })
            .projection(doc! { "_id": 0, "thread_seq": 1, "thread_total": 1, "full_slug": 1 })
            .sort(doc! { "thread_seq": 1 })
            .await?
            .try_collect()
            .await?;
        let known = i64::try_from(discussion.thread_count).unwrap_or(i64::MAX);
        let complete = i64::try_from(docs.len()).unwrap_or(i64::MAX) > last.min(known) - first;
        let mut roots = Vec::with_capacity(docs.len());
        for (expected, doc) in (first..).zip(docs) {
            let thread = doc.get_i64("thread_seq").ok();
            let total = doc.get("thread_total").and_then(as_i64);
            let full_slug = doc.get_str("full_slug").ok();
            match (thread, total, full_slug) {
                (Some(thread), Some(total), Some(full_slug)) if thread == expected => {
                    roots.push(thread_blocks::Root {
                        thread,
                        total: to_count(total),
                        full_slug: FullSlug::from_stored(full_slug.to_owned()),
                    });
                }
                _ => return Ok(None),
            }
        }
        Ok(complete.then_some(roots))
    }
}

impl PerComment {
    /// A page of `root`'s sub-discussion in a discussion whose comments carry subtree sizes,
    /// read as a range that ends where the sizes say the page ends (see `subtree`). `None` when
    /// the sizes cannot answer (another discussion, a cursor outside the sub-discussion or of
    /// another order, a comment without sizes, nothing after the start, a page shorter than the
    /// sizes promised); the caller then reads the page the general way.
    async fn sized_sub_page(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        root: &FullSlug,
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        if !discussion.subtree_sizes {
            return Ok(None);
        }
        let (skip, after) = match window {
            Window::Offset { skip, .. } => (*skip, None),
            Window::After { cursor: None, .. } => (0, None),
            Window::After {
                cursor: Some(Cursor::Threaded(after)),
                ..
            } => (0, Some(after)),
            Window::After { .. } => return Ok(None),
        };
        let Some(parents) = subtree::parents_after(root, after) else {
            return Ok(None);
        };
        let take = u64::try_from(limit_plus_one(window.limit())).unwrap_or(u64::MAX);
        let Some(replies) = self.reply_heads(scope, discussion, &parents).await? else {
            return Ok(None);
        };
        let mut heads: Vec<Head> = replies
            .into_iter()
            .flatten()
            .filter(|head| after.is_none_or(|after| head.full_slug > *after))
            .collect();
        heads.sort_by(|a, b| a.full_slug.cmp(&b.full_slug));
        if heads.is_empty() {
            return Ok(None);
        }
        let mut deeper = 0;
        let (from, skip, to, expected) = loop {
            match subtree::plan(&heads, skip, take, deeper < subtree::MAX_DEEPER) {
                Plan::Deeper(wide) => {
                    let parents: Vec<FullSlug> =
                        wide.iter().map(|&i| heads[i].full_slug.clone()).collect();
                    let Some(replies) = self.reply_heads(scope, discussion, &parents).await? else {
                        return Ok(None);
                    };
                    heads = subtree::widen(heads, &wide, replies);
                    deeper += 1;
                }
                Plan::Read {
                    from,
                    skip,
                    to,
                    expected,
                } => break (from, skip, to, expected),
            }
        };
        let lower = heads[from].full_slug.as_str();
        let upper = match to {
            Some(last) => heads[last].end(),
            None => root.descendant_range().1,
        };
        self.threaded_range(
            discussion,
            doc! { "$gte": lower, "$lt": upper },
            skip,
            take,
            expected,
            window.limit(),
        )
        .await
    }

    /// The replies of each of `parents` as heads of their subtrees, in threaded order, from the
    /// parents' `reply_sizes`: those this request read already, and the others in one query on
    /// the full slug index (an `$or` of equalities: one index point each). `None` when one of
    /// them is missing or keeps no sizes.
    async fn reply_heads(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[FullSlug],
    ) -> StoreResult<Option<Vec<Vec<Head>>>> {
        let id = &discussion.id;
        let missing: Vec<&FullSlug> = parents
            .iter()
            .filter(|p| scope.reply_sizes.get(id, &p.slug()).is_none())
            .collect();
        if !missing.is_empty() {
            let branches: Vec<Document> = missing
                .iter()
                .map(|full| doc! { "discussion_id": id.as_str(), "full_slug": full.as_str() })
                .collect();
            let docs: Vec<CommentDoc> = self
                .coll
                .find(doc! { "$or": branches })
                .await?
                .try_collect()
                .await?;
            for mut doc in docs {
                remember_sizes(scope, id, &mut doc);
            }
        }
        let mut out = Vec::with_capacity(parents.len());
        for parent in parents {
            let Some(sizes) = scope.reply_sizes.get(id, &parent.slug()) else {
                return Ok(None);
            };
            out.push(
                sizes
                    .into_iter()
                    .map(|(full, size)| Head::whole(full, i64::try_from(size).ok().map(|n| n - 1)))
                    .collect(),
            );
        }
        Ok(Some(out))
    }

    /// The sizes of `roots`' sub-discussions as their comments carry them (from the roots read
    /// in this request, or one query). `None` when the discussion does not keep them or a root
    /// does not carry them.
    async fn stored_sizes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<Option<HashMap<FullSlug, u64>>> {
        if !discussion.subtree_sizes || roots.is_empty() {
            return Ok(None);
        }
        let Some(replies) = self.reply_heads(scope, discussion, roots).await? else {
            return Ok(None);
        };
        Ok(Some(
            roots
                .iter()
                .cloned()
                .zip(
                    replies
                        .iter()
                        .map(|heads| heads.iter().filter_map(|h| h.size).sum()),
                )
                .collect(),
        ))
    }
}

/// Remembers in the request's scope the sizes of a stored comment's replies' subtrees, where
/// it carries them: a comment with its own size whose replies' sizes add up to it (one from
/// before the discussion kept sizes has none, and is read the general way).
fn remember_sizes(scope: &ReadScope, id: &DiscussionId, doc: &mut CommentDoc) {
    let Some(descendants) = doc.descendants else {
        return;
    };
    let full = FullSlug::from_stored(doc.full_slug.clone());
    let sizes = subtree::reply_sizes(&full, doc.reply_sizes.take().as_ref());
    let total: u64 = sizes.iter().map(|(_, n)| n).sum();
    if i64::try_from(total).ok() == Some(descendants) {
        scope
            .reply_sizes
            .remember(id, Slug::from_stored(doc.slug.clone()), sizes);
    }
}

/// The page of `docs` (fetched `limit + 1`), or `None` when fewer than `expected` came back: the
/// counts that bounded the read promised more, and the caller reads the general way.
fn complete_page(
    discussion: &Discussion,
    docs: Vec<CommentDoc>,
    expected: u64,
    limit: usize,
) -> Option<Page<Comment>> {
    if (docs.len() as u64) < expected {
        return None;
    }
    let items = docs
        .into_iter()
        .map(|d| d.into_comment(&discussion.id))
        .collect();
    Some(Page::from_overfetch(items, limit))
}

/// A first batch that holds `groups` results (the server still cuts a batch at 16 MB).
fn first_batch(groups: usize) -> u32 {
    u32::try_from(groups.saturating_add(1)).unwrap_or(u32::MAX)
}

/// How many items each group must keep so that the window can be cut from it.
fn group_take(window: &Window) -> i64 {
    let skip = match window {
        Window::Offset { skip, .. } => i64::try_from(*skip).unwrap_or(i64::MAX / 2),
        Window::After { .. } => 0,
    };
    skip.saturating_add(limit_plus_one(window.limit()))
}

/// Roots grouped by depth: roots of one depth have full slugs of one length and cannot nest, so
/// a prefix of that length names the root a descendant belongs to.
fn roots_by_len(roots: &[FullSlug]) -> BTreeMap<usize, Vec<&FullSlug>> {
    let mut groups: BTreeMap<usize, Vec<&FullSlug>> = BTreeMap::new();
    for root in roots {
        groups.entry(root.as_str().len()).or_default().push(root);
    }
    groups
}

fn ranges(roots: &[&FullSlug]) -> Vec<Document> {
    roots
        .iter()
        .map(|root| {
            let (lo, hi) = root.descendant_range();
            doc! { "full_slug": { "$gte": lo, "$lt": hi } }
        })
        .collect()
}

/// A post in progress: the time the next try must come after (the discussion's latest comment,
/// once a try learned it), and, where the discussion keeps block counts of its threads, the
/// parent's thread (replies) or the discussion's thread count as last known (new threads).
pub(super) struct PostState {
    floor: Option<Micros>,
    thread: Option<i64>,
    threads: i64,
}

impl PerComment {
    /// Whether this post numbers its comment (inside its transaction).
    fn numbers(&self, discussion: &Discussion) -> bool {
        discussion.sequenced && self.writer.transactions
    }

    /// Whether this post counts its comment in its thread and its block of threads (inside its
    /// transaction).
    fn counts_threads(&self, discussion: &Discussion) -> bool {
        self.numbers(discussion) && discussion.thread_blocks.is_some()
    }

    /// Whether this post counts its comment in the subtree size of every ancestor (inside its
    /// transaction).
    fn sizes_subtrees(&self, discussion: &Discussion) -> bool {
        self.numbers(discussion) && discussion.subtree_sizes
    }

    /// Where the comment counts among the discussion's threads (`None` where it keeps no block
    /// counts).
    fn place(&self, discussion: &Discussion, state: &PostState) -> Option<ThreadPlace> {
        if !self.counts_threads(discussion) {
            return None;
        }
        Some(match state.thread {
            Some(thread) => ThreadPlace::In(thread),
            None => ThreadPlace::New {
                threads: state.threads,
            },
        })
    }
}

#[async_trait]
impl PostSteps for PerComment {
    type State = PostState;

    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        _part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, PostState)> {
        let mut state = PostState {
            floor: None,
            thread: None,
            threads: i64::try_from(discussion.thread_count).unwrap_or(i64::MAX),
        };
        let Some(slug) = parent else {
            return Ok((None, state));
        };
        let found = self
            .coll
            .find_one(doc! { "discussion_id": discussion.id.as_str(), "slug": slug.as_str() })
            .await?
            .ok_or_else(|| {
                StoreError::NotFound(format!("no comment {slug} in discussion {}", discussion.id))
            })?;
        if self.counts_threads(discussion) {
            state.thread = Some(found.thread.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "comment {slug} of {} has no thread number",
                    discussion.id
                ))
            })?);
        }
        Ok((Some((&found.into_comment(&discussion.id)).into()), state))
    }

    /// The parent's paths and thread never change, and a new thread's block is checked by the
    /// numbering itself: the read overlaps the post ahead.
    fn prepares_before_turn(&self) -> bool {
        true
    }

    /// In a sequenced discussion a comment comes after the latest one, so that numbers follow
    /// the chronological order.
    fn floor(&self, state: &PostState, _parent: Option<&Slug>) -> Option<Micros> {
        state.floor
    }

    /// In a sequenced discussion: number the comment (refused when another post came in with a
    /// later time: learn that time and try again after it), then insert it; otherwise insert it.
    async fn attempt(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &mut PostState,
        session: &mut ClientSession,
    ) -> StoreResult<Attempt> {
        let mut stored = CommentDoc::from_comment(comment, true);
        if self.numbers(discussion) {
            let place = self.place(discussion, state);
            match self
                .discussions
                .number(&discussion.id, comment, place, &mut *session)
                .await?
            {
                Some((seq, thread_seq)) => {
                    stored.seq = Some(seq);
                    stored.thread_seq = thread_seq;
                    if place.is_some() {
                        stored.thread = thread_seq.or(state.thread);
                        stored.thread_total = thread_seq.map(|_| 1);
                    }
                    if self.sizes_subtrees(discussion) {
                        stored.descendants = Some(0);
                    }
                }
                None => {
                    (state.floor, state.threads) =
                        self.discussions.post_floor(&discussion.id).await?;
                    return Ok(Attempt::Retry);
                }
            }
        }
        match self.coll.insert_one(stored).session(session).await {
            Ok(_) => Ok(Attempt::Stored),
            Err(err) if is_duplicate_key(&err) => Ok(Attempt::Retry),
            Err(err) => Err(err.into()),
        }
    }

    async fn count(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        _state: &PostState,
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        if let Some(parent) = &comment.parent {
            // The parent's reply count, where the discussion counts threads the root's thread
            // total, and where it keeps subtree sizes every ancestor's: one statement per
            // ancestor that counts something (each by the unique slug index), one command.
            let id = discussion.id.as_str();
            let at = |slug: &Slug| doc! { "discussion_id": id, "slug": slug.as_str() };
            let threads = self.counts_threads(discussion);
            let sizes = self.sizes_subtrees(discussion);
            let mut statements = Vec::new();
            for depth in 0..comment.slug.depth() {
                let ancestor = comment.slug.ancestor_at(depth);
                let mut inc = Document::new();
                if ancestor == *parent {
                    inc.insert("reply_count", 1_i64);
                }
                if threads && depth == 0 {
                    inc.insert("thread_total", 1_i64);
                }
                if sizes {
                    inc.insert(subtree::DESCENDANTS, 1_i64);
                    inc.insert(subtree::reply_size_path(&comment.full_slug, depth), 1_i64);
                }
                if !inc.is_empty() {
                    statements.push(doc! { "q": at(&ancestor), "u": { "$inc": inc } });
                }
            }
            let reply = self
                .raw
                .update_statements(statements, self.writer.transactions, session)
                .await?;
            if let Ok(errors) = reply.get_array("writeErrors") {
                return Err(StoreError::Corrupt(format!(
                    "counting reply {} in {id}: {errors:?}",
                    comment.slug
                )));
            }
        }
        if self.numbers(discussion) {
            // Numbering counted it already.
            return Ok(());
        }
        self.discussions
            .record_post(discussion, comment, session)
            .await
    }
}

#[async_trait]
impl CommentStore for PerComment {
    async fn post_comment(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted> {
        write::post(self, &self.writer, discussion, &new).await
    }

    async fn replace(
        &self,
        _scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool> {
        let mut filter = unchanged_filter("", current)?;
        filter.insert("discussion_id", discussion.id.as_str());
        write::replace_outside(
            &self.writer,
            &self.discussions,
            (&discussion.id, &next.slug),
            &self.coll,
            filter,
            replace_update("", next)?,
        )
        .await
    }

    async fn list(
        &self,
        _scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        let numbered = match listing {
            Listing::Chronological => Some(Numbering::ALL),
            Listing::Threads => Some(Numbering::THREADS),
            Listing::Threaded => None,
        };
        if let (Some(numbering), true) = (numbered, discussion.sequenced) {
            if let Some(page) = self.numbered_page(discussion, numbering, window).await? {
                return Ok(page);
            }
        }
        if let (Listing::Threaded, true, Some(blocks)) = (
            listing,
            discussion.sequenced,
            discussion.thread_blocks.as_deref(),
        ) {
            if let Some(page) = self.threaded_page(discussion, blocks, window).await? {
                return Ok(page);
            }
        }
        let mut filter = doc! { "discussion_id": discussion.id.as_str() };
        let sort = match listing {
            Listing::Chronological => doc! { "posted": 1, "slug": 1 },
            Listing::Threaded => doc! { "full_slug": 1 },
            Listing::Threads => {
                filter.insert("parent", Bson::Null);
                doc! { "posted": 1, "slug": 1 }
            }
        };
        self.find_page(discussion, filter, sort, window).await
    }

    /// Comments by slug; where the discussion keeps subtree sizes, the request remembers each
    /// one's replies' sizes (a page of its sub-discussion then starts from them).
    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Comment>> {
        let slugs: Vec<&str> = slugs.iter().map(Slug::as_str).collect();
        let docs: Vec<CommentDoc> = self
            .coll
            .find(doc! { "discussion_id": discussion.id.as_str(), "slug": { "$in": slugs } })
            .await?
            .try_collect()
            .await?;
        Ok(docs
            .into_iter()
            .map(|mut d| {
                if discussion.subtree_sizes {
                    remember_sizes(scope, &discussion.id, &mut d);
                }
                d.into_comment(&discussion.id)
            })
            .collect())
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Comment>>> {
        let mut result: HashMap<Slug, Page<Comment>> = parents
            .iter()
            .map(|p| (p.clone(), Page::from_overfetch(Vec::new(), 0)))
            .collect();
        if parents.is_empty() {
            return Ok(result);
        }
        // The replies of one comment whose replies' sizes the request read: the page ends at a
        // known reply, so the read stops at its time instead of reading every reply.
        let bound = match parents {
            [parent] => scope
                .reply_sizes
                .get(&discussion.id, parent)
                .and_then(|sizes| subtree::replies_bound(&sizes, window)),
            _ => None,
        };
        let mut pages = self
            .replies_read(discussion, parents, window, bound)
            .await?;
        let full = |pages: &[(String, Page<Comment>)]| {
            pages
                .iter()
                .any(|(_, p)| p.has_next && p.items.len() == window.limit())
        };
        if bound.is_some() && !full(&pages) {
            // The sizes promised more replies before the bound than there are: read them all.
            pages = self.replies_read(discussion, parents, window, None).await?;
        }
        for (parent, page) in pages {
            result.insert(Slug::from_stored(parent), page);
        }
        Ok(result)
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Comment>>> {
        let mut result: HashMap<FullSlug, Page<Comment>> = HashMap::new();
        for (len, group) in roots_by_len(roots) {
            if let [root] = group.as_slice() {
                if let Some(page) = self.sized_sub_page(scope, discussion, root, window).await? {
                    result.insert((*root).clone(), page);
                    continue;
                }
                let (lo, hi) = root.descendant_range();
                let filter = doc! {
                    "discussion_id": discussion.id.as_str(),
                    "full_slug": { "$gte": lo, "$lt": hi },
                };
                let mut filter = filter;
                if let Window::After {
                    cursor: Some(cursor),
                    ..
                } = window
                {
                    filter = doc! { "$and": [filter, after_filter(cursor)] };
                }
                let page = self
                    .find_page(
                        discussion,
                        filter,
                        doc! { "full_slug": 1 },
                        &strip_cursor(window),
                    )
                    .await?;
                result.insert((*root).clone(), page);
                continue;
            }
            let mut filter = doc! {
                "discussion_id": discussion.id.as_str(),
                "$or": ranges(&group),
            };
            if let Window::After {
                cursor: Some(cursor),
                ..
            } = window
            {
                filter = doc! { "$and": [filter, after_filter(cursor)] };
            }
            let pipeline = vec![
                doc! { "$match": filter },
                doc! { "$sort": { "full_slug": 1 } },
                doc! { "$group": {
                    "_id": { "$substrBytes": ["$full_slug", 0, i64::try_from(len).unwrap_or(0)] },
                    "items": { "$firstN": { "input": "$$ROOT", "n": group_take(window) } },
                } },
            ];
            for (root, page) in self
                .grouped_pages(discussion, pipeline, group.len(), window)
                .await?
            {
                result.insert(FullSlug::from_stored(root), page);
            }
        }
        for root in roots {
            result
                .entry(root.clone())
                .or_insert_with(|| Page::from_overfetch(Vec::new(), 0));
        }
        Ok(result)
    }

    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        if let Some(counts) = self.stored_sizes(scope, discussion, roots).await? {
            return Ok(counts);
        }
        let mut result: HashMap<FullSlug, u64> = roots.iter().map(|r| (r.clone(), 0)).collect();
        for (len, group) in roots_by_len(roots) {
            let pipeline = vec![
                doc! { "$match": {
                    "discussion_id": discussion.id.as_str(),
                    "$or": ranges(&group),
                } },
                doc! { "$group": {
                    "_id": { "$substrBytes": ["$full_slug", 0, i64::try_from(len).unwrap_or(0)] },
                    "n": { "$sum": 1 },
                } },
            ];
            let groups: Vec<Document> = self
                .raw
                .aggregate(pipeline)
                .batch_size(first_batch(group.len()))
                .await?
                .try_collect()
                .await?;
            for group in groups {
                let root = group.get_str("_id").map_err(corrupt)?.to_owned();
                result.insert(
                    FullSlug::from_stored(root),
                    to_count(int_field(&group, "n")?),
                );
            }
        }
        Ok(result)
    }
}

/// The window with its cursor already applied as a filter.
fn strip_cursor(window: &Window) -> Window {
    match window {
        Window::After { limit, .. } => Window::After {
            cursor: None,
            limit: *limit,
        },
        other => other.clone(),
    }
}

#[async_trait]
impl Movable for PerComment {
    async fn clear(&self, id: &DiscussionId) -> StoreResult<()> {
        self.coll
            .delete_many(doc! { "discussion_id": id.as_str() })
            .await?;
        self.discussions.forget_counts(id).await
    }

    /// One document per comment, inserted in chunks; numbered in posting order, and counted in
    /// its thread and block of threads, where the deployment numbers new discussions (the
    /// numbering of posts needs transactions).
    async fn import(
        &self,
        _discussion: &Discussion,
        comments: &[Comment],
        lease: &Lease<'_>,
    ) -> StoreResult<Document> {
        let sequenced = self.writer.transactions;
        // Threads are numbered in posting order of their top-level comments; a reply counts in
        // its top-level ancestor's thread.
        let mut threads: HashMap<&str, (i64, i64)> = HashMap::new();
        for comment in comments.iter().filter(|c| c.parent.is_none()) {
            let number = i64::try_from(threads.len()).unwrap_or(i64::MAX) + 1;
            threads.insert(comment.slug.as_str(), (number, 0));
        }
        let mut blocks: Vec<u64> = Vec::new();
        let mut thread_of = Vec::with_capacity(comments.len());
        for comment in comments {
            let root = comment.slug.ancestor_at(0);
            let entry = threads.get_mut(root.as_str()).ok_or_else(|| {
                StoreError::Corrupt(format!("comment {} has no top-level comment", comment.slug))
            })?;
            entry.1 += 1;
            let block = usize::try_from(thread_blocks::block_of(entry.0)).unwrap_or(0);
            if blocks.len() <= block {
                blocks.resize(block + 1, 0);
            }
            blocks[block] += 1;
            thread_of.push(entry.0);
        }
        // Every comment counts in the subtree size of each of its ancestors.
        let mut descendants: HashMap<Slug, (i64, Document)> = HashMap::new();
        if sequenced {
            for comment in comments {
                for depth in 0..comment.slug.depth() {
                    let (count, sizes) = descendants
                        .entry(comment.slug.ancestor_at(depth))
                        .or_default();
                    *count += 1;
                    let reply = subtree::reply_segment(&comment.full_slug, depth);
                    let n = sizes.get(reply).and_then(as_i64).unwrap_or(0);
                    sizes.insert(reply, n + 1);
                }
            }
        }
        let mut seq = 0_i64;
        let mut done = 0_u64;
        for (chunk, chunk_threads) in comments
            .chunks(lease.chunk())
            .zip(thread_of.chunks(lease.chunk()))
        {
            let docs: Vec<CommentDoc> = chunk
                .iter()
                .zip(chunk_threads)
                .map(|(comment, &thread)| {
                    let mut stored = CommentDoc::from_comment(comment, true);
                    if sequenced {
                        seq += 1;
                        stored.seq = Some(seq);
                        stored.thread = Some(thread);
                        let (count, sizes) = descendants.remove(&comment.slug).unwrap_or_default();
                        stored.descendants = Some(count);
                        stored.reply_sizes = (!sizes.is_empty()).then_some(sizes);
                        if comment.parent.is_none() {
                            stored.thread_seq = Some(thread);
                            stored.thread_total =
                                threads.get(comment.slug.as_str()).map(|&(_, total)| total);
                        }
                    }
                    stored
                })
                .collect();
            self.coll.insert_many(docs).await?;
            done += chunk.len() as u64;
            lease.written(done).await?;
        }
        let mut fields = doc! { "sequenced": sequenced, SUBTREE_SIZES: sequenced };
        if sequenced {
            fields.insert(thread_blocks::FIELD, thread_blocks::stored(&blocks));
        }
        if let Some(last) = comments.last() {
            fields.insert(LAST_POSTED, last.posted.0);
        }
        Ok(fields)
    }
}
