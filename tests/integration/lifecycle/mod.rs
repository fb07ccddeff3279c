//! Editing, deleting and locking, against every storage layout: who may do what and when,
//! revisions, tombstones in every read, locked discussions, bad inputs, edits racing replies and
//! round trips. Then, for the embedded layout only, the size counter and the size cap on edits.

mod editing;
mod embedded_size;
mod locks;
mod races;
mod round_trips;
mod tombstones;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{error_code, error_message, Settings, TestApp};
pub(crate) use editing::{
    edits_validate_their_text_case, revisions_keep_every_earlier_version_case,
    who_may_edit_and_delete_case,
};
pub(crate) use locks::{
    bad_lifecycle_inputs_get_clear_errors_case, locked_discussions_refuse_posts_case,
};
pub(crate) use races::edits_racing_replies_lose_nothing_case;
pub(crate) use round_trips::edits_and_deletes_have_bounded_round_trips_case;
pub(crate) use tombstones::tombstones_keep_their_place_in_every_read_case;

/// Instantiates every lifecycle case for one layout (optionally with custom settings).
macro_rules! lifecycle_suite {
    ($module:ident, settings = $settings:expr) => {
        mod $module {
            use super::*;

            fn settings() -> Settings {
                $settings
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn who_may_edit_and_delete() {
                who_may_edit_and_delete_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn revisions_keep_every_earlier_version() {
                revisions_keep_every_earlier_version_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn edits_validate_their_text() {
                edits_validate_their_text_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tombstones_keep_their_place_in_every_read() {
                tombstones_keep_their_place_in_every_read_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn locked_discussions_refuse_posts() {
                locked_discussions_refuse_posts_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn bad_inputs_get_clear_errors() {
                bad_lifecycle_inputs_get_clear_errors_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn edits_racing_replies_lose_nothing() {
                edits_racing_replies_lose_nothing_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn edits_and_deletes_have_bounded_round_trips() {
                edits_and_deletes_have_bounded_round_trips_case(settings()).await;
            }
        }
    };
    ($module:ident, $layout:expr) => {
        lifecycle_suite!($module, settings = Settings::new($layout));
    };
}

lifecycle_suite!(per_comment, Layout::PerComment);
lifecycle_suite!(embedded, Layout::Embedded);
lifecycle_suite!(bucketed, Layout::Bucketed);
lifecycle_suite!(
    bucketed_small_pages,
    settings = Settings {
        bucket_size: 3,
        ..Settings::new(Layout::Bucketed)
    }
);

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text posted editedAt deleted author { id name } } }";
const DELETE: &str = "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug text editedAt deleted author { id name } revisions { text } } }";
const LOCK: &str =
    "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { id locked } }";
/// One comment with everything the lifecycle changes.
const READ: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug text posted editedAt deleted author { id name } replyCount revisions { text editedAt editor { id name } } } }";
/// What the tombstone checks compare, for every comment of every listing.
const VIEW: &str = "fragment View on Comment { slug deleted text editedAt author { id name } revisions { text } replyCount }";

const UNKNOWN_DISCUSSION: &str = "0123456789abcdef01234567";

/// The people of these tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    /// `u1`, the user `TestApp::ok` and `TestApp::post` act as.
    Ada,
    /// `u2`, another user.
    Grace,
    /// `m1`, a moderator.
    Moderator,
}

const VIEWERS: [Who; 4] = [Who::Anonymous, Who::Ada, Who::Grace, Who::Moderator];

impl Who {
    /// The author as the API shows it.
    fn author(self) -> Value {
        match self {
            Who::Ada => json!({ "id": "u1", "name": "Ada" }),
            Who::Grace => json!({ "id": "u2", "name": "Grace" }),
            Who::Moderator => json!({ "id": "m1", "name": "Mod" }),
            Who::Anonymous => panic!("anonymous people write nothing"),
        }
    }
}

/// What everyone but moderators sees as the author of a deleted comment.
fn deleted_author() -> Value {
    json!({ "id": "", "name": "[deleted]" })
}

/// Tokens of the people, for one app.
struct People {
    ada: String,
    grace: String,
    moderator: String,
}

impl People {
    fn of(app: &TestApp) -> Self {
        Self {
            ada: app.token("u1", "Ada"),
            grace: app.token("u2", "Grace"),
            moderator: app.moderator_token("m1", "Mod"),
        }
    }

    fn token(&self, who: Who) -> Option<&str> {
        match who {
            Who::Anonymous => None,
            Who::Ada => Some(&self.ada),
            Who::Grace => Some(&self.grace),
            Who::Moderator => Some(&self.moderator),
        }
    }
}

fn succeeded(response: &Value) -> bool {
    response
        .get("errors")
        .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty()))
}

/// `data` of a response that must have succeeded.
fn data(response: Value, what: &str) -> Value {
    assert!(
        succeeded(&response),
        "{what}: unexpected errors: {response:#}"
    );
    let mut response = response;
    response["data"].take()
}

/// Checks that a response failed with `code`.
fn assert_code(response: &Value, code: &str, what: &str) {
    assert!(
        !succeeded(response),
        "{what}: expected {code}, but it succeeded: {response:#}"
    );
    assert_eq!(error_code(response), code, "{what}: {response:#}");
}

struct Calls<'a> {
    app: &'a TestApp,
    people: People,
}

