//! What the moderation console reads besides the queues: the bans in force, the moderation log
//! filtered by action or moderator, each queued comment's discussion and reports (one command
//! for a page's reports), and the queues' changes live, for moderators only.

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::live::{await_subscribers, Protocol, Ws};
use crate::support::{
    error_code, moderator_token, server_config, token, Running, Settings, TestApp,
};

const BAN: &str = "mutation($u: ID!, $r: String) { banUser(userId: $u, reason: $r) { userId } }";
const UNBAN: &str = "mutation($u: ID!) { unbanUser(userId: $u) }";
const BANS: &str = "query($f: Int, $a: String) { bans(first: $f, after: $a) { nodes { userId reason by { id } } pageInfo { hasNextPage endCursor } } }";
const LOG: &str = "query($f: Int, $a: String, $l: Int, $action: ModerationAction, $m: ID) { moderationLog(first: $f, after: $a, last: $l, action: $action, moderatorId: $m) { nodes { action moderator { id } slug } pageInfo { hasNextPage endCursor } } }";
const REPORT: &str = "mutation($d: ID!, $s: String!, $r: ReportReason!, $n: String) { reportComment(discussionId: $d, slug: $s, reason: $r, note: $n) }";
const REPORTED: &str = "query { moderationQueue(queue: REPORTED, first: 10) { nodes { slug discussion { id title } reports { reason note at } } } }";
const CHANGES: &str = "subscription($d: ID) { moderationQueueChanged(discussionId: $d) { discussionId slug queue event } }";

