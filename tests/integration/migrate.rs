//! Moving discussions between layouts: every ordered pair under concurrent posts, edits and
//! deletes; automatic promotion of full embedded discussions; a move killed mid-copy and run
//! again; concurrent moves of one discussion.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::doc;
use serde_json::{json, Value};
use threadql::domain::paging::Cursor;
use threadql::domain::{Comment, Discussion, DiscussionId, FullSlug, Layout, Slug, Window};
use threadql::store::{Listing, ReadScope, Storage};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::model::{build_tree, Rng};
use crate::support::{error_code, layout_name, load_discussion, server_uri, Settings, TestApp};

const LAYOUTS: [Layout; 3] = [Layout::PerComment, Layout::Embedded, Layout::Bucketed];

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: { discussionId: $d, parentSlug: $p, text: $t }) { slug } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: { discussionId: $d, slug: $s, text: $t }) { slug text } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
const MIGRATE: &str =
    "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout commentCount } }";

/// What a comment is expected to be after the move.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    full_slug: String,
    parent: Option<String>,
    posted: i64,
    author: String,
    text: Option<String>,
    deleted: bool,
    /// Earlier versions: text, time, editor.
    revisions: Vec<(String, i64, String)>,
}

impl Expected {
    fn of(c: &Comment) -> Self {
        Self {
            full_slug: c.full_slug.as_str().to_owned(),
            parent: c.parent.as_ref().map(|p| p.as_str().to_owned()),
            posted: c.posted.0,
            author: c.author.id.clone(),
            text: c.text.clone(),
            deleted: c.deleted,
            revisions: c
                .revisions
                .iter()
                .map(|r| (r.text.clone(), r.edited.0, r.editor.id.clone()))
                .collect(),
        }
    }
}

/// Every comment of the discussion, in the given order, read page by page by cursor.
async fn all(app: &TestApp, d: &Discussion, listing: Listing) -> Vec<Comment> {
    let layout = app.store().layout(d.layout).expect("layout");
    let mut out: Vec<Comment> = Vec::new();
    loop {
        let cursor = out.last().map(|c| match listing {
            Listing::Threaded => Cursor::Threaded(c.full_slug.clone()),
            _ => Cursor::Chronological {
                posted: c.posted,
                slug: c.slug.clone(),
            },
        });
        let page = layout
            .list(
                &ReadScope::new(),
                d,
                listing,
                &Window::After { cursor, limit: 97 },
            )
            .await
            .expect("list");
        out.extend(page.items.into_iter().map(std::sync::Arc::unwrap_or_clone));
        if !page.has_next {
            return out;
        }
    }
}

