//! Export and import: a threadql export imported into an empty database exports the same,
//! on every layout; imports run twice add nothing.

use serde_json::{json, Value};
use threadql::config::{ExportArgs, ImportFormat};
use threadql::domain::Layout;
use threadql::import::engine::{self, Options, Report};
use threadql::store::Storage as _;

use crate::support::{layout_name, TestApp};

const CREATE: &str = "mutation($t: String!, $l: StorageLayout, $k: String, $u: String) { createDiscussion(input: {title: $t, layout: $l, key: $k, url: $u}) { id } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }";
const VOTE: &str = "mutation($d: ID!, $s: String!, $v: VoteValue) { voteComment(discussionId: $d, slug: $s, value: $v) { score } }";
const PIN: &str = "mutation($d: ID!, $s: String!) { pinComment(discussionId: $d, slug: $s, pinned: true) { slug } }";
const MODE: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { id } }";
const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug } }";
const LOCK: &str = "mutation($d: ID!) { lockDiscussion(id: $d, locked: true) { id } }";

/// A discussion with everything an export carries: a tree four deep, an edit with its
/// revision, a tombstone with a reply, votes, pins, a held and a rejected comment, a
/// moderator's rejection of a public one, a moderation mode and a lock.
async fn populate(app: &TestApp, layout: Layout, n: usize) {
    let ada = app.token("u1", "Ada");
    let bob = app.token("u2", "Bob Ünïcödé");
    let moderator = app.moderator_token("m1", "Mod");
    let d = app.ok_as(Some(&ada),
        CREATE,
        json!({ "t": format!("Round trip {n}"), "l": layout_name(layout), "k": format!("page-{n}"), "u": format!("https://example.com/{n}") }),
    )
    .await["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let post = |token: String, parent: Option<String>, text: String| {
        let d = d.clone();
        async move {
            app.ok_as(
                Some(&token),
                POST,
                json!({ "d": d, "p": parent, "t": text }),
            )
            .await["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned()
        }
    };
    let a = post(ada.clone(), None, "first *words* — 東京".into()).await;
    let b = post(bob.clone(), Some(a.clone()), "a reply".into()).await;
    let c = post(ada.clone(), Some(b.clone()), "deeper".into()).await;
    let _d4 = post(bob.clone(), Some(c.clone()), "four deep".into()).await;
    let gone = post(bob.clone(), None, "to be deleted".into()).await;
    let _under = post(ada.clone(), Some(gone.clone()), "under a tombstone".into()).await;
    let other = post(bob.clone(), None, "second thread".into()).await;
    app.ok_as(
        Some(&ada),
        EDIT,
        json!({ "d": d, "s": a, "t": "first words, edited" }),
    )
    .await;
    app.ok_as(Some(&bob), DELETE, json!({ "d": d, "s": gone }))
        .await;
    app.ok_as(Some(&bob), VOTE, json!({ "d": d, "s": a, "v": "UP" }))
        .await;
    app.ok_as(Some(&ada), VOTE, json!({ "d": d, "s": b, "v": "DOWN" }))
        .await;
    app.ok_as(Some(&moderator), VOTE, json!({ "d": d, "s": a, "v": "UP" }))
        .await;
    app.ok_as(Some(&moderator), PIN, json!({ "d": d, "s": other }))
        .await;
    app.ok_as(Some(&moderator), PIN, json!({ "d": d, "s": a }))
        .await;
    app.ok_as(
        Some(&moderator),
        REJECT,
        json!({ "d": d, "s": c, "r": "off topic" }),
    )
    .await;
    app.ok_as(Some(&moderator), MODE, json!({ "d": d, "m": "PRE" }))
        .await;
    let held = post(bob.clone(), Some(a.clone()), "waits for a moderator".into()).await;
    let refused = post(bob.clone(), None, "refused while held".into()).await;
    app.ok_as(
        Some(&moderator),
        REJECT,
        json!({ "d": d, "s": refused, "r": "spam" }),
    )
    .await;
    let _ = held;
    app.ok_as(Some(&moderator), LOCK, json!({ "d": d })).await;
}

/// The export of everything in `app`, without its header (which carries the time).
async fn export(app: &TestApp) -> Vec<Value> {
    let args = ExportArgs {
        discussion: None,
        key: None,
        out: None,
    };
    let mut out = Vec::new();
    threadql::export::export(app.store().as_ref(), &args, &mut out)
        .await
        .expect("export");
    let text = String::from_utf8(out).expect("utf-8");
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("header")).expect("json");
    assert_eq!(header["format"], "threadql");
    assert_eq!(header["version"], 1);
    lines
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn options(format: &'static str, layout: Option<Layout>) -> Options {
    Options {
        format,
        layout,
        default_layout: Layout::PerComment,
        max_depth: 8,
        max_text_chars: 10_000,
        max_markdown_depth: 16,
        dry_run: false,
        lease: std::time::Duration::from_secs(2),
    }
}

/// Imports `bytes` of `format` into `app`.
async fn import(app: &TestApp, format: ImportFormat, bytes: Vec<u8>, options: &Options) -> Report {
    let input: Box<dyn std::io::BufRead + Send> = Box::new(std::io::Cursor::new(bytes));
    let items = threadql::import::items(format, input, None);
    engine::import(Some(app.api.services()), items, options, &|_, _| {})
        .await
        .expect("import")
}

fn to_file(lines: &[Value]) -> Vec<u8> {
    let mut out = String::from(
        "{\"format\":\"threadql\",\"version\":1,\"exported\":\"2026-01-01T00:00:00Z\"}\n",
    );
    for line in lines {
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out.into_bytes()
}

async fn round_trip(layout: Layout) {
    let source = TestApp::new(&format!("export_{}", layout.as_str()), layout).await;
    populate(&source, layout, 1).await;
    populate(&source, layout, 2).await;
    let first = export(&source).await;
    let kinds = |t: &str| first.iter().filter(|l| l["type"] == t).count();
    assert_eq!(kinds("discussion"), 2);
    assert_eq!(kinds("comment"), 2 * 9);
    assert_eq!(kinds("vote"), 2 * 3);
    assert!(first
        .iter()
        .any(|l| l["held"] == true && l["status"] == "pending"));
    assert!(first
        .iter()
        .any(|l| l["held"] == true && l["status"] == "rejected"));
    assert!(first
        .iter()
        .any(|l| l["held"] == false && l["status"] == "rejected"));
    assert!(first
        .iter()
        .any(|l| l["deleted"] == true && l["text"].is_null()));
    assert!(first
        .iter()
        .any(|l| l["revisions"].as_array().is_some_and(|r| r.len() == 1)));

    let target = TestApp::new(&format!("import_{}", layout.as_str()), layout).await;
    let report = import(
        &target,
        ImportFormat::Threadql,
        to_file(&first),
        &options("threadql", None),
    )
    .await;
    assert!(report.problems.is_empty(), "{report:#?}");
    assert_eq!(
        (
            report.discussions,
            report.comments,
            report.added,
            report.votes
        ),
        (2, 18, 18, 6)
    );
    let second = export(&target).await;
    assert_eq!(first.len(), second.len());
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a, b);
    }
    // Again: nothing is added, and the export is still the same.
    let again = import(
        &target,
        ImportFormat::Threadql,
        to_file(&first),
        &options("threadql", None),
    )
    .await;
    assert_eq!(
        (again.added, again.discussions_changed),
        (0, 0),
        "{again:#?}"
    );
    assert_eq!(export(&target).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_per_comment() {
    round_trip(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_embedded() {
    round_trip(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_bucketed() {
    round_trip(Layout::Bucketed).await;
}

/// A threadql file of `discussions` discussions in `layout`, each with `per` comments (a
/// third of them replies), as an export would write it.
fn synthetic(discussions: usize, per: usize, layout: Layout) -> Vec<Value> {
    use threadql::import::threadql::{time_text, CommentLine, DiscussionLine, Line};
    let mut lines = Vec::new();
    let start = 1_600_000_000_000_000_i64;
    for n in 0..discussions {
        let id = format!("{:024x}", 0xabc000 + n);
        let line = Line::Discussion(DiscussionLine {
            id: id.clone(),
            key: Some(format!("synthetic-{n}")),
            url: None,
            title: format!("Synthetic {n}"),
            layout: layout.as_str().to_owned(),
            locked: false,
            moderation: None,
            created_at: time_text(threadql::domain::Micros(start)),
            pinned: Vec::new(),
        });
        lines.push(serde_json::to_value(&line).expect("json"));
        let mut slugs: Vec<String> = Vec::new();
        for i in 0..per {
            let part = format!("{i:08}");
            let parent = (i % 3 == 2).then(|| slugs[i - 1].clone());
            let slug = match &parent {
                Some(p) => format!("{p}/{part}"),
                None => part,
            };
            let line = Line::Comment(CommentLine {
                discussion: id.clone(),
                slug: slug.clone(),
                parent_slug: parent,
                posted: time_text(threadql::domain::Micros(start + (i as i64 + 1) * 1_000_000)),
                author: threadql::domain::Author {
                    id: format!("user-{}", i % 7),
                    name: format!("User {}", i % 7),
                },
                text: Some(format!("comment {i} of discussion {n}")),
                deleted: false,
                edited_at: None,
                edited_by: None,
                revisions: Vec::new(),
                status: "approved".into(),
                reason: None,
                held: false,
                pinned: false,
                upvotes: 0,
                downvotes: 0,
            });
            lines.push(serde_json::to_value(&line).expect("json"));
            slugs.push(slug);
        }
    }
    lines
}

/// `threadql import` against the test database.
fn import_command(app: &TestApp, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"));
    command
        .arg("import")
        .args(args)
        .env("THREADQL_MONGODB_URI", crate::support::server_uri())
        .env("THREADQL_DATABASE", &app.database)
        .env("THREADQL_MOVE_LEASE_SECS", "1")
        .env("THREADQL_MOVE_CHUNK", "20")
        .env("THREADQL_ID_KEY", crate::support::TEST_ID_KEY)
        .env("THREADQL_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_killed_at_any_point_and_run_again_ends_with_the_file() {
    let app = TestApp::new("import_kill", Layout::Bucketed).await;
    let lines = synthetic(24, 40, Layout::Bucketed);
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("synthetic.jsonl");
    std::fs::write(&file, to_file(&lines)).expect("write");
    let path = file.to_str().expect("path");
    // Kill it at three points: after the first, the ninth and the seventeenth discussion
    // appeared (each mid-way through some discussion's import, most likely).
    for seen in [1_u64, 9, 17] {
        let mut child = import_command(&app, &[path, "--format", "threadql"])
            .spawn()
            .expect("spawn threadql import");
        loop {
            let count = app.store().discussions().count().await.expect("count");
            if count >= seen {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the import ended before it was killed: {status}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        child.start_kill().expect("kill -9");
        child.wait().await.expect("wait");
    }
    let out = import_command(&app, &[path, "--format", "threadql"])
        .output()
        .await
        .expect("run threadql import");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("discussions: 24"), "{stdout}");
    assert!(stdout.contains("comments: 960"), "{stdout}");
    assert!(stdout.contains("problems: 0"), "{stdout}");
    assert_eq!(export(&app).await, lines);
    // A run after the end adds nothing.
    let again = import_command(&app, &[path, "--format", "threadql"])
        .output()
        .await
        .expect("run threadql import");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("comments: 960 (0 added)"), "{stdout}");
    assert_eq!(export(&app).await, lines);
}

/// `n` Disqus-like comments of discussion `thread`, a third of them replies.
fn records(thread: &str, n: usize) -> Vec<threadql::import::source::Record> {
    use threadql::import::source::{Record, SourceComment, SourceDiscussion};
    let mut out = vec![Record::Discussion(SourceDiscussion {
        source_id: thread.to_owned(),
        key: Some("live-page".into()),
        url: Some("https://example.com/live".into()),
        title: "Live".into(),
        created: None,
    })];
    for i in 0..n {
        out.push(Record::Comment(SourceComment {
            discussion: thread.to_owned(),
            source_id: format!("{}", 5000 + i),
            parent: (i % 3 == 1).then(|| format!("{}", 5000 + i - 1)),
            posted: threadql::domain::Micros(1_500_000_000_000_000 + i as i64 * 1_000_000),
            author: threadql::domain::Author {
                id: "disqus:someone".into(),
                name: "Someone".into(),
            },
            text: format!("imported {i}"),
            deleted: false,
            status: threadql::domain::CommentStatus::Approved,
        }));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_made_during_an_import_are_kept() {
    for layout in Layout::ALL {
        let app = TestApp::new(&format!("import_live_{}", layout.as_str()), layout).await;
        let ada = app.token("u1", "Ada");
        let d = app
            .ok_as(
                Some(&ada),
                CREATE,
                json!({ "t": "Live", "l": layout_name(layout), "k": "live-page" }),
            )
            .await["createDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let before = app
            .ok_as(
                Some(&ada),
                POST,
                json!({ "d": d, "t": "before the import" }),
            )
            .await;
        let before = before["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned();
        let items = records("77", 300)
            .into_iter()
            .map(|r| Ok(threadql::import::engine::Item::Source(r)));
        let options = options("disqus", Some(layout));
        let services = app.api.services().clone();
        let importing = tokio::spawn(async move {
            engine::import(Some(&services), items, &options, &|_, _| {}).await
        });
        let mut posted = vec![before];
        for i in 0..15 {
            let r = app
                .ok_as(
                    Some(&ada),
                    POST,
                    json!({ "d": d, "t": format!("during {i}") }),
                )
                .await;
            posted.push(r["postComment"]["slug"].as_str().expect("slug").to_owned());
        }
        let report = importing.await.expect("join").expect("import");
        assert_eq!(
            (report.added, report.problems.len()),
            (300, 0),
            "{report:#?}"
        );
        let lines = export(&app).await;
        let comments: Vec<&Value> = lines.iter().filter(|l| l["type"] == "comment").collect();
        assert_eq!(comments.len(), 316, "{layout}");
        for slug in &posted {
            assert!(
                comments.iter().any(|c| c["slug"] == slug.as_str()),
                "{layout}: the post {slug} was lost"
            );
        }
        let discussion = &lines[0];
        assert_eq!(discussion["layout"], layout.as_str());
        let count = app
            .ok(
                "query($d: ID!) { discussion(id: $d) { commentCount } }",
                json!({ "d": d }),
            )
            .await;
        assert_eq!(count["discussion"]["commentCount"], 316);
    }
}

fn import_fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/import/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The slug part an import gives the comment `source` of discussion `thread`.
fn part_of(format: &str, thread: &str, source: &str) -> String {
    threadql::domain::SlugPart::derived(&format!("{format}:{thread}:{source}"))
        .as_str()
        .to_owned()
}

/// Runs `threadql import` with `args` against the app's database; returns (success, stdout,
/// stderr).
async fn import_cli(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let out = import_command(app, args)
        .output()
        .await
        .expect("run threadql import");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks an export against a fixture's expected trees: discussions in file order with their
/// keys, urls and titles; public comments in posting order, held ones after; each with its
/// parent, time (to the second), author, text, tombstone and status.
fn check_against(lines: &[Value], expected: &Value, format: &str, threads: &[&str]) {
    let discussions: Vec<&Value> = lines.iter().filter(|l| l["type"] == "discussion").collect();
    let wanted = expected["discussions"].as_array().expect("discussions");
    assert_eq!(discussions.len(), wanted.len());
    for ((got, want), thread) in discussions.iter().zip(wanted).zip(threads) {
        assert_eq!(got["key"], want["key"]);
        assert_eq!(got["url"], want["url"]);
        assert_eq!(got["title"], want["title"]);
        let id = got["id"].as_str().expect("id");
        let comments: Vec<&Value> = lines
            .iter()
            .filter(|l| l["type"] == "comment" && l["discussion"] == id)
            .collect();
        let all = want["comments"].as_array().expect("comments");
        let (public, held): (Vec<&Value>, Vec<&Value>) =
            all.iter().partition(|c| c["status"] == "approved");
        let in_order: Vec<&Value> = public.into_iter().chain(held).collect();
        assert_eq!(comments.len(), in_order.len(), "discussion {}", want["key"]);
        let slug_of = |source: &str| -> String {
            comments
                .iter()
                .map(|c| c["slug"].as_str().expect("slug"))
                .find(|s| s.rsplit('/').next() == Some(part_of(format, thread, source).as_str()))
                .unwrap_or_else(|| panic!("no comment for {format} {source}"))
                .to_owned()
        };
        for (got, want) in comments.iter().zip(&in_order) {
            let source = want["source"].as_str().expect("source");
            let what = format!("{format} comment {source}");
            assert_eq!(got["slug"], slug_of(source), "{what}: order");
            let parent = want["parent"].as_str().map(slug_of);
            assert_eq!(got["parentSlug"], json!(parent), "{what}: parent");
            let posted = got["posted"].as_str().expect("posted");
            assert_eq!(
                &posted[..19],
                &want["posted"].as_str().expect("posted")[..19],
                "{what}: time"
            );
            // Guest ids are stored keyed with the server key; the fixture lists them unkeyed.
            let mut author = want["author"].clone();
            let key = threadql::domain::ServerKey::parse(crate::support::TEST_ID_KEY).unwrap();
            if let Some(keyed) = author["id"]
                .as_str()
                .and_then(|id| threadql::domain::GuestIds::new(&key).keyed(id))
            {
                author["id"] = json!(keyed);
            }
            assert_eq!(got["author"], author, "{what}: author");
            assert_eq!(got["deleted"], want["deleted"], "{what}");
            match want["deleted"] == true {
                true => assert!(got["text"].is_null(), "{what}: a tombstone has no text"),
                false => assert_eq!(got["text"], want["text"], "{what}: text"),
            }
            assert_eq!(got["status"], want["status"], "{what}: status");
            assert_eq!(
                got["held"],
                json!(want["status"] == "pending"),
                "{what}: held"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disqus_and_wordpress_files_import_as_their_trees_on_every_layout() {
    let cases = [
        ("disqus", "disqus.xml", vec!["1001", "1002", "1003"]),
        ("wordpress", "wordpress.xml", vec!["11", "12"]),
    ];
    for (format, file, threads) in cases {
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(import_fixture(&file.replace(".xml", ".expected.json")))
                .expect("read"),
        )
        .expect("json");
        let report = &expected["report"];
        for layout in Layout::ALL {
            let app = TestApp::new(&format!("fixture_{format}_{}", layout.as_str()), layout).await;
            let path = import_fixture(file);
            let args = [
                path.as_str(),
                "--format",
                format,
                "--layout",
                layout.as_str(),
            ];
            let (ok, out, err) = import_cli(&app, &args).await;
            assert!(ok, "{out}\n{err}");
            let comments = report["comments"].as_u64().expect("comments");
            for line in [
                format!("discussions: {}", report["discussions"]),
                format!("comments: {comments} ({comments} added)"),
                format!("skipped: {}", report["skipped"]),
                format!("orphans: {}", report["orphans"]),
                "problems: 0".to_owned(),
            ] {
                assert!(out.contains(&line), "{line:?} in\n{out}");
            }
            let lines = export(&app).await;
            check_against(&lines, &expected, format, &threads);
            assert!(lines
                .iter()
                .filter(|l| l["type"] == "discussion")
                .all(|d| d["layout"] == layout.as_str()));
            // Again: nothing added, nothing changed.
            let (ok, again, err) = import_cli(&app, &args).await;
            assert!(ok, "{again}\n{err}");
            assert!(
                again.contains(&format!("comments: {comments} (0 added)")),
                "{again}"
            );
            assert_eq!(export(&app).await, lines);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_nothing_and_reports_the_same() {
    let app = TestApp::new("import_dry", Layout::PerComment).await;
    let path = import_fixture("disqus.xml");
    let (ok, out, err) = import_cli(&app, &[&path, "--format", "disqus", "--dry-run"]).await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("dry run: nothing was written"), "{out}");
    assert!(out.contains("comments: 10 (10 added)"), "{out}");
    assert!(out.contains("orphans: 1"), "{out}");
    assert_eq!(app.store().discussions().count().await.expect("count"), 0);
    let (ok, real, _) = import_cli(&app, &[&path, "--format", "disqus"]).await;
    assert!(ok);
    let lines = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("dry run"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&out), lines(&real));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_files_are_refused_with_a_message_and_write_nothing() {
    let app = TestApp::new("import_bad", Layout::PerComment).await;
    let dir = tempfile::tempdir().expect("dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.to_str().expect("path").to_owned()
    };
    let header = r#"{"format":"threadql","version":1,"exported":"2026-01-01T00:00:00Z"}"#;
    let discussion = r#"{"type":"discussion","id":"0000000000000000000abcde","key":"k","url":null,"title":"T","layout":"per_comment","locked":false,"moderation":null,"createdAt":"2026-01-01T00:00:00Z"}"#;
    let not_object = write(
        "array.jsonl",
        &format!("{header}\n{discussion}\n[1, 2, 3]\n"),
    );
    let version = write(
        "v9.jsonl",
        &format!("{{\"format\":\"threadql\",\"version\":9,\"exported\":\"x\"}}\n{discussion}\n"),
    );
    let garbage = write("garbage.xml", "<disqus><thread dsq:id=\"1\"><id>a</id>");
    let truncated = import_fixture("disqus-truncated.xml");
    let disqus = import_fixture("disqus.xml");
    let cases: [(&[&str], &str); 6] = [
        (&[&truncated, "--format", "disqus"], "disqus file, at byte"),
        (&[&garbage, "--format", "disqus"], "disqus file"),
        (&[&disqus, "--format", "wordpress"], "wordpress file"),
        (&[&disqus, "--format", "threadql"], "threadql"),
        (
            &[&not_object, "--format", "threadql"],
            "line 3: not a JSON object",
        ),
        (&[&version, "--format", "threadql"], "version 9"),
    ];
    for (args, message) in cases {
        let (ok, out, err) = import_cli(&app, args).await;
        assert!(!ok, "{args:?} succeeded: {out}");
        assert!(err.contains(message), "{args:?}: {message:?} not in {err}");
        assert_eq!(
            app.store().discussions().count().await.expect("count"),
            0,
            "{args:?} wrote something"
        );
    }
    let (ok, _, err) = import_cli(&app, &[&disqus, "--format", "csv"]).await;
    assert!(!ok);
    assert!(err.contains("invalid value 'csv'"), "{err}");
    let (ok, _, err) = import_cli(&app, &["/nonexistent/file.xml", "--format", "disqus"]).await;
    assert!(!ok);
    assert!(err.contains("cannot open the file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wordpress_item_without_a_post_id_imports_by_its_link() {
    let app = TestApp::new("import_wp_no_post_id", Layout::PerComment).await;
    let path = import_fixture("wordpress-no-post-id.xml");
    // `--key identifier` has nothing to key it by: the file is refused, naming the item.
    let (ok, out, err) = import_cli(
        &app,
        &[&path, "--format", "wordpress", "--key", "identifier"],
    )
    .await;
    assert!(!ok, "{out}");
    assert!(err.contains("has no <wp:post_id>"), "{err}");
    assert!(err.contains("https://wp.example.org/no-id/"), "{err}");
    assert_eq!(app.store().discussions().count().await.expect("count"), 0);
    // Keyed by its link (the default), it imports, and a second run adds nothing.
    for added in [3, 0] {
        let (ok, out, err) = import_cli(&app, &[&path, "--format", "wordpress"]).await;
        assert!(ok, "{out}\n{err}");
        assert!(
            out.contains(&format!("comments: 3 ({added} added)")),
            "{out}"
        );
        assert!(out.contains("problems: 0"), "{out}");
    }
    let lines = export(&app).await;
    let discussions: Vec<&Value> = lines.iter().filter(|l| l["type"] == "discussion").collect();
    assert_eq!(discussions[0]["key"], "https://wp.example.org/no-id/");
    assert_eq!(discussions[0]["title"], "No id here");
    assert_eq!(discussions[1]["key"], "https://wp.example.org/with-id/");
    let link = "https://wp.example.org/no-id/";
    let first = part_of("wordpress", link, "301");
    let reply = lines
        .iter()
        .find(|l| l["text"] == "A reply.")
        .expect("the reply");
    assert_eq!(reply["discussion"], discussions[0]["id"]);
    assert_eq!(reply["parentSlug"], json!(first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_grew_adds_only_its_new_comments_in_their_places() {
    let app = TestApp::new("import_grew", Layout::Bucketed).await;
    let run = |n: usize| {
        let items = records("88", n)
            .into_iter()
            .map(|r| Ok(threadql::import::engine::Item::Source(r)));
        let services = app.api.services().clone();
        async move {
            engine::import(Some(&services), items, &options("disqus", None), &|_, _| {})
                .await
                .expect("import")
        }
    };
    // The records' comments are numbered by time: a file of 40 holds those of 25 and 15 more.
    let first = run(25).await;
    assert_eq!(first.added, 25);
    let second = run(40).await;
    assert_eq!((second.comments, second.added), (40, 15), "{second:#?}");
    let lines = export(&app).await;
    let texts: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "comment")
        .map(|l| l["text"].as_str().expect("text").to_owned())
        .collect();
    let want: Vec<String> = (0..40).map(|i| format!("imported {i}")).collect();
    assert_eq!(texts, want, "posting order is time order");
    assert_eq!(
        lines[0]["layout"], "per_comment",
        "the default layout of `options`"
    );
    let third = run(40).await;
    assert_eq!(third.added, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discussion_whose_id_has_another_key_is_reported_and_skipped() {
    let source = TestApp::new("import_ids_src", Layout::PerComment).await;
    populate(&source, Layout::PerComment, 1).await;
    populate(&source, Layout::PerComment, 2).await;
    let mut lines = export(&source).await;
    let target = TestApp::new("import_ids_dst", Layout::PerComment).await;
    assert!(import(
        &target,
        ImportFormat::Threadql,
        to_file(&lines),
        &options("threadql", None)
    )
    .await
    .problems
    .is_empty());
    // The same ids with other keys: the first discussion is refused, the second (unchanged) is
    // there already; nothing else is touched.
    let first_id = lines[0]["id"].clone();
    for line in &mut lines {
        if line["type"] == "discussion" && line["id"] == first_id {
            line["key"] = json!("another-key");
        }
    }
    let report = import(
        &target,
        ImportFormat::Threadql,
        to_file(&lines),
        &options("threadql", None),
    )
    .await;
    assert_eq!(report.problems.len(), 1, "{report:#?}");
    assert!(report.problems[0].contains("another-key"), "{report:#?}");
    assert_eq!(report.added, 0);
    let after = export(&target).await;
    assert_eq!(after[0]["key"], "page-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_export_and_import_gzipped_files() {
    let source = TestApp::new("gz_src", Layout::Embedded).await;
    populate(&source, Layout::Embedded, 1).await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("all.jsonl.gz");
    let path = file.to_str().expect("path");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
        .args(["export", "--out", path])
        .env("THREADQL_MONGODB_URI", crate::support::server_uri())
        .env("THREADQL_DATABASE", &source.database)
        .env("THREADQL_LOG", "warn")
        .output()
        .await
        .expect("run threadql export");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("exported 1 discussions, 9 comments, 3 votes"));
    let bytes = std::fs::read(&file).expect("read");
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzipped");
    let target = TestApp::new("gz_dst", Layout::Embedded).await;
    let (ok, report, err) = import_cli(&target, &[path, "--format", "threadql"]).await;
    assert!(ok, "{report}\n{err}");
    assert_eq!(export(&target).await, export(&source).await);
}
