//! Comment text as HTML over a real socket, on every layout: CommonMark is formatted, links get
//! `rel="nofollow ugc noopener"`, images become links, and nothing a hostile text holds (raw
//! HTML, event attributes, `javascript:` or `data:` addresses) reaches the HTML. A deleted
//! comment has no HTML.

use serde_json::json;
use threadql::domain::Layout;

use crate::support::{graphql_data, server_config, token, Running};

const READ: &str =
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { text html deleted } }";

/// Texts a hostile author might post, and what must never come out of any of them.
const HOSTILE: [&str; 8] = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<iframe src=\"https://evil.example\"></iframe><style>*{display:none}</style>",
    "[click](javascript:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](https://evil.example/x.png \"t\")",
    "<a href=\"https://example.org\" onclick=\"alert(1)\">x</a>",
    "<svg><animate onbegin=alert(1) attributeName=x dur=1s>",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comments_render_as_sanitised_commonmark_on_every_layout() {
    let server = Running::start(server_config("formatting_html")).await;
    let author = token("fmt", "Formatter");
    let client = reqwest::Client::new();
    for layout in [Layout::PerComment, Layout::Embedded, Layout::Bucketed] {
        let d = server.discussion(&author, layout).await;
        let text = "Hello *there*, see [the docs](https://example.org/docs) and ![a cat](https://example.org/cat.png)";
        let slug = server.post(&author, &d, None, text).await;
        let data = graphql_data(&client, &server, None, READ, json!({ "d": d, "s": slug })).await;
        assert_eq!(
            data["comment"]["text"], text,
            "{layout:?}: text stays the source"
        );
        assert_eq!(
            data["comment"]["html"],
            "<p>Hello <em>there</em>, see <a href=\"https://example.org/docs\" rel=\"nofollow ugc noopener\">the docs</a> and <a href=\"https://example.org/cat.png\" rel=\"nofollow ugc noopener\">a cat</a></p>\n",
            "{layout:?}"
        );
        for hostile in HOSTILE {
            let reply = server.post(&author, &d, Some(&slug), hostile).await;
            let data =
                graphql_data(&client, &server, None, READ, json!({ "d": d, "s": reply })).await;
            let html = data["comment"]["html"]
                .as_str()
                .expect("html")
                .to_lowercase();
            // Text is escaped, so every `<` opens a tag the renderer made.
            for tag in html.split('<').skip(1) {
                let tag = tag.split('>').next().unwrap_or_default();
                let name = tag
                    .trim_start_matches('/')
                    .split(' ')
                    .next()
                    .unwrap_or_default();
                assert!(
                    ["p", "a"].contains(&name),
                    "{layout:?}: {hostile:?} made {html:?}"
                );
                for (name, value) in tag_attributes(tag) {
                    assert!(
                        ["href", "title", "rel"].contains(&name),
                        "{layout:?}: {hostile:?} made {html:?}"
                    );
                    assert!(
                        name != "href" || value.starts_with("https://"),
                        "{layout:?}: {hostile:?} made {html:?}"
                    );
                }
            }
            assert!(html.starts_with("<p>"), "{layout:?}: {html:?}");
        }
        graphql_data(
            &client,
            &server,
            Some(&author),
            "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
            json!({ "d": d, "s": slug }),
        )
        .await;
        let data = graphql_data(&client, &server, None, READ, json!({ "d": d, "s": slug })).await;
        assert_eq!(data["comment"]["deleted"], true);
        assert!(data["comment"]["html"].is_null(), "{layout:?}: {data:#}");
        assert!(data["comment"]["text"].is_null(), "{layout:?}: {data:#}");
    }
}

/// The attributes of a tag as the sanitiser writes it (`name="value"`, space-separated).
fn tag_attributes(tag: &str) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    let mut rest = tag.split_once(' ').map_or("", |(_, rest)| rest);
    while let Some((name, after)) = rest.split_once("=\"") {
        let (value, after) = after.split_once('"').unwrap_or((after, ""));
        found.push((name.trim(), value));
        rest = after;
    }
    assert!(
        rest.trim().is_empty(),
        "an attribute without a value in {tag:?}"
    );
    found
}
