//! Placeholders, reports, queues and word lists: a public comment that is rejected or held by
//! reports stays in place with its text and author hidden from the public; reports count once
//! per user; the moderator queues page oldest first; listed words hold or reject posts and
//! edits.

use std::path::Path;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{error_code, node_slugs, Settings, TestApp};

const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status text moderationReason } }";
const APPROVE: &str = "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug status text reportCount } }";
const REPORT: &str = "mutation($d: ID!, $s: String!, $r: ReportReason!, $n: String) { reportComment(discussionId: $d, slug: $s, reason: $r, note: $n) }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status moderationReason } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug status text moderationReason } }";
const LINK: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug status text html moderationReason reportCount author { id name } } }";
const QUEUE: &str = "query($q: ModerationQueue!, $d: ID, $f: Int, $a: String) { moderationQueue(queue: $q, discussionId: $d, first: $f, after: $a) { totalCount nodes { slug status discussionId } pageInfo { hasNextPage hasPreviousPage endCursor } } }";
const PENDING_COUNT: &str = "query($d: ID!) { discussion(id: $d) { pendingCount } }";
/// The public reads that show a comment's place, text and author, and the counts.
const READS: &str = r#"query($d: ID!) {
  discussion(id: $d) {
    commentCount
    comments(first: 50) { totalCount nodes { slug status text html moderationReason reportCount replyCount author { id name } } }
    threaded: comments(order: THREADED, first: 50) { nodes { slug text } }
    newest: comments(order: NEWEST, first: 50) { nodes { slug text } }
    threads(first: 50) { totalCount nodes { slug text replies(first: 50) { nodes { slug text } } } }
  }
}"#;

/// Runs `query` as `token` and returns the first error's code.
async fn code_as(app: &TestApp, token: Option<&str>, query: &str, variables: Value) -> String {
    error_code(&app.exec_as(token, query, variables).await)
}

/// The comment `slug` of a connection's nodes.
fn node<'a>(connection: &'a Value, slug: &str) -> &'a Value {
    connection["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["slug"] == slug)
        .unwrap_or_else(|| panic!("{slug} is not in {connection:#}"))
}

