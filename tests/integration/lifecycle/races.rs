//! Edits racing replies to the same comment lose nothing.

use std::collections::HashSet;
use std::sync::Arc;

use super::*;

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
