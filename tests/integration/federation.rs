//! threadql as a subgraph of a real Apollo Federation v2 supergraph (tests/node/federation.mjs):
//! its live SDL composes with two other subgraphs, and a real gateway resolves its `Discussion`
//! (by id, and by the key an article service knows it by) and `Comment` entities in both
//! directions, for every layout.

use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::node;
use crate::support::{layout_name, unique_db, Running, Settings, TestApp};

/// The longest the whole federation run may take.
const FEDERATION_TIMEOUT: Duration = Duration::from_secs(180);

/// The layouts the supergraph reads, one discussion each.
const LAYOUTS: [Layout; 3] = [Layout::PerComment, Layout::Embedded, Layout::Bucketed];

/// One seeded comment, as tests/node/federation.mjs expects it.
struct Seeded {
    slug: String,
    parent: Option<String>,
    text: String,
    author: &'static str,
    revisions: Vec<String>,
}

/// Posts a comment as `sub`/`name` and returns its slug.
async fn post_seeded(
    app: &TestApp,
    who: (&str, &'static str),
    discussion: &str,
    parent: Option<&str>,
    text: &str,
) -> Seeded {
    let token = app.token(who.0, who.1);
    let response = app
        .exec_as(
            Some(&token),
            "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug parentSlug } }",
            json!({ "d": discussion, "p": parent, "t": text }),
        )
        .await;
    let posted = &response["data"]["postComment"];
    assert_eq!(posted["parentSlug"].as_str(), parent, "{response:#}");
    Seeded {
        slug: posted["slug"]
            .as_str()
            .unwrap_or_else(|| panic!("no slug: {response:#}"))
            .to_owned(),
        parent: parent.map(str::to_owned),
        text: text.to_owned(),
        author: who.1,
        revisions: Vec::new(),
    }
}

/// Creates a discussion in `layout` with a thread (two replies to the first comment, one of them
/// answered) and an edited second thread; returns the discussion's seed entry.
async fn seed_federated_discussion(app: &TestApp, layout: Layout) -> Value {
    let ada = ("ada", "Ada Lovelace");
    let grace = ("grace", "Grace Hopper");
    let name = layout_name(layout);
    let title = format!("Federated {name} discussion");
    let key = format!("/articles/{}", name.to_lowercase());
    let created = app
        .ok(
            "mutation($t: String!, $k: String, $l: StorageLayout) { createDiscussion(input: {title: $t, key: $k, layout: $l}) { id key layout } }",
            json!({ "t": title, "k": key, "l": name }),
        )
        .await;
    assert_eq!(created["createDiscussion"]["layout"], name);
    assert_eq!(created["createDiscussion"]["key"], key.as_str());
    let id = created["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();

    let root = post_seeded(
        app,
        ada,
        &id,
        None,
        &format!("{name}: the engine weaves algebra"),
    )
    .await;
    let first = post_seeded(
        app,
        grace,
        &id,
        Some(&root.slug),
        &format!("{name}: like a loom?"),
    )
    .await;
    let deep = post_seeded(
        app,
        ada,
        &id,
        Some(&first.slug),
        &format!("{name}: cards for operations"),
    )
    .await;
    let second = post_seeded(
        app,
        grace,
        &id,
        Some(&root.slug),
        &format!("{name}: and for variables"),
    )
    .await;
    let mut other = post_seeded(app, grace, &id, None, &format!("{name}: a second thread")).await;
    let edited = format!("{name}: a second thread, edited");
    let grace_token = app.token(grace.0, grace.1);
    let response = app
        .exec_as(
            Some(&grace_token),
            "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { text } }",
            json!({ "d": id, "s": other.slug, "t": edited }),
        )
        .await;
    assert_eq!(
        response["data"]["editComment"]["text"],
        edited.as_str(),
        "{response:#}"
    );
    other
        .revisions
        .push(std::mem::replace(&mut other.text, edited));

    // Threaded order: each comment right after its parent, siblings oldest first.
    let threaded = [&root, &first, &deep, &second, &other];
    let comments: Vec<Value> = threaded
        .iter()
        .map(|c| {
            let replies = threaded
                .iter()
                .filter(|r| r.parent.as_deref() == Some(c.slug.as_str()))
                .count();
            json!({
                "slug": c.slug,
                "parentSlug": c.parent,
                "text": c.text,
                "author": c.author,
                "replyCount": replies,
                "revisions": c.revisions,
            })
        })
        .collect();
    json!({ "id": id, "key": key, "title": title, "layout": name, "comments": comments })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_joins_threadql_entities_with_other_subgraphs_on_every_layout() {
    for package in [
        "@apollo/composition",
        "@apollo/gateway",
        "@apollo/server",
        "@apollo/subgraph",
    ] {
        node::require(package).await;
    }
    let settings = Settings::new(Layout::PerComment);
    let database = unique_db("federation");
    let mut config = settings.config(&database);
    // The by-key batch is counted in database commands: without the read cache's change feed,
    // whose `getMore` can land inside the count on a loaded machine.
    config.cache_bytes = 0;
    let server = Running::start(config).await;
    let app = TestApp::from_parts(server.api.clone(), server.store.clone(), database, settings);
    let mut discussions = Vec::new();
    for layout in LAYOUTS {
        discussions.push(seed_federated_discussion(&app, layout).await);
    }
    let comments: usize = discussions
        .iter()
        .map(|d| d["comments"].as_array().map_or(0, Vec::len))
        .sum();
    let seed = json!({
        "moderatorToken": app.moderator_token("mod", "Mo Derator"),
        "discussions": discussions,
    });

    let url = server.url("/graphql");
    let (summary, output) = node::summary(
        "federation.mjs",
        &[&url, &seed.to_string()],
        &[],
        "FEDERATION",
        FEDERATION_TIMEOUT,
    )
    .await;
    server.shutdown().await;

    assert_eq!(
        summary["composed"], true,
        "the supergraph did not compose: {summary:#}"
    );
    assert_eq!(
        summary["failures"],
        json!([]),
        "federation checks failed: {summary:#}"
    );
    assert!(
        output.status.success(),
        "federation.mjs exited with {}",
        output.status
    );
    // Three SDL checks, the hint check, four for the query that starts at reviews, three for
    // the one that starts at articles, three per discussion for the query that starts at
    // threadql, one per discussion for the forwarded Authorization.
    let checks = summary["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 11 + 4 * LAYOUTS.len(), "{summary:#}");
    for layout in LAYOUTS {
        let name = layout_name(layout);
        assert!(
            checks
                .iter()
                .any(|c| c.as_str().is_some_and(|c| c.contains(name))),
            "no check ran on the {name} discussion: {summary:#}"
        );
    }
    // The gateway called each subgraph's `_entities` for both entity types, with every key.
    for subgraph in ["threadql", "reviews"] {
        let fetched = &summary["entities"][subgraph];
        let count = |typename: &str| fetched[typename].as_u64().unwrap_or(0) as usize;
        assert!(
            count("Comment") >= comments && count("Discussion") >= LAYOUTS.len(),
            "{subgraph} resolved too few entities ({fetched}) for {comments} comments in {} discussions",
            LAYOUTS.len()
        );
    }
}