/// Checks every read of `d` against `expected`: both orders, every direct link, every replies
/// list, every sub-discussion and every count.
async fn check_reads(app: &TestApp, d: &Discussion, expected: &BTreeMap<String, Expected>) {
    let store = app.store();
    let layout = store.layout(d.layout).expect("layout");
    let chrono = all(app, d, Listing::Chronological).await;
    let got: BTreeMap<String, Expected> = chrono
        .iter()
        .map(|c| (c.slug.as_str().to_owned(), Expected::of(c)))
        .collect();
    assert_eq!(got.len(), expected.len(), "comment count");
    for (slug, want) in expected {
        assert_eq!(got.get(slug), Some(want), "comment {slug}");
    }
    let mut by_time: Vec<(&i64, &String)> = expected.iter().map(|(s, e)| (&e.posted, s)).collect();
    by_time.sort();
    let chrono_slugs: Vec<&str> = chrono.iter().map(|c| c.slug.as_str()).collect();
    let want_chrono: Vec<&str> = by_time.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(chrono_slugs, want_chrono, "chronological order");
    let threaded = all(app, d, Listing::Threaded).await;
    let mut by_path: Vec<(&String, &String)> =
        expected.iter().map(|(s, e)| (&e.full_slug, s)).collect();
    by_path.sort();
    let threaded_slugs: Vec<&str> = threaded.iter().map(|c| c.slug.as_str()).collect();
    let want_threaded: Vec<&str> = by_path.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(threaded_slugs, want_threaded, "threaded order");

    // Counts.
    let top = expected.values().filter(|e| e.parent.is_none()).count() as u64;
    assert_eq!(d.comment_count, expected.len() as u64, "commentCount");
    assert_eq!(d.thread_count, top, "threadCount");

    // Direct links, every one.
    let slugs: Vec<Slug> = expected
        .keys()
        .map(|s| Slug::parse(s).expect("slug"))
        .collect();
    let linked = layout
        .by_slugs(&ReadScope::new(), d, &slugs)
        .await
        .expect("by slugs");
    let linked: HashMap<String, Expected> = linked
        .iter()
        .map(|c| (c.slug.as_str().to_owned(), Expected::of(c)))
        .collect();
    for (slug, want) in expected {
        assert_eq!(linked.get(slug), Some(want), "direct link {slug}");
    }

    // Replies of every comment, and reply counts.
    let mut children: HashMap<&str, Vec<(i64, &str)>> = HashMap::new();
    for (slug, e) in expected {
        if let Some(p) = &e.parent {
            children.entry(p).or_default().push((e.posted, slug));
        }
    }
    let window = Window::After {
        cursor: None,
        limit: 10_000,
    };
    let replies = layout
        .replies(&ReadScope::new(), d, &slugs, &window)
        .await
        .expect("replies");
    for (slug, comment) in chrono.iter().map(|c| (c.slug.as_str(), c)) {
        let mut want = children.get(slug).cloned().unwrap_or_default();
        want.sort();
        let want: Vec<&str> = want.iter().map(|(_, s)| *s).collect();
        let got: Vec<&str> = replies
            .get(&comment.slug)
            .map(|p| p.items.iter().map(|c| c.slug.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(got, want, "replies of {slug}");
        assert_eq!(
            comment.reply_count,
            want.len() as u64,
            "replyCount of {slug}"
        );
    }

    // Sub-discussions of every comment (threaded order of its descendants), and their sizes.
    let roots: Vec<FullSlug> = chrono.iter().map(|c| c.full_slug.clone()).collect();
    let subs = layout
        .sub_discussions(&ReadScope::new(), d, &roots, &window)
        .await
        .expect("sub-discussions");
    let counts = layout
        .sub_discussion_counts(&ReadScope::new(), d, &roots)
        .await
        .expect("sub-discussion counts");
    for root in &roots {
        let prefix = format!("{}/", root.as_str());
        let want: Vec<&str> = by_path
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .map(|(_, s)| s.as_str())
            .collect();
        let got: Vec<&str> = subs
            .get(root)
            .map(|p| p.items.iter().map(|c| c.slug.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(got, want, "sub-discussion of {root}");
        assert_eq!(
            counts.get(root).copied().unwrap_or(0),
            want.len() as u64,
            "size of {root}"
        );
    }
}

/// Nothing of the discussion is left in any layout but its own.
async fn check_old_storage_gone(app: &TestApp, id: &str, now: Layout) {
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(&app.database);
    let per_comment = db
        .collection::<mongodb::bson::Document>("comments")
        .count_documents(doc! { "discussion_id": id })
        .await
        .expect("count comments");
    let pages = db
        .collection::<mongodb::bson::Document>("comment_pages")
        .count_documents(doc! { "discussion_id": id })
        .await
        .expect("count pages");
    let raw = db
        .collection::<mongodb::bson::Document>("discussions")
        .find_one(doc! { "_id": id })
        .await
        .expect("read discussion")
        .expect("discussion");
    assert_eq!(
        per_comment > 0,
        now == Layout::PerComment,
        "comments of {id}: {per_comment}"
    );
    assert_eq!(pages > 0, now == Layout::Bucketed, "pages of {id}: {pages}");
    assert_eq!(
        raw.contains_key("replies"),
        now == Layout::Embedded,
        "embedded comments"
    );
    assert!(!raw.contains_key("moving"), "the fence is gone");
}

fn moderator_of(app: &TestApp) -> String {
    app.moderator_token("mod-1", "Moderator")
}

/// What the concurrent writers did.
#[derive(Default)]
struct Changes {
    posted: Vec<(String, Option<String>, String)>,
    edited: HashMap<String, String>,
    deleted: Vec<String>,
}

/// Posts, edits and deletes while `running`; writer `k` of `n` edits and deletes only its own
/// share of `existing`, each comment at most once, so the end state does not depend on timing.
async fn write_while(
    app: Arc<TestApp>,
    d: String,
    existing: Vec<String>,
    (k, n): (usize, usize),
    running: Arc<AtomicBool>,
    changes: Arc<Mutex<Changes>>,
) {
    let token = moderator_of(&app);
    let mut rng = Rng::new(7 + k as u64);
    let mine: Vec<&String> = existing.iter().skip(k).step_by(n).collect();
    let mut next = 0;
    let mut i = 0;
    while running.load(Ordering::SeqCst) || i < 6 {
        i += 1;
        match i % 3 {
            0 => {
                let parent = existing[rng.below(existing.len())].clone();
                let text = format!("during the move {k}-{i}");
                let r = app
                    .exec_as(
                        Some(&token),
                        POST,
                        json!({ "d": d, "p": parent, "t": text }),
                    )
                    .await;
                let slug = r["data"]["postComment"]["slug"]
                    .as_str()
                    .unwrap_or_else(|| panic!("post during the move: {r:#}"))
                    .to_owned();
                changes
                    .lock()
                    .expect("changes")
                    .posted
                    .push((slug, Some(parent), text));
            }
            1 if next < mine.len() => {
                let slug = mine[next].clone();
                next += 1;
                let text = format!("edited during the move {k}-{i}");
                let r = app
                    .exec_as(Some(&token), EDIT, json!({ "d": d, "s": slug, "t": text }))
                    .await;
                if !r["errors"].is_null() && error_code(&r) == "COMMENT_DELETED" {
                    continue;
                }
                assert_eq!(r["data"]["editComment"]["text"], json!(text), "{r:#}");
                changes.lock().expect("changes").edited.insert(slug, text);
            }
            _ if next < mine.len() => {
                let slug = mine[next].clone();
                next += 1;
                let r = app
                    .exec_as(Some(&token), DELETE, json!({ "d": d, "s": slug }))
                    .await;
                assert_eq!(r["data"]["deleteComment"]["deleted"], json!(true), "{r:#}");
                changes.lock().expect("changes").deleted.push(slug);
            }
            _ => {}
        }
    }
}

async fn move_under_writes(from: Layout, to: Layout) {
    let app = Arc::new(
        TestApp::with(
            &format!("mv_{}_{}", from.as_str(), to.as_str()),
            Settings {
                bucket_size: 40,
                ..Settings::new(from)
            },
        )
        .await,
    );
    let d = app.discussion("moving").await;
    let model = build_tree(&app, &d, 500, 5, 11).await;
    let token = moderator_of(&app);
    // Edits and tombstones from before the move travel with it.
    for slug in model.slugs.iter().step_by(37) {
        let r = app
            .exec_as(
                Some(&token),
                EDIT,
                json!({ "d": d, "s": slug, "t": "edited before" }),
            )
            .await;
        assert!(r["errors"].is_null(), "{r:#}");
    }
    for slug in model.slugs.iter().skip(5).step_by(41) {
        let r = app
            .exec_as(Some(&token), DELETE, json!({ "d": d, "s": slug }))
            .await;
        assert!(r["errors"].is_null(), "{r:#}");
    }
    let before = load_discussion(app.store(), &d).await;
    assert_eq!(before.layout, from);
    let mut expected: BTreeMap<String, Expected> = all(&app, &before, Listing::Chronological)
        .await
        .iter()
        .map(|c| (c.slug.as_str().to_owned(), Expected::of(c)))
        .collect();
    assert_eq!(expected.len(), 500);

    let running = Arc::new(AtomicBool::new(true));
    let changes = Arc::new(Mutex::new(Changes::default()));
    let writers: Vec<_> = (0..3)
        .map(|k| {
            tokio::spawn(write_while(
                app.clone(),
                d.clone(),
                model.slugs.clone(),
                (k, 3),
                running.clone(),
                changes.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let moved = app
        .exec_as(
            Some(&token),
            MIGRATE,
            json!({ "d": d, "l": layout_name(to) }),
        )
        .await;
    assert_eq!(
        moved["data"]["migrateDiscussion"]["layout"],
        json!(layout_name(to)),
        "{moved:#}"
    );
    running.store(false, Ordering::SeqCst);
    for w in writers {
        w.await.expect("writer");
    }

    let changes = std::mem::take(&mut *changes.lock().expect("changes"));
    assert!(
        !changes.posted.is_empty() && !changes.edited.is_empty() && !changes.deleted.is_empty()
    );
    let after = load_discussion(app.store(), &d).await;
    assert_eq!(after.layout, to);
    let now = all(&app, &after, Listing::Chronological).await;
    let by_slug: HashMap<&str, &Comment> = now.iter().map(|c| (c.slug.as_str(), c)).collect();
    for (slug, parent, text) in &changes.posted {
        let c = by_slug
            .get(slug.as_str())
            .unwrap_or_else(|| panic!("comment {slug} posted during the move is lost"));
        assert_eq!(c.parent.as_ref().map(Slug::as_str), parent.as_deref());
        assert_eq!(c.text.as_deref(), Some(text.as_str()));
        expected.insert(slug.clone(), Expected::of(c));
    }
    for (slug, text) in &changes.edited {
        let e = expected.get_mut(slug).expect("edited comment");
        let c = by_slug[slug.as_str()];
        // The edit kept every earlier version and added the one it replaced.
        assert_eq!(
            c.revisions.len(),
            e.revisions.len() + 1,
            "revisions of {slug}"
        );
        assert_eq!(
            Expected::of(c).revisions[..e.revisions.len()],
            e.revisions[..]
        );
        assert_eq!(
            c.revisions.last().map(|r| r.text.as_str()),
            e.text.as_deref()
        );
        *e = Expected {
            text: Some(text.clone()),
            ..Expected::of(c)
        };
    }
    for slug in &changes.deleted {
        let e = expected.get_mut(slug).expect("deleted comment");
        e.deleted = true;
        e.text = None;
        e.revisions.clear();
    }
    check_reads(&app, &after, &expected).await;
    check_old_storage_gone(&app, &d, to).await;
    // Moving again to where it is only tidies up.
    let again = app
        .exec_as(
            Some(&token),
            MIGRATE,
            json!({ "d": d, "l": layout_name(to) }),
        )
        .await;
    assert_eq!(
        again["data"]["migrateDiscussion"]["layout"],
        json!(layout_name(to))
    );
    check_reads(&app, &load_discussion(app.store(), &d).await, &expected).await;
}

macro_rules! pairs {
    ($($name:ident: $from:expr => $to:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            move_under_writes($from, $to).await;
        }
    )*};
}

pairs! {
    per_comment_to_embedded_under_writes: Layout::PerComment => Layout::Embedded;
    per_comment_to_bucketed_under_writes: Layout::PerComment => Layout::Bucketed;
    embedded_to_per_comment_under_writes: Layout::Embedded => Layout::PerComment;
    embedded_to_bucketed_under_writes: Layout::Embedded => Layout::Bucketed;
    bucketed_to_per_comment_under_writes: Layout::Bucketed => Layout::PerComment;
    bucketed_to_embedded_under_writes: Layout::Bucketed => Layout::Embedded;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_moderators_move_and_bad_input_is_refused() {
    let app = TestApp::new("mv_auth", Layout::PerComment).await;
    let d = app.discussion("auth").await;
    let user = app.token("u1", "User");
    let r = app
        .exec_as(Some(&user), MIGRATE, json!({ "d": d, "l": "BUCKETED" }))
        .await;
    assert_eq!(error_code(&r), "FORBIDDEN", "{r:#}");
    let r = app
        .exec_as(None, MIGRATE, json!({ "d": d, "l": "BUCKETED" }))
        .await;
    assert_eq!(error_code(&r), "UNAUTHENTICATED", "{r:#}");
    let token = moderator_of(&app);
    let r = app
        .exec_as(
            Some(&token),
            MIGRATE,
            json!({ "d": "not an id", "l": "BUCKETED" }),
        )
        .await;
    assert_eq!(error_code(&r), "BAD_USER_INPUT", "{r:#}");
    let missing = DiscussionId::generate();
    let r = app
        .exec_as(
            Some(&token),
            MIGRATE,
            json!({ "d": missing.as_str(), "l": "BUCKETED" }),
        )
        .await;
    assert_eq!(error_code(&r), "NOT_FOUND", "{r:#}");
    let r = app
        .exec_as(Some(&token), MIGRATE, json!({ "d": d, "l": "SIDEWAYS" }))
        .await;
    assert!(!r["errors"].is_null(), "{r:#}");
    assert_eq!(
        load_discussion(app.store(), &d).await.layout,
        Layout::PerComment
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discussion_too_large_for_one_document_is_not_moved_to_embedded() {
    let settings = Settings {
        embedded_max_bytes: 16 * 1024,
        ..Settings::new(Layout::PerComment)
    };
    let app = TestApp::with("mv_too_large", settings).await;
    let d = app.discussion("big").await;
    build_tree(&app, &d, 120, 3, 5).await;
    let token = moderator_of(&app);
    let r = app
        .exec_as(Some(&token), MIGRATE, json!({ "d": d, "l": "EMBEDDED" }))
        .await;
    assert_eq!(error_code(&r), "DISCUSSION_TOO_LARGE", "{r:#}");
    let after = load_discussion(app.store(), &d).await;
    assert_eq!(after.layout, Layout::PerComment);
    assert_eq!(all(&app, &after, Listing::Chronological).await.len(), 120);
    check_old_storage_gone(&app, &d, Layout::PerComment).await;
    // And posting goes on.
    app.post(&d, None, "still open").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_embedded_discussion_is_promoted_under_concurrent_posts() {
    let settings = Settings {
        embedded_max_bytes: 16 * 1024,
        bucket_size: 25,
        ..Settings::new(Layout::Embedded)
    };
    let app = Arc::new(TestApp::with("mv_promote", settings).await);
    let d = app.discussion("promoted").await;
    let first = app.post(&d, None, "the first").await;
    let token = moderator_of(&app);
    let posters: Vec<_> = (0..6)
        .map(|k| {
            let (app, d, first, token) = (app.clone(), d.clone(), first.clone(), token.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in 0..30 {
                    let parent = if i % 2 == 0 {
                        Some(first.clone())
                    } else {
                        None
                    };
                    let text = format!("poster {k} comment {i} {}", "x".repeat(120));
                    let r = app
                        .exec_as(
                            Some(&token),
                            POST,
                            json!({ "d": d, "p": parent, "t": text }),
                        )
                        .await;
                    let slug = r["data"]["postComment"]["slug"]
                        .as_str()
                        .unwrap_or_else(|| panic!("post {k}/{i}: {r:#}"))
                        .to_owned();
                    mine.push(slug);
                }
                mine
            })
        })
        .collect();
    let mut slugs = vec![first];
    for p in posters {
        slugs.extend(p.await.expect("poster"));
    }
    let after = load_discussion(app.store(), &d).await;
    assert_eq!(after.layout, Layout::Bucketed, "promoted");
    assert_eq!(after.moves, 1, "promoted once");
    assert_eq!(after.comment_count, slugs.len() as u64);
    let stored = all(&app, &after, Listing::Chronological).await;
    let mut got: Vec<&str> = stored.iter().map(|c| c.slug.as_str()).collect();
    let mut want: Vec<&str> = slugs.iter().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "every acknowledged post is stored once");
    check_old_storage_gone(&app, &d, Layout::Bucketed).await;
}

/// `threadql migrate` against the test database, with small chunks and a short lease.
fn migrate_command(app: &TestApp, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"));
    command
        .arg("migrate")
        .args(args)
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_DATABASE", &app.database)
        .env("THREADQL_MOVE_CHUNK", "25")
        .env("THREADQL_MOVE_LEASE_SECS", "1")
        .env("THREADQL_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_killed_mid_copy_runs_again_and_a_second_move_is_refused_meanwhile() {
    let app = TestApp::with(
        "mv_crash",
        Settings {
            bucket_size: 20,
            ..Settings::new(Layout::PerComment)
        },
    )
    .await;
    let d = app.discussion("crash").await;
    let model = build_tree(&app, &d, 600, 4, 3).await;
    let token = moderator_of(&app);
    // The moderator's first mutation records them (a write made once): made now, it does not
    // widen the window between the copy's progress line and the kill below.
    let r = app
        .exec_as(
            Some(&token),
            "mutation { unbanUser(userId: \"nobody\") }",
            json!({}),
        )
        .await;
    assert_eq!(r["data"]["unbanUser"], json!(false), "{r:#}");

    let mut child = migrate_command(&app, &["--discussion", &d, "--to", "bucketed"])
        .spawn()
        .expect("spawn threadql migrate");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    // Kill it once it has written part of the copy.
    loop {
        let line = lines
            .next_line()
            .await
            .expect("read progress")
            .expect("the move ended before writing");
        if line.contains("writing") {
            // Meanwhile a second move is refused, and reads still answer from the old layout.
            let r = app
                .exec_as(Some(&token), MIGRATE, json!({ "d": d, "l": "EMBEDDED" }))
                .await;
            assert_eq!(error_code(&r), "CONFLICT", "{r:#}");
            child.start_kill().expect("kill");
            break;
        }
    }
    child.wait().await.expect("wait");
    let stranded = load_discussion(app.store(), &d).await;
    assert_eq!(stranded.layout, Layout::PerComment, "not switched");
    assert_eq!(
        all(&app, &stranded, Listing::Chronological).await.len(),
        600
    );

    // A post waits out the dead move's lease and lands in the old layout.
    let late = app.post(&d, Some(&model.slugs[3]), "after the crash").await;

    let done = migrate_command(&app, &["--discussion", &d, "--to", "bucketed"])
        .output()
        .await
        .expect("run threadql migrate again");
    assert!(
        done.status.success(),
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    let after = load_discussion(app.store(), &d).await;
    assert_eq!(after.layout, Layout::Bucketed);
    let stored = all(&app, &after, Listing::Chronological).await;
    assert_eq!(stored.len(), 601);
    assert!(stored.iter().any(|c| c.slug.as_str() == late));
    for slug in &model.slugs {
        assert!(
            stored.iter().any(|c| c.slug.as_str() == slug),
            "{slug} kept"
        );
    }
    check_old_storage_gone(&app, &d, Layout::Bucketed).await;

    // `--all-from` moves every discussion of a layout.
    let other = app.discussion("another").await;
    app.post(&other, None, "one").await;
    let all_from = migrate_command(&app, &["--all-from", "per_comment", "--to", "embedded"])
        .output()
        .await
        .expect("threadql migrate --all-from");
    assert!(
        all_from.status.success(),
        "{}",
        String::from_utf8_lossy(&all_from.stderr)
    );
    assert_eq!(
        load_discussion(app.store(), &other).await.layout,
        Layout::Embedded
    );
    assert_eq!(
        load_discussion(app.store(), &d).await.layout,
        Layout::Bucketed
    );
    let bad = migrate_command(&app, &["--discussion", "nope", "--to", "embedded"])
        .output()
        .await
        .expect("threadql migrate with a bad id");
    assert!(!bad.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_moves_of_one_discussion_do_not_both_proceed() {
    let app = Arc::new(TestApp::new("mv_twice", Layout::PerComment).await);
    let d = app.discussion("twice").await;
    build_tree(&app, &d, 300, 3, 9).await;
    let token = moderator_of(&app);
    let runs: Vec<_> = LAYOUTS
        .iter()
        .filter(|l| **l != Layout::PerComment)
        .map(|&to| {
            let (app, d, token) = (app.clone(), d.clone(), token.clone());
            tokio::spawn(async move {
                app.exec_as(
                    Some(&token),
                    MIGRATE,
                    json!({ "d": d, "l": layout_name(to) }),
                )
                .await
            })
        })
        .collect();
    let mut outcomes: Vec<Value> = Vec::new();
    for r in runs {
        outcomes.push(r.await.expect("move"));
    }
    let won: Vec<&Value> = outcomes.iter().filter(|r| r["errors"].is_null()).collect();
    for r in outcomes.iter().filter(|r| !r["errors"].is_null()) {
        assert_eq!(error_code(r), "CONFLICT", "{r:#}");
    }
    assert!(!won.is_empty());
    let now = load_discussion(app.store(), &d).await;
    assert_eq!(all(&app, &now, Listing::Chronological).await.len(), 300);
    check_old_storage_gone(&app, &d, now.layout).await;
}
