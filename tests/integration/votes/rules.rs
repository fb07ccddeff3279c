//! The rules of voting, against every layout: one vote per user per comment, repeating,
//! switching and removing it, and every refusal with its code.

use super::*;

/// The contract case: one vote per user per comment; repeating is a no-op, switching moves the
/// vote, `null` removes it; and every refusal has its code and changes nothing.
pub(crate) async fn votes_follow_the_rules_case(mut settings: Settings) {
    settings.vote_rate_limit = "30/60s".parse().expect("rate");
    let app = TestApp::with("vote_rules", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let author = app.token("author", "Lin");
    let d = app.discussion("votes").await;
    let a = app.post_as(&author, &d, None, "vote on me").await;
    let b = app.post_as(&author, &d, Some(&a), "and on me").await;

    let expect = |v: &Value, up: u64, down: u64, mine: Option<Vote>| {
        assert_eq!(v["upvotes"], json!(up), "{v}");
        assert_eq!(v["downvotes"], json!(down), "{v}");
        assert_eq!(v["score"], json!(up as i64 - down as i64), "{v}");
        assert_eq!(v["viewerVote"], vote_value(mine), "{v}");
    };
    // A new comment has no votes.
    expect(&counts_as(&app, Some("v1"), &d, &a).await, 0, 0, None);
    expect(&counts_as(&app, None, &d, &a).await, 0, 0, None);

    // Up; the same again changes nothing; a second user down.
    expect(
        &vote_ok(&app, "v1", &d, &a, Some(Vote::Up)).await,
        1,
        0,
        Some(Vote::Up),
    );
    expect(
        &vote_ok(&app, "v1", &d, &a, Some(Vote::Up)).await,
        1,
        0,
        Some(Vote::Up),
    );
    expect(
        &vote_ok(&app, "v2", &d, &a, Some(Vote::Down)).await,
        1,
        1,
        Some(Vote::Down),
    );
    expect(
        &vote_ok(&app, "v3", &d, &a, Some(Vote::Up)).await,
        2,
        1,
        Some(Vote::Up),
    );
    // Switching moves one count to the other side, both ways.
    expect(
        &vote_ok(&app, "v1", &d, &a, Some(Vote::Down)).await,
        1,
        2,
        Some(Vote::Down),
    );
    expect(
        &vote_ok(&app, "v2", &d, &a, Some(Vote::Up)).await,
        2,
        1,
        Some(Vote::Up),
    );
    // Removing, and removing what is not there.
    expect(&vote_ok(&app, "v3", &d, &a, None).await, 1, 1, None);
    expect(&vote_ok(&app, "v3", &d, &a, None).await, 1, 1, None);
    expect(&vote_ok(&app, "v4", &d, &a, None).await, 1, 1, None);
    // Votes on one comment leave its reply alone.
    expect(
        &vote_ok(&app, "v1", &d, &b, Some(Vote::Up)).await,
        1,
        0,
        Some(Vote::Up),
    );
    // Each reader sees their own vote; the counters are everyone's.
    for (user, mine) in [
        (Some("v1"), Some(Vote::Down)),
        (Some("v2"), Some(Vote::Up)),
        (Some("v3"), None),
        (Some("author"), None),
        (None, None),
    ] {
        expect(&counts_as(&app, user, &d, &a).await, 1, 1, mine);
    }
    let v1 = app.token("v1", "v1");
    let list = app
        .exec_as(
            Some(v1.as_str()),
            "query($d: ID!) { discussion(id: $d) { comments(first: 10) { nodes { slug upvotes downvotes score viewerVote } } threads(first: 10) { nodes { slug upvotes viewerVote replies(first: 10) { nodes { slug upvotes viewerVote } } } } } }",
            json!({ "d": d }),
        )
        .await;
    let discussion = &list["data"]["discussion"];
    expect(&discussion["comments"]["nodes"][0], 1, 1, Some(Vote::Down));
    expect(&discussion["comments"]["nodes"][1], 1, 0, Some(Vote::Up));
    assert_eq!(discussion["threads"]["nodes"][0]["viewerVote"], "DOWN");
    assert_eq!(
        discussion["threads"]["nodes"][0]["replies"]["nodes"][0]["viewerVote"],
        "UP"
    );

    // Every refusal. The targets: a deleted comment, a rejected placeholder, a held comment, a
    // locked discussion's comment.
    let deleted = app.post_as(&author, &d, None, "deleted").await;
    vote_ok(&app, "v1", &d, &deleted, Some(Vote::Up)).await;
    app.exec_as(Some(&author), DELETE, json!({ "d": d, "s": deleted }))
        .await;
    let rejected = app.post_as(&author, &d, None, "rejected").await;
    vote_ok(&app, "v1", &d, &rejected, Some(Vote::Up)).await;
    let answer = app
        .exec_as(Some(&moderator), REJECT, json!({ "d": d, "s": rejected }))
        .await;
    assert_eq!(
        answer["data"]["rejectComment"]["status"], "REJECTED",
        "{answer:#}"
    );
    let held_in = app.discussion("pre-moderated").await;
    let answer = app
        .exec_as(Some(&moderator), SET, json!({ "d": held_in, "m": "PRE" }))
        .await;
    assert!(answer.get("errors").is_none(), "{answer:#}");
    let held = app.post_as(&author, &held_in, None, "held").await;
    let locked_d = app.discussion("locked").await;
    let in_locked = app.post_as(&author, &locked_d, None, "locked in").await;
    vote_ok(&app, "v1", &locked_d, &in_locked, Some(Vote::Up)).await;
    let answer = app
        .exec_as(Some(&moderator), LOCK, json!({ "d": locked_d, "l": true }))
        .await;
    assert!(answer.get("errors").is_none(), "{answer:#}");
    let answer = app
        .exec_as(Some(&moderator), BAN, json!({ "u": "troll" }))
        .await;
    assert!(answer.get("errors").is_none(), "{answer:#}");

    let v5 = app.token("v5", "v5");
    let troll = app.token("troll", "troll");
    let vars = |d: &str, s: &str, v: &str| json!({ "d": d, "s": s, "v": v });
    let cases: Vec<(&str, Option<&str>, Value, &str)> = vec![
        ("anonymous", None, vars(&d, &a, "UP"), "UNAUTHENTICATED"),
        (
            "own comment",
            Some(author.as_str()),
            vars(&d, &a, "UP"),
            "FORBIDDEN",
        ),
        (
            "deleted comment",
            Some(v5.as_str()),
            vars(&d, &deleted, "UP"),
            "COMMENT_DELETED",
        ),
        (
            "rejected placeholder",
            Some(v5.as_str()),
            vars(&d, &rejected, "UP"),
            "NOT_FOUND",
        ),
        (
            "held comment",
            Some(v5.as_str()),
            vars(&held_in, &held, "UP"),
            "NOT_FOUND",
        ),
        (
            "locked discussion",
            Some(v5.as_str()),
            vars(&locked_d, &in_locked, "DOWN"),
            "FORBIDDEN",
        ),
        (
            "locked discussion, removing",
            Some(v1.as_str()),
            json!({ "d": locked_d, "s": in_locked, "v": null }),
            "FORBIDDEN",
        ),
        (
            "banned user",
            Some(troll.as_str()),
            vars(&d, &a, "UP"),
            "FORBIDDEN",
        ),
        (
            "unknown slug",
            Some(v5.as_str()),
            vars(&d, "zzzzzzzz", "UP"),
            "NOT_FOUND",
        ),
        (
            "unknown reply slug",
            Some(v5.as_str()),
            vars(&d, &format!("{a}/zzzzzzzz"), "UP"),
            "NOT_FOUND",
        ),
        (
            "unknown discussion",
            Some(v5.as_str()),
            vars("0123456789abcdef01234567", &a, "UP"),
            "NOT_FOUND",
        ),
        (
            "malformed slug",
            Some(v5.as_str()),
            vars(&d, ".*", "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "operator as slug",
            Some(v5.as_str()),
            vars(&d, "{\"$ne\": 1}", "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "empty slug",
            Some(v5.as_str()),
            vars(&d, "", "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "malformed discussion id",
            Some(v5.as_str()),
            vars("not-an-id", &a, "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "operator as discussion id",
            Some(v5.as_str()),
            vars("{\"$gt\": \"\"}", &a, "UP"),
            "BAD_USER_INPUT",
        ),
    ];
    for (what, token, variables, code) in cases {
        let response = app.exec_as(token, VOTE, variables).await;
        assert_eq!(error_code(&response), code, "{what}: {response:#}");
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains("internal"),
            "{what}: unclear message {message:?}"
        );
        assert!(
            response["data"].is_null() || response["data"]["voteComment"].is_null(),
            "{what}: {response:#}"
        );
    }
    // An unknown value is refused before anything runs.
    let response = app
        .exec_as(Some(v5.as_str()), VOTE, vars(&d, &a, "SIDEWAYS"))
        .await;
    assert!(response["errors"].is_array(), "{response:#}");
    let response = app
        .exec_as(
            Some(v5.as_str()),
            "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: SIDEWAYS) { slug } }",
            json!({ "d": d, "s": a }),
        )
        .await;
    assert_eq!(
        error_code(&response),
        "GRAPHQL_VALIDATION_FAILED",
        "{response:#}"
    );

    // Nothing refused changed a counter; the tombstone keeps its votes.
    expect(
        &counts_as(&app, Some("v1"), &d, &a).await,
        1,
        1,
        Some(Vote::Down),
    );
    expect(
        &counts_as(&app, Some("v1"), &d, &deleted).await,
        1,
        0,
        Some(Vote::Up),
    );
    expect(
        &counts_as(&app, Some("v1"), &locked_d, &in_locked).await,
        1,
        0,
        Some(Vote::Up),
    );
    let seen = counts_as(&app, Some("v5"), &d, &a).await;
    assert_eq!(seen["viewerVote"], Value::Null);
    // Unlocked, the discussion takes votes again.
    app.exec_as(Some(&moderator), LOCK, json!({ "d": locked_d, "l": false }))
        .await;
    expect(
        &vote_ok(&app, "v5", &locked_d, &in_locked, Some(Vote::Down)).await,
        1,
        1,
        Some(Vote::Down),
    );

    // Over the rate limit (30 votes a minute per user): refused, and nothing changes.
    let other = app.post_as(&author, &d, None, "flooded").await;
    for i in 0..30 {
        let vote = if i % 2 == 0 { Vote::Up } else { Vote::Down };
        vote_ok(&app, "flood", &d, &other, Some(vote)).await;
    }
    let response = vote_as(&app, "flood", &d, &other, Some(Vote::Up)).await;
    assert_eq!(error_code(&response), "RATE_LIMITED", "{response:#}");
    expect(
        &counts_as(&app, Some("flood"), &d, &other).await,
        0,
        1,
        Some(Vote::Down),
    );
    // Another user's votes are not limited by the flood.
    expect(
        &vote_ok(&app, "v6", &d, &other, Some(Vote::Down)).await,
        0,
        2,
        Some(Vote::Down),
    );
}
