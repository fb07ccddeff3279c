//! Guests comment through the reference embed in a real browser (headless Chromium, driven by
//! tests/node/guest-embed.mjs and tests/node/altcha-widget.mjs) on pages of another origin, with
//! `THREADQL_GUESTS=post`: a guest without a token types a name and a comment, threadql's own
//! worker proves (in a frame of threadql's origin), the comment shows marked as a guest's, and the
//! guest edits it through the token the page kept, before and after a reload. The honeypot is
//! there and unseen, a pre-moderated discussion tells the guest to wait, no request goes to a
//! third origin, what the guest gave privately reaches the moderators (and their console) only,
//! and ALTCHA's own widget, loaded from the host page, proves a comment with threadql's
//! challenge too.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use threadql::config::{Config, GuestArg};
use threadql::domain::Layout;

use crate::node;
use crate::support::{graphql_data, moderator_token, unique_db, Running, Settings};

/// The browser the scripts drive.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The longest a browser run may take.
const GUEST_BROWSER_TIMEOUT: Duration = Duration::from_secs(300);

/// The guest page's key: its discussion is created by the guest's first comment.
const GUEST_KEY: &str = "articles/open-to-guests";
/// The key of the page whose discussion holds guests' comments for a moderator.
const HELD_GUEST_KEY: &str = "articles/guests-wait";
/// The key the demo page (threadql's own origin) shows.
const DEMO_KEY: &str = "demo/guests";
/// The key of ALTCHA's widget's page.
const ALTCHA_KEY: &str = "articles/altcha-widget";

/// What the guest types.
const NAME: &str = "Ada, a guest";
const EMAIL: &str = "ada.guest@example.test";
const WEBSITE: &str = "https://ada.example.test/";
const TEXT: &str = "A guest's first comment, proven by threadql's worker";
const EDITED: &str = "Edited by its guest, through the kept token";
const EDITED_AGAIN: &str = "Edited again after a reload";
const REPLY: &str = "A guest's reply, soon deleted";
const ROBOT: &str = "Cheap pills, from a robot that fills every field";
const HELD_TEXT: &str = "A guest's comment that waits for a moderator";
const DEMO_TEXT: &str = "A guest's comment on the demo page";
const BAN_REASON: &str = "A test ban";

/// A server taking guest comments (`post`), with the host pages' origin allowed, and guest
/// posts limited loosely (this run posts several from one network in a few seconds).
async fn guest_server(label: &str, host_origin: &str) -> Running {
    let mut config: Config = Settings::new(Layout::PerComment).config(&unique_db(label));
    config.cors_origins = Some(host_origin.parse().expect("the host origin"));
    config.guests.policy = GuestArg::Post;
    config.guests.rate_limit = "100/1s".parse().expect("a rate");
    Running::start(config).await
}

/// A page of the host origin that mounts the embed from threadql, without a token.
fn guest_host_page(threadql: &str, title: &str, key: &str) -> Html<String> {
    let key = serde_json::to_string(key).expect("key");
    Html(format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>{title}</title>
</head>
<body>
<main>
<h1>{title}</h1>
<p>A page that takes comments from people without an account.</p>
<section id="comments"></section>
</main>
<script type="module">
import {{ mount }} from "{threadql}/embed/threadql.js";
window.threadqlWidget = mount(document.getElementById("comments"), {{ key: {key} }});
</script>
</body>
</html>"#
    ))
}

async fn open_page(State(threadql): State<String>) -> Html<String> {
    guest_host_page(&threadql, "Open to guests", GUEST_KEY)
}

async fn waiting_page(State(threadql): State<String>) -> Html<String> {
    guest_host_page(&threadql, "Guests wait here", HELD_GUEST_KEY)
}

/// ALTCHA's widget on a page of the host origin, its script served by the host too (from
/// tests/node/node_modules), its challenge from threadql's `/guest/challenge`.
async fn altcha_page(State(threadql): State<String>) -> Html<String> {
    Html(format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>ALTCHA's widget</title>
<script type="module" src="/altcha/altcha.js"></script>
</head>
<body>
<main>
<h1>ALTCHA's widget, against threadql</h1>
<form id="form">
<altcha-widget challenge="{threadql}/guest/challenge"></altcha-widget>
</form>
</main>
</body>
</html>"#
    ))
}

