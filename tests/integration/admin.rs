//! The moderation console (`/admin`) in a real browser (headless Chromium, driven by
//! tests/node/admin.mjs), on every layout: a moderator signs in by fragment and works the queue
//! with the keyboard (approve, reject with a reason, ban from the author's history), hears a
//! comment held meanwhile and another moderator's approval, approves five comments at once, and
//! uses the discussions, bans and log views; a non-moderator sees only the refusal. The approved
//! comment appears live in the embed on a page of another origin. axe-core checks every view;
//! hostile texts and names run nothing; no request goes to a third origin, and no console or
//! page error happens.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::node;
use crate::support::{
    error_code, graphql_data, layout_name, moderator_token, now, post_graphql, sign, token,
    unique_db, Claims, Running, Settings,
};

/// The browser tests/node/admin.mjs drives.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The longest the browser run may take.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(300);

/// The key of the pre-moderated discussion the queue fills from.
const KEY: &str = "articles/moderated-page";
/// Its title, with markup that must stay text.
const TITLE: &str = "Notes <b onmouseover=\"window.__threadqlXss='title'\">on</b> moderation";

/// The moderator working the console, the second one, and a reader who cannot moderate.
const MODERATOR: (&str, &str) = ("mod-grace", "Grace Moderator");
const SECOND_MODERATOR: (&str, &str) = ("mod-second", "Second Moderator");
const READER: (&str, &str) = ("reader", "A Reader");

/// The authors of the held comments, in the queue's order (oldest first).
const APPROVED_AUTHOR: (&str, &str) = ("ada", "Ada Lovelace");
const REJECTED_AUTHOR: (&str, &str) = ("babbage", "Charles Babbage");
const BANNED_AUTHOR: (&str, &str) = ("troll", "Tess Troll");
/// A name with markup: it must show as typed and run nothing.
const HOSTILE_AUTHOR: (&str, &str) = (
    "mallory",
    "<img src=x onerror=\"window.__threadqlXss='name'\">Mallory",
);
/// Who posts while the console is open.
const LATE_AUTHOR: (&str, &str) = ("late", "Late Poster");

const APPROVED_TEXT: &str = "Approve me: **worth reading**";
const REJECTED_TEXT: &str = "Reject me: I wander off topic";
const BANNED_TEXT: &str = "Ban me: I SHOUT AT EVERYONE";
const LATE_TEXT: &str = "Held while the console is open";
/// The reason the moderator types for the rejection, and the ban's.
const REJECT_REASON: &str = "Off topic: see the rules";
const BAN_REASON: &str = "Shouting, again";
/// Who reports the article's first comment, and the note they add (markup stays text).
const REPORTER: (&str, &str) = ("reporter", "Rita Reporter");
const REPORT_NOTE: &str = "<b>buy</b> now";
/// Comments approved together.
const BULK: usize = 5;

/// Texts that must show as text and run nothing: each would set `window.__threadqlXss` or open
/// a dialog if the console let it through.
const HOSTILE: [&str; 3] = [
    "<script>window.__threadqlXss = 'script'; alert('script')</script> and <img src=x onerror=\"window.__threadqlXss='img'\">",
    "[a link](javascript:window.__threadqlXss='link') <svg onload=\"alert('svg')\"></svg> <iframe src=\"javascript:alert(1)\"></iframe>",
    "<a href=\"https://evil.invalid/\" onclick=\"window.__threadqlXss='a'\">x</a> <style>*{display:none}</style>",
];

/// Posts `text` as the author of `token` (under `parent`); returns its slug and status.
async fn post_for_console(
    client: &reqwest::Client,
    server: &Running,
    token: &str,
    discussion: &str,
    parent: Option<&str>,
    text: &str,
) -> (String, String) {
    let posted = graphql_data(
        client,
        server,
        Some(token),
        "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }",
        json!({ "d": discussion, "p": parent, "t": text }),
    )
    .await;
    let comment = &posted["postComment"];
    (
        comment["slug"].as_str().expect("slug").to_owned(),
        comment["status"].as_str().expect("status").to_owned(),
    )
}

