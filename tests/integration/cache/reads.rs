//! What the cache tests read: every public read of a discussion as documents, one server's
//! answers to all of them as each viewer (a snapshot), and how two snapshots are compared.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::Digest as _;

use super::*;

/// Every field of a comment, the viewer's own included.
pub(super) const COMMENT: &str = "fragment C on Comment { id discussionId slug fullSlug parentSlug depth posted editedAt status deleted text html author { id name } upvotes downvotes score viewerVote replyCount pinned moderationReason reportCount revisions { text editedAt editor { id name } } }";
/// What a list shows of a comment (a list's order and members are what it adds to [`COMMENT`]).
pub(super) const SHORT: &str = "fragment S on Comment { slug text status deleted author { id name } upvotes downvotes viewerVote replyCount }";
/// Where a page stands.
pub(super) const PAGE_INFO: &str =
    "fragment P on PageInfo { hasNextPage hasPreviousPage startCursor endCursor }";
/// A page of comments with every field, with their cursors.
pub(super) const FULL_PAGE: &str = "fragment G on CommentConnection { totalCount edges { cursor node { ...C } } pageInfo { ...P } }";
/// A page of comments as lists show them, with their cursors.
pub(super) const PAGE: &str = "fragment Q on CommentConnection { totalCount edges { cursor node { ...S } } pageInfo { ...P } }";
/// Top-level comments with their replies three levels down.
pub(super) const TREE: &str = "fragment T on CommentConnection { totalCount pageInfo { ...P } nodes { ...S replies(first: 5) { totalCount pageInfo { ...P } nodes { ...S replies(first: 5) { totalCount pageInfo { ...P } nodes { ...S replies(first: 5) { ...Q } } } } } } }";

/// The discussion and its lists: every order, forward and backward, by offset, the tree, the
/// ranked orders.
pub(super) const LISTS: &str = r#"query($d: ID!) { discussion(id: $d) {
  id title key url layout commentCount locked moderation pendingCount createdAt
  pinnedComments { ...C }
  all: comments(first: 100) { ...G }
  first: comments(first: 4) { ...Q }
  final: comments(last: 4) { ...Q }
  newest: comments(order: NEWEST, first: 4) { ...Q }
  newestFinal: comments(order: NEWEST, last: 3) { ...Q }
  threaded: comments(order: THREADED, first: 100) { totalCount edges { cursor node { slug depth } } pageInfo { ...P } }
  offset: comments(order: THREADED, first: 3, offset: 2) { ...Q }
  tree: threads(first: 10) { ...T }
  newestThreads: threads(order: NEWEST, first: 3) { ...Q }
  threadsOffset: threads(first: 2, offset: 1) { ...Q }
  lastThreads: threads(last: 3) { totalCount nodes { slug replies(last: 2) { ...Q } } }
  top: comments(order: TOP, first: 5) { ...Q }
  best: comments(order: BEST, first: 5) { ...Q }
  controversial: comments(order: CONTROVERSIAL, first: 5) { ...Q }
  rankedTree: threads(order: TOP, first: 5) { totalCount pageInfo { ...P } nodes { slug upvotes downvotes score
    best: replies(order: BEST, first: 3) { ...Q }
    controversial: replies(order: CONTROVERSIAL, first: 3) { ...Q } } }
} }"#;

/// Direct links (`s` may be a held comment, `t` is a listed one) with their parents, replies and
/// sub-discussions, the discussion by key, the listing of discussions and federation entities.
pub(super) const LINKS: &str = r#"query($d: ID!, $k: String!, $s: String!, $t: String!, $r: [_Any!]!) {
  link: comment(discussionId: $d, slug: $s) { ...C parent { ...C parent { ...S } }
    replies(first: 3) { ...G } newestReplies: replies(order: NEWEST, first: 2) { ...Q }
    sub: subDiscussion(first: 3) { ...G } subBack: subDiscussion(last: 2) { ...Q } }
  other: comment(discussionId: $d, slug: $t) { ...C wholeSub: subDiscussion(first: 50) { ...Q } }
  byKey: discussionByKey(key: $k) { id commentCount locked moderation inner: comment(slug: $t) { ...S } threads(first: 3) { ...Q } }
  byKeys: discussionsByKeys(keys: [$k]) { id commentCount locked moderation }
  listing: discussions(first: 10) { totalCount nodes { id commentCount locked moderation } }
  entities: _entities(representations: $r) { ... on Comment { ...C } ... on Discussion { id commentCount locked } }
}"#;

/// The pages after (or before) the cursors the same server gave in [`LISTS`] and [`LINKS`].
pub(super) const PAGES: &str = r#"query($d: ID!, $s: String!, $first: String, $final: String, $newest: String, $threads: String, $top: String, $best: String, $controversial: String, $sub: String) {
  discussion(id: $d) {
    next: comments(first: 4, after: $first) { ...Q }
    back: comments(last: 3, before: $final) { ...Q }
    newestNext: comments(order: NEWEST, first: 4, after: $newest) { ...Q }
    threadsNext: threads(order: NEWEST, first: 3, after: $threads) { ...Q }
    topNext: comments(order: TOP, first: 5, after: $top) { ...Q }
    bestBack: comments(order: BEST, last: 3, before: $best) { ...Q }
    controversialNext: comments(order: CONTROVERSIAL, first: 5, after: $controversial) { ...Q }
  }
  focus: comment(discussionId: $d, slug: $s) { subNext: subDiscussion(first: 3, after: $sub) { ...Q } }
}"#;

