//! Ignoring a user, on every layout, over a served API with its read cache: the ignorer gets
//! the ignored author's comments named but without text (`ignoredByViewer`), nobody else sees a
//! difference, and every viewer's page is the cached read (the mask is applied after it, with
//! the viewer's list, read once per `IGNORING_KEPT_FOR` in a process; anonymous readers read
//! none); un-ignoring restores at once, and on another process within that; who may not be
//! ignored; the cap of the list.

use serde_json::{json, Value};
use threadql::domain::Layout;
use threadql::service::{IGNORING_KEPT_FOR, MAX_IGNORED};

use crate::live::{await_subscribers, Protocol, Ws};
use crate::support::{
    error_code, error_message, metric, moderator_token, post_graphql, server_uri, token, unique_db,
    Running, Settings,
};

const IGNORE: &str = "mutation($u: ID!, $i: Boolean!) { ignoreUser(userId: $u, ignored: $i) }";
const IGNORED: &str = "{ viewer { ignoredUsers } }";
const CREATE: &str = "mutation { createDiscussion(input: {title: \"ignoring\"}) { id } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
/// A page of comments and of threads with their replies, with what ignoring masks.
const PAGE: &str = "fragment Shown on Comment { slug text html ignoredByViewer author { id name } }
query($d: ID!) { discussion(id: $d) {
  comments(first: 20) { nodes { ...Shown } }
  threads(first: 10) { nodes { ...Shown replies(first: 10) { nodes { ...Shown } } } } } }";

const HITS: &str = "threadql_cache_hits_total";
const MISSES: &str = "threadql_cache_misses_total";

/// A response's `data`, failing on errors.
fn answered(response: (u16, Value), what: &str) -> Value {
    let (status, body) = response;
    assert!(
        status == 200 && body.get("errors").is_none(),
        "{what}: {status} {body:#}"
    );
    body["data"].clone()
}

/// Every comment of a page's answer (the list's and the threads' with their replies).
fn every_comment(page: &Value) -> Vec<Value> {
    let discussion = &page["discussion"];
    let mut all: Vec<Value> = discussion["comments"]["nodes"]
        .as_array()
        .expect("comments")
        .clone();
    for thread in discussion["threads"]["nodes"].as_array().expect("threads") {
        all.push(thread.clone());
        all.extend(
            thread["replies"]["nodes"]
                .as_array()
                .expect("replies")
                .clone(),
        );
    }
    all
}

/// The page `page` with the comments of `author` as their ignorer gets them.
fn masked_for_ignorer(page: &Value, author: &str) -> Value {
    let mut page = page.clone();
    let mask = |comment: &mut Value| {
        if comment["author"]["id"] == author {
            comment["text"] = Value::Null;
            comment["html"] = Value::Null;
            comment["ignoredByViewer"] = json!(true);
        }
    };
    let discussion = &mut page["discussion"];
    for comment in discussion["comments"]["nodes"]
        .as_array_mut()
        .expect("comments")
    {
        mask(comment);
    }
    for thread in discussion["threads"]["nodes"]
        .as_array_mut()
        .expect("threads")
    {
        mask(thread);
        for reply in thread["replies"]["nodes"].as_array_mut().expect("replies") {
            mask(reply);
        }
    }
    page
}

/// The page as `viewer` reads it, with the database commands and the cache's misses it cost.
async fn page_as(
    client: &reqwest::Client,
    server: &Running,
    viewer: Option<&str>,
    d: &str,
) -> (Value, u64, u64) {
    let (commands, misses) = (
        server.store.commands().total(),
        metric(server, MISSES).await,
    );
    let page = answered(
        post_graphql(client, server, viewer, PAGE, json!({ "d": d })).await,
        "the page",
    );
    let spent = server.store.commands().total() - commands;
    (page, spent, metric(server, MISSES).await - misses)
}