/// The seeded queue: the discussion's id and the slugs of its held comments by role.
struct Seeded {
    discussion: String,
    parent: String,
    approved: String,
    rejected: String,
    banned: String,
    hostile: Vec<String>,
    bulk: Vec<String>,
}

/// A pre-moderated discussion whose page is `page`: a public comment by the moderator, then
/// held ones (oldest first): one to approve, a reply to reject, one whose author is banned, the
/// hostile ones, and five to approve together.
async fn seed_queue(client: &reqwest::Client, server: &Running, page: &str) -> Seeded {
    let moderator = moderator_token(MODERATOR.0, MODERATOR.1);
    let created = graphql_data(
        client,
        server,
        Some(&moderator),
        "mutation($i: CreateDiscussionInput!) { createDiscussion(input: $i) { id } }",
        json!({ "i": { "key": KEY, "title": TITLE, "url": page } }),
    )
    .await;
    let discussion = created["createDiscussion"]["id"]
        .as_str()
        .expect("discussion id")
        .to_owned();
    let (parent, _) = post_for_console(
        client,
        server,
        &moderator,
        &discussion,
        None,
        "The article's first comment",
    )
    .await;
    // A reader reports it (a moderator's comment is never held by reports: it waits in REPORTED).
    graphql_data(
        client,
        server,
        Some(&token(REPORTER.0, REPORTER.1)),
        "mutation($d: ID!, $s: String!, $n: String) { reportComment(discussionId: $d, slug: $s, reason: SPAM, note: $n) }",
        json!({ "d": discussion, "s": parent, "n": REPORT_NOTE }),
    )
    .await;
    graphql_data(
        client,
        server,
        Some(&moderator),
        "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }",
        json!({ "d": discussion }),
    )
    .await;
    let held = async |(sub, name): (&str, &str), parent: Option<&str>, text: &str| {
        let (slug, status) =
            post_for_console(client, server, &token(sub, name), &discussion, parent, text).await;
        assert_eq!(status, "PENDING", "{text}");
        slug
    };
    let approved = held(APPROVED_AUTHOR, None, APPROVED_TEXT).await;
    let rejected = held(REJECTED_AUTHOR, Some(&parent), REJECTED_TEXT).await;
    let banned = held(BANNED_AUTHOR, None, BANNED_TEXT).await;
    let mut hostile = Vec::new();
    for text in HOSTILE {
        hostile.push(held(HOSTILE_AUTHOR, None, text).await);
    }
    let mut bulk = Vec::new();
    for n in 1..=BULK {
        let sub = format!("bulk-{n}");
        let name = format!("Bulk Writer {n}");
        bulk.push(held((&sub, &name), None, &format!("Bulk {n}")).await);
    }
    Seeded {
        discussion,
        parent,
        approved,
        rejected,
        banned,
        hostile,
        bulk,
    }
}

