//! Auto-close on every layout: a discussion takes new comments, replies, edits and votes until
//! `closesAt` (a moderator's `setDiscussionClosing`, else `THREADQL_AUTO_CLOSE_AFTER` after its
//! creation) and refuses them from that instant on, but for moderators; decided with the
//! services' clock set at the boundary, on what the change read anyway (no command more); a post
//! decided under an older closing is never stored under a newer one; bad inputs.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};
use threadql::app::App;
use threadql::config::AutoClose;
use threadql::domain::{Closing, Event, Layout, Micros};

use crate::support::{error_code, error_message, unique_db, Settings, TestApp};

/// The server's default in these tests.
const THIRTY_DAYS: Duration = Duration::from_secs(30 * 86_400);

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug } }";
const VOTE: &str = "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: UP) { slug } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }";
const CLOSE_AT: &str = "mutation($d: ID!, $at: DateTime) { setDiscussionClosing(id: $d, closesAt: $at) { id closesAt } }";
const CLOSE_DEFAULT: &str =
    "mutation($d: ID!) { setDiscussionClosing(id: $d, useDefault: true) { id closesAt } }";
const CLOSING: &str = "query($d: ID!) { discussion(id: $d) { createdAt closesAt commentCount } }";

/// An app whose discussions close `after` their creation (`None`: never), and its database.
async fn closing_app(label: &str, layout: Layout, after: Option<Duration>) -> TestApp {
    let settings = Settings::new(layout);
    let database = unique_db(label);
    let mut config = settings.config(&database);
    config.auto_close_after = AutoClose(after);
    let app = App::build(&config).await.expect("build the app");
    TestApp::from_app(app, database, settings)
}

/// Another process over the same database (auto-close off).
async fn second_process(app: &TestApp) -> TestApp {
    let config = app.settings.config(&app.database);
    let second = App::build(&config).await.expect("build a second app");
    TestApp::from_app(second, app.database.clone(), app.settings.clone())
}

fn ok(response: &Value) -> bool {
    response
        .get("errors")
        .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty()))
}

fn micros_of(value: &Value) -> Micros {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a DateTime: {value}"));
    let at = DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    Micros(at.timestamp_micros())
}

fn date_of(at: Micros) -> String {
    at.to_datetime()
        .to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// What a closed discussion answers.
fn closed_on(at: Micros) -> String {
    format!("this discussion closed on {}", date_of(at))
}

/// The people of these tests and their tokens.
struct Closers {
    ada: String,
    grace: String,
    moderator: String,
}

impl Closers {
    fn of(app: &TestApp) -> Self {
        Self {
            ada: app.token("ada", "Ada"),
            grace: app.token("grace", "Grace"),
            moderator: app.moderator_token("mod", "Mo"),
        }
    }
}

/// The discussion's `createdAt`, `closesAt` and `commentCount`.
async fn closing_of(app: &TestApp, d: &str) -> Value {
    app.ok(CLOSING, json!({ "d": d })).await["discussion"].clone()
}

async fn posted_before_closing(
    app: &TestApp,
    token: &str,
    d: &str,
    parent: Option<&str>,
    text: &str,
) -> String {
    let response = app
        .exec_as(Some(token), POST, json!({ "d": d, "p": parent, "t": text }))
        .await;
    assert!(ok(&response), "post {text:?}: {response:#}");
    response["data"]["postComment"]["slug"]
        .as_str()
        .expect("a slug")
        .to_owned()
}

/// The changes a closed discussion refuses, by name, as (query, variables) in discussion `d`
/// with `top` a comment of the one who changes and `other` someone else's.
fn changes(d: &str, top: &str, other: &str, n: usize) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("post", POST, json!({ "d": d, "t": format!("post {n}") })),
        (
            "reply",
            POST,
            json!({ "d": d, "p": other, "t": format!("reply {n}") }),
        ),
        (
            "edit",
            EDIT,
            json!({ "d": d, "s": top, "t": format!("edit {n}") }),
        ),
        ("vote", VOTE, json!({ "d": d, "s": other })),
    ]
}

