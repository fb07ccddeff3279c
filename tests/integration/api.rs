//! Layout-independent API behaviour: the discussion list, federation, the schema file.

use std::collections::HashSet;

use serde_json::json;
use threadql::domain::Layout;

use crate::support::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discussions_page_by_cursor_exactly_once() {
    let app = TestApp::new("discussions_list", Layout::PerComment).await;
    let mut created = Vec::new();
    for i in 0..7 {
        created.push(app.discussion(&format!("discussion {i}")).await);
    }
    let q = "query($after: String) { discussions(first: 3, after: $after) { totalCount nodes { id title } pageInfo { hasNextPage endCursor } } }";
    let mut seen = Vec::new();
    let mut after = serde_json::Value::Null;
    loop {
        let data = app.ok(q, json!({ "after": after })).await;
        let conn = &data["discussions"];
        assert_eq!(conn["totalCount"], json!(7));
        seen.extend(
            conn["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["id"].as_str().unwrap().to_owned()),
        );
        if conn["pageInfo"]["hasNextPage"] == json!(false) {
            break;
        }
        after = conn["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(seen, created, "oldest first, each once");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 7);
    let code = app
        .err_code(
            "{ discussions(after: \"bm9wZQ\") { totalCount } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn titles_are_validated() {
    let app = TestApp::new("titles", Layout::PerComment).await;
    let q = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id } }";
    for bad in ["", "   ", &"x".repeat(301)] {
        assert_eq!(
            app.err_code(q, json!({ "t": bad })).await,
            "BAD_USER_INPUT",
            "{bad:?}"
        );
    }
    let data = app
        .ok(
            "mutation { createDiscussion(input: {title: \"  padded  \"}) { title layout } }",
            json!({}),
        )
        .await;
    assert_eq!(
        data["createDiscussion"],
        json!({ "title": "padded", "layout": "PER_COMMENT" })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn federation_resolves_entities() {
    let app = TestApp::new("federation", Layout::PerComment).await;
    let d = app.discussion("federated").await;
    let slug = app.post(&d, None, "hello").await;
    let data = app
        .ok(
            "query($reps: [_Any!]!) { _entities(representations: $reps) { ... on Discussion { title } ... on Comment { text } } }",
            json!({ "reps": [
                { "__typename": "Discussion", "id": d },
                { "__typename": "Comment", "discussionId": d, "slug": slug },
                { "__typename": "Discussion", "id": "0123456789abcdef01234567" },
            ] }),
        )
        .await;
    assert_eq!(
        data["_entities"],
        json!([{ "title": "federated" }, { "text": "hello" }, null])
    );
    let sdl = app.ok("{ _service { sdl } }", json!({})).await;
    let sdl = sdl["_service"]["sdl"].as_str().unwrap();
    assert!(sdl.contains("@key(fields: \"id\")"), "{sdl}");
    assert!(sdl.contains("@key(fields: \"discussionId slug\")"), "{sdl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_test_owns_its_database() {
    let a = TestApp::new("own_db_a", Layout::PerComment).await;
    let b = TestApp::new("own_db_b", Layout::PerComment).await;
    assert_ne!(a.database, b.database);
    a.discussion("only in a").await;
    let data = b.ok("{ discussions { totalCount } }", json!({})).await;
    assert_eq!(data["discussions"]["totalCount"], json!(0));
}

#[test]
fn schema_file_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema.graphql");
    let sdl = threadql::graphql::sdl();
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != sdl {
        std::fs::write(&path, &sdl).unwrap();
        panic!("schema.graphql was stale and has been regenerated: review and commit it");
    }
}

#[test]
fn a_missing_dev_database_says_how_to_install_it() {
    use threadql::store::embedded_db::EmbeddedDb;
    let err =
        EmbeddedDb::locate(Some(std::path::Path::new("/nonexistent/secantusd-rs"))).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(
            "cargo install secantus-mdb --version =0.5.3-beta.196 --locked --ignore-rust-version"
        ),
        "{message}"
    );
    assert!(message.contains("THREADQL_MONGODB_URI"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_is_on_by_default_and_off_by_config() {
    let query = "{ __schema { queryType { name } } __type(name: \"Comment\") { name } }";
    let open = TestApp::new("introspection_on", Layout::PerComment).await;
    let data = open.ok(query, json!({})).await;
    assert_eq!(data["__schema"]["queryType"]["name"], "Query");
    assert_eq!(data["__type"]["name"], "Comment");

    let settings = crate::support::Settings::new(Layout::PerComment);
    let database = crate::support::unique_db("introspection_off");
    let mut config = settings.config(&database);
    config.introspection = false;
    let app = threadql::app::App::build(&config).await.unwrap();
    let closed = TestApp::from_app(app, database, settings);
    let response = closed.exec_as(None, query, json!({})).await;
    assert!(
        response["errors"].as_array().is_some_and(|e| !e.is_empty()),
        "{response:#}"
    );
    assert!(response["data"]["__schema"].is_null(), "{response:#}");
    // Federation's own entry point stays, and ordinary queries still run.
    let data = closed
        .ok(
            "{ _service { sdl } discussions(first: 1) { nodes { id } } }",
            json!({}),
        )
        .await;
    assert!(data["_service"]["sdl"]
        .as_str()
        .is_some_and(|s| s.contains("type Comment")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tree_queries_fit_the_default_limits() {
    let app = TestApp::new("readme_queries", Layout::PerComment).await;
    let d = app.discussion("Notes on the Analytical Engine").await;
    let top = app.post(&d, None, "It weaves algebraic patterns").await;
    let reply = app.post(&d, Some(&top), "Like a Jacquard loom?").await;
    app.post(&d, Some(&reply), "Exactly: cards for operations")
        .await;
    let tree = "query($d: ID!) { discussion(id: $d) {
        title commentCount
        threads(first: 10) { nodes { slug text author { name }
          replies { nodes { text replies { nodes { text depth } } } } } } } }";
    let data = app.ok(tree, json!({ "d": d })).await;
    let leaf =
        &data["discussion"]["threads"]["nodes"][0]["replies"]["nodes"][0]["replies"]["nodes"][0];
    assert_eq!(leaf["depth"], 2);
    let flat = "query($d: ID!) { discussion(id: $d) {
        comments(order: THREADED, first: 50) { totalCount
          edges { cursor node { slug depth text } } pageInfo { hasNextPage endCursor } }
        page3: comments(order: CHRONOLOGICAL, first: 50, offset: 100) { nodes { slug } } } }";
    let data = app.ok(flat, json!({ "d": d })).await;
    assert_eq!(data["discussion"]["comments"]["totalCount"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn federation_resolves_many_entities_in_a_few_commands() {
    for layout in Layout::ALL {
        let app = TestApp::new(&format!("entities_{layout}"), layout).await;
        let mut reps = Vec::new();
        for d in 0..2 {
            let discussion = app.discussion(&format!("federated {d}")).await;
            reps.push(json!({ "__typename": "Discussion", "id": discussion }));
            let mut parent: Option<String> = None;
            for i in 0..100 {
                let slug = app
                    .post(&discussion, parent.as_deref(), &format!("c{i}"))
                    .await;
                reps.push(
                    json!({ "__typename": "Comment", "discussionId": discussion, "slug": slug }),
                );
                parent = (i % 3 != 2).then_some(slug);
            }
        }
        // Leaving out the driver's own commands ("other"): the change feed's getMores come
        // when they will.
        let before = app.store().commands().snapshot();
        let data = app
            .ok(
                "query($reps: [_Any!]!) { _entities(representations: $reps) { ... on Discussion { title } ... on Comment { slug text } } }",
                json!({ "reps": reps }),
            )
            .await;
        let spent: u64 = crate::support::diff(&before, &app.store().commands().snapshot())
            .iter()
            .filter(|(name, _)| *name != "other")
            .map(|(_, n)| n)
            .sum();
        let entities = data["_entities"].as_array().unwrap();
        assert_eq!(entities.len(), 202);
        assert!(entities.iter().all(|e| !e.is_null()), "{layout}");
        for (rep, entity) in reps.iter().zip(entities) {
            if rep["__typename"] == "Comment" {
                assert_eq!(entity["slug"], rep["slug"], "{layout}");
            }
        }
        // One query for the discussions, one per discussion for its comments.
        assert!(spent <= 3, "{layout}: 202 entities cost {spent} commands");
    }
}
