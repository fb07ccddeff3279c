//! Hostile cases about access: forged and malformed tokens, changes the caller may not make, and
//! GET.

use super::requests::*;
use super::*;

/// Adds the cases of this group, in order.
pub(super) fn access_cases(w: &World, cases: &mut Vec<Case>) {
    use Expect::{Code, Engine};
    let d = w.d.as_str();
    let unauthenticated = || Code(200, "UNAUTHENTICATED");
    let create = || gql(CREATE, json!({ "t": "a title" }));

    // ----- tokens -----
    cases.push(Case::new(
        "mutation without a token",
        create(),
        unauthenticated(),
    ));
    cases.push(
        Case::new(
            "token signed with another secret",
            create(),
            unauthenticated(),
        )
        .auth(&sign_with(
            Algorithm::HS256,
            &hostile_claims("alice", "Alice"),
            "not-the-secret",
        )),
    );
    cases.push(
        Case::new("expired token", create(), unauthenticated()).auth(&sign(&Claims {
            exp: now() - 3_600,
            ..hostile_claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("token not valid yet", create(), unauthenticated()).auth(&sign(&Claims {
            nbf: Some(now() + 3_600),
            ..hostile_claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("alg: none token", create(), unauthenticated())
            .auth(&unsigned(&hostile_claims("alice", "Alice"))),
    );
    cases.push(
        Case::new(
            "HS384 token with the right secret",
            create(),
            unauthenticated(),
        )
        .auth(&sign_with(
            Algorithm::HS384,
            &hostile_claims("alice", "Alice"),
            SECRET,
        )),
    );
    cases.push(
        Case::new("token for another audience", create(), unauthenticated()).auth(&sign(&Claims {
            aud: Some("someone-else".into()),
            ..hostile_claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("token without an audience", create(), unauthenticated()).auth(&sign(&Claims {
            aud: None,
            ..hostile_claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("token with an empty sub", create(), unauthenticated())
            .auth(&hostile_user("", "Nobody")),
    );
    let roles_string = json!({
        "sub": "alice", "name": "Alice", "roles": "moderator", "exp": now() + 600, "aud": AUDIENCE,
    });
    cases.push(
        Case::new("token whose roles is a string", create(), unauthenticated())
            .auth(&sign(&roles_string)),
    );
    cases.push(Case::new("garbage token", create(), unauthenticated()).auth("abc.def.ghi"));
    cases.push(
        Case::new("empty bearer token", create(), unauthenticated())
            .header("authorization", "Bearer"),
    );
    cases.push(
        Case::new("Basic authorization", create(), unauthenticated())
            .header("authorization", "Basic YWxpY2U6c2VjcmV0"),
    );
    cases.push(
        Case::new(
            "forged moderator token locking",
            gql(LOCK, json!({ "id": d, "l": true })),
            unauthenticated(),
        )
        .auth(&sign_with(
            Algorithm::HS256,
            &Claims {
                roles: vec!["moderator".into()],
                ..hostile_claims("mallory", "Mallory")
            },
            "guessed",
        )),
    );
    // ----- lifecycle -----
    cases.push(
        Case::new(
            "editing someone else's comment",
            gql(EDIT, json!({ "d": d, "s": w.c1, "t": "mine now" })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.bob),
    );
    cases.push(
        Case::new(
            "deleting someone else's comment",
            gql(DELETE, json!({ "d": d, "s": w.c2 })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.bob),
    );
    cases.push(
        Case::new(
            "posting to a locked discussion",
            gql(POST, json!({ "d": w.locked, "t": "let me in" })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "locking without the moderator role",
            gql(LOCK, json!({ "id": d, "l": true })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.bob),
    );
    cases.push(
        Case::new(
            "editing a deleted comment",
            gql(EDIT, json!({ "d": d, "s": w.gone, "t": "back" })),
            Code(200, "COMMENT_DELETED"),
        )
        .auth(&w.alice),
    );
    // ----- GET -----
    cases.push(
        Case::new(
            "mutation over GET",
            Outgoing::Get {
                params: vec![
                    ("query".into(), CREATE.into()),
                    ("variables".into(), r#"{"t": "by link"}"#.into()),
                ],
                headers: Vec::new(),
            },
            Code(405, "BAD_USER_INPUT"),
        )
        .auth(&w.alice)
        .expect_header("allow", "POST")
        .no_db(),
    );
    let query_and_mutation = format!(
        "query Q {{ discussions {{ totalCount }} }} mutation M {{ lockDiscussion(id: \"{d}\", locked: true) {{ id }} }}"
    );
    cases.push(
        Case::new(
            "mutation over GET chosen by operationName",
            Outgoing::Get {
                params: vec![
                    ("query".into(), query_and_mutation.clone()),
                    ("operationName".into(), "M".into()),
                ],
                headers: Vec::new(),
            },
            Code(405, "BAD_USER_INPUT"),
        )
        .auth(&w.moderator)
        .expect_header("allow", "POST")
        .no_db(),
    );
    cases.push(
        Case::new(
            "mutation over GET chosen by operation_name",
            Outgoing::Get {
                params: vec![
                    ("query".into(), query_and_mutation.clone()),
                    ("operation_name".into(), "M".into()),
                ],
                headers: Vec::new(),
            },
            Code(405, "BAD_USER_INPUT"),
        )
        .auth(&w.moderator)
        .expect_header("allow", "POST")
        .no_db(),
    );
    cases.push(
        Case::new(
            "GET with a syntax error",
            Outgoing::Get {
                params: vec![("query".into(), "{ discussions {".into())],
                headers: Vec::new(),
            },
            Engine,
        )
        .no_db(),
    );
}
