//! The reference embed (`/embed/threadql.js`) in a real browser (headless Chromium, driven by
//! tests/node/embed.mjs), mounted on pages of another origin: a second server on another port
//! serves them, and threadql allows that origin through `THREADQL_CORS_ORIGINS`, its only
//! setting that is not a default. The pages post a thread and a reply, hear comments another
//! client posts, switch the order, page threads and replies, show hostile texts without running
//! them, create a discussion on its first comment, and show failures in the widget, without one
//! request to a third origin.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use threadql::auth::JwtKeys;
use threadql::domain::Layout;

use crate::node;
use crate::support::{defaults, graphql_data, token, unique_db, Running, Settings, SECRET};

/// The browser tests/node/embed.mjs drives.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The longest the browser run may take.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(300);

/// The host page's key for its discussion (seeded here).
const KEY: &str = "articles/analytical-engine?lang=en#notes";
/// The key of a page whose discussion does not exist until its first comment.
const FRESH_KEY: &str = "articles/a-fresh-page";
/// The title the fresh page gives its discussion.
const FRESH_TITLE: &str = "A fresh page";
/// The key of the pre-moderated page.
const HELD_KEY: &str = "articles/a-moderated-page";
/// The key of a page whose discussion closed (a moderator's date, past).
const CLOSED_KEY: &str = "articles/a-closed-page";

/// Threads seeded: more than the embed's page of 20, so it offers "more comments".
const THREADS: usize = 22;
/// Replies seeded under the first thread and under its first reply: more than the embed's page
/// of 5 at each level.
const REPLIES: usize = 6;

/// Texts that must show as text and run nothing: each would set `window.__threadqlXss` or open
/// a dialog if the embed let it through.
const HOSTILE: [&str; 3] = [
    "<script>window.__threadqlXss = 'script'; alert('script')</script> and <img src=x onerror=\"window.__threadqlXss='img'\">",
    "[a link](javascript:window.__threadqlXss='link') <svg onload=\"alert('svg')\"></svg> <iframe src=\"javascript:alert(1)\"></iframe>",
    "![an image](https://images.invalid/pixel.png) <a href=\"https://evil.invalid/\" onclick=\"window.__threadqlXss='a'\">x</a> <style>*{display:none}</style>",
];

/// The people who wrote the seeded comments (the default rate limit holds each to 10
/// mutations in 10 s, as it would on a live site).
const SEEDERS: [(&str, &str); 6] = [
    ("babbage", "Charles Babbage"),
    ("somerville", "Mary Somerville"),
    ("menabrea", "Luigi Menabrea"),
    ("de-morgan", "Augustus De Morgan"),
    ("herschel", "John Herschel"),
    ("faraday", "Michael Faraday"),
];

/// Posts a comment as the author of `token`; returns its slug.
async fn post_over_http(
    client: &reqwest::Client,
    server: &Running,
    token: &str,
    discussion: &str,
    parent: Option<&str>,
    text: &str,
) -> String {
    let posted = graphql_data(
        client,
        server,
        Some(token),
        "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
        json!({ "d": discussion, "p": parent, "t": text }),
    )
    .await;
    posted["postComment"]["slug"]
        .as_str()
        .expect("slug")
        .to_owned()
}