impl<'a> Calls<'a> {
    fn new(app: &'a TestApp) -> Self {
        Self {
            app,
            people: People::of(app),
        }
    }

    fn token(&self, who: Who) -> Option<&str> {
        self.people.token(who)
    }

    async fn exec(&self, who: Who, query: &str, vars: Value) -> Value {
        self.app.exec_as(self.token(who), query, vars).await
    }

    async fn post_raw(&self, who: Who, d: &str, parent: Option<&str>, text: &str) -> Value {
        self.exec(who, POST, json!({ "d": d, "p": parent, "t": text }))
            .await
    }

    async fn post(&self, who: Who, d: &str, parent: Option<&str>, text: &str) -> String {
        let response = self.post_raw(who, d, parent, text).await;
        data(response, &format!("{who:?} posts {text:?}"))["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned()
    }

    async fn edit(&self, who: Who, d: &str, s: &str, text: &str) -> Value {
        self.exec(who, EDIT, json!({ "d": d, "s": s, "t": text }))
            .await
    }

    /// An edit that must succeed; returns the edited comment.
    async fn edit_ok(&self, who: Who, d: &str, s: &str, text: &str) -> Value {
        let response = self.edit(who, d, s, text).await;
        let c = data(response, &format!("{who:?} edits {s} to {text:?}"))["editComment"].clone();
        assert_eq!(c["text"], json!(text), "the edit returns the new text");
        assert_eq!(c["deleted"], json!(false));
        assert!(c["editedAt"].is_string(), "editedAt is set: {c:#}");
        c
    }

    async fn delete(&self, who: Who, d: &str, s: &str) -> Value {
        self.exec(who, DELETE, json!({ "d": d, "s": s })).await
    }

    /// A delete that must succeed; returns the tombstone as the deleter sees it.
    async fn delete_ok(&self, who: Who, d: &str, s: &str) -> Value {
        let response = self.delete(who, d, s).await;
        let c = data(response, &format!("{who:?} deletes {s}"))["deleteComment"].clone();
        assert_eq!(c["slug"], json!(s));
        assert_eq!(c["deleted"], json!(true), "{c:#}");
        assert_eq!(c["text"], Value::Null, "{c:#}");
        assert_eq!(c["revisions"], Value::Null, "{c:#}");
        c
    }

    async fn lock(&self, who: Who, d: &str, locked: bool) -> Value {
        self.exec(who, LOCK, json!({ "d": d, "l": locked })).await
    }

    /// One comment as `who` sees it.
    async fn read(&self, who: Who, d: &str, s: &str) -> Value {
        let response = self.exec(who, READ, json!({ "d": d, "s": s })).await;
        data(response, &format!("{who:?} reads {s}"))["comment"].clone()
    }

    async fn locked(&self, d: &str) -> Value {
        let response = self
            .exec(
                Who::Anonymous,
                "query($d: ID!) { discussion(id: $d) { locked } }",
                json!({ "d": d }),
            )
            .await;
        data(response, "read locked")["discussion"]["locked"].clone()
    }

    async fn comment_count(&self, d: &str) -> Value {
        let response = self
            .exec(
                Who::Anonymous,
                "query($d: ID!) { discussion(id: $d) { commentCount } }",
                json!({ "d": d }),
            )
            .await;
        data(response, "read commentCount")["discussion"]["commentCount"].clone()
    }
}

fn parse_time(value: &Value) -> chrono::DateTime<chrono::FixedOffset> {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a DateTime: {value}"));
    chrono::DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}
