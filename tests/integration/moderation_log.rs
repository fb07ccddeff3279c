//! The moderation log over real HTTP: every moderator action recorded once with its fields,
//! newest first; what is not a moderator action left out; pages forward and backward holding
//! every entry once (also past numbers never written), each page a bounded read; moderators
//! only; bad paging refused.

use std::collections::BTreeSet;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use mongodb::bson::doc;
use serde_json::{json, Value};

use crate::bans::Site;
use crate::support::{diff, error_code, moderator_token, server_uri, token};

const LOG: &str = "query($first: Int, $after: String, $last: Int, $before: String) { moderationLog(first: $first, after: $after, last: $last, before: $before) { edges { cursor node { id at moderator { id name } action discussionId slug userId reason detail } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }";
const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }";
const LOCK: &str = "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { id } }";
const PIN: &str = "mutation($d: ID!, $s: String!, $p: Boolean!) { pinComment(discussionId: $d, slug: $s, pinned: $p) { slug } }";
const BAN: &str = "mutation($u: ID!, $r: String) { banUser(userId: $u, reason: $r) { userId } }";
const UNBAN: &str = "mutation($u: ID!) { unbanUser(userId: $u) }";

/// One page of the log: its entries and its page info.
async fn log_page(site: &Site, moderator: &str, args: Value) -> (Vec<Value>, Value) {
    let data = site.data(Some(moderator), LOG, args).await;
    let log = &data["moderationLog"];
    let entries = log["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| {
            let mut node = edge["node"].clone();
            node["cursor"] = edge["cursor"].clone();
            node
        })
        .collect();
    (entries, log["pageInfo"].clone())
}

/// The whole log, newest first, read in pages of `size` forward.
async fn forward(site: &Site, moderator: &str, size: i32) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after = Value::Null;
    loop {
        let (entries, info) =
            log_page(site, moderator, json!({ "first": size, "after": after })).await;
        assert!(entries.len() <= size as usize);
        assert_eq!(info["hasPreviousPage"], !after.is_null(), "{info}");
        all.extend(entries);
        if info["hasNextPage"] == false {
            return all;
        }
        after = info["endCursor"].clone();
    }
}

/// The whole log, newest first, read in pages of `size` backward from the oldest entries.
async fn backward(site: &Site, moderator: &str, size: i32) -> Vec<Value> {
    let mut all = Vec::new();
    let mut before = Value::Null;
    loop {
        let (mut entries, info) =
            log_page(site, moderator, json!({ "last": size, "before": before })).await;
        assert!(entries.len() <= size as usize);
        assert_eq!(info["hasNextPage"], !before.is_null(), "{info}");
        entries.append(&mut all);
        all = entries;
        if info["hasPreviousPage"] == false {
            return all;
        }
        before = info["startCursor"].clone();
    }
}

