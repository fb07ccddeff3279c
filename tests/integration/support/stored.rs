//! A comment's document as the database holds it, in any layout or among the held comments,
//! read and changed behind the server's back (to see what it stored, or to make a comment look
//! as an older version stored it).

use mongodb::bson::{doc, Bson, Document};
use mongodb::Database;
use threadql::domain::Layout;

use super::database::server_uri;

/// Where a comment is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Home {
    /// In its discussion's layout.
    Layout(Layout),
    /// Among the held comments (never public yet).
    Held,
}

async fn database_named(database: &str) -> Database {
    mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("connect to the test database")
        .database(database)
}

/// The comment element `slug` of an embedded discussion's `replies`, at any depth.
fn embedded_element(replies: &[Bson], slug: &str) -> Option<Document> {
    for reply in replies {
        let Bson::Document(element) = reply else {
            continue;
        };
        if element.get_str("slug").ok() == Some(slug) {
            return Some(element.clone());
        }
        if let Ok(deeper) = element.get_array("replies") {
            if let Some(found) = embedded_element(deeper, slug) {
                return Some(found);
            }
        }
    }
    None
}

/// The stored document of comment `slug` of discussion `d` (an embedded comment's element
/// without its nested `replies`), if there is one.
pub(crate) async fn stored_comment(
    database: &str,
    home: Home,
    d: &str,
    slug: &str,
) -> Option<Document> {
    let db = database_named(database).await;
    let found = match home {
        Home::Layout(Layout::PerComment) => db
            .collection::<Document>("comments")
            .find_one(doc! { "discussion_id": d, "slug": slug })
            .await
            .expect("read comments"),
        Home::Layout(Layout::Bucketed) => {
            let page = db
                .collection::<Document>("comment_pages")
                .find_one(doc! { "discussion_id": d, "comments.slug": slug })
                .await
                .expect("read comment_pages")?;
            let comments = page.get_array("comments").expect("a page's comments");
            embedded_element(comments, slug)
        }
        Home::Layout(Layout::Embedded) => {
            let discussion = db
                .collection::<Document>("discussions")
                .find_one(doc! { "_id": d })
                .await
                .expect("read discussions")?;
            let replies = discussion.get_array("replies").ok()?;
            embedded_element(replies, slug)
        }
        Home::Held => db
            .collection::<Document>("held_comments")
            .find_one(doc! { "_id": format!("{d}:{slug}") })
            .await
            .expect("read held_comments"),
    };
    found.map(|mut c| {
        c.remove("replies");
        c
    })
}

/// Sets the fields of `set` and removes those of `unset` in the stored comment `slug` of
/// discussion `d` (an embedded comment must be top-level), as an older version might have
/// stored it. The server's read cache does not hear of it: tests that read afterwards run
/// without one.
pub(crate) async fn rewrite_stored_comment(
    database: &str,
    home: Home,
    (d, slug): (&str, &str),
    set: Document,
    unset: &[&str],
) {
    let db = database_named(database).await;
    let (collection, filter, prefix) = match home {
        Home::Layout(Layout::PerComment) => {
            ("comments", doc! { "discussion_id": d, "slug": slug }, "")
        }
        Home::Layout(Layout::Bucketed) => (
            "comment_pages",
            doc! { "discussion_id": d, "comments.slug": slug },
            "comments.$.",
        ),
        Home::Layout(Layout::Embedded) => (
            "discussions",
            doc! { "_id": d, "replies.slug": slug },
            "replies.$.",
        ),
        Home::Held => ("held_comments", doc! { "_id": format!("{d}:{slug}") }, ""),
    };
    let mut update = Document::new();
    if !set.is_empty() {
        let fields: Document = set
            .into_iter()
            .map(|(k, v)| (format!("{prefix}{k}"), v))
            .collect();
        update.insert("$set", fields);
    }
    if !unset.is_empty() {
        let fields: Document = unset
            .iter()
            .map(|k| (format!("{prefix}{k}"), Bson::String(String::new())))
            .collect();
        update.insert("$unset", fields);
    }
    let done = db
        .collection::<Document>(collection)
        .update_one(filter, update)
        .await
        .expect("rewrite a stored comment");
    assert_eq!(done.matched_count, 1, "{home:?} {d} {slug}");
}

/// The stored document of comment `slug` of discussion `d` once it has HTML: a comment read
/// without it stores it by a write of its own, after the read (100 looks, 50 ms apart).
pub(crate) async fn stored_html(database: &str, home: Home, (d, slug): (&str, &str)) -> Document {
    for _ in 0..100 {
        let stored = stored_comment(database, home, d, slug).await;
        if let Some(stored) = stored.filter(|s| s.contains_key("html")) {
            return stored;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("comment {slug} of {d} ({home:?}) was not stored with its HTML");
}

/// The event log of `database`, oldest first (by id), and the lifetime in seconds of its TTL
/// index on `created`.
pub(crate) async fn stored_events(database: &str) -> (Vec<Document>, Option<i64>) {
    use futures::TryStreamExt;
    let events = database_named(database)
        .await
        .collection::<Document>("events");
    let stored = events
        .find(mongodb::bson::doc! {})
        .sort(mongodb::bson::doc! { "_id": 1 })
        .await
        .expect("read the event log")
        .try_collect()
        .await
        .expect("read the event log");
    let indexes: Vec<mongodb::IndexModel> = events
        .list_indexes()
        .await
        .expect("list the event log's indexes")
        .try_collect()
        .await
        .expect("list the event log's indexes");
    let ttl = indexes
        .iter()
        .filter(|index| index.keys == mongodb::bson::doc! { "created": 1 })
        .find_map(|index| index.options.as_ref()?.expire_after)
        .map(|lifetime| lifetime.as_secs() as i64);
    (stored, ttl)
}