async fn closes_at_its_time_case(layout: Layout) {
    let app = closing_app("ac_boundary", layout, Some(THIRTY_DAYS)).await;
    let plain = closing_app("ac_plain", layout, None).await;
    let clock = app.api.services().clock().clone();
    let mut events = app.api.events();
    // The same discussion, comments and changes in both apps: one closes, one never does.
    let mut at = Vec::new();
    for app in [&app, &plain] {
        let people = Closers::of(app);
        let d = app.discussion("closing").await;
        let top = posted_before_closing(app, &people.ada, &d, None, "Ada's").await;
        let other = posted_before_closing(app, &people.grace, &d, None, "Grace's").await;
        at.push((d, top, other, people));
    }
    let (d, top, other, people) = &at[0];
    let shown = closing_of(&app, d).await;
    let created = micros_of(&shown["createdAt"]);
    let closes = micros_of(&shown["closesAt"]);
    assert_eq!(closes.0 - created.0, 30 * 86_400 * 1_000_000, "{shown}");
    assert_eq!(closing_of(&plain, &at[1].0).await["closesAt"], Value::Null);

    // A microsecond before: every change works, with the commands it has without auto-close.
    clock.set(Some(Micros(closes.0 - 1)));
    for (n, ((name, query, vars), (_, _, plain_vars))) in changes(d, top, other, 1)
        .into_iter()
        .zip(changes(&at[1].0, &at[1].1, &at[1].2, 1))
        .enumerate()
    {
        let before = app.commands();
        let response = app.exec_as(Some(&people.ada), query, vars).await;
        let spent = app.commands() - before;
        assert!(ok(&response), "{name} before closesAt: {response:#}");
        let before = plain.commands();
        let response = plain.exec_as(Some(&at[1].3.ada), query, plain_vars).await;
        let without = plain.commands() - before;
        assert!(ok(&response), "{name} without auto-close: {response:#}");
        assert_eq!(spent, without, "{name} ({n}): the check costs no command");
    }
    let count = closing_of(&app, d).await["commentCount"].clone();

    // At closesAt and after: refused, with the date; nothing is stored.
    for now in [closes, Micros(closes.0 + 86_400_000_000)] {
        clock.set(Some(now));
        for (name, query, vars) in changes(d, top, other, 2) {
            let response = app.exec_as(Some(&people.ada), query, vars).await;
            assert_eq!(
                error_code(&response),
                "FORBIDDEN",
                "{name} at {}: {response:#}",
                date_of(now)
            );
            assert_eq!(error_message(&response), closed_on(closes), "{name}");
        }
    }
    let read = |slug: &str| {
        let (d, slug) = (d.clone(), slug.to_owned());
        let app = &app;
        async move {
            let q = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { text } }";
            app.ok(q, json!({ "d": d, "s": slug })).await["comment"]["text"].clone()
        }
    };
    assert_eq!(
        read(top).await,
        json!("edit 1"),
        "the refused edit changed nothing"
    );
    assert_eq!(closing_of(&app, d).await["commentCount"], count);

    // Moderators still act; anyone may still delete their own comment.
    for (name, query, vars) in changes(d, top, other, 3) {
        let response = app.exec_as(Some(&people.moderator), query, vars).await;
        assert!(
            ok(&response),
            "a moderator's {name} once closed: {response:#}"
        );
    }
    assert_eq!(read(top).await, json!("edit 3"));
    let mine = posted_before_closing(&app, &people.moderator, d, None, "the moderator's").await;
    let response = app
        .exec_as(Some(&people.ada), DELETE, json!({ "d": d, "s": top }))
        .await;
    assert!(
        ok(&response),
        "Ada deletes her comment once closed: {response:#}"
    );

    // A moderator's date: open until then, closed from then.
    let later = Micros(closes.0 + 10 * 86_400_000_000);
    let set = app
        .ok_as(
            Some(&people.moderator),
            CLOSE_AT,
            json!({ "d": d, "at": date_of(later) }),
        )
        .await;
    assert_eq!(micros_of(&set["setDiscussionClosing"]["closesAt"]), later);
    assert_eq!(micros_of(&closing_of(&app, d).await["closesAt"]), later);
    clock.set(Some(Micros(later.0 - 1)));
    // Grace edits her own comment, replies to and votes on the moderator's.
    for (name, query, vars) in changes(d, other, &mine, 4) {
        let response = app.exec_as(Some(&people.grace), query, vars).await;
        assert!(
            ok(&response),
            "{name} before the moderator's date: {response:#}"
        );
    }
    clock.set(Some(later));
    let response = app
        .exec_as(
            Some(&people.grace),
            POST,
            json!({ "d": d, "t": "at the date" }),
        )
        .await;
    assert_eq!(error_message(&response), closed_on(later), "{response:#}");

    // Null: never, whatever the time.
    let set = app
        .ok_as(
            Some(&people.moderator),
            CLOSE_AT,
            json!({ "d": d, "at": null }),
        )
        .await;
    assert_eq!(set["setDiscussionClosing"]["closesAt"], Value::Null);
    clock.set(Some(Micros(later.0 + 3_650 * 86_400_000_000)));
    posted_before_closing(&app, &people.grace, d, None, "ten years on").await;

    // Back to the server's default: closed again.
    let set = app
        .ok_as(Some(&people.moderator), CLOSE_DEFAULT, json!({ "d": d }))
        .await;
    assert_eq!(micros_of(&set["setDiscussionClosing"]["closesAt"]), closes);
    let response = app
        .exec_as(
            Some(&people.grace),
            POST,
            json!({ "d": d, "t": "too late" }),
        )
        .await;
    assert_eq!(error_message(&response), closed_on(closes), "{response:#}");
    clock.set(None);

    // Each setting is an event and a moderation log entry, newest first.
    let mut closings = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let Event::ClosingChanged { closing, acted, .. } = event.as_ref() {
            assert!(acted.moderator && acted.by.id == "mod", "{event:?}");
            closings.push(*closing);
        }
    }
    assert_eq!(
        closings,
        [Some(Closing::At(later)), Some(Closing::Never), None]
    );
    let log = app
        .ok_as(
            Some(&people.moderator),
            "{ moderationLog(first: 10, action: SET_CLOSING) { nodes { action discussionId detail moderator { id } } } }",
            json!({}),
        )
        .await;
    let details: Vec<&Value> = log["moderationLog"]["nodes"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| {
            assert_eq!(entry["discussionId"], json!(d), "{entry}");
            assert_eq!(entry["moderator"]["id"], "mod", "{entry}");
            &entry["detail"]
        })
        .collect();
    assert_eq!(
        details,
        [&json!("default"), &json!("never"), &json!(date_of(later))]
    );
}

