//! Imported guests: `threadql` subcommands run against a test database, the fixtures' guest ids
//! as imports stored them before ids were keyed, and raw access to every stored string (to write
//! what an earlier version wrote, and to find what is left of it).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use serde_json::Value;

use super::database::server_uri;

/// A server key for tests (32 bytes as hex).
pub(crate) const TEST_ID_KEY: &str =
    "8f2a61c4d09be37155ac2f4e9b1d07c3a6e58f90b21d4c7e3a95f06182bd4e7c";

/// Another server key for tests.
pub(crate) const OTHER_ID_KEY: &str =
    "1c7e3a95f06182bd4e7c8f2a61c4d09be37155ac2f4e9b1d07c3a6e58f90b21d";

/// Runs `threadql <args>` against `database`, with `env` on top (no `THREADQL_ID_KEY` unless
/// it names one), for at most two minutes; gives (success, stdout, stderr).
pub(crate) async fn threadql_against(
    database: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"));
    command
        .args(args)
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_DATABASE", database)
        .env("THREADQL_LISTEN", "127.0.0.1:0")
        .env("THREADQL_MOVE_LEASE_SECS", "1")
        .env("THREADQL_LOG", "warn")
        .env_remove("THREADQL_ID_KEY")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .unwrap_or_else(|_| panic!("threadql {args:?} still ran after two minutes"))
        .expect("run threadql");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The path of an import fixture.
pub(crate) fn import_fixture_path(name: &str) -> String {
    format!(
        "{}/tests/fixtures/import/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The guest ids a fixture's expected file lists: what imports stored before ids were keyed.
pub(crate) fn fixture_unkeyed_ids(expected: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(import_fixture_path(expected)).expect("read the fixture");
    let json: Value = serde_json::from_str(&text).expect("json");
    json["discussions"]
        .as_array()
        .expect("discussions")
        .iter()
        .flat_map(|d| d["comments"].as_array().expect("comments").iter())
        .filter_map(|c| c["author"]["id"].as_str())
        .filter(|id| id.contains("-guest:"))
        .map(str::to_owned)
        .collect()
}

/// The ids `unkeyed` (unkeyed guest ids) become under the server key `key`.
pub(crate) fn keyed_guest_ids(key: &str, unkeyed: &BTreeSet<String>) -> BTreeSet<String> {
    let key = threadql::domain::ServerKey::parse(key).expect("a test key");
    let ids = threadql::domain::GuestIds::new(&key);
    unkeyed
        .iter()
        .map(|id| ids.keyed(id).expect("an unkeyed guest id"))
        .collect()
}

pub(crate) async fn test_database(database: &str) -> mongodb::Database {
    mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(database)
}

pub(crate) fn strings_in(value: &Bson, out: &mut Vec<String>) {
    match value {
        Bson::String(s) => out.push(s.clone()),
        Bson::Document(d) => d.values().for_each(|v| strings_in(v, out)),
        Bson::Array(a) => a.iter().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

/// Every string stored in the database: all collections, all documents, at any depth.
pub(crate) async fn stored_strings(database: &str) -> Vec<String> {
    let db = test_database(database).await;
    let mut out = Vec::new();
    for name in db.list_collection_names().await.expect("collections") {
        let docs: Vec<Document> = db
            .collection::<Document>(&name)
            .find(doc! {})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("read");
        for d in docs {
            strings_in(&Bson::Document(d), &mut out);
        }
    }
    out
}

fn replaced(value: &mut Bson, map: &HashMap<String, String>) -> bool {
    match value {
        Bson::String(s) => match map.get(s.as_str()) {
            Some(new) => {
                *s = new.clone();
                true
            }
            None => false,
        },
        // Every value is visited: no short cut once one changed.
        Bson::Document(d) => {
            let mut any = false;
            for (_, v) in d.iter_mut() {
                any |= replaced(v, map);
            }
            any
        }
        Bson::Array(a) => {
            let mut any = false;
            for v in a.iter_mut() {
                any |= replaced(v, map);
            }
            any
        }
        _ => false,
    }
}

/// Rewrites every stored string that is a key of `map` to its value, in every collection (a
/// document whose `_id` changes is stored anew), and forgets that guest ids were keyed: the
/// database as a version before keyed ids left it. Gives the documents changed.
pub(crate) async fn write_as_before_keyed_ids(
    database: &str,
    map: &HashMap<String, String>,
) -> u64 {
    let db = test_database(database).await;
    let mut changed = 0;
    for name in db.list_collection_names().await.expect("collections") {
        let coll = db.collection::<Document>(&name);
        let docs: Vec<Document> = coll
            .find(doc! {})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("read");
        for original in docs {
            let id = original.get("_id").cloned().expect("an _id");
            let mut value = Bson::Document(original);
            if !replaced(&mut value, map) {
                continue;
            }
            let Bson::Document(new) = value else {
                unreachable!()
            };
            coll.delete_one(doc! { "_id": id }).await.expect("delete");
            coll.insert_one(new).await.expect("insert");
            changed += 1;
        }
    }
    db.collection::<Document>("server")
        .delete_one(doc! { "_id": "guest_ids" })
        .await
        .expect("forget the record");
    changed
}

/// The guest ids (`…-guest:…`) a running server shows as comment authors, over HTTP, in every
/// discussion (at most 50 discussions of 100 comments).
pub(crate) async fn served_guest_ids(server: &super::server::Running) -> BTreeSet<String> {
    let client = reqwest::Client::new();
    let data = super::server::graphql_data(
        &client,
        server,
        None,
        "{ discussions(first: 50) { nodes { comments(first: 100) { nodes { author { id } } } } } }",
        serde_json::json!({}),
    )
    .await;
    data["discussions"]["nodes"]
        .as_array()
        .expect("discussions")
        .iter()
        .flat_map(|d| d["comments"]["nodes"].as_array().expect("comments").iter())
        .filter_map(|c| c["author"]["id"].as_str())
        .filter(|id| id.contains("-guest:"))
        .map(str::to_owned)
        .collect()
}