fn slug(data: &Value, field: &str) -> String {
    data[field]["slug"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_moderator_action_is_logged_once_newest_first() {
    let site = Site::start("modlog_actions").await;
    let moderator = moderator_token("mod", "Mo");
    let user = token("ada", "Ada");
    let d = site.discussion(&user).await;
    let theirs = slug(
        &site
            .data(Some(&user), POST, json!({ "d": d, "t": "one" }))
            .await,
        "postComment",
    );
    let other = slug(
        &site
            .data(Some(&user), POST, json!({ "d": d, "t": "two" }))
            .await,
        "postComment",
    );
    let own = slug(
        &site
            .data(Some(&moderator), POST, json!({ "d": d, "t": "mine" }))
            .await,
        "postComment",
    );

    let (empty, info) = log_page(&site, &moderator, json!({ "first": 10 })).await;
    assert!(empty.is_empty());
    assert_eq!(info["hasNextPage"], false);

    // What is not a moderator action: a user's own edit, a refused attempt, a moderator's
    // changes to their own comment, lifting a ban that is not there.
    site.data(
        Some(&user),
        EDIT,
        json!({ "d": d, "s": theirs, "t": "one, fixed" }),
    )
    .await;
    let refused = site
        .send(Some(&user), LOCK, json!({ "d": d, "l": true }))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN");
    site.data(
        Some(&moderator),
        EDIT,
        json!({ "d": d, "s": own, "t": "mine, fixed" }),
    )
    .await;
    site.data(Some(&moderator), DELETE, json!({ "d": d, "s": own }))
        .await;
    let data = site
        .data(Some(&moderator), UNBAN, json!({ "u": "nobody" }))
        .await;
    assert_eq!(data["unbanUser"], false);

    // Every moderator action there is.
    site.data(Some(&moderator), LOCK, json!({ "d": d, "l": true }))
        .await;
    site.data(Some(&moderator), LOCK, json!({ "d": d, "l": false }))
        .await;
    site.data(
        Some(&moderator),
        PIN,
        json!({ "d": d, "s": theirs, "p": true }),
    )
    .await;
    site.data(
        Some(&moderator),
        PIN,
        json!({ "d": d, "s": theirs, "p": false }),
    )
    .await;
    site.data(
        Some(&moderator),
        EDIT,
        json!({ "d": d, "s": theirs, "t": "moderated" }),
    )
    .await;
    site.data(Some(&moderator), DELETE, json!({ "d": d, "s": other }))
        .await;
    site.data(
        Some(&moderator),
        "mutation($d: ID!) { migrateDiscussion(id: $d, layout: BUCKETED) { id } }",
        json!({ "d": d }),
    )
    .await;
    site.data(Some(&moderator), BAN, json!({ "u": "troll", "r": "spam" }))
        .await;
    let data = site
        .data(Some(&moderator), UNBAN, json!({ "u": "troll" }))
        .await;
    assert_eq!(data["unbanUser"], true);
    let closing =
        "mutation($d: ID!, $at: DateTime) { setDiscussionClosing(id: $d, closesAt: $at) { id } }";
    site.data(
        Some(&moderator),
        closing,
        json!({ "d": d, "at": "2030-01-02T03:04:05Z" }),
    )
    .await;
    site.data(
        Some(&moderator),
        "mutation($d: ID!) { setDiscussionClosing(id: $d, useDefault: true) { id } }",
        json!({ "d": d }),
    )
    .await;

    let (entries, info) = log_page(&site, &moderator, json!({ "first": 50 })).await;
    assert_eq!(info["hasNextPage"], false);
    let mo = json!({ "id": "mod", "name": "Mo" });
    let entry = |action: &str,
                 slug: Option<&str>,
                 user: Option<&str>,
                 reason: Option<&str>,
                 detail: Option<&str>| {
        let discussion = match action {
            "BAN" | "UNBAN" => Value::Null,
            _ => json!(d),
        };
        json!({
            "moderator": mo, "action": action, "discussionId": discussion, "slug": slug,
            "userId": user, "reason": reason, "detail": detail,
        })
    };
    let expected = vec![
        entry("SET_CLOSING", None, None, None, Some("default")),
        entry(
            "SET_CLOSING",
            None,
            None,
            None,
            Some("2030-01-02T03:04:05Z"),
        ),
        entry("UNBAN", None, Some("troll"), None, None),
        entry(
            "BAN",
            None,
            Some("troll"),
            Some("spam"),
            Some("permanently"),
        ),
        entry("MOVE", None, None, None, Some("BUCKETED")),
        entry("DELETE", Some(&other), Some("ada"), None, None),
        entry("EDIT", Some(&theirs), Some("ada"), None, None),
        entry("UNPIN", Some(&theirs), None, None, None),
        entry("PIN", Some(&theirs), None, None, None),
        entry("UNLOCK", None, None, None, None),
        entry("LOCK", None, None, None, None),
    ];
    let shown: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let object = e.as_object_mut().unwrap();
            for key in ["id", "at", "cursor"] {
                object.remove(key);
            }
            e
        })
        .collect();
    assert_eq!(shown, expected);
    let ids: BTreeSet<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), entries.len(), "ids are unique");
    let times: Vec<DateTime<Utc>> = entries
        .iter()
        .map(|e| e["at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_forward_and_backward_hold_every_entry_once() {
    // Pages are counted in database commands: without the read cache's change feed.
    let mut config = crate::support::server_config("modlog_pages");
    config.cache_bytes = 0;
    let site = Site::on(config).await;
    let moderator = moderator_token("mod", "Mo");
    for i in 0..23 {
        site.data(Some(&moderator), BAN, json!({ "u": format!("u{i:02}") }))
            .await;
    }
    let users = |entries: &[Value]| -> Vec<String> {
        entries
            .iter()
            .map(|e| e["userId"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest_first: Vec<String> = (0..23).rev().map(|i| format!("u{i:02}")).collect();
    for size in [1, 5, 7, 23, 100] {
        assert_eq!(
            users(&forward(&site, &moderator, size).await),
            newest_first,
            "first: {size}"
        );
        assert_eq!(
            users(&backward(&site, &moderator, size).await),
            newest_first,
            "last: {size}"
        );
    }

    // Each page is one bounded range of entry numbers: a first page also reads where the log
    // ends (two commands), a page from a cursor reads just its range (one).
    let before = site.commands();
    let (first, info) = log_page(&site, &moderator, json!({ "first": 5 })).await;
    let spent = diff(&before, &site.commands());
    assert_eq!(spent, [("find".to_owned(), 2)].into(), "{spent:?}");
    assert_eq!(users(&first), newest_first[..5]);
    let before = site.commands();
    let (next, _) = log_page(
        &site,
        &moderator,
        json!({ "first": 5, "after": info["endCursor"] }),
    )
    .await;
    let spent = diff(&before, &site.commands());
    assert_eq!(spent, [("find".to_owned(), 1)].into(), "{spent:?}");
    assert_eq!(users(&next), newest_first[5..10]);
    // Back from the second page's first entry: the newer ones just before it.
    let (back, info) = log_page(
        &site,
        &moderator,
        json!({ "last": 3, "before": next[0]["cursor"] }),
    )
    .await;
    assert_eq!(users(&back), newest_first[2..5]);
    assert_eq!(
        (info["hasPreviousPage"].clone(), info["hasNextPage"].clone()),
        (json!(true), json!(true))
    );

    // Numbers taken but never written (a failure between the two writes of an entry) leave
    // gaps, which pages read past.
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&site.database);
    db.collection::<mongodb::bson::Document>("counters")
        .update_one(
            doc! { "_id": "moderation_log" },
            doc! { "$inc": { "seq": 9_i64 } },
        )
        .await
        .unwrap();
    for i in 23..27 {
        site.data(Some(&moderator), BAN, json!({ "u": format!("u{i:02}") }))
            .await;
    }
    let newest_first: Vec<String> = (0..27).rev().map(|i| format!("u{i:02}")).collect();
    for size in [1, 2, 5, 27] {
        assert_eq!(
            users(&forward(&site, &moderator, size).await),
            newest_first,
            "first: {size}"
        );
        assert_eq!(
            users(&backward(&site, &moderator, size).await),
            newest_first,
            "last: {size}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_for_moderators_and_refuses_bad_paging() {
    let site = Site::start("modlog_refusals").await;
    let moderator = moderator_token("mod", "Mo");
    let query = "{ moderationLog(first: 5) { edges { cursor } } }";
    let r = site.send(None, query, json!({})).await;
    assert_eq!(error_code(&r), "UNAUTHENTICATED", "{r:#}");
    let r = site.send(Some("garbage"), query, json!({})).await;
    assert_eq!(error_code(&r), "UNAUTHENTICATED", "{r:#}");
    let r = site
        .send(Some(&token("ada", "Ada")), query, json!({}))
        .await;
    assert_eq!(error_code(&r), "FORBIDDEN", "{r:#}");
    assert_eq!(r["data"]["moderationLog"], Value::Null);

    site.data(Some(&moderator), BAN, json!({ "u": "troll" }))
        .await;
    let (entries, _) = log_page(&site, &moderator, json!({ "first": 1 })).await;
    let good = entries[0]["cursor"].clone();
    site.discussion(&moderator).await;
    let listed = site
        .data(
            None,
            "{ discussions(first: 1) { edges { cursor } } }",
            json!({}),
        )
        .await;
    let other_list = listed["discussions"]["edges"][0]["cursor"].clone();
    assert!(other_list.is_string(), "{listed}");
    let forged = |raw: &str| json!(URL_SAFE_NO_PAD.encode(raw));
    for args in [
        json!({ "first": 1, "after": "!!" }),
        json!({ "first": 1, "after": "" }),
        json!({ "first": 1, "after": forged("l|abc") }),
        json!({ "first": 1, "after": forged("l|0") }),
        json!({ "first": 1, "after": forged("l|-3") }),
        json!({ "first": 1, "after": forged("l|1|2") }),
        json!({ "first": 1, "after": forged("l|99999999999999999999") }),
        json!({ "last": 1, "before": forged("c|5|abcdefgh") }),
        json!({ "first": 1, "after": other_list }),
        json!({ "first": 1, "last": 1 }),
        json!({ "first": -1 }),
        json!({ "first": 101 }),
        json!({ "last": -2 }),
        json!({ "first": 1, "before": good }),
        json!({ "last": 1, "after": good }),
        json!({ "after": good, "before": good }),
        json!({ "first": "ten" }),
    ] {
        let r = site.send(Some(&moderator), LOG, args.clone()).await;
        assert_eq!(error_code(&r), "BAD_USER_INPUT", "{args}: {r:#}");
    }
    // A well-formed cursor past either end pages from there: the entries beyond it, if any.
    for (args, found) in [
        (json!({ "first": 5, "after": forged("l|1") }), 0),
        (json!({ "last": 5, "before": forged("l|1") }), 0),
        (json!({ "first": 5, "after": forged("l|500") }), 1),
        (
            json!({ "first": 5, "after": forged(&format!("l|{}", i64::MAX)) }),
            1,
        ),
        (json!({ "last": 5, "before": forged("l|500") }), 0),
    ] {
        let (entries, info) = log_page(&site, &moderator, args.clone()).await;
        assert_eq!(entries.len(), found, "{args}");
        assert_eq!(
            info["hasNextPage"],
            args.get("after").is_none(),
            "{args}: {info}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_actions_each_get_their_entry() {
    // A fresh database: the moderator's record and the log's counter are created by whichever
    // of these wins the race; the others must not fail.
    let site = Site::start("modlog_concurrent").await;
    let moderator = moderator_token("mod", "Mo");
    let bans = (0..8).map(|i| {
        site.send(
            Some(&moderator),
            BAN,
            json!({ "u": format!("u{i}"), "r": "wave" }),
        )
    });
    for response in futures::future::join_all(bans).await {
        assert!(response.get("errors").is_none(), "{response:#}");
    }
    let (entries, _) = log_page(&site, &moderator, json!({ "first": 20 })).await;
    let ids: BTreeSet<u64> = entries
        .iter()
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids, (1..=8).collect());
    let users: BTreeSet<&str> = entries
        .iter()
        .map(|e| e["userId"].as_str().unwrap())
        .collect();
    assert_eq!(users.len(), 8);
}