/// The widget's script, as npm installed it.
async fn altcha_script() -> Response {
    let path = node::dir().join("node_modules/altcha/dist/main/altcha.js");
    match std::fs::read(&path) {
        Ok(bytes) => ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], bytes).into_response(),
        Err(e) => (
            axum::http::StatusCode::NOT_FOUND,
            format!("{}: {e}", path.display()),
        )
            .into_response(),
    }
}

/// Serves the host pages on `listener` until the test ends.
fn serve_guest_pages(listener: tokio::net::TcpListener, threadql: String) {
    let app = Router::new()
        .route("/guest", get(open_page))
        .route("/held", get(waiting_page))
        .route("/altcha", get(altcha_page))
        .route("/altcha/altcha.js", get(altcha_script))
        .with_state(threadql);
    tokio::spawn(async move { axum::serve(listener, app).await });
}

/// A listener for the host pages, and its origin.
async fn host_listener() -> (tokio::net::TcpListener, String) {
    let host = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind the host pages");
    let origin = format!("http://{}", host.local_addr().expect("host address"));
    (host, origin)
}

/// Fails the test on anything a browser run recorded that it forbids.
fn assert_clean_run(summary: &Value, screenshot: &Path) {
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
}

/// The discussion id of `key`, read as a moderator.
async fn discussion_of(client: &reqwest::Client, server: &Running, key: &str) -> String {
    let data = graphql_data(
        client,
        server,
        Some(&moderator_token("mod", "A Moderator")),
        "query($k: String!) { discussionByKey(key: $k) { id } }",
        json!({ "k": key }),
    )
    .await;
    data["discussionByKey"]["id"]
        .as_str()
        .expect("the discussion exists")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_comments_edits_and_is_seen_by_moderators_through_the_embed() {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the guest browser test needs Chromium; run ./scripts/install-deps.sh"
    );
    node::require("playwright-core").await;
    node::require("axe-core").await;
    let (host, host_origin) = host_listener().await;
    let server = guest_server("guest-embed", &host_origin).await;
    let threadql_origin = format!("http://{}", server.addr);
    serve_guest_pages(host, threadql_origin.clone());

    // The held page's discussion: guests' comments there wait for a moderator.
    let client = reqwest::Client::new();
    let moderator = moderator_token("mod", "A Moderator");
    let ensured = graphql_data(
        &client,
        &server,
        Some(&moderator),
        "mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }",
        json!({ "i": { "key": HELD_GUEST_KEY, "title": "Guests wait here", "url": format!("{host_origin}/held") } }),
    )
    .await;
    let held_id = ensured["ensureDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let set = graphql_data(
        &client,
        &server,
        Some(&moderator),
        "mutation($d: ID!) { setGuestPolicy(id: $d, policy: PRE) { guests } }",
        json!({ "d": held_id }),
    )
    .await;
    assert_eq!(set["setGuestPolicy"]["guests"], "PRE");

    // The demo page's discussion: its page is of threadql's own origin, not one the pages'
    // rule lets anyone but a moderator create a discussion for.
    graphql_data(
        &client,
        &server,
        Some(&moderator),
        "mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }",
        json!({ "i": { "key": DEMO_KEY, "title": "The demo, for guests" } }),
    )
    .await;

    let screenshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser/guest-embed.png");
    let setup = json!({
        "host": host_origin,
        "threadql": threadql_origin,
        "demoKey": DEMO_KEY,
        "screenshot": screenshot.to_string_lossy(),
        "guest": {
            "name": NAME, "email": EMAIL, "website": WEBSITE, "text": TEXT, "edited": EDITED,
            "editedAgain": EDITED_AGAIN, "reply": REPLY, "robot": ROBOT, "held": HELD_TEXT,
            "demo": DEMO_TEXT, "banReason": BAN_REASON,
        },
    });
    let (summary, _) = node::summary(
        "guest-embed.mjs",
        &[&setup.to_string()],
        &[("THREADQL_MODERATOR", &moderator)],
        "GUESTS",
        GUEST_BROWSER_TIMEOUT,
    )
    .await;
    assert_clean_run(&summary, &screenshot);
    let steps = &summary["steps"];

    // The guest's box: a name, an email and a website said to be for moderators only, and a
    // honeypot off-screen, hidden from assistive technology, out of the tab order.
    assert_eq!(steps["count"], "No comments yet", "{summary:#}");
    assert_eq!(
        steps["labels"],
        json!([
            "Name (shown with your comment)",
            "Email (optional, never shown to anyone but the moderators)",
            "Website (optional, never shown to anyone but the moderators)",
            "Add a comment",
        ]),
        "{summary:#}"
    );
    assert_eq!(
        steps["honeypot"],
        json!({ "offScreen": true, "ariaHidden": true, "tabIndex": -1, "autocomplete": "off" }),
        "{summary:#}"
    );
    assert_eq!(
        steps["tabOrder"],
        json!(["name", "email", "website", "text", "Post comment"]),
        "{summary:#}"
    );
    assert_eq!(
        steps["frame"],
        format!("{threadql_origin}/embed/proof"),
        "{summary:#}"
    );
    assert_eq!(steps["frameRequests"], json!(2), "one frame per page load");
    assert_eq!(
        steps["axe"],
        json!([]),
        "axe-core on the guest's box: {summary:#}"
    );

    // The comment shows under the guest's name, marked; the page kept its token.
    let posted = &steps["posted"];
    assert_eq!(posted["author"], NAME, "{summary:#}");
    assert_eq!(posted["badge"], "guest", "{summary:#}");
    assert_eq!(steps["countAfter"], "1 comment");
    assert_eq!(steps["kept"], json!(1), "the comment's token");
    assert_eq!(
        steps["remembered"],
        json!({ "name": NAME, "website": WEBSITE })
    );
    assert_eq!(steps["editBox"], TEXT);
    assert_eq!(steps["edited"]["body"], EDITED);
    assert_eq!(steps["nameAfterReload"], NAME);
    assert_eq!(steps["editedAgain"], EDITED_AGAIN);
    assert_eq!(steps["replyName"], NAME);
    assert_eq!(steps["replyDeleted"], "This comment was deleted.");
    assert_eq!(steps["replyActionsAfter"], json!([]));
    assert_eq!(
        steps["heldHint"],
        json!(["A moderator reads comments from guests before they are shown."])
    );
    assert_eq!(
        steps["heldTold"],
        "Your comment is waiting for a moderator."
    );
    assert_eq!(steps["heldShown"], json!(0));
    assert_eq!(steps["demo"]["badge"], "guest", "{summary:#}");
    assert_eq!(
        (&steps["demoFrames"], &steps["demoFrameRequests"]),
        (&json!(0), &json!(0)),
        "on threadql's own origin the worker runs without a frame"
    );

    // The moderators see what the guest gave; the public read holds none of it.
    let discussion = discussion_of(&client, &server, GUEST_KEY).await;
    let read = "query($d: ID!) { discussion(id: $d) { guests threads(first: 10) { nodes { slug text status author { name guest } guestDetails { email website network } } } } }";
    let as_moderator = graphql_data(
        &client,
        &server,
        Some(&moderator),
        read,
        json!({ "d": discussion }),
    )
    .await;
    let threads = as_moderator["discussion"]["threads"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let first = threads
        .iter()
        .find(|c| c["slug"] == steps["slug"])
        .expect("the guest's comment");
    assert_eq!(first["text"], EDITED_AGAIN);
    assert_eq!(first["author"], json!({ "name": NAME, "guest": true }));
    assert_eq!(first["guestDetails"]["email"], EMAIL);
    assert_eq!(first["guestDetails"]["website"], WEBSITE);
    assert_eq!(first["guestDetails"]["network"], "127.0.0.0/24");
    // The robot was answered as a guest is, and its comment is stored rejected.
    assert!(
        steps["robot"]
            .as_str()
            .is_some_and(|s| s.contains("Cheap pills") || s.contains("waiting")),
        "{summary:#}"
    );
    let robot = threads.iter().find(|c| c["author"]["name"] == "Robot");
    assert!(
        robot.is_none_or(|c| c["status"] == "REJECTED"),
        "the honeypot's comment: {as_moderator:#}"
    );
    let public = graphql_data(&client, &server, None, read, json!({ "d": discussion })).await;
    let public_text = public.to_string();
    assert!(!public_text.contains(EMAIL), "{public:#}");
    assert!(!public_text.contains("ada.example.test"), "{public:#}");
    assert!(!public_text.contains("127.0.0.0"), "{public:#}");
    assert!(!public_text.contains(ROBOT), "{public:#}");
    assert_eq!(public["discussion"]["guests"], "POST");

    // The console showed the held comment's details as the API gives them to moderators, and
    // banned and unbanned its network.
    let held = graphql_data(
        &client,
        &server,
        Some(&moderator),
        "query($d: ID!) { moderationQueue(queue: PENDING, discussionId: $d, first: 5) { nodes { text guestDetails { email website network } } } }",
        json!({ "d": held_id }),
    )
    .await;
    let held = &held["moderationQueue"]["nodes"];
    assert_eq!(held[0]["text"], HELD_TEXT, "{held:#}");
    let details = &held[0]["guestDetails"];
    assert_eq!(details["email"], EMAIL, "{held:#}");
    assert_eq!(details["network"], "127.0.0.0/24", "{held:#}");
    let console = &steps["console"];
    let given = |field: &str| details[field].as_str().unwrap_or("none given").to_owned();
    assert_eq!(
        console["details"],
        json!([given("email"), given("website"), given("network")]),
        "{summary:#}"
    );
    assert_eq!(console["badge"], "guest");
    assert_eq!(console["prefilled"], "127.0.0.0/24");
    assert_eq!(console["banned"][0][0], "127.0.0.0/24", "{summary:#}");
    assert_ne!(console["banned"][0][1], "Forever", "banned for 7 days");
    assert_eq!(console["banned"][0][2], BAN_REASON);
    assert_eq!(console["unbanned"], "No network is banned.");
    assert_eq!(console["left"], json!([]));
    server.shutdown().await;
}

/// ALTCHA's widget (npm `altcha` 3.x, which reads threadql's v1 challenge as v1 and answers
/// with the v1 payload) proves a comment that threadql takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altchas_own_widget_proves_a_guest_comment() {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: run ./scripts/install-deps.sh"
    );
    node::require("playwright-core").await;
    node::require("altcha").await;
    let (host, host_origin) = host_listener().await;
    let server = guest_server("guest-altcha", &host_origin).await;
    let threadql_origin = format!("http://{}", server.addr);
    serve_guest_pages(host, threadql_origin.clone());
    let setup = json!({
        "host": host_origin,
        "threadql": threadql_origin,
        "key": ALTCHA_KEY,
        "name": "A guest with ALTCHA's widget",
        "text": "Proven by ALTCHA's own widget",
    });
    let (summary, _) = node::summary(
        "altcha-widget.mjs",
        &[&setup.to_string()],
        &[],
        "ALTCHA",
        GUEST_BROWSER_TIMEOUT,
    )
    .await;
    let screenshot = Path::new("(none)");
    assert_clean_run(&summary, screenshot);
    assert_eq!(summary["widget"], "verified", "{summary:#}");
    assert_eq!(summary["challengeRequests"], json!(1), "{summary:#}");
    assert_eq!(
        summary["posted"]["data"]["postComment"],
        json!({
            "slug": summary["posted"]["data"]["postComment"]["slug"],
            "status": "APPROVED",
            "text": "Proven by ALTCHA's own widget",
            "author": { "name": "A guest with ALTCHA's widget", "guest": true },
        }),
        "{summary:#}"
    );
    // The same payload again is a replay: refused.
    let client = reqwest::Client::new();
    let discussion = discussion_of(&client, &server, ALTCHA_KEY).await;
    let (_, again) = crate::support::post_graphql(
        &client,
        &server,
        None,
        "mutation($i: PostCommentInput!) { postComment(input: $i) { slug } }",
        json!({ "i": { "discussionId": discussion, "text": "Again", "guest": { "name": "Again", "proof": summary["payload"] } } }),
    )
    .await;
    assert_eq!(
        crate::support::error_code(&again),
        "BAD_USER_INPUT",
        "{again:#}"
    );
    server.shutdown().await;
}
