//! The server's surface, over real sockets: reports never hide a moderator's comment, the demo
//! page fills its template once, live connections trust scheme, host and port of `Origin` (never
//! `Host`), GraphiQL runs under a Content-Security-Policy, page keys are composed and visible,
//! users who are not moderators create discussions only for pages of the allowed origins, and
//! moderators correct a discussion's title and address.

use std::time::{Duration, Instant};

use mongodb::bson::{doc, Document};
use serde_json::{json, Value};

use crate::support::{
    graphql_data, live_status, moderator_token, post_graphql, server_config, server_uri, token,
    LiveKind, Running,
};

const CREATE: &str = "mutation($t: String!, $k: String, $u: String) { createDiscussion(input: {title: $t, key: $k, url: $u}) { id key url } }";
const ENSURE: &str = "mutation($k: String!, $t: String!, $u: String) { ensureDiscussion(input: {key: $k, title: $t, url: $u}) { id title key url } }";
const BY_KEY: &str = "query($k: String!) { discussionByKey(key: $k) { id key } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug status } }";
const PIN: &str = "mutation($d: ID!, $s: String!) { pinComment(discussionId: $d, slug: $s, pinned: true) { slug } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
const LINK: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { status text reportCount author { id } } }";
const QUEUE: &str = "query($q: ModerationQueue!, $d: ID) { moderationQueue(queue: $q, discussionId: $d, first: 50) { nodes { slug } } }";
const UPDATE: &str = "mutation($id: ID!, $t: String, $u: String) { updateDiscussion(id: $id, title: $t, url: $u) { id title key url } }";
const READ: &str = "query($id: ID!) { discussion(id: $id) { title url } }";
const LOG: &str = "{ moderationLog(first: 5) { nodes { action discussionId detail } } }";

