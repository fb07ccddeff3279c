//! Import bombs, run as `threadql import` processes: deep nesting is refused in memory
//! linear in the depth, a huge text is left out without being held, every comment passes the
//! rules of a post (or is reported and left out), self-votes are dropped, and a gzip file
//! expands only as far as the configured bound.

use serde_json::json;
use threadql::domain::Layout;

use crate::support::{
    disqus_export, disqus_post, import_measured, threadql_file, write_gzipped, TestApp,
};

/// The peak resident memory an import of these files may reach, in MiB (the issue measured
/// 478 MB for the nesting and 370 MB for the text).
const PEAK_MIB: f64 = 64.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_nested_twenty_thousand_deep_is_refused_in_little_memory() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("deep.xml.gz");
    let export = disqus_export(&disqus_post(1, "ann", "DEEP"));
    let (head, tail) = export.split_once("DEEP").expect("the post");
    let (open, close) = ("<a>".repeat(20_000), "</a>".repeat(20_000));
    write_gzipped(
        &path,
        [
            head.as_bytes(),
            open.as_bytes(),
            close.as_bytes(),
            tail.as_bytes(),
        ]
        .into_iter(),
    );
    let size = std::fs::metadata(&path).expect("the file").len();
    assert!(size < 2_000, "a small file: {size} bytes");
    let file = path.to_str().expect("path");
    let run = import_measured(None, &[file, "--format", "disqus", "--dry-run"], &[]).await;
    assert!(!run.ok, "{run:#?}");
    assert!(run.stderr.contains("nests deeper than 256"), "{run:#?}");
    assert!(run.peak_mib < PEAK_MIB, "peak {:.0} MiB", run.peak_mib);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifty_megabyte_text_is_left_out_without_being_held() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("long.xml.gz");
    let export = disqus_export(&format!(
        "{}\n{}",
        disqus_post(1, "ann", "<![CDATA[<p>fine</p>]]>"),
        disqus_post(2, "bob", "<![CDATA[LONG]]>")
    ));
    let (head, tail) = export.split_once("LONG").expect("the long post");
    let megabyte = vec![b'a'; 1 << 20];
    let parts = std::iter::once(head.as_bytes())
        .chain(std::iter::repeat_n(megabyte.as_slice(), 50))
        .chain(std::iter::once(tail.as_bytes()));
    write_gzipped(&path, parts);
    let size = std::fs::metadata(&path).expect("the file").len();
    assert!(size < 100_000, "a small file: {size} bytes");
    let file = path.to_str().expect("path");
    let run = import_measured(None, &[file, "--format", "disqus", "--dry-run"], &[]).await;
    assert!(run.ok, "{run:#?}");
    assert!(
        run.stdout.contains("comments: 1 (1 added)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("refused: 1"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("refused disqus 2 in discussion 1: its text is longer than 1048576 bytes"),
        "{}",
        run.stdout
    );
    assert!(run.peak_mib < PEAK_MIB, "peak {:.0} MiB", run.peak_mib);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_imported_comment_follows_the_rules_of_a_post_and_self_votes_are_dropped() {
    let app = TestApp::new("probe_import_rules", Layout::PerComment).await;
    let moderator = app.moderator_token("mod", "Mo");
    app.ok_as(
        Some(&moderator),
        "mutation { reserveName(name: \"Staff\") { name } }",
        json!({}),
    )
    .await;
    let id = "0123456789abcdef01234567";
    let comment = |slug: &str, second: u32, author: (&str, &str), text: &str| {
        json!({
            "type": "comment", "discussion": id, "slug": slug, "parentSlug": null,
            "posted": format!("2020-01-02T00:00:{second:02}Z"),
            "author": { "id": author.0, "name": author.1 },
            "text": text, "deleted": false, "editedAt": null, "status": "approved",
        })
    };
    let vote = |slug: &str, voter: &str| json!({ "type": "vote", "discussion": id, "slug": slug, "voter": voter, "value": "UP" });
    let lines = [
        json!({
            "type": "discussion", "id": id, "key": "rules", "url": null, "title": "Rules",
            "layout": "per_comment", "locked": false, "moderation": null,
            "createdAt": "2020-01-01T00:00:00Z",
        }),
        comment("aaaaaaa1", 1, ("u1", "Ann"), "fine"),
        comment("aaaaaaa2", 2, ("u2", "Bob"), &"x".repeat(30_001)),
        comment("aaaaaaa3", 3, ("u2", "Bob"), "bell\u{1}"),
        comment("aaaaaaa4", 4, ("u2", "Bob"), "evil\u{202E}exe"),
        comment("aaaaaaa5", 5, ("", "Nobody"), "no id"),
        comment("aaaaaaa6", 6, ("u6", ""), "no name"),
        comment("aaaaaaa7", 7, ("u7", "[deleted]"), "a placeholder"),
        comment("aaaaaaa8", 8, ("x\ny", "Eve"), "a broken id"),
        comment("aaaaaaa9", 9, ("u9", "STAFF"), "a reserved name"),
        vote("aaaaaaa1", "u1"),
        vote("aaaaaaa1", "u2"),
        vote("aaaaaaa2", "u3"),
    ];
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("rules.jsonl");
    std::fs::write(&path, threadql_file(&lines)).expect("write");
    let file = path.to_str().expect("path");
    let run = import_measured(Some(&app), &[file, "--format", "threadql"], &[]).await;
    assert!(run.ok, "{run:#?}");
    let report = &run.stdout;
    assert!(report.contains("comments: 2 (2 added)"), "{report}");
    assert!(report.contains("votes: 1"), "{report}");
    assert!(report.contains("refused: 9"), "{report}");
    for (slug, why) in [
        (
            "aaaaaaa2",
            "comment text has 30001 characters; the limit is 10000",
        ),
        (
            "aaaaaaa3",
            "comment text must not contain control characters (found U+0001)",
        ),
        ("aaaaaaa5", "user id refused"),
        ("aaaaaaa6", "name refused"),
        ("aaaaaaa7", "\"[deleted]\" is what the API shows"),
        ("aaaaaaa8", "user id refused"),
        ("aaaaaaa9", "its author's name \"STAFF\" is reserved"),
    ] {
        let line = report
            .lines()
            .find(|l| l.contains(&format!("comment {slug} of discussion {id}")))
            .unwrap_or_else(|| panic!("{slug} is not reported:\n{report}"));
        assert!(line.contains(why) && line.ends_with("left out"), "{line}");
    }
    assert!(
        report.contains("a vote by \"u1\" on comment aaaaaaa1 of discussion 0123456789abcdef01234567: a vote on one's own comment: dropped"),
        "{report}"
    );
    assert!(
        report.contains("a vote by \"u3\" on comment aaaaaaa2 of discussion 0123456789abcdef01234567: the comment is not imported: dropped"),
        "{report}"
    );
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { comments(first: 20) { nodes { slug text upvotes } } } }",
            json!({ "d": id }),
        )
        .await;
    assert_eq!(
        data["discussion"]["comments"]["nodes"],
        json!([
            { "slug": "aaaaaaa1", "text": "fine", "upvotes": 1 },
            { "slug": "aaaaaaa4", "text": "evil\u{202E}exe\u{202C}", "upvotes": 0 },
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_file_expands_only_as_far_as_the_bound() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("padded.jsonl.gz");
    let mut bytes = threadql_file(&[]);
    bytes.extend(std::iter::repeat_n(b'\n', 100_000));
    write_gzipped(&path, std::iter::once(bytes.as_slice()));
    let file = path.to_str().expect("path");
    let args = [file, "--format", "threadql", "--dry-run"];
    let bounded = |flag: Option<&'static str>| {
        let mut args = args.to_vec();
        if let Some(flag) = flag {
            args.extend(["--max-expanded", flag]);
        }
        args
    };
    let run = import_measured(None, &bounded(Some("1000")), &[]).await;
    assert!(!run.ok, "{run:#?}");
    assert!(run.stderr.contains("expands past 1000 bytes"), "{run:#?}");
    assert!(
        run.stderr.contains("THREADQL_IMPORT_MAX_EXPANDED"),
        "{run:#?}"
    );
    let small = [("THREADQL_IMPORT_MAX_EXPANDED", "1000")];
    let run = import_measured(None, &bounded(None), &small).await;
    assert!(
        !run.ok && run.stderr.contains("expands past 1000 bytes"),
        "{run:#?}"
    );
    // The flag wins over the variable; the default lets the file through.
    let run = import_measured(None, &bounded(Some("200000")), &small).await;
    assert!(run.ok, "{run:#?}");
    let run = import_measured(None, &bounded(None), &[]).await;
    assert!(run.ok, "{run:#?}");
}