/// Another process posts from its kept copy of the discussion, made before a moderator closed
/// it: the post's write refuses it (the closing is guarded like the moderation mode), so it is
/// never stored.
async fn a_post_decided_under_an_older_closing_is_not_stored_case(layout: Layout) {
    let app = closing_app("ac_guard", layout, None).await;
    let other = second_process(&app).await;
    let people = Closers::of(&app);
    let d = app.discussion("guarded").await;
    posted_before_closing(&other, &people.ada, &d, None, "kept by the second process").await;
    posted_before_closing(&other, &people.ada, &d, None, "posted from what it kept").await;
    let past = Micros(Utc::now().timestamp_micros() - 1_000_000);
    app.ok_as(
        Some(&people.moderator),
        CLOSE_AT,
        json!({ "d": d, "at": date_of(past) }),
    )
    .await;
    let response = other
        .exec_as(
            Some(&people.ada),
            POST,
            json!({ "d": d, "t": "decided before" }),
        )
        .await;
    match error_code(&response).as_str() {
        "FORBIDDEN" => assert_eq!(error_message(&response), closed_on(past)),
        "CONFLICT" => {
            assert!(
                error_message(&response).contains("changed when it closes"),
                "{response:#}"
            );
            let again = other
                .exec_as(
                    Some(&people.ada),
                    POST,
                    json!({ "d": d, "t": "sent again" }),
                )
                .await;
            assert_eq!(error_message(&again), closed_on(past), "{again:#}");
        }
        _ => panic!("a post decided before the closing: {response:#}"),
    }
    assert_eq!(closing_of(&app, &d).await["commentCount"], json!(2));
}

