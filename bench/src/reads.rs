//! The reads measured: each as one GraphQL request and as the same store calls made in-process.

use std::collections::HashMap;

use anyhow::{bail, Context as _};
use serde::Serialize;
use serde_json::{json, Value};
use threadql::domain::{
    Comment, Cursor, CursorKind, Discussion, DiscussionId, Page, Rank, Slug, Window,
};
use threadql::store::{Listing, Ranked, RankedOf, ReadScope, Storage, Store};

/// Comments per page in the paged reads.
pub(crate) const PAGE: usize = 50;
/// Top-level threads in the tree read.
pub(crate) const TREE_THREADS: usize = 20;
/// Replies per comment in the tree read.
pub(crate) const TREE_REPLIES: usize = 10;
/// Levels of replies under each thread in the tree read.
pub(crate) const TREE_LEVELS: usize = 4;
/// Offset of the deep page (smaller for discussions that are not that long).
pub(crate) const DEEP_OFFSET: u64 = 10_000;

/// What the paged reads select of a comment connection.
const CONNECTION: &str = "nodes { ...F } pageInfo { hasNextPage endCursor }";
/// The fields read for every comment.
const FIELDS: &str = "fragment F on Comment { id slug fullSlug parentSlug depth posted editedAt deleted author { id name } text replyCount }";
/// The same fields and the text rendered as HTML.
const FIELDS_HTML: &str = "fragment F on Comment { id slug fullSlug parentSlug depth posted editedAt deleted author { id name } text html replyCount }";

/// One kind of read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Read {
    /// The first 50 comments, chronological.
    FirstPage,
    /// The same page with each comment's `html` too (what rendering Markdown costs).
    FirstPageHtml,
    /// 50 comments at the deep offset, by `offset`.
    OffsetPage,
    /// The same 50 comments, by cursor (`after`).
    CursorPage,
    /// 20 threads with 4 levels of replies (10 per comment).
    Tree,
    /// One comment by slug.
    DirectLink,
    /// The first 50 comments of the largest thread's sub-discussion.
    SubDiscussion,
    /// The first 50 top-level comments (`threads`).
    Threads,
    /// The first 50 comments in threaded order.
    ThreadedFirst,
    /// 50 comments at the deep offset in threaded order.
    ThreadedOffset,
    /// The same 50 comments by cursor, in threaded order.
    ThreadedCursor,
    /// The first 50 replies of the comment with the most direct replies.
    Replies,
    /// The first 50 comments newest first.
    NewestFirst,
    /// The first 50 top-level comments newest first.
    NewestThreads,
    /// The 50 comments before a cursor deep in the list (`last`/`before`), chronological.
    BackwardPage,
    /// The 50 comments before a cursor deep in the list, in threaded order.
    ThreadedBackward,
    /// The first 50 replies of the comment with the most direct replies, newest first.
    NewestReplies,
    /// The last 50 comments of the largest thread's sub-discussion (`last`).
    SubDiscussionLast,
    /// The first 50 comments in the TOP order (by score).
    TopFirst,
    /// The 50 comments after a cursor at the deep offset, in the TOP order.
    TopCursor,
    /// The first 50 comments in the BEST order.
    BestFirst,
    /// The 50 comments after a cursor at the deep offset, in the BEST order.
    BestCursor,
}

impl Read {
    /// Every read, in report order.
    pub(crate) const ALL: [Read; 22] = [
        Read::FirstPage,
        Read::FirstPageHtml,
        Read::OffsetPage,
        Read::CursorPage,
        Read::NewestFirst,
        Read::BackwardPage,
        Read::ThreadedFirst,
        Read::ThreadedOffset,
        Read::ThreadedCursor,
        Read::ThreadedBackward,
        Read::Threads,
        Read::NewestThreads,
        Read::Tree,
        Read::DirectLink,
        Read::Replies,
        Read::NewestReplies,
        Read::SubDiscussion,
        Read::SubDiscussionLast,
        Read::TopFirst,
        Read::TopCursor,
        Read::BestFirst,
        Read::BestCursor,
    ];

