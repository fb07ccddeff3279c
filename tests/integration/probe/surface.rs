//! The server's surface, over real sockets: reports never hide a moderator's comment, the demo
//! page fills its template once, live connections trust scheme, host and port of `Origin` (never
//! `Host`), and GraphiQL runs under a Content-Security-Policy.

use serde_json::{json, Value};

use crate::support::{
    graphql_data, live_status, moderator_token, server_config, token, LiveKind, Running,
};

const CREATE: &str = "mutation($t: String!, $k: String, $u: String) { createDiscussion(input: {title: $t, key: $k, url: $u}) { id key url } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug status } }";
const PIN: &str = "mutation($d: ID!, $s: String!) { pinComment(discussionId: $d, slug: $s, pinned: true) { slug } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
const LINK: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { status text reportCount author { id } } }";
const QUEUE: &str = "query($q: ModerationQueue!, $d: ID) { moderationQueue(queue: $q, discussionId: $d, first: 50) { nodes { slug } } }";

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