/// Who reads.
pub(super) struct Viewer {
    pub(super) name: &'static str,
    pub(super) token: Option<String>,
    /// Reads anonymously by GET as a browser does: persisted queries, each URL's answer kept
    /// with its `ETag` and revalidated (a `304` is answered with the kept body).
    browser: Option<Mutex<Browser>>,
}

impl Viewer {
    pub(super) fn new(name: &'static str, token: Option<String>) -> Viewer {
        Viewer {
            name,
            token,
            browser: None,
        }
    }

    /// An anonymous reader by GET, with a browser's cache.
    pub(super) fn browser(name: &'static str) -> Viewer {
        Viewer {
            browser: Some(Mutex::default()),
            ..Viewer::new(name, None)
        }
    }
}

/// Anonymous (by POST, through the response cache), anonymous by GET with revalidation, and `u1`
/// signed in (so `viewerVote` and an author's view are read).
pub(super) fn viewers() -> [Viewer; 3] {
    [
        Viewer::new("anonymous", None),
        Viewer::browser("anonymous by GET"),
        Viewer::new("u1", Some(user("u1"))),
    ]
}

/// What a browser keeps of GET answers, by URL: the `ETag` and the body.
#[derive(Default)]
pub(super) struct Browser {
    kept: HashMap<String, (String, Value)>,
    /// Answers served as `304` so far.
    pub(super) revalidated: u32,
}

/// Sends a query by GET as a persisted query (its hash; with its text when the server does not
/// know it yet), revalidating the answer `browser` kept for the URL; returns the body (the kept
/// one on `304`).
async fn ask_by_get(
    client: &reqwest::Client,
    server: &Running,
    browser: &Mutex<Browser>,
    query: &str,
    vars: &Value,
) -> Value {
    let hash = format!("{:x}", sha2::Sha256::digest(query.as_bytes()));
    let extensions = json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } });
    let mut url = reqwest::Url::parse(&server.url("/graphql")).expect("a URL");
    url.query_pairs_mut()
        .append_pair("extensions", &extensions.to_string())
        .append_pair("variables", &vars.to_string());
    for with_text in [false, true] {
        if with_text {
            url.query_pairs_mut().append_pair("query", query);
        }
        let kept = lock(browser).kept.get(url.as_str()).cloned();
        let mut request = client.get(url.clone());
        if let Some((tag, _)) = &kept {
            request = request.header("if-none-match", tag);
        }
        let response = request.send().await.expect("send");
        let status = response.status().as_u16();
        if status == 304 {
            let (_, body) = kept.expect("a 304 answers a request that named a tag");
            lock(browser).revalidated += 1;
            return body;
        }
        let tag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body: Value = response.json().await.expect("json body");
        assert_eq!(status, 200, "{body:#}");
        if body["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND" {
            continue;
        }
        match tag {
            Some(tag) => lock(browser)
                .kept
                .insert(url.to_string(), (tag, body.clone())),
            None => lock(browser).kept.remove(url.as_str()),
        };
        return body;
    }
    panic!("a persisted query sent with its text is known");
}

fn lock(browser: &Mutex<Browser>) -> std::sync::MutexGuard<'_, Browser> {
    browser.lock().unwrap_or_else(|p| p.into_inner())
}

/// How many answers the browser readers among `viewers` were given as `304`.
pub(super) fn revalidated(viewers: &[Viewer]) -> u32 {
    viewers
        .iter()
        .filter_map(|v| v.browser.as_ref())
        .map(|b| lock(b).revalidated)
        .sum()
}

/// A read of `viewer`: by POST with their token, or by GET as a browser.
async fn read_as(
    client: &reqwest::Client,
    server: &Running,
    viewer: &Viewer,
    query: &str,
    vars: Value,
) -> Value {
    match &viewer.browser {
        Some(browser) => ask_by_get(client, server, browser, query, &vars).await,
        None => ask(client, server, viewer.token.as_deref(), query, vars).await,
    }
}

/// What a snapshot reads: the discussion, its key, and the comments linked to directly (`s` may
/// be held, `t` is listed).
pub(super) struct Target {
    pub(super) d: String,
    pub(super) key: String,
    pub(super) s: String,
    pub(super) t: String,
}

/// One server's answers to every public read of a target, as each viewer: (read, answer).
pub(super) type Snapshot = Vec<(String, Value)>;

/// Sends a query as `token`; returns the body (HTTP 200 expected).
pub(super) async fn ask(
    client: &reqwest::Client,
    server: &Running,
    token: Option<&str>,
    query: &str,
    vars: Value,
) -> Value {
    let (status, body) = post_graphql(client, server, token, query, vars).await;
    assert_eq!(status, 200, "{body:#}");
    body
}