macro_rules! auto_close_suite {
    ($module:ident, $layout:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn closes_at_its_time() {
                closes_at_its_time_case($layout).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_post_decided_under_an_older_closing_is_not_stored() {
                a_post_decided_under_an_older_closing_is_not_stored_case($layout).await;
            }
        }
    };
}

auto_close_suite!(per_comment, Layout::PerComment);
auto_close_suite!(embedded, Layout::Embedded);
auto_close_suite!(bucketed, Layout::Bucketed);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setting_a_closing_refuses_bad_inputs() {
    let app = closing_app("ac_bad", Layout::PerComment, None).await;
    let people = Closers::of(&app);
    let d = app.discussion("bad inputs").await;
    let at = json!("2030-01-01T00:00:00Z");
    let cases: [(&str, Option<&str>, &str, Value, &str); 9] = [
        ("anonymous", None, CLOSE_AT, json!({ "d": d, "at": at }), "UNAUTHENTICATED"),
        ("a user", Some(&people.ada), CLOSE_AT, json!({ "d": d, "at": at }), "FORBIDDEN"),
        ("a user, to the default", Some(&people.ada), CLOSE_DEFAULT, json!({ "d": d }), "FORBIDDEN"),
        ("unknown discussion", Some(&people.moderator), CLOSE_AT, json!({ "d": "0123456789abcdef01234567", "at": at }), "NOT_FOUND"),
        ("malformed id", Some(&people.moderator), CLOSE_AT, json!({ "d": "{\"$gt\": \"\"}", "at": at }), "BAD_USER_INPUT"),
        ("not a date", Some(&people.moderator), CLOSE_AT, json!({ "d": d, "at": "next week" }), "BAD_USER_INPUT"),
        ("a number", Some(&people.moderator), CLOSE_AT, json!({ "d": d, "at": 1_900_000_000 }), "BAD_USER_INPUT"),
        ("a date without its zone", Some(&people.moderator), CLOSE_AT, json!({ "d": d, "at": "2030-01-01T00:00:00" }), "BAD_USER_INPUT"),
        (
            "a date and the default",
            Some(&people.moderator),
            "mutation($d: ID!, $at: DateTime) { setDiscussionClosing(id: $d, closesAt: $at, useDefault: true) { id } }",
            json!({ "d": d, "at": at }),
            "BAD_USER_INPUT",
        ),
    ];
    for (what, token, query, vars, code) in cases {
        let response = app.exec_as(token, query, vars).await;
        assert_eq!(error_code(&response), code, "{what}: {response:#}");
        assert!(!error_message(&response).is_empty(), "{what}");
    }
    assert_eq!(
        closing_of(&app, &d).await["closesAt"],
        Value::Null,
        "nothing was set"
    );
    let log = app
        .ok_as(
            Some(&people.moderator),
            "{ moderationLog(first: 10) { nodes { action } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        log["moderationLog"]["nodes"],
        json!([]),
        "nothing was logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_auto_close_setting_stops_the_start() {
    for bad in ["30", "30x", "0d", "-1d", "1.5d", "36501d"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
            .arg("print-schema")
            .env("THREADQL_AUTO_CLOSE_AFTER", bad)
            .output()
            .expect("run threadql");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{bad:?} started");
        assert!(
            said.contains("THREADQL_AUTO_CLOSE_AFTER") && said.contains("e.g. 30d"),
            "{bad:?}: {said}"
        );
        assert!(output.stdout.is_empty(), "{bad:?} printed a schema");
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
        .arg("print-schema")
        .env("THREADQL_AUTO_CLOSE_AFTER", "12h")
        .output()
        .expect("run threadql");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
