//! An author's history for moderators: `commentsByAuthor` on every layout (held, rejected and
//! deleted comments included, newest first, one database command per page, across moves, the
//! copies they leave and gaps in the author's numbers), the one-time indexing of embedded
//! discussions stored without their flat array of authors, `authorStanding`, and the refusals
//! of both.

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use serde_json::{json, Value};
use threadql::domain::Layout;
use threadql::store::Storage;

use crate::support::{diff, error_code, layout_name, server_uri, Settings, TestApp};

const SET_MODE: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
const APPROVE: &str =
    "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug } }";
const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
const MOVE: &str =
    "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }";
const HISTORY: &str = "query($u: ID!, $n: Int, $a: String) { commentsByAuthor(userId: $u, first: $n, after: $a) { edges { cursor node { slug status deleted text } } pageInfo { hasNextPage hasPreviousPage endCursor } } }";
const TOTAL: &str = "query($u: ID!) { commentsByAuthor(userId: $u, first: 1) { totalCount } }";
const STANDING: &str = "query($u: ID!) { authorStanding(userId: $u) { userId ban { reason until by { id } } comments approved rejected reported } }";

/// Where one of the author's comments stands in their history, and how it reads there.
#[derive(Debug, Clone, PartialEq)]
struct Expected {
    slug: String,
    status: &'static str,
    deleted: bool,
}

/// The author's comments in a few discussions of `layout`, as the history must give them,
/// oldest first.
struct Scenario {
    app: TestApp,
    moderator: String,
    discussions: Vec<String>,
    /// The author's comments in the order they were posted or submitted.
    expected: Vec<Expected>,
}

