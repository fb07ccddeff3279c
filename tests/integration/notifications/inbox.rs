//! The inbox: marking read (up to an id, or all), the unread count under concurrent posts,
//! reads and marks, paging newest first, and that nobody reads or marks another's inbox.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde_json::{json, Value};
use threadql::domain::Layout;

use super::{
    all_notes, as_user, attempt, discussion_by, notify_server, post_as, settled, unread_of, NOTE,
};
use crate::support::{error_code, sign_with, token, Claims, Running};

const MARK: &str = "mutation($u: ID) { markNotificationsRead(upTo: $u) }";

/// Marks `token`'s notifications read up to `up_to` (all without it); how many changed.
async fn mark_read(server: &Running, token: &str, up_to: Option<&str>) -> u64 {
    as_user(server, token, MARK, json!({ "u": up_to })).await["markNotificationsRead"]
        .as_u64()
        .unwrap()
}

/// Posts `n` replies as bob to a comment of ada's in a new discussion; their slugs, in the
/// order posted.
async fn replies_to_ada(server: &Running, n: usize) -> Vec<String> {
    let (ada, bob) = (token("ada", "Ada"), token("bob", "Bob"));
    let d = discussion_by(server, &ada).await;
    let (c1, _) = post_as(server, &ada, &d, None, "ada's comment").await;
    let mut slugs = Vec::new();
    for i in 0..n {
        slugs.push(
            post_as(server, &bob, &d, Some(&c1), &format!("reply {i}"))
                .await
                .0,
        );
    }
    slugs
}

/// One page of `token`'s inbox: `first` after `after`, unread ones only when `unread`.
async fn inbox_page(
    server: &Running,
    token: &str,
    first: i64,
    after: &Value,
    unread: bool,
) -> Value {
    let query = format!("query($f: Int, $a: String, $u: Boolean) {{ viewer {{ notifications(first: $f, after: $a, unreadOnly: $u) {{ edges {{ cursor node {{ id }} }} nodes {{ {NOTE} }} pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} }} }} }}");
    let vars = json!({ "f": first, "a": after, "u": unread });
    as_user(server, token, &query, vars).await["viewer"]["notifications"].clone()
}

/// Every page of `token`'s inbox of `size` (unread ones only when `unread`), checking each
/// page's size, cursors and `hasNextPage`; the ids, in order.
async fn ids_paged(server: &Running, token: &str, size: usize, unread: bool) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = Value::Null;
    loop {
        let page = inbox_page(server, token, size as i64, &after, unread).await;
        let nodes = page["nodes"].as_array().unwrap();
        let edges = page["edges"].as_array().unwrap();
        assert_eq!(nodes.len(), edges.len(), "{page:#}");
        for (node, edge) in nodes.iter().zip(edges) {
            assert_eq!(edge["cursor"], node["id"]);
            assert_eq!(edge["node"]["id"], node["id"]);
            if unread {
                assert_eq!(node["read"], false, "{node:#}");
            }
        }
        assert_eq!(page["pageInfo"]["hasPreviousPage"], !after.is_null());
        ids.extend(nodes.iter().map(|n| n["id"].as_str().unwrap().to_owned()));
        if page["pageInfo"]["hasNextPage"] != true {
            assert!(nodes.len() <= size, "{page:#}");
            return ids;
        }
        assert_eq!(
            nodes.len(),
            size,
            "a page with a next one is full: {page:#}"
        );
        assert_eq!(page["pageInfo"]["endCursor"], nodes[size - 1]["id"]);
        assert_eq!(page["pageInfo"]["startCursor"], nodes[0]["id"]);
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// `markNotificationsRead(upTo:)` marks that one and every older one, newer ones stay
/// unread; without `upTo` it marks all; each returns how many changed, so a repeat returns 0;
/// an `upTo` that is no notification id is BAD_USER_INPUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marking_read_up_to_an_id_leaves_newer_ones_unread() {
    let (server, db) = notify_server("notify_mark", Layout::PerComment).await;
    let ada = token("ada", "Ada");
    replies_to_ada(&server, 5).await;
    settled(&db).await;
    let notes = all_notes(&server, &ada).await;
    assert_eq!(notes.len(), 5);
    assert_eq!(unread_of(&server, &ada).await, 5);
    let middle = notes[2]["id"].as_str().unwrap();
    assert_eq!(mark_read(&server, &ada, Some(middle)).await, 3);
    let read: Vec<bool> = all_notes(&server, &ada)
        .await
        .iter()
        .map(|n| n["read"].as_bool().unwrap())
        .collect();
    assert_eq!(read, [false, false, true, true, true], "newest first");
    assert_eq!(unread_of(&server, &ada).await, 2);
    assert_eq!(mark_read(&server, &ada, Some(middle)).await, 0, "a repeat");
    assert_eq!(mark_read(&server, &ada, None).await, 2);
    assert_eq!(mark_read(&server, &ada, None).await, 0, "a repeat");
    assert_eq!(unread_of(&server, &ada).await, 0);
    assert!(all_notes(&server, &ada)
        .await
        .iter()
        .all(|n| n["read"] == true));
    for bad in ["x", "", "0000000000000001abcdefg:ada"] {
        let refused = attempt(&server, Some(&ada), MARK, json!({ "u": bad })).await;
        assert_eq!(
            error_code(&refused),
            "BAD_USER_INPUT",
            "{bad:?}: {refused:#}"
        );
    }
    let anonymous = attempt(&server, None, MARK, json!({})).await;
    assert_eq!(error_code(&anonymous), "UNAUTHENTICATED", "{anonymous:#}");
    server.shutdown().await;
}