/// The code of a response's first error (empty when there is none).
fn surface_code(body: &Value) -> String {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The slugs of a moderator queue of one discussion.
async fn surface_queue(server: &Running, moderator: &str, queue: &str, d: &str) -> Vec<String> {
    let client = reqwest::Client::new();
    let vars = json!({ "q": queue, "d": d });
    let data = graphql_data(&client, server, Some(moderator), QUEUE, vars).await;
    data["moderationQueue"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["slug"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moderators_comment_reported_by_many_users_stays_public() {
    let mut config = server_config("probe_mod_reports");
    config.reports_to_hold = 2;
    let server = Running::start(config).await;
    let client = reqwest::Client::new();
    let moderator = moderator_token("mod", "Moderator");
    let author = token("author", "Author");
    let created = graphql_data(
        &client,
        &server,
        Some(&moderator),
        CREATE,
        json!({ "t": "Notices" }),
    )
    .await;
    let d = created["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let post = |token: String, text: &'static str| {
        let (client, server, d) = (client.clone(), &server, d.clone());
        async move {
            let data = graphql_data(
                &client,
                server,
                Some(&token),
                POST,
                json!({ "d": d, "t": text }),
            )
            .await;
            data["postComment"]["slug"].as_str().unwrap().to_owned()
        }
    };
    let notice = post(moderator.clone(), "Read the rules before posting.").await;
    let ordinary = post(author.clone(), "An ordinary comment.").await;
    graphql_data(
        &client,
        &server,
        Some(&moderator),
        PIN,
        json!({ "d": d, "s": notice }),
    )
    .await;

    // Five users report the notice, two the ordinary comment: past the threshold of two.
    for n in 0..5 {
        let reporter = token(&format!("reporter-{n}"), "Reporter");
        let slugs = if n < 2 {
            vec![&notice, &ordinary]
        } else {
            vec![&notice]
        };
        for slug in slugs {
            let data = graphql_data(
                &client,
                &server,
                Some(&reporter),
                REPORT,
                json!({ "d": d, "s": slug }),
            )
            .await;
            assert_eq!(data["reportComment"], true);
        }
    }
    let public = |slug: String| {
        let (client, server, d) = (client.clone(), &server, d.clone());
        async move {
            graphql_data(&client, server, None, LINK, json!({ "d": d, "s": slug })).await["comment"]
                .clone()
        }
    };
    // The ordinary comment is held: the threshold works.
    let held = public(ordinary.clone()).await;
    assert_eq!(held["status"], "PENDING", "{held:#}");
    assert_eq!(held["text"], Value::Null, "{held:#}");
    // The notice stays public, with its text, and its reports are counted.
    let shown = public(notice.clone()).await;
    assert_eq!(shown["status"], "APPROVED", "{shown:#}");
    assert_eq!(shown["text"], "Read the rules before posting.", "{shown:#}");
    let seen = graphql_data(
        &client,
        &server,
        Some(&moderator),
        LINK,
        json!({ "d": d, "s": notice }),
    )
    .await;
    assert_eq!(seen["comment"]["reportCount"], 5, "{seen:#}");
    // Moderators find it in the REPORTED queue, not in PENDING.
    let reported = surface_queue(&server, &moderator, "REPORTED", &d).await;
    let pending = surface_queue(&server, &moderator, "PENDING", &d).await;
    println!("moderator's comment after 5 reports (threshold 2): {}, REPORTED {reported:?}, PENDING {pending:?}", shown["status"]);
    assert_eq!(reported, vec![notice.clone()]);
    assert_eq!(pending, vec![ordinary]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_page_fills_a_key_naming_a_placeholder_once() {
    let server = Running::start(server_config("probe_demo")).await;
    let key = "{{comments}}A{{comments}}B";
    let page = reqwest::Client::new()
        .get(server.url("/embed/demo"))
        .query(&[("key", key)])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let blocks = page.matches("id=\"comments\"").count();
    println!("demo page with key {key:?}: {blocks} comments block(s)");
    assert_eq!(blocks, 1, "{page}");
    assert!(page.contains(&format!("value=\"{key}\"")), "{page}");
    assert!(page.contains(&format!("data-key=\"{key}\"")), "{page}");
    let hostile = "{{comments}}\"><b>x</b>";
    let page = reqwest::Client::new()
        .get(server.url("/embed/demo"))
        .query(&[("key", hostile)])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(page.matches("id=\"comments\"").count(), 1, "{page}");
    assert!(!page.contains("<b>"), "{page}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_connections_check_the_origin_never_the_host() {
    let server = Running::start(server_config("probe_origin")).await;
    let port = server.addr.port();
    let evil = format!("evil.example:{port}");
    let own = format!("127.0.0.1:{port}");
    for (kind, open) in [(LiveKind::WebSocket, 101), (LiveKind::EventStream, 200)] {
        // A page whose name was rebound to this server's address sends its name as `Host`.
        let rebound = live_status(server.addr, kind, &evil, &format!("http://{evil}")).await;
        println!("{kind:?} from http://{evil} with Host {evil}: {rebound}");
        assert_eq!(rebound, 403, "{kind:?}: DNS rebinding");
        let scheme = live_status(server.addr, kind, &own, &format!("https://{own}")).await;
        assert_eq!(scheme, 403, "{kind:?}: another scheme");
        let port_off = format!("http://127.0.0.1:{}", port.wrapping_add(1));
        assert_eq!(
            live_status(server.addr, kind, &own, &port_off).await,
            403,
            "{kind:?}"
        );
        for origin in [
            format!("http://{own}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ] {
            assert_eq!(
                live_status(server.addr, kind, &own, &origin).await,
                open,
                "{kind:?} {origin}"
            );
        }
        // The own origin is the listener's, whatever `Host` says.
        let own_origin = format!("http://{own}");
        assert_eq!(
            live_status(server.addr, kind, &evil, &own_origin).await,
            open,
            "{kind:?}"
        );
    }
    server.shutdown().await;

    // Behind a public address, that origin is the server's own, and the listener's are not.
    let mut config = server_config("probe_origin_public");
    config.public_url = Some("https://comments.example".parse().expect("origin"));
    let server = Running::start(config).await;
    let own = format!("127.0.0.1:{}", server.addr.port());
    for (kind, open) in [(LiveKind::WebSocket, 101), (LiveKind::EventStream, 200)] {
        let public = live_status(
            server.addr,
            kind,
            "comments.example",
            "https://comments.example",
        )
        .await;
        assert_eq!(public, open, "{kind:?}");
        let plain = live_status(
            server.addr,
            kind,
            "comments.example",
            "http://comments.example",
        )
        .await;
        assert_eq!(plain, 403, "{kind:?}");
        let listener = live_status(server.addr, kind, &own, &format!("http://{own}")).await;
        assert_eq!(listener, 403, "{kind:?}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphiql_is_served_with_a_policy_that_forbids_framing() {
    let server = Running::start(server_config("probe_graphiql")).await;
    let client = reqwest::Client::new();
    let page = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let policy = page
        .headers()
        .get("content-security-policy")
        .map(|v| v.to_str().unwrap().to_owned());
    println!("GraphiQL's policy: {policy:?}");
    let policy = policy.expect("a Content-Security-Policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self';",
        "frame-ancestors 'none'",
        "connect-src 'self'",
    ] {
        assert!(
            policy.contains(directive),
            "{directive} missing from {policy}"
        );
    }
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    let html = page.text().await.unwrap();
    // Every script is a file of this server: none is inline, which the policy would block.
    let scripts: Vec<&str> = html.split("<script").skip(1).collect();
    assert_eq!(scripts.len(), 4, "{html}");
    for script in scripts {
        let (tag, rest) = script.split_once('>').expect("a tag");
        assert!(tag.trim_start().starts_with("src=\"/graphiql/"), "{tag}");
        assert!(rest.starts_with("</script>"), "an inline script: {rest}");
        let src = tag
            .trim_start()
            .trim_start_matches("src=\"")
            .trim_end_matches('"');
        let file = client.get(server.url(src)).send().await.unwrap();
        assert_eq!(file.status(), 200, "{src}");
    }
    server.shutdown().await;
}

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
                (status, surface_code(&body).as_str()),
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
    assert_eq!(surface_code(&taken), "BAD_USER_INPUT", "{taken:#}");

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
        surface_code(&foreign)
    );
    assert_eq!(surface_code(&foreign), "FORBIDDEN", "{foreign:#}");
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
        assert_eq!(surface_code(&refused), "FORBIDDEN", "{refused:#}");
    }
    let (_, created) = post_graphql(
        &client,
        &server,
        Some(&user),
        CREATE,
        json!({ "t": "t", "k": "/post/1", "u": "https://evil.example/" }),
    )
    .await;
    assert_eq!(surface_code(&created), "FORBIDDEN", "{created:#}");
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
        ("https://news.example/a", ""),
        ("https://comments.example/embed/demo?key=b", ""),
        ("https://blog.example/c", "FORBIDDEN"),
    ] {
        let key = url.rsplit('/').next().unwrap();
        let vars = json!({ "k": key, "t": "t", "u": url });
        let (_, body) = post_graphql(&client, &server, Some(&user), ENSURE, vars).await;
        assert_eq!(surface_code(&body), code, "{url}: {body:#}");
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
    assert_eq!(surface_code(&refused), "FORBIDDEN", "{refused:#}");
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
        assert_eq!(surface_code(&body), code, "{vars}: {body:#}");
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
