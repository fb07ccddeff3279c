//! Pinned comments on every layout: moderators only, in pin order, at most five (concurrent pins
//! included), idempotent, a deleted comment left out, one read for the whole list, kept by a move
//! to another layout.

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{cost, error_code, layout_name, TestApp};

const PIN: &str = "mutation($d: ID!, $s: String!, $p: Boolean!) { pinComment(discussionId: $d, slug: $s, pinned: $p) { slug pinned } }";
const PINNED: &str =
    "query($d: ID!) { discussion(id: $d) { pinnedComments { slug pinned text } } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";

/// The slugs of the discussion's pinned comments, in order.
async fn pinned(app: &TestApp, d: &str) -> Vec<String> {
    let data = app.ok(PINNED, json!({ "d": d })).await;
    data["discussion"]["pinnedComments"]
        .as_array()
        .expect("pinned comments")
        .iter()
        .map(|c| {
            assert_eq!(c["pinned"], true, "{c}");
            c["slug"].as_str().expect("slug").to_owned()
        })
        .collect()
}

/// The slugs at `at`, in that order.
fn slugs_at(slugs: &[String], at: &[usize]) -> Vec<String> {
    at.iter().map(|&i| slugs[i].clone()).collect()
}

async fn pin(app: &TestApp, token: &str, d: &str, slug: &str, on: bool) -> Value {
    app.exec_as(Some(token), PIN, json!({ "d": d, "s": slug, "p": on }))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moderators_pin_up_to_five_comments_in_order_on_every_layout() {
    for layout in [Layout::PerComment, Layout::Embedded, Layout::Bucketed] {
        let app = TestApp::new("pinning", layout).await;
        let moderator = app.moderator_token("mod", "Mo");
        let data = app
            .ok(
                "mutation { createDiscussion(input: {title: \"pins\"}) { id } }",
                json!({}),
            )
            .await;
        let d = data["createDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let mut slugs = Vec::new();
        for i in 0..4 {
            let data = app
                .ok(POST, json!({ "d": d, "t": format!("thread {i}") }))
                .await;
            let top = data["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned();
            let data = app
                .ok(POST, json!({ "d": d, "p": top, "t": format!("reply {i}") }))
                .await;
            slugs.push(top);
            slugs.push(
                data["postComment"]["slug"]
                    .as_str()
                    .expect("slug")
                    .to_owned(),
            );
        }
        assert!(pinned(&app, &d).await.is_empty(), "{layout:?}");

        // Only moderators.
        let author = app.token("u1", "Ada");
        let r = pin(&app, &author, &d, &slugs[0], true).await;
        assert_eq!(error_code(&r), "FORBIDDEN", "{layout:?}: {r:#}");
        let r = app
            .exec_as(None, PIN, json!({ "d": d, "s": slugs[0], "p": true }))
            .await;
        assert_eq!(error_code(&r), "UNAUTHENTICATED", "{layout:?}: {r:#}");

        // In pin order, a reply as well as a thread; pinning again changes nothing.
        for i in [2, 0, 5] {
            let r = pin(&app, &moderator, &d, &slugs[i], true).await;
            assert_eq!(r["data"]["pinComment"]["pinned"], true, "{layout:?}: {r:#}");
        }
        let r = pin(&app, &moderator, &d, &slugs[0], true).await;
        assert_eq!(r["data"]["pinComment"]["pinned"], true, "{layout:?}: {r:#}");
        assert_eq!(
            pinned(&app, &d).await,
            slugs_at(&slugs, &[2, 0, 5]),
            "{layout:?}"
        );
        let data = app
            .ok(
                "query($d: ID!, $s: String!) { discussion(id: $d) { comment(slug: $s) { pinned } } }",
                json!({ "d": d, "s": slugs[1] }),
            )
            .await;
        assert_eq!(data["discussion"]["comment"]["pinned"], false, "{layout:?}");

        // At most five; unpinning makes room, and a new pin goes last.
        for i in [6, 7] {
            pin(&app, &moderator, &d, &slugs[i], true).await;
        }
        let r = pin(&app, &moderator, &d, &slugs[1], true).await;
        assert_eq!(error_code(&r), "BAD_USER_INPUT", "{layout:?}: {r:#}");
        let r = pin(&app, &moderator, &d, &slugs[2], false).await;
        assert_eq!(
            r["data"]["pinComment"]["pinned"], false,
            "{layout:?}: {r:#}"
        );
        let r = pin(&app, &moderator, &d, &slugs[2], false).await;
        assert_eq!(
            r["data"]["pinComment"]["pinned"], false,
            "{layout:?}: {r:#}"
        );
        pin(&app, &moderator, &d, &slugs[1], true).await;
        assert_eq!(
            pinned(&app, &d).await,
            slugs_at(&slugs, &[0, 5, 6, 7, 1]),
            "{layout:?}"
        );

        // The whole list is one read of the pinned comments (after the discussion's).
        let (_, spent) = cost(&app, PINNED, json!({ "d": d })).await;
        assert_eq!(spent.values().sum::<u64>(), 2, "{layout:?}: {spent:?}");

        // Bad slugs and discussions.
        let r = pin(&app, &moderator, &d, "nosuch00", true).await;
        assert_eq!(error_code(&r), "NOT_FOUND", "{layout:?}: {r:#}");
        let r = pin(&app, &moderator, &d, "../$x", true).await;
        assert_eq!(error_code(&r), "BAD_USER_INPUT", "{layout:?}: {r:#}");
        let r = pin(
            &app,
            &moderator,
            "0123456789abcdef01234567",
            &slugs[0],
            true,
        )
        .await;
        assert_eq!(error_code(&r), "NOT_FOUND", "{layout:?}: {r:#}");

        // A deleted comment leaves the list and cannot be pinned.
        app.ok(
            "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
            json!({ "d": d, "s": slugs[0] }),
        )
        .await;
        assert_eq!(
            pinned(&app, &d).await,
            slugs_at(&slugs, &[5, 6, 7, 1]),
            "{layout:?}"
        );
        pin(&app, &moderator, &d, &slugs[0], false).await;
        let r = pin(&app, &moderator, &d, &slugs[0], true).await;
        assert_eq!(error_code(&r), "COMMENT_DELETED", "{layout:?}: {r:#}");

        // A move to another layout keeps the pins.
        let to = match layout {
            Layout::PerComment => Layout::Bucketed,
            _ => Layout::PerComment,
        };
        let r = app
            .exec_as(
                Some(&moderator),
                "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }",
                json!({ "d": d, "l": layout_name(to) }),
            )
            .await;
        assert_eq!(
            r["data"]["migrateDiscussion"]["layout"],
            layout_name(to),
            "{r:#}"
        );
        assert_eq!(
            pinned(&app, &d).await,
            slugs_at(&slugs, &[5, 6, 7, 1]),
            "{layout:?} moved to {to:?}"
        );
    }
}

/// Ten moderators pinning ten comments at once: exactly the room left is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pins_never_pass_five() {
    let app = TestApp::new("pinning_race", Layout::Bucketed).await;
    let moderator = app.moderator_token("mod", "Mo");
    let data = app
        .ok(
            "mutation { createDiscussion(input: {title: \"race\"}) { id } }",
            json!({}),
        )
        .await;
    let d = data["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut slugs = Vec::new();
    for i in 0..10 {
        let data = app.ok(POST, json!({ "d": d, "t": format!("c{i}") })).await;
        slugs.push(
            data["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned(),
        );
    }
    let results = futures::future::join_all(
        slugs
            .iter()
            .map(|slug| pin(&app, &moderator, &d, slug, true)),
    )
    .await;
    let pinned_ok = results
        .iter()
        .filter(|r| r["data"]["pinComment"]["pinned"] == true)
        .count();
    let full = results
        .iter()
        .filter(|r| r.get("errors").is_some() && error_code(r) == "BAD_USER_INPUT")
        .count();
    assert_eq!((pinned_ok, full), (5, 5), "{results:#?}");
    assert_eq!(pinned(&app, &d).await.len(), 5);
}
