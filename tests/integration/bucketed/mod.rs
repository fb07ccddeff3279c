//! Bucketed-layout specifics: posting under contention, the seeds' offset walk, round-trip bounds.

mod checks;
mod copies;
mod offsets;
mod posting;
mod reads;
mod threads;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use serde_json::json;
use threadql::domain::{
    Author, Comment, CommentText, Cursor, CursorKind, Discussion, DiscussionId, Layout, NewComment,
    Page, Slug, Window,
};
use threadql::store::bucketed::hints::{FullPages, Hints};
use threadql::store::{Listing, ReadScope, Storage, Store};

use crate::model::build_tree;
use crate::support::{
    diff, load_discussion, node_slugs, open_feed, post_in, posts_reported, server_uri,
    store_config, Settings, TestApp,
};
use checks::*;

fn settings(bucket_size: u32) -> Settings {
    Settings {
        bucket_size,
        ..Settings::new(Layout::Bucketed)
    }
}

async fn raw_db(app: &TestApp) -> mongodb::Database {
    mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(&app.database)
}

/// The discussion's pages as stored, in page order.
async fn raw_pages(app: &TestApp, d: &str) -> Vec<Document> {
    raw_db(app)
        .await
        .collection::<Document>("comment_pages")
        .find(doc! { "discussion_id": d })
        .sort(doc! { "page": 1 })
        .await
        .expect("find pages")
        .try_collect()
        .await
        .expect("read pages")
}

fn int(doc: &Document, key: &str) -> i64 {
    match doc.get(key) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("{key} is {other:?}"),
    }
}

/// The page each stored comment is on, by slug.
fn pages_by_slug(pages: &[Document]) -> HashMap<String, i64> {
    pages
        .iter()
        .flat_map(|p| {
            comments(p)
                .into_iter()
                .map(|c| (c.get_str("slug").expect("slug").to_owned(), int(p, "page")))
        })
        .collect()
}

fn comments(page: &Document) -> Vec<&Document> {
    page.get_array("comments")
        .expect("comments")
        .iter()
        .map(|c| c.as_document().expect("a comment document"))
        .collect()
}

fn key_of(c: &Document) -> (i64, String) {
    (
        int(c, "posted"),
        c.get_str("slug").expect("slug").to_owned(),
    )
}

/// Pages through a listing with the store's cursor windows; returns the comments.
async fn all_by_cursor(
    store: &Store,
    d: &Discussion,
    listing: Listing,
    size: usize,
) -> Vec<Comment> {
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let kind = match listing {
        Listing::Threaded => CursorKind::Threaded,
        _ => CursorKind::Chronological,
    };
    let mut out: Vec<Comment> = Vec::new();
    loop {
        let window = Window::After {
            cursor: out.last().map(|c| Cursor::of_comment(c, kind)),
            limit: size,
        };
        let page: Page<std::sync::Arc<Comment>> = layout
            .list(&ReadScope::new(), d, listing, &window)
            .await
            .expect("list");
        assert!(page.items.len() == size || !page.has_next);
        out.extend(page.items.into_iter().map(std::sync::Arc::unwrap_or_clone));
        if !page.has_next {
            return out;
        }
    }
}

/// Pages through a listing with the store's offset windows; returns the comments.
async fn all_by_offset(
    store: &Store,
    d: &Discussion,
    listing: Listing,
    size: usize,
) -> Vec<Comment> {
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let mut out: Vec<Comment> = Vec::new();
    loop {
        let window = Window::Offset {
            skip: out.len() as u64,
            limit: size,
        };
        let page = layout
            .list(&ReadScope::new(), d, listing, &window)
            .await
            .expect("list");
        out.extend(page.items.into_iter().map(std::sync::Arc::unwrap_or_clone));
        if !page.has_next {
            return out;
        }
    }
}

fn slugs<C: std::borrow::Borrow<Comment>>(comments: &[C]) -> Vec<String> {
    comments
        .iter()
        .map(|c| c.borrow().slug.to_string())
        .collect()
}

/// Records the page numbers each query by page number asks for, and the pages each read of
/// page headers covers (`None` for every page of the discussion).
#[derive(Clone, Default)]
struct PageRequests {
    pages: Arc<std::sync::Mutex<Vec<Vec<i64>>>>,
    headers: Arc<std::sync::Mutex<Vec<HeaderRead>>>,
}

/// The pages a read of page headers covers, `[from, to)`; `None` for every page.
type HeaderRead = Option<(i64, i64)>;

impl PageRequests {
    /// A test app with pages of 3 whose page-number reads are recorded.
    async fn app(name: &str) -> (PageRequests, TestApp) {
        let requests = PageRequests::default();
        let app = TestApp::with(
            name,
            Settings {
                command_events: Some(requests.handler()),
                ..settings(3)
            },
        )
        .await;
        (requests, app)
    }

    fn handler(&self) -> mongodb::event::EventHandler<mongodb::event::command::CommandEvent> {
        let (pages_sink, headers_sink) = (self.pages.clone(), self.headers.clone());
        mongodb::event::EventHandler::callback(
            move |event: mongodb::event::command::CommandEvent| {
                let mongodb::event::command::CommandEvent::Started(started) = event else {
                    return;
                };
                let command = &started.command;
                let pages = command
                    .get_array("pipeline")
                    .ok()
                    .and_then(|p| p.first())
                    .and_then(Bson::as_document)
                    .and_then(|m| m.get_document("$match").ok())
                    .and_then(|m| m.get_document("page").ok())
                    .and_then(|page| page.get_array("$in").ok())
                    .map(|pages| pages.iter().filter_map(Bson::as_i64).collect::<Vec<_>>());
                if let Some(pages) = pages {
                    pages_sink
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(pages);
                }
                // A read of page headers: a `find` that projects the thread pages.
                let headers = command.get_str("find").is_ok()
                    && command
                        .get_document("projection")
                        .is_ok_and(|p| p.contains_key("thread_pages"));
                if headers {
                    let range = command
                        .get_document("filter")
                        .ok()
                        .and_then(|f| f.get_document("page").ok())
                        .map(|page| {
                            let bound = |op: &str| page.get(op).and_then(Bson::as_i64);
                            (bound("$gte").expect("from"), bound("$lt").expect("to"))
                        });
                    headers_sink
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(range);
                }
            },
        )
    }

    fn take(&self) -> Vec<Vec<i64>> {
        std::mem::take(&mut *self.pages.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn take_headers(&self) -> Vec<HeaderRead> {
        std::mem::take(&mut *self.headers.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
