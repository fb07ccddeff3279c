//! Atom feeds over real HTTP, on every layout: `/feeds/discussion/<key>.atom` and
//! `/feeds/recent.atom` parse with Python's feedparser and follow the Atom rules it does not
//! enforce (tests/python/check_feed.py), hold the newest 50 public comments newest first with
//! their ids, authors, titles, links and the html the API serves, and leave out deleted,
//! held and rejected comments; an edit shows; a held comment appears once approved; hostile
//! names and texts stay escaped. Conditional GETs get `304` until the feed changes. A
//! discussion's feed costs the same few database commands at 40 comments as at 300. Bad paths
//! get short `400` and `404` answers.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{
    db_commands, graphql_data, layout_name, load_discussion, moderator_token, post_in, repository,
    server_config, token, Running, Scrape,
};

/// The most entries a feed holds.
const FEED_SIZE: usize = 50;
/// The page of the discussion with hostile texts (its `&` must be escaped in every link).
const HOSTILE_PAGE: &str = "https://blog.example/posts/fish?a=1&b=2";
/// Its title.
const HOSTILE_TITLE: &str = "Fish & <Chips> \"quoted\" 'too'";
/// The title of the discussion of many comments.
const MANY_TITLE: &str = "Many comments";

/// A comment a feed should hold: its discussion's id, title and page, its slug and author.
#[derive(Clone)]
struct FeedComment {
    discussion: String,
    title: String,
    page: Option<String>,
    slug: String,
    author: String,
}

/// GETs `path` with `headers`; answers with the status, the headers and the body.
async fn feed_fetch(
    server: &Running,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, HeaderMap, String) {
    let mut request = reqwest::Client::new().get(server.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the feed request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("a body"))
}

/// GETs a feed that must be there, checking its headers; answers with its body and ETag.
async fn feed_body(server: &Running, path: &str) -> (String, String) {
    let (status, headers, body) = feed_fetch(server, path, &[]).await;
    assert_eq!(status, 200, "{path}: {body}");
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{path}: no {name}"))
            .to_owned()
    };
    assert_eq!(
        header("content-type"),
        "application/atom+xml; charset=utf-8"
    );
    assert_eq!(header("cache-control"), "no-cache");
    assert!(header("last-modified").ends_with(" GMT"), "{path}");
    (body, header("etag"))
}

