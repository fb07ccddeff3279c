//! Hostile cases about GraphQL documents: the depth, cost, alias and root-field limits, and
//! documents the engine refuses.

use super::requests::*;
use super::*;

/// Adds the cases of this group, in order.
pub(super) fn document_cases(w: &World, cases: &mut Vec<Case>) {
    use Expect::{Code, Engine};
    let d = w.d.as_str();
    let http_bad = || Code(400, "BAD_USER_INPUT");

    // ----- document limits -----
    cases.push(Case::new(
            "depth 61",
            gql(
                &format!(
                    "query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ {} slug {} }} }}",
                    "parent { ".repeat(59),
                    "} ".repeat(59)
                ),
                json!({ "d": d, "s": w.c2 }),
            ),
            Engine,
        )
        .no_db());
    cases.push(Case::new(
            "first: 100 four levels deep",
            gql(
                "query($d: ID!) { discussion(id: $d) { threads(first: 100) { nodes { replies(first: 100) { nodes { replies(first: 100) { nodes { replies(first: 100) { nodes { slug } } } } } } } } } }",
                json!({ "d": d }),
            ),
            Engine,
        )
        .no_db());
    cases.push(Case::new(
            "first: 100 by variables, three levels deep",
            gql(
                "query($d: ID!, $f: Int) { discussion(id: $d) { threads(first: $f) { nodes { replies(first: $f) { nodes { replies(first: $f) { nodes { slug text } } } } } } } }",
                json!({ "d": d, "f": 100 }),
            ),
            Engine,
        )
        .no_db());
    cases.push(
        Case::new(
            "31 aliases",
            gql(
                &format!(
                    "{{ discussions(first: 1) {{ {} }} }}",
                    (0..31)
                        .map(|i| format!("a{i}: totalCount"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "21 root fields",
            gql(
                &format!(
                    "{{ {} }}",
                    "discussions(first: 1) { totalCount } ".repeat(21)
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "21 root fields in a fragment",
            gql(
                &format!(
                    "query {{ ...R }} fragment R on Query {{ {} }}",
                    "discussions(first: 1) { totalCount } ".repeat(21)
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(Case::new(
            "4 spreads of a fragment with 8 aliases",
            gql(
                &format!(
                    "query {{ discussions(first: 1) {{ ...A }} }} fragment A on DiscussionConnection {{ ...B ...B ...B ...B }} fragment B on DiscussionConnection {{ {} }}",
                    (0..8).map(|i| format!("x{i}: totalCount")).collect::<Vec<_>>().join(" ")
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db());
    cases.push(
        Case::new(
            "6 000 tokens",
            gql(
                &format!(
                    "{{ discussions(first: 1) {{ {}}} }}",
                    "totalCount ".repeat(6_000)
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(Case::new("6 000 braces", gql(&"{".repeat(6_000), json!({})), Engine).no_db());
    cases.push(Case::new(
            "fragments spreading each other",
            gql(
                "query { discussions { ...A } } fragment A on DiscussionConnection { totalCount ...B } fragment B on DiscussionConnection { ...A }",
                json!({}),
            ),
            Engine,
        )
        .no_db());
    // ----- documents the engine refuses -----
    cases.push(
        Case::new(
            "syntax error",
            gql("{ discussions { totalCount ", json!({})),
            Engine,
        )
        .no_db(),
    );
    cases.push(Case::new("blank query", gql("   ", json!({})), Engine).no_db());
    cases.push(
        Case::new(
            "object without a query",
            post_bytes("application/json", "{}"),
            Code(400, "BAD_USER_INPUT"),
        )
        .no_db(),
    );
    cases.push(Case::new("unknown field", gql("{ nope }", json!({})), Engine).no_db());
    cases.push(
        Case::new(
            "unknown operation name",
            post_json(
                &json!({ "query": "query A { discussions { totalCount } }", "operationName": "B" }),
            ),
            Engine,
        )
        .no_db(),
    );
    let two_queries =
        "query A { discussions { totalCount } } query B { discussions { totalCount } }";
    cases.push(
        Case::new(
            "operation name full of metacharacters",
            post_json(&json!({ "query": two_queries, "operationName": META })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given a string",
            gql(DISCUSSIONS, json!({ "f": "ten" })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given 1.5",
            gql(DISCUSSIONS, json!({ "f": 1.5 })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given 2^40",
            gql(DISCUSSIONS, json!({ "f": 1_u64 << 40 })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given an array",
            gql(DISCUSSIONS, json!({ "f": [1] })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "enum variable given an unknown value",
            gql(COMMENTS, json!({ "d": d, "o": "SIDEWAYS" })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "String! variable given an object",
            gql(COMMENT, json!({ "d": d, "s": { "a": 1 } })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "ID! variable given a query operator",
            gql(DISCUSSION, json!({ "d": { "$ne": 1 } })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "ID! variable given true",
            gql(DISCUSSION, json!({ "d": true })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "missing required variable",
            gql(DISCUSSION, json!({})),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "required variable null",
            gql(DISCUSSION, json!({ "d": null })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "variables is an array",
            post_bytes("application/json", hand_written(DISCUSSION, "[1, 2]")),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "input without its required text",
            gql(
                "mutation($d: ID!) { postComment(input: {discussionId: $d}) { slug } }",
                json!({ "d": d }),
            ),
            Engine,
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "input with an unknown field",
            gql(
                "mutation($i: PostCommentInput!) { postComment(input: $i) { slug } }",
                json!({ "i": { "discussionId": d, "text": "hi", "author": "someone else" } }),
            ),
            Engine,
        )
        .auth(&w.alice)
        .no_db(),
    );
}
