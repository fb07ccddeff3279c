//! The count widget (`/embed/count.js`) in a real browser (headless Chromium, driven by
//! tests/node/count.mjs) on pages of another origin: an index page with 150 distinct keys (some
//! with discussions of 0, 1 and many comments, a deleted one among them, most with none, several
//! on more than one element, a few elements with their own texts) is filled in exactly two
//! `/graphql` requests; a page without any such element makes none; an element added later is
//! filled by the exported `count()`, one with a malformed key is left alone with a warning; and
//! no request goes to a third origin.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::node;
use crate::support::{graphql_data, moderator_token, server_config, Running};

/// The browser the script drives.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The longest the browser run may take.
const COUNT_BROWSER_TIMEOUT: Duration = Duration::from_secs(120);
/// Distinct keys on the index page: two requests' worth.
const DISTINCT_KEYS: usize = 150;
/// The seeded discussions, by key index: how many comments each gets, and how many of those
/// are deleted afterwards (deleted ones still count, as in the embed).
const SEEDED: [(usize, usize, usize); 6] = [
    (0, 0, 0),
    (1, 1, 0),
    (2, 3, 0),
    (3, 2, 1),
    (120, 12, 0),
    (149, 1, 0),
];
/// An element beyond the first of its key: its id, its key's index, and its own template
/// (which one, and its text), if any.
type CountExtra = (&'static str, usize, Option<(&'static str, &'static str)>);
/// The elements beyond the first of each key.
const EXTRA: [CountExtra; 8] = [
    ("c1-b", 1, None),
    ("c1-c", 1, None),
    ("c1-one", 1, Some(("one", "One reply"))),
    ("c2-b", 2, Some(("many", "{n} replies ({n})"))),
    ("c2-markup", 2, Some(("many", "<b>{n}</b>"))),
    ("c0-zero", 0, Some(("zero", "Be the first"))),
    ("c7-zero", 7, Some(("zero", "Nothing yet, {n}"))),
    ("c120-b", 120, None),
];
/// What the elements show before the widget fills them.
const PLACEHOLDER: &str = "…";

/// The key of index `i`.
fn count_key(i: usize) -> String {
    format!("counts/article-{i:03}")
}

/// `text` safe in a double-quoted attribute.
fn count_attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The index page: every key once, in order, with the extra elements among them.
fn count_index_page(threadql: &str) -> String {
    let mut spans = String::new();
    for i in 0..DISTINCT_KEYS {
        let key = count_attribute(&count_key(i));
        spans.push_str(&format!(
            "<li><span id=\"c{i}\" data-threadql-count=\"{key}\">{PLACEHOLDER}</span>"
        ));
        for (id, _, template) in EXTRA.iter().filter(|(_, k, _)| *k == i) {
            let extra = template
                .map(|(which, text)| {
                    format!(" data-threadql-{which}=\"{}\"", count_attribute(text))
                })
                .unwrap_or_default();
            spans.push_str(&format!(
                " <span id=\"{id}\" data-threadql-count=\"{key}\"{extra}>{PLACEHOLDER}</span>"
            ));
        }
        spans.push_str("</li>\n");
    }
    count_page("Articles", &format!("<ul>\n{spans}</ul>"), threadql)
}

/// A page of the host origin with `body`, importing the widget from threadql.
fn count_page(title: &str, body: &str, threadql: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{title}</title></head>
<body>
<h1>{title}</h1>
{body}
<script type="module" src="{threadql}/embed/count.js"></script>
</body>
</html>"#
    )
}

/// What each element of the index page should show, by id.
fn count_expected() -> BTreeMap<String, String> {
    let comments = |i: usize| {
        SEEDED
            .iter()
            .find(|(k, _, _)| *k == i)
            .map_or(0, |(_, n, _)| *n)
    };
    let default = |n: usize| match n {
        0 => "No comments".to_owned(),
        1 => "1 comment".to_owned(),
        n => format!("{n} comments"),
    };
    let mut expected: BTreeMap<String, String> = (0..DISTINCT_KEYS)
        .map(|i| (format!("c{i}"), default(comments(i))))
        .collect();
    for (id, i, template) in EXTRA {
        let n = comments(i);
        let which = match n {
            0 => "zero",
            1 => "one",
            _ => "many",
        };
        let text = match template {
            Some((w, text)) if w == which => text.replace("{n}", &n.to_string()),
            _ => default(n),
        };
        expected.insert(id.to_owned(), text);
    }
    expected
}