/// Every page of the bans in force, `size` at a time: the user ids, newest first.
async fn banned_users(app: &TestApp, moderator: &str, size: i64) -> Vec<String> {
    let (mut users, mut after) = (Vec::new(), None::<String>);
    loop {
        let vars = json!({ "f": size, "a": after });
        let page = app.ok_as(Some(moderator), BANS, vars).await["bans"].clone();
        for node in page["nodes"].as_array().expect("nodes") {
            users.push(node["userId"].as_str().expect("user").to_owned());
        }
        if page["pageInfo"]["hasNextPage"] != true {
            return users;
        }
        after = page["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_in_force_are_listed_newest_first_until_lifted() {
    let app = TestApp::new("console_bans", Layout::PerComment).await;
    let moderator = app.moderator_token("mod", "Mo");
    for user in ["u1", "u2", "u3"] {
        let vars = json!({ "u": user, "r": format!("ban of {user}") });
        app.ok_as(Some(&moderator), BAN, vars).await;
    }
    assert_eq!(banned_users(&app, &moderator, 2).await, ["u3", "u2", "u1"]);
    let first = app.ok_as(Some(&moderator), BANS, json!({ "f": 1 })).await;
    assert_eq!(
        first["bans"]["nodes"],
        json!([{ "userId": "u3", "reason": "ban of u3", "by": { "id": "mod" } }])
    );
    app.ok_as(Some(&moderator), UNBAN, json!({ "u": "u2" }))
        .await;
    assert_eq!(banned_users(&app, &moderator, 1).await, ["u3", "u1"]);

    let reader = app.token("reader", "Rea");
    let refused = app.exec_as(Some(&reader), BANS, json!({})).await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    assert_eq!(
        error_code(&app.exec_as(None, BANS, json!({})).await),
        "UNAUTHENTICATED"
    );
    let log = app.ok_as(Some(&moderator), LOG, json!({ "f": 1 })).await;
    let log_cursor = log["moderationLog"]["pageInfo"]["endCursor"].clone();
    for vars in [
        json!({ "a": "garbage" }),
        json!({ "f": -1 }),
        json!({ "f": 1000 }),
        json!({ "a": log_cursor }),
    ] {
        let bad = app.exec_as(Some(&moderator), BANS, vars.clone()).await;
        assert_eq!(error_code(&bad), "BAD_USER_INPUT", "{vars}: {bad:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_keeps_one_action_or_one_moderator() {
    let app = TestApp::new("console_log", Layout::PerComment).await;
    let (mo, ed) = (
        app.moderator_token("mo", "Mo"),
        app.moderator_token("ed", "Ed"),
    );
    let d = app.discussion("log filters").await;
    let pin = "mutation($d: ID!, $s: String!, $p: Boolean!) { pinComment(discussionId: $d, slug: $s, pinned: $p) { pinned } }";
    let mut slugs = Vec::new();
    for n in 0..3 {
        slugs.push(app.post(&d, None, &format!("comment {n}")).await);
    }
    // Mo bans twice and pins once; Ed pins twice and bans once.
    app.ok_as(Some(&mo), BAN, json!({ "u": "x1" })).await;
    app.ok_as(Some(&ed), pin, json!({ "d": d, "s": slugs[0], "p": true }))
        .await;
    app.ok_as(Some(&mo), pin, json!({ "d": d, "s": slugs[1], "p": true }))
        .await;
    app.ok_as(Some(&ed), BAN, json!({ "u": "x2" })).await;
    app.ok_as(Some(&mo), BAN, json!({ "u": "x3" })).await;
    app.ok_as(Some(&ed), pin, json!({ "d": d, "s": slugs[2], "p": true }))
        .await;

    // Walks the filtered log one entry at a time: (action, moderator, slug) newest first.
    let walk = async |filter: Value| -> Vec<(String, String, Value)> {
        let (mut seen, mut after) = (Vec::new(), None::<String>);
        loop {
            let mut vars = filter.clone();
            vars["f"] = json!(1);
            vars["a"] = json!(after);
            let page = app.ok_as(Some(&mo), LOG, vars).await["moderationLog"].clone();
            for node in page["nodes"].as_array().expect("nodes") {
                seen.push((
                    node["action"].as_str().expect("action").to_owned(),
                    node["moderator"]["id"]
                        .as_str()
                        .expect("moderator")
                        .to_owned(),
                    node["slug"].clone(),
                ));
            }
            if page["pageInfo"]["hasNextPage"] != true {
                return seen;
            }
            after = page["pageInfo"]["endCursor"].as_str().map(str::to_owned);
        }
    };
    let entry = |action: &str, by: &str, slug: Option<&String>| {
        (action.to_owned(), by.to_owned(), json!(slug))
    };
    assert_eq!(
        walk(json!({ "action": "BAN" })).await,
        [
            entry("BAN", "mo", None),
            entry("BAN", "ed", None),
            entry("BAN", "mo", None)
        ]
    );
    assert_eq!(
        walk(json!({ "m": "ed" })).await,
        [
            entry("PIN", "ed", Some(&slugs[2])),
            entry("BAN", "ed", None),
            entry("PIN", "ed", Some(&slugs[0]))
        ]
    );
    assert_eq!(
        walk(json!({ "action": "PIN", "m": "mo" })).await,
        [entry("PIN", "mo", Some(&slugs[1]))]
    );
    assert_eq!(walk(json!({ "action": "UNBAN" })).await, []);
    // Unfiltered, the log still lists all six.
    assert_eq!(walk(json!({})).await.len(), 6);

    let backward = json!({ "l": 2, "action": "BAN" });
    let bad = app.exec_as(Some(&mo), LOG, backward).await;
    assert_eq!(error_code(&bad), "BAD_USER_INPUT", "{bad:#}");
    let blank = app.exec_as(Some(&mo), LOG, json!({ "m": " " })).await;
    assert_eq!(error_code(&blank), "BAD_USER_INPUT", "{blank:#}");
    let unknown = app
        .exec_as(Some(&mo), LOG, json!({ "action": "EXPLODE" }))
        .await;
    assert!(!unknown["errors"].is_null(), "{unknown:#}");
    let reader = app.token("reader", "Rea");
    let refused = app
        .exec_as(Some(&reader), LOG, json!({ "action": "BAN" }))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_comments_show_their_discussion_and_their_reports() {
    let mut settings = Settings::new(Layout::Bucketed);
    settings.reports_to_hold = 0;
    let app = TestApp::with("console_reports", settings).await;
    let moderator = app.moderator_token("mod", "Mo");
    let d = app.discussion("reported things").await;
    let (a, b) = (
        app.post(&d, None, "first").await,
        app.post(&d, None, "second").await,
    );
    let reports = [
        ("r1", &a, "SPAM", Some("buy now")),
        ("r2", &a, "OTHER", Some("<b>odd</b>")),
        ("r3", &b, "ABUSE", None),
    ];
    for (who, slug, reason, note) in reports {
        let vars = json!({ "d": d, "s": slug, "r": reason, "n": note });
        app.ok_as(Some(&app.token(who, who)), REPORT, vars).await;
    }
    let queued = app.ok_as(Some(&moderator), REPORTED, json!({})).await;
    let nodes = queued["moderationQueue"]["nodes"]
        .as_array()
        .expect("nodes");
    assert_eq!(nodes.len(), 2, "{queued:#}");
    let shown = |slug: &str| nodes.iter().find(|n| n["slug"] == slug).expect("queued");
    let reasons = |node: &Value| -> Vec<(Value, Value)> {
        node["reports"]
            .as_array()
            .expect("reports")
            .iter()
            .map(|r| (r["reason"].clone(), r["note"].clone()))
            .collect()
    };
    assert_eq!(
        reasons(shown(&a)),
        [
            (json!("SPAM"), json!("buy now")),
            (json!("OTHER"), json!("<b>odd</b>"))
        ]
    );
    assert_eq!(reasons(shown(&b)), [(json!("ABUSE"), Value::Null)]);
    assert_eq!(
        shown(&a)["discussion"],
        json!({ "id": d, "title": "reported things" })
    );
    // The page's reports are one command, whatever the number of comments.
    let without = REPORTED.replace(" reports { reason note at }", "");
    let mut spent = Vec::new();
    for query in [REPORTED, without.as_str()] {
        let before = app.store().commands().snapshot();
        app.ok_as(Some(&moderator), query, json!({})).await;
        spent.push(crate::support::diff(
            &before,
            &app.store().commands().snapshot(),
        ));
    }
    let finds = |n: usize| spent[n].get("find").copied().unwrap_or(0);
    assert_eq!(finds(0), finds(1) + 1, "{spent:?}");

    // Only moderators see reports.
    let link = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { reports { reason } discussion { id } } }";
    let vars = json!({ "d": d, "s": a });
    let public = app.ok_as(Some(&app.token("r1", "r1")), link, vars).await;
    assert_eq!(
        public["comment"],
        json!({ "reports": null, "discussion": { "id": d } })
    );
}

/// The next queue change a socket hears for the operation `id`.
async fn next_change(ws: &mut Ws, id: &str) -> Value {
    let (got, payload) = ws.next().await;
    assert_eq!(got, id, "{payload:#}");
    assert!(payload["errors"].is_null(), "{payload:#}");
    payload["data"]["moderationQueueChanged"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moderators_hear_the_queues_change_live() {
    let server = Running::start(server_config("console_live")).await;
    let moderator = moderator_token("mod", "Mo");
    let (author, reporter) = (token("ada", "Ada"), token("bob", "Bob"));
    let d = server.discussion(&moderator, Layout::PerComment).await;
    let other = server.discussion(&moderator, Layout::PerComment).await;
    let pre = "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }";
    server.mutate(&moderator, pre, json!({ "d": d })).await;

    let payload = json!({ "Authorization": format!("Bearer {moderator}") });
    let mut all = Ws::connect(&server, Protocol::TransportWs, payload.clone()).await;
    let mut one = Ws::connect(&server, Protocol::LegacyGraphqlWs, payload).await;
    all.start("all", CHANGES, json!({})).await;
    one.start("one", CHANGES, json!({ "d": other })).await;
    await_subscribers(&server, 2).await;

    let change = |slug: &str, queue: Value, event: &str| json!({ "discussionId": d, "slug": slug, "queue": queue, "event": event });
    let held = server.post(&author, &d, None, "held for a moderator").await;
    assert_eq!(
        next_change(&mut all, "all").await,
        change(&held, json!("PENDING"), "COMMENT_HELD")
    );
    let reject = "mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s, reason: \"no\") { status } }";
    let approve =
        "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { status } }";
    let vars = json!({ "d": d, "s": held });
    server.mutate(&moderator, reject, vars.clone()).await;
    assert_eq!(
        next_change(&mut all, "all").await,
        change(&held, json!("REJECTED"), "COMMENT_REJECTED")
    );
    server.mutate(&moderator, approve, vars.clone()).await;
    assert_eq!(
        next_change(&mut all, "all").await,
        change(&held, Value::Null, "COMMENT_APPROVED")
    );
    let report = json!({ "d": d, "s": held, "r": "SPAM" });
    server.mutate(&reporter, REPORT, report).await;
    assert_eq!(
        next_change(&mut all, "all").await,
        change(&held, json!("REPORTED"), "COMMENT_REPORTED")
    );
    // Its author deletes it: it waits for no moderator.
    let delete =
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }";
    server.mutate(&author, delete, vars.clone()).await;
    assert_eq!(
        next_change(&mut all, "all").await,
        change(&held, Value::Null, "COMMENT_DELETED")
    );

    // The socket that watches the other discussion heard none of that: its first change is
    // the other discussion's.
    server.mutate(&moderator, pre, json!({ "d": other })).await;
    let elsewhere = server.post(&author, &other, None, "held elsewhere").await;
    let heard = next_change(&mut one, "one").await;
    assert_eq!(heard["discussionId"], other.as_str(), "{heard:#}");
    assert_eq!(heard["slug"], elsewhere.as_str(), "{heard:#}");

    // Only moderators may listen.
    let signed_in = json!({ "Authorization": format!("Bearer {author}") });
    let mut refused = Ws::connect(&server, Protocol::TransportWs, signed_in).await;
    refused.start("x", CHANGES, json!({})).await;
    let (id, payload) = refused.next().await;
    assert_eq!(id, "x");
    assert_eq!(error_code(&payload), "FORBIDDEN", "{payload:#}");
    let mut anonymous = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    anonymous
        .start("y", CHANGES, json!({ "d": "not-an-id" }))
        .await;
    let (_, payload) = anonymous.next().await;
    assert_eq!(error_code(&payload), "UNAUTHENTICATED", "{payload:#}");
    drop((all, one, refused, anonymous));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moderators_act_on_a_page_of_the_queue_past_the_rate_of_posts() {
    let mut settings = Settings::new(Layout::PerComment);
    settings.rate_limit = "3/60s".parse().expect("rate");
    settings.moderation_rate_limit = "6/60s".parse().expect("rate");
    let app = TestApp::with("console_rate", settings).await;
    let moderator = app.moderator_token("mod", "Mo");
    // Six bans in a row: moderators' actions have their own allowance; a seventh is past it.
    for n in 0..6 {
        let vars = json!({ "u": format!("spammer{n}") });
        app.ok_as(Some(&moderator), BAN, vars).await;
    }
    let limited = app
        .exec_as(Some(&moderator), BAN, json!({ "u": "more" }))
        .await;
    assert_eq!(error_code(&limited), "RATE_LIMITED", "{limited:#}");
    // Their posts still spend the rate of changes.
    let d = app.discussion("rates").await;
    let post =
        "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"hi\"}) { slug } }";
    for _ in 0..3 {
        app.ok_as(Some(&moderator), post, json!({ "d": d })).await;
    }
    let limited = app.exec_as(Some(&moderator), post, json!({ "d": d })).await;
    assert_eq!(error_code(&limited), "RATE_LIMITED", "{limited:#}");
    // Someone without the role spends the rate of changes, and is refused for the role.
    let reader = app.token("reader", "Rea");
    for _ in 0..3 {
        let refused = app.exec_as(Some(&reader), BAN, json!({ "u": "x" })).await;
        assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    }
    let limited = app.exec_as(Some(&reader), BAN, json!({ "u": "x" })).await;
    assert_eq!(error_code(&limited), "RATE_LIMITED", "{limited:#}");
}