    /// A short name for tables.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Read::FirstPage => "first page (50)",
            Read::FirstPageHtml => "first page with html (50)",
            Read::OffsetPage => "deep page by offset",
            Read::CursorPage => "deep page by cursor",
            Read::Tree => "tree 20×4 levels",
            Read::DirectLink => "direct link",
            Read::SubDiscussion => "sub-discussion (50)",
            Read::Threads => "threads (50)",
            Read::ThreadedFirst => "threaded first page (50)",
            Read::ThreadedOffset => "threaded deep page by offset",
            Read::ThreadedCursor => "threaded deep page by cursor",
            Read::Replies => "replies of the busiest comment (50)",
            Read::NewestFirst => "newest first page (50)",
            Read::NewestThreads => "newest threads (50)",
            Read::BackwardPage => "deep page backward (last 50 before)",
            Read::ThreadedBackward => "threaded deep page backward (last 50 before)",
            Read::NewestReplies => "newest replies of the busiest comment (50)",
            Read::SubDiscussionLast => "sub-discussion, last 50",
            Read::TopFirst => "TOP first page (50)",
            Read::TopCursor => "TOP deep page by cursor",
            Read::BestFirst => "BEST first page (50)",
            Read::BestCursor => "BEST deep page by cursor",
        }
    }

    /// The ranked order and whether the read starts at the deep cursor, for the ranked reads.
    pub(crate) fn ranked(self) -> Option<(Rank, bool)> {
        match self {
            Read::TopFirst => Some((Rank::Top, false)),
            Read::TopCursor => Some((Rank::Top, true)),
            Read::BestFirst => Some((Rank::Best, false)),
            Read::BestCursor => Some((Rank::Best, true)),
            _ => None,
        }
    }
}

/// What the reads point at, fixed once per discussion.
#[derive(Debug, Clone)]
pub(crate) struct Fixtures {
    /// The discussion.
    pub discussion: DiscussionId,
    /// The deep page's offset.
    pub deep_offset: u64,
    /// The cursor of the comment right before the deep offset (chronological).
    pub deep_cursor: Cursor,
    /// The direct link's target.
    pub link: Slug,
    /// The sub-discussion's root.
    pub sub_root: Slug,
    /// The cursor of the comment right before the deep offset in threaded order.
    pub deep_threaded_cursor: Cursor,
    /// The cursor of the comment right after the deep page (the last comment, in a discussion
    /// that ends there), chronological: a backward page before it holds the deep page.
    pub deep_end_cursor: Cursor,
    /// The same in threaded order.
    pub deep_end_threaded_cursor: Cursor,
    /// The comment with the most direct replies.
    pub busiest: Slug,
    /// The cursor of the comment right before the deep offset in the TOP order.
    pub deep_top_cursor: Cursor,
    /// The same in the BEST order.
    pub deep_best_cursor: Cursor,
}

impl Fixtures {
    /// Picks the deep offset for a discussion of `comments` and reads the matching cursor.
    pub(crate) async fn new(
        store: &Store,
        discussion: &Discussion,
        link: Slug,
        sub_root: Slug,
        busiest: Slug,
    ) -> anyhow::Result<Fixtures> {
        let comments = discussion.comment_count;
        let deep_offset = DEEP_OFFSET.min(comments.saturating_sub(PAGE as u64)).max(1);
        let deep_end = (deep_offset + PAGE as u64).min(comments.saturating_sub(1));
        let cursor_at = |at: u64, listing: Listing, kind: CursorKind| async move {
            let before = store
                .layout(discussion.layout)?
                .list(
                    &ReadScope::new(),
                    discussion,
                    listing,
                    &Window::Offset { skip: at, limit: 1 },
                )
                .await?;
            let last = before
                .items
                .first()
                .context("the discussion is shorter than the deep offset")?;
            anyhow::Ok(Cursor::of_comment(last, kind))
        };
        // A ranked cursor carries the walk (the discussion's vote number) of the page it came
        // from, as a client's next page does.
        let ranked_at = |at: u64, rank: Rank| async move {
            let before = store
                .votes()
                .ranked(
                    &ReadScope::new(),
                    discussion,
                    Ranked {
                        rank,
                        of: RankedOf::Comments,
                    },
                    &Window::Offset { skip: at, limit: 1 },
                )
                .await?;
            let last = before
                .page
                .items
                .first()
                .context("the ranked list is shorter than the deep offset")?;
            anyhow::Ok(Cursor::ranked(rank, last, before.walk))
        };
        let (chronological, threaded) = (
            (Listing::Chronological, CursorKind::Chronological),
            (Listing::Threaded, CursorKind::Threaded),
        );
        Ok(Fixtures {
            discussion: discussion.id.clone(),
            deep_offset,
            deep_cursor: cursor_at(deep_offset - 1, chronological.0, chronological.1).await?,
            deep_threaded_cursor: cursor_at(deep_offset - 1, threaded.0, threaded.1).await?,
            deep_end_cursor: cursor_at(deep_end, chronological.0, chronological.1).await?,
            deep_end_threaded_cursor: cursor_at(deep_end, threaded.0, threaded.1).await?,
            deep_top_cursor: ranked_at(deep_offset - 1, Rank::Top).await?,
            deep_best_cursor: ranked_at(deep_offset - 1, Rank::Best).await?,
            link,
            sub_root,
            busiest,
        })
    }

