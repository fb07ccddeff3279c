//! Sharding: every command the store sends to a comments collection carries `discussion_id`, so
//! a sharded cluster routes it to one shard; the shard keys are the unique indexes; and
//! `threadql shard-setup` refuses a deployment that is not a sharded cluster.

use std::sync::{Arc, Mutex};

use mongodb::bson::{Bson, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use threadql::domain::Layout;
use threadql::store::shard::{KeyKind, SHARD_KEYS};

use crate::support::{server_uri, Settings, TestApp};
use crate::{contract, lifecycle};

/// Collections whose every command must name its discussion.
const BY_DISCUSSION: [&str; 4] = ["comments", "comment_pages", "votes", "tallies"];

/// Whether a filter pins `discussion_id` to one value: at its top level, or in every branch of
/// a top-level `$or` / in one clause of a top-level `$and`.
fn targeted(filter: &Document) -> bool {
    let pinned = |f: &Document| match f.get("discussion_id") {
        Some(Bson::String(_)) => true,
        Some(Bson::Document(d)) => d.len() == 1 && matches!(d.get("$eq"), Some(Bson::String(_))),
        _ => false,
    };
    if pinned(filter) {
        return true;
    }
    let branches = |key: &str| -> Vec<Document> {
        match filter.get(key) {
            Some(Bson::Array(items)) => items
                .iter()
                .filter_map(|b| b.as_document().cloned())
                .collect(),
            _ => Vec::new(),
        }
    };
    let or = branches("$or");
    if !or.is_empty() && or.iter().all(targeted) {
        return true;
    }
    branches("$and").iter().any(targeted)
}

/// What is wrong with one command to a comments collection (`None` when it is targeted).
fn untargeted(name: &str, command: &Document) -> Option<String> {
    let problem = |what: &str| Some(format!("{name} {what}: {command}"));
    let doc_at = |key: &str| command.get_document(key).ok();
    let array_at = |key: &str| command.get_array(key).ok();
    match name {
        "find" if names_scan(command) => None,
        "find" | "count" | "distinct" => match doc_at("filter").or(doc_at("query")) {
            Some(f) if targeted(f) || numbering_scan(f) => None,
            _ => problem("filter lacks discussion_id"),
        },
        "aggregate" => {
            let first = array_at("pipeline")
                .and_then(|p| p.first())
                .and_then(Bson::as_document)
                .and_then(|s| s.get_document("$match").ok());
            match first {
                Some(m) if targeted(m) => None,
                _ => problem("pipeline does not start with a $match on discussion_id"),
            }
        }
        "update" | "delete" => {
            let key = if name == "update" {
                "updates"
            } else {
                "deletes"
            };
            let statements = array_at(key).map(|a| a.as_slice()).unwrap_or_default();
            statements
                .iter()
                .filter_map(Bson::as_document)
                .find(|s| !s.get_document("q").is_ok_and(targeted))
                .and_then(|_| problem("has a statement whose q lacks discussion_id"))
        }
        "findAndModify" => match doc_at("query") {
            Some(q) if targeted(q) => None,
            _ => problem("query lacks discussion_id"),
        },
        "insert" => array_at("documents")
            .map(|d| d.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(Bson::as_document)
            .find(|d| !matches!(d.get("discussion_id"), Some(Bson::String(_))))
            .and_then(|_| problem("inserts a document without discussion_id")),
        "createIndexes" | "dropIndexes" | "listIndexes" | "getMore" | "killCursors" => None,
        other => problem(&format!("({other}) is not a command the store should send")),
    }
}

/// Whether a filter is the one-time scan at start for comments stored before comments were
/// numbered (a scatter-gather by design, once per database).
fn numbering_scan(filter: &Document) -> bool {
    filter
        .to_string()
        .contains(r#""author.k": { "$exists": false }"#)
}

/// Whether a command is the one-time scan at start for the names signed-in users posted under
/// (it says so in its comment).
fn names_scan(command: &Document) -> bool {
    command.get_str("comment") == Ok("threadql: the names of signed-in authors, once")
}

/// What is wrong with one command to the discussions collection: it must name one `_id`
/// (inserts carry theirs), except the listing of discussions, which reads them all by design,
/// and the look-up by key, which reads the key's index on every shard by design (in one
/// command for many keys).
fn untargeted_discussion(name: &str, command: &Document) -> Option<String> {
    let by_id = |f: &Document| matches!(f.get("_id"), Some(Bson::String(_) | Bson::Document(_)));
    let by_key =
        |f: &Document| f.len() == 1 && f.get_document("key").is_ok_and(|k| k.contains_key("$in"));
    let ok = match name {
        "find" => command.get_document("filter").is_ok_and(|f| {
            f.is_empty() || by_id(f) || by_key(f) || f.contains_key("$or") || numbering_scan(f)
        }),
        "update" => command.get_array("updates").is_ok_and(|u| {
            u.iter()
                .filter_map(Bson::as_document)
                .all(|s| s.get_document("q").is_ok_and(by_id))
        }),
        "findAndModify" => command.get_document("query").is_ok_and(by_id),
        _ => true,
    };
    (!ok).then(|| format!("{name} on discussions not by _id: {command}"))
}

/// What is wrong with one command to the claims of discussion keys: each names one key, its
/// `_id` and shard key.
fn untargeted_claim(name: &str, command: &Document) -> Option<String> {
    let by_key = |f: &Document| matches!(f.get("_id"), Some(Bson::String(_)));
    let ok = match name {
        "find" => command.get_document("filter").is_ok_and(by_key),
        "insert" => command
            .get_array("documents")
            .is_ok_and(|d| d.iter().filter_map(Bson::as_document).all(by_key)),
        "delete" => command.get_array("deletes").is_ok_and(|d| {
            d.iter()
                .filter_map(Bson::as_document)
                .all(|s| s.get_document("q").is_ok_and(by_key))
        }),
        "createIndexes" | "listIndexes" => true,
        _ => false,
    };
    (!ok).then(|| format!("{name} on discussion_keys not by key: {command}"))
}

/// Records every command sent to the threadql collections.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(String, String, Document)>>>);

impl Recorder {
    fn handler(&self) -> EventHandler<CommandEvent> {
        let sink = self.0.clone();
        EventHandler::callback(move |event: CommandEvent| {
            let CommandEvent::Started(started) = event else {
                return;
            };
            let name = started.command_name.clone();
            let collection = started
                .command
                .get(&name)
                .and_then(Bson::as_str)
                .unwrap_or_default()
                .to_owned();
            sink.lock().unwrap_or_else(|p| p.into_inner()).push((
                name,
                collection,
                started.command.clone(),
            ));
        })
    }

    fn problems(&self) -> (usize, Vec<String>) {
        let seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut problems = Vec::new();
        let mut checked = 0;
        for (name, collection, command) in seen.iter() {
            if BY_DISCUSSION.contains(&collection.as_str()) {
                checked += 1;
                problems.extend(untargeted(name, command));
            } else if collection == "discussions" {
                problems.extend(untargeted_discussion(name, command));
            } else if collection == "discussion_keys" {
                problems.extend(untargeted_claim(name, command));
            }
        }
        (checked, problems)
    }
}

#[test]
fn the_checker_refuses_untargeted_filters() {
    use mongodb::bson::doc;
    assert!(targeted(&doc! { "discussion_id": "d", "slug": "a" }));
    assert!(targeted(
        &doc! { "$or": [{ "discussion_id": "d", "page": 1 }, { "discussion_id": "d", "page": 2 }] }
    ));
    assert!(!targeted(&doc! { "slug": "a" }));
    assert!(!targeted(
        &doc! { "$or": [{ "discussion_id": "d" }, { "page": 2 }] }
    ));
    assert!(!targeted(&doc! { "discussion_id": { "$in": ["a", "b"] } }));
    let find = doc! { "find": "comments", "filter": { "slug": "x" } };
    assert!(untargeted("find", &find).is_some());
    let agg = doc! { "aggregate": "comment_pages", "pipeline": [{ "$sort": { "page": 1 } }, { "$match": { "discussion_id": "d" } }] };
    assert!(untargeted("aggregate", &agg).is_some());
    let upd = doc! { "update": "comments", "updates": [{ "q": { "discussion_id": "d" } }, { "q": { "slug": "s" } }] };
    assert!(untargeted("update", &upd).is_some());
    let ins = doc! { "insert": "comments", "documents": [{ "slug": "s" }] };
    assert!(untargeted("insert", &ins).is_some());
    let ok = doc! { "delete": "comment_pages", "deletes": [{ "q": { "discussion_id": "d" }, "limit": 0 }] };
    assert!(untargeted("delete", &ok).is_none());
}

async fn every_command_targets_one_discussion(layout: Layout) {
    let recorder = Recorder::default();
    let settings = || Settings {
        command_events: Some(recorder.handler()),
        bucket_size: 7,
        ..Settings::new(layout)
    };
    // Each case on the heap: together, their futures outgrow a test thread's stack.
    Box::pin(contract::orders_and_paging_match_the_model_case(settings())).await;
    Box::pin(contract::tree_reads_match_the_model_case(settings())).await;
    Box::pin(contract::concurrent_replies_are_all_stored_case(settings())).await;
    Box::pin(contract::bad_inputs_get_clear_errors_case(settings())).await;
    Box::pin(contract::writes_are_visible_within_one_request_case(
        settings(),
    ))
    .await;
    Box::pin(lifecycle::tombstones_keep_their_place_in_every_read_case(
        settings(),
    ))
    .await;
    Box::pin(lifecycle::revisions_keep_every_earlier_version_case(
        settings(),
    ))
    .await;
    Box::pin(lifecycle::edits_racing_replies_lose_nothing_case(settings())).await;
    Box::pin(crate::keys::keyed_discussions_keep_their_key_everywhere_case(settings())).await;
    Box::pin(crate::votes::votes_follow_the_rules_case(settings())).await;
    Box::pin(crate::votes::ranked_orders_match_the_model_case(settings())).await;
    // A move out of the layout and back.
    let app = TestApp::with("shard_moves", settings()).await;
    let d = app.discussion("moving").await;
    crate::model::build_tree(&app, &d, 60, 3, 4).await;
    let other = if layout == Layout::Bucketed {
        Layout::PerComment
    } else {
        Layout::Bucketed
    };
    let token = app.moderator_token("m", "M");
    for to in [other, layout] {
        let r = app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }",
                serde_json::json!({ "d": d, "l": crate::support::layout_name(to) }),
            )
            .await;
        assert!(r["errors"].is_null(), "{r:#}");
    }
    let (checked, problems) = recorder.problems();
    if layout != Layout::Embedded {
        assert!(
            checked > 100,
            "only {checked} commands to comment collections were seen"
        );
    }
    assert!(
        problems.is_empty(),
        "{} untargeted commands:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_comment_commands_target_one_discussion() {
    every_command_targets_one_discussion(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucketed_commands_target_one_discussion() {
    every_command_targets_one_discussion(Layout::Bucketed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_commands_target_one_discussion() {
    every_command_targets_one_discussion(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_indexes_start_with_the_shard_keys() {
    let app = TestApp::new("shard_indexes", Layout::PerComment).await;
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(&app.database);
    for shard in SHARD_KEYS.iter().filter(|s| s.unique) {
        let mut cursor = db
            .collection::<Document>(shard.collection)
            .list_indexes()
            .await
            .expect("list indexes");
        let mut unique_keys = Vec::new();
        while cursor.advance().await.expect("next index") {
            let index = cursor.deserialize_current().expect("index");
            if index.options.as_ref().and_then(|o| o.unique) == Some(true) {
                unique_keys.push(index.keys.keys().cloned().collect::<Vec<_>>());
            }
        }
        assert!(
            !unique_keys.is_empty(),
            "{} has a unique index",
            shard.collection
        );
        let key: Vec<String> = shard.fields.iter().map(|(f, _)| f.to_string()).collect();
        for unique in &unique_keys {
            assert!(
                unique.starts_with(&key),
                "{}: unique index {unique:?} does not start with the shard key {key:?}",
                shard.collection
            );
        }
        assert!(shard.fields.iter().all(|(_, k)| *k == KeyKind::Ranged));
    }
}

/// The shard keys `docker/sharded-init.js` gives `shardCollection` are the store's.
#[test]
fn the_init_script_shards_on_the_stores_keys() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docker/sharded-init.js"
    ))
    .expect("read docker/sharded-init.js");
    let mut found = 0;
    for line in script.lines().filter(|l| l.contains("shardCollection")) {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        let shard = SHARD_KEYS
            .iter()
            .find(|s| compact.contains(&format!("\"threadql.{}\"", s.collection)))
            .unwrap_or_else(|| panic!("shards a collection the store does not shard: {line}"));
        let fields: Vec<String> = shard
            .fields
            .iter()
            .map(|(f, k)| match k {
                KeyKind::Ranged => format!("{f}:1"),
                KeyKind::Hashed => format!("{f}:\"hashed\""),
            })
            .collect();
        let key = format!("key:{{{}}}", fields.join(","));
        assert!(compact.contains(&key), "{line} should shard on {key}");
        assert_eq!(compact.contains("unique:true"), shard.unique, "{line}");
        found += 1;
    }
    assert_eq!(
        found,
        SHARD_KEYS.len(),
        "every collection is sharded by the init script"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_setup_refuses_a_deployment_that_is_not_sharded() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
        .arg("shard-setup")
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_DATABASE", "shard_setup_refused")
        .output()
        .await
        .expect("run threadql shard-setup");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a sharded cluster"), "{stderr}");
}

/// Every collection the store writes is sharded on a key of `SHARD_KEYS` or listed as left
/// unsharded (with its reason), so `shard-setup` forgets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_collection_is_sharded_or_listed_unsharded() {
    use serde_json::json;
    use threadql::store::shard::UNSHARDED;
    let app = TestApp::new("shard_collections", Layout::PerComment).await;
    let moderator = app.moderator_token("mod", "Mo");
    for (i, layout) in ["PER_COMMENT", "EMBEDDED", "BUCKETED"].iter().enumerate() {
        let data = app
            .ok(
                &format!("mutation {{ ensureDiscussion(input: {{key: \"k{i}\", title: \"t\", layout: {layout}}}) {{ id }} }}"),
                json!({}),
            )
            .await;
        let d = data["ensureDiscussion"]["id"].as_str().unwrap().to_owned();
        app.ok(
            "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"x\"}) { slug } }",
            json!({ "d": d }),
        )
        .await;
    }
    for query in [
        "mutation { banUser(userId: \"troll\") { userId } }",
        "mutation { unbanUser(userId: \"troll\") }",
    ] {
        let response = app.exec_as(Some(&moderator), query, json!({})).await;
        assert!(response.get("errors").is_none(), "{response:#}");
    }
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(&app.database);
    let names = db.list_collection_names().await.expect("collections");
    for name in &names {
        let sharded = SHARD_KEYS.iter().any(|s| s.collection == name);
        let unsharded = UNSHARDED.iter().any(|(c, _)| c == name);
        assert!(
            sharded != unsharded,
            "{name} must be either sharded or listed unsharded"
        );
    }
    for expected in [
        "bans",
        "moderators",
        "moderation_log",
        "counters",
        "comments",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
}
