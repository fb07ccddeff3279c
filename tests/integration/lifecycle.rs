//! Editing, deleting and locking, against every storage layout: who may do what and when,
//! revisions, tombstones in every read, locked discussions, bad inputs, edits racing replies and
//! round trips. Then, for the embedded layout only, the size counter and the size cap on edits.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{Bson, Document};
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::embedded::raw_discussion;
use crate::model::{build_tree, Model};
use crate::support::{error_code, Settings, TestApp};

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
                bad_inputs_get_clear_errors_case(settings()).await;
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
    response["data"].clone()
}

/// Checks that a response failed with `code`.
fn assert_code(response: &Value, code: &str, what: &str) {
    assert!(
        !succeeded(response),
        "{what}: expected {code}, but it succeeded: {response:#}"
    );
    assert_eq!(error_code(response), code, "{what}: {response:#}");
}

fn message(response: &Value) -> String {
    response["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
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

// ---------------------------------------------------------------------------------------------
// 1. Permissions

pub(crate) async fn who_may_edit_and_delete_case(settings: Settings) {
    let app = TestApp::with("lc_permissions", settings.clone()).await;
    let api = Calls::new(&app);
    let d = app.discussion("permissions").await;
    let mine = api.post(Who::Ada, &d, None, "original").await;
    let posted = api.read(Who::Ada, &d, &mine).await["posted"].clone();

    // The author edits her own comment.
    let c = api.edit_ok(Who::Ada, &d, &mine, "by the author").await;
    assert_eq!(c["author"], Who::Ada.author());
    assert_eq!(c["posted"], posted, "posting time is kept");
    assert!(parse_time(&c["editedAt"]) >= parse_time(&posted));

    // Nobody else but a moderator may, and nobody without a valid token.
    for (what, token, code) in [
        ("another user", api.token(Who::Grace), "FORBIDDEN"),
        ("no token", None, "UNAUTHENTICATED"),
        ("a garbage token", Some("abc.def.ghi"), "UNAUTHENTICATED"),
    ] {
        let response = app
            .exec_as(token, EDIT, json!({ "d": d, "s": mine, "t": "hijacked" }))
            .await;
        assert_code(&response, code, &format!("edit by {what}"));
    }
    let now = api.read(Who::Anonymous, &d, &mine).await;
    assert_eq!(
        now["text"],
        json!("by the author"),
        "refused edits wrote nothing"
    );
    assert_eq!(now["editedAt"], c["editedAt"]);

    // A moderator edits anyone's comment; the author stays the author.
    let m = api
        .edit_ok(Who::Moderator, &d, &mine, "by a moderator")
        .await;
    assert_eq!(
        m["author"],
        Who::Ada.author(),
        "a moderator's edit keeps the author"
    );
    let now = api.read(Who::Grace, &d, &mine).await;
    assert_eq!(now["text"], json!("by a moderator"));
    assert_eq!(now["author"], Who::Ada.author());
    assert_eq!(now["posted"], posted);
    assert_eq!(now["editedAt"], m["editedAt"]);

    // Deleting: not by another user, not without a token.
    let second = api.post(Who::Ada, &d, None, "Ada's second").await;
    let theirs = api.post(Who::Grace, &d, None, "Grace's").await;
    for (what, who, slug, code) in [
        ("another user", Who::Grace, &second, "FORBIDDEN"),
        (
            "another user (the other way round)",
            Who::Ada,
            &theirs,
            "FORBIDDEN",
        ),
        ("no token", Who::Anonymous, &second, "UNAUTHENTICATED"),
    ] {
        let response = api.delete(who, &d, slug).await;
        assert_code(&response, code, &format!("delete by {what}"));
    }
    for (slug, text) in [(&second, "Ada's second"), (&theirs, "Grace's")] {
        let now = api.read(Who::Moderator, &d, slug).await;
        assert_eq!(
            now["deleted"],
            json!(false),
            "refused deletes wrote nothing"
        );
        assert_eq!(now["text"], json!(text));
    }

    // The author deletes her own comment (and sees the placeholder author, like everyone but
    // moderators); a moderator deletes someone else's (and sees the real author).
    let tomb = api.delete_ok(Who::Ada, &d, &second).await;
    assert_eq!(tomb["author"], deleted_author());
    let tomb = api.delete_ok(Who::Moderator, &d, &theirs).await;
    assert_eq!(tomb["author"], Who::Grace.author());
    for slug in [&second, &theirs] {
        let now = api.read(Who::Anonymous, &d, slug).await;
        assert_eq!(now["deleted"], json!(true));
        assert_eq!(now["text"], Value::Null);
    }
    assert_eq!(api.comment_count(&d).await, json!(3));

    // Past the edit window the author may no longer edit; a moderator still may, and deleting
    // has no window.
    let windowed = TestApp::with(
        "lc_window",
        Settings {
            edit_window_secs: 1,
            ..settings.clone()
        },
    )
    .await;
    let api = Calls::new(&windowed);
    let d = windowed.discussion("edit window").await;
    let first = api.post(Who::Ada, &d, None, "first").await;
    let second = api.post(Who::Ada, &d, None, "second").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response = api.edit(Who::Ada, &d, &first, "too late").await;
    assert_code(&response, "FORBIDDEN", "author edit after the window");
    let now = api.read(Who::Ada, &d, &first).await;
    assert_eq!(now["text"], json!("first"));
    assert_eq!(now["editedAt"], Value::Null);
    api.edit_ok(Who::Moderator, &d, &first, "moderated late")
        .await;
    api.delete_ok(Who::Ada, &d, &second).await;

    // With a window of 0 authors never edit.
    let never = TestApp::with(
        "lc_no_window",
        Settings {
            edit_window_secs: 0,
            ..settings
        },
    )
    .await;
    let api = Calls::new(&never);
    let d = never.discussion("no edit window").await;
    let c = api.post(Who::Ada, &d, None, "final").await;
    let response = api.edit(Who::Ada, &d, &c, "changed my mind").await;
    assert_code(&response, "FORBIDDEN", "author edit with a window of 0");
    assert_eq!(api.read(Who::Ada, &d, &c).await["text"], json!("final"));
    api.edit_ok(Who::Moderator, &d, &c, "moderated").await;
    api.delete_ok(Who::Ada, &d, &c).await;
}

// ---------------------------------------------------------------------------------------------
// 2. Revisions

pub(crate) async fn revisions_keep_every_earlier_version_case(settings: Settings) {
    let app = TestApp::with("lc_revisions", settings).await;
    let api = Calls::new(&app);
    let d = app.discussion("revisions").await;
    let c = api.post(Who::Ada, &d, None, "version 0").await;
    let posted = api.read(Who::Ada, &d, &c).await["posted"].clone();

    // Each version's time and writer, oldest first: the original, then every edit.
    let mut versions = vec![("version 0".to_owned(), posted.clone(), Who::Ada)];
    for (who, text) in [
        (Who::Ada, "version 1"),
        (Who::Ada, "version 2"),
        (Who::Moderator, "version 3"),
    ] {
        let edited = api.edit_ok(who, &d, &c, text).await;
        assert_eq!(edited["author"], Who::Ada.author());
        versions.push((text.to_owned(), edited["editedAt"].clone(), who));
    }
    let revisions = |versions: &[(String, Value, Who)]| -> Value {
        Value::Array(
            versions
                .iter()
                .map(|(text, at, who)| json!({ "text": text, "editedAt": at, "editor": who.author() }))
                .collect(),
        )
    };
    let times: Vec<_> = versions.iter().map(|(_, at, _)| parse_time(at)).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "versions are in time order: {versions:?}"
    );

    for viewer in VIEWERS {
        let now = api.read(viewer, &d, &c).await;
        assert_eq!(now["text"], json!("version 3"), "{viewer:?}");
        assert_eq!(now["editedAt"], versions[3].1, "{viewer:?}");
        assert_eq!(now["posted"], posted, "{viewer:?}");
        assert_eq!(now["author"], Who::Ada.author(), "{viewer:?}");
        match viewer {
            Who::Ada | Who::Moderator => {
                assert_eq!(now["revisions"], revisions(&versions[..3]), "{viewer:?}");
                assert_eq!(
                    now["revisions"][0]["editedAt"], posted,
                    "the original's time is its posting time"
                );
            }
            Who::Grace | Who::Anonymous => {
                assert_eq!(
                    now["revisions"],
                    Value::Null,
                    "{viewer:?} sees no revisions"
                )
            }
        }
    }

    // One more edit by the author: the moderator's version becomes a revision with the moderator
    // as its editor.
    let edited = api.edit_ok(Who::Ada, &d, &c, "version 4").await;
    versions.push(("version 4".to_owned(), edited["editedAt"].clone(), Who::Ada));
    let now = api.read(Who::Ada, &d, &c).await;
    assert_eq!(now["revisions"], revisions(&versions[..4]));
    assert_eq!(now["revisions"][3]["editor"], Who::Moderator.author());
    assert_eq!(now["editedAt"], versions[4].1);
    assert_eq!(
        api.read(Who::Moderator, &d, &c).await["revisions"],
        revisions(&versions[..4])
    );

    // A never-edited comment has no revisions (an empty list for those who may see them), and
    // the rules hold in listings too, for a comment by another user as well.
    let fresh = api.post(Who::Ada, &d, None, "never edited").await;
    let graces = api.post(Who::Grace, &d, None, "Grace's, edited").await;
    api.edit_ok(Who::Grace, &d, &graces, "Grace's, edited once")
        .await;
    let now = api.read(Who::Ada, &d, &fresh).await;
    assert_eq!(now["revisions"], json!([]));
    assert_eq!(now["editedAt"], Value::Null);
    let listing = "query($d: ID!) { discussion(id: $d) {
        comments(first: 10) { nodes { slug revisions { text } } }
        threads(first: 10) { nodes { slug revisions { text } } } } }";
    let texts = |list: &[&str]| -> Value {
        Value::Array(list.iter().map(|t| json!({ "text": t })).collect())
    };
    let adas_edited = texts(&["version 0", "version 1", "version 2", "version 3"]);
    for viewer in VIEWERS {
        let expected = json!([
            {
                "slug": c,
                "revisions": if matches!(viewer, Who::Ada | Who::Moderator) { adas_edited.clone() } else { Value::Null },
            },
            {
                "slug": fresh,
                "revisions": if matches!(viewer, Who::Ada | Who::Moderator) { json!([]) } else { Value::Null },
            },
            {
                "slug": graces,
                "revisions": if matches!(viewer, Who::Grace | Who::Moderator) { texts(&["Grace's, edited"]) } else { Value::Null },
            },
        ]);
        let got = data(
            api.exec(viewer, listing, json!({ "d": d })).await,
            "listing",
        );
        assert_eq!(
            got["discussion"]["comments"]["nodes"], expected,
            "comments as {viewer:?}"
        );
        assert_eq!(
            got["discussion"]["threads"]["nodes"], expected,
            "threads as {viewer:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Text validation

async fn edits_validate_their_text_case(mut settings: Settings) {
    settings.max_text_chars = 40;
    let app = TestApp::with("lc_validation", settings).await;
    let api = Calls::new(&app);
    let d = app.discussion("validation").await;
    let c = api.post(Who::Ada, &d, None, "original").await;
    let too_long = "x".repeat(41);
    for (what, text) in [
        ("empty", ""),
        ("spaces", "   "),
        ("white space", " \n\t "),
        ("over the limit", too_long.as_str()),
        ("NUL", "a\u{0000}b"),
        ("a control character", "a\u{0007}b"),
        ("an escape sequence", "a\u{001b}[31mb"),
    ] {
        for who in [Who::Ada, Who::Moderator] {
            let response = api.edit(who, &d, &c, text).await;
            assert_code(
                &response,
                "BAD_USER_INPUT",
                &format!("{what} text by {who:?}"),
            );
            assert!(!message(&response).is_empty());
        }
    }
    let now = api.read(Who::Ada, &d, &c).await;
    assert_eq!(
        now["text"],
        json!("original"),
        "refused edits wrote nothing"
    );
    assert_eq!(now["editedAt"], Value::Null);
    assert_eq!(now["revisions"], json!([]));
    // The limit itself is fine.
    let longest = "y".repeat(40);
    api.edit_ok(Who::Ada, &d, &c, &longest).await;
    assert_eq!(api.read(Who::Ada, &d, &c).await["text"], json!(longest));
}

// ---------------------------------------------------------------------------------------------
// 4. Tombstones

/// A small tree as posted, with what each comment should look like.
struct Tree {
    d: String,
    model: Model,
    authors: Vec<Who>,
    texts: Vec<String>,
    revisions: Vec<Vec<String>>,
    edited: Vec<Value>,
    deleted: Vec<bool>,
}

impl Tree {
    fn slug(&self, name: &str) -> String {
        let i = self
            .texts
            .iter()
            .position(|t| t == name)
            .unwrap_or_else(|| panic!("no comment {name}"));
        self.model.slugs[i].clone()
    }

    /// Comment `i` through the `View` fragment, as `viewer` should see it.
    fn view(&self, i: usize, viewer: Who) -> Value {
        let deleted = self.deleted[i];
        let author = if deleted && viewer != Who::Moderator {
            deleted_author()
        } else {
            self.authors[i].author()
        };
        let may_see_revisions = viewer == Who::Moderator || viewer == self.authors[i];
        let revisions = if deleted || !may_see_revisions {
            Value::Null
        } else {
            Value::Array(
                self.revisions[i]
                    .iter()
                    .map(|t| json!({ "text": t }))
                    .collect(),
            )
        };
        json!({
            "slug": self.model.slugs[i],
            "deleted": deleted,
            "text": if deleted { Value::Null } else { json!(self.texts[i]) },
            "editedAt": self.edited[i],
            "author": author,
            "revisions": revisions,
            "replyCount": self.model.replies(i).len(),
        })
    }

    fn views(&self, slugs: &[String], viewer: Who) -> Vec<Value> {
        slugs
            .iter()
            .map(|s| self.view(self.model.index(s), viewer))
            .collect()
    }

    fn view_of(&self, slug: &str, viewer: Who) -> Value {
        self.view(self.model.index(slug), viewer)
    }
}

/// Pages through a connection (`first` and `after`, or `first` and `offset`) as `viewer`;
/// returns the nodes and checks `totalCount` on every page.
#[allow(clippy::too_many_arguments)]
async fn pages(
    api: &Calls<'_>,
    viewer: Who,
    query: &str,
    vars: Value,
    path: &[&str],
    size: usize,
    by_offset: bool,
    total: usize,
) -> Vec<Value> {
    let query = format!("{query} {VIEW}");
    let mut out: Vec<Value> = Vec::new();
    let mut after = Value::Null;
    for _ in 0..1000 {
        let mut v = vars.clone();
        v["first"] = json!(size);
        if by_offset {
            v["offset"] = json!(out.len());
        } else {
            v["after"] = after.clone();
        }
        let response = api.exec(viewer, &query, v).await;
        let got = data(response, &format!("page of {path:?} as {viewer:?}"));
        let conn = path.iter().fold(&got, |v, k| &v[*k]);
        assert_eq!(conn["totalCount"], json!(total), "totalCount of {path:?}");
        let nodes = conn["nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("not a connection: {conn:#}"));
        assert!(nodes.len() <= size);
        out.extend(nodes.iter().cloned());
        if conn["pageInfo"]["hasNextPage"] != json!(true) {
            return out;
        }
        assert_eq!(nodes.len(), size, "a page before the last is full");
        after = conn["pageInfo"]["endCursor"].clone();
    }
    panic!("paging never ended");
}

/// Every read of the tree, as every viewer, against what the tree says.
async fn check_every_read(api: &Calls<'_>, tree: &Tree, when: &str) {
    let d = &tree.d;
    let model = &tree.model;
    let n = model.slugs.len();
    let page = "pageInfo { hasNextPage endCursor } totalCount nodes { ...View }";
    let by_cursor = format!("query($d: ID!, $o: CommentOrder!, $first: Int, $after: String) {{ discussion(id: $d) {{ comments(order: $o, first: $first, after: $after) {{ {page} }} }} }}");
    let by_offset = format!("query($d: ID!, $o: CommentOrder!, $first: Int, $offset: Int) {{ discussion(id: $d) {{ comments(order: $o, first: $first, offset: $offset) {{ {page} }} }} }}");
    let threads_cursor = format!("query($d: ID!, $first: Int, $after: String) {{ discussion(id: $d) {{ threads(first: $first, after: $after) {{ {page} }} }} }}");
    let threads_offset = format!("query($d: ID!, $first: Int, $offset: Int) {{ discussion(id: $d) {{ threads(first: $first, offset: $offset) {{ {page} }} }} }}");
    let replies = format!("query($d: ID!, $s: String!, $first: Int, $after: String) {{ comment(discussionId: $d, slug: $s) {{ replies(first: $first, after: $after) {{ {page} }} }} }}");
    let sub = format!("query($d: ID!, $s: String!, $first: Int, $after: String) {{ comment(discussionId: $d, slug: $s) {{ subDiscussion(first: $first, after: $after) {{ {page} }} }} }}");
    let links = format!("query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ ...View parent {{ ...View }} }} discussion(id: $d) {{ commentCount comment(slug: $s) {{ ...View }} }} }} {VIEW}");
    let entities = format!("query($reps: [_Any!]!) {{ _entities(representations: $reps) {{ ... on Comment {{ ...View }} }} }} {VIEW}");

    for viewer in VIEWERS {
        let what = |list: &str| format!("{when}: {list} as {viewer:?}");
        for (order, expected) in [
            ("CHRONOLOGICAL", model.chronological()),
            ("THREADED", model.threaded()),
        ] {
            for (query, offset) in [(&by_cursor, false), (&by_offset, true)] {
                let got = pages(
                    api,
                    viewer,
                    query,
                    json!({ "d": d, "o": order }),
                    &["discussion", "comments"],
                    2,
                    offset,
                    n,
                )
                .await;
                let how = if offset { "offset" } else { "cursor" };
                assert_eq!(
                    got,
                    tree.views(&expected, viewer),
                    "{}",
                    what(&format!("{order} by {how}"))
                );
            }
        }
        let expected = model.threads();
        for (query, offset) in [(&threads_cursor, false), (&threads_offset, true)] {
            let got = pages(
                api,
                viewer,
                query,
                json!({ "d": d }),
                &["discussion", "threads"],
                2,
                offset,
                expected.len(),
            )
            .await;
            assert_eq!(got, tree.views(&expected, viewer), "{}", what("threads"));
        }
        for i in 0..n {
            let slug = &model.slugs[i];
            let expected = model.replies(i);
            let got = pages(
                api,
                viewer,
                &replies,
                json!({ "d": d, "s": slug }),
                &["comment", "replies"],
                2,
                false,
                expected.len(),
            )
            .await;
            assert_eq!(
                got,
                tree.views(&expected, viewer),
                "{}",
                what(&format!("replies of {slug}"))
            );
            let expected = model.descendants(i);
            let got = pages(
                api,
                viewer,
                &sub,
                json!({ "d": d, "s": slug }),
                &["comment", "subDiscussion"],
                2,
                false,
                expected.len(),
            )
            .await;
            assert_eq!(
                got,
                tree.views(&expected, viewer),
                "{}",
                what(&format!("sub-discussion of {slug}"))
            );
            // Direct links by both routes, and the parent.
            let got = data(
                api.exec(viewer, &links, json!({ "d": d, "s": slug })).await,
                &what(&format!("direct link to {slug}")),
            );
            let view = tree.view(i, viewer);
            let mut own = got["comment"].clone();
            let parent = own
                .as_object_mut()
                .and_then(|o| o.remove("parent"))
                .unwrap_or(Value::Null);
            assert_eq!(own, view, "{}", what(&format!("comment(slug: {slug})")));
            assert_eq!(
                got["discussion"]["comment"],
                view,
                "{}",
                what(&format!("discussion.comment(slug: {slug})"))
            );
            assert_eq!(got["discussion"]["commentCount"], json!(n));
            let expected_parent = model.parents[i].map_or(Value::Null, |p| tree.view(p, viewer));
            assert_eq!(
                parent,
                expected_parent,
                "{}",
                what(&format!("parent of {slug}"))
            );
        }
        // Federation.
        let reps: Vec<Value> = model
            .slugs
            .iter()
            .map(|s| json!({ "__typename": "Comment", "discussionId": d, "slug": s }))
            .collect();
        let got = data(
            api.exec(viewer, &entities, json!({ "reps": reps })).await,
            &what("_entities"),
        );
        assert_eq!(
            got["_entities"],
            Value::Array(tree.views(&model.slugs, viewer)),
            "{}",
            what("_entities")
        );
    }
}

pub(crate) async fn tombstones_keep_their_place_in_every_read_case(settings: Settings) {
    let app = TestApp::with("lc_tombstones", settings).await;
    let api = Calls::new(&app);
    let d = app.discussion("tombstones").await;
    // Three threads, three levels deep, posted interleaved so that the chronological and the
    // threaded orders differ.
    let plan: [(&str, Option<&str>, Who); 9] = [
        ("t0", None, Who::Ada),
        ("a", Some("t0"), Who::Ada),
        ("a1", Some("a"), Who::Grace),
        ("t1", None, Who::Grace),
        ("b", Some("t0"), Who::Grace),
        ("c", Some("t1"), Who::Ada),
        ("a2", Some("a"), Who::Ada),
        ("c1", Some("c"), Who::Grace),
        ("t2", None, Who::Ada),
    ];
    let mut tree = Tree {
        d: d.clone(),
        model: Model::default(),
        authors: Vec::new(),
        texts: Vec::new(),
        revisions: Vec::new(),
        edited: Vec::new(),
        deleted: Vec::new(),
    };
    for (text, parent, who) in plan {
        let parent_index = parent.map(|p| tree.texts.iter().position(|t| t == p).expect("parent"));
        let parent_slug = parent_index.map(|p| tree.model.slugs[p].clone());
        let slug = api.post(who, &d, parent_slug.as_deref(), text).await;
        tree.model.push(slug, text.to_owned(), parent_index);
        tree.authors.push(who);
        tree.texts.push(text.to_owned());
        tree.revisions.push(Vec::new());
        tree.edited.push(Value::Null);
        tree.deleted.push(false);
    }
    let a = tree.slug("a");
    let t1 = tree.slug("t1");
    let ai = tree.model.index(&a);
    let t1i = tree.model.index(&t1);

    // `a` is edited first, so it has an edit time and revisions to lose.
    let edited = api.edit_ok(Who::Ada, &d, &a, "a, edited").await;
    tree.texts[ai] = "a, edited".to_owned();
    tree.revisions[ai].push("a".to_owned());
    tree.edited[ai] = edited["editedAt"].clone();
    check_every_read(&api, &tree, "before deleting").await;

    // A moderator deletes `a` (a reply with replies); Grace deletes her own thread `t1`.
    let tomb = api.delete_ok(Who::Moderator, &d, &a).await;
    assert_eq!(
        tomb["author"],
        Who::Ada.author(),
        "moderators see the real author"
    );
    assert_eq!(tomb["editedAt"], tree.edited[ai], "deleting keeps editedAt");
    let tomb = api.delete_ok(Who::Grace, &d, &t1).await;
    assert_eq!(
        tomb["author"],
        deleted_author(),
        "even the author sees the placeholder"
    );
    assert_eq!(tomb["editedAt"], Value::Null);
    tree.deleted[ai] = true;
    tree.deleted[t1i] = true;
    check_every_read(&api, &tree, "after deleting").await;

    // Deleting twice returns the tombstone again (by the author, too).
    for (who, slug) in [
        (Who::Moderator, &a),
        (Who::Ada, &a),
        (Who::Grace, &t1),
        (Who::Moderator, &t1),
    ] {
        let tomb = api.delete_ok(who, &d, slug).await;
        let mut expected = tree.view_of(slug, who);
        expected
            .as_object_mut()
            .expect("object")
            .remove("replyCount");
        assert_eq!(tomb, expected, "{who:?} deletes {slug} again");
    }

    // Deleted comments cannot be edited, by their author or by a moderator.
    for (who, slug) in [
        (Who::Ada, &a),
        (Who::Moderator, &a),
        (Who::Grace, &t1),
        (Who::Moderator, &t1),
    ] {
        let response = api.edit(who, &d, slug, "back from the dead").await;
        assert_code(
            &response,
            "COMMENT_DELETED",
            &format!("{who:?} edits deleted {slug}"),
        );
    }
    check_every_read(&api, &tree, "after deleting twice and editing").await;
}

// ---------------------------------------------------------------------------------------------
// 5. Locks

pub(crate) async fn locked_discussions_refuse_posts_case(settings: Settings) {
    let app = TestApp::with("lc_locks", settings).await;
    let api = Calls::new(&app);
    let d = app.discussion("locks").await;
    let mine = api.post(Who::Ada, &d, None, "mine").await;
    let spare = api.post(Who::Ada, &d, None, "spare").await;
    let theirs = api.post(Who::Grace, &d, Some(&mine), "theirs").await;
    assert_eq!(api.locked(&d).await, json!(false));

    for (who, code) in [
        (Who::Ada, "FORBIDDEN"),
        (Who::Grace, "FORBIDDEN"),
        (Who::Anonymous, "UNAUTHENTICATED"),
    ] {
        let response = api.lock(who, &d, true).await;
        assert_code(&response, code, &format!("lock by {who:?}"));
    }
    assert_eq!(
        api.locked(&d).await,
        json!(false),
        "refused locks wrote nothing"
    );

    let locked = data(api.lock(Who::Moderator, &d, true).await, "moderator locks");
    assert_eq!(locked["lockDiscussion"], json!({ "id": d, "locked": true }));
    assert_eq!(api.locked(&d).await, json!(true));

    // Nobody posts in a locked discussion, moderators included.
    for who in [Who::Ada, Who::Grace, Who::Moderator] {
        for parent in [None, Some(mine.as_str()), Some(theirs.as_str())] {
            let response = api.post_raw(who, &d, parent, "too late").await;
            let what = format!("{who:?} posts under {parent:?} while locked");
            assert_code(&response, "FORBIDDEN", &what);
            assert!(
                message(&response).to_lowercase().contains("locked"),
                "{what}: the message says why: {response:#}"
            );
        }
    }
    assert_eq!(api.comment_count(&d).await, json!(3));

    // Authors may not edit; moderators may. Deleting still works for both.
    let response = api.edit(Who::Ada, &d, &mine, "author while locked").await;
    assert_code(&response, "FORBIDDEN", "author edit while locked");
    assert_eq!(api.read(Who::Ada, &d, &mine).await["text"], json!("mine"));
    api.edit_ok(Who::Moderator, &d, &mine, "moderator while locked")
        .await;
    assert_eq!(
        api.read(Who::Ada, &d, &mine).await["text"],
        json!("moderator while locked")
    );
    api.delete_ok(Who::Ada, &d, &spare).await;
    api.delete_ok(Who::Moderator, &d, &theirs).await;

    // Only moderators unlock.
    let response = api.lock(Who::Ada, &d, false).await;
    assert_code(&response, "FORBIDDEN", "unlock by a user");
    assert_eq!(api.locked(&d).await, json!(true));
    let unlocked = data(
        api.lock(Who::Moderator, &d, false).await,
        "moderator unlocks",
    );
    assert_eq!(
        unlocked["lockDiscussion"],
        json!({ "id": d, "locked": false })
    );
    assert_eq!(api.locked(&d).await, json!(false));

    // Everything works again.
    api.post(Who::Ada, &d, None, "after the lock").await;
    api.post(Who::Grace, &d, Some(&mine), "a reply after the lock")
        .await;
    api.edit_ok(Who::Ada, &d, &mine, "author after the lock")
        .await;
    assert_eq!(api.comment_count(&d).await, json!(5));
}

// ---------------------------------------------------------------------------------------------
// 6. Bad inputs

pub(crate) async fn bad_inputs_get_clear_errors_case(settings: Settings) {
    let app = TestApp::with("lc_bad_inputs", settings).await;
    let api = Calls::new(&app);
    let d = app.discussion("bad inputs").await;
    let top = api.post(Who::Ada, &d, None, "top").await;
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "unknown slug",
            d.as_str(),
            "abcdefgh".to_owned(),
            "NOT_FOUND",
        ),
        (
            "unknown reply",
            d.as_str(),
            format!("{top}/zzzzzzzz"),
            "NOT_FOUND",
        ),
        (
            "unknown discussion",
            UNKNOWN_DISCUSSION,
            top.clone(),
            "NOT_FOUND",
        ),
        (
            "malformed discussion id",
            "not-an-id",
            top.clone(),
            "BAD_USER_INPUT",
        ),
        (
            "operator as discussion id",
            "{\"$gt\": \"\"}",
            top.clone(),
            "BAD_USER_INPUT",
        ),
        ("regex slug", d.as_str(), ".*".to_owned(), "BAD_USER_INPUT"),
        (
            "operator slug",
            d.as_str(),
            "{\"$ne\":1}".to_owned(),
            "BAD_USER_INPUT",
        ),
        (
            "regex under a real slug",
            d.as_str(),
            format!("{top}/.*"),
            "BAD_USER_INPUT",
        ),
        ("empty slug", d.as_str(), String::new(), "BAD_USER_INPUT"),
    ];
    for who in [Who::Ada, Who::Moderator] {
        for (what, discussion, slug, code) in &cases {
            let response = api.edit(who, discussion, slug, "new text").await;
            assert_code(&response, code, &format!("edit, {what}, by {who:?}"));
            assert!(!message(&response).is_empty());
            let response = api.delete(who, discussion, slug).await;
            assert_code(&response, code, &format!("delete, {what}, by {who:?}"));
            assert!(!message(&response).is_empty());
        }
    }
    for (what, id, code) in [
        ("unknown discussion", UNKNOWN_DISCUSSION, "NOT_FOUND"),
        ("malformed id", "not-an-id", "BAD_USER_INPUT"),
        ("operator as id", "{\"$gt\": \"\"}", "BAD_USER_INPUT"),
    ] {
        let response = api.lock(Who::Moderator, id, true).await;
        assert_code(&response, code, &format!("lock, {what}"));
    }
    // Nothing was changed.
    let now = api.read(Who::Moderator, &d, &top).await;
    assert_eq!(now["text"], json!("top"));
    assert_eq!(now["deleted"], json!(false));
    assert_eq!(now["editedAt"], Value::Null);
    assert_eq!(api.comment_count(&d).await, json!(1));
    assert_eq!(api.locked(&d).await, json!(false));
}

// ---------------------------------------------------------------------------------------------
// 7. Edits racing replies

/// Edits until it succeeds; the only acceptable failure is a retryable `CONFLICT`.
async fn edit_until_done(app: &TestApp, token: &str, d: &str, s: &str, text: &str) -> Value {
    for _ in 0..200 {
        let response = app
            .exec_as(Some(token), EDIT, json!({ "d": d, "s": s, "t": text }))
            .await;
        if succeeded(&response) {
            return response["data"]["editComment"].clone();
        }
        assert_eq!(
            error_code(&response),
            "CONFLICT",
            "an edit racing replies failed: {response:#}"
        );
        tokio::task::yield_now().await;
    }
    panic!("an edit kept conflicting");
}

async fn race(app: &Arc<TestApp>, d: &str, target: &str, original: &str) {
    let moderator = app.moderator_token("m1", "Mod");
    let edits: Vec<String> = (0..10).map(|i| format!("edit {i} of {target}")).collect();
    let mut edit_tasks = Vec::new();
    let mut reply_tasks = Vec::new();
    for (i, text) in edits.iter().enumerate() {
        let (app1, d1, s1, token, text) = (
            app.clone(),
            d.to_owned(),
            target.to_owned(),
            moderator.clone(),
            text.clone(),
        );
        edit_tasks.push(tokio::spawn(async move {
            let edited = edit_until_done(&app1, &token, &d1, &s1, &text).await;
            assert_eq!(edited["text"], json!(text));
        }));
        let (app2, d2, s2) = (app.clone(), d.to_owned(), target.to_owned());
        reply_tasks.push(tokio::spawn(async move {
            app2.post(&d2, Some(&s2), &format!("reply {i}")).await
        }));
    }
    for task in edit_tasks {
        task.await.expect("edit task");
    }
    let mut replies = HashSet::new();
    for task in reply_tasks {
        let slug = task.await.expect("reply task");
        assert!(
            slug.starts_with(&format!("{target}/")),
            "{slug} is under {target}"
        );
        replies.insert(slug);
    }
    assert_eq!(replies.len(), 10);

    let moderator_view = app
        .exec_as(
            Some(&moderator),
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) {
                text editedAt deleted replyCount author { id name }
                revisions { text editedAt editor { id name } }
                replies(first: 100) { totalCount nodes { slug text } }
                subDiscussion(first: 100) { totalCount } } }",
            json!({ "d": d, "s": target }),
        )
        .await;
    let c = data(moderator_view, "read the raced comment")["comment"].clone();
    assert_eq!(c["replyCount"], json!(10), "{c:#}");
    assert_eq!(c["replies"]["totalCount"], json!(10));
    assert_eq!(c["subDiscussion"]["totalCount"], json!(10));
    let stored: HashSet<String> = c["replies"]["nodes"]
        .as_array()
        .expect("replies")
        .iter()
        .map(|r| r["slug"].as_str().expect("slug").to_owned())
        .collect();
    assert_eq!(stored, replies, "every reply is stored under {target}");
    assert_eq!(c["author"], Who::Ada.author());
    assert_eq!(c["deleted"], json!(false));

    let revisions = c["revisions"].as_array().expect("revisions");
    assert_eq!(
        revisions.len(),
        10,
        "the original and 9 earlier edits: {c:#}"
    );
    assert_eq!(revisions[0]["text"], json!(original));
    assert_eq!(revisions[0]["editor"], Who::Ada.author());
    for r in &revisions[1..] {
        assert_eq!(r["editor"], Who::Moderator.author());
    }
    // Each edit's text is either a revision or the final text, exactly once.
    let mut seen: Vec<String> = revisions[1..]
        .iter()
        .map(|r| r["text"].as_str().expect("text").to_owned())
        .collect();
    let last = c["text"].as_str().expect("text").to_owned();
    assert!(
        edits.contains(&last),
        "the final text {last:?} is one of the edits"
    );
    seen.push(last);
    seen.sort();
    let mut all = edits.clone();
    all.sort();
    assert_eq!(seen, all, "no edit was lost or applied twice");
    let mut times: Vec<_> = revisions
        .iter()
        .map(|r| parse_time(&r["editedAt"]))
        .collect();
    times.push(parse_time(&c["editedAt"]));
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "revisions are oldest first: {c:#}"
    );
}

