//! GraphiQL in a real browser (headless Chromium, driven by tests/node/browser.mjs): the page at
//! `/` loads everything from this server, runs its default query and a typed threaded query, and
//! posts with the token put in its Headers tab, without one request to another origin.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::node;
use crate::support::{graphql_data, token, unique_db, Running, Settings};

/// The browser tests/node/browser.mjs drives.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The longest the browser run may take.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

/// The thread the page must show, in threaded order: a post, its reply, the reply's reply.
const THREAD: [&str; 3] = [
    "It weaves algebraic patterns",
    "Like a Jacquard loom?",
    "Exactly: cards for operations",
];

/// The reply tests/node/browser.mjs posts from GraphiQL.
const REPLY: &str = "Posted from GraphiQL with a bearer token";
/// What tests/node/browser.mjs posts while GraphiQL runs a subscription.
const LIVE: &str = "Heard live through the GraphiQL subscription";

/// The texts and depths of a comment connection's nodes.
fn thread_of(connection: &Value) -> Vec<(String, u64)> {
    connection["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no comment nodes in {connection}"))
        .iter()
        .map(|node| {
            (
                node["text"].as_str().unwrap_or_default().to_owned(),
                node["depth"].as_u64().unwrap_or(u64::MAX),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphiql_runs_threaded_queries_and_posts_without_leaving_the_server() {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: the GraphiQL browser test needs Chromium; run ./scripts/install-deps.sh"
    );
    node::require("playwright-core").await;
    let server =
        Running::start(Settings::new(Layout::PerComment).config(&unique_db("browser"))).await;
    let client = reqwest::Client::new();
    let token = token("ada", "Ada Lovelace");

    let created = graphql_data(
        &client,
        &server,
        Some(&token),
        "mutation { createDiscussion(input: {title: \"Notes on the Analytical Engine\"}) { id } }",
        json!({}),
    )
    .await;
    let discussion = created["createDiscussion"]["id"]
        .as_str()
        .expect("discussion id")
        .to_owned();
    let mut parent: Option<String> = None;
    for text in THREAD {
        let posted = graphql_data(
            &client,
            &server,
            Some(&token),
            "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
            json!({ "d": discussion, "p": parent, "t": text }),
        )
        .await;
        parent = posted["postComment"]["slug"].as_str().map(str::to_owned);
    }

    let screenshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser/graphiql.png");
    let _ = std::fs::remove_file(&screenshot);
    let (summary, _) = node::summary(
        "browser.mjs",
        &[&server.url("/"), &screenshot.to_string_lossy(), &discussion],
        &[("THREADQL_TOKEN", &token)],
        "BROWSER",
        BROWSER_TIMEOUT,
    )
    .await;
    println!(
        "GraphiQL in Chromium: {} requests, all to {}, in {} ms; screenshot: {}",
        summary["requests"],
        server.url("/"),
        summary["ms"],
        screenshot.display()
    );

    assert_eq!(
        summary["error"],
        Value::Null,
        "the browser run stopped early (screenshot: {}): {summary:#}",
        screenshot.display()
    );
    for list in ["outside", "pageErrors", "consoleErrors", "failedRequests"] {
        assert_eq!(
            summary[list],
            json!([]),
            "the page had {list} (screenshot: {}): {summary:#}",
            screenshot.display()
        );
    }
    assert_eq!(
        summary["blockerWorks"],
        json!(true),
        "a request to another origin was not recorded, so `outside` proves nothing: {summary:#}"
    );

    let expected: Vec<(String, u64)> = THREAD
        .iter()
        .zip(0..)
        .map(|(text, depth)| ((*text).to_owned(), depth))
        .collect();
    let default = &summary["defaultQuery"];
    let default_text = default["text"].as_str().unwrap_or_default();
    assert!(
        default_text.contains("comments(order: THREADED")
            && default_text.contains("threadql token --sub ID --name NAME")
            && default_text.contains(r#"{"Authorization": "Bearer <token>"}"#),
        "the default query is not the threaded example with the token hint: {default_text}"
    );
    assert_eq!(
        thread_of(&default["discussion"]["comments"]),
        expected,
        "the default query's result"
    );
    assert_eq!(
        thread_of(&summary["threaded"]["comments"]),
        expected,
        "the typed threaded query's result"
    );

    // The reply posted from GraphiQL is stored, under the name in the token of the Headers tab.
    let posted = &summary["posted"];
    assert_eq!(posted["text"], REPLY, "{summary:#}");
    assert_eq!(posted["author"]["name"], "Ada Lovelace", "{summary:#}");
    assert_eq!(posted["depth"], THREAD.len(), "{summary:#}");
    let stored = graphql_data(
        &client,
        &server,
        Some(&token),
        "query($d: ID!) { discussion(id: $d) { commentCount comments(order: THREADED) { nodes { slug text depth } } } }",
        json!({ "d": discussion }),
    )
    .await;
    // The thread, the reply and the comment the subscription heard.
    assert_eq!(stored["discussion"]["commentCount"], THREAD.len() + 2);
    let last = &stored["discussion"]["comments"]["nodes"][THREAD.len()];
    assert_eq!(
        (&last["slug"], &last["text"]),
        (&posted["slug"], &json!(REPLY))
    );

    // The subscription run in GraphiQL heard the comment posted from outside the browser.
    let live = &summary["live"];
    assert_eq!(live["text"], LIVE, "{summary:#}");
    assert_eq!(live["author"]["name"], "Ada Lovelace", "{summary:#}");
    let heard = &stored["discussion"]["comments"]["nodes"][THREAD.len() + 1];
    assert_eq!(
        (&heard["slug"], &heard["text"]),
        (&live["slug"], &json!(LIVE))
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