/// 20 people post 5 replies each to ada's comment at once, while 8 readers poll her unread
/// count and she marks read up to one she saw midway: no count ever exceeds the 100
/// notifications, the final count is the number unread in her pages, and what the mark
/// changed plus what is unread is all 100.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_unread_count_is_exact_under_concurrent_replies_reads_and_marks() {
    const REPLIERS: usize = 20;
    const EACH: usize = 5;
    const READERS: usize = 8;
    let total = (REPLIERS * EACH) as u64;
    let (server, db) = notify_server("notify_count", Layout::PerComment).await;
    let ada = token("ada", "Ada");
    let d = discussion_by(&server, &ada).await;
    let (c1, _) = post_as(&server, &ada, &d, None, "ada's comment").await;
    let done = AtomicBool::new(false);
    let polls = Mutex::new(Vec::new());
    let replies = async {
        futures::future::join_all((0..REPLIERS).map(|r| {
            let (server, d, c1) = (&server, &d, &c1);
            async move {
                let who = token(&format!("r{r}"), &format!("Replier {r}"));
                for i in 0..EACH {
                    post_as(server, &who, d, Some(c1), &format!("reply {i} of {r}")).await;
                }
            }
        }))
        .await;
        settled(&db).await;
        done.store(true, Ordering::SeqCst);
    };
    let readers = futures::future::join_all((0..READERS).map(|_| async {
        while !done.load(Ordering::SeqCst) {
            let count = unread_of(&server, &ada).await;
            polls.lock().unwrap().push(count);
        }
    }));
    let marker = async {
        loop {
            let page = inbox_page(&server, &ada, 10, &Value::Null, false).await;
            let nodes = page["nodes"].as_array().unwrap();
            if nodes.len() >= 5 || done.load(Ordering::SeqCst) {
                let up_to = nodes[nodes.len() / 2]["id"].as_str().unwrap().to_owned();
                return mark_read(&server, &ada, Some(&up_to)).await;
            }
        }
    };
    let ((), _, marked) = tokio::join!(replies, readers, marker);
    let unread = unread_of(&server, &ada).await;
    let notes = all_notes(&server, &ada).await;
    assert_eq!(notes.len() as u64, total);
    assert_eq!(
        unread,
        notes.iter().filter(|n| n["read"] == false).count() as u64,
        "the count is what the pages hold unread"
    );
    assert!(marked >= 1, "the mark changed the one it named at least");
    assert_eq!(marked + unread, total);
    let polls = polls.into_inner().unwrap();
    assert!(!polls.is_empty());
    assert!(polls.iter().all(|&n| n <= total), "{polls:?}");
    server.shutdown().await;
}

