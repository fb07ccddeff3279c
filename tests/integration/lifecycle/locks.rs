//! Locked discussions, and bad inputs to edits, deletes and locks.

use super::*;

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
                error_message(&response).to_lowercase().contains("locked"),
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

pub(crate) async fn bad_lifecycle_inputs_get_clear_errors_case(settings: Settings) {
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
            assert!(!error_message(&response).is_empty());
            let response = api.delete(who, discussion, slug).await;
            assert_code(&response, code, &format!("delete, {what}, by {who:?}"));
            assert!(!error_message(&response).is_empty());
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