pub(crate) async fn edits_racing_replies_lose_nothing_case(settings: Settings) {
    let app = Arc::new(TestApp::with("lc_race", settings).await);
    let d = app.discussion("edits and replies").await;
    let top = app.post(&d, None, "the top").await;
    let other = app.post(&d, None, "another thread").await;
    let middle = app.post(&d, Some(&other), "the middle").await;
    let deep = app.post(&d, Some(&middle), "the deep one").await;
    race(&app, &d, &top, "the top").await;
    race(&app, &d, &deep, "the deep one").await;
    let data = app
        .ok(
            "query($d: ID!, $m: String!) { discussion(id: $d) { commentCount } comment(discussionId: $d, slug: $m) { text replyCount subDiscussion { totalCount } } }",
            json!({ "d": d, "m": middle }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(24));
    assert_eq!(
        data["comment"],
        json!({ "text": "the middle", "replyCount": 1, "subDiscussion": { "totalCount": 11 } })
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Round trips

/// Most database commands an edit or a delete may send, whatever the discussion's size: the
/// discussion, the comment, the change-feed mark on the discussion and the write, in one
/// transaction with its commit (5 on `PER_COMMENT` and `BUCKETED`: the mark in the transaction is
/// what keeps a move of the discussion from overlapping the write); on `EMBEDDED` the read that
/// finds the comment's position and the write, which carries the mark (4).
const WRITE_COMMANDS: u64 = 5;

pub(crate) async fn edits_and_deletes_have_bounded_round_trips_case(settings: Settings) {
    let app = TestApp::with("lc_round_trips", settings).await;
    let api = Calls::new(&app);
    let edit = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text editedAt } }";
    let delete = "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
    let mut costs: Vec<Vec<(String, u64)>> = Vec::new();
    for size in [10, 60] {
        let d = app.discussion(&format!("{size} comments")).await;
        let model = build_tree(&app, &d, size, 4, size as u64).await;
        let first = &model.slugs[0];
        let deepest = &model.slugs[3];
        let last = model.slugs.last().expect("comments");
        let steps: [(&str, Who, &str, &String); 5] = [
            ("author edits a thread", Who::Ada, edit, first),
            ("author edits a deep reply", Who::Ada, edit, deepest),
            ("moderator edits", Who::Moderator, edit, last),
            ("author deletes", Who::Ada, delete, last),
            ("moderator deletes", Who::Moderator, delete, deepest),
        ];
        let mut row = Vec::new();
        for (what, who, query, slug) in steps {
            let before = app.commands();
            let response = api
                .exec(
                    who,
                    query,
                    json!({ "d": d, "s": slug, "t": format!("{what}, edited") }),
                )
                .await;
            let cost = app.commands() - before;
            data(response, what);
            row.push((what.to_owned(), cost));
        }
        eprintln!("edit/delete costs at {size} comments: {row:?}");
        costs.push(row);
    }
    for row in &costs {
        for (what, cost) in row {
            assert!(
                *cost <= WRITE_COMMANDS,
                "{what} cost {cost} commands (bound {WRITE_COMMANDS}); costs {costs:?}"
            );
        }
    }
    assert_eq!(
        costs[0], costs[1],
        "edits and deletes cost the same at 10 and at 60 comments"
    );
}

// ---------------------------------------------------------------------------------------------
// Embedded only: the size counter and the size cap

fn replies_of(node: &Document) -> &[Bson] {
    match node.get("replies") {
        Some(Bson::Array(items)) => items.as_slice(),
        _ => &[],
    }
}

/// The comment element with a slug, anywhere in the document.
fn element<'a>(node: &'a Document, slug: &str) -> Option<&'a Document> {
    replies_of(node).iter().find_map(|item| {
        let c = item.as_document()?;
        if c.get_str("slug").ok() == Some(slug) {
            Some(c)
        } else {
            element(c, slug)
        }
    })
}

