//! Discussions and their pages, over real sockets: page keys are composed and visible, users who
//! are not moderators create discussions only for pages of the allowed origins, and moderators
//! correct a discussion's title and address.

use std::time::{Duration, Instant};

use mongodb::bson::{doc, Document};
use serde_json::{json, Value};

use crate::support::{
    graphql_data, moderator_token, outcome, post_graphql, server_config, server_uri, token, Running,
};

const CREATE: &str = "mutation($t: String!, $k: String, $u: String) { createDiscussion(input: {title: $t, key: $k, url: $u}) { id key url } }";
const ENSURE: &str = "mutation($k: String!, $t: String!, $u: String) { ensureDiscussion(input: {key: $k, title: $t, url: $u}) { id title key url } }";
const BY_KEY: &str = "query($k: String!) { discussionByKey(key: $k) { id key } }";
const UPDATE: &str = "mutation($id: ID!, $t: String, $u: String) { updateDiscussion(id: $id, title: $t, url: $u) { id title key url } }";
const READ: &str = "query($id: ID!) { discussion(id: $id) { title url } }";
const LOG: &str = "{ moderationLog(first: 5) { nodes { action discussionId detail } } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_keys_are_composed_and_refuse_invisible_characters() {
    let mut config = server_config("probe_keys");
    config.cache_bytes = 0;
    let database = config.database.clone();
    let server = Running::start(config).await;
    let client = reqwest::Client::new();
    let user = token("user", "User");
    for key in [
        "page\u{200B}",
        "\u{200B}",
        "a\u{200D}b",
        "\u{FEFF}page",
        "page\u{2060}",
        "rtl\u{202E}",
    ] {
        for (query, vars) in [
            (ENSURE, json!({ "k": key, "t": "t" })),
            (CREATE, json!({ "k": key, "t": "t" })),
            (BY_KEY, json!({ "k": key })),
        ] {
            let (status, body) = post_graphql(&client, &server, Some(&user), query, vars).await;
            assert_eq!(
                (status, outcome(&body).as_str()),
                (200, "BAD_USER_INPUT"),
                "{key:?}: {body:#}"
            );
            assert!(
                body["errors"][0]["message"]
                    .as_str()
                    .unwrap()
                    .contains("invisible"),
                "{body:#}"
            );
        }
    }
    // Composed and decomposed are one key.
    let composed = "caf\u{E9}";
    let decomposed = "cafe\u{301}";
    let made = graphql_data(
        &client,
        &server,
        Some(&user),
        ENSURE,
        json!({ "k": composed, "t": "Café" }),
    )
    .await;
    let id = made["ensureDiscussion"]["id"].clone();
    let found = graphql_data(&client, &server, None, BY_KEY, json!({ "k": decomposed })).await;
    println!("key {decomposed:?} finds {}", found["discussionByKey"]);
    assert_eq!(found["discussionByKey"]["id"], id);
    let again = graphql_data(
        &client,
        &server,
        Some(&user),
        ENSURE,
        json!({ "k": decomposed, "t": "x" }),
    )
    .await;
    assert_eq!(again["ensureDiscussion"]["id"], id);
    assert_eq!(again["ensureDiscussion"]["key"], composed);
    let (_, taken) = post_graphql(
        &client,
        &server,
        Some(&user),
        CREATE,
        json!({ "k": decomposed, "t": "t" }),
    )
    .await;
    assert_eq!(outcome(&taken), "BAD_USER_INPUT", "{taken:#}");

    // A key stored decomposed before keys were composed is found by either form, as composed.
    let legacy = graphql_data(
        &client,
        &server,
        Some(&user),
        CREATE,
        json!({ "k": "legacy", "t": "Old" }),
    )
    .await;
    let legacy_id = legacy["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&database);
    db.collection::<Document>("discussions")
        .update_one(
            doc! { "_id": &legacy_id },
            doc! { "$set": { "key": "nai\u{308}ve" } },
        )
        .await
        .unwrap();
    for key in ["na\u{EF}ve", "nai\u{308}ve"] {
        let found = graphql_data(&client, &server, None, BY_KEY, json!({ "k": key })).await;
        assert_eq!(
            found["discussionByKey"],
            json!({ "id": legacy_id, "key": "na\u{EF}ve" }),
            "{key:?}"
        );
    }
    let ensured = graphql_data(
        &client,
        &server,
        Some(&user),
        ENSURE,
        json!({ "k": "na\u{EF}ve", "t": "New" }),
    )
    .await;
    assert_eq!(ensured["ensureDiscussion"]["id"], legacy_id.as_str());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_pages_of_the_allowed_origins_get_new_discussions() {
    // The CORS origins are the pages' by default.
    let mut config = server_config("probe_pages_cors");
    config.cors_origins = Some("https://blog.example".parse().expect("origins"));
    let server = Running::start(config).await;
    let client = reqwest::Client::new();
    let user = token("user", "User");
    let moderator = moderator_token("mod", "Moderator");
    let ensure = |token: String, key: &'static str, url: Option<&'static str>| {
        let (client, server) = (client.clone(), &server);
        async move {
            let vars = json!({ "k": key, "t": "Mine now", "u": url });
            post_graphql(&client, server, Some(&token), ENSURE, vars)
                .await
                .1
        }
    };
    let foreign = ensure(user.clone(), "/post/1", Some("https://evil.example/post/1")).await;
    println!(
        "ensureDiscussion for https://evil.example: {}",
        outcome(&foreign)
    );
    assert_eq!(outcome(&foreign), "FORBIDDEN", "{foreign:#}");
    let message = foreign["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("https://blog.example"), "{message}");
    for refused in [
        ensure(user.clone(), "/post/1", Some("http://blog.example/post/1")).await,
        ensure(
            user.clone(),
            "/post/1",
            Some("https://blog.example:8443/post/1"),
        )
        .await,
        ensure(user.clone(), "/post/1", None).await,
    ] {
        assert_eq!(outcome(&refused), "FORBIDDEN", "{refused:#}");
    }
    let (_, created) = post_graphql(
        &client,
        &server,
        Some(&user),
        CREATE,
        json!({ "t": "t", "k": "/post/1", "u": "https://evil.example/" }),
    )
    .await;
    assert_eq!(outcome(&created), "FORBIDDEN", "{created:#}");
    // Nothing was created by them.
    let none = graphql_data(&client, &server, None, BY_KEY, json!({ "k": "/post/1" })).await;
    assert_eq!(none["discussionByKey"], Value::Null);

    let own = ensure(user.clone(), "/post/1", Some("https://blog.example/post/1")).await;
    assert_eq!(own["errors"], Value::Null, "{own:#}");
    let id = own["data"]["ensureDiscussion"]["id"].clone();
    // Once it exists, any page gets it (nothing is created).
    let elsewhere = ensure(user.clone(), "/post/1", Some("https://evil.example/post/1")).await;
    assert_eq!(
        elsewhere["data"]["ensureDiscussion"]["id"], id,
        "{elsewhere:#}"
    );
    assert_eq!(
        elsewhere["data"]["ensureDiscussion"]["url"],
        "https://blog.example/post/1"
    );
    // Moderators are not restricted; a discussion without key or url is anyone's to create.
    let moderated = ensure(moderator, "/post/2", Some("https://evil.example/post/2")).await;
    assert_eq!(moderated["errors"], Value::Null, "{moderated:#}");
    graphql_data(
        &client,
        &server,
        Some(&user),
        CREATE,
        json!({ "t": "Open" }),
    )
    .await;
    server.shutdown().await;

    // `THREADQL_PAGE_ORIGINS` names them, and the public address's pages are the server's own.
    let mut config = server_config("probe_pages_listed");
    config.cors_origins = Some("https://blog.example".parse().expect("origins"));
    config.page_origins = Some("https://news.example".parse().expect("origins"));
    config.public_url = Some("https://comments.example".parse().expect("origin"));
    let server = Running::start(config).await;
    for (url, code) in [
        ("https://news.example/a", "ok"),
        ("https://comments.example/embed/demo?key=b", "ok"),
        ("https://blog.example/c", "FORBIDDEN"),
    ] {
        let key = url.rsplit('/').next().unwrap();
        let vars = json!({ "k": key, "t": "t", "u": url });
        let (_, body) = post_graphql(&client, &server, Some(&user), ENSURE, vars).await;
        assert_eq!(outcome(&body), code, "{url}: {body:#}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moderators_correct_a_discussions_title_and_url() {
    let config = server_config("probe_update");
    let mut second = config.clone();
    let server = Running::start(config).await;
    // A second process on the same database, whose read cache follows the change feed.
    second.listen = "127.0.0.1:0".parse().unwrap();
    let other = Running::start(second).await;
    let client = reqwest::Client::new();
    let user = token("user", "User");
    let moderator = moderator_token("mod", "Moderator");
    let vars = json!({ "t": "Mine now", "k": "/post/9", "u": "https://evil.example/" });
    let created = graphql_data(&client, &server, Some(&user), CREATE, vars).await;
    let id = created["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Read often enough on the other process to be cached there.
    for _ in 0..4 {
        let read = graphql_data(&client, &other, None, READ, json!({ "id": id })).await;
        assert_eq!(read["discussion"]["title"], "Mine now");
    }

    let vars = json!({ "id": id, "t": "Post 9", "u": "https://blog.example/post/9" });
    let (_, refused) = post_graphql(&client, &server, Some(&user), UPDATE, vars.clone()).await;
    assert_eq!(outcome(&refused), "FORBIDDEN", "{refused:#}");
    let updated = graphql_data(&client, &server, Some(&moderator), UPDATE, vars).await;
    assert_eq!(
        updated["updateDiscussion"],
        json!({ "id": id, "title": "Post 9", "key": "/post/9", "url": "https://blog.example/post/9" })
    );
    let wanted = json!({ "title": "Post 9", "url": "https://blog.example/post/9" });
    let started = Instant::now();
    loop {
        let read = graphql_data(&client, &other, None, READ, json!({ "id": id })).await;
        if read["discussion"] == wanted {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the other process still reads {read:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = graphql_data(&client, &server, Some(&moderator), LOG, json!({})).await;
    assert_eq!(
        log["moderationLog"]["nodes"][0],
        json!({ "action": "UPDATE_DISCUSSION", "discussionId": id, "detail": "title, url" })
    );

    // The rules of creation, and an update that names nothing.
    for (vars, code) in [
        (json!({ "id": id, "t": "  " }), "BAD_USER_INPUT"),
        (json!({ "id": id, "t": "x".repeat(301) }), "BAD_USER_INPUT"),
        (
            json!({ "id": id, "u": "javascript:alert(1)" }),
            "BAD_USER_INPUT",
        ),
        (json!({ "id": id }), "BAD_USER_INPUT"),
        (
            json!({ "id": "00112233445566778899aabb", "t": "t" }),
            "NOT_FOUND",
        ),
        (json!({ "id": "not an id", "t": "t" }), "BAD_USER_INPUT"),
    ] {
        let (_, body) =
            post_graphql(&client, &server, Some(&moderator), UPDATE, vars.clone()).await;
        assert_eq!(outcome(&body), code, "{vars}: {body:#}");
    }
    // A title alone: the url (a null variable) is kept.
    let renamed = graphql_data(
        &client,
        &server,
        Some(&moderator),
        UPDATE,
        json!({ "id": id, "t": "Post nine", "u": null }),
    )
    .await;
    assert_eq!(
        renamed["updateDiscussion"],
        json!({ "id": id, "title": "Post nine", "key": "/post/9", "url": "https://blog.example/post/9" })
    );
    // Changing nothing logs nothing.
    graphql_data(
        &client,
        &server,
        Some(&moderator),
        UPDATE,
        json!({ "id": id, "t": "Post nine", "u": "https://blog.example/post/9" }),
    )
    .await;
    let log = graphql_data(&client, &server, Some(&moderator), LOG, json!({})).await;
    let details: Vec<&Value> = log["moderationLog"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["detail"])
        .collect();
    assert_eq!(details, [&json!("title"), &json!("title, url")]);
    other.shutdown().await;
    server.shutdown().await;
}
