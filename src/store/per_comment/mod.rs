//! The per-comment layout: one document per comment in `comments` ("One Document per Comment").

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};
use mongodb::Database;

use crate::store::discussions::Discussions;
use crate::store::shared::bson::corrupt;
use crate::store::shared::connect::index_model as index;
use crate::store::shared::docs::raw_comment_of;
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Counted;
use crate::store::shared::order::{cursor_filter, limit_plus_one, sort_toward};
use crate::store::shared::sharding::{KeyKind, ShardKey};
use crate::store::shared::writer::Writer;
mod authored;
pub mod hints;
mod moving;
mod numbered;
mod numbering;
mod reads;
mod sizes;
mod subtree;
mod thread_blocks;
mod write;

use crate::domain::{Comment, Discussion, FullSlug, Page, Slug, Window};

/// The per-comment layout's slot of a request's scope.
#[derive(Default)]
pub(crate) struct Kept {
    /// For comments read so far that keep them, their replies with the size of each one's
    /// subtree (the reply included), in threaded order.
    pub(crate) reply_sizes: crate::store::shared::scope::BySlug<Vec<(FullSlug, u64)>>,
    /// The document id of each comment read by slug: a guarded update of it then names its
    /// `_id` first (see `PerComment::guard`).
    pub(crate) ids: crate::store::shared::scope::BySlug<mongodb::bson::Bson>,
}

/// The per-comment layout.
pub struct PerComment {
    coll: Counted<CommentDoc>,
    raw: Counted<Document>,
    discussions: Discussions,
    /// Its counters on the discussion documents.
    counters: numbering::Counters,
    writer: Writer,
}

impl PerComment {
    /// Name of the collection.
    pub const COLLECTION: &'static str = "comments";

