//! Discussions keyed by the host page: keys and URLs on every layout (a contract case), their
//! rules, `ensureDiscussion` under concurrency across two servers, `discussionsByKeys` and
//! `_entities` by key in one database command, and claims left without their discussion.

use std::collections::BTreeMap;

use mongodb::bson::doc;
use serde_json::{json, Value};
use threadql::domain::Layout;
use threadql::store::Discussions;

use crate::support::{
    cost, error_code, error_message, graphql_data, layout_name, post_graphql, server_config,
    server_uri, Running, Settings, TestApp,
};

const CREATE: &str = "mutation($t: String!, $k: String, $u: String, $l: StorageLayout) { createDiscussion(input: {title: $t, key: $k, url: $u, layout: $l}) { id title key url layout commentCount } }";
const ENSURE: &str = "mutation($k: String!, $t: String!, $u: String, $l: StorageLayout) { ensureDiscussion(input: {key: $k, title: $t, url: $u, layout: $l}) { id title key url layout commentCount } }";
const BY_KEY: &str =
    "query($k: String!) { discussionByKey(key: $k) { id title key url layout commentCount } }";
const BY_KEYS: &str =
    "query($k: [String!]!) { discussionsByKeys(keys: $k) { id key commentCount } }";

/// The one `find` a key lookup costs.
fn one_find() -> BTreeMap<String, u64> {
    BTreeMap::from([("find".to_owned(), 1)])
}