/// Seeds the host page's discussion; returns its id and the slugs of the seeded comments by
/// name (`thread-01`…, `reply-1`…, `reply-1-1`…, `deep-1`, `deep-2`, `under-deleted`).
async fn seed_host_page(client: &reqwest::Client, server: &Running, page: &str) -> (String, Value) {
    let tokens: Vec<String> = SEEDERS.iter().map(|(sub, name)| token(sub, name)).collect();
    let author = |n: usize| tokens[n % tokens.len()].as_str();
    let ensured = graphql_data(
        client,
        server,
        Some(author(0)),
        "mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }",
        json!({ "i": { "key": KEY, "title": "Notes on the Analytical Engine", "url": page } }),
    )
    .await;
    let discussion = ensured["ensureDiscussion"]["id"]
        .as_str()
        .expect("discussion id")
        .to_owned();
    let mut slugs: BTreeMap<String, String> = BTreeMap::new();
    let mut n = 0;
    let mut add = async |slugs: &mut BTreeMap<String, String>,
                         name: String,
                         parent: Option<String>,
                         text: String| {
        n += 1;
        let slug = post_over_http(
            client,
            server,
            author(n),
            &discussion,
            parent.as_deref(),
            &text,
        )
        .await;
        slugs.insert(name, slug.clone());
        slug
    };
    for t in 1..=THREADS {
        let text = match t {
            1 => "Thread 01: the engine weaves **algebraic patterns**".to_owned(),
            2..=4 => format!("Thread {t:02}: {}", HOSTILE[t - 2]),
            _ => format!("Thread {t:02}"),
        };
        add(&mut slugs, format!("thread-{t:02}"), None, text).await;
    }
    let first = slugs["thread-01"].clone();
    for r in 1..=REPLIES {
        add(
            &mut slugs,
            format!("reply-{r}"),
            Some(first.clone()),
            format!("Reply 1.{r}"),
        )
        .await;
    }
    let first_reply = slugs["reply-1"].clone();
    for r in 1..=REPLIES {
        add(
            &mut slugs,
            format!("reply-1-{r}"),
            Some(first_reply.clone()),
            format!("Reply 1.1.{r}"),
        )
        .await;
    }
    let deepest = slugs["reply-1-1"].clone();
    for r in 1..=2 {
        add(
            &mut slugs,
            format!("deep-{r}"),
            Some(deepest.clone()),
            format!("Reply 1.1.1.{r}"),
        )
        .await;
    }
    // A tombstone with a reply under it, and a pinned thread.
    let deleted = slugs["thread-05"].clone();
    add(
        &mut slugs,
        "under-deleted".to_owned(),
        Some(deleted.clone()),
        "A reply that outlives its parent".to_owned(),
    )
    .await;
    graphql_data(
        client,
        server,
        Some(author(5)),
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
        json!({ "d": discussion, "s": deleted }),
    )
    .await;
    let moderator =
        JwtKeys::new(SECRET).mint("mod", "A Moderator", &["moderator".to_owned()], 3600);
    graphql_data(
        client,
        server,
        Some(&moderator),
        "mutation($d: ID!, $s: String!) { pinComment(discussionId: $d, slug: $s, pinned: true) { pinned } }",
        json!({ "d": discussion, "s": slugs["thread-10"] }),
    )
    .await;
    (discussion, json!(slugs))
}

/// Seeds the pre-moderated page's discussion: one comment, public before the discussion became
/// `PRE`, then rejected by a moderator (a placeholder).
async fn seed_held(client: &reqwest::Client, server: &Running, page: &str) {
    let author = token("babbage", "Charles Babbage");
    let ensured = graphql_data(
        client,
        server,
        Some(&author),
        "mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }",
        json!({ "i": { "key": HELD_KEY, "title": "A moderated page", "url": page } }),
    )
    .await;
    let discussion = ensured["ensureDiscussion"]["id"]
        .as_str()
        .expect("discussion id")
        .to_owned();
    let slug = post_over_http(client, server, &author, &discussion, None, "Soon removed").await;
    let moderator =
        JwtKeys::new(SECRET).mint("mod", "A Moderator", &["moderator".to_owned()], 3600);
    for (query, variables) in [
        (
            "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }",
            json!({ "d": discussion }),
        ),
        (
            "mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s, reason: \"off topic\") { status } }",
            json!({ "d": discussion, "s": slug }),
        ),
    ] {
        graphql_data(client, server, Some(&moderator), query, variables).await;
    }
}

/// Seeds the closed page's discussion: one comment, then a moderator's closing a second ago.
async fn seed_closed(client: &reqwest::Client, server: &Running, page: &str) {
    let author = token("demorgan", "Augustus De Morgan");
    let ensured = graphql_data(
        client,
        server,
        Some(&author),
        "mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }",
        json!({ "i": { "key": CLOSED_KEY, "title": "A closed page", "url": page } }),
    )
    .await;
    let discussion = ensured["ensureDiscussion"]["id"]
        .as_str()
        .expect("discussion id")
        .to_owned();
    post_over_http(
        client,
        server,
        &author,
        &discussion,
        None,
        "Said before it closed",
    )
    .await;
    let moderator =
        JwtKeys::new(SECRET).mint("mod", "A Moderator", &["moderator".to_owned()], 3600);
    let past = chrono::Utc::now() - chrono::Duration::seconds(1);
    graphql_data(
        client,
        server,
        Some(&moderator),
        "mutation($d: ID!, $at: DateTime) { setDiscussionClosing(id: $d, closesAt: $at) { closesAt } }",
        json!({ "d": discussion, "at": past.to_rfc3339() }),
    )
    .await;
}

