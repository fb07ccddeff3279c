//! Bans over real HTTP: moderators only; every mutation of a banned user refused with the ban's
//! end and reason (checked against the schema's whole list of mutations); moderators never held
//! back and never banned; an expired ban no longer applies; what a ban check costs a post; and a
//! ban made through one server applying on another.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

use crate::support::{
    diff, error_code, error_message, graphql_data, moderator_token, post_graphql, server_config,
    token, Running,
};

const BAN: &str = "mutation($u: ID!, $until: DateTime, $r: String) { banUser(userId: $u, until: $until, reason: $r) { userId until reason by { id name } at } }";
const UNBAN: &str = "mutation($u: ID!) { unbanUser(userId: $u) }";
const CREATE: &str =
    "mutation($t: String!) { createDiscussion(input: {title: $t, layout: PER_COMMENT}) { id } }";
const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";

/// A server and a client to it.
pub(crate) struct Site {
    pub server: Running,
    /// Its database.
    pub database: String,
    client: reqwest::Client,
}

impl Site {
    pub(crate) async fn start(label: &str) -> Site {
        Site::on(server_config(label)).await
    }

    pub(crate) async fn on(config: threadql::config::Config) -> Site {
        Site {
            database: config.database.clone(),
            server: Running::start(config).await,
            client: reqwest::Client::new(),
        }
    }

    /// The whole response body.
    pub(crate) async fn send(&self, token: Option<&str>, query: &str, vars: Value) -> Value {
        let (status, body) = post_graphql(&self.client, &self.server, token, query, vars).await;
        assert_eq!(status, 200, "{body:#}");
        body
    }

    /// The response's `data`, failing on any error.
    pub(crate) async fn data(&self, token: Option<&str>, query: &str, vars: Value) -> Value {
        graphql_data(&self.client, &self.server, token, query, vars).await
    }

    /// A new discussion's id.
    pub(crate) async fn discussion(&self, token: &str) -> String {
        let data = self.data(Some(token), CREATE, json!({ "t": "bans" })).await;
        data["createDiscussion"]["id"].as_str().unwrap().to_owned()
    }

    /// Posts a comment; the whole response.
    pub(crate) async fn post(&self, token: &str, d: &str, text: &str) -> Value {
        self.send(Some(token), POST, json!({ "d": d, "t": text }))
            .await
    }

    /// The database commands this server has sent so far, by name.
    pub(crate) fn commands(&self) -> BTreeMap<String, u64> {
        self.server.store.commands().snapshot()
    }
}