/// Creates the seeded discussions through GraphQL, as a moderator.
async fn count_seed(client: &reqwest::Client, server: &Running) {
    let moderator = moderator_token("mod", "A Moderator");
    for (i, comments, deleted) in SEEDED {
        let ensured = graphql_data(
            client,
            server,
            Some(&moderator),
            "mutation($i: EnsureDiscussionInput!) { ensureDiscussion(input: $i) { id } }",
            json!({ "i": { "key": count_key(i), "title": format!("Article {i}") } }),
        )
        .await;
        let id = ensured["ensureDiscussion"]["id"].as_str().expect("id");
        for c in 0..comments {
            let posted = graphql_data(
                client,
                server,
                Some(&moderator),
                "mutation($i: PostCommentInput!) { postComment(input: $i) { slug } }",
                json!({ "i": { "discussionId": id, "text": format!("Comment {c} on {i}") } }),
            )
            .await;
            if c < deleted {
                let slug = posted["postComment"]["slug"].as_str().expect("slug");
                graphql_data(
                    client,
                    server,
                    Some(&moderator),
                    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
                    json!({ "d": id, "s": slug }),
                )
                .await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_count_widget_fills_an_index_page_in_one_request_per_hundred_keys() {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the count widget test needs Chromium; run ./scripts/install-deps.sh"
    );
    node::require("playwright-core").await;
    let host = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind the host pages");
    let host_origin = format!("http://{}", host.local_addr().expect("host address"));
    let mut config = server_config("count-widget");
    config.cors_origins = Some(host_origin.parse().expect("the host origin"));
    let server = Running::start(config).await;
    let threadql = format!("http://{}", server.addr);
    count_seed(&reqwest::Client::new(), &server).await;

    let pages = Router::new()
        .route(
            "/counts",
            get(|State(t): State<String>| async move { Html(count_index_page(&t)) }),
        )
        .route(
            "/no-counts",
            get(|State(t): State<String>| async move {
                Html(count_page("Nothing to count", "<p>No counts here.</p>", &t))
            }),
        )
        .with_state(threadql.clone());
    tokio::spawn(async move { axum::serve(host, pages).await });

    let setup = json!({ "host": host_origin, "threadql": threadql, "laterKey": count_key(2) });
    let (summary, _) = node::summary(
        "count.mjs",
        &[&setup.to_string()],
        &[],
        "COUNTS",
        COUNT_BROWSER_TIMEOUT,
    )
    .await;
    assert_eq!(summary["error"], Value::Null, "{summary:#}");
    for list in ["outside", "pageErrors", "consoleErrors", "failedRequests"] {
        assert_eq!(
            summary[list],
            json!([]),
            "the pages had {list}: {summary:#}"
        );
    }
    assert_eq!(summary["blockerWorks"], json!(true), "{summary:#}");
    let steps = &summary["steps"];

    // 150 distinct keys: two requests, every element right, all of it text.
    assert_eq!(steps["countsRequests"], json!(2), "{summary:#}");
    let texts: BTreeMap<String, String> =
        serde_json::from_value(steps["texts"].clone()).expect("texts by id");
    let expected = count_expected();
    assert_eq!(texts.len(), DISTINCT_KEYS + EXTRA.len());
    for (id, text) in &expected {
        assert_eq!(texts.get(id), Some(text), "element {id}");
    }
    assert_eq!(texts["c2-markup"], "<b>3</b>");
    assert_eq!(texts["c3"], "2 comments", "a deleted comment still counts");
    assert_eq!(steps["markup"], json!(0), "no element was made of HTML");

    // No element, no request; one added later is filled by `count()`.
    assert_eq!(steps["noCountsRequests"], json!(0), "{summary:#}");
    assert_eq!(steps["later"], "3 later", "{summary:#}");
    assert_eq!(steps["laterRequests"], json!(1), "{summary:#}");

    // Malformed keys: the elements keep their text, one warning, one refusal by the server (the
    // key with a control character is never sent).
    assert_eq!(steps["bad"], json!(["kept", "kept too"]), "{summary:#}");
    let warnings = summary["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{summary:#}");
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.starts_with("threadql: cannot show the comment counts")),
        "{summary:#}"
    );
    assert_eq!(steps["warningsBefore"], json!(0), "{summary:#}");
    let refusals = summary["graphqlErrors"].as_array().expect("graphqlErrors");
    assert!(
        refusals.len() == 1
            && refusals[0]
                .as_str()
                .is_some_and(|e| e.contains("BAD_USER_INPUT")),
        "{summary:#}"
    );
    assert_eq!(
        steps["badFailedRequests"],
        json!([format!("{threadql}/graphql: HTTP 400")]),
        "{summary:#}"
    );
    server.shutdown().await;
}