/// Reads every public read of `target` on `server`, as each viewer. The cursor pages start at
/// the cursors the same server gave, so two servers that agree on the lists read the same pages.
pub(super) async fn snapshot(
    client: &reqwest::Client,
    server: &Running,
    target: &Target,
    viewers: &[Viewer],
) -> Snapshot {
    // Each document with the fragments it uses (an unused one makes it invalid).
    let fragments = format!("{COMMENT} {SHORT} {PAGE_INFO} {FULL_PAGE} {PAGE}");
    let lists_query = format!("{LISTS} {fragments} {TREE}");
    let links_query = format!("{LINKS} {fragments}");
    let pages_query = format!("{PAGES} {SHORT} {PAGE_INFO} {PAGE}");
    let (d, s, t) = (&target.d, &target.s, &target.t);
    let representations = json!([
        { "__typename": "Comment", "discussionId": d, "slug": s },
        { "__typename": "Comment", "discussionId": d, "slug": t },
        { "__typename": "Discussion", "id": d },
        { "__typename": "Discussion", "key": target.key },
    ]);
    let mut out = Vec::new();
    for viewer in viewers {
        let lists = read_as(client, server, viewer, &lists_query, json!({ "d": d })).await;
        let vars = json!({ "d": d, "k": target.key, "s": s, "t": t, "r": representations });
        let links = read_as(client, server, viewer, &links_query, vars).await;
        let list = &lists["data"]["discussion"];
        let end = |name: &str| list[name]["pageInfo"]["endCursor"].clone();
        let vars = json!({
            "d": d, "s": s,
            "first": end("first"),
            "final": list["final"]["pageInfo"]["startCursor"],
            "newest": end("newest"),
            "threads": end("newestThreads"),
            "top": end("top"),
            "best": end("best"),
            "controversial": end("controversial"),
            "sub": links["data"]["link"]["sub"]["pageInfo"]["endCursor"],
        });
        let pages = read_as(client, server, viewer, &pages_query, vars).await;
        for (read, body) in [("lists", lists), ("links", links), ("pages", pages)] {
            out.push((format!("{read} as {}", viewer.name), body));
        }
    }
    out
}

/// Whether a snapshot is a complete one: the lists without errors, the links and pages with at
/// most NOT_FOUND (a held comment linked to by someone else); else what is missing.
pub(super) fn complete(snapshot: &Snapshot) -> Result<(), String> {
    for (read, body) in snapshot {
        let errors = body["errors"].as_array().map_or(&[][..], Vec::as_slice);
        let allowed = !read.starts_with("lists")
            && errors
                .iter()
                .all(|e| e["extensions"]["code"] == "NOT_FOUND");
        if !(errors.is_empty() || allowed) || !body["data"].is_object() {
            return Err(format!("{read} failed: {body:#}"));
        }
    }
    Ok(())
}

/// Fails unless a snapshot is a complete one (see [`complete`]).
pub(super) fn assert_complete(snapshot: &Snapshot, context: &str) {
    if let Err(failed) = complete(snapshot) {
        panic!("{context}: {failed}");
    }
}

/// Where two JSON values first differ, and how.
pub(super) fn difference(path: &str, got: &Value, want: &Value) -> Option<String> {
    let shown = |v: Option<&Value>| -> String {
        let text = v.map_or_else(|| "(absent)".to_owned(), Value::to_string);
        text.chars().take(600).collect()
    };
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            g.keys()
                .chain(w.keys())
                .find_map(|k| match (g.get(k), w.get(k)) {
                    (Some(a), Some(b)) => difference(&format!("{path}.{k}"), a, b),
                    (a, b) => Some(format!(
                        "{path}.{k}: cached {} / uncached {}",
                        shown(a),
                        shown(b)
                    )),
                })
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => g
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (a, b))| difference(&format!("{path}[{i}]"), a, b)),
        _ if got == want => None,
        _ => Some(format!(
            "{path}: cached {} / uncached {}",
            shown(Some(got)),
            shown(Some(want))
        )),
    }
}

/// Fails unless the cached server's answer to `read` is the uncached one's, naming where not.
pub(super) fn assert_answer(context: &str, read: &str, got: &Value, want: &Value) {
    if got != want {
        let diff = difference("", got, want).unwrap_or_default();
        panic!("{context}: {read} differs from the uncached server at {diff}");
    }
}

/// The reads of `snapshot` made by `viewers`.
pub(super) fn reads_of(snapshot: &Snapshot, viewers: &[Viewer]) -> Snapshot {
    snapshot
        .iter()
        .filter(|(read, _)| {
            viewers.iter().any(|v| {
                read.strip_suffix(v.name)
                    .is_some_and(|r| r.ends_with(" as "))
            })
        })
        .cloned()
        .collect()
}

/// Fails at the first read where the cached server's answer is not the uncached one's.
pub(super) fn assert_same(cached: &Snapshot, uncached: &Snapshot, context: &str) {
    assert_eq!(cached.len(), uncached.len());
    for ((read, got), (_, want)) in cached.iter().zip(uncached) {
        assert_answer(context, read, got, want);
    }
}