/// The posted comment's slug, failing on any error.
fn posted_slug(response: &Value) -> String {
    assert!(response.get("errors").is_none(), "{response:#}");
    response["data"]["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A time the API wrote.
fn time(value: &Value) -> chrono::DateTime<Utc> {
    value
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {value}"))
}

/// A time `secs` from now, to the second, as the API writes it.
fn in_secs(secs: i64) -> String {
    let at = Utc::now() + chrono::Duration::seconds(secs);
    let whole = at - chrono::Duration::nanoseconds(i64::from(at.timestamp_subsec_nanos()));
    whole.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mutation_of_a_banned_user_is_forbidden_until_the_ban_is_lifted() {
    let site = Site::start("bans_every").await;
    let moderator = moderator_token("mod", "Mo");
    let troll = token("troll", "Troll");
    let d = site.discussion(&troll).await;
    let c = posted_slug(&site.post(&troll, &d, "before the ban").await);

    let data = site
        .data(
            Some(&moderator),
            BAN,
            json!({ "u": "troll", "r": "spam\r\nagain" }),
        )
        .await;
    let ban = &data["banUser"];
    assert_eq!(ban["userId"], "troll");
    assert_eq!(ban["until"], Value::Null);
    assert_eq!(ban["reason"], "spam\nagain");
    assert_eq!(ban["by"], json!({ "id": "mod", "name": "Mo" }));
    assert!(time(&ban["at"]) <= Utc::now(), "{ban}");

    // Every mutation the schema has, with arguments it would otherwise accept.
    let attempts: BTreeMap<&str, (&str, Value)> = BTreeMap::from([
        ("createDiscussion", ("mutation { createDiscussion(input: {title: \"again\"}) { id } }", json!({}))),
        ("ensureDiscussion", ("mutation { ensureDiscussion(input: {key: \"k\", title: \"again\"}) { id } }", json!({}))),
        ("postComment", (POST, json!({ "d": d, "t": "after the ban" }))),
        ("editComment", ("mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: \"edited\"}) { slug } }", json!({ "d": d, "s": c }))),
        ("deleteComment", ("mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }", json!({ "d": d, "s": c }))),
        ("lockDiscussion", ("mutation($d: ID!) { lockDiscussion(id: $d, locked: true) { id } }", json!({ "d": d }))),
        ("setModeration", ("mutation($d: ID!) { setModeration(id: $d, mode: PRE) { id } }", json!({ "d": d }))),
        ("approveComment", ("mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug } }", json!({ "d": d, "s": c }))),
        ("rejectComment", ("mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s) { slug } }", json!({ "d": d, "s": c }))),
        ("reportComment", ("mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }", json!({ "d": d, "s": c }))),
        ("pinComment", ("mutation($d: ID!, $s: String!) { pinComment(discussionId: $d, slug: $s, pinned: true) { slug } }", json!({ "d": d, "s": c }))),
        ("voteComment", ("mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: UP) { slug } }", json!({ "d": d, "s": c }))),
        ("migrateDiscussion", ("mutation($d: ID!) { migrateDiscussion(id: $d, layout: BUCKETED) { id } }", json!({ "d": d }))),
        ("banUser", (BAN, json!({ "u": "someone" }))),
        ("unbanUser", (UNBAN, json!({ "u": "troll" }))),
        ("updateDiscussion", ("mutation($d: ID!) { updateDiscussion(id: $d, title: \"renamed\") { id } }", json!({ "d": d }))),
        ("reserveName", ("mutation { reserveName(name: \"Editor\") { name } }", json!({}))),
        ("releaseName", ("mutation { releaseName(name: \"Editor\") }", json!({}))),
        ("createWebhookEndpoint", ("mutation { createWebhookEndpoint(input: {url: \"https://example.com/\"}) { secret } }", json!({}))),
        ("updateWebhookEndpoint", ("mutation { updateWebhookEndpoint(id: \"ep_1\", input: {enabled: false}) { id } }", json!({}))),
        ("deleteWebhookEndpoint", ("mutation { deleteWebhookEndpoint(id: \"ep_1\") }", json!({}))),
        ("rotateWebhookSecret", ("mutation { rotateWebhookSecret(id: \"ep_1\") }", json!({}))),
        ("redeliverWebhook", ("mutation { redeliverWebhook(deliveryId: \"x\") { id } }", json!({}))),
        ("setGuestPolicy", ("mutation($d: ID!) { setGuestPolicy(id: $d, policy: POST) { id } }", json!({ "d": d }))),
        ("banNetwork", ("mutation { banNetwork(cidr: \"203.0.113.0/24\") { cidr } }", json!({}))),
        ("unbanNetwork", ("mutation { unbanNetwork(cidr: \"203.0.113.0/24\") }", json!({}))),
        ("setDiscussionClosing", ("mutation($d: ID!) { setDiscussionClosing(id: $d) { id } }", json!({ "d": d }))),
        ("eraseUser", ("mutation { eraseUser(userId: \"someone\") }", json!({}))),
    ]);
    // A person's own inbox, settings and ignore list: a ban stops none of them (a banned person
    // may still read and silence what they are told).
    let own: BTreeMap<&str, (&str, Value)> = BTreeMap::from([
        (
            "markNotificationsRead",
            ("mutation { markNotificationsRead }", json!({})),
        ),
        (
            "followDiscussion",
            (
                "mutation($d: ID!) { followDiscussion(discussionId: $d, follow: false) { id } }",
                json!({ "d": d }),
            ),
        ),
        (
            "ignoreUser",
            (
                "mutation { ignoreUser(userId: \"someone\", ignored: true) }",
                json!({}),
            ),
        ),
        (
            "setNotificationSettings",
            (
                "mutation { setNotificationSettings(input: {onFollowed: false}) { onFollowed } }",
                json!({}),
            ),
        ),
    ]);
    let schema = site
        .data(
            None,
            "{ __type(name: \"Mutation\") { fields { name } } }",
            json!({}),
        )
        .await;
    let fields: Vec<&str> = schema["__type"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(fields.len(), attempts.len() + own.len() + 1, "{fields:?}");
    for field in fields {
        // A banned person may still have their data erased: the ban is not what refuses this
        // one (a confirmation that is not their id is), and nothing is erased.
        if field == "deleteMyAccount" {
            let query = "mutation { deleteMyAccount(confirm: \"not-me\") }";
            let response = site.send(Some(&troll), query, json!({})).await;
            assert_eq!(error_code(&response), "BAD_USER_INPUT", "{response:#}");
            continue;
        }
        if let Some((query, vars)) = own.get(field) {
            let response = site.send(Some(&troll), query, vars.clone()).await;
            assert!(response.get("errors").is_none(), "{field}: {response:#}");
            continue;
        }
        let (query, vars) = attempts
            .get(field)
            .unwrap_or_else(|| panic!("mutation {field} is new: add it to this test"));
        let response = site.send(Some(&troll), query, vars.clone()).await;
        assert_eq!(error_code(&response), "FORBIDDEN", "{field}: {response:#}");
        let said = error_message(&response);
        assert!(
            said.contains("banned permanently (reason: spam\nagain)"),
            "{field}: {said}"
        );
        assert_eq!(response["data"][field], Value::Null, "{field}");
    }
    // Nothing was written: the comment is as it was, the discussion open and in its layout.
    let read = site
        .data(
            None,
            "query($d: ID!, $s: String!) { discussion(id: $d) { locked layout commentCount pinnedComments { slug } } comment(discussionId: $d, slug: $s) { text deleted } }",
            json!({ "d": d, "s": c }),
        )
        .await;
    assert_eq!(
        read,
        json!({
            "discussion": { "locked": false, "layout": "PER_COMMENT", "commentCount": 1, "pinnedComments": [] },
            "comment": { "text": "before the ban", "deleted": false },
        })
    );

    // Others, moderators included, go on.
    posted_slug(&site.post(&token("ada", "Ada"), &d, "hello").await);
    posted_slug(&site.post(&moderator, &d, "moderating").await);

    // Lifted: the user posts again; lifting again says there was nothing to lift.
    let data = site
        .data(Some(&moderator), UNBAN, json!({ "u": "troll" }))
        .await;
    assert_eq!(data["unbanUser"], true);
    posted_slug(&site.post(&troll, &d, "back").await);
    let data = site
        .data(Some(&moderator), UNBAN, json!({ "u": "troll" }))
        .await;
    assert_eq!(data["unbanUser"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_ends_when_its_time_comes_and_banning_again_replaces_it() {
    let site = Site::start("bans_until").await;
    let moderator = moderator_token("mod", "Mo");
    let troll = token("troll", "Troll");
    let d = site.discussion(&moderator).await;

    let hour = in_secs(3600);
    let data = site
        .data(
            Some(&moderator),
            BAN,
            json!({ "u": "troll", "until": hour, "r": "first" }),
        )
        .await;
    assert_eq!(time(&data["banUser"]["until"]), time(&json!(hour)));
    let refused = site.post(&troll, &d, "no").await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    assert!(
        error_message(&refused).contains(&format!("banned until {hour} (reason: first)")),
        "{refused:#}"
    );

    // Banning again replaces the ban: a new end, no reason.
    let soon = in_secs(3);
    let data = site
        .data(
            Some(&moderator),
            BAN,
            json!({ "u": "troll", "until": soon }),
        )
        .await;
    assert_eq!(time(&data["banUser"]["until"]), time(&json!(soon)));
    assert_eq!(data["banUser"]["reason"], Value::Null);
    let refused = site.post(&troll, &d, "no").await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    let said = error_message(&refused);
    assert!(said.contains(&format!("banned until {soon}:")), "{said}");
    assert!(!said.contains("reason"), "{said}");

    // Once its end has passed, the ban no longer applies (nothing removes it).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let response = site.post(&troll, &d, "after the end").await;
        if response.get("errors").is_none() {
            break;
        }
        assert_eq!(error_code(&response), "FORBIDDEN", "{response:#}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ban never ended: {response:#}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // An ended ban is not one to lift.
    let data = site
        .data(Some(&moderator), UNBAN, json!({ "u": "troll" }))
        .await;
    assert_eq!(data["unbanUser"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_moderators_ban_and_bad_input_is_refused() {
    let site = Site::start("bans_inputs").await;
    let moderator = moderator_token("mod", "Mo");
    let user = token("ada", "Ada");

    for (query, vars) in [
        (BAN, json!({ "u": "troll" })),
        (UNBAN, json!({ "u": "troll" })),
    ] {
        let r = site.send(None, query, vars.clone()).await;
        assert_eq!(error_code(&r), "UNAUTHENTICATED", "{r:#}");
        let r = site.send(Some("not-a-token"), query, vars.clone()).await;
        assert_eq!(error_code(&r), "UNAUTHENTICATED", "{r:#}");
        let r = site.send(Some(&user), query, vars).await;
        assert_eq!(error_code(&r), "FORBIDDEN", "{r:#}");
    }

    // A second moderator who has acted (any mutation) is known as one.
    let other = moderator_token("mod2", "Mia");
    site.discussion(&other).await;

    let long_id = "x".repeat(257);
    let long_reason = "r".repeat(501);
    let cases: Vec<(&str, Value, &str)> = vec![
        (BAN, json!({ "u": "" }), "user id"),
        (BAN, json!({ "u": "   " }), "user id"),
        (BAN, json!({ "u": long_id }), "at most 256"),
        (BAN, json!({ "u": "a\u{0}b" }), "control"),
        (
            BAN,
            json!({ "u": "troll", "r": long_reason }),
            "at most 500",
        ),
        (BAN, json!({ "u": "troll", "r": " \n\t" }), "blank"),
        (
            BAN,
            json!({ "u": "troll", "r": "\u{1b}[31mred" }),
            "control",
        ),
        (
            BAN,
            json!({ "u": "troll", "until": in_secs(-60) }),
            "not in the future",
        ),
        (BAN, json!({ "u": "troll", "until": "tomorrow" }), ""),
        (BAN, json!({ "u": "troll", "until": 1_700_000_000 }), ""),
        (BAN, json!({ "u": "mod2" }), "moderators cannot be banned"),
        (BAN, json!({ "u": "mod" }), "moderators cannot be banned"),
        (BAN, json!({}), ""),
        (UNBAN, json!({ "u": "" }), "user id"),
        (UNBAN, json!({ "u": long_id }), "at most 256"),
    ];
    for (query, vars, says) in cases {
        let r = site.send(Some(&moderator), query, vars.clone()).await;
        assert_eq!(error_code(&r), "BAD_USER_INPUT", "{vars}: {r:#}");
        assert!(error_message(&r).contains(says), "{vars}: {r:#}");
    }
    // None of them banned anyone or wrote to the log.
    let log = site
        .data(
            Some(&moderator),
            "{ moderationLog(first: 10) { nodes { action } } }",
            json!({}),
        )
        .await;
    assert_eq!(log["moderationLog"]["nodes"], json!([]));
    posted_slug(
        &site
            .post(
                &token("troll", "Troll"),
                &site.discussion(&user).await,
                "free",
            )
            .await,
    );

    // Ids are opaque: one no token has carried may be banned, the longest allowed too.
    let longest = "y".repeat(256);
    for id in [
        "never-seen",
        "auth0|5f7c8ec7c33c6c004bbafe82",
        longest.as_str(),
    ] {
        let data = site.data(Some(&moderator), BAN, json!({ "u": id })).await;
        assert_eq!(data["banUser"]["userId"], id);
    }
    // A moderator's token is never held back by a ban made before they acted as one; once
    // they have, they cannot be banned.
    let data = site
        .data(Some(&moderator), BAN, json!({ "u": "rising" }))
        .await;
    assert_eq!(data["banUser"]["userId"], "rising");
    let rising = moderator_token("rising", "Rai");
    let d = site.discussion(&rising).await;
    posted_slug(&site.post(&rising, &d, "a moderator now").await);
    let r = site
        .send(Some(&moderator), BAN, json!({ "u": "rising" }))
        .await;
    assert_eq!(error_code(&r), "BAD_USER_INPUT", "{r:#}");
    // The same id without the role is still banned.
    let r = site.post(&token("rising", "Rai"), &d, "as a user").await;
    assert_eq!(error_code(&r), "FORBIDDEN", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_check_costs_a_post_at_most_one_command() {
    // Without the read cache no change feed reads beside the posts: every command counted
    // below is theirs.
    let mut config = server_config("bans_cost");
    config.cache_bytes = 0;
    let site = Site::on(config).await;
    let warm = token("warm", "Warm");
    let d = site.discussion(&warm).await;
    for i in 0..3 {
        posted_slug(&site.post(&warm, &d, &format!("warming {i}")).await);
    }
    let cost = |who: String, text: &'static str| {
        let (site, d) = (&site, &d);
        async move {
            let before = site.commands();
            posted_slug(&site.post(&who, d, text).await);
            diff(&before, &site.commands())
        }
    };
    let base = cost(warm.clone(), "base").await;
    let user = token("newcomer", "New");
    let first = cost(user.clone(), "first").await;
    let second = cost(user, "second").await;
    let again = cost(warm.clone(), "base again").await;
    assert_eq!(base, again, "a post costs the same each time here");
    let mut plus_find = base.clone();
    *plus_find.entry("find".to_owned()).or_default() += 1;
    assert_eq!(
        first, plus_find,
        "a user's first post reads their ban state once"
    );
    assert_eq!(second, base, "then, for 5 s, it costs nothing");

    // A moderator's first mutation records them (one write); later ones cost nothing more.
    let moderator = moderator_token("mod", "Mo");
    let first = cost(moderator.clone(), "moderating").await;
    let second = cost(moderator, "moderating again").await;
    let mut plus_update = base.clone();
    *plus_update.entry("update".to_owned()).or_default() += 1;
    assert_eq!(first, plus_update);
    assert_eq!(second, base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_made_through_one_server_applies_on_another() {
    let config = server_config("bans_two_servers");
    let a = Site::on(config.clone()).await;
    let b = Site::on(config).await;
    let moderator = moderator_token("mod", "Mo");
    let troll = token("troll", "Troll");
    let d = a.discussion(&moderator).await;
    // Both servers have read that the user is not banned.
    posted_slug(&a.post(&troll, &d, "on a").await);
    posted_slug(&b.post(&troll, &d, "on b").await);

    a.data(Some(&moderator), BAN, json!({ "u": "troll", "r": "spam" }))
        .await;
    // The server that banned knows at once.
    let r = a.post(&troll, &d, "on a again").await;
    assert_eq!(error_code(&r), "FORBIDDEN", "{r:#}");
    // The other within its 5 s (polled with a generous deadline).
    let refused = resend_until(
        || b.post(&troll, &d, "on b again"),
        |r| r.get("errors").is_some(),
    )
    .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    assert!(error_message(&refused).contains("banned permanently (reason: spam)"));

    // Lifting works the same way.
    let data = a
        .data(Some(&moderator), UNBAN, json!({ "u": "troll" }))
        .await;
    assert_eq!(data["unbanUser"], true);
    posted_slug(&a.post(&troll, &d, "a: free").await);
    let posted = resend_until(
        || b.post(&troll, &d, "b: free"),
        |r| r.get("errors").is_none(),
    )
    .await;
    posted_slug(&posted);
}

/// Sends a request until its response is `done` (every 200 ms, for at most 30 s).
async fn resend_until<F, Fut>(send: F, done: impl Fn(&Value) -> bool) -> Value
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = send().await;
        if done(&response) {
            return response;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still not changed: {response:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_banned_user_hears_of_the_ban_before_the_rate_limit() {
    let mut config = server_config("bans_rate");
    config.rate_limit = threadql::config::RateLimit::Every {
        count: 2,
        per: Duration::from_secs(3600),
    };
    let site = Site::on(config).await;
    let moderator = moderator_token("mod", "Mo");
    let troll = token("troll", "Troll");
    let d = site.discussion(&moderator).await;
    posted_slug(&site.post(&troll, &d, "one").await);
    posted_slug(&site.post(&troll, &d, "two").await);
    let limited = site.post(&troll, &d, "three").await;
    assert_eq!(error_code(&limited), "RATE_LIMITED", "{limited:#}");
    site.data(Some(&moderator), BAN, json!({ "u": "troll" }))
        .await;
    for _ in 0..3 {
        let refused = site.post(&troll, &d, "banned").await;
        assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    }
}
