//! Issue 45, finding 1: nested Markdown made every read expensive (10 000 `>` took 300 ms to
//! render into 270 KB of HTML, on every read). Now nesting is bounded at post, edit and import,
//! the HTML is rendered when the text is written and stored with the comment in every layout
//! (bounded in size), reads return it as stored, and comments stored before that are rendered
//! once, on their first read or by `threadql render-html`.

use std::time::Duration;

use futures::StreamExt as _;
use mongodb::bson::doc;
use serde_json::{json, Value};
use threadql::domain::{markdown, Layout};
use threadql::store::{ChangeKind, Watched};

use crate::support::{
    comment_over_http, deepest_lists, discussion_over_http, error_code, error_message,
    graphql_data, moderator_token, one_shot_client, open_feed, post_graphql,
    rewrite_stored_comment, server_config, stored_comment, stored_html, threadql_against, token,
    Home, Running, Settings, TestApp,
};

const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug html } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: { discussionId: $d, slug: $s, text: $t }) { text html } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { text html } }";
const ONE: &str =
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { text html } }";
const PAGE: &str =
    "query($d: ID!) { discussion(id: $d) { comments(first: 20) { edges { node { html } } } } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_past_the_limit_is_refused_at_post_and_edit_and_the_limit_itself_is_accepted() {
    let server = Running::start(server_config("md_depth")).await;
    let client = one_shot_client();
    let (ada, moderator) = (token("ada", "Ada"), moderator_token("mod", "Mod"));
    let d = discussion_over_http(&client, &server, &ada, None).await;
    let refused = |text: String, levels: usize| {
        let (client, server, d, ada) = (&client, &server, &d, &ada);
        async move {
            let (status, body) = post_graphql(
                client,
                server,
                Some(ada),
                POST,
                json!({ "d": d, "t": text }),
            )
            .await;
            assert_eq!(
                (status, error_code(&body).as_str()),
                (200, "BAD_USER_INPUT"),
                "{body:#}"
            );
            let message = error_message(&body);
            assert!(
                message.contains(&format!("{levels} levels deep"))
                    && message.contains("limit is 16"),
                "{message}"
            );
        }
    };
    // The probe's texts: 10 000 `>`, and 17 levels of quotes, lists, and both.
    refused(">".repeat(10_000), 10_000).await;
    refused("> ".repeat(17) + "x", 17).await;
    refused("- ".repeat(17) + "x", 17).await;
    refused("> - ".repeat(9).trim_end().to_owned() + " x", 18).await;
    // Exactly at the limit.
    for text in [
        "> ".repeat(16) + "x",
        "- ".repeat(16) + "x",
        "> 1. ".repeat(8) + "x",
    ] {
        let posted = comment_over_http(&client, &server, &ada, &d, &text).await;
        let html = posted["html"].as_str().expect("html");
        assert!(html.contains("<blockquote>") || html.contains("<ul>") || html.contains("<ol>"));
    }
    let slug = comment_over_http(&client, &server, &ada, &d, "plain").await["slug"]
        .as_str()
        .expect("slug")
        .to_owned();
    // An edit follows the same rule, for authors and moderators alike.
    for who in [&ada, &moderator] {
        let deep = json!({ "d": d, "s": slug, "t": "- ".repeat(17) + "x" });
        let (_, body) = post_graphql(&client, &server, Some(who), EDIT, deep).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body:#}");
        assert!(error_message(&body).contains("limit is 16"), "{body:#}");
    }
    let at_limit = json!({ "d": d, "s": slug, "t": "1. ".repeat(16) + "x" });
    let edited = graphql_data(&client, &server, Some(&ada), EDIT, at_limit).await;
    assert_eq!(edited["editComment"]["text"], json!("1. ".repeat(16) + "x"));
    server.shutdown().await;

    // The limit is a setting.
    let mut config = server_config("md_depth_setting");
    config.max_markdown_depth = 2;
    let server = Running::start(config).await;
    let d = discussion_over_http(&client, &server, &ada, None).await;
    let (_, body) = post_graphql(
        &client,
        &server,
        Some(&ada),
        POST,
        json!({ "d": d, "t": "> > > x" }),
    )
    .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body:#}");
    assert!(error_message(&body).contains("limit is 2"), "{body:#}");
    comment_over_http(&client, &server, &ada, &d, "> > x").await;
    server.shutdown().await;
}