/// The pages of the other origin. Each mounts the embed from threadql's origin; they differ in
/// the key and the token they give it.
#[derive(Clone)]
struct HostPages {
    /// threadql's origin.
    threadql: String,
    /// An origin where nothing listens.
    down: String,
}

/// The accent colour the host pages give the embed through its custom property.
const ACCENT: &str = "#6b2f8f";

/// A host page mounting the embed with the options written in `options` (JavaScript).
fn host_page(title: &str, script_origin: &str, options: &str) -> Html<String> {
    let title_json = serde_json::to_string(title).expect("title");
    Html(format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>{title}</title>
<style>
body {{ max-width: 46rem; margin: 2rem auto; padding: 0 1rem; font-family: Georgia, serif; }}
#comments {{ --threadql-accent: {ACCENT}; margin-top: 2rem; }}
</style>
</head>
<body>
<article><h1>{title}</h1><p>Lovelace's notes on Menabrea's sketch of the Analytical Engine.</p></article>
<section id="comments"></section>
<script type="module">
import {{ mount }} from "{script_origin}/embed/threadql.js";
const title = {title_json};
window.threadqlWidget = mount(document.getElementById("comments"), {options});
</script>
</body>
</html>"#
    ))
}

async fn article(State(pages): State<HostPages>) -> Html<String> {
    let key = serde_json::to_string(KEY).expect("key");
    host_page(
        "Notes on the Analytical Engine",
        &pages.threadql,
        &format!("{{ key: {key}, title, token: () => window.hostToken }}"),
    )
}

async fn fresh(State(pages): State<HostPages>) -> Html<String> {
    let key = serde_json::to_string(FRESH_KEY).expect("key");
    host_page(
        FRESH_TITLE,
        &pages.threadql,
        &format!("{{ key: {key}, title, token: async () => window.hostToken }}"),
    )
}

async fn held(State(pages): State<HostPages>) -> Html<String> {
    let key = serde_json::to_string(HELD_KEY).expect("key");
    host_page(
        "A moderated page",
        &pages.threadql,
        &format!("{{ key: {key}, title, token: () => window.hostToken }}"),
    )
}

async fn closed_page(State(pages): State<HostPages>) -> Html<String> {
    let key = serde_json::to_string(CLOSED_KEY).expect("key");
    host_page(
        "A closed page",
        &pages.threadql,
        &format!("{{ key: {key}, title, token: () => window.hostToken }}"),
    )
}

async fn throwing(State(pages): State<HostPages>) -> Html<String> {
    let key = serde_json::to_string(KEY).expect("key");
    host_page(
        "A page whose sign-in fails",
        &pages.threadql,
        &format!("{{ key: {key}, title, token: () => {{ throw new Error(\"no session\"); }} }}"),
    )
}

async fn down(State(pages): State<HostPages>) -> Html<String> {
    let key = serde_json::to_string(KEY).expect("key");
    let endpoint = serde_json::to_string(&format!("{}/graphql", pages.down)).expect("endpoint");
    host_page(
        "A page whose comments server is down",
        &pages.threadql,
        &format!("{{ key: {key}, title, endpoint: {endpoint}, token: \"t\" }}"),
    )
}

