//! Hostile cases about transport: bodies that are not a GraphQL request, content types (the CSRF
//! guard), sizes and batches.

use super::requests::*;
use super::*;

/// Adds the cases of this group, in order.
pub(super) fn transport_cases(w: &World, cases: &mut Vec<Case>) {
    use Expect::Code;
    let bad = || Code(200, "BAD_USER_INPUT");
    let d = w.d.as_str();
    let simple = json!({ "query": SIMPLE });
    let simple_bytes = serde_json::to_vec(&simple).expect("json");
    let csrf = || Code(400, "BAD_USER_INPUT");
    let http_bad = || Code(400, "BAD_USER_INPUT");
    let too_large = || Code(413, "REQUEST_TOO_LARGE");

    // ----- bodies that are not a GraphQL request -----
    cases.push(
        Case::new(
            "malformed JSON",
            post_bytes("application/json", "{not json"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON object cut short",
            post_bytes(
                "application/json",
                r#"{"query": "{ discussions { totalCount } }""#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON cut inside a string",
            post_bytes("application/json", r#"{"query": "{ discuss"#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "batch cut short",
            post_bytes(
                "application/json",
                r#"[{"query": "{ discussions { totalCount } }"},"#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(Case::new("empty body", post_bytes("application/json", ""), http_bad()).no_db());
    cases.push(
        Case::new(
            "JSON null",
            post_bytes("application/json", "null"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON number",
            post_bytes("application/json", "42"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON true",
            post_bytes("application/json", "true"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON string holding a query",
            post_bytes("application/json", r#""{ discussions { totalCount } }""#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON array of strings",
            post_bytes("application/json", r#"["{ discussions { totalCount } }"]"#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON array of numbers",
            post_bytes("application/json", "[1, 2]"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "query is a number",
            post_bytes("application/json", r#"{"query": 42}"#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "variables is a string",
            post_bytes("application/json", hand_written(SIMPLE, r#""{}""#)),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "duplicate query key",
            post_bytes(
                "application/json",
                r#"{"query": "{ discussions { totalCount } }", "query": "{ nope }"}"#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "garbage after the JSON value",
            post_bytes(
                "application/json",
                [simple_bytes.as_slice(), b" trailing"].concat(),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "invalid UTF-8 in a string",
            post_bytes(
                "application/json",
                [
                    &br#"{"query": "{ discussions { totalCount } }", "variables": {"t": ""#[..],
                    b"\xff\xfe",
                    b"\"}}",
                ]
                .concat(),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "UTF-8 byte order mark before the JSON",
            post_bytes(
                "application/json",
                [&b"\xef\xbb\xbf"[..], simple_bytes.as_slice()].concat(),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON arrays nested 10 000 deep",
            post_bytes(
                "application/json",
                format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "variables nested 10 000 deep",
            post_bytes(
                "application/json",
                hand_written(
                    SIMPLE,
                    &format!(r#"{{"v": {}{}}}"#, "[".repeat(10_000), "]".repeat(10_000)),
                ),
            ),
            http_bad(),
        )
        .no_db(),
    );
    // ----- content types (the CSRF guard) -----
    cases.push(
        Case::new(
            "text/plain",
            post_bytes("text/plain", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "form-urlencoded",
            post_bytes("application/x-www-form-urlencoded", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "multipart",
            post_bytes("multipart/form-data; boundary=xyz", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "no content type",
            Outgoing::Post {
                headers: Vec::new(),
                body: simple_bytes.clone(),
            },
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "application/jsonp",
            post_bytes("application/jsonp", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "text/plain with an empty Apollo-Require-Preflight",
            post_bytes("text/plain", simple_bytes.clone()),
            csrf(),
        )
        .header("apollo-require-preflight", "")
        .no_db(),
    );
    cases.push(
        Case::new(
            "text/plain with Apollo-Require-Preflight",
            post_bytes("text/plain", simple_bytes.clone()),
            Expect::Ok,
        )
        .header("apollo-require-preflight", "true"),
    );
    cases.push(
        Case::new(
            "form-urlencoded with X-Apollo-Operation-Name",
            post_bytes("application/x-www-form-urlencoded", simple_bytes.clone()),
            Expect::Ok,
        )
        .header("x-apollo-operation-name", "Anything"),
    );
    cases.push(Case::new(
            "multipart body with Apollo-Require-Preflight",
            post_bytes(
                "multipart/form-data; boundary=xyz",
                "--xyz\r\ncontent-disposition: form-data; name=\"operations\"\r\n\r\n{}\r\n--xyz--\r\n",
            ),
            http_bad(),
        )
        .header("apollo-require-preflight", "true")
        .no_db());
    cases.push(Case::new(
        "application/graphql-response+json with a charset",
        post_bytes(
            "application/graphql-response+json; charset=utf-8",
            simple_bytes.clone(),
        ),
        Expect::Ok,
    ));
    cases.push(Case::new(
        "Application/JSON in capitals",
        post_bytes("Application/JSON; Charset=UTF-8", simple_bytes.clone()),
        Expect::Ok,
    ));
    // ----- sizes -----
    cases.push(
        Case::new(
            "300 KiB text with Content-Length",
            Outgoing::Raw {
                headers: vec![("content-type".into(), "application/json".into())],
                body: serde_json::to_vec(
                    &json!({ "query": POST, "variables": { "d": d, "t": "x".repeat(300 * KIB) } }),
                )
                .expect("json"),
                chunked: false,
            },
            too_large(),
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "300 KiB text chunked, without Content-Length",
            Outgoing::Raw {
                headers: vec![("content-type".into(), "application/json".into())],
                body: serde_json::to_vec(
                    &json!({ "query": POST, "variables": { "d": d, "t": "x".repeat(300 * KIB) } }),
                )
                .expect("json"),
                chunked: true,
            },
            too_large(),
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "Content-Length of 10 MB on a small body",
            Outgoing::Raw {
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("content-length".into(), (10 * KIB * KIB).to_string()),
                ],
                body: simple_bytes.clone(),
                chunked: false,
            },
            too_large(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "300 KiB of JSON white space",
            post_bytes("application/json", padded(&simple, 300 * KIB)),
            too_large(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "200 KiB text in a 250 KiB body",
            post_bytes(
                "application/json",
                padded(
                    &json!({ "query": POST, "variables": { "d": d, "t": "y".repeat(200 * KIB) } }),
                    250 * KIB,
                ),
            ),
            bad(),
        )
        .auth(&w.alice),
    );
    // ----- batches -----
    cases.push(
        Case::new(
            "empty batch",
            post_bytes("application/json", "[]"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "11-operation batch",
            post_json(&Value::Array(vec![simple.clone(); 11])),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "batch holding a number",
            post_json(&json!([simple.clone(), 5])),
            http_bad(),
        )
        .no_db(),
    );
}