    /// The deep cursor of a ranked order (Controversial is not measured: TOP's).
    fn deep_ranked_cursor(&self, rank: Rank) -> &Cursor {
        match rank {
            Rank::Best => &self.deep_best_cursor,
            Rank::Top | Rank::Controversial => &self.deep_top_cursor,
        }
    }

    /// The read as a GraphQL query and its variables.
    pub(crate) fn graphql(&self, read: Read) -> (String, Value) {
        let d = self.discussion.as_str();
        let page = CONNECTION;
        let (body, variables) = match read {
            Read::FirstPage | Read::FirstPageHtml => first_page_body(&self.discussion),
            Read::OffsetPage => (
                format!("query($d: ID!, $o: Int!) {{ discussion(id: $d) {{ comments(first: {PAGE}, offset: $o) {{ {page} }} }} }}"),
                json!({ "d": d, "o": self.deep_offset }),
            ),
            Read::CursorPage => (
                format!("query($d: ID!, $c: String!) {{ discussion(id: $d) {{ comments(first: {PAGE}, after: $c) {{ {page} }} }} }}"),
                json!({ "d": d, "c": self.deep_cursor.encode() }),
            ),
            Read::Tree => {
                let mut level = String::from("...F");
                for _ in 0..TREE_LEVELS {
                    level = format!(
                        "...F replies(first: {TREE_REPLIES}) {{ nodes {{ {level} }} }}"
                    );
                }
                (
                    format!("query($d: ID!) {{ discussion(id: $d) {{ threads(first: {TREE_THREADS}) {{ nodes {{ {level} }} }} }} }}"),
                    json!({ "d": d }),
                )
            }
            Read::DirectLink => (
                "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { ...F } }"
                    .to_owned(),
                json!({ "d": d, "s": self.link.as_str() }),
            ),
            Read::SubDiscussion => (
                format!("query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ slug subDiscussion(first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d, "s": self.sub_root.as_str() }),
            ),
            Read::Threads => (
                format!("query($d: ID!) {{ discussion(id: $d) {{ threads(first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d }),
            ),
            Read::ThreadedFirst => (
                format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: THREADED, first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d }),
            ),
            Read::ThreadedOffset => (
                format!("query($d: ID!, $o: Int!) {{ discussion(id: $d) {{ comments(order: THREADED, first: {PAGE}, offset: $o) {{ {page} }} }} }}"),
                json!({ "d": d, "o": self.deep_offset }),
            ),
            Read::ThreadedCursor => (
                format!("query($d: ID!, $c: String!) {{ discussion(id: $d) {{ comments(order: THREADED, first: {PAGE}, after: $c) {{ {page} }} }} }}"),
                json!({ "d": d, "c": self.deep_threaded_cursor.encode() }),
            ),
            Read::Replies => (
                format!("query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ slug replies(first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d, "s": self.busiest.as_str() }),
            ),
            Read::NewestFirst => (
                format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: NEWEST, first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d }),
            ),
            Read::NewestThreads => (
                format!("query($d: ID!) {{ discussion(id: $d) {{ threads(order: NEWEST, first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d }),
            ),
            Read::BackwardPage => (
                format!("query($d: ID!, $c: String!) {{ discussion(id: $d) {{ comments(last: {PAGE}, before: $c) {{ {page} }} }} }}"),
                json!({ "d": d, "c": self.deep_end_cursor.encode() }),
            ),
            Read::ThreadedBackward => (
                format!("query($d: ID!, $c: String!) {{ discussion(id: $d) {{ comments(order: THREADED, last: {PAGE}, before: $c) {{ {page} }} }} }}"),
                json!({ "d": d, "c": self.deep_end_threaded_cursor.encode() }),
            ),
            Read::NewestReplies => (
                format!("query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ slug replies(order: NEWEST, first: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d, "s": self.busiest.as_str() }),
            ),
            Read::SubDiscussionLast => (
                format!("query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ slug subDiscussion(last: {PAGE}) {{ {page} }} }} }}"),
                json!({ "d": d, "s": self.sub_root.as_str() }),
            ),
            Read::TopFirst | Read::BestFirst => (
                format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: {}, first: {PAGE}) {{ {page} }} }} }}", order_name(read)),
                json!({ "d": d }),
            ),
            Read::TopCursor | Read::BestCursor => {
                let rank = read.ranked().map_or(Rank::Top, |(rank, _)| rank);
                (
                    format!("query($d: ID!, $c: String!) {{ discussion(id: $d) {{ comments(order: {}, first: {PAGE}, after: $c) {{ {page} }} }} }}", order_name(read)),
                    json!({ "d": d, "c": self.deep_ranked_cursor(rank).encode_for(CursorKind::Ranked(rank)) }),
                )
            }
        };
        let fields = match read {
            Read::FirstPageHtml => FIELDS_HTML,
            _ => FIELDS,
        };
        (format!("{body} {fields}"), variables)
    }

    /// The slugs a GraphQL answer holds, in answer order (the tree depth-first).
    pub(crate) fn graphql_slugs(read: Read, data: &Value) -> anyhow::Result<Vec<String>> {
        let nodes = match read {
            Read::FirstPage
            | Read::FirstPageHtml
            | Read::OffsetPage
            | Read::CursorPage
            | Read::NewestFirst
            | Read::BackwardPage
            | Read::ThreadedFirst
            | Read::ThreadedOffset
            | Read::ThreadedCursor
            | Read::ThreadedBackward
            | Read::TopFirst
            | Read::TopCursor
            | Read::BestFirst
            | Read::BestCursor => &data["discussion"]["comments"]["nodes"],
            Read::Tree | Read::Threads | Read::NewestThreads => {
                &data["discussion"]["threads"]["nodes"]
            }
            Read::Replies | Read::NewestReplies => &data["comment"]["replies"]["nodes"],
            Read::DirectLink => {
                let slug = data["comment"]["slug"]
                    .as_str()
                    .context("no comment in the answer")?;
                return Ok(vec![slug.to_owned()]);
            }
            Read::SubDiscussion | Read::SubDiscussionLast => {
                &data["comment"]["subDiscussion"]["nodes"]
            }
        };
        let mut out = Vec::new();
        collect_slugs(nodes, &mut out)?;
        Ok(out)
    }

    /// Makes the read with direct store calls (what the GraphQL request makes, minus GraphQL
    /// and HTTP): the discussion by id, then the layout's calls. Returns the slugs read, in the
    /// GraphQL answer's order.
    pub(crate) async fn direct(&self, store: &Store, read: Read) -> anyhow::Result<Vec<String>> {
        let scope = ReadScope::new();
        let found = store
            .discussions()
            .by_ids(std::slice::from_ref(&self.discussion))
            .await?;
        let Some(discussion) = found.into_iter().next() else {
            bail!("discussion {} not found", self.discussion);
        };
        let layout = store.layout(discussion.layout)?;
        let first = |limit| Window::After {
            cursor: None,
            limit,
        };
        let newest = |limit| Window::FromEnd { skip: 0, limit };
        let slugs =
            |items: &[std::sync::Arc<Comment>]| items.iter().map(|c| c.slug.to_string()).collect();
        // Newest first reads the stored order from its end, and the answer lists it reversed.
        let newest_slugs = |items: &[std::sync::Arc<Comment>]| {
            items.iter().rev().map(|c| c.slug.to_string()).collect()
        };
        Ok(match read {
            Read::TopFirst | Read::TopCursor | Read::BestFirst | Read::BestCursor => {
                let (rank, deep) = read.ranked().context("not a ranked read")?;
                let cursor = deep.then(|| self.deep_ranked_cursor(rank).clone());
                let ranked = store
                    .votes()
                    .ranked(
                        &scope,
                        &discussion,
                        Ranked {
                            rank,
                            of: RankedOf::Comments,
                        },
                        &Window::After {
                            cursor,
                            limit: PAGE,
                        },
                    )
                    .await?;
                slugs(&ranked.page.items)
            }
            Read::NewestFirst | Read::NewestThreads => {
                let listing = match read {
                    Read::NewestThreads => Listing::Threads,
                    _ => Listing::Chronological,
                };
                let page = layout
                    .list(&scope, &discussion, listing, &newest(PAGE))
                    .await?;
                newest_slugs(&page.items)
            }
            Read::FirstPage
            | Read::FirstPageHtml
            | Read::OffsetPage
            | Read::CursorPage
            | Read::BackwardPage
            | Read::ThreadedFirst
            | Read::ThreadedOffset
            | Read::ThreadedCursor
            | Read::ThreadedBackward
            | Read::Threads => {
                let (listing, window) = match read {
                    Read::BackwardPage => (
                        Listing::Chronological,
                        Window::Before {
                            cursor: self.deep_end_cursor.clone(),
                            limit: PAGE,
                        },
                    ),
                    Read::ThreadedBackward => (
                        Listing::Threaded,
                        Window::Before {
                            cursor: self.deep_end_threaded_cursor.clone(),
                            limit: PAGE,
                        },
                    ),
                    Read::OffsetPage => (
                        Listing::Chronological,
                        Window::Offset {
                            skip: self.deep_offset,
                            limit: PAGE,
                        },
                    ),
                    Read::CursorPage => (
                        Listing::Chronological,
                        Window::After {
                            cursor: Some(self.deep_cursor.clone()),
                            limit: PAGE,
                        },
                    ),
                    Read::ThreadedFirst => (Listing::Threaded, first(PAGE)),
                    Read::ThreadedOffset => (
                        Listing::Threaded,
                        Window::Offset {
                            skip: self.deep_offset,
                            limit: PAGE,
                        },
                    ),
                    Read::ThreadedCursor => (
                        Listing::Threaded,
                        Window::After {
                            cursor: Some(self.deep_threaded_cursor.clone()),
                            limit: PAGE,
                        },
                    ),
                    Read::Threads => (Listing::Threads, first(PAGE)),
                    _ => (Listing::Chronological, first(PAGE)),
                };
                let page = layout.list(&scope, &discussion, listing, &window).await?;
                slugs(&page.items)
            }
            Read::Replies | Read::NewestReplies => {
                // As the GraphQL request does: the comment by its slug, then its replies.
                layout
                    .by_slugs(&scope, &discussion, std::slice::from_ref(&self.busiest))
                    .await?
                    .first()
                    .context("the busiest comment not found")?;
                let window = match read {
                    Read::NewestReplies => newest(PAGE),
                    _ => first(PAGE),
                };
                let mut pages = layout
                    .replies(
                        &scope,
                        &discussion,
                        std::slice::from_ref(&self.busiest),
                        &window,
                    )
                    .await?;
                let page = pages.remove(&self.busiest).unwrap_or_else(Page::empty);
                match read {
                    Read::NewestReplies => newest_slugs(&page.items),
                    _ => slugs(&page.items),
                }
            }
            Read::Tree => {
                let threads = layout
                    .list(&scope, &discussion, Listing::Threads, &first(TREE_THREADS))
                    .await?;
                // Level by level, one batched call each, as the dataloader does.
                let mut levels: Vec<Vec<std::sync::Arc<Comment>>> = vec![threads.items];
                let mut children: Vec<HashMap<Slug, Vec<std::sync::Arc<Comment>>>> = Vec::new();
                for _ in 0..TREE_LEVELS {
                    let parents: Vec<Slug> = levels
                        .last()
                        .into_iter()
                        .flatten()
                        .filter(|c| c.reply_count > 0)
                        .map(|c| c.slug.clone())
                        .collect();
                    if parents.is_empty() {
                        break;
                    }
                    let pages = layout
                        .replies(&scope, &discussion, &parents, &first(TREE_REPLIES))
                        .await?;
                    let next: Vec<std::sync::Arc<Comment>> = parents
                        .iter()
                        .filter_map(|p| pages.get(p))
                        .flat_map(|page| page.items.iter().cloned())
                        .collect();
                    children.push(
                        pages
                            .into_iter()
                            .map(|(parent, page)| (parent, page.items))
                            .collect(),
                    );
                    levels.push(next);
                }
                let mut out = Vec::new();
                let roots = levels.first().cloned().unwrap_or_default();
                walk(&roots, &children, 0, &mut out);
                out
            }
            Read::DirectLink => {
                let found = layout
                    .by_slugs(&scope, &discussion, std::slice::from_ref(&self.link))
                    .await?;
                slugs(&found)
            }
            Read::SubDiscussion | Read::SubDiscussionLast => {
                let found = layout
                    .by_slugs(&scope, &discussion, std::slice::from_ref(&self.sub_root))
                    .await?;
                let root = found.first().context("sub-discussion root not found")?;
                let window = match read {
                    Read::SubDiscussionLast => newest(PAGE),
                    _ => first(PAGE),
                };
                let mut pages = layout
                    .sub_discussions(
                        &scope,
                        &discussion,
                        std::slice::from_ref(&root.full_slug),
                        &window,
                    )
                    .await?;
                let page = pages.remove(&root.full_slug).unwrap_or_else(Page::empty);
                slugs(&page.items)
            }
        })
    }
}