/// 25 notifications in pages of 10 through `endCursor`: newest first, none repeated or
/// skipped, `hasNextPage` true but on the last; `unreadOnly` pages through the unread ones
/// only; `first` outside 1..=max and an `after` that is no id are BAD_USER_INPUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_pages_newest_first_without_repeats_or_gaps() {
    let (server, db) = notify_server("notify_pages", Layout::PerComment).await;
    let ada = token("ada", "Ada");
    let replies = replies_to_ada(&server, 25).await;
    settled(&db).await;
    let paged = ids_paged(&server, &ada, 10, false).await;
    let all: Vec<String> = all_notes(&server, &ada)
        .await
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(all.len(), 25);
    assert_eq!(paged, all);
    let mut newest_first = all.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    newest_first.dedup();
    assert_eq!(newest_first, all, "distinct, newest first");
    let about: Vec<Value> = all_notes(&server, &ada)
        .await
        .iter()
        .map(|n| n["comment"]["slug"].clone())
        .collect();
    let latest_first: Vec<Value> = replies.iter().rev().map(|s| json!(s)).collect();
    assert_eq!(about, latest_first, "the latest reply first");

    assert_eq!(mark_read(&server, &ada, Some(&all[10])).await, 15);
    let unread = ids_paged(&server, &ada, 4, true).await;
    assert_eq!(unread, all[..10].to_vec());
    assert_eq!(ids_paged(&server, &ada, 10, true).await, all[..10].to_vec());
    assert_eq!(ids_paged(&server, &ada, 7, false).await, all);

    let query = "query($f: Int, $a: String) { viewer { notifications(first: $f, after: $a) { nodes { id } } } }";
    for first in [0, -1, 1000] {
        let refused = attempt(&server, Some(&ada), query, json!({ "f": first })).await;
        assert_eq!(
            error_code(&refused),
            "BAD_USER_INPUT",
            "{first}: {refused:#}"
        );
    }
    let refused = attempt(&server, Some(&ada), query, json!({ "f": 10, "a": "x" })).await;
    assert_eq!(error_code(&refused), "BAD_USER_INPUT", "{refused:#}");
    server.shutdown().await;
}

/// `viewer` is the token's person, null without a token and refused with a forged one; ada's
/// notifications are in no other inbox, and bob marking up to ada's id changes none of hers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_sees_or_marks_another_persons_notifications() {
    let (server, db) = notify_server("notify_private", Layout::PerComment).await;
    let (ada, bob) = (token("ada", "Ada"), token("bob", "Bob"));
    let d = discussion_by(&server, &ada).await;
    let (c1, _) = post_as(&server, &ada, &d, None, "ada's").await;
    let (b1, _) = post_as(&server, &bob, &d, None, "bob's").await;
    post_as(&server, &bob, &d, Some(&c1), "bob to ada").await;
    settled(&db).await;
    post_as(&server, &ada, &d, Some(&b1), "ada to bob").await;
    settled(&db).await;
    let who = "{ viewer { id name roles } }";
    let me = as_user(&server, &ada, who, json!({})).await;
    assert_eq!(
        me["viewer"],
        json!({ "id": "ada", "name": "Ada", "roles": [] })
    );
    let me = as_user(&server, &bob, who, json!({})).await;
    assert_eq!(me["viewer"]["id"], "bob");
    let anonymous = attempt(&server, None, who, json!({})).await;
    assert_eq!(
        anonymous["data"],
        json!({ "viewer": null }),
        "{anonymous:#}"
    );
    let forged = sign_with(
        jsonwebtoken::Algorithm::HS256,
        &Claims::new("ada", "Ada"),
        "not-the-secret",
    );
    let refused = attempt(&server, Some(&forged), who, json!({})).await;
    assert_eq!(error_code(&refused), "UNAUTHENTICATED", "{refused:#}");

    let ada_notes = all_notes(&server, &ada).await;
    let bob_notes = all_notes(&server, &bob).await;
    assert_eq!(ada_notes.len(), 1);
    assert_eq!(bob_notes.len(), 1);
    assert_eq!(ada_notes[0]["actor"]["id"], "bob");
    assert_eq!(bob_notes[0]["actor"]["id"], "ada");
    let ada_id = ada_notes[0]["id"].as_str().unwrap();
    assert!(ada_id.ends_with(":ada"), "{ada_id}");
    assert_eq!(mark_read(&server, &bob, Some(ada_id)).await, 0);
    assert_eq!(mark_read(&server, &bob, None).await, 1, "bob's own");
    assert_eq!(unread_of(&server, &ada).await, 1);
    assert_eq!(all_notes(&server, &ada).await[0]["read"], false);
    server.shutdown().await;
}
