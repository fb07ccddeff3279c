//! Who may edit and delete, and when; revisions; the text rules of edits.

use std::time::Duration;

use super::*;

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

pub(crate) async fn edits_validate_their_text_case(mut settings: Settings) {
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
            assert!(!error_message(&response).is_empty());
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