/// The slugs of a queue (one discussion's, or all), walked one at a time.
async fn queue(app: &TestApp, moderator: &str, which: &str, d: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let vars = json!({ "q": which, "d": d, "f": 1, "a": after });
        let page = app.ok_as(Some(moderator), QUEUE, vars).await["moderationQueue"].clone();
        found.extend(node_slugs(&page));
        if page["pageInfo"]["hasNextPage"] != true {
            return found;
        }
        after = page["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
}

/// The contract case: a rejected public comment keeps its place, replies and counts in every
/// public read, with its text and author hidden from everyone but its author and moderators;
/// approving restores it.
pub(crate) async fn rejected_comments_stay_in_place_case(settings: Settings) {
    let app = TestApp::with("placeholders", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let author = app.token("u2", "Lin");
    let reader = app.token("u3", "Kim");
    let d = app.discussion("placeholders").await;
    let a = app.post_as(&author, &d, None, "rude words").await;
    let b = app.post(&d, Some(&a), "a reply").await;
    let c = app.post_as(&author, &d, None, "fine words").await;
    let before = app.ok_as(None, READS, json!({ "d": d })).await;

    let rejected = app
        .ok_as(
            Some(&moderator),
            REJECT,
            json!({ "d": d, "s": a, "r": "rude" }),
        )
        .await["rejectComment"]
        .clone();
    assert_eq!(rejected["status"], "REJECTED");
    assert_eq!(rejected["moderationReason"], "rude");

    for viewer in [None, Some(reader.as_str())] {
        let after = app.ok_as(viewer, READS, json!({ "d": d })).await;
        let discussion = &after["discussion"];
        assert_eq!(
            discussion["commentCount"], 3,
            "a placeholder keeps its count"
        );
        for list in ["comments", "threaded", "newest"] {
            assert_eq!(
                node_slugs(&discussion[list]),
                node_slugs(&before["discussion"][list]),
                "{list}: same places"
            );
        }
        let placeholder = node(&discussion["comments"], &a);
        assert_eq!(placeholder["status"], "REJECTED");
        for hidden in ["text", "html", "moderationReason", "reportCount"] {
            assert_eq!(placeholder[hidden], Value::Null, "{hidden}: {placeholder}");
        }
        assert_eq!(
            placeholder["author"],
            json!({ "id": "", "name": "[hidden]" })
        );
        assert_eq!(placeholder["replyCount"], 1);
        assert_eq!(node(&discussion["comments"], &b)["text"], "a reply");
        assert_eq!(node(&discussion["threaded"], &a)["text"], Value::Null);
        assert_eq!(node(&discussion["threads"], &a)["text"], Value::Null);
        assert_eq!(
            node_slugs(&node(&discussion["threads"], &a)["replies"]),
            vec![b.clone()]
        );
        let link = app.ok_as(viewer, LINK, json!({ "d": d, "s": a })).await;
        assert_eq!(link["comment"]["text"], Value::Null);
        assert_eq!(link["comment"]["status"], "REJECTED");
    }
    // Its author sees the text and why; moderators see everything.
    let own = app
        .ok_as(Some(&author), LINK, json!({ "d": d, "s": a }))
        .await;
    assert_eq!(own["comment"]["text"], "rude words");
    assert_eq!(own["comment"]["moderationReason"], "rude");
    assert_eq!(own["comment"]["reportCount"], Value::Null);
    assert_eq!(own["comment"]["author"]["name"], "Lin");
    let seen = app
        .ok_as(Some(&moderator), LINK, json!({ "d": d, "s": a }))
        .await;
    assert_eq!(seen["comment"]["text"], "rude words");
    assert_eq!(seen["comment"]["reportCount"], 0);
    assert_eq!(
        queue(&app, &moderator, "REJECTED", Some(&d)).await,
        vec![a.clone()]
    );
    assert!(queue(&app, &moderator, "PENDING", Some(&d))
        .await
        .is_empty());

    // A reply to the placeholder is public, like a reply to a tombstone.
    let under = app.post_as(&reader, &d, Some(&a), "still replying").await;
    assert_eq!(
        app.ok_as(None, LINK, json!({ "d": d, "s": under })).await["comment"]["text"],
        "still replying"
    );
    // Rejecting again replaces the reason; approving restores it in place.
    app.ok_as(
        Some(&moderator),
        REJECT,
        json!({ "d": d, "s": a, "r": "very rude" }),
    )
    .await;
    let approved = app
        .ok_as(Some(&moderator), APPROVE, json!({ "d": d, "s": a }))
        .await;
    assert_eq!(approved["approveComment"]["status"], "APPROVED");
    let restored = app.ok_as(None, READS, json!({ "d": d })).await;
    let comments = &restored["discussion"]["comments"];
    assert_eq!(node(comments, &a)["text"], "rude words");
    assert_eq!(node(comments, &a)["author"]["name"], "Lin");
    assert_eq!(node(comments, &a)["replyCount"], 2);
    assert_eq!(restored["discussion"]["commentCount"], 4);
    assert!(queue(&app, &moderator, "REJECTED", Some(&d))
        .await
        .is_empty());
    // A deleted comment has nothing left to reject.
    app.exec_as(
        Some(&author),
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
        json!({ "d": d, "s": c }),
    )
    .await;
    let code = code_as(&app, Some(&moderator), REJECT, json!({ "d": d, "s": c })).await;
    assert_eq!(code, "COMMENT_DELETED");
}

/// The contract case: reports count once per user; at the threshold a public comment becomes
/// a PENDING placeholder and moves from the REPORTED queue to the PENDING one; approving it
/// dismisses its reports.
pub(crate) async fn reports_hold_a_comment_at_the_threshold_case(mut settings: Settings) {
    settings.reports_to_hold = 2;
    let app = TestApp::with("reports", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let author = app.token("u2", "Lin");
    let [r1, r2, r3] = ["r1", "r2", "r3"].map(|sub| app.token(sub, sub));
    let d = app.discussion("reported").await;
    let x = app.post_as(&author, &d, None, "spammy").await;
    let y = app.post_as(&author, &d, Some(&x), "a reply").await;
    let report = |s: &str| json!({ "d": d, "s": s, "r": "SPAM", "n": "ads" });

    assert_eq!(
        app.ok_as(Some(&r1), REPORT, report(&x)).await["reportComment"],
        true
    );
    assert_eq!(
        app.ok_as(Some(&r1), REPORT, report(&x)).await["reportComment"],
        false,
        "a repeat is a no-op"
    );
    let seen = app
        .ok_as(Some(&moderator), LINK, json!({ "d": d, "s": x }))
        .await;
    assert_eq!(seen["comment"]["reportCount"], 1);
    assert_eq!(seen["comment"]["status"], "APPROVED");
    let public = app.ok_as(Some(&r1), LINK, json!({ "d": d, "s": x })).await;
    assert_eq!(public["comment"]["reportCount"], Value::Null);
    assert_eq!(public["comment"]["text"], "spammy");
    assert_eq!(
        queue(&app, &moderator, "REPORTED", Some(&d)).await,
        vec![x.clone()]
    );

    assert_eq!(
        app.ok_as(Some(&r2), REPORT, report(&x)).await["reportComment"],
        true
    );
    let held = app.ok_as(None, READS, json!({ "d": d })).await;
    let comments = &held["discussion"]["comments"];
    assert_eq!(node(comments, &x)["status"], "PENDING");
    assert_eq!(node(comments, &x)["text"], Value::Null);
    assert_eq!(node(comments, &y)["text"], "a reply");
    assert_eq!(held["discussion"]["commentCount"], 2);
    let own = app
        .ok_as(Some(&author), LINK, json!({ "d": d, "s": x }))
        .await;
    assert_eq!(own["comment"]["moderationReason"], "reported by 2 users");
    assert_eq!(
        queue(&app, &moderator, "PENDING", Some(&d)).await,
        vec![x.clone()]
    );
    assert!(queue(&app, &moderator, "REPORTED", Some(&d))
        .await
        .is_empty());
    let pending = app
        .ok_as(Some(&moderator), PENDING_COUNT, json!({ "d": d }))
        .await;
    assert_eq!(pending["discussion"]["pendingCount"], 1);
    // A placeholder is with the moderators already: there is nothing public to report.
    assert_eq!(
        code_as(&app, Some(&r3), REPORT, report(&x)).await,
        "NOT_FOUND"
    );
    let hidden = app.ok_as(Some(&r1), PENDING_COUNT, json!({ "d": d })).await;
    assert_eq!(hidden["discussion"]["pendingCount"], Value::Null);

    let approved = app
        .ok_as(Some(&moderator), APPROVE, json!({ "d": d, "s": x }))
        .await;
    assert_eq!(approved["approveComment"]["status"], "APPROVED");
    assert_eq!(approved["approveComment"]["reportCount"], 0);
    for which in ["PENDING", "REPORTED", "REJECTED"] {
        assert!(
            queue(&app, &moderator, which, Some(&d)).await.is_empty(),
            "{which}"
        );
    }
    // Reports since the approval count afresh; earlier reporters stay counted once.
    assert_eq!(
        app.ok_as(Some(&r2), REPORT, report(&x)).await["reportComment"],
        false
    );
    assert_eq!(
        app.ok_as(Some(&r3), REPORT, report(&x)).await["reportComment"],
        true
    );
    let seen = app
        .ok_as(Some(&moderator), LINK, json!({ "d": d, "s": x }))
        .await;
    assert_eq!(seen["comment"]["reportCount"], 1);
    assert_eq!(seen["comment"]["status"], "APPROVED");

    // Bad inputs.
    let cases = [
        (Some(author.as_str()), report(&x), "BAD_USER_INPUT"),
        (None, report(&x), "UNAUTHENTICATED"),
        (Some(r1.as_str()), report("zzzzzzzz"), "NOT_FOUND"),
        (Some(r1.as_str()), report("not a slug"), "BAD_USER_INPUT"),
        (
            Some(r1.as_str()),
            json!({ "d": "0123456789abcdef01234567", "s": x, "r": "SPAM" }),
            "NOT_FOUND",
        ),
        (
            Some(r1.as_str()),
            json!({ "d": d, "s": y, "r": "ABUSE", "n": "x".repeat(501) }),
            "BAD_USER_INPUT",
        ),
        (
            Some(r1.as_str()),
            json!({ "d": d, "s": y, "r": "ABUSE", "n": "bell\u{7}" }),
            "BAD_USER_INPUT",
        ),
    ];
    for (token, variables, code) in cases {
        assert_eq!(
            code_as(&app, token, REPORT, variables.clone()).await,
            code,
            "{variables}"
        );
    }
    let unknown_reason = app
        .exec_as(Some(&r1), REPORT, json!({ "d": d, "s": y, "r": "BORING" }))
        .await;
    assert!(unknown_reason["errors"].is_array(), "{unknown_reason:#}");
    app.exec_as(
        Some(&author),
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
        json!({ "d": d, "s": y }),
    )
    .await;
    let code = code_as(&app, Some(&r1), REPORT, report(&y)).await;
    assert_eq!(code, "COMMENT_DELETED");
    // A reported comment its author deletes leaves the queue.
    assert_eq!(
        queue(&app, &moderator, "REPORTED", Some(&d)).await,
        vec![x.clone()]
    );
    app.exec_as(
        Some(&author),
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
        json!({ "d": d, "s": x }),
    )
    .await;
    assert!(queue(&app, &moderator, "REPORTED", Some(&d))
        .await
        .is_empty());
}

/// The contract case: with word lists, a post with a banned word is held REJECTED and one with
/// a suspect word PENDING, in any mode; an edit with one makes a public comment a placeholder;
/// moderators are not screened.
pub(crate) async fn listed_words_hold_posts_and_edits_case(mut settings: Settings) {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = Path::new(dir.path()).join(name);
        std::fs::write(&path, text).expect("write a word list");
        path
    };
    settings.banned_words = Some(write("banned.txt", "buy now\n"));
    settings.suspect_words = Some(write("suspect.txt", "crypto\n"));
    let app = TestApp::with("words_applied", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let author = app.token("u2", "Lin");
    let d = app.discussion("words").await;
    let clean = app.post_as(&author, &d, None, "hello").await;
    let posted = |t: &str| json!({ "d": d, "t": t });

    let banned = app.ok_as(Some(&author), POST, posted("BUY  Now!")).await["postComment"].clone();
    assert_eq!(banned["status"], "REJECTED");
    assert_eq!(banned["moderationReason"], "banned word");
    let suspect = app
        .ok_as(Some(&author), POST, posted("ＣＲＹＰＴＯ gains"))
        .await["postComment"]
        .clone();
    assert_eq!(suspect["status"], "PENDING");
    assert_eq!(suspect["moderationReason"], "suspect word");
    let word = |v: &Value| v["slug"].as_str().expect("slug").to_owned();
    let reads = app.ok_as(None, READS, json!({ "d": d })).await;
    assert_eq!(
        node_slugs(&reads["discussion"]["comments"]),
        vec![clean.clone()]
    );
    assert_eq!(reads["discussion"]["commentCount"], 1);
    assert_eq!(
        queue(&app, &moderator, "REJECTED", Some(&d)).await,
        vec![word(&banned)]
    );
    assert_eq!(
        queue(&app, &moderator, "PENDING", Some(&d)).await,
        vec![word(&suspect)]
    );
    let own = app
        .ok_as(Some(&author), LINK, json!({ "d": d, "s": word(&banned) }))
        .await;
    assert_eq!(own["comment"]["moderationReason"], "banned word");
    // Moderators are not screened.
    let theirs = app.ok_as(Some(&moderator), POST, posted("buy now")).await["postComment"].clone();
    assert_eq!(theirs["status"], "APPROVED");
    // Whole words only.
    let fine = app.ok_as(Some(&author), POST, posted("cryptography")).await["postComment"].clone();
    assert_eq!(fine["status"], "APPROVED");

    // An edit with a suspect word holds the public comment in place; a banned one rejects it.
    let edited = app
        .ok_as(
            Some(&author),
            EDIT,
            json!({ "d": d, "s": clean, "t": "hello crypto" }),
        )
        .await["editComment"]
        .clone();
    assert_eq!(edited["status"], "PENDING");
    assert_eq!(edited["moderationReason"], "suspect word");
    let reads = app.ok_as(None, READS, json!({ "d": d })).await;
    let placeholder = node(&reads["discussion"]["comments"], &clean);
    assert_eq!(placeholder["status"], "PENDING");
    assert_eq!(placeholder["text"], Value::Null);
    assert!(queue(&app, &moderator, "PENDING", Some(&d))
        .await
        .contains(&clean));
    let edited = app
        .ok_as(
            Some(&author),
            EDIT,
            json!({ "d": d, "s": clean, "t": "buy now" }),
        )
        .await["editComment"]
        .clone();
    assert_eq!(edited["status"], "REJECTED");
    assert_eq!(edited["moderationReason"], "banned word");
    assert!(queue(&app, &moderator, "REJECTED", Some(&d))
        .await
        .contains(&clean));
    assert!(!queue(&app, &moderator, "PENDING", Some(&d))
        .await
        .contains(&clean));
}

/// The queues span every discussion, oldest first, and page by cursor; only moderators read
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_page_oldest_first_across_discussions() {
    let app = TestApp::new("queues", Layout::PerComment).await;
    let moderator = app.moderator_token("m", "Mo");
    let author = app.token("u2", "Lin");
    let set = "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { id } }";
    let mut held = Vec::new();
    let mut discussions = Vec::new();
    for title in ["one", "two"] {
        let d = app.discussion(title).await;
        app.ok_as(Some(&moderator), set, json!({ "d": d })).await;
        discussions.push(d);
    }
    for i in 0..6 {
        let d = &discussions[i % 2];
        let data = app
            .ok_as(
                Some(&author),
                POST,
                json!({ "d": d, "t": format!("held {i}") }),
            )
            .await;
        held.push(
            data["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned(),
        );
    }
    assert_eq!(queue(&app, &moderator, "PENDING", None).await, held);
    let in_one: Vec<String> = held.iter().step_by(2).cloned().collect();
    assert_eq!(
        queue(&app, &moderator, "PENDING", Some(&discussions[0])).await,
        in_one
    );
    let page = app
        .ok_as(Some(&moderator), QUEUE, json!({ "q": "PENDING", "f": 4 }))
        .await["moderationQueue"]
        .clone();
    assert_eq!(page["totalCount"], 6);
    assert_eq!(node_slugs(&page), held[..4].to_vec());
    assert_eq!(page["pageInfo"]["hasNextPage"], true);
    assert_eq!(page["pageInfo"]["hasPreviousPage"], false);
    assert_eq!(
        node(&page, &held[1])["discussionId"],
        discussions[1].as_str()
    );
    let pending = app
        .ok_as(
            Some(&moderator),
            PENDING_COUNT,
            json!({ "d": discussions[1] }),
        )
        .await;
    assert_eq!(pending["discussion"]["pendingCount"], 3);
    // Rejected, they enter the REJECTED queue in the order they were rejected; rejecting again
    // keeps a comment's place there.
    for slug in [&held[3], &held[0], &held[3]] {
        let d = &discussions[held.iter().position(|h| h == slug).expect("held") % 2];
        app.ok_as(Some(&moderator), REJECT, json!({ "d": d, "s": slug }))
            .await;
    }
    assert_eq!(
        queue(&app, &moderator, "REJECTED", None).await,
        vec![held[3].clone(), held[0].clone()]
    );
    assert_eq!(
        queue(&app, &moderator, "PENDING", None).await,
        vec![
            held[1].clone(),
            held[2].clone(),
            held[4].clone(),
            held[5].clone()
        ]
    );

    // Bad inputs.
    let reader = app.token("u3", "Kim");
    let log = app
        .ok_as(
            Some(&moderator),
            "{ moderationLog(first: 1) { pageInfo { endCursor } } }",
            json!({}),
        )
        .await;
    let log_cursor = log["moderationLog"]["pageInfo"]["endCursor"].clone();
    let cases = [
        (
            Some(reader.as_str()),
            json!({ "q": "PENDING" }),
            "FORBIDDEN",
        ),
        (None, json!({ "q": "PENDING" }), "UNAUTHENTICATED"),
        (
            Some(moderator.as_str()),
            json!({ "q": "PENDING", "a": "garbage" }),
            "BAD_USER_INPUT",
        ),
        (
            Some(moderator.as_str()),
            json!({ "q": "PENDING", "a": log_cursor }),
            "BAD_USER_INPUT",
        ),
        (
            Some(moderator.as_str()),
            json!({ "q": "PENDING", "f": -1 }),
            "BAD_USER_INPUT",
        ),
        (
            Some(moderator.as_str()),
            json!({ "q": "PENDING", "d": "nope" }),
            "BAD_USER_INPUT",
        ),
    ];
    for (token, variables, code) in cases {
        assert_eq!(
            code_as(&app, token, QUEUE, variables.clone()).await,
            code,
            "{variables}"
        );
    }
}
