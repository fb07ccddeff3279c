//! Hostile cases about arguments: ids and slugs, cursors and paging, query metacharacters in
//! every string argument, text and unicode.

use super::requests::*;
use super::*;

/// Adds the cases of this group, in order.
pub(super) fn argument_cases(w: &World, cases: &mut Vec<Case>) {
    use Expect::{Code, Data};
    let bad = || Code(200, "BAD_USER_INPUT");
    let d = w.d.as_str();
    let unknown_id = "0123456789abcdef01234567";
    let http_bad = || Code(400, "BAD_USER_INPUT");

    // ----- ids and slugs -----
    cases.push(Case::new(
        "unknown discussion id",
        gql(DISCUSSION, json!({ "d": unknown_id })),
        Code(200, "NOT_FOUND"),
    ));
    cases.push(Case::new(
        "discussion id .*",
        gql(DISCUSSION, json!({ "d": ".*" })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id {\"$ne\":1}",
        gql(DISCUSSION, json!({ "d": "{\"$ne\":1}" })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id ../../etc",
        gql(DISCUSSION, json!({ "d": "../../etc" })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id in capitals",
        gql(DISCUSSION, json!({ "d": d.to_uppercase() })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id as a number",
        gql(DISCUSSION, json!({ "d": 12345 })),
        bad(),
    ));
    cases.push(Case::new(
        "10 KB discussion id",
        gql(DISCUSSION, json!({ "d": "a".repeat(10_000) })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id of emoji",
        gql(DISCUSSION, json!({ "d": "😀".repeat(6) })),
        bad(),
    ));
    cases.push(Case::new(
        "slug .*",
        gql(COMMENT, json!({ "d": d, "s": ".*" })),
        bad(),
    ));
    cases.push(Case::new(
        "slug {\"$ne\":1}",
        gql(COMMENT, json!({ "d": d, "s": "{\"$ne\":1}" })),
        bad(),
    ));
    cases.push(Case::new(
        "slug ../../etc",
        gql(COMMENT, json!({ "d": d, "s": "../../etc" })),
        bad(),
    ));
    cases.push(Case::new(
        "10 KB slug",
        gql(
            COMMENT,
            json!({ "d": d, "s": "abcdefgh/".repeat(1_111) + "abcdefgh" }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "slug with a trailing slash",
        gql(COMMENT, json!({ "d": d, "s": format!("{}/", w.c1) })),
        bad(),
    ));
    cases.push(Case::new(
        "empty slug",
        gql(COMMENT, json!({ "d": d, "s": "" })),
        bad(),
    ));
    cases.push(Case::new(
        "slug with a right-to-left override",
        gql(COMMENT, json!({ "d": d, "s": "\u{202e}abcdefg" })),
        bad(),
    ));
    cases.push(Case::new(
        "unknown slug",
        gql(COMMENT, json!({ "d": d, "s": "zzzzzzzz" })),
        Code(200, "NOT_FOUND"),
    ));
    cases.push(Case::new(
        "comment in an unknown discussion",
        gql(COMMENT, json!({ "d": unknown_id, "s": w.c1 })),
        Code(200, "NOT_FOUND"),
    ));
    cases.push(Case::new(
        "Discussion.comment slug .*",
        gql(DISCUSSION_COMMENT, json!({ "d": d, "s": ".*" })),
        bad(),
    ));
    cases.push(
        Case::new(
            "postComment to an unknown discussion",
            gql(POST, json!({ "d": unknown_id, "t": "hello" })),
            Code(200, "NOT_FOUND"),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "postComment to an unknown parent",
            gql(POST, json!({ "d": d, "p": "zzzzzzzz", "t": "hello" })),
            Code(200, "NOT_FOUND"),
        )
        .auth(&w.alice),
    );
    // ----- cursors and paging -----
    cases.push(Case::new(
        "cursor !!!",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": "!!!" }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "cursor with a bad time",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": cursor(&format!("c|soon|{}", w.c1)) }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "cursor with a regex slug",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": cursor("c|1|.*") }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "chronological cursor in the threaded order",
        gql(COMMENTS, json!({ "d": d, "o": "THREADED", "a": w.chrono })),
        bad(),
    ));
    cases.push(Case::new(
        "threaded cursor in the chronological order",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": w.threaded }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "discussion-list cursor in a comment list",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": w.listed }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "comment cursor in the discussion list",
        gql(DISCUSSIONS, json!({ "a": w.chrono })),
        bad(),
    ));
    cases.push(Case::new(
        "threaded cursor in replies",
        gql(REPLIES, json!({ "d": d, "s": w.c1, "a": w.threaded })),
        bad(),
    ));
    cases.push(Case::new(
        "chronological cursor in a sub-discussion",
        gql(SUB_DISCUSSION, json!({ "d": d, "s": w.c1, "a": w.chrono })),
        bad(),
    ));
    cases.push(Case::new(
        "threaded cursor in threads",
        gql(THREADS, json!({ "d": d, "a": w.threaded })),
        bad(),
    ));
    cases.push(Case::new(
        "first: -1",
        gql(COMMENTS, json!({ "d": d, "o": "CHRONOLOGICAL", "f": -1 })),
        bad(),
    ));
    cases.push(Case::new(
        "first: 101",
        gql(COMMENTS, json!({ "d": d, "o": "CHRONOLOGICAL", "f": 101 })),
        bad(),
    ));
    cases.push(Case::new(
        "offset: -1",
        gql(COMMENTS, json!({ "d": d, "o": "CHRONOLOGICAL", "x": -1 })),
        bad(),
    ));
    cases.push(Case::new(
        "offset and after together",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "x": 1, "a": w.chrono }),
        ),
        bad(),
    ));
    // ----- metacharacters in every string argument -----
    cases.push(
        Case::new(
            "title of metacharacters",
            gql(CREATE, json!({ "t": META })),
            Data("/data/createDiscussion/title", json!(META)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text of metacharacters",
            gql(POST, json!({ "d": d, "t": META })),
            Data("/data/postComment/text", json!(META)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "edited text of metacharacters",
            gql(EDIT, json!({ "d": d, "s": w.c1, "t": META })),
            Data("/data/editComment/text", json!(META)),
        )
        .auth(&w.alice),
    );
    cases.push(Case::new(
        "discussion(id:) metacharacters",
        gql(DISCUSSION, json!({ "d": META })),
        bad(),
    ));
    cases.push(Case::new(
        "comment(discussionId:) metacharacters",
        gql(COMMENT, json!({ "d": META, "s": w.c1 })),
        bad(),
    ));
    cases.push(Case::new(
        "comment(slug:) metacharacters",
        gql(COMMENT, json!({ "d": d, "s": META })),
        bad(),
    ));
    cases.push(Case::new(
        "Discussion.comment(slug:) metacharacters",
        gql(DISCUSSION_COMMENT, json!({ "d": d, "s": META })),
        bad(),
    ));
    cases.push(
        Case::new(
            "postComment discussionId metacharacters",
            gql(POST, json!({ "d": META, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "postComment parentSlug metacharacters",
            gql(POST, json!({ "d": d, "p": META, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "editComment discussionId metacharacters",
            gql(EDIT, json!({ "d": META, "s": w.c1, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "editComment slug metacharacters",
            gql(EDIT, json!({ "d": d, "s": META, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "deleteComment discussionId metacharacters",
            gql(DELETE, json!({ "d": META, "s": w.c1 })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "deleteComment slug metacharacters",
            gql(DELETE, json!({ "d": d, "s": META })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "lockDiscussion id metacharacters",
            gql(LOCK, json!({ "id": META, "l": true })),
            bad(),
        )
        .auth(&w.moderator),
    );
    cases.push(Case::new(
        "comments(after:) metacharacters",
        gql(COMMENTS, json!({ "d": d, "o": "THREADED", "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "threads(after:) metacharacters",
        gql(THREADS, json!({ "d": d, "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "replies(after:) metacharacters",
        gql(REPLIES, json!({ "d": d, "s": w.c1, "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "subDiscussion(after:) metacharacters",
        gql(SUB_DISCUSSION, json!({ "d": d, "s": w.c1, "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "discussions(after:) metacharacters",
        gql(DISCUSSIONS, json!({ "a": META })),
        bad(),
    ));
    // ----- text -----
    cases.push(
        Case::new(
            "blank text",
            gql(POST, json!({ "d": d, "t": "  \n\t \r\n" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text with NUL",
            gql(POST, json!({ "d": d, "t": "a\u{0}b" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text with a bell",
            gql(POST, json!({ "d": d, "t": "ding\u{7}" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text with an escape sequence",
            gql(POST, json!({ "d": d, "t": "\u{1b}[31mred" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text of 10 001 characters",
            gql(POST, json!({ "d": d, "t": "z".repeat(10_001) })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(Case::new("empty title", gql(CREATE, json!({ "t": "" })), bad()).auth(&w.alice));
    cases.push(
        Case::new(
            "title of 301 characters",
            gql(CREATE, json!({ "t": "t".repeat(301) })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "HTML text comes back verbatim",
            gql(
                POST,
                json!({ "d": d, "t": "<script>alert('x')</script><img src=x onerror=alert(1)>" }),
            ),
            Data(
                "/data/postComment/text",
                json!("<script>alert('x')</script><img src=x onerror=alert(1)>"),
            ),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "CRLF becomes LF",
            gql(POST, json!({ "d": d, "t": "one\r\ntwo\r\n" })),
            Data("/data/postComment/text", json!("one\ntwo")),
        )
        .auth(&w.alice),
    );
    // ----- unicode -----
    cases.push(
        Case::new(
            "lone leading surrogate escape in a variable",
            post_bytes(
                "application/json",
                hand_written(POST, &format!(r#"{{"d": "{d}", "t": "a\ud800b"}}"#)),
            ),
            http_bad(),
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "lone trailing surrogate escape in the query",
            post_bytes(
                "application/json",
                r#"{"query": "{ discussions { totalCount } } # \udc00"}"#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "4-byte emoji text",
            gql(POST, json!({ "d": d, "t": EMOJI })),
            Data("/data/postComment/text", json!(EMOJI)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "right-to-left marks in text",
            gql(POST, json!({ "d": d, "t": RTL })),
            Data("/data/postComment/text", json!(RTL)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "combining marks and zero-width characters in text",
            gql(POST, json!({ "d": d, "t": ZERO_WIDTH })),
            Data("/data/postComment/text", json!(ZERO_WIDTH)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "surrogate pair escapes make an emoji",
            post_bytes(
                "application/json",
                hand_written(
                    POST,
                    &format!(r#"{{"d": "{d}", "t": "pair \ud83d\ude00"}}"#),
                ),
            ),
            Data("/data/postComment/text", json!("pair 😀")),
        )
        .auth(&w.alice),
    );
}
