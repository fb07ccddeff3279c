//! Imported guest ids are keyed with the server key: no public id is the unkeyed hash of an
//! e-mail address, another key gives other ids, every process shares the key generated on the
//! first start, and ids an earlier version stored unkeyed are keyed on every layout, once.

use std::collections::{BTreeSet, HashMap};

use serde_json::json;
use threadql::app::App;
use threadql::domain::{GuestIds, Layout, ServerKey};
use threadql::store::Storage as _;

use crate::support::{
    fixture_unkeyed_ids, import_fixture_path, keyed_guest_ids, moderator_token, served_guest_ids,
    server_config, sha256_hex, stored_strings, threadql_against, write_as_before_keyed_ids,
    Running, OTHER_ID_KEY, TEST_ID_KEY,
};

/// The e-mail addresses of the guests of tests/fixtures/import/disqus.xml.
const DISQUS_EMAILS: [&str; 5] = [
    "owner@example.com",
    "bob@example.com",
    "dave@example.com",
    "eve@example.com",
    "lost@example.com",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_guest_ids_are_not_hashes_of_emails_and_change_with_the_key() {
    let path = import_fixture_path("disqus.xml");
    let unkeyed = fixture_unkeyed_ids("disqus.expected.json");
    let guessed: BTreeSet<String> = DISQUS_EMAILS
        .iter()
        .map(|email| format!("disqus-guest:{}", &sha256_hex(email)[..16]))
        .collect();
    let mut shown = Vec::new();
    for key in [TEST_ID_KEY, OTHER_ID_KEY] {
        let mut config = server_config("guests_keyed");
        config.id_key = Some(key.to_owned());
        let env = [("THREADQL_ID_KEY", key)];
        let args = ["import", path.as_str(), "--format", "disqus"];
        let (ok, out, err) = threadql_against(&config.database, &args, &env).await;
        assert!(
            ok && out.contains("comments: 10 (10 added)"),
            "{out}\n{err}"
        );
        // The same file again adds nothing and changes no id.
        let server = Running::start(config.clone()).await;
        let first = served_guest_ids(&server).await;
        let (ok, again, err) = threadql_against(&config.database, &args, &env).await;
        assert!(
            ok && again.contains("comments: 10 (0 added)"),
            "{again}\n{err}"
        );
        assert_eq!(served_guest_ids(&server).await, first);
        server.shutdown().await;
        assert!(!first.is_empty());
        assert!(
            first.is_disjoint(&guessed),
            "an id is the SHA-256 of an e-mail: {first:?}"
        );
        assert!(first.is_disjoint(&unkeyed), "{first:?}");
        assert!(
            first.is_subset(&keyed_guest_ids(key, &unkeyed)),
            "{first:?}"
        );
        shown.push(first);
    }
    assert!(shown[0].is_disjoint(&shown[1]), "{shown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_sharing_a_database_agree_on_the_generated_key() {
    let config = server_config("guests_shared_key");
    assert!(config.id_key.is_none());
    // Four servers start at once on an empty database: each tries to store a key of its own.
    let builds = (0..4).map(|_| App::build(&config));
    let apps = futures::future::join_all(builds).await;
    let mut keys = Vec::new();
    for app in apps {
        let app = app.expect("build");
        let key = app
            .store
            .server()
            .server_key(&ServerKey::generate())
            .await
            .expect("the stored key");
        keys.push(key);
    }
    assert!(keys.windows(2).all(|w| w[0] == w[1]), "the keys differ");
    // An import without THREADQL_ID_KEY uses the same key as the servers.
    let path = import_fixture_path("disqus.xml");
    let args = ["import", path.as_str(), "--format", "disqus"];
    let (ok, out, err) = threadql_against(&config.database, &args, &[]).await;
    assert!(ok, "{out}\n{err}");
    let server = Running::start(config.clone()).await;
    let shown = served_guest_ids(&server).await;
    server.shutdown().await;
    let ids = GuestIds::new(&keys[0]);
    let expected: BTreeSet<String> = fixture_unkeyed_ids("disqus.expected.json")
        .iter()
        .filter_map(|id| ids.keyed(id))
        .collect();
    assert!(!shown.is_empty() && shown.is_subset(&expected), "{shown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_ids_of_an_earlier_version_are_keyed_on_every_layout_once() {
    let disqus = import_fixture_path("disqus.xml");
    let wordpress = import_fixture_path("wordpress.xml");
    let mut unkeyed = fixture_unkeyed_ids("disqus.expected.json");
    unkeyed.extend(fixture_unkeyed_ids("wordpress.expected.json"));
    let keyed = keyed_guest_ids(TEST_ID_KEY, &unkeyed);
    let ids = GuestIds::new(&ServerKey::parse(TEST_ID_KEY).expect("a test key"));
    let to_old: HashMap<String, String> = unkeyed
        .iter()
        .map(|old| (ids.keyed(old).expect("unkeyed"), old.clone()))
        .collect();
    let env = [("THREADQL_ID_KEY", TEST_ID_KEY)];
    for layout in Layout::ALL {
        let mut config = server_config(&format!("guests_old_{}", layout.as_str()));
        config.id_key = Some(TEST_ID_KEY.to_owned());
        let database = config.database.clone();
        for (file, format) in [(&disqus, "disqus"), (&wordpress, "wordpress")] {
            let args = [
                "import",
                file,
                "--format",
                format,
                "--layout",
                layout.as_str(),
            ];
            let (ok, out, err) = threadql_against(&database, &args, &env).await;
            assert!(ok, "{out}\n{err}");
        }
        // A moderator bans a guest: the ban and its log entry carry the id too.
        let server = Running::start(config.clone()).await;
        let banned = to_old.keys().next().expect("a guest").clone();
        let moderator = moderator_token("mod", "Mo");
        let client = reqwest::Client::new();
        crate::support::graphql_data(
            &client,
            &server,
            Some(&moderator),
            "mutation($u: ID!) { banUser(userId: $u) { userId } }",
            json!({ "u": banned }),
        )
        .await;
        server.shutdown().await;
        // The database as an earlier version left it: every guest id unkeyed.
        let rewritten = write_as_before_keyed_ids(&database, &to_old).await;
        assert!(rewritten > 0, "{layout}");
        let before = stored_strings(&database).await;
        for old in &unkeyed {
            assert!(before.contains(old), "{layout}: {old} stored");
        }
        // The next start keys them before it serves.
        let server = Running::start(config.clone()).await;
        let shown = served_guest_ids(&server).await;
        assert!(
            !shown.is_empty() && shown.is_subset(&keyed),
            "{layout}: {shown:?}"
        );
        server.shutdown().await;
        let after = stored_strings(&database).await;
        for old in &unkeyed {
            assert!(!after.contains(old), "{layout}: {old} is still stored");
        }
        for new in &keyed {
            assert!(after.contains(new), "{layout}: {new} is not stored");
        }
        // Run again from the command line: nothing left to change.
        let (ok, out, err) = threadql_against(&database, &["key-guest-ids"], &env).await;
        assert!(ok, "{out}\n{err}");
        assert!(
            out.contains("guest ids keyed: 0 ids in 0 documents"),
            "{layout}: {out}"
        );
        assert_eq!(stored_strings(&database).await.len(), after.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weak_or_garbled_id_key_stops_the_start_without_showing_it() {
    let config = server_config("guests_bad_key");
    for bad in [
        "secret",
        "0123456789abcdef0123456789abcdef",
        &"0".repeat(64),
        "not a key, just words",
    ] {
        let env = [("THREADQL_ID_KEY", bad)];
        let (ok, out, err) = threadql_against(&config.database, &["serve"], &env).await;
        assert!(!ok, "{bad:?} was accepted: {out}\n{err}");
        assert!(err.contains("THREADQL_ID_KEY is refused"), "{bad:?}: {err}");
        assert!(!err.contains(bad), "{bad:?} is shown: {err}");
    }
}
