//! What a probe of a running server does: discussions and comments made over a real socket, as
//! a client makes them; the Markdown that costs the most to render within the nesting limit; and
//! threadql's commands run against a test database.

use serde_json::{json, Value};

use super::server::{graphql_data, Running};

/// Creates a discussion as `token` (in `layout`, e.g. `"EMBEDDED"`, else the server's default)
/// over HTTP; its id.
pub(crate) async fn discussion_over_http(
    client: &reqwest::Client,
    server: &Running,
    token: &str,
    layout: Option<&str>,
) -> String {
    let data = graphql_data(
        client,
        server,
        Some(token),
        "mutation($l: StorageLayout) { createDiscussion(input: { title: \"t\", layout: $l }) { id } }",
        json!({ "l": layout }),
    )
    .await;
    data["createDiscussion"]["id"]
        .as_str()
        .expect("a discussion id")
        .to_owned()
}

/// Posts `text` to discussion `d` as `token` over HTTP; the comment's `slug`, `text` and
/// `html` as the answer gives them.
pub(crate) async fn comment_over_http(
    client: &reqwest::Client,
    server: &Running,
    token: &str,
    d: &str,
    text: &str,
) -> Value {
    let data = graphql_data(
        client,
        server,
        Some(token),
        "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug text html } }",
        json!({ "d": d, "t": text }),
    )
    .await;
    data["postComment"].clone()
}

/// About `chars` characters of Markdown nested as deep as `depth` allows on every line: lines of
/// `depth` nested lists (`- - - … x`), which render to about 10 bytes of HTML a character.
pub(crate) fn deepest_lists(depth: usize, chars: usize) -> String {
    let line = format!("{}x\n", "- ".repeat(depth));
    line.repeat(chars / line.len()).trim_end().to_owned()
}
