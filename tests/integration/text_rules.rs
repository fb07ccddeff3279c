//! The text rules over a real socket: titles and comment text refuse control characters, text
//! made only of invisible characters is blank, and bidirectional controls stay inside the text.

use serde_json::json;

use crate::support::{graphql_data, outcome, post_graphql, server_config, token, Running};

const CREATE: &str = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id title } }";
const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug text } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn titles_and_text_follow_the_text_rules() {
    let server = Running::start(server_config("text_rules")).await;
    let client = reqwest::Client::new();
    let ada = token("u1", "Ada");

    let refused_titles = [
        "nul\0in a title",
        "\u{1b}[31mred",
        "two\nlines",
        "tab\there",
        "\u{200B}",
        "\u{200B}\u{200B}\u{200B}",
        " \u{FEFF}\u{3164} \u{2800}",
    ];
    for title in refused_titles {
        let (status, body) =
            post_graphql(&client, &server, Some(&ada), CREATE, json!({ "t": title })).await;
        assert_eq!(
            (status, outcome(&body).as_str()),
            (200, "BAD_USER_INPUT"),
            "title {title:?}: {body}"
        );
        assert!(body["data"].is_null(), "{body}");
    }
    let title = "Ünïcödé 👩\u{200D}💻 and العربية\u{200F}";
    let data = graphql_data(&client, &server, Some(&ada), CREATE, json!({ "t": title })).await;
    assert_eq!(data["createDiscussion"]["title"], title);
    let d = data["createDiscussion"]["id"].clone();
    // Bidirectional controls are kept; those left open are closed at the end.
    for (sent, kept) in [
        ("evil\u{202E}txt.exe", "evil\u{202E}txt.exe\u{202C}"),
        (
            "isolate \u{2067}x\u{2069} done",
            "isolate \u{2067}x\u{2069} done",
        ),
        (
            "\u{2068}name\u{202B}x",
            "\u{2068}name\u{202B}x\u{202C}\u{2069}",
        ),
    ] {
        let data = graphql_data(&client, &server, Some(&ada), CREATE, json!({ "t": sent })).await;
        assert_eq!(data["createDiscussion"]["title"], kept, "{sent:?}");
    }

    let refused_texts = [
        "\u{200B}",
        "\u{FEFF}",
        "\u{3164}",
        "\u{2800}",
        "\u{115F}\u{1160}\u{FFA0}",
        "\u{200B}\n\u{FEFF}\t\u{2060} \u{200D}",
        "\u{E0020}\u{E007F}",
        "bell\u{7}",
    ];
    for text in refused_texts {
        let (status, body) = post_graphql(
            &client,
            &server,
            Some(&ada),
            POST,
            json!({ "d": d, "t": text }),
        )
        .await;
        assert_eq!(
            (status, outcome(&body).as_str()),
            (200, "BAD_USER_INPUT"),
            "text {text:?}: {body}"
        );
    }
    // Invisible characters among visible ones are kept, and so are the directional marks.
    let text = "a\u{200B}b 👩\u{200D}💻\nשלום\u{200E} ok";
    let data = graphql_data(
        &client,
        &server,
        Some(&ada),
        POST,
        json!({ "d": d, "t": text }),
    )
    .await;
    assert_eq!(data["postComment"]["text"], text);
    for (sent, kept) in [
        ("override \u{202D}here", "override \u{202D}here\u{202C}"),
        ("a\u{2067}b\nc\u{2066}d", "a\u{2067}b\nc\u{2066}d\u{2069}"),
        ("\u{202E}balanced\u{202C}", "\u{202E}balanced\u{202C}"),
    ] {
        let data = graphql_data(
            &client,
            &server,
            Some(&ada),
            POST,
            json!({ "d": d, "t": sent }),
        )
        .await;
        assert_eq!(data["postComment"]["text"], kept, "{sent:?}");
    }
    server.shutdown().await;
}