/// Serves the host pages on `listener` until the test ends.
fn serve_host(listener: tokio::net::TcpListener, pages: HostPages) {
    let app = Router::new()
        .route("/article", get(article))
        .route("/fresh", get(fresh))
        .route("/throwing", get(throwing))
        .route("/held", get(held))
        .route("/closed", get(closed_page))
        .route("/down", get(down))
        .with_state(pages);
    tokio::spawn(async move { axum::serve(listener, app).await });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embed_runs_on_a_page_of_another_origin_per_comment() {
    the_embed_runs_on_a_page_of_another_origin(Layout::PerComment, "embed.png").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embed_runs_on_a_page_of_another_origin_embedded() {
    the_embed_runs_on_a_page_of_another_origin(Layout::Embedded, "embed-embedded.png").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embed_runs_on_a_page_of_another_origin_bucketed() {
    the_embed_runs_on_a_page_of_another_origin(Layout::Bucketed, "embed-bucketed.png").await;
}

/// The browser run over a discussion in `layout`; its screenshot goes to target/browser/`png`
/// (docs/img/embed.png is the per-comment one).
async fn the_embed_runs_on_a_page_of_another_origin(layout: Layout, png: &str) {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the embed browser test needs Chromium; run ./scripts/install-deps.sh"
    );
    node::require("playwright-core").await;

    // The host pages' origin, known before threadql starts (it is threadql's CORS setting).
    let host = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind the host pages");
    let host_origin = format!("http://{}", host.local_addr().expect("host address"));
    // A port where nothing listens, for the page whose server is down.
    let closed =
        std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind a port");
    let down_origin = format!("http://{}", closed.local_addr().expect("closed address"));
    drop(closed);

    // The server's defaults (rate and cost limits included), but for the allowed origin.
    let mut config = Settings::new(layout).config(&unique_db("embed"));
    let defaults = defaults();
    config.rate_limit = defaults.rate_limit;
    config.rate_limit_anon = defaults.rate_limit_anon;
    config.max_complexity = defaults.max_complexity;
    config.cors_origins = Some(host_origin.parse().expect("the host origin"));
    let server = Running::start(config).await;
    let threadql_origin = format!("http://{}", server.addr);
    serve_host(
        host,
        HostPages {
            threadql: threadql_origin.clone(),
            down: down_origin,
        },
    );

    let client = reqwest::Client::new();
    let article_url = format!("{host_origin}/article");
    let (discussion, slugs) = seed_host_page(&client, &server, &article_url).await;
    seed_held(&client, &server, &format!("{host_origin}/held")).await;
    seed_closed(&client, &server, &format!("{host_origin}/closed")).await;

    let visitor = token("ada", "Ada Lovelace");
    let other = token("grace", "Grace Hopper");
    let screenshot = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/browser")
        .join(png);
    let _ = std::fs::remove_file(&screenshot);
    let setup = json!({
        "host": host_origin,
        "threadql": threadql_origin,
        "discussion": discussion,
        "slugs": slugs,
        "threads": THREADS,
        "replies": REPLIES,
        "screenshot": screenshot.to_string_lossy(),
    });
    let (summary, _) = node::summary(
        "embed.mjs",
        &[&setup.to_string()],
        &[
            ("THREADQL_TOKEN", &visitor),
            ("THREADQL_OTHER_TOKEN", &other),
        ],
        "EMBED",
        BROWSER_TIMEOUT,
    )
    .await;

    assert_eq!(
        summary["error"],
        Value::Null,
        "the browser run stopped early (screenshot: {}): {summary:#}",
        screenshot.display()
    );
    for list in [
        "outside",
        "pageErrors",
        "consoleErrors",
        "failedRequests",
        "graphqlErrors",
        "dialogs",
    ] {
        assert_eq!(
            summary[list],
            json!([]),
            "the pages had {list}: {summary:#}"
        );
    }
    assert_eq!(
        summary["blockerWorks"],
        json!(true),
        "a request to a third origin was not recorded, so `outside` proves nothing: {summary:#}"
    );
    // The page called threadql across origins, and threadql allowed exactly that origin.
    assert!(
        summary["crossOrigin"]["graphql"].as_u64().unwrap_or(0) >= 10,
        "{summary:#}"
    );
    assert_eq!(
        summary["crossOrigin"]["allowOrigin"],
        json!([host_origin]),
        "{summary:#}"
    );
    // Its reads are persisted GETs, which browsers keep and revalidate.
    assert!(
        summary["reads"]["get"].as_u64().unwrap_or(0) >= 3,
        "{summary:#}"
    );
    assert_eq!(
        summary["xss"],
        Value::Null,
        "a hostile text ran: {summary:#}"
    );

    // What the steps saw (each step also waited for it, so these only name a failure).
    let steps = &summary["steps"];
    // Thread 05 is the tombstone.
    let thread_texts = |n: usize| -> Vec<String> {
        (1..=n)
            .map(|i| match i {
                5 => "This comment was deleted.".to_owned(),
                _ => format!("Thread {i:02}"),
            })
            .collect()
    };
    assert_eq!(
        steps["count"],
        format!("{} comments", THREADS + 2 * REPLIES + 3)
    );
    assert_eq!(steps["pinned"], json!(["Thread 10"]));
    assert_eq!(steps["firstPage"], json!(thread_texts(20)), "{summary:#}");
    assert_eq!(steps["bold"], "algebraic patterns");
    assert_eq!(steps["tombstone"], "This comment was deleted.");
    assert_eq!(
        steps["underTombstone"],
        json!(["A reply that outlives its parent"])
    );
    let replies = |prefix: &str, n: usize| -> Vec<String> {
        (1..=n).map(|i| format!("{prefix}.{i}")).collect()
    };
    assert_eq!(steps["replies"]["before"], json!(replies("Reply 1", 5)));
    assert_eq!(
        steps["replies"]["after"],
        json!(replies("Reply 1", REPLIES))
    );
    assert_eq!(steps["nested"]["before"], json!(replies("Reply 1.1", 5)));
    assert_eq!(
        steps["nested"]["after"],
        json!(replies("Reply 1.1", REPLIES))
    );
    assert_eq!(steps["deep"]["before"], json!([]));
    assert_eq!(steps["deep"]["after"], json!(replies("Reply 1.1.1", 2)));
    assert_eq!(steps["allThreads"], json!(thread_texts(THREADS)));
    for (n, text) in HOSTILE.iter().enumerate() {
        let shown = steps["hostile"][n].as_str().unwrap_or_default();
        assert!(
            shown.starts_with(&format!("Thread {:02}: ", n + 2)),
            "{shown}"
        );
        let markup = &text[text.find('<').unwrap_or(0)..];
        assert!(shown.contains(markup), "the markup shows as typed: {shown}");
    }
    assert!(
        steps["hostile"][0]
            .as_str()
            .is_some_and(|t| t.contains("<script>window.__threadqlXss")),
        "the script shows as text: {summary:#}"
    );
    assert_eq!(steps["hostileElements"], json!(0), "{summary:#}");
    assert_eq!(
        steps["accent"], "rgb(107, 47, 143)",
        "the host's --threadql-accent"
    );
    assert_eq!(
        steps["announced"],
        json!([
            "New reply from Grace Hopper",
            "New comment from Grace Hopper"
        ])
    );

    // What the visitor posted through the page is stored, under the visitor's name.
    let stored = graphql_data(
        &client,
        &server,
        Some(&visitor),
        "query($k: String!) { discussionByKey(key: $k) { commentCount threads(order: NEWEST, first: 3) { nodes { slug text author { name } replies(first: 5) { nodes { text author { name } } } } } } }",
        json!({ "k": KEY }),
    )
    .await;
    let discussion_now = &stored["discussionByKey"];
    assert_eq!(
        discussion_now["commentCount"],
        THREADS + 2 * REPLIES + 3 + 5
    );
    let newest = &discussion_now["threads"]["nodes"];
    assert_eq!(newest[0]["text"], "A third voice, heard at the top");
    assert_eq!(
        newest[1]["text"],
        "Heard live: a new thread from another client"
    );
    assert_eq!(newest[2]["text"], "Posted from the embed: **a new thread**");
    assert_eq!(newest[2]["author"]["name"], "Ada Lovelace");
    assert_eq!(
        newest[2]["replies"]["nodes"],
        json!([
            { "text": "Typed with the keyboard alone", "author": { "name": "Ada Lovelace" } },
            // Grace's reply, edited and then deleted by her.
            { "text": null, "author": { "name": "[deleted]" } },
        ])
    );
    assert!(
        steps["liveEdit"]
            .as_str()
            .is_some_and(|meta| meta.starts_with("Grace Hopper") && meta.contains("(edited)")),
        "{summary:#}"
    );
    assert_eq!(steps["liveDelete"], "This comment was deleted.");
    assert_eq!(steps["draft"], "A draft outlives the switch");
    assert_eq!(
        steps["newestFirst"],
        json!([
            "A third voice, heard at the top",
            "Heard live: a new thread from another client",
            "Posted from the embed: a new thread",
        ])
    );

    // The fresh page created its discussion with its first comment, with its title and address.
    let fresh = graphql_data(
        &client,
        &server,
        Some(&visitor),
        "query($k: String!) { discussionByKey(key: $k) { key title url commentCount threads(first: 5) { nodes { text author { name } } } } }",
        json!({ "k": FRESH_KEY }),
    )
    .await;
    assert_eq!(
        fresh["discussionByKey"],
        json!({
            "key": FRESH_KEY,
            "title": FRESH_TITLE,
            "url": format!("{host_origin}/fresh"),
            "commentCount": 1,
            "threads": { "nodes": [{ "text": "The first comment of a fresh page", "author": { "name": "Ada Lovelace" } }] },
        })
    );
    assert_eq!(steps["fresh"]["before"], "No comments yet");
    assert_eq!(steps["fresh"]["after"], "1 comment");

    // A pre-moderated page: a rejected comment reads as removed, and a new comment is held
    // for a moderator (its author is told; the page neither shows nor counts it).
    let held = &steps["held"];
    assert_eq!(
        held["placeholder"], "This comment was removed by a moderator.",
        "{summary:#}"
    );
    assert_eq!(
        held["told"], "Your comment is waiting for a moderator.",
        "{summary:#}"
    );
    assert_eq!(held["count"], "1 comment", "{summary:#}");
    assert_eq!(held["shown"], json!(1), "{summary:#}");

    // A closed page: its comments, and "Comments are closed" instead of any form or Reply.
    let closed = &steps["closed"];
    assert_eq!(
        closed["texts"],
        json!(["Said before it closed"]),
        "{summary:#}"
    );
    assert_eq!(closed["notice"], "Comments are closed", "{summary:#}");
    assert_eq!(closed["forms"], json!(0), "{summary:#}");
    assert_eq!(closed["replyButtons"], json!(0), "{summary:#}");

    // Failures show in the widget.
    assert_eq!(steps["throwing"]["shown"], json!(20), "{summary:#}");
    assert_eq!(steps["throwing"]["error"], "Signing in failed: no session");
    assert_eq!(
        steps["throwing"]["postError"],
        "Not posted: Signing in failed: no session"
    );
    let down = steps["down"].as_str().unwrap_or_default();
    assert!(
        down.starts_with(
            "Comments could not be loaded: Cannot reach the comments server at http://127.0.0.1:"
        ),
        "{down}"
    );
    let demo = &steps["demo"];
    assert_eq!(demo["hostileKey"], "No comments yet", "{summary:#}");
    let bad_key = demo["badKey"].as_str().unwrap_or_default();
    assert!(
        bad_key.starts_with("Comments could not be loaded: "),
        "{bad_key}"
    );
    assert!(bad_key.contains("control character"), "{bad_key}");
    let logged = demo["badKeyLogged"].as_array().cloned().unwrap_or_default();
    assert!(
        logged.iter().any(|line| line
            .as_str()
            .is_some_and(|l| l.ends_with("(BAD_USER_INPUT)"))),
        "the refusal of the key reached the page: {logged:?}"
    );

    let png = std::fs::read(&screenshot)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}", screenshot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        screenshot.display()
    );
    server.shutdown().await;
}