/// The first-page read ([`Read::FirstPage`]) of any discussion, as a GraphQL query and its
/// variables: what a reader opening the discussion sends first.
pub(crate) fn first_page(discussion: &DiscussionId) -> (String, Value) {
    let (body, variables) = first_page_body(discussion);
    (format!("{body} {FIELDS}"), variables)
}

/// The first page's query without the fields' fragment.
fn first_page_body(discussion: &DiscussionId) -> (String, Value) {
    (
        format!("query($d: ID!) {{ discussion(id: $d) {{ comments(first: {PAGE}) {{ {CONNECTION} }} }} }}"),
        json!({ "d": discussion.as_str() }),
    )
}

/// The GraphQL `CommentOrder` of a ranked read.
fn order_name(read: Read) -> &'static str {
    match read.ranked() {
        Some((Rank::Best, _)) => "BEST",
        Some((Rank::Controversial, _)) => "CONTROVERSIAL",
        _ => "TOP",
    }
}

/// Depth-first slugs of a tree read from its levels.
fn walk(
    nodes: &[std::sync::Arc<Comment>],
    children: &[HashMap<Slug, Vec<std::sync::Arc<Comment>>>],
    level: usize,
    out: &mut Vec<String>,
) {
    for node in nodes {
        out.push(node.slug.to_string());
        if let Some(kids) = children.get(level).and_then(|c| c.get(&node.slug)) {
            walk(kids, children, level + 1, out);
        }
    }
}

/// Depth-first slugs of GraphQL `nodes` (following nested `replies`).
fn collect_slugs(nodes: &Value, out: &mut Vec<String>) -> anyhow::Result<()> {
    let nodes = nodes.as_array().context("no `nodes` list in the answer")?;
    for node in nodes {
        out.push(
            node["slug"]
                .as_str()
                .context("node without slug")?
                .to_owned(),
        );
        if let Some(replies) = node.get("replies") {
            collect_slugs(&replies["nodes"], out)?;
        }
    }
    Ok(())
}