/// The host page, on another origin: it mounts the embed (anonymous) on the discussion's key.
async fn console_host_page(State(threadql): State<String>) -> Html<String> {
    let key = serde_json::to_string(KEY).expect("key");
    Html(format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>A moderated page</title>
</head>
<body>
<main><h1>A moderated page</h1><section id="comments"></section></main>
<script type="module">
import {{ mount }} from "{threadql}/embed/threadql.js";
mount(document.getElementById("comments"), {{ key: {key}, title: "A moderated page" }});
</script>
</body>
</html>"#
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_moderates_in_a_browser_per_comment() {
    the_console_moderates_in_a_browser(Layout::PerComment, "admin-per-comment.png").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_moderates_in_a_browser_embedded() {
    the_console_moderates_in_a_browser(Layout::Embedded, "admin-embedded.png").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_moderates_in_a_browser_bucketed() {
    the_console_moderates_in_a_browser(Layout::Bucketed, "admin-bucketed.png").await;
}

/// The browser run over a discussion in `layout`; its screenshot of the queue goes to
/// target/browser/`png` (docs/img/admin.png is the per-comment one).
async fn the_console_moderates_in_a_browser(layout: Layout, png: &str) {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the console browser test needs Chromium; run ./scripts/install-deps.sh"
    );
    node::require("playwright-core").await;
    node::require("axe-core").await;

    // The host page's origin, known before threadql starts (it is threadql's CORS setting).
    let host = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind the host page");
    let host_origin = format!("http://{}", host.local_addr().expect("host address"));
    let mut config = Settings::new(layout).config(&unique_db("admin"));
    config.cors_origins = Some(host_origin.parse().expect("the host origin"));
    let server = Running::start(config).await;
    let threadql_origin = format!("http://{}", server.addr);
    let pages = Router::new()
        .route("/article", get(console_host_page))
        .with_state(threadql_origin.clone());
    tokio::spawn(async move { axum::serve(host, pages).await });

    let client = reqwest::Client::new();
    let seeded = seed_queue(&client, &server, &format!("{host_origin}/article")).await;

    let moderator = moderator_token(MODERATOR.0, MODERATOR.1);
    let second = moderator_token(SECOND_MODERATOR.0, SECOND_MODERATOR.1);
    let reader = token(READER.0, READER.1);
    let late = token(LATE_AUTHOR.0, LATE_AUTHOR.1);
    // A moderator's token that expired an hour ago (past any leeway).
    let expired = sign(&Claims {
        roles: vec!["moderator".to_owned()],
        exp: now() - 3_600,
        ..Claims::new(MODERATOR.0, MODERATOR.1)
    });
    let screenshot = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/browser")
        .join(png);
    let _ = std::fs::remove_file(&screenshot);
    let key_of = |slug: &str| format!("{}/{slug}", seeded.discussion);
    let setup = json!({
        "host": host_origin,
        "threadql": threadql_origin,
        "discussion": seeded.discussion,
        "key": KEY,
        "keys": {
            "approved": key_of(&seeded.approved),
            "rejected": key_of(&seeded.rejected),
            "reported": key_of(&seeded.parent),
            "banned": key_of(&seeded.banned),
            "hostile": seeded.hostile.iter().map(|s| key_of(s)).collect::<Vec<_>>(),
            "bulk": seeded.bulk.iter().map(|s| key_of(s)).collect::<Vec<_>>(),
        },
        "texts": { "approved": "Approve me: worth reading", "late": LATE_TEXT },
        "reasons": { "reject": REJECT_REASON, "ban": BAN_REASON },
        "ids": { "banned": BANNED_AUTHOR.0, "second": SECOND_MODERATOR.0 },
        "screenshot": screenshot.to_string_lossy(),
    });
    let (summary, _) = node::summary(
        "admin.mjs",
        &[&setup.to_string()],
        &[
            ("THREADQL_MODERATOR", &moderator),
            ("THREADQL_OTHER_MODERATOR", &second),
            ("THREADQL_READER", &reader),
            ("THREADQL_POSTER", &late),
            ("THREADQL_EXPIRED", &expired),
        ],
        "ADMIN",
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
    assert_eq!(
        summary["xss"],
        Value::Null,
        "a hostile text ran: {summary:#}"
    );
    let steps = &summary["steps"];
    let console_url = format!("{threadql_origin}/admin");

    // A reader's token: the refusal and nothing else, and the token is not kept.
    assert_eq!(
        steps["reader"],
        json!({
            "message": "This token cannot moderate.",
            "url": console_url,
            "shown": ["sign-in"],
            "items": 0,
            "stored": null,
        }),
        "{summary:#}"
    );

    // The moderator's token left the address bar and is kept for the tab only.
    assert_eq!(
        steps["signIn"],
        json!({ "url": console_url, "stored": true, "who": MODERATOR.1 }),
        "{summary:#}"
    );
    let all_keys: Vec<String> = [&seeded.approved, &seeded.rejected, &seeded.banned]
        .into_iter()
        .chain(&seeded.hostile)
        .chain(&seeded.bulk)
        .map(|slug| key_of(slug))
        .collect();
    assert_eq!(steps["queue"]["keys"], json!(all_keys), "{summary:#}");
    assert_eq!(
        steps["queue"]["tabs"],
        json!(["Pending 11", "Reported 1", "Rejected 0"]),
        "{summary:#}"
    );
    // Every item names its discussion (the title as text) and its author (markup as typed).
    assert_eq!(steps["queue"]["titles"], json!(vec![TITLE; all_keys.len()]));
    let authors = steps["queue"]["authors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(authors[3], HOSTILE_AUTHOR.1, "{summary:#}");
    assert_eq!(authors[0], APPROVED_AUTHOR.1);
    // The reply shows the comment it answers.
    assert_eq!(
        steps["queue"]["context"],
        format!("In reply to {}\n\nThe article's first comment", MODERATOR.1),
        "{summary:#}"
    );
    for (n, text) in HOSTILE.iter().enumerate() {
        let shown = steps["queue"]["hostile"][n].as_str().unwrap_or_default();
        let markup = &text[text.find('<').unwrap_or(0)..];
        assert!(shown.contains(markup), "the markup shows as typed: {shown}");
    }
    assert_eq!(steps["queue"]["dangerous"], json!(0), "{summary:#}");
    assert_eq!(steps["queue"]["bold"], "worth reading");

    // Approved with `a` after `j`: announced, focus on the next comment, live in the embed.
    assert_eq!(
        steps["approve"],
        json!({
            "focused": key_of(&seeded.approved),
            "announced": format!("Approved comment by {}", APPROVED_AUTHOR.1),
            "focusAfter": key_of(&seeded.rejected),
        }),
        "{summary:#}"
    );
    assert_eq!(
        steps["embed"],
        json!(["The article's first comment", "Approve me: worth reading"]),
        "{summary:#}"
    );
    // Rejected with `r` and a reason typed in the dialog.
    assert_eq!(
        steps["reject"],
        json!({
            "dialogFocus": "reject-reason",
            "announced": format!("Rejected comment by {}", REJECTED_AUTHOR.1),
            "focusAfter": key_of(&seeded.banned),
        }),
        "{summary:#}"
    );
    // Keys typed in a field do nothing.
    assert_eq!(
        steps["typing"],
        json!({ "value": "ja", "items": 9, "focus": "queue-filter-input" }),
        "{summary:#}"
    );
    // The author's history, their ban from it, and focus back on their comment.
    let history = &steps["history"];
    assert_eq!(
        history["title"],
        format!("History of {} ({})", BANNED_AUTHOR.1, BANNED_AUTHOR.0)
    );
    assert_eq!(history["before"], "Not banned.", "{summary:#}");
    assert!(
        history["items"].as_array().is_some_and(|items| items
            .iter()
            .any(|i| i.as_str().is_some_and(|t| t.contains("Ban me: I SHOUT")))),
        "{summary:#}"
    );
    let banned = history["after"].as_str().unwrap_or_default();
    assert!(
        banned.starts_with("Banned until ")
            && banned.contains(&format!(": {BAN_REASON} (by {}", MODERATOR.1)),
        "{summary:#}"
    );
    assert_eq!(
        history["announced"],
        format!("Banned {} for 7 days", BANNED_AUTHOR.1)
    );
    assert_eq!(history["focusAfter"], key_of(&seeded.banned));

    // Live: a comment held meanwhile arrives at the end; another moderator's approval removes
    // an item.
    let live = &steps["live"];
    let late_slug = live["slug"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        live["keys"].as_array().and_then(|k| k.last()).cloned(),
        Some(json!(key_of(&late_slug))),
        "{summary:#}"
    );
    assert_eq!(
        live["removed"],
        json!(key_of(&seeded.hostile[0])),
        "{summary:#}"
    );
    assert!(
        !live["afterRemoval"]
            .as_array()
            .is_some_and(|keys| keys.contains(&json!(key_of(&seeded.hostile[0])))),
        "{summary:#}"
    );
    // How long the queue took to hear both (a measure for the notes, not a condition).
    eprintln!(
        "{layout:?}: a held comment reached the open queue in {} ms, an approval elsewhere left it in {} ms",
        live["arrivedMs"], live["leftMs"]
    );
    // Five approved together.
    assert_eq!(
        steps["bulk"],
        json!({
            "button": format!("Approve selected ({BULK})"),
            "announced": format!("Approved {BULK} of {BULK} selected comments"),
            "left": [key_of(&seeded.banned), key_of(&seeded.hostile[1]), key_of(&seeded.hostile[2]), key_of(&late_slug)],
        }),
        "{summary:#}"
    );
    assert_eq!(
        steps["rejectedTab"],
        json!({
            "keys": [key_of(&seeded.rejected)],
            "reason": format!("Reason given: {REJECT_REASON}"),
        }),
        "{summary:#}"
    );
    assert_eq!(
        steps["reportedTab"],
        json!({
            "keys": [key_of(&seeded.parent)],
            "reports": [format!("Spam: {REPORT_NOTE}")],
        }),
        "{summary:#}"
    );
    assert_eq!(steps["keysDialog"], json!({ "open": true, "closed": true }));
    // Pasted sign-in: an expired token is refused with its reason, a moderator's gets in, and
    // signing out forgets the token.
    let refused = steps["pasted"]["expired"].as_str().unwrap_or_default();
    assert!(
        refused.starts_with("This token was refused: ") && refused.ends_with("(UNAUTHENTICATED)"),
        "{summary:#}"
    );
    assert_eq!(
        steps["pasted"],
        json!({
            "expired": refused,
            "refusals": ["(UNAUTHENTICATED)"],
            "who": MODERATOR.1,
            "signedOut": "Signed out.",
            "stored": null,
        }),
        "{summary:#}"
    );
    // The other views.
    let views = &steps["views"];
    assert_eq!(views["discussion"]["title"], TITLE, "{summary:#}");
    assert_eq!(views["discussion"]["moderation"], "PRE");
    assert_eq!(views["discussion"]["layout"], layout_name(layout));
    assert_eq!(views["bans"], json!([BANNED_AUTHOR.0]), "{summary:#}");
    assert_eq!(
        views["logBans"],
        json!([["BAN", BANNED_AUTHOR.0]]),
        "{summary:#}"
    );
    assert_eq!(
        views["logSecond"],
        json!([[
            "APPROVE",
            format!("{} ({})", SECOND_MODERATOR.1, SECOND_MODERATOR.0)
        ]]),
        "{summary:#}"
    );
    // axe-core finds nothing on any view (where at least 15 of its rules apply).
    for view in ["queue", "history", "discussions", "bans", "log"] {
        assert_eq!(
            summary["axe"][view],
            json!([]),
            "axe-core on the {view} view: {summary:#}"
        );
        let rules = summary["axeRules"][view].as_u64().unwrap_or(0);
        assert!(rules >= 15, "axe-core applied {rules} rules to {view}");
    }

    // What the console did is stored: the rejection's reason reaches its author by direct
    // link, the ban stops the author's next post, and the five are public.
    let author = token(REJECTED_AUTHOR.0, REJECTED_AUTHOR.1);
    let rejected = graphql_data(
        &client,
        &server,
        Some(&author),
        "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { status moderationReason } }",
        json!({ "d": seeded.discussion, "s": seeded.rejected }),
    )
    .await;
    assert_eq!(
        rejected["comment"],
        json!({ "status": "REJECTED", "moderationReason": REJECT_REASON })
    );
    let banned_token = token(BANNED_AUTHOR.0, BANNED_AUTHOR.1);
    let (_, refused) = post_graphql(
        &client,
        &server,
        Some(&banned_token),
        "mutation($d: ID!, $p: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: \"Let me back in\"}) { slug } }",
        json!({ "d": seeded.discussion, "p": seeded.parent }),
    )
    .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    for slug in seeded
        .bulk
        .iter()
        .chain([&seeded.approved, &seeded.hostile[0]])
    {
        let read = graphql_data(
            &client,
            &server,
            Some(&moderator),
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { status } }",
            json!({ "d": seeded.discussion, "s": slug }),
        )
        .await;
        assert_eq!(read["comment"]["status"], "APPROVED", "{slug}");
    }

    let png = std::fs::read(&screenshot)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}", screenshot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        screenshot.display()
    );
    server.shutdown().await;
}