fn bson_len(document: &Document) -> i64 {
    mongodb::bson::to_vec(document).unwrap().len() as i64
}

/// The size of a comment element, nested replies included.
fn element_len(discussion: &Document, slug: &str) -> i64 {
    bson_len(element(discussion, slug).unwrap_or_else(|| panic!("no element {slug}")))
}

/// The sum of every comment element's own size (its `replies` counted empty).
fn own_sizes(node: &Document) -> i64 {
    replies_of(node)
        .iter()
        .map(|item| {
            let c = item.as_document().expect("a comment element");
            let mut own = c.clone();
            own.insert("replies", Bson::Array(Vec::new()));
            bson_len(&own) + own_sizes(c)
        })
        .sum()
}

fn counted_bytes(discussion: &Document) -> i64 {
    match discussion.get("embedded_bytes") {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        other => panic!("embedded_bytes is {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_size_counter_follows_edits_and_deletes() {
    let app = TestApp::new("lc_embedded_bytes", Layout::Embedded).await;
    let api = Calls::new(&app);
    let d = app.discussion("bytes").await;
    let t0 = api.post(Who::Ada, &d, None, "thread zero").await;
    let r = api.post(Who::Ada, &d, Some(&t0), "a reply").await;
    let leaf = api.post(Who::Ada, &d, Some(&r), "a leaf").await;
    let t1 = api.post(Who::Ada, &d, None, "thread one").await;
    let other = api.post(Who::Grace, &d, Some(&t0), "Grace's leaf").await;

    // Edits and deletes add and remove no element, so what the counter holds besides the
    // elements' own sizes stays the same.
    let start = raw_discussion(&app, &d).await;
    let besides = counted_bytes(&start) - own_sizes(&start);

    enum Op {
        Edit(String),
        Delete,
    }
    let steps = [
        (
            "a leaf grows",
            Who::Ada,
            Op::Edit("a leaf that grew ".repeat(40).trim_end().to_owned()),
            &leaf,
        ),
        (
            "the leaf shrinks",
            Who::Ada,
            Op::Edit("s".to_owned()),
            &leaf,
        ),
        (
            "a moderator edits the leaf",
            Who::Moderator,
            Op::Edit("moderated: ünïcödé ✓".to_owned()),
            &leaf,
        ),
        (
            "another leaf grows",
            Who::Grace,
            Op::Edit("Grace's leaf, longer now".to_owned()),
            &other,
        ),
        (
            "a comment with replies grows",
            Who::Ada,
            Op::Edit(
                "thread zero, with much more to say "
                    .repeat(10)
                    .trim_end()
                    .to_owned(),
            ),
            &t0,
        ),
        (
            "a comment with replies shrinks",
            Who::Moderator,
            Op::Edit("t0".to_owned()),
            &t0,
        ),
        ("the leaf is deleted", Who::Ada, Op::Delete, &leaf),
        (
            "the leaf is deleted twice",
            Who::Moderator,
            Op::Delete,
            &leaf,
        ),
        (
            "another leaf is deleted",
            Who::Moderator,
            Op::Delete,
            &other,
        ),
        (
            "a comment with replies is deleted",
            Who::Ada,
            Op::Delete,
            &r,
        ),
        ("a thread is deleted", Who::Ada, Op::Delete, &t1),
    ];
    for (what, who, op, slug) in steps {
        let before = raw_discussion(&app, &d).await;
        match op {
            Op::Edit(text) => {
                api.edit_ok(who, &d, slug, &text).await;
            }
            Op::Delete => {
                api.delete_ok(who, &d, slug).await;
            }
        }
        let after = raw_discussion(&app, &d).await;
        assert_eq!(
            counted_bytes(&after) - counted_bytes(&before),
            element_len(&after, slug) - element_len(&before, slug),
            "{what}: the counter moves by the element's change"
        );
        assert_eq!(
            counted_bytes(&after) - own_sizes(&after),
            besides,
            "{what}: the counter drifted"
        );
        assert_eq!(after.get("comment_count"), start.get("comment_count"));
    }

    // Refused edits write nothing.
    let before = raw_discussion(&app, &d).await;
    assert_code(
        &api.edit(Who::Ada, &d, &t0, "   ").await,
        "BAD_USER_INPUT",
        "blank edit",
    );
    assert_code(
        &api.edit(Who::Ada, &d, &leaf, "again").await,
        "COMMENT_DELETED",
        "edit of a tombstone",
    );
    assert_code(
        &api.edit(Who::Grace, &d, &t0, "not mine").await,
        "FORBIDDEN",
        "edit by another user",
    );
    assert_eq!(raw_discussion(&app, &d).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_edits_past_the_size_cap_are_refused() {
    let mut settings = Settings::new(Layout::Embedded);
    settings.embedded_max_bytes = 16 * 1024;
    settings.promote_embedded = false;
    let app = TestApp::with("lc_embedded_cap", settings).await;
    let api = Calls::new(&app);
    let filler = "y".repeat(1000);
    let much_longer = "w".repeat(5000);

    // Fill one discussion until a post is refused.
    let full = app.discussion("full up").await;
    let mut posted = Vec::new();
    loop {
        assert!(posted.len() < 100, "the cap never refused a post");
        let response = api.post_raw(Who::Ada, &full, None, &filler).await;
        match response["data"]["postComment"]["slug"].as_str() {
            Some(slug) => posted.push(slug.to_owned()),
            None => {
                assert_code(&response, "DISCUSSION_TOO_LARGE", "the post past the cap");
                break;
            }
        }
    }
    assert!(posted.len() >= 5, "only {} posts fitted", posted.len());
    let before = raw_discussion(&app, &full).await;
    for who in [Who::Ada, Who::Moderator] {
        let response = api.edit(who, &full, &posted[0], &much_longer).await;
        assert_code(
            &response,
            "DISCUSSION_TOO_LARGE",
            &format!("{who:?}'s long edit in a full discussion"),
        );
    }
    assert_eq!(
        raw_discussion(&app, &full).await,
        before,
        "nothing was written"
    );

    // Another discussion with one post fewer has room for about one more comment: not for a
    // much longer text, but for a shorter one.
    let close = app.discussion("nearly up").await;
    let mut near = Vec::new();
    for _ in 1..posted.len() {
        near.push(api.post(Who::Ada, &close, None, &filler).await);
    }
    let before = raw_discussion(&app, &close).await;
    for who in [Who::Ada, Who::Moderator] {
        let response = api.edit(who, &close, &near[0], &much_longer).await;
        assert_code(
            &response,
            "DISCUSSION_TOO_LARGE",
            &format!("{who:?}'s long edit near the cap"),
        );
        let message = message(&response);
        assert!(!message.is_empty());
    }
    assert_eq!(
        raw_discussion(&app, &close).await,
        before,
        "nothing was written"
    );
    api.edit_ok(Who::Ada, &close, &near[0], "a much shorter text")
        .await;
    let after = raw_discussion(&app, &close).await;
    assert_eq!(
        counted_bytes(&after) - counted_bytes(&before),
        element_len(&after, &near[0]) - element_len(&before, &near[0])
    );
    let now = api.read(Who::Ada, &close, &near[0]).await;
    assert_eq!(now["text"], json!("a much shorter text"));
    assert_eq!(now["revisions"][0]["text"], json!(filler));
}
