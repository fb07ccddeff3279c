//! Moderation: how each discussion moderates (`setModeration`, `Discussion.moderation`, the
//! server's default), on every layout and across moves.

use serde_json::json;
use threadql::app::App;
use threadql::config::ModerationArg;
use threadql::domain::Layout;

use crate::support::{error_code, layout_name, unique_db, Settings, TestApp};

const SET: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { id moderation } }";
const READ: &str = "query($d: ID!) { discussion(id: $d) { moderation } }";

/// The contract case: a discussion follows the server's default until a moderator sets its
/// mode, which every read then shows and every move keeps.
pub(crate) async fn moderation_modes_are_kept_everywhere_case(settings: Settings) {
    let layout = settings.layout;
    let app = TestApp::with("moderation_modes", settings).await;
    let d = app.discussion("moderated").await;
    app.post(&d, None, "before").await;
    assert_eq!(
        app.ok(READ, json!({ "d": d })).await["discussion"]["moderation"],
        "POST",
        "the default"
    );
    let moderator = app.moderator_token("m", "Mo");
    for mode in ["PRE", "PRE_FIRST", "PRE", "POST", "PRE_FIRST"] {
        let set = app
            .exec_as(Some(&moderator), SET, json!({ "d": d, "m": mode }))
            .await;
        assert_eq!(
            set["data"]["setModeration"],
            json!({ "id": d, "moderation": mode }),
            "{set:#}"
        );
        // Set again: nothing changes.
        let again = app
            .exec_as(Some(&moderator), SET, json!({ "d": d, "m": mode }))
            .await;
        assert_eq!(again["data"]["setModeration"]["moderation"], mode);
        let read = app
            .ok(
                "query($d: ID!) { discussion(id: $d) { moderation commentCount } discussions { nodes { id moderation } } }",
                json!({ "d": d }),
            )
            .await;
        assert_eq!(
            read["discussion"],
            json!({ "moderation": mode, "commentCount": 1 })
        );
        assert_eq!(
            read["discussions"]["nodes"],
            json!([{ "id": d, "moderation": mode }])
        );
    }

    // Moves keep it: to the other layouts and back.
    let mut route: Vec<Layout> = Layout::ALL.into_iter().filter(|l| *l != layout).collect();
    route.push(layout);
    for to in route {
        let moved = app
            .exec_as(
                Some(&moderator),
                "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout moderation commentCount } }",
                json!({ "d": d, "l": layout_name(to) }),
            )
            .await;
        assert_eq!(
            moved["data"]["migrateDiscussion"],
            json!({ "layout": layout_name(to), "moderation": "PRE_FIRST", "commentCount": 1 }),
            "{moved:#}"
        );
    }
}

/// Only moderators set a mode; bad ids and unknown modes are refused, and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_moderators_set_a_mode_and_bad_inputs_are_refused() {
    let app = TestApp::new("moderation_refused", Layout::PerComment).await;
    let d = app.discussion("refusals").await;
    let author = app.token("u2", "Lin");
    let refused = app
        .exec_as(Some(&author), SET, json!({ "d": d, "m": "PRE" }))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    assert_eq!(refused["data"]["setModeration"], json!(null));
    let anonymous = app.exec_as(None, SET, json!({ "d": d, "m": "PRE" })).await;
    assert_eq!(error_code(&anonymous), "UNAUTHENTICATED", "{anonymous:#}");

    let moderator = app.moderator_token("m", "Mo");
    let cases = [
        (
            json!({ "d": "0123456789abcdef01234567", "m": "PRE" }),
            "NOT_FOUND",
        ),
        (json!({ "d": "not an id", "m": "PRE" }), "BAD_USER_INPUT"),
        (json!({ "d": "", "m": "PRE" }), "BAD_USER_INPUT"),
        (json!({ "d": d, "m": "PREMODERATION" }), "BAD_USER_INPUT"),
        (json!({ "d": d, "m": "pre" }), "BAD_USER_INPUT"),
        (json!({ "d": d, "m": null }), "BAD_USER_INPUT"),
        (json!({ "d": d, "m": 1 }), "BAD_USER_INPUT"),
    ];
    for (variables, code) in cases {
        let response = app.exec_as(Some(&moderator), SET, variables.clone()).await;
        assert_eq!(error_code(&response), code, "{variables}: {response:#}");
    }
    assert_eq!(
        app.ok(READ, json!({ "d": d })).await["discussion"]["moderation"],
        "POST",
        "nothing was set"
    );
}

/// `THREADQL_MODERATION` is the mode of every discussion no moderator set, including those
/// created before the server started with it; a discussion whose mode was set keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_default_applies_until_a_mode_is_set() {
    let settings = Settings::new(Layout::Bucketed);
    let database = unique_db("moderation_default");
    let first = App::build(&settings.config(&database)).await.unwrap();
    let first = TestApp::from_app(first, database.clone(), Settings::new(Layout::Bucketed));
    let plain = first.discussion("plain").await;
    let set = first.discussion("set").await;
    let moderator = first.moderator_token("m", "Mo");
    let response = first
        .exec_as(Some(&moderator), SET, json!({ "d": set, "m": "POST" }))
        .await;
    assert_eq!(response["data"]["setModeration"]["moderation"], "POST");

    let mut config = settings.config(&database);
    config.moderation = ModerationArg::PreFirst;
    let second = App::build(&config).await.unwrap();
    let second = TestApp::from_app(second, database, settings);
    let read = second
        .ok(
            "query($p: ID!, $s: ID!) { plain: discussion(id: $p) { moderation } set: discussion(id: $s) { moderation } }",
            json!({ "p": plain, "s": set }),
        )
        .await;
    assert_eq!(read["plain"]["moderation"], "PRE_FIRST");
    assert_eq!(read["set"]["moderation"], "POST");
    let fresh = second.discussion("fresh").await;
    assert_eq!(
        second.ok(READ, json!({ "d": fresh })).await["discussion"]["moderation"],
        "PRE_FIRST"
    );
}