/// Creates the discussion of `key` in `layout` as a moderator; answers with its id.
async fn feed_discussion(
    server: &Running,
    key: &str,
    title: &str,
    page: Option<&str>,
    layout: Layout,
) -> String {
    let data = server
        .mutate(
            &moderator_token("feeds-mod", "Moderator"),
            "mutation($k: String!, $t: String!, $u: String, $l: StorageLayout) { ensureDiscussion(input: {key: $k, title: $t, url: $u, layout: $l}) { id layout } }",
            json!({ "k": key, "t": title, "u": page, "l": layout_name(layout) }),
        )
        .await;
    assert_eq!(data["ensureDiscussion"]["layout"], layout_name(layout));
    data["ensureDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

/// The html the API serves to the public for each public comment of discussion `d`, by slug.
async fn feed_served_html(server: &Running, d: &str) -> BTreeMap<String, String> {
    let data = graphql_data(
        &reqwest::Client::new(),
        server,
        None,
        "query($d: ID!) { discussion(id: $d) { comments(first: 100, order: NEWEST) { nodes { slug html } } } }",
        json!({ "d": d }),
    )
    .await;
    let nodes = data["discussion"]["comments"]["nodes"]
        .as_array()
        .expect("nodes")
        .clone();
    nodes
        .into_iter()
        .filter_map(|n| {
            Some((
                n["slug"].as_str()?.to_owned(),
                n["html"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// What check_feed.py expects of a feed holding `comments`, in that order.
async fn feed_expectation(
    server: &Running,
    feed: (&str, &str, &str, Option<&str>),
    comments: &[FeedComment],
) -> Value {
    let (id, title, self_link, alternate) = feed;
    let mut html: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for c in comments {
        if !html.contains_key(&c.discussion) {
            let served = feed_served_html(server, &c.discussion).await;
            html.insert(c.discussion.clone(), served);
        }
    }
    let entries: Vec<Value> = comments
        .iter()
        .map(|c| {
            json!({
                "id": format!("urn:threadql:comment:{}:{}", c.discussion, c.slug),
                "title": format!("{} on {}", c.author, c.title),
                "author": c.author,
                "html": html[&c.discussion].get(&c.slug).unwrap_or_else(|| panic!("no html served for {}", c.slug)),
                "link": c.page.as_ref().map(|p| format!("{p}#comment-{}", c.slug)),
            })
        })
        .collect();
    json!({ "id": id, "title": title, "self": self_link, "alternate": alternate, "entries": entries })
}

/// What check_feed.py expects of the recent feed holding `comments`.
async fn feed_recent_expectation(server: &Running, comments: &[FeedComment]) -> Value {
    let feed = (
        "urn:threadql:recent",
        "Recent comments",
        "/feeds/recent.atom",
        None,
    );
    feed_expectation(server, feed, comments).await
}

/// Runs tests/python/check_feed.py on `xml` with `expect`, failing with what it printed.
fn feed_validate(xml: &str, expect: &Value) {
    let script = repository().join("tests/python/check_feed.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/install-deps.sh installs feedparser)");
    let input = json!({ "xml": xml, "expect": expect }).to_string();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("the feed to the checker");
    let output = child.wait_with_output().expect("the checker's answer");
    assert!(
        output.status.success(),
        "check_feed.py refused the feed:\n{}{}\n{xml}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The path of the feed of `key`, percent-encoded.
fn feed_path(key: &str) -> String {
    let encoded: String = key
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect();
    format!("/feeds/discussion/{encoded}.atom")
}

/// Both feeds on one layout, over a server of their own.
async fn feeds_on(layout: Layout) {
    let label = format!("feeds_{}", layout_name(layout).to_lowercase());
    let server = Running::start(server_config(&label)).await;
    let moderator = moderator_token("feeds-mod", "Moderator");
    let ada = token("u1", "Ada");
    let hostile = token("u2", "A & <B>");

    // More than 50 comments: the feed holds the newest 50, newest first.
    let many_key = format!("many/{label}");
    let many = feed_discussion(&server, &many_key, MANY_TITLE, None, layout).await;
    let mut many_comments = Vec::new();
    for i in 0..FEED_SIZE + 5 {
        let slug = server
            .post(&ada, &many, None, &format!("comment number {i}"))
            .await;
        many_comments.push(FeedComment {
            discussion: many.clone(),
            title: MANY_TITLE.to_owned(),
            page: None,
            slug,
            author: "Ada".to_owned(),
        });
    }
    many_comments.reverse();
    let many_path = feed_path(&many_key);
    let (xml, _) = feed_body(&server, &many_path).await;
    let many_feed_id = format!("urn:threadql:discussion:{many}");
    let expect = feed_expectation(
        &server,
        (&many_feed_id, "Comments on Many comments", &many_path, None),
        &many_comments[..FEED_SIZE],
    )
    .await;
    feed_validate(&xml, &expect);

    // Hostile texts, a deleted, a rejected, an edited and a held comment.
    let key = format!("posts/{label}/fish & <chips> \"é\"");
    let d = feed_discussion(&server, &key, HOSTILE_TITLE, Some(HOSTILE_PAGE), layout).await;
    let scripted = "<script>alert('x')</script> & **bold** <b>raw</b> &amp; \"quotes\"";
    let first = server.post(&hostile, &d, None, scripted).await;
    let deleted = server.post(&ada, &d, None, "deleted soon").await;
    let rejected = server.post(&ada, &d, None, "rejected soon").await;
    let edited = server.post(&ada, &d, None, "the first text").await;
    let reply = server
        .post(&ada, &d, Some(&first), "a reply & <i>more</i>")
        .await;
    server
        .mutate(
            &ada,
            "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
            json!({ "d": d, "s": deleted }),
        )
        .await;
    server
        .mutate(
            &moderator,
            "mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s, reason: \"spam\") { slug } }",
            json!({ "d": d, "s": rejected }),
        )
        .await;
    server
        .mutate(
            &ada,
            "mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: \"the *new* text\"}) { slug } }",
            json!({ "d": d, "s": edited }),
        )
        .await;
    server
        .mutate(
            &moderator,
            "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { id } }",
            json!({ "d": d }),
        )
        .await;
    let held = server
        .post(
            &token("u3", "Held Harry"),
            &d,
            None,
            "waiting for a moderator",
        )
        .await;
    let comment = |slug: &str, author: &str| FeedComment {
        discussion: d.clone(),
        title: HOSTILE_TITLE.to_owned(),
        page: Some(HOSTILE_PAGE.to_owned()),
        slug: slug.to_owned(),
        author: author.to_owned(),
    };
    let shown = vec![
        comment(&reply, "Ada"),
        comment(&edited, "Ada"),
        comment(&first, "A & <B>"),
    ];
    let path = feed_path(&key);
    let feed_id = format!("urn:threadql:discussion:{d}");
    let feed_title = format!("Comments on {HOSTILE_TITLE}");
    let (xml, etag) = feed_body(&server, &path).await;
    assert!(xml.contains("the &lt;em&gt;new&lt;/em&gt; text"), "{xml}");
    assert!(!xml.contains("first text") && !xml.contains("soon") && !xml.contains("waiting"));
    assert!(!xml.contains("<script"), "{xml}");
    let expect = feed_expectation(
        &server,
        (&feed_id, &feed_title, &path, Some(HOSTILE_PAGE)),
        &shown,
    )
    .await;
    feed_validate(&xml, &expect);

    // The recent feed: the newest published comments across the server, past the first range
    // read (its deleted and rejected comments make it read one more).
    let mut recent: Vec<FeedComment> = shown.clone();
    recent.extend(many_comments.iter().cloned());
    recent.truncate(FEED_SIZE);
    let (xml, recent_etag) = feed_body(&server, "/feeds/recent.atom").await;
    feed_validate(&xml, &feed_recent_expectation(&server, &recent).await);

    // Conditional GETs: 304 without a body while the feed is the same.
    for (feed, tag) in [(path.as_str(), &etag), ("/feeds/recent.atom", &recent_etag)] {
        let (status, headers, body) = feed_fetch(&server, feed, &[("if-none-match", tag)]).await;
        assert_eq!((status, body.as_str()), (304, ""), "{feed}");
        assert_eq!(
            headers.get("etag").and_then(|v| v.to_str().ok()),
            Some(tag.as_str())
        );
        let (_, headers, _) = feed_fetch(&server, feed, &[]).await;
        let modified = headers["last-modified"]
            .to_str()
            .expect("a date")
            .to_owned();
        let (status, _, body) =
            feed_fetch(&server, feed, &[("if-modified-since", &modified)]).await;
        assert_eq!((status, body.as_str()), (304, ""), "{feed}");
        let (status, _, _) = feed_fetch(&server, feed, &[("if-none-match", "\"other\"")]).await;
        assert_eq!(status, 200, "{feed}");
    }

    // The held comment, approved, is published now: at the top of both feeds; the old tags
    // get the new feeds.
    server
        .mutate(
            &moderator,
            "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug } }",
            json!({ "d": d, "s": held }),
        )
        .await;
    for (feed, tag) in [(path.as_str(), &etag), ("/feeds/recent.atom", &recent_etag)] {
        let (status, headers, body) = feed_fetch(&server, feed, &[("if-none-match", tag)]).await;
        assert_eq!(status, 200, "{feed}");
        assert_ne!(
            headers.get("etag").and_then(|v| v.to_str().ok()),
            Some(tag.as_str())
        );
        assert!(body.contains("waiting for a moderator"), "{feed}");
    }
    let mut shown = shown;
    shown.insert(0, comment(&held, "Held Harry"));
    let (xml, _) = feed_body(&server, &path).await;
    let expect = feed_expectation(
        &server,
        (&feed_id, &feed_title, &path, Some(HOSTILE_PAGE)),
        &shown,
    )
    .await;
    feed_validate(&xml, &expect);
    recent.insert(0, comment(&held, "Held Harry"));
    recent.truncate(FEED_SIZE);
    let (xml, _) = feed_body(&server, "/feeds/recent.atom").await;
    feed_validate(&xml, &feed_recent_expectation(&server, &recent).await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feeds_per_comment() {
    feeds_on(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feeds_embedded() {
    feeds_on(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feeds_bucketed() {
    feeds_on(Layout::Bucketed).await;
}

/// The database commands one request of `path` costs, read from `/metrics`.
async fn feed_commands(server: &Running, path: &str) -> u64 {
    let client = reqwest::Client::new();
    let before = db_commands(&client, server).await;
    let (status, _, body) = feed_fetch(server, path, &[]).await;
    assert_eq!(status, 200, "{path}: {body}");
    db_commands(&client, server).await - before
}

/// A discussion's feed is one bounded read: at 300 comments it costs the same few commands as
/// at 40, on every layout (counted without the read cache, whose hits would spare some).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discussion_feed_costs_the_same_at_any_size() {
    let mut config = server_config("feeds_costs");
    config.cache_bytes = 0;
    let server = Running::start(config).await;
    for layout in Layout::ALL {
        let mut costs = Vec::new();
        for size in [40, 300] {
            let key = format!("costs/{}/{size}", layout_name(layout));
            let d = feed_discussion(&server, &key, "Costs", None, layout).await;
            let discussion = load_discussion(&server.store, &d).await;
            let mut parent = None;
            for i in 0..size {
                let slug = post_in(
                    &server.store,
                    layout,
                    &discussion,
                    parent.as_ref(),
                    "a comment",
                )
                .await;
                // Every fifth starts a thread; the others reply to it.
                parent = match i % 5 {
                    4 => None,
                    _ => Some(parent.unwrap_or(slug)),
                };
            }
            let (xml, _) = feed_body(&server, &feed_path(&key)).await;
            assert_eq!(
                xml.matches("<entry>").count(),
                size.min(FEED_SIZE),
                "{layout:?}"
            );
            costs.push(feed_commands(&server, &feed_path(&key)).await);
        }
        assert_eq!(costs[0], costs[1], "{layout:?}: at 40 and at 300 comments");
        // The discussion by its key, and one page of its newest comments.
        assert_eq!(costs[0], 2, "{layout:?}: {} commands", costs[0]);
    }
    server.shutdown().await;
}

/// The reads (`find`, `aggregate`) a server has sent; its change stream's `getMore`s are left
/// out.
async fn feed_reads_sent(server: &Running) -> f64 {
    let scrape = Scrape::of(server).await;
    ["find", "aggregate"]
        .iter()
        .map(|c| scrape.value("threadql_db_commands_total", &[("command", c)]))
        .sum()
}

/// A hot discussion's feed goes through the read cache: once the discussion is admitted (a few
/// reads within a minute), a request of its feed reads nothing from the database, on every
/// layout; after a post it reads again, and holds the post.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_discussion_feed_is_read_from_the_cache() {
    let server = Running::start(server_config("feeds_cached")).await;
    let ada = token("u1", "Ada");
    for layout in Layout::ALL {
        let key = format!("hot/{}", layout_name(layout));
        let d = feed_discussion(&server, &key, "Hot", None, layout).await;
        for i in 0..3 {
            server.post(&ada, &d, None, &format!("hot {i}")).await;
        }
        let path = feed_path(&key);
        let mut costs = Vec::new();
        for _ in 0..8 {
            let before = feed_reads_sent(&server).await;
            feed_body(&server, &path).await;
            costs.push(feed_reads_sent(&server).await - before);
        }
        assert_eq!(costs.first(), Some(&2.0), "{layout:?}: {costs:?}");
        assert_eq!(costs.last(), Some(&0.0), "{layout:?}: {costs:?}");
        server.post(&ada, &d, None, "after the cache").await;
        let before = feed_reads_sent(&server).await;
        let (xml, _) = feed_body(&server, &path).await;
        assert!(feed_reads_sent(&server).await > before, "{layout:?}");
        assert!(xml.contains("after the cache"), "{layout:?}");
    }
    server.shutdown().await;
}

/// The status of a GET of `path` sent as written (no client normalises its `..` segments).
async fn feed_raw_status(server: &Running, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: feeds\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("the request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("the answer");
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

/// Bad paths: short plain-text refusals, never a feed, never a server error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_paths_that_are_refused() {
    let mut config = server_config("feeds_refused");
    config.cors_origins = Some("https://blog.example".parse().expect("origins"));
    let server = Running::start(config).await;
    feed_discussion(&server, "known", "Known", None, Layout::PerComment).await;
    let huge = format!("/feeds/discussion/{}.atom", "k".repeat(20_000));
    let cases: [(&str, u16); 12] = [
        ("/feeds/discussion/unknown.atom", 404),
        ("/feeds/discussion/..%2F..%2Fetc%2Fpasswd.atom", 404),
        ("/feeds/discussion/known", 404),
        ("/feeds/discussion/known.atom.xml", 404),
        ("/feeds/discussion/known.rss", 404),
        ("/feeds/discussion/a%00b.atom", 400),
        ("/feeds/discussion/a%0Db.atom", 400),
        ("/feeds/discussion/%C0%AF.atom", 400),
        ("/feeds/discussion/a%E2%80%AEb.atom", 400),
        ("/feeds/discussion/.atom", 400),
        ("/feeds/discussion/", 404),
        (&huge, 400),
    ];
    for (path, want) in cases {
        let (status, headers, body) = feed_fetch(&server, path, &[]).await;
        let shown: String = path.chars().take(60).collect();
        assert_eq!(status, want, "{shown}: {body}");
        assert!(
            headers["content-type"]
                .to_str()
                .is_ok_and(|t| t.starts_with("text/plain")),
            "{shown}"
        );
        assert!(!body.is_empty() && body.len() < 200, "{shown}: {body}");
    }
    // Dot segments are not resolved: they are part of the key, or of no route.
    for path in [
        "/feeds/discussion/../../etc/passwd.atom",
        "/feeds/discussion/../known.atom",
        "/feeds/../feeds/recent.atom",
        "/feeds/discussion/./known.atom",
    ] {
        assert_eq!(feed_raw_status(&server, path).await, 404, "{path}");
    }
    // The known key answers, whatever the query string; its feed is empty but valid.
    let (status, _, body) = feed_fetch(&server, "/feeds/discussion/known.atom?x=%00", &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.matches("<entry>").count(), 0);
    // Only GET (and HEAD).
    let response = reqwest::Client::new()
        .post(server.url("/feeds/recent.atom"))
        .send()
        .await
        .expect("a POST");
    assert_eq!(response.status().as_u16(), 405);
    let response = reqwest::Client::new()
        .head(server.url("/feeds/discussion/known.atom"))
        .send()
        .await
        .expect("a HEAD");
    assert_eq!(response.status().as_u16(), 200);
    // Pages of the allowed origins may read feeds, as they read /graphql.
    let (_, headers, _) = feed_fetch(
        &server,
        "/feeds/recent.atom",
        &[("origin", "https://blog.example")],
    )
    .await;
    assert_eq!(
        headers
            .get("access-control-allow-origin")
            .and_then(|v| v.to_str().ok()),
        Some("https://blog.example")
    );
    server.shutdown().await;
}