async fn ignoring_masks_for_the_ignorer_only_case(layout: Layout) {
    let server = Running::start(Settings::new(layout).config(&unique_db("ignoring"))).await;
    let client = reqwest::Client::new();
    let (ada, bob, cy, moderator) = (
        token("ada", "Ada"),
        token("bob", "Bob"),
        token("cy", "Cy"),
        moderator_token("mod", "Mo"),
    );
    let send = |who: &str, query: &'static str, vars: Value| {
        let (client, server, who) = (client.clone(), &server, who.to_owned());
        async move { post_graphql(&client, server, Some(&who), query, vars).await }
    };
    let created = answered(send(&moderator, CREATE, json!({})).await, "create");
    let d = created["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut slugs = Vec::new();
    for (who, parent, text) in [
        (&bob, None, "Bob's first"),
        (&cy, None, "Cy's"),
        (&bob, Some(0), "Bob answers himself"),
        (&ada, Some(0), "Ada answers Bob"),
        (&bob, Some(1), "Bob answers Cy"),
        (&moderator, None, "the moderator's"),
    ] {
        let parent: Option<&String> = parent.map(|i: usize| &slugs[i]);
        let posted = answered(
            send(who, POST, json!({ "d": d, "p": parent, "t": text })).await,
            text,
        );
        slugs.push(
            posted["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned(),
        );
    }

    let ignored = answered(
        send(&ada, IGNORE, json!({ "u": "bob", "i": true })).await,
        "ignore",
    );
    assert_eq!(ignored["ignoreUser"], true);
    let listed = answered(send(&ada, IGNORED, json!({})).await, "the list");
    assert_eq!(listed["viewer"]["ignoredUsers"], json!(["bob"]));

    // Anonymous reads until the page is the cache's.
    let mut plain = Value::Null;
    for _ in 0..4 {
        plain = page_as(&client, &server, None, &d).await.0;
    }
    assert_eq!(every_comment(&plain).len(), 12, "{plain:#}");
    assert!(
        every_comment(&plain)
            .iter()
            .all(|c| c["ignoredByViewer"] == false && c["text"].is_string()),
        "{plain:#}"
    );
    let hits = metric(&server, HITS).await;
    assert!(hits > 0, "{layout:?}: the page is cached");

    // Anonymous: nothing read. Cy, who ignores nobody: the same page, one read of Cy's list.
    let (anonymous, spent, missed) = page_as(&client, &server, None, &d).await;
    assert_eq!(
        (&anonymous, spent, missed),
        (&plain, 0, 0),
        "{layout:?}: anonymous"
    );
    let (as_cy, spent, missed) = page_as(&client, &server, Some(&cy), &d).await;
    assert_eq!((&as_cy, spent, missed), (&plain, 1, 0), "{layout:?}: as Cy");
    // Cy's list is the process's for a while: reading again costs nothing.
    let (again, spent, missed) = page_as(&client, &server, Some(&cy), &d).await;
    assert_eq!(
        (&again, spent, missed),
        (&plain, 0, 0),
        "{layout:?}: Cy again"
    );
    // Ada: Bob's comments named, without text, from the same cached read and her list (read
    // by the list query above, unless that was more than IGNORING_KEPT_FOR ago).
    let (as_ada, spent, missed) = page_as(&client, &server, Some(&ada), &d).await;
    assert_eq!(
        as_ada,
        masked_for_ignorer(&plain, "bob"),
        "{layout:?}: as Ada"
    );
    assert!(
        spent <= 1 && missed == 0,
        "{layout:?}: Ada's read: {spent} commands, {missed} misses"
    );
    let masked: Vec<Value> = every_comment(&as_ada)
        .into_iter()
        .filter(|c| c["ignoredByViewer"] == true)
        .collect();
    assert_eq!(
        masked.len(),
        6,
        "Bob's three comments, in both lists: {as_ada:#}"
    );
    assert!(
        masked.iter().all(|c| c["author"]["name"] == "Bob"),
        "{as_ada:#}"
    );
    assert!(
        metric(&server, HITS).await > hits,
        "{layout:?}: served from the cache"
    );
    // Bob reads his own comments.
    let (as_bob, _, _) = page_as(&client, &server, Some(&bob), &d).await;
    assert_eq!(as_bob, plain, "{layout:?}: as Bob");

    // Un-ignoring restores.
    let ignored = answered(
        send(&ada, IGNORE, json!({ "u": "bob", "i": false })).await,
        "un-ignore",
    );
    assert_eq!(ignored["ignoreUser"], false);
    let (as_ada, _, _) = page_as(&client, &server, Some(&ada), &d).await;
    assert_eq!(as_ada, plain, "{layout:?}: as Ada, after");
    let listed = answered(send(&ada, IGNORED, json!({})).await, "the list, after");
    assert_eq!(listed["viewer"]["ignoredUsers"], json!([]));

    // Nobody ignores themselves, a moderator, or anyone without signing in.
    for (what, who, user, code) in [
        ("oneself", Some(ada.as_str()), "ada", "BAD_USER_INPUT"),
        ("a moderator", Some(ada.as_str()), "mod", "FORBIDDEN"),
        ("anonymously", None, "bob", "UNAUTHENTICATED"),
        ("an empty id", Some(ada.as_str()), "", "BAD_USER_INPUT"),
    ] {
        let (_, body) = post_graphql(
            &client,
            &server,
            who,
            IGNORE,
            json!({ "u": user, "i": true }),
        )
        .await;
        assert_eq!(error_code(&body), code, "{what}: {body:#}");
        assert!(!error_message(&body).is_empty(), "{what}");
    }
    let listed = answered(send(&ada, IGNORED, json!({})).await, "the list, refused");
    assert_eq!(listed["viewer"]["ignoredUsers"], json!([]));
    let (_, body) = post_graphql(&client, &server, None, IGNORED, json!({})).await;
    assert_eq!(
        body["data"]["viewer"],
        Value::Null,
        "no viewer without a token"
    );
    server.shutdown().await;
}

macro_rules! ignoring_suite {
    ($module:ident, $layout:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ignoring_masks_for_the_ignorer_only() {
                ignoring_masks_for_the_ignorer_only_case($layout).await;
            }
        }
    };
}