/// In the contract suite, for each layout and shape: a comment's HTML is stored with it at post,
/// rewritten by an edit, and removed with its text by a delete.
pub(crate) async fn html_is_stored_with_each_comment_case(settings: Settings) {
    let home = Home::Layout(settings.layout);
    let app = TestApp::with("md_contract", settings).await;
    let d = app.discussion("stored html").await;
    let slug = app.post(&d, None, "*a* <b>").await;
    let stored = |slug: String| {
        let (database, d) = (app.database.clone(), d.clone());
        async move {
            stored_comment(&database, home, &d, &slug)
                .await
                .expect("stored")
        }
    };
    let html = stored(slug.clone()).await;
    assert_eq!(html.get_str("html"), Ok("<p><em>a</em> &lt;b&gt;</p>\n"));
    let ada = app.token("u1", "Ada");
    let vars = json!({ "d": d, "s": slug, "t": "**b**" });
    let edited = app.ok_as(Some(&ada), EDIT, vars).await;
    assert_eq!(
        edited["editComment"]["html"],
        json!("<p><strong>b</strong></p>\n")
    );
    let html = stored(slug.clone()).await;
    assert_eq!(html.get_str("html"), Ok("<p><strong>b</strong></p>\n"));
    app.ok_as(Some(&ada), DELETE, json!({ "d": d, "s": slug }))
        .await;
    let gone = stored(slug.clone()).await;
    assert!(!gone.contains_key("html"), "{gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_layout_stores_the_html_with_the_comment_and_deleting_clears_it() {
    let config = server_config("md_stored");
    let database = config.database.clone();
    let server = Running::start(config).await;
    let client = one_shot_client();
    let (ada, moderator) = (token("ada", "Ada"), moderator_token("mod", "Mod"));
    for layout in Layout::ALL {
        let name = layout.as_str().to_uppercase();
        let home = Home::Layout(layout);
        let d = discussion_over_http(&client, &server, &ada, Some(&name)).await;
        let posted = comment_over_http(&client, &server, &ada, &d, "*a* <b>").await;
        let slug = posted["slug"].as_str().expect("slug");
        let want = "<p><em>a</em> &lt;b&gt;</p>\n";
        assert_eq!(posted["html"], json!(want));
        let stored = stored_comment(&database, home, &d, slug)
            .await
            .expect("stored");
        assert_eq!(stored.get_str("html"), Ok(want), "{layout:?} {stored:?}");

        for (who, text, want) in [
            (&ada, "**b**", "<p><strong>b</strong></p>\n"),
            (&moderator, "> c", "<blockquote>\n<p>c</p>\n</blockquote>\n"),
        ] {
            let vars = json!({ "d": d, "s": slug, "t": text });
            let edited = graphql_data(&client, &server, Some(who), EDIT, vars).await;
            assert_eq!(edited["editComment"]["html"], json!(want));
            let stored = stored_comment(&database, home, &d, slug)
                .await
                .expect("stored");
            assert_eq!(stored.get_str("html"), Ok(want), "{layout:?} {stored:?}");
        }

        let vars = json!({ "d": d, "s": slug });
        let deleted = graphql_data(&client, &server, Some(&ada), DELETE, vars).await;
        assert_eq!(
            deleted["deleteComment"],
            json!({ "text": null, "html": null })
        );
        let stored = stored_comment(&database, home, &d, slug)
            .await
            .expect("stored");
        assert!(!stored.contains_key("html"), "{layout:?} {stored:?}");
        assert_eq!(stored.get("text"), Some(&mongodb::bson::Bson::Null));
    }

    // A held comment carries its HTML to the moderator queue, and into the layout when published.
    let d = discussion_over_http(&client, &server, &moderator, Some("PER_COMMENT")).await;
    let pre = json!({ "d": d });
    let set = "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }";
    graphql_data(&client, &server, Some(&moderator), set, pre).await;
    let held = comment_over_http(&client, &server, &ada, &d, "~~held~~").await;
    let slug = held["slug"].as_str().expect("slug");
    let stored = stored_comment(&database, Home::Held, &d, slug)
        .await
        .expect("held");
    assert_eq!(stored.get_str("html"), Ok("<p><del>held</del></p>\n"));
    let approve =
        "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { html } }";
    let vars = json!({ "d": d, "s": slug });
    let approved = graphql_data(&client, &server, Some(&moderator), approve, vars).await;
    assert_eq!(
        approved["approveComment"]["html"],
        json!("<p><del>held</del></p>\n")
    );
    let public = stored_comment(&database, Home::Layout(Layout::PerComment), &d, slug).await;
    let public = public.expect("published");
    assert_eq!(public.get_str("html"), Ok("<p><del>held</del></p>\n"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_the_deepest_comments_is_read_from_storage_without_rendering() {
    // The read cache off: the stored documents are changed behind the server's back.
    let mut config = server_config("md_page");
    config.cache_bytes = 0;
    let database = config.database.clone();
    let server = Running::start(config).await;
    let client = one_shot_client();
    let ada = token("ada", "Ada");
    let text = deepest_lists(16, 10_000);
    assert_eq!(markdown::depth(&text), 16);
    for layout in Layout::ALL {
        let name = layout.as_str().to_uppercase();
        let d = discussion_over_http(&client, &server, &ada, Some(&name)).await;
        let mut slugs = Vec::new();
        for _ in 0..20 {
            let posted = comment_over_http(&client, &server, &ada, &d, &text).await;
            slugs.push(posted["slug"].as_str().expect("slug").to_owned());
        }
        // What a read returns is what is stored: a render on read would give the real HTML.
        for (n, slug) in slugs.iter().enumerate() {
            let set = doc! { "html": format!("<p>stored {n}</p>\n") };
            rewrite_stored_comment(&database, Home::Layout(layout), (&d, slug), set, &[]).await;
        }
        let page = graphql_data(&client, &server, None, PAGE, json!({ "d": d })).await;
        let shown: Vec<&str> = page["discussion"]["comments"]["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .map(|e| e["node"]["html"].as_str().expect("html"))
            .collect();
        let want: Vec<String> = (0..20).map(|n| format!("<p>stored {n}</p>\n")).collect();
        assert_eq!(shown, want, "{layout:?}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_is_never_more_than_eight_bytes_a_character_and_a_kilobyte() {
    let config = server_config("md_bound");
    let database = config.database.clone();
    let server = Running::start(config).await;
    let client = one_shot_client();
    let ada = token("ada", "Ada");
    let d = discussion_over_http(&client, &server, &ada, None).await;
    // Within the nesting limit, `- - - … x` lines render to about 10 bytes a character; one
    // reference to a long address, used 2 000 times, to about 50.
    let references = format!(
        "[a]: https://example.org/{}\n\n{}",
        "p".repeat(900),
        "[a] ".repeat(2_000)
    );
    for text in [deepest_lists(16, 9_600), references.trim_end().to_owned()] {
        let bound = 8 * text.chars().count() + 1024;
        let posted = comment_over_http(&client, &server, &ada, &d, &text).await;
        let html = posted["html"].as_str().expect("html");
        assert!(html.len() <= bound, "{} > {bound}", html.len());
        // Plain paragraphs, escaped: no list, no link.
        assert!(html == markdown::plain(&text), "{html:.200}");
        assert!(
            !html.contains("<li>") && !html.contains("<a "),
            "{html:.200}"
        );
        let slug = posted["slug"].as_str().expect("slug");
        let stored = stored_comment(&database, Home::Layout(Layout::PerComment), &d, slug).await;
        let stored = stored.expect("stored");
        assert!(stored.get_str("html") == Ok(html), "stored {stored:.200}");
        let read = graphql_data(&client, &server, None, ONE, json!({ "d": d, "s": slug })).await;
        assert!(read["comment"]["html"] == json!(html), "read {read:.200}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_stored_without_html_is_rendered_on_its_first_read_and_stored_quietly() {
    let mut config = server_config("md_legacy");
    config.cache_bytes = 0;
    let database = config.database.clone();
    let server = Running::start(config).await;
    let client = one_shot_client();
    let (ada, moderator) = (token("ada", "Ada"), moderator_token("mod", "Mod"));
    let mut feed = open_feed(&server.store).await;
    for layout in Layout::ALL {
        let name = layout.as_str().to_uppercase();
        let home = Home::Layout(layout);
        let d = discussion_over_http(&client, &server, &ada, Some(&name)).await;
        let slug = comment_over_http(&client, &server, &ada, &d, "first").await["slug"]
            .as_str()
            .expect("slug")
            .to_owned();
        // As an older version stored it: no HTML, and a text nested deeper than today's rule.
        let deep = ">".repeat(10_000) + " old";
        let set = doc! { "text": &deep };
        rewrite_stored_comment(&database, home, (&d, &slug), set, &["html"]).await;
        let read = graphql_data(&client, &server, None, ONE, json!({ "d": d, "s": slug })).await;
        let html = read["comment"]["html"].as_str().expect("html").to_owned();
        // Rendered flattened: the levels past 16 show as typed, within the bound.
        assert_eq!(html.matches("<blockquote>").count(), 16, "{html:.300}");
        assert!(html.len() <= 8 * deep.len() + 1024);
        assert!(html == markdown::render(&deep, 16), "{html:.300}");
        let stored = stored_html(&database, home, (&d, &slug)).await;
        assert!(stored.get_str("html") == Ok(html.as_str()), "{layout:?}");
        let text = stored.get_str("text");
        assert!(text == Ok(deep.as_str()), "the text stays as stored");
        // Stored by a write of its own, after the read. Storing it changed nothing the public sees: the feed marks it quiet (live subscribers
        // pass over it), and an edit afterwards is a change as always.
        let vars = json!({ "d": d, "s": slug, "t": "second" });
        graphql_data(&client, &server, Some(&moderator), EDIT, vars).await;
        let mut kinds = Vec::new();
        while kinds.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(30), feed.next()).await {
                Ok(Some(Watched::Change(change))) if change.discussion.as_str() == d => {
                    if change.kind != ChangeKind::Posted {
                        assert_eq!(change.slug.as_str(), slug);
                        kinds.push(change.kind);
                    }
                }
                Ok(Some(_)) => {}
                other => panic!("the feed stopped: {other:?}"),
            }
        }
        assert_eq!(
            kinds,
            [ChangeKind::Quiet, ChangeKind::Changed],
            "{layout:?}"
        );
    }

    // A held comment stored without HTML: its author's read stores it too.
    let d = discussion_over_http(&client, &server, &moderator, None).await;
    let set = "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }";
    graphql_data(&client, &server, Some(&moderator), set, json!({ "d": d })).await;
    let slug = comment_over_http(&client, &server, &ada, &d, "*held*").await["slug"]
        .as_str()
        .expect("slug")
        .to_owned();
    rewrite_stored_comment(&database, Home::Held, (&d, &slug), doc! {}, &["html"]).await;
    let read = graphql_data(
        &client,
        &server,
        Some(&ada),
        ONE,
        json!({ "d": d, "s": slug }),
    )
    .await;
    assert_eq!(read["comment"]["html"], json!("<p><em>held</em></p>\n"));
    let stored = stored_html(&database, Home::Held, (&d, &slug)).await;
    assert_eq!(stored.get_str("html"), Ok("<p><em>held</em></p>\n"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_html_stores_the_html_of_every_comment_without_it_once() {
    let config = server_config("md_fill");
    let database = config.database.clone();
    let server = Running::start(config).await;
    let client = one_shot_client();
    let (ada, moderator) = (token("ada", "Ada"), moderator_token("mod", "Mod"));
    let mut legacy: Vec<(Home, String, String, String)> = Vec::new();
    for layout in Layout::ALL {
        let name = layout.as_str().to_uppercase();
        let d = discussion_over_http(&client, &server, &ada, Some(&name)).await;
        for n in 0..3 {
            let text = format!("*{n}* in {name}");
            let posted = comment_over_http(&client, &server, &ada, &d, &text).await;
            let slug = posted["slug"].as_str().expect("slug").to_owned();
            legacy.push((Home::Layout(layout), d.clone(), slug, text));
        }
        // A deleted comment has no text, hence no HTML to store.
        let gone = comment_over_http(&client, &server, &ada, &d, "gone").await;
        let vars = json!({ "d": d, "s": gone["slug"] });
        graphql_data(&client, &server, Some(&ada), DELETE, vars).await;
    }
    let d = discussion_over_http(&client, &server, &moderator, None).await;
    let set = "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }";
    graphql_data(&client, &server, Some(&moderator), set, json!({ "d": d })).await;
    let held = comment_over_http(&client, &server, &ada, &d, "*held*").await;
    let slug = held["slug"].as_str().expect("slug").to_owned();
    legacy.push((Home::Held, d, slug, "*held*".to_owned()));
    server.shutdown().await;
    for (home, d, slug, _) in &legacy {
        rewrite_stored_comment(&database, *home, (d, slug), doc! {}, &["html"]).await;
    }

    let (ok, out, err) = threadql_against(&database, &["render-html", "--batch", "2"], &[]).await;
    assert!(ok, "{out}\n{err}");
    // 4 discussions; 3 × 4 public comments and a held one read; 10 stored.
    for line in [
        "discussions: 4",
        "comments: 13",
        "HTML stored: 10",
        "changed meanwhile: 0",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
    for (home, d, slug, text) in &legacy {
        let stored = stored_comment(&database, *home, d, slug)
            .await
            .expect("stored");
        assert_eq!(
            stored.get_str("html"),
            Ok(markdown::render(text, 16).as_str())
        );
    }
    let (ok, again, err) = threadql_against(&database, &["render-html"], &[]).await;
    assert!(ok, "{again}\n{err}");
    assert!(again.contains("HTML stored: 0"), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_text_nested_too_deep_is_flattened_and_reported() {
    let config = server_config("md_import");
    let database = config.database.clone();
    let d = threadql::domain::DiscussionId::generate().to_string();
    // Deep, and within the length a post may have: the rules of a post are checked first.
    let deep = ">".repeat(9_000) + " quoted";
    let lines: Vec<Value> = vec![
        json!({"format": "threadql", "version": 1, "exported": "2026-01-01T00:00:00Z"}),
        json!({"type": "discussion", "id": d, "key": null, "url": null, "title": "Imported",
            "layout": "bucketed", "locked": false, "moderation": null,
            "createdAt": "2026-01-01T00:00:00Z", "pinned": []}),
        json!({"type": "comment", "discussion": d, "slug": "deep0000", "parentSlug": null,
            "posted": "2026-01-01T00:01:00Z", "author": {"id": "u1", "name": "Ada"},
            "text": deep, "deleted": false, "editedAt": null, "editedBy": null,
            "revisions": [], "status": "approved", "reason": null, "held": false}),
        json!({"type": "comment", "discussion": d, "slug": "flat0000", "parentSlug": null,
            "posted": "2026-01-01T00:02:00Z", "author": {"id": "u2", "name": "Bo"},
            "text": "*fine*", "deleted": false, "editedAt": null, "editedBy": null,
            "revisions": [], "status": "approved", "reason": null, "held": false}),
    ];
    let file = std::env::temp_dir().join(format!("{database}.jsonl"));
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, body).expect("write the file");
    let path = file.to_str().expect("a path");
    let (ok, out, err) =
        threadql_against(&database, &["import", path, "--format", "threadql"], &[]).await;
    let _ = std::fs::remove_file(&file);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("comments: 2 (2 added)"), "{out}");
    assert!(out.contains("flattened: 1"), "{out}");
    assert!(
        out.contains("flattened threadql:deep0000: block quotes and lists nested 9000 levels deep"),
        "{out}"
    );
    let home = Home::Layout(Layout::Bucketed);
    let stored = stored_comment(&database, home, &d, "deep0000")
        .await
        .expect("stored");
    let text = stored.get_str("text").expect("text");
    assert_eq!(markdown::depth(text), 16);
    assert!(
        text.starts_with(&format!("{}\\>", ">".repeat(16))),
        "{text:.40}"
    );
    assert!(text.replace('\\', "") == deep, "nothing it says is lost");
    let html = stored.get_str("html").expect("html");
    assert_eq!(html.matches("<blockquote>").count(), 16);
    let fine = stored_comment(&database, home, &d, "flat0000")
        .await
        .expect("stored");
    assert_eq!(fine.get_str("html"), Ok("<p><em>fine</em></p>\n"));

    // Served over a socket as stored.
    let server = Running::start(config).await;
    let client = one_shot_client();
    let vars = json!({ "d": d, "s": "deep0000" });
    let read = graphql_data(&client, &server, None, ONE, vars).await;
    assert!(read["comment"]["html"] == json!(html), "{read:.300}");
    server.shutdown().await;
}