impl Scenario {
    /// Posts as `token` and returns the slug.
    async fn say(&self, token: &str, d: &str, parent: Option<&str>, text: &str) -> String {
        let posted = self
            .app
            .ok_as(Some(token), POST, json!({ "d": d, "p": parent, "t": text }))
            .await;
        posted["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned()
    }

    fn expect(&mut self, slug: &str, status: &'static str) {
        self.expected.push(Expected {
            slug: slug.to_owned(),
            status,
            deleted: false,
        });
    }

    fn expected_at(&mut self, slug: &str) -> &mut Expected {
        self.expected
            .iter_mut()
            .find(|e| e.slug == slug)
            .expect("an expected comment")
    }
}

/// Builds the scenario: the author "ann" in three discussions of `layout` (top-level comments
/// and replies nested two deep, one past the depth cap of 3 levels, which attaches to an
/// ancestor; another author's comments in between), with a deleted
/// comment, a rejected public comment, and in a PRE discussion a held comment, a rejected held
/// one and an approved one.
async fn ann_in_three_discussions(layout: Layout) -> Scenario {
    let app = TestApp::with(
        "history",
        Settings {
            max_depth: 3,
            ..Settings::new(layout)
        },
    )
    .await;
    let moderator = app.moderator_token("mod", "Mo");
    let (ann, bob) = (app.token("ann", "Ann"), app.token("bob", "Bob"));
    let mut s = Scenario {
        discussions: vec![
            app.discussion("first").await,
            app.discussion("second").await,
            app.discussion("held").await,
        ],
        app,
        moderator,
        expected: Vec::new(),
    };
    let (a, b, c) = (
        s.discussions[0].clone(),
        s.discussions[1].clone(),
        s.discussions[2].clone(),
    );
    let top = s.say(&ann, &a, None, "ann top in a").await;
    s.expect(&top, "APPROVED");
    let bob_top = s.say(&bob, &a, None, "bob in a").await;
    let reply = s.say(&ann, &a, Some(&bob_top), "ann replies to bob").await;
    s.expect(&reply, "APPROVED");
    s.say(&bob, &a, Some(&reply), "bob replies to ann").await;
    let nested = s.say(&ann, &a, Some(&reply), "ann under her reply").await;
    s.expect(&nested, "APPROVED");
    let capped = s.say(&ann, &a, Some(&nested), "ann past the cap").await;
    s.expect(&capped, "APPROVED");
    s.say(&bob, &b, None, "bob in b").await;
    let second = s.say(&ann, &b, None, "ann in b").await;
    s.expect(&second, "APPROVED");
    let deleted = s.say(&ann, &b, Some(&second), "ann regrets this").await;
    s.expect(&deleted, "APPROVED");
    let rejected = s.say(&ann, &b, None, "ann is rude").await;
    s.expect(&rejected, "REJECTED");
    s.say(&bob, &b, Some(&rejected), "bob answers the rude one")
        .await;
    s.app
        .ok_as(Some(&ann), DELETE, json!({ "d": b, "s": deleted }))
        .await;
    s.expected_at(&deleted).deleted = true;
    s.app
        .ok_as(
            Some(&s.moderator),
            REJECT,
            json!({ "d": b, "s": rejected, "r": "rude" }),
        )
        .await;
    s.app
        .ok_as(Some(&s.moderator), SET_MODE, json!({ "d": c, "m": "PRE" }))
        .await;
    let pending = s.say(&ann, &c, None, "ann waits").await;
    s.expect(&pending, "PENDING");
    let refused = s.say(&ann, &c, None, "ann is refused").await;
    s.expect(&refused, "REJECTED");
    let published = s.say(&ann, &c, None, "ann is published").await;
    // Approved later, it keeps the place it was submitted at.
    s.expect(&published, "APPROVED");
    s.say(&bob, &c, None, "bob waits too").await;
    s.app
        .ok_as(Some(&s.moderator), REJECT, json!({ "d": c, "s": refused }))
        .await;
    s.app
        .ok_as(
            Some(&s.moderator),
            APPROVE,
            json!({ "d": c, "s": published }),
        )
        .await;
    s.say(&bob, &a, None, "bob has the last word").await;
    s
}

/// Pages through ann's history `size` at a time, checking that pages chain, that every page but
/// the last is full, and that each page is one database command or, with `gaps` in ann's
/// numbers, one per round over them, plus the reader's ignore list; returns what they listed,
/// newest first.
async fn pages_of_ann(s: &Scenario, size: i64, gaps: bool) -> Vec<Value> {
    let mut listed = Vec::new();
    let mut after: Option<String> = None;
    for page in 0.. {
        let vars = json!({ "u": "ann", "n": size, "a": after });
        let (data, spent) = history_cost_as(&s.app, &s.moderator, HISTORY, vars).await;
        let rounds = spent.get("aggregate").copied().unwrap_or(0);
        assert!(
            rounds == 1 || (gaps && (1..=8).contains(&rounds)),
            "page {page}: {spent:?}"
        );
        // …and the reader's ignore list, since the page shows texts: one read of their
        // `people` document, unless the process read it within IGNORING_KEPT_FOR.
        let list_reads = spent.get("find").copied().unwrap_or(0);
        let mut cost = std::collections::BTreeMap::from([("aggregate".to_owned(), rounds)]);
        if list_reads > 0 {
            cost.insert("find".to_owned(), 1);
        }
        assert_eq!(spent, cost, "page {page}");
        let connection = &data["commentsByAuthor"];
        let edges = connection["edges"].as_array().expect("edges");
        assert!(edges.len() <= size as usize);
        assert_eq!(
            connection["pageInfo"]["hasPreviousPage"],
            after.is_some(),
            "{connection:#}"
        );
        listed.extend(edges.iter().map(|e| e["node"].clone()));
        if connection["pageInfo"]["hasNextPage"] != true {
            break;
        }
        assert_eq!(edges.len(), size as usize, "a full page before the last");
        after = connection["pageInfo"]["endCursor"]
            .as_str()
            .map(str::to_owned);
        assert!(after.is_some());
    }
    listed
}

/// Runs a query as `token`, returning its data and the database commands it sent by name.
async fn history_cost_as(
    app: &TestApp,
    token: &str,
    query: &str,
    vars: Value,
) -> (Value, std::collections::BTreeMap<String, u64>) {
    let before = app.store().commands().snapshot();
    let data = app.ok_as(Some(token), query, vars).await;
    let spent = diff(&before, &app.store().commands().snapshot());
    (data, spent)
}

/// Checks a listing against the expected history: every comment once, newest first.
fn assert_ann_history(listed: &[Value], s: &Scenario) {
    let got: Vec<Expected> = listed
        .iter()
        .map(|node| Expected {
            slug: node["slug"].as_str().expect("slug").to_owned(),
            status: match node["status"].as_str().expect("status") {
                "APPROVED" => "APPROVED",
                "PENDING" => "PENDING",
                "REJECTED" => "REJECTED",
                other => panic!("status {other}"),
            },
            deleted: node["deleted"] == true,
        })
        .collect();
    let mut newest_first = s.expected.clone();
    newest_first.reverse();
    assert_eq!(got, newest_first);
    let deleted = listed
        .iter()
        .find(|n| n["deleted"] == true)
        .expect("the tombstone");
    assert_eq!(deleted["text"], Value::Null, "a tombstone has no text");
}

pub(crate) async fn an_authors_history_lists_every_comment_newest_first_case(layout: Layout) {
    let s = ann_in_three_discussions(layout).await;
    for size in [2, 3, 100] {
        let listed = pages_of_ann(&s, size, false).await;
        assert_ann_history(&listed, &s);
    }
    // Replies to a comment that is not there draw numbers and fail: gaps, read over.
    let mut s = s;
    let ann = s.app.token("ann", "Ann");
    let d = s.discussions[0].clone();
    for _ in 0..5 {
        let refused = s
            .app
            .exec_as(
                Some(&ann),
                POST,
                json!({ "d": d, "p": "zzzzzzzz", "t": "into the void" }),
            )
            .await;
        assert_eq!(error_code(&refused), "NOT_FOUND", "{refused}");
    }
    let last = s.say(&ann, &d, None, "ann after the gaps").await;
    s.expect(&last, "APPROVED");
    for size in [2, 4] {
        let listed = pages_of_ann(&s, size, true).await;
        assert_ann_history(&listed, &s);
    }
    let total = s
        .app
        .ok_as(Some(&s.moderator), TOTAL, json!({ "u": "ann" }))
        .await;
    assert_eq!(
        total["commentsByAuthor"]["totalCount"],
        s.expected.len(),
        "{total}"
    );
    // Someone without comments has an empty history.
    let none = s
        .app
        .ok_as(
            Some(&s.moderator),
            HISTORY,
            json!({ "u": "nobody", "n": 5 }),
        )
        .await;
    assert_eq!(
        none["commentsByAuthor"],
        json!({ "edges": [], "pageInfo": { "hasNextPage": false, "hasPreviousPage": false, "endCursor": null } })
    );
}

/// The layouts other than `layout`, in order.
fn layouts_besides(layout: Layout) -> Vec<Layout> {
    Layout::ALL.into_iter().filter(|l| *l != layout).collect()
}

pub(crate) async fn moves_keep_an_authors_history_case(layout: Layout) {
    let s = ann_in_three_discussions(layout).await;
    let [first, second] = layouts_besides(layout)[..] else {
        panic!("two other layouts")
    };
    // The discussions in three layouts at once, the held one moved too.
    for (d, to) in [(0, first), (1, second), (2, first)] {
        let moved = s
            .app
            .ok_as(
                Some(&s.moderator),
                MOVE,
                json!({ "d": s.discussions[d], "l": layout_name(to) }),
            )
            .await;
        assert_eq!(moved["migrateDiscussion"]["layout"], layout_name(to));
    }
    assert_ann_history(&pages_of_ann(&s, 2, false).await, &s);
    // A copy a move left behind (a crash between the switch and the removal) is not listed:
    // each layout's copy of ann's first comment (its number with it), stored again under a
    // discussion now elsewhere.
    leave_copies_behind(&s, layout).await;
    assert_ann_history(&pages_of_ann(&s, 2, false).await, &s);
    // And back.
    for d in 0..3 {
        s.app
            .ok_as(
                Some(&s.moderator),
                MOVE,
                json!({ "d": s.discussions[d], "l": layout_name(layout) }),
            )
            .await;
    }
    assert_ann_history(&pages_of_ann(&s, 3, false).await, &s);
}

/// Stores, behind the server's back, the documents of the first discussion (now in another
/// layout) again in `layout`'s collection, as a move that crashed after its switch leaves them.
async fn leave_copies_behind(s: &Scenario, layout: Layout) {
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("connect")
        .database(&s.app.database);
    let d = s.discussions[0].as_str();
    let embedded = db
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": d })
        .await
        .expect("read")
        .expect("the discussion");
    match layout {
        Layout::Embedded => {
            // The discussion document keeps its old tree and array (now it is elsewhere).
            let other = db
                .collection::<Document>("discussions")
                .find_one(doc! { "_id": &s.discussions[2] })
                .await
                .expect("read")
                .expect("the held discussion");
            assert_ne!(other.get_str("layout").ok(), Some("embedded"));
            let stale = doc! {
                "replies": [{ "slug": "stalecopy", "full_slug": "0:stalecopy", "posted": i64::MAX / 2,
                    "author": { "id": "ann", "name": "Ann", "k": "1:ann" }, "text": "old", "replies": [] }],
                "authored": [{ "author": { "id": "ann", "k": "1:ann" }, "p": i64::MAX / 2, "s": "stalecopy", "at": [] }],
            };
            db.collection::<Document>("discussions")
                .update_one(doc! { "_id": &s.discussions[2] }, doc! { "$set": stale })
                .await
                .expect("leave the old tree");
        }
        Layout::PerComment => {
            let copy = doc! {
                "discussion_id": d, "slug": "stalecopy", "full_slug": "0:stalecopy",
                "parent": Bson::Null, "posted": i64::MAX / 2,
                "author": { "id": "ann", "name": "Ann", "k": "1:ann" }, "text": "old", "deleted": false, "reply_count": 0_i64,
            };
            db.collection::<Document>("comments")
                .insert_one(copy)
                .await
                .expect("leave a copy");
        }
        Layout::Bucketed => {
            let page = doc! {
                "_id": format!("{d}:9"), "discussion_id": d, "page": 9_i64, "count": 1_i64,
                "comments": [{ "slug": "stalecopy", "full_slug": "0:stalecopy", "parent": Bson::Null,
                    "posted": i64::MAX / 2, "author": { "id": "ann", "name": "Ann", "k": "1:ann" }, "text": "old",
                    "deleted": false, "reply_count": 0_i64 }],
            };
            db.collection::<Document>("comment_pages")
                .insert_one(page)
                .await
                .expect("leave a page");
        }
    }
    assert_ne!(
        embedded.get_str("layout").ok(),
        Some(layout_name(layout).to_lowercase().as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_discussion_stored_without_its_authors_is_indexed_once() {
    let app = TestApp::new("history_backfill", Layout::Embedded).await;
    let moderator = app.moderator_token("mod", "Mo");
    let (ann, bob) = (app.token("ann", "Ann"), app.token("bob", "Bob"));
    let d = app.discussion("older").await;
    let mut slugs = Vec::new();
    let top = app.post_as(&ann, &d, None, "top").await;
    let other = app.post_as(&bob, &d, Some(&top), "bob").await;
    slugs.push(top.clone());
    slugs.push(app.post_as(&ann, &d, Some(&other), "deep").await);
    slugs.push(app.post_as(&ann, &d, Some(&top), "second reply").await);
    slugs.push(app.post_as(&ann, &d, None, "another top").await);
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("connect")
        .database(&app.database);
    let discussions = db.collection::<Document>("discussions");
    let stored = |name: &'static str| {
        let discussions = discussions.clone();
        let d = d.clone();
        async move {
            discussions
                .find_one(doc! { "_id": &d })
                .await
                .expect("read")
                .expect("the discussion")
                .get(name)
                .cloned()
        }
    };
    let (authored, bytes) = (stored("authored").await, stored("embedded_bytes").await);
    let Some(Bson::Array(entries)) = &authored else {
        panic!("posts keep the array: {authored:?}")
    };
    assert_eq!(entries.len(), 5);
    // As a version before the array stored it: no array, its bytes not counted.
    let counted: i64 = entries
        .iter()
        .map(|e| {
            let Bson::Document(e) = e else {
                panic!("an entry")
            };
            mongodb::bson::to_vec(e).expect("bytes").len() as i64 + 12
        })
        .sum();
    discussions
        .update_one(
            doc! { "_id": &d },
            doc! { "$unset": { "authored": "" }, "$inc": { "embedded_bytes": -counted } },
        )
        .await
        .expect("store it as before");
    db.collection::<Document>("server")
        .delete_one(doc! { "_id": "embedded_authors" })
        .await
        .expect("forget the indexing");
    let listed = |token: String| {
        let app = &app;
        async move {
            let data = app
                .ok_as(Some(&token), HISTORY, json!({ "u": "ann", "n": 10 }))
                .await;
            data["commentsByAuthor"]["edges"]
                .as_array()
                .expect("edges")
                .iter()
                .map(|e| e["node"]["slug"].as_str().expect("slug").to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert!(
        listed(moderator.clone()).await.is_empty(),
        "not indexed yet"
    );
    let server = app.store().server();
    assert!(!server.embedded_authors_indexed().await.expect("read"));
    assert_eq!(server.index_embedded_authors().await.expect("index"), 1);
    assert!(server.embedded_authors_indexed().await.expect("read"));
    assert_eq!(
        stored("authored").await,
        authored,
        "the array as posts kept it"
    );
    assert_eq!(
        stored("embedded_bytes").await,
        bytes,
        "its bytes counted again"
    );
    let mut newest_first = slugs.clone();
    newest_first.reverse();
    assert_eq!(listed(moderator.clone()).await, newest_first);
    // A second run finds nothing left, and posts go on from the indexed array.
    assert_eq!(server.index_embedded_authors().await.expect("index"), 0);
    let last = app.post_as(&ann, &d, Some(&slugs[1]), "deeper").await;
    newest_first.insert(0, last);
    assert_eq!(listed(moderator).await, newest_first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authors_standing_counts_what_moderators_did() {
    let app = TestApp::with(
        "history_standing",
        Settings {
            reports_to_hold: 0,
            ..Settings::new(Layout::PerComment)
        },
    )
    .await;
    let moderator = app.moderator_token("mod", "Mo");
    let (ann, bob, cy) = (
        app.token("ann", "Ann"),
        app.token("bob", "Bob"),
        app.token("cy", "Cy"),
    );
    let standing = |user: &'static str| {
        let (app, moderator) = (&app, moderator.clone());
        async move {
            app.ok_as(Some(&moderator), STANDING, json!({ "u": user }))
                .await["authorStanding"]
                .clone()
        }
    };
    let zero = json!({ "userId": "ann", "ban": null, "comments": 0, "approved": 0, "rejected": 0, "reported": 0 });
    assert_eq!(standing("ann").await, zero);

    let held = app.discussion("held").await;
    app.ok_as(Some(&moderator), SET_MODE, json!({ "d": held, "m": "PRE" }))
        .await;
    let mut said = Vec::new();
    for text in ["one", "two", "three"] {
        said.push(app.post_as(&ann, &held, None, text).await);
    }
    app.ok_as(
        Some(&moderator),
        APPROVE,
        json!({ "d": held, "s": said[0] }),
    )
    .await;
    for reason in ["no", "still no"] {
        app.ok_as(
            Some(&moderator),
            REJECT,
            json!({ "d": held, "s": said[1], "r": reason }),
        )
        .await;
    }
    let open = app.discussion("open").await;
    let public = app.post_as(&ann, &open, None, "public").await;
    for reporter in [&bob, &cy, &bob] {
        app.ok_as(Some(reporter), REPORT, json!({ "d": open, "s": public }))
            .await;
    }
    app.ok_as(Some(&moderator), REJECT, json!({ "d": open, "s": public }))
        .await;
    app.ok_as(Some(&moderator), APPROVE, json!({ "d": open, "s": public }))
        .await;
    // Bob's comment, reported by ann: counted against bob, not ann.
    let bobs = app.post_as(&bob, &open, None, "bob").await;
    app.ok_as(Some(&ann), REPORT, json!({ "d": open, "s": bobs }))
        .await;
    assert_eq!(
        standing("ann").await,
        json!({ "userId": "ann", "ban": null, "comments": 4, "approved": 2, "rejected": 2, "reported": 2 })
    );
    assert_eq!(standing("bob").await["reported"], 1);
    // The ban (none while this process knows the state), the tallies, the count.
    let (_, spent) = history_cost_as(&app, &moderator, STANDING, json!({ "u": "cy" })).await;
    assert!(spent.values().sum::<u64>() <= 3, "{spent:?}");
    assert_eq!(spent.get("aggregate"), None, "{spent:?}");

    app.ok_as(
        Some(&moderator),
        "mutation { banUser(userId: \"ann\", reason: \"spam\") { userId } }",
        json!({}),
    )
    .await;
    let banned = standing("ann").await;
    assert_eq!(
        banned["ban"],
        json!({ "reason": "spam", "until": null, "by": { "id": "mod" } })
    );
    app.ok_as(
        Some(&moderator),
        "mutation { unbanUser(userId: \"ann\") }",
        json!({}),
    )
    .await;
    assert_eq!(standing("ann").await["ban"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authors_history_refuses_bad_callers_and_inputs() {
    let app = TestApp::new("history_refusals", Layout::PerComment).await;
    let (moderator, user) = (app.moderator_token("mod", "Mo"), app.token("ann", "Ann"));
    let d = app.discussion("refusals").await;
    app.post_as(&user, &d, None, "one").await;
    app.post_as(&user, &d, None, "two").await;
    let code = |token: Option<String>, query: &'static str, vars: Value| {
        let app = &app;
        async move { error_code(&app.exec_as(token.as_deref(), query, vars).await) }
    };
    for query in [HISTORY, STANDING] {
        let ann = json!({ "u": "ann" });
        assert_eq!(code(None, query, ann.clone()).await, "UNAUTHENTICATED");
        assert_eq!(
            code(Some(user.clone()), query, ann.clone()).await,
            "FORBIDDEN"
        );
        assert_eq!(
            code(Some("not.a.token".to_owned()), query, ann).await,
            "UNAUTHENTICATED"
        );
        for bad in ["", "   ", &"x".repeat(300), "a\u{7}b"] {
            assert_eq!(
                code(Some(moderator.clone()), query, json!({ "u": bad })).await,
                "BAD_USER_INPUT",
                "{bad:?}"
            );
        }
    }
    let page = app
        .ok_as(Some(&moderator), HISTORY, json!({ "u": "ann", "n": 1 }))
        .await;
    let cursor = page["commentsByAuthor"]["pageInfo"]["endCursor"].clone();
    let chronological = app
        .ok_as(
            Some(&moderator),
            "query($d: ID!) { discussion(id: $d) { comments(first: 1) { pageInfo { endCursor } } } }",
            json!({ "d": d }),
        )
        .await;
    for bad in [
        json!({ "n": 0 }),
        json!({ "n": -1 }),
        json!({ "n": 1000 }),
        json!({ "a": "garbage" }),
        json!({ "a": "" }),
        json!({ "a": chronological["discussion"]["comments"]["pageInfo"]["endCursor"] }),
    ] {
        let mut vars = json!({ "u": "ann" });
        for (k, v) in bad.as_object().expect("vars") {
            vars[k] = v.clone();
        }
        assert_eq!(
            code(Some(moderator.clone()), HISTORY, vars).await,
            "BAD_USER_INPUT",
            "{bad}"
        );
    }
    // The cursor of a page goes on to the next, and the history then ends.
    let next = app
        .ok_as(
            Some(&moderator),
            HISTORY,
            json!({ "u": "ann", "n": 1, "a": cursor }),
        )
        .await;
    assert_eq!(next["commentsByAuthor"]["edges"][0]["node"]["text"], "one");
    assert_eq!(next["commentsByAuthor"]["pageInfo"]["hasNextPage"], false);
}

/// Instantiates the per-layout cases for one layout.
macro_rules! history_cases {
    ($module:ident, $layout:expr) => {
        mod $module {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_authors_history_lists_every_comment_newest_first() {
                super::an_authors_history_lists_every_comment_newest_first_case($layout).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn moves_keep_an_authors_history() {
                super::moves_keep_an_authors_history_case($layout).await;
            }
        }
    };
}

history_cases!(per_comment, threadql::domain::Layout::PerComment);
history_cases!(embedded, threadql::domain::Layout::Embedded);
history_cases!(bucketed, threadql::domain::Layout::Bucketed);

/// Removes every comment key (`author.k`) from a stored document, as a version before comments
/// were numbered stored it; returns how many bytes they took.
fn without_keys(value: &mut Bson) -> i64 {
    let mut bytes = 0;
    match value {
        Bson::Document(d) => {
            if let Ok(author) = d.get_document_mut("author") {
                if let Some(Bson::String(key)) = author.remove("k") {
                    bytes += key.len() as i64 + 8;
                }
            }
            for (_, inner) in d.iter_mut() {
                bytes += without_keys(inner);
            }
        }
        Bson::Array(items) => {
            for item in items {
                bytes += without_keys(item);
            }
        }
        _ => {}
    }
    bytes
}

/// Every layout's comments and the held ones, stored by a version before comments were
/// numbered, are numbered once at start: the history lists them all after, the embedded size
/// counter stays exact (posts go on), and a second run finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comments_stored_before_numbering_are_numbered_once_on_every_layout() {
    for layout in Layout::ALL {
        let app = TestApp::new("history_numbering", layout).await;
        let moderator = app.moderator_token("mod", "Mo");
        let (ann, bob) = (app.token("ann", "Ann"), app.token("bob", "Bob"));
        let (d, held) = (app.discussion("older").await, app.discussion("held").await);
        app.ok_as(Some(&moderator), SET_MODE, json!({ "d": held, "m": "PRE" }))
            .await;
        let mut anns = Vec::new();
        let top = app.post_as(&ann, &d, None, "top").await;
        anns.push(top.clone());
        let other = app.post_as(&bob, &d, Some(&top), "bob").await;
        anns.push(app.post_as(&ann, &d, Some(&other), "deep").await);
        anns.push(app.post_as(&ann, &held, None, "held").await);
        anns.push(app.post_as(&ann, &d, None, "another top").await);
        let db = mongodb::Client::with_uri_str(server_uri())
            .await
            .expect("connect")
            .database(&app.database);
        let bytes_of = || async {
            db.collection::<Document>("discussions")
                .find_one(doc! { "_id": &d })
                .await
                .expect("read")
                .expect("the discussion")
                .get("embedded_bytes")
                .cloned()
        };
        let counted = bytes_of().await;
        // As an earlier version stored them: no keys (nor their bytes), no counters.
        for name in ["comments", "comment_pages", "discussions", "held_comments"] {
            let coll = db.collection::<Document>(name);
            let all: Vec<Document> = coll
                .find(doc! {})
                .await
                .expect("read")
                .try_collect()
                .await
                .expect("read");
            for stored in all {
                let mut stripped = Bson::Document(stored.clone());
                let bytes = without_keys(&mut stripped);
                let Bson::Document(mut stripped) = stripped else {
                    panic!("a document")
                };
                if let (true, Ok(n)) = (bytes > 0, stripped.get_i64("embedded_bytes")) {
                    stripped.insert("embedded_bytes", n - bytes);
                }
                coll.replace_one(doc! { "_id": stored.get("_id").expect("id") }, stripped)
                    .await
                    .expect("store it as before");
            }
        }
        db.collection::<Document>("people")
            .update_many(doc! {}, doc! { "$unset": { "numbered": "" } })
            .await
            .expect("forget the counters");
        db.collection::<Document>("server")
            .delete_one(doc! { "_id": "comment_numbers" })
            .await
            .expect("forget the numbering");
        let listed = || async {
            let data = app
                .ok_as(Some(&moderator), HISTORY, json!({ "u": "ann", "n": 10 }))
                .await;
            let mut slugs: Vec<String> = data["commentsByAuthor"]["edges"]
                .as_array()
                .expect("edges")
                .iter()
                .map(|e| e["node"]["slug"].as_str().expect("slug").to_owned())
                .collect();
            slugs.sort();
            slugs
        };
        assert!(listed().await.is_empty(), "{layout:?}: not numbered yet");
        let server = app.store().server();
        assert!(!server.comments_numbered().await.expect("read"));
        assert_eq!(server.number_comments().await.expect("number"), 5);
        assert!(server.comments_numbered().await.expect("read"));
        let mut expected = anns.clone();
        expected.sort();
        assert_eq!(listed().await, expected, "{layout:?}");
        assert_eq!(
            bytes_of().await,
            counted,
            "{layout:?}: the keys' bytes counted"
        );
        assert_eq!(server.number_comments().await.expect("number"), 0);
        // Posts and replies go on from the numbered comments, as the next numbers.
        let last = app.post_as(&ann, &d, Some(&anns[1]), "deeper").await;
        let newest = app
            .ok_as(Some(&moderator), HISTORY, json!({ "u": "ann", "n": 1 }))
            .await;
        assert_eq!(
            newest["commentsByAuthor"]["edges"][0]["node"]["slug"],
            last.as_str(),
            "{layout:?}"
        );
        assert_eq!(
            app.ok_as(Some(&moderator), TOTAL, json!({ "u": "ann" }))
                .await["commentsByAuthor"]["totalCount"],
            5,
            "{layout:?}"
        );
    }
}