/// The contract case: a discussion with a key and a URL keeps them in every read, through
/// `ensureDiscussion`, and across moves to the other layouts and back.
pub(crate) async fn keyed_discussions_keep_their_key_everywhere_case(settings: Settings) {
    let layout = settings.layout;
    let app = TestApp::with("keys", settings).await;
    let name = layout_name(layout);
    let key = format!("/articles/{name}/hello world?ref=1");
    let url = "https://Blog.Example.com/articles/hello%20world";
    let created = app
        .ok(
            CREATE,
            json!({ "t": "Hello", "k": key, "u": url, "l": name }),
        )
        .await["createDiscussion"]
        .clone();
    assert_eq!(created["key"], key.as_str());
    assert_eq!(
        created["url"], "https://blog.example.com/articles/hello%20world",
        "the URL as the URL standard writes it"
    );
    assert_eq!(created["layout"], name);
    let d = created["id"].as_str().expect("id").to_owned();
    let top = app.post(&d, None, "first").await;
    app.post(&d, Some(&top), "a reply").await;
    let plain = app.discussion("no key").await;

    // Every read shows the key and the URL; one without a key shows nulls.
    let data = app
        .ok(
            "query($d: ID!, $p: ID!, $k: String!) { discussion(id: $d) { key url } plain: discussion(id: $p) { key url } discussionByKey(key: $k) { id commentCount } discussions { nodes { id key } } }",
            json!({ "d": d, "p": plain, "k": key }),
        )
        .await;
    assert_eq!(
        data["discussion"],
        json!({ "key": key, "url": created["url"] })
    );
    assert_eq!(data["plain"], json!({ "key": null, "url": null }));
    assert_eq!(
        data["discussionByKey"],
        json!({ "id": d, "commentCount": 2 })
    );
    assert_eq!(
        data["discussions"]["nodes"],
        json!([{ "id": d, "key": key }, { "id": plain, "key": null }])
    );

    // The key is taken: createDiscussion says to use ensureDiscussion, which returns the
    // discussion as it is (its title, URL and layout kept).
    let again = app
        .exec(CREATE, json!({ "t": "Another", "k": key, "l": name }))
        .await;
    assert_eq!(error_code(&again), "BAD_USER_INPUT", "{again:#}");
    assert!(
        error_message(&again).contains("ensureDiscussion"),
        "{again:#}"
    );
    let other_layout = if layout == Layout::Bucketed {
        "PER_COMMENT"
    } else {
        "BUCKETED"
    };
    let ensured = app
        .ok(
            ENSURE,
            json!({ "k": key, "t": "Changed title", "u": "https://elsewhere.example/", "l": other_layout }),
        )
        .await;
    assert_eq!(
        ensured["ensureDiscussion"],
        json!({ "id": d, "title": "Hello", "key": key, "url": created["url"], "layout": name, "commentCount": 2 })
    );
    // A new key creates, with what was asked for.
    let fresh_key = format!("{key}#2");
    let fresh = app
        .ok(ENSURE, json!({ "k": fresh_key, "t": "Second", "l": name }))
        .await["ensureDiscussion"]
        .clone();
    assert_ne!(fresh["id"], d.as_str());
    assert_eq!(
        (
            &fresh["title"],
            &fresh["key"],
            &fresh["url"],
            &fresh["layout"]
        ),
        (
            &json!("Second"),
            &json!(fresh_key),
            &json!(null),
            &json!(name)
        )
    );
    let ensured_again = app
        .ok(ENSURE, json!({ "k": fresh_key, "t": "Second" }))
        .await;
    assert_eq!(ensured_again["ensureDiscussion"]["id"], fresh["id"]);

    // A list of keys: in order, null where unknown, twice where asked twice: one command.
    let keys = json!([fresh_key, "no such key", key, key]);
    let (listed, spent) = cost(&app, BY_KEYS, json!({ "k": keys })).await;
    assert_eq!(
        listed["discussionsByKeys"],
        json!([
            { "id": fresh["id"], "key": fresh_key, "commentCount": 0 },
            null,
            { "id": d, "key": key, "commentCount": 2 },
            { "id": d, "key": key, "commentCount": 2 },
        ])
    );
    assert_eq!(spent, one_find(), "one command for the whole list");
    let unknown = app.ok(BY_KEY, json!({ "k": format!("{key} ") })).await;
    assert_eq!(
        unknown["discussionByKey"],
        Value::Null,
        "keys compare exactly"
    );

    // Moves keep the key and the URL: to the other layouts and back.
    let moderator = app.moderator_token("m", "Mo");
    let mut route: Vec<Layout> = Layout::ALL.into_iter().filter(|l| *l != layout).collect();
    route.push(layout);
    for to in route {
        let moved = app
            .exec_as(
                Some(&moderator),
                "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout key url } }",
                json!({ "d": d, "l": layout_name(to) }),
            )
            .await;
        assert_eq!(
            moved["data"]["migrateDiscussion"],
            json!({ "layout": layout_name(to), "key": key, "url": created["url"] }),
            "{moved:#}"
        );
        let found = app.ok(BY_KEY, json!({ "k": key })).await;
        assert_eq!(
            found["discussionByKey"],
            json!({ "id": d, "title": "Hello", "key": key, "url": created["url"], "layout": layout_name(to), "commentCount": 2 })
        );
        let ensured = app.ok(ENSURE, json!({ "k": key, "t": "Hello" })).await;
        assert_eq!(ensured["ensureDiscussion"]["id"], d.as_str());
    }
    let total = app.ok("{ discussions { totalCount } }", json!({})).await;
    assert_eq!(
        total["discussions"]["totalCount"], 3,
        "no discussion was made twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_urls_and_lists_get_clear_errors() {
    let app = TestApp::new("bad_keys", Layout::PerComment).await;
    let long = "k".repeat(513);
    let bad_keys: Vec<(&str, Value)> = vec![
        ("empty key", json!("")),
        ("513 characters", json!(long)),
        ("513 emoji", json!("🦀".repeat(513))),
        ("NUL", json!("a\u{0}b")),
        ("newline", json!("a\nb")),
        ("carriage return", json!("a\rb")),
        ("tab", json!("a\tb")),
        ("escape", json!("\u{1b}[31m")),
        ("DEL", json!("a\u{7f}")),
        ("next line (C1)", json!("a\u{85}")),
        ("zero-width space", json!("\u{200B}a")),
        ("byte order mark", json!("a\u{FEFF}")),
    ];
    for (what, key) in &bad_keys {
        for (query, vars) in [
            (CREATE, json!({ "t": "t", "k": key })),
            (ENSURE, json!({ "t": "t", "k": key })),
            (BY_KEY, json!({ "k": key })),
            (BY_KEYS, json!({ "k": ["fine", key] })),
        ] {
            let response = app.exec(query, vars).await;
            assert_eq!(
                error_code(&response),
                "BAD_USER_INPUT",
                "{what}: {response:#}"
            );
            assert!(
                error_message(&response).contains("key"),
                "{what}: unclear message {response:#}"
            );
        }
    }
    let response = app.exec(BY_KEYS, json!({ "k": ["fine", ""] })).await;
    assert!(error_message(&response).contains("keys[1]"), "{response:#}");
    // One key is named as its own argument, not as a list's first element.
    let response = app.exec(BY_KEY, json!({ "k": "" })).await;
    assert!(
        error_message(&response).starts_with("key: "),
        "{response:#}"
    );
    assert!(
        !error_message(&response).contains("keys[0]"),
        "{response:#}"
    );

    // Values that are not strings, or absent.
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "number key (variable)",
            BY_KEY,
            json!({ "k": 5 }),
            "BAD_USER_INPUT",
        ),
        (
            "object key (variable)",
            BY_KEY,
            json!({ "k": { "$gt": "" } }),
            "BAD_USER_INPUT",
        ),
        (
            "null key (variable)",
            BY_KEY,
            json!({ "k": null }),
            "BAD_USER_INPUT",
        ),
        (
            "number key (literal)",
            "{ discussionByKey(key: 5) { id } }",
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        (
            "list of numbers",
            BY_KEYS,
            json!({ "k": [1, 2] }),
            "BAD_USER_INPUT",
        ),
        (
            "null in the list",
            BY_KEYS,
            json!({ "k": ["a", null] }),
            "BAD_USER_INPUT",
        ),
        (
            "ensure without a key",
            "mutation { ensureDiscussion(input: {title: \"t\"}) { id } }",
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        (
            "ensure without a title",
            "mutation { ensureDiscussion(input: {key: \"k\"}) { id } }",
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        (
            "ensure with a blank title",
            ENSURE,
            json!({ "k": "k", "t": " " }),
            "BAD_USER_INPUT",
        ),
    ];
    for (what, query, vars, code) in cases {
        let response = app.exec(query, vars).await;
        assert_eq!(error_code(&response), code, "{what}: {response:#}");
    }

    let urls = [
        "",
        "example.com/article",
        "/relative",
        "//example.com/x",
        "ftp://example.com/file",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "http://",
        "https://user:secret@example.com/",
        "https://exa mple.com/",
        "https://example.com/\n",
        "https://example.com/\u{0}",
        "http://[::1",
        "http://example.com:99999/",
    ];
    let too_long = format!("https://example.com/{}", "a".repeat(2_048));
    for url in urls.iter().copied().chain([too_long.as_str()]) {
        for query in [CREATE, ENSURE] {
            let response = app
                .exec(query, json!({ "t": "t", "k": "k", "u": url }))
                .await;
            assert_eq!(
                error_code(&response),
                "BAD_USER_INPUT",
                "{url:?}: {response:#}"
            );
            assert!(
                error_message(&response).contains("url"),
                "{url:?}: {response:#}"
            );
        }
    }

    // At most 100 keys, refused before any command; 100 is one command; none is none.
    let keys = |n: usize| json!({ "k": (0..n).map(|i| format!("key {i}")).collect::<Vec<_>>() });
    let before = app.commands();
    let response = app.exec(BY_KEYS, keys(101)).await;
    assert_eq!(error_code(&response), "BAD_USER_INPUT", "{response:#}");
    assert!(error_message(&response).contains("100"), "{response:#}");
    assert_eq!(app.commands(), before, "a refused list sends no command");
    let (data, spent) = cost(&app, BY_KEYS, keys(100)).await;
    assert_eq!(data["discussionsByKeys"], json!(vec![Value::Null; 100]));
    assert_eq!(spent, one_find());
    let (data, spent) = cost(&app, BY_KEYS, keys(0)).await;
    assert_eq!(data["discussionsByKeys"], json!([]));
    assert!(spent.is_empty(), "{spent:?}");

    // The longest key, and keys compared exactly (once composed).
    let longest = "é".repeat(512);
    for key in [longest.as_str(), "a", "a ", " a", "A", "\u{E1}"] {
        let created = app.ok(CREATE, json!({ "t": "t", "k": key })).await;
        assert_eq!(created["createDiscussion"]["key"], key);
    }
    let found = app
        .ok(
            BY_KEYS,
            json!({ "k": ["a", "a ", " a", "A", "a\u{301}", longest] }),
        )
        .await;
    let ids: Vec<&Value> = found["discussionsByKeys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["id"])
        .collect();
    let distinct: std::collections::HashSet<String> = ids.iter().map(|v| v.to_string()).collect();
    assert_eq!(distinct.len(), 6, "{found:#}");

    // Nothing was created by the refused requests.
    let total = app.ok("{ discussions { totalCount } }", json!({})).await;
    assert_eq!(total["discussions"]["totalCount"], 6);

    // Without a token, no discussion is made.
    let response = app
        .exec_as(None, ENSURE, json!({ "k": "anonymous", "t": "t" }))
        .await;
    assert_eq!(error_code(&response), "UNAUTHENTICATED", "{response:#}");
    let response = app.exec_as(None, BY_KEY, json!({ "k": "anonymous" })).await;
    assert_eq!(
        response["data"]["discussionByKey"],
        Value::Null,
        "{response:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_by_key_are_read_in_one_command() {
    let app = TestApp::new("entity_keys", Layout::Embedded).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let created = app
            .ok(
                CREATE,
                json!({ "t": format!("article {i}"), "k": format!("article-{i}") }),
            )
            .await;
        ids.push(
            created["createDiscussion"]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let query = "query($r: [_Any!]!) { _entities(representations: $r) { ... on Discussion { id key title } } }";
    let mut representations: Vec<Value> = (0..5)
        .rev()
        .map(|i| json!({ "__typename": "Discussion", "key": format!("article-{i}") }))
        .collect();
    representations.push(json!({ "__typename": "Discussion", "key": "unknown" }));
    representations.push(json!({ "__typename": "Discussion", "key": "" }));
    representations.push(json!({ "__typename": "Discussion", "key": "a\u{0}b" }));
    let (data, spent) = cost(&app, query, json!({ "r": representations })).await;
    let mut expected: Vec<Value> = (0..5)
        .rev()
        .map(|i| json!({ "id": ids[i], "key": format!("article-{i}"), "title": format!("article {i}") }))
        .collect();
    expected.extend([Value::Null, Value::Null, Value::Null]);
    assert_eq!(data["_entities"], json!(expected));
    assert_eq!(spent, one_find(), "every key in one command");

    // Both keys in one request: one command per key kind.
    let mixed = json!([
        { "__typename": "Discussion", "id": ids[0] },
        { "__typename": "Discussion", "key": "article-1" },
        { "__typename": "Discussion", "id": ids[2] },
        { "__typename": "Discussion", "key": "article-3" },
    ]);
    let (data, spent) = cost(&app, query, json!({ "r": mixed })).await;
    let keys: Vec<&Value> = data["_entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["key"])
        .collect();
    assert_eq!(
        keys,
        [
            &json!("article-0"),
            &json!("article-1"),
            &json!("article-2"),
            &json!("article-3")
        ]
    );
    assert_eq!(spent, BTreeMap::from([("find".to_owned(), 2)]));
}

/// Runs `ensureDiscussion` with `key` over HTTP as user `n`; returns the discussion's id.
async fn ensure_over_http(server: &Running, token: String, key: String) -> String {
    let client = reqwest::Client::new();
    let data = graphql_data(
        &client,
        server,
        Some(&token),
        ENSURE,
        json!({ "k": key, "t": "raced", "u": "https://example.com/raced" }),
    )
    .await;
    data["ensureDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ensures_of_one_key_across_two_servers_make_one_discussion() {
    let config = server_config("ensure_race");
    let servers = [
        Running::start(config.clone()).await,
        Running::start(config.clone()).await,
    ];
    let app = TestApp::from_parts(
        servers[0].api.clone(),
        servers[0].store.clone(),
        config.database.clone(),
        Settings::new(Layout::PerComment),
    );
    for round in 0..5 {
        let key = format!("raced-{round}");
        let calls = (0..16).map(|n| {
            let server = &servers[n % 2];
            ensure_over_http(server, app.token(&format!("user{n}"), "Racer"), key.clone())
        });
        let ids = futures::future::join_all(calls).await;
        assert!(
            ids.iter().all(|id| *id == ids[0]),
            "round {round}: 16 concurrent ensures gave several discussions: {ids:?}"
        );
        let found = app.ok(BY_KEY, json!({ "k": key })).await;
        assert_eq!(found["discussionByKey"]["id"], ids[0].as_str());
    }
    let total = app.ok("{ discussions { totalCount } }", json!({})).await;
    assert_eq!(
        total["discussions"]["totalCount"], 5,
        "one discussion per key"
    );
    let client = reqwest::Client::new();
    let (status, body) = post_graphql(
        &client,
        &servers[1],
        None,
        BY_KEYS,
        json!({ "k": ["raced-0", "raced-2"] }),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        body["data"]["discussionsByKeys"][1]["id"].is_string(),
        "{body:#}"
    );
    for server in servers {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_left_without_its_discussion_is_completed_by_ensure() {
    let app = TestApp::new("claims", Layout::Bucketed).await;
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database);
    // As a creation on a server without transactions leaves it when it stops between its two
    // writes: the claim, and no discussion.
    let id = "00112233445566778899aabb";
    db.collection::<mongodb::bson::Document>(Discussions::KEYS_COLLECTION)
        .insert_one(doc! { "_id": "left behind", "discussion": id, "created": 1_i64 })
        .await
        .unwrap();
    let found = app.ok(BY_KEY, json!({ "k": "left behind" })).await;
    assert_eq!(found["discussionByKey"], Value::Null);
    let taken = app
        .exec(CREATE, json!({ "t": "t", "k": "left behind" }))
        .await;
    assert_eq!(error_code(&taken), "BAD_USER_INPUT", "{taken:#}");
    let ensured = app
        .ok(ENSURE, json!({ "k": "left behind", "t": "Completed" }))
        .await;
    assert_eq!(
        ensured["ensureDiscussion"],
        json!({ "id": id, "title": "Completed", "key": "left behind", "url": null, "layout": "BUCKETED", "commentCount": 0 })
    );
    app.post(id, None, "it works").await;
    let found = app.ok(BY_KEY, json!({ "k": "left behind" })).await;
    assert_eq!(found["discussionByKey"]["commentCount"], 1);
    let again = app
        .ok(ENSURE, json!({ "k": "left behind", "t": "x" }))
        .await;
    assert_eq!(again["ensureDiscussion"]["id"], id);
}