/// The module's `Access-Control-Allow-Origin` for a request from `origin` (empty when absent),
/// with its status and content type.
async fn module_for(server: &Running, origin: &str) -> (u16, String, String) {
    let response = reqwest::Client::new()
        .get(server.url("/embed/threadql.js"))
        .header(reqwest::header::ORIGIN, origin)
        .send()
        .await
        .expect("the module");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map_or(String::new(), |v| v.to_str().expect("text").to_owned())
    };
    let (allowed, content_type) = (
        header("access-control-allow-origin"),
        header("content-type"),
    );
    (response.status().as_u16(), allowed, content_type)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_module_is_shared_with_the_allowed_origins_only() {
    let mut config = crate::support::server_config("embed-cors");
    config.cors_origins = Some("https://blog.example".parse().expect("origins"));
    let server = Running::start(config).await;
    let (status, allowed, content_type) = module_for(&server, "https://blog.example").await;
    assert_eq!(
        (status, allowed.as_str(), content_type.as_str()),
        (
            200,
            "https://blog.example",
            "text/javascript; charset=utf-8"
        )
    );
    // Another origin gets the file (it is public) but no permission to run it as a module.
    let (status, allowed, _) = module_for(&server, "https://evil.example").await;
    assert_eq!((status, allowed.as_str()), (200, ""));
    server.shutdown().await;

    // Without THREADQL_CORS_ORIGINS, no other origin may.
    let server = Running::start(crate::support::server_config("embed-no-cors")).await;
    let (status, allowed, _) = module_for(&server, "https://blog.example").await;
    assert_eq!((status, allowed.as_str()), (200, ""));
    server.shutdown().await;
}