ignoring_suite!(per_comment, Layout::PerComment);
ignoring_suite!(embedded, Layout::Embedded);
ignoring_suite!(bucketed, Layout::Bucketed);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ignore_list_is_capped_and_indexed() {
    let database = unique_db("ignoring_cap");
    let server = Running::start(Settings::new(Layout::PerComment).config(&database)).await;
    let client = reqwest::Client::new();
    let ada = token("ada", "Ada");
    let full: Vec<String> = (0..MAX_IGNORED).map(|n| format!("user{n}")).collect();
    let people = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("connect")
        .database(&database)
        .collection::<mongodb::bson::Document>("people");
    people
        .insert_one(mongodb::bson::doc! { "_id": "ada", "ignoring": &full })
        .await
        .expect("a full list");
    let ignore = |user: &str, ignored: bool| {
        let (client, server, ada) = (client.clone(), &server, ada.clone());
        let vars = json!({ "u": user, "i": ignored });
        async move {
            post_graphql(&client, server, Some(&ada), IGNORE, vars)
                .await
                .1
        }
    };
    let refused = ignore("one-more", true).await;
    assert_eq!(error_code(&refused), "BAD_USER_INPUT", "{refused:#}");
    assert!(
        error_message(&refused).contains("1000 people already"),
        "{refused:#}"
    );
    // Ignoring someone ignored already changes nothing, and room made is room to use.
    assert_eq!(ignore("user7", true).await["data"]["ignoreUser"], true);
    assert_eq!(ignore("user7", false).await["data"]["ignoreUser"], false);
    assert_eq!(ignore("one-more", true).await["data"]["ignoreUser"], true);
    let listed = post_graphql(&client, &server, Some(&ada), IGNORED, json!({}))
        .await
        .1;
    let ids = listed["data"]["viewer"]["ignoredUsers"]
        .as_array()
        .expect("ids")
        .clone();
    assert_eq!(ids.len(), MAX_IGNORED);
    assert_eq!(ids.last(), Some(&json!("one-more")));
    assert!(!ids.contains(&json!("user7")));
    // The index another person's erasure uses to take their id out of every list.
    let indexes = people.list_index_names().await.expect("indexes");
    assert!(indexes.contains(&"ignoring".to_owned()), "{indexes:?}");
    let found = people
        .count_documents(mongodb::bson::doc! { "ignoring": "one-more" })
        .await
        .expect("count");
    assert_eq!(found, 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_mask_for_the_ignorer_only() {
    let server =
        Running::start(Settings::new(Layout::Bucketed).config(&unique_db("ignoring_live"))).await;
    let client = reqwest::Client::new();
    let (ada, bob, cy) = (token("ada", "Ada"), token("bob", "Bob"), token("cy", "Cy"));
    let created = answered(
        post_graphql(&client, &server, Some(&bob), CREATE, json!({})).await,
        "create",
    );
    let d = created["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let ignore = json!({ "u": "bob", "i": true });
    answered(
        post_graphql(&client, &server, Some(&ada), IGNORE, ignore).await,
        "ignore",
    );
    let heard = "subscription($d: ID!) { commentPosted(discussionId: $d) { text html ignoredByViewer author { name } } }";
    let mut sockets = Vec::new();
    for viewer in [&ada, &cy] {
        let auth = json!({ "Authorization": format!("Bearer {viewer}") });
        let mut ws = Ws::connect(&server, Protocol::TransportWs, auth).await;
        ws.start("p", heard, json!({ "d": d })).await;
        sockets.push(ws);
    }
    await_subscribers(&server, 2).await;
    let vars = json!({ "d": d, "t": "heard live" });
    answered(
        post_graphql(&client, &server, Some(&bob), POST, vars).await,
        "post",
    );
    let as_ada = sockets[0].next().await.1;
    assert_eq!(
        as_ada["data"]["commentPosted"],
        json!({ "text": null, "html": null, "ignoredByViewer": true, "author": { "name": "Bob" } }),
        "{as_ada:#}"
    );
    let as_cy = sockets[1].next().await.1;
    assert_eq!(
        as_cy["data"]["commentPosted"]["text"], "heard live",
        "{as_cy:#}"
    );
    assert_eq!(as_cy["data"]["commentPosted"]["ignoredByViewer"], false);
    server.shutdown().await;
}

/// A list changed through one process masks there at once, and on another process (which
/// kept the list as it was) within IGNORING_KEPT_FOR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_follows_an_ignore_within_the_lists_life() {
    let db = unique_db("ignoring_two");
    let one = Running::start(Settings::new(Layout::Bucketed).config(&db)).await;
    let two = Running::start(Settings::new(Layout::Bucketed).config(&db)).await;
    let client = reqwest::Client::new();
    let (ada, bob, moderator) = (
        token("ada", "Ada"),
        token("bob", "Bob"),
        moderator_token("mod", "Mo"),
    );
    let created = answered(
        post_graphql(&client, &one, Some(&moderator), CREATE, json!({})).await,
        "create",
    );
    let d = created["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let vars = json!({ "d": d, "p": null, "t": "Bob's" });
    answered(
        post_graphql(&client, &one, Some(&bob), POST, vars).await,
        "post",
    );
    let plain = page_as(&client, &two, Some(&ada), &d).await.0;
    assert_eq!(every_comment(&plain).len(), 2, "{plain:#}");
    let ignore = json!({ "u": "bob", "i": true });
    answered(
        post_graphql(&client, &one, Some(&ada), IGNORE, ignore).await,
        "ignore",
    );
    let masked = masked_for_ignorer(&plain, "bob");
    assert_eq!(
        page_as(&client, &one, Some(&ada), &d).await.0,
        masked,
        "at once where it was made"
    );
    let since = std::time::Instant::now();
    loop {
        let seen = page_as(&client, &two, Some(&ada), &d).await.0;
        if seen == masked {
            break;
        }
        assert_eq!(seen, plain, "the list as it was, or as it is");
        assert!(
            since.elapsed() < IGNORING_KEPT_FOR + std::time::Duration::from_secs(5),
            "the other process still shows Bob's text"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    one.shutdown().await;
    two.shutdown().await;
}