    /// Its shard key: its unique index, discussion then slug.
    pub const SHARD_KEY: ShardKey = ShardKey {
        collection: Self::COLLECTION,
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("slug", KeyKind::Ranged),
        ],
        unique: true,
    };

    pub(crate) fn new(db: &Database, discussions: Discussions, writer: Writer) -> Self {
        Self {
            coll: Counted::new(db, Self::COLLECTION, &writer.commands),
            raw: Counted::new(db, Self::COLLECTION, &writer.commands),
            counters: numbering::Counters {
                discussions: discussions.raw(),
            },
            discussions,
            writer,
        }
    }

    /// Its fields on the discussion document.
    pub(crate) fn fields(transactions: bool) -> hints::Fields {
        hints::Fields {
            sequences: transactions,
        }
    }

    /// The collection's indexes.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
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
                authored::index(),
            ])
            .await?;
        // An earlier version's index of an author's history, by id (none on a new database).
        self.coll.retire_index(authored::RETIRED_INDEX).await;
        Ok(())
    }

    /// A page of the comments `filter` matches, in the order of `fields`, read the general way:
    /// a sort (descending for a backward window), the cursor as a filter, an offset as a skip.
    pub(super) async fn find_page(
        &self,
        discussion: &Discussion,
        mut filter: Document,
        fields: &[&str],
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        if let Some(cursor) = cursor_filter(window) {
            filter.extend(cursor);
        }
        let skip = match window {
            Window::Offset { skip, .. } | Window::FromEnd { skip, .. } => *skip,
            Window::After { .. } | Window::Before { .. } => 0,
        };
        let backward = window.is_backward();
        let mut docs: Vec<CommentDoc> = self
            .coll
            .find(filter)
            .sort(sort_toward(fields, backward))
            .skip(skip)
            .limit(limit_plus_one(window.limit()))
            .await?
            .try_collect()
            .await?;
        if backward {
            docs.reverse();
        }
        let items = docs
            .into_iter()
            .map(|d| d.into_comment(&discussion.id))
            .collect();
        Ok(window.page(items))
    }

    /// The replies of `parents` in `window`, from one aggregation over the replies index; with
    /// a `bound`, only the replies posted at or before (forward) or at or after (backward) that
    /// time are read.
    pub(super) async fn replies_read(
        &self,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
        bound: Option<i64>,
    ) -> StoreResult<Vec<(String, Page<Comment>)>> {
        // One parent is an equality, so that with a range on `posted` (a cursor's, the bound's)
        // the index bounds are one point of `parent` and one range of `posted`; a one-element
        // `$in` leaves that to the planner.
        let parent = match parents {
            [one] => Bson::from(one.as_str()),
            _ => Bson::from(doc! { "$in": parents.iter().map(Slug::as_str).collect::<Vec<_>>() }),
        };
        let mut filter = doc! { "discussion_id": discussion.id.as_str(), "parent": parent };
        // A cursor's `posted >= t` (`<=` backward) goes into the index range; its tie-break
        // (`$or`) is a stage of its own, applied to what the range read, so that no planner can
        // turn the `$or` into a scan of the discussion.
        let mut tie_break = None;
        if let Some(mut cursor) = cursor_filter(window) {
            if let Some(branches) = cursor.remove("$or") {
                tie_break = Some(doc! { "$match": { "$or": branches } });
            }
            filter.extend(cursor);
        }
        let backward = window.is_backward();
        if let Some(bound) = bound {
            let mut posted = filter.get_document("posted").cloned().unwrap_or_default();
            posted.insert(if backward { "$gte" } else { "$lte" }, bound);
            filter.insert("posted", posted);
        }
        let direction = if backward { -1 } else { 1 };
        let mut pipeline = vec![doc! { "$match": filter }];
        pipeline.extend(tie_break);
        pipeline.extend([
            doc! { "$sort": { "parent": direction, "posted": direction, "slug": direction } },
            doc! { "$group": {
                "_id": "$parent",
                "items": { "$firstN": { "input": "$$ROOT", "n": group_take(window) } },
            } },
        ]);
        self.grouped_pages(discussion, pipeline, parents.len(), window)
            .await
    }

    /// Runs a `$group` pipeline whose groups (at most `groups`) hold an `items` array of comment
    /// documents, read toward the window's direction (descending for a backward window). Every
    /// group comes in the first batch, so a level of a tree is one round trip however many
    /// parents it has; the groups are read as raw BSON and each item is decoded once, straight
    /// into a comment.
    pub(super) async fn grouped_pages(
        &self,
        discussion: &Discussion,
        pipeline: Vec<Document>,
        groups: usize,
        window: &Window,
    ) -> StoreResult<Vec<(String, Page<Comment>)>> {
        let skip = match window {
            Window::Offset { skip, .. } | Window::FromEnd { skip, .. } => {
                usize::try_from(*skip).unwrap_or(usize::MAX)
            }
            Window::After { .. } | Window::Before { .. } => 0,
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
                let mut items = group
                    .get_array("items")
                    .map_err(corrupt)?
                    .into_iter()
                    .skip(skip)
                    .map(|item| raw_comment_of(item.map_err(corrupt)?, &discussion.id))
                    .collect::<StoreResult<Vec<_>>>()?;
                if window.is_backward() {
                    items.reverse();
                }
                Ok((key, window.page(items)))
            })
            .collect()
    }
}

/// A first batch that holds `groups` results (the server still cuts a batch at 16 MB).
pub(super) fn first_batch(groups: usize) -> u32 {
    u32::try_from(groups.saturating_add(1)).unwrap_or(u32::MAX)
}

/// How many items each group must keep, read toward the window's direction, so that the window
/// can be cut from it.
pub(super) fn group_take(window: &Window) -> i64 {
    let skip = match window {
        Window::Offset { skip, .. } | Window::FromEnd { skip, .. } => {
            i64::try_from(*skip).unwrap_or(i64::MAX / 2)
        }
        Window::After { .. } | Window::Before { .. } => 0,
    };
    skip.saturating_add(limit_plus_one(window.limit()))
}
