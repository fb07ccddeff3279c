//! Real GraphQL clients against a live server (tests/node/clients.mjs): Apollo Client 4 and urql 6
//! post, read, page and use persisted queries on every layout; graphql-ws, urql, Apollo Client
//! and a legacy `graphql-ws` client receive live comment events.

use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::node;
use crate::support::{layout_name, token, unique_db, Running, Settings};

/// The longest one run of clients.mjs may take.
const CLIENTS_TIMEOUT: Duration = Duration::from_secs(180);

/// The layouts the clients use, one discussion each.
const LAYOUTS: [Layout; 3] = [Layout::PerComment, Layout::Embedded, Layout::Bucketed];

/// Comments clients.mjs posts in each discussion, and how many it reads per page.
const THREAD_COMMENTS: u64 = 22;
const PAGE: u64 = 5;

/// The users clients.mjs acts as, with tokens signed like the server expects.
fn users() -> Value {
    json!([
        { "name": "Ada Lovelace", "token": token("ada", "Ada Lovelace") },
        { "name": "Grace Hopper", "token": token("grace", "Grace Hopper") },
    ])
}

/// Runs clients.mjs with `steps` against a fresh server; returns its summary after checking
/// that no check failed and that it exited cleanly.
async fn run_clients(label: &str, steps: &[&str]) -> Value {
    for package in ["@apollo/client", "@urql/core", "graphql-ws", "ws"] {
        node::require(package).await;
    }
    let server = Running::start(Settings::new(Layout::PerComment).config(&unique_db(label))).await;
    let setup = json!({
        "users": users(),
        "layouts": LAYOUTS.map(layout_name),
        "steps": steps,
    });
    let url = server.url("/graphql");
    let (summary, output) = node::summary(
        "clients.mjs",
        &[&url, &setup.to_string()],
        &[],
        "CLIENTS",
        CLIENTS_TIMEOUT,
    )
    .await;
    server.shutdown().await;
    assert_eq!(
        summary["failures"],
        json!([]),
        "client checks failed: {summary:#}"
    );
    assert!(
        output.status.success(),
        "clients.mjs exited with {}",
        output.status
    );
    summary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apollo_client_and_urql_post_read_page_and_persist_queries_on_every_layout() {
    let summary = run_clients("clients", &["http"]).await;

    // Per layout: create, posts, three tree reads, the sub-discussion, two orders by two clients,
    // two offset windows; then four persisted-query checks.
    let checks = summary["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 12 * LAYOUTS.len() + 4, "{summary:#}");
    let pages = THREAD_COMMENTS.div_ceil(PAGE);
    for layout in LAYOUTS {
        let name = layout_name(layout);
        let stats = &summary["layouts"][name];
        assert_eq!(stats["comments"], THREAD_COMMENTS, "{name}: {summary:#}");
        for order in ["CHRONOLOGICAL", "THREADED"] {
            for client in ["Apollo Client", "urql"] {
                assert_eq!(
                    stats["pages"][format!("{order} {client}")],
                    pages,
                    "{name}, {order}, {client}: {summary:#}"
                );
            }
        }
    }
    assert_eq!(
        summary["apq"],
        json!([
            "POST hash only -> PERSISTED_QUERY_NOT_FOUND",
            "POST query+hash -> data",
            "POST hash only -> data",
            "GET hash only -> PERSISTED_QUERY_NOT_FOUND",
            "POST query+hash -> data",
            "GET hash only -> data",
            "GET hash only -> data",
        ]),
        "{summary:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_clients_receive_comment_events_on_every_layout() {
    let summary = run_clients("clients_live", &["subscriptions"]).await;

    // Per layout: commentPosted and commentChanged over graphql-ws; then urql, Apollo Client, the
    // forged tokens, and the legacy subprotocol's handshake and event.
    let checks = summary["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 2 * LAYOUTS.len() + 5, "{summary:#}");
    let first = layout_name(LAYOUTS[0]);
    let mut expected: Vec<Value> = LAYOUTS
        .iter()
        .flat_map(|layout| {
            ["commentPosted", "commentChanged"].map(|field| {
                json!({ "via": "graphql-transport-ws", "field": field, "layout": layout_name(*layout), "received": true })
            })
        })
        .collect();
    expected.push(
        json!({ "via": "urql", "field": "commentPosted", "layout": first, "received": true }),
    );
    expected.push(json!({ "via": "Apollo Client", "field": "commentPosted", "layout": first, "received": true }));
    expected.push(json!({ "via": "graphql-ws (legacy)", "field": "commentPosted", "layout": first, "received": true }));
    assert_eq!(summary["events"], json!(expected), "{summary:#}");
}
