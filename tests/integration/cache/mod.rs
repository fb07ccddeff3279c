//! The read cache of hot discussions (src/store/cache.rs) over real sockets: servers with the
//! cache answer every public read as a server without it does, for every viewer, after writes
//! through either of them and after a database outage; cold discussions read once stay out of it.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use threadql::config::Config;
use threadql::domain::{Layout, Vote};
use threadql::store::embedded_db::EmbeddedDb;

use crate::live::{await_subscribers, Protocol, Ws};
use crate::support::{
    layout_name, metric, moderator_token, post_graphql, token, unique_db, Running, Settings,
};
use crate::votes::{vote_value, VOTE};

/// Longest wait for anything a test waits for.
const WAIT: Duration = Duration::from_secs(20);
/// Random operations of the model test, per layout.
const OPS: usize = 60;
/// Sets the model test's model_seed (a number), to replay a run.
const SEED_VAR: &str = "THREADQL_CACHE_SEED";
/// How many times a write refused with `CONFLICT` is sent again.
const RESENDS: u32 = 3;

// The read cache's metrics and the change feed's.
const HITS: &str = "threadql_cache_hits_total";
const MISSES: &str = "threadql_cache_misses_total";
const INVALIDATIONS: &str = "threadql_cache_invalidations_total";
const BYTES: &str = "threadql_cache_bytes";
const EVENTS: &str = "threadql_change_events_total";
const STREAMS: &str = "threadql_change_streams_opened_total";

/// Every field of a comment, the viewer's own included.
const COMMENT: &str = "fragment C on Comment { id discussionId slug fullSlug parentSlug depth posted editedAt status deleted text html author { id name } upvotes downvotes score viewerVote replyCount pinned moderationReason reportCount revisions { text editedAt editor { id name } } }";
/// What a list shows of a comment (a list's order and members are what it adds to [`COMMENT`]).
const SHORT: &str = "fragment S on Comment { slug text status deleted author { id name } upvotes downvotes viewerVote replyCount }";
/// Where a page stands.
const PAGE_INFO: &str =
    "fragment P on PageInfo { hasNextPage hasPreviousPage startCursor endCursor }";
/// A page of comments with every field, with their cursors.
const FULL_PAGE: &str = "fragment G on CommentConnection { totalCount edges { cursor node { ...C } } pageInfo { ...P } }";
/// A page of comments as lists show them, with their cursors.
const PAGE: &str = "fragment Q on CommentConnection { totalCount edges { cursor node { ...S } } pageInfo { ...P } }";
/// Top-level comments with their replies three levels down.
const TREE: &str = "fragment T on CommentConnection { totalCount pageInfo { ...P } nodes { ...S replies(first: 5) { totalCount pageInfo { ...P } nodes { ...S replies(first: 5) { totalCount pageInfo { ...P } nodes { ...S replies(first: 5) { ...Q } } } } } } }";

/// The discussion and its lists: every order, forward and backward, by offset, the tree, the
/// ranked orders.
const LISTS: &str = r#"query($d: ID!) { discussion(id: $d) {
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
const LINKS: &str = r#"query($d: ID!, $k: String!, $s: String!, $t: String!, $r: [_Any!]!) {
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
const PAGES: &str = r#"query($d: ID!, $s: String!, $first: String, $final: String, $newest: String, $threads: String, $top: String, $best: String, $controversial: String, $sub: String) {
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

/// What the model needs of the discussion, as a moderator sees it (held comments included).
const STATE: &str = r#"query($d: ID!) {
  discussion(id: $d) { locked moderation comments(first: 100) { nodes { slug depth status deleted pinned author { id } } } }
  pending: moderationQueue(queue: PENDING, discussionId: $d, first: 100) { nodes { slug parentSlug depth status deleted pinned author { id } } }
  rejected: moderationQueue(queue: REJECTED, discussionId: $d, first: 100) { nodes { slug parentSlug depth status deleted pinned author { id } } }
}"#;

const CREATE: &str = "mutation($k: String!, $l: StorageLayout) { ensureDiscussion(input: {key: $k, title: \"cached\", url: \"https://example.com/cached\", layout: $l}) { id } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
const APPROVE: &str =
    "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug status } }";
const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status } }";
const LOCK: &str =
    "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { locked } }";
const SET_MODE: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
const PIN: &str = "mutation($d: ID!, $s: String!, $p: Boolean!) { pinComment(discussionId: $d, slug: $s, pinned: $p) { slug pinned } }";
const CHANGED: &str = "subscription($d: ID!) { commentChanged(discussionId: $d) { slug text } }";

/// The users who write, vote and report (ids and names); `u1` is also the signed-in viewer.
const USERS: [(&str, &str); 4] = [("u1", "Ada"), ("u2", "Lin"), ("u3", "Bo"), ("u4", "Cy")];

/// A server's configuration on `database` with the read cache on (its default size) or off.
fn cache_config(database: &str, layout: Layout, cached: bool) -> Config {
    let mut config = Settings::new(layout).config(database);
    if !cached {
        config.cache_bytes = 0;
    }
    config
}

/// A user's token.
fn user(id: &str) -> String {
    let (_, name) = USERS
        .iter()
        .find(|(u, _)| *u == id)
        .unwrap_or_else(|| panic!("no user {id}"));
    token(id, name)
}

/// The moderator's token.
fn moderator() -> String {
    moderator_token("mod", "Mo")
}

/// Waits until `check` holds, failing with `what` after [`WAIT`].
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A cache metric of each server.
async fn metrics(servers: &[&Running], name: &str) -> Vec<u64> {
    let mut values = Vec::new();
    for server in servers {
        values.push(metric(server, name).await);
    }
    values
}

/// Who reads.
struct Viewer {
    name: &'static str,
    token: Option<String>,
}

impl Viewer {
    fn new(name: &'static str, token: Option<String>) -> Viewer {
        Viewer { name, token }
    }
}

/// Anonymous, and `u1` signed in (so `viewerVote` and an author's view are read).
fn viewers() -> [Viewer; 2] {
    [
        Viewer::new("anonymous", None),
        Viewer::new("u1", Some(user("u1"))),
    ]
}

/// What a snapshot reads: the discussion, its key, and the comments linked to directly (`s` may
/// be held, `t` is listed).
struct Target {
    d: String,
    key: String,
    s: String,
    t: String,
}

/// One server's answers to every public read of a target, as each viewer: (read, answer).
type Snapshot = Vec<(String, Value)>;

/// Sends a query as `token`; returns the body (HTTP 200 expected).
async fn ask(
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
async fn snapshot(
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
        let token = viewer.token.as_deref();
        let lists = ask(client, server, token, &lists_query, json!({ "d": d })).await;
        let vars = json!({ "d": d, "k": target.key, "s": s, "t": t, "r": representations });
        let links = ask(client, server, token, &links_query, vars).await;
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
        let pages = ask(client, server, token, &pages_query, vars).await;
        for (read, body) in [("lists", lists), ("links", links), ("pages", pages)] {
            out.push((format!("{read} as {}", viewer.name), body));
        }
    }
    out
}

/// Whether a snapshot is a complete one: the lists without errors, the links and pages with at
/// most NOT_FOUND (a held comment linked to by someone else); else what is missing.
fn complete(snapshot: &Snapshot) -> Result<(), String> {
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
fn assert_complete(snapshot: &Snapshot, context: &str) {
    if let Err(failed) = complete(snapshot) {
        panic!("{context}: {failed}");
    }
}

/// Where two JSON values first differ, and how.
fn difference(path: &str, got: &Value, want: &Value) -> Option<String> {
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
fn assert_answer(context: &str, read: &str, got: &Value, want: &Value) {
    if got != want {
        let diff = difference("", got, want).unwrap_or_default();
        panic!("{context}: {read} differs from the uncached server at {diff}");
    }
}

/// Fails at the first read where the cached server's answer is not the uncached one's.
fn assert_same(cached: &Snapshot, uncached: &Snapshot, context: &str) {
    assert_eq!(cached.len(), uncached.len());
    for ((read, got), (_, want)) in cached.iter().zip(uncached) {
        assert_answer(context, read, got, want);
    }
}

/// A comment as the model knows it (a moderator's view).
#[derive(Debug)]
struct Known {
    slug: String,
    parent: Option<String>,
    depth: u64,
    status: String,
    deleted: bool,
    pinned: bool,
    author: String,
}

impl Known {
    fn of(node: &Value) -> Known {
        let slug = node["slug"].as_str().expect("slug").to_owned();
        Known {
            parent: slug.rsplit_once('/').map(|(p, _)| p.to_owned()),
            slug,
            depth: node["depth"].as_u64().expect("depth"),
            status: node["status"].as_str().expect("status").to_owned(),
            deleted: node["deleted"].as_bool().expect("deleted"),
            pinned: node["pinned"].as_bool().expect("pinned"),
            author: node["author"]["id"].as_str().expect("author").to_owned(),
        }
    }

    /// Public: approved and not deleted.
    fn public(&self) -> bool {
        self.status == "APPROVED" && !self.deleted
    }
}

/// The discussion as the oracle shows a moderator: what the next operation may act on.
#[derive(Debug, Default)]
struct State {
    locked: bool,
    moderation: String,
    /// Listed comments (public ones, placeholders, tombstones), in posting order.
    listed: Vec<Known>,
    /// Comments held before they were ever public.
    held: Vec<Known>,
}

impl State {
    async fn read(client: &reqwest::Client, oracle: &Running, d: &str) -> State {
        let body = ask(client, oracle, Some(&moderator()), STATE, json!({ "d": d })).await;
        assert!(body.get("errors").is_none(), "{body:#}");
        let data = &body["data"];
        let nodes = |v: &Value| -> Vec<Known> {
            v["nodes"]
                .as_array()
                .expect("nodes")
                .iter()
                .map(Known::of)
                .collect()
        };
        let listed = nodes(&data["discussion"]["comments"]);
        let mut held = nodes(&data["pending"]);
        held.extend(nodes(&data["rejected"]));
        held.retain(|h| listed.iter().all(|l| l.slug != h.slug));
        State {
            locked: data["discussion"]["locked"].as_bool().expect("locked"),
            moderation: data["discussion"]["moderation"]
                .as_str()
                .expect("moderation")
                .to_owned(),
            listed,
            held,
        }
    }

    fn public(&self) -> Vec<&Known> {
        self.listed.iter().filter(|c| c.public()).collect()
    }

    /// Held comments that may be approved now: their parent is listed.
    fn approvable(&self) -> Vec<&Known> {
        self.held
            .iter()
            .filter(|h| {
                h.parent
                    .as_ref()
                    .is_none_or(|p| self.listed.iter().any(|l| &l.slug == p))
            })
            .collect()
    }
}

/// Kinds of write the model test makes (the events each produces are reported by kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Post,
    Reply,
    Edit,
    ModeratorEdit,
    Delete,
    Vote,
    Report,
    Reject,
    Restore,
    ApproveHeld,
    RejectHeld,
    Lock,
    Unlock,
    SetMode,
    Pin,
    Unpin,
}

/// One write: who sends what.
struct Op {
    kind: Kind,
    token: String,
    query: &'static str,
    vars: Value,
    /// The comment it acts on (read by direct link afterwards), if any.
    target: Option<String>,
    what: String,
}

/// A random element of a non-empty list.
fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    items.choose(rng).expect("a non-empty list")
}

/// A random user other than `not`.
fn other_user(rng: &mut StdRng, not: &str) -> &'static str {
    let others: Vec<&'static str> = USERS
        .iter()
        .map(|(u, _)| *u)
        .filter(|u| *u != not)
        .collect();
    others[rng.gen_range(0..others.len())]
}

/// Some markdown, so `html` is more than the text.
fn text(rng: &mut StdRng, n: usize) -> String {
    const WORDS: [&str; 6] = [
        "plain",
        "*emphasis*",
        "`code`",
        "<b>raw</b>",
        "[link](https://example.com/x)",
        "two\n\nparagraphs",
    ];
    format!("{} #{n}", pick(rng, &WORDS))
}

/// A random write the state allows (every one must succeed).
fn choose(rng: &mut StdRng, state: &State, d: &str, n: usize) -> Op {
    let public = state.public();
    let parents: Vec<&Known> = state
        .listed
        .iter()
        .filter(|c| !c.deleted && c.depth < 3)
        .collect();
    let placeholders: Vec<&Known> = state
        .listed
        .iter()
        .filter(|c| !c.deleted && c.status != "APPROVED")
        .collect();
    // Only public comments can be pinned or unpinned; the others still count towards the 5.
    let pins = state.listed.iter().filter(|c| c.pinned).count();
    let (pinned, pinnable): (Vec<&Known>, Vec<&Known>) = public.iter().partition(|c| c.pinned);
    let approvable = state.approvable();
    let pending: Vec<&Known> = state
        .held
        .iter()
        .filter(|h| h.status == "PENDING")
        .collect();
    let room = state.listed.len() + state.held.len() < 90;
    // A locked discussion takes no posts (an approved held comment is posted then), votes,
    // reports or authors' edits; moderators may do the rest.
    let open = !state.locked;
    let menu = [
        (Kind::Post, 10, open && room),
        (Kind::Reply, 14, open && room && !parents.is_empty()),
        (Kind::Edit, 8, open && !public.is_empty()),
        (Kind::ModeratorEdit, 2, !public.is_empty()),
        (Kind::Delete, 4, !public.is_empty()),
        (Kind::Vote, 18, open && !public.is_empty()),
        (Kind::Report, 4, open && !public.is_empty()),
        (Kind::Reject, 3, !public.is_empty()),
        (Kind::Restore, 5, !placeholders.is_empty()),
        (Kind::ApproveHeld, 10, open && !approvable.is_empty()),
        (Kind::RejectHeld, 3, !pending.is_empty()),
        (Kind::Lock, 2, open),
        (Kind::Unlock, 10, !open),
        (
            Kind::SetMode,
            if state.moderation == "PRE" { 8 } else { 2 },
            true,
        ),
        (Kind::Pin, 3, !pinnable.is_empty() && pins < 5),
        (Kind::Unpin, 2, !pinned.is_empty()),
    ];
    let menu: Vec<(Kind, u32)> = menu
        .into_iter()
        .filter(|(_, _, allowed)| *allowed)
        .map(|(kind, weight, _)| (kind, weight))
        .collect();
    let total: u32 = menu.iter().map(|(_, w)| w).sum();
    let mut roll = rng.gen_range(0..total);
    let kind = menu
        .iter()
        .find(|(_, w)| {
            let hit = roll < *w;
            roll = roll.saturating_sub(*w);
            hit
        })
        .expect("a kind")
        .0;
    let target: Option<&Known> = match kind {
        Kind::Post | Kind::Lock | Kind::Unlock | Kind::SetMode => None,
        Kind::Reply => Some(pick(rng, &parents)),
        Kind::Pin => Some(pick(rng, &pinnable)),
        Kind::Unpin => Some(pick(rng, &pinned)),
        Kind::Restore => Some(pick(rng, &placeholders)),
        Kind::ApproveHeld => Some(pick(rng, &approvable)),
        Kind::RejectHeld => Some(pick(rng, &pending)),
        _ => Some(pick(rng, &public)),
    }
    .copied();
    let slug = target.map(|c| c.slug.clone());
    let author = target.map_or("", |c| c.author.as_str());
    // Who writes: any user posts; authors edit, and delete while the discussion is open; other
    // users vote and report; the moderator does the rest.
    let writer = match kind {
        Kind::Post | Kind::Reply => pick(rng, &USERS).0,
        Kind::Edit => author,
        Kind::Delete if open && rng.gen_bool(0.6) => author,
        Kind::Vote | Kind::Report => other_user(rng, author),
        _ => "mod",
    };
    let (query, vars) = match kind {
        Kind::Post | Kind::Reply => (POST, json!({ "d": d, "p": slug, "t": text(rng, n) })),
        Kind::Edit | Kind::ModeratorEdit => (EDIT, json!({ "d": d, "s": slug, "t": text(rng, n) })),
        Kind::Delete => (DELETE, json!({ "d": d, "s": slug })),
        Kind::Vote => {
            let vote = *pick(rng, &[Some(Vote::Up), Some(Vote::Down), None]);
            (VOTE, json!({ "d": d, "s": slug, "v": vote_value(vote) }))
        }
        Kind::Report => (REPORT, json!({ "d": d, "s": slug })),
        Kind::Reject | Kind::RejectHeld => (
            REJECT,
            json!({ "d": d, "s": slug, "r": format!("reason {n}") }),
        ),
        Kind::Restore | Kind::ApproveHeld => (APPROVE, json!({ "d": d, "s": slug })),
        Kind::Lock | Kind::Unlock => (LOCK, json!({ "d": d, "l": kind == Kind::Lock })),
        Kind::SetMode => {
            let mode = if state.moderation == "PRE" {
                "POST"
            } else {
                "PRE"
            };
            (SET_MODE, json!({ "d": d, "m": mode }))
        }
        Kind::Pin | Kind::Unpin => (PIN, json!({ "d": d, "s": slug, "p": kind == Kind::Pin })),
    };
    Op {
        kind,
        token: if writer == "mod" {
            moderator()
        } else {
            user(writer)
        },
        query,
        what: format!("{writer}: {vars}"),
        vars,
        target: slug,
    }
}

/// Sends a write; returns its data and how many times it was sent again. `CONFLICT` (it wrote
/// nothing, and sending it again is safe) is sent again, as its message tells clients to: a
/// server that posted to an embedded or bucketed discussion keeps it, and its next post after a
/// moderation mode set through another server meets that; any other error fails the test.
async fn write(client: &reqwest::Client, server: &Running, op: &Op, context: &str) -> (Value, u32) {
    for resent in 0..=RESENDS {
        let (status, body) =
            post_graphql(client, server, Some(&op.token), op.query, op.vars.clone()).await;
        assert_eq!(status, 200, "{context}: {body:#}");
        let Some(error) = body["errors"].as_array().and_then(|e| e.first()) else {
            return (body["data"].clone(), resent);
        };
        assert_eq!(
            error["extensions"]["code"], "CONFLICT",
            "{context}: the write failed: {body:#}"
        );
    }
    panic!("{context}: CONFLICT {} times", RESENDS + 1);
}

/// The name a write's change events are reported under: its kind, and whether a post was held.
fn label(op: &Op, data: &Value) -> String {
    let held = data["postComment"]["status"] == "PENDING";
    format!("{:?}{}", op.kind, if held { " (held)" } else { "" })
}

/// Tells when servers have heard every change made before a point: an edit of a comment in a
/// discussion of its own, followed by a `commentChanged` subscription on each server. A server
/// reads its change feed in order and its cache hears each event before the subscriptions do, so
/// once a subscriber has the edit, that server's cache has been told of every earlier change,
/// however many events each made (a write may make several, or none). Servers read the edited
/// comment to tell their subscribers, always just after the edit dropped it from their cache:
/// the fence adds misses to the cache's counters, never hits.
struct Fence {
    d: String,
    slug: String,
    author: String,
    sockets: Vec<Ws>,
    passes: usize,
}

impl Fence {
    async fn new(servers: &[&Running], layout: Layout) -> Fence {
        let author = token("fence", "Fence");
        let d = servers[0].discussion(&author, layout).await;
        let slug = servers[0].post(&author, &d, None, "fence 0").await;
        let mut sockets = Vec::new();
        for server in servers {
            let mut ws = Ws::connect(server, Protocol::TransportWs, json!({})).await;
            ws.start("fence", CHANGED, json!({ "d": d })).await;
            await_subscribers(server, 1).await;
            sockets.push(ws);
        }
        Fence {
            d,
            slug,
            author,
            sockets,
            passes: 0,
        }
    }

    /// Edits the fence comment through `via` and waits until every server has heard it.
    async fn pass(&mut self, via: &Running) {
        self.passes += 1;
        let text = format!("fence {}", self.passes);
        via.mutate(
            &self.author,
            EDIT,
            json!({ "d": self.d, "s": self.slug, "t": text }),
        )
        .await;
        for ws in &mut self.sockets {
            let (id, payload) = ws.next().await;
            assert_eq!(id, "fence", "{payload}");
            let changed = &payload["data"]["commentChanged"];
            assert_eq!(changed["slug"], self.slug.as_str(), "{payload}");
            assert_eq!(changed["text"], text.as_str(), "{payload}");
        }
    }
}

/// A discussion with `key` in `layout`, written through both servers: a thread three replies
/// deep and another with a reply and votes. Returns its id, the deepest reply and the voted
/// comment.
async fn seed_discussion(
    servers: &[&Running; 2],
    layout: Layout,
    key: &str,
) -> (String, String, String) {
    let create = json!({ "k": key, "l": layout_name(layout) });
    let d = servers[0].mutate(&user("u1"), CREATE, create).await["ensureDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut deep: Option<String> = None;
    for (i, (author, _)) in USERS.iter().enumerate() {
        let text = format!("seed {i}");
        deep = Some(
            servers[i % 2]
                .post(&user(author), &d, deep.as_deref(), &text)
                .await,
        );
    }
    let voted = servers[1].post(&user("u2"), &d, None, "seed thread").await;
    servers[0]
        .post(&user("u3"), &d, Some(&voted), "seed reply")
        .await;
    for (voter, vote) in [("u1", "UP"), ("u3", "DOWN"), ("u4", "UP")] {
        let vars = json!({ "d": d, "s": voted, "v": vote });
        servers[1].mutate(&user(voter), VOTE, vars).await;
    }
    (d, deep.expect("a comment"), voted)
}

/// The seed of a model run: `THREADQL_CACHE_SEED` if set, else `default`.
fn model_seed(default: u64) -> u64 {
    std::env::var(SEED_VAR).map_or(default, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR} is not a number: {s}"))
    })
}

/// The model test on one layout (see [`cached_servers_answer_as_the_database_does_per_comment`]).
async fn model_case(layout: Layout, seed: u64) {
    eprintln!("cache model, {layout:?}: seed {seed} (replay with {SEED_VAR}={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let database = unique_db("cache_model");
    let servers = [
        Running::start(cache_config(&database, layout, true)).await,
        Running::start(cache_config(&database, layout, true)).await,
    ];
    let oracle = Running::start(cache_config(&database, layout, false)).await;
    let cached = [&servers[0], &servers[1]];
    let names = ["A", "B"];
    let client = reqwest::Client::new();
    let viewers = viewers();
    let mut fence = Fence::new(&cached, layout).await;

    let key = format!("cache-model-{seed}");
    let (d, deep, voted) = seed_discussion(&cached, layout, &key).await;
    fence.pass(&servers[0]).await;

    // Every read, a few times on each cached server: the discussion is admitted and cached.
    let mut state = State::read(&client, &oracle, &d).await;
    let mut target = Target {
        d: d.clone(),
        key,
        s: voted,
        t: deep,
    };
    let truth = snapshot(&client, &oracle, &target, &viewers).await;
    assert_complete(&truth, "before the writes");
    // Answers of a cached server compared with the uncached one's.
    let mut compared = 0;
    for _ in 0..3 {
        for (server, name) in cached.iter().zip(names) {
            let got = snapshot(&client, server, &target, &viewers).await;
            assert_same(&got, &truth, &format!("{layout:?}: warming {name}"));
            compared += got.len();
        }
    }
    let warm = metrics(&cached, HITS).await;
    assert!(
        warm.iter().all(|h| *h > 0),
        "{layout:?}: repeated reads without writes are served from the cache: hits {warm:?}"
    );
    let invalidated = metrics(&cached, INVALIDATIONS).await;

    let mut events: BTreeMap<String, BTreeMap<u64, u32>> = BTreeMap::new();
    let mut conflicts = 0;
    for n in 1..=OPS {
        let op = choose(&mut rng, &state, &d, n);
        let w = rng.gen_range(0..2);
        let (writer, other) = (cached[w], cached[1 - w]);
        let context = format!(
            "seed {seed}, {layout:?}, op {n} ({:?}: {}) through {}",
            op.kind, op.what, names[w]
        );
        eprintln!("{context}");
        let before = metrics(&cached, EVENTS).await;
        let (data, resent) = write(&client, writer, &op, &context).await;
        conflicts += resent;
        // Linked to directly: what was posted, else what the write acted on; and a comment
        // listed before the write (listed comments stay listed: deleted and rejected ones keep
        // their place).
        let listed: Vec<&str> = state.listed.iter().map(|c| c.slug.as_str()).collect();
        target.t = pick(&mut rng, &listed).to_string();
        target.s = data["postComment"]["slug"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| op.target.clone())
            .unwrap_or_else(|| target.t.clone());

        // The writer answers its own write at once (before its feed may have told it); the
        // other server once it has heard every event made so far. Writes that make no event
        // (a lock, a moderation mode, a pin, a held post, a vote as already voted) are held to
        // the same: what either server caches of them must be dropped by something it hears or
        // does (today none of it is cached: the discussion document is read on every request).
        let got = snapshot(&client, writer, &target, &viewers).await;
        let truth = snapshot(&client, &oracle, &target, &viewers).await;
        assert_complete(&truth, &context);
        assert_same(&got, &truth, &format!("{context}: {} at once", names[w]));
        state = State::read(&client, &oracle, &d).await;
        fence.pass(writer).await;
        let after = metrics(&cached, EVENTS).await;
        let made: Vec<u64> = before.iter().zip(&after).map(|(b, a)| a - b - 1).collect();
        assert_eq!(made[0], made[1], "{context}: both servers hear every event");
        *events
            .entry(label(&op, &data))
            .or_default()
            .entry(made[0])
            .or_default() += 1;
        let got = snapshot(&client, other, &target, &viewers).await;
        assert_same(
            &got,
            &truth,
            &format!("{context}: {} once it heard the write", names[1 - w]),
        );
        compared += 2 * truth.len();
    }

    let hits = metrics(&cached, HITS).await;
    let misses = metrics(&cached, MISSES).await;
    let invalidations = metrics(&cached, INVALIDATIONS).await;
    eprintln!(
        "cache model, {layout:?}: {OPS} writes ({conflicts} sent again after CONFLICT), {compared} answers compared with the uncached server's; hits {hits:?} (after warming {warm:?}), misses {misses:?}, invalidations {invalidations:?}; change events per write (events: writes): {events:?}"
    );
    for i in 0..2 {
        assert!(
            invalidations[i] > invalidated[i],
            "{layout:?}: writes invalidate {}'s cache",
            names[i]
        );
        assert!(
            hits[i] > warm[i],
            "{layout:?}: {} served reads from its cache between the writes: hits {} then {}",
            names[i],
            warm[i],
            hits[i]
        );
    }
    drop(fence);
    for server in servers {
        server.shutdown().await;
    }
    oracle.shutdown().await;
}

/// Two servers with the read cache on and one without, on one database: after each of 60 random
/// writes (posts and replies by several users, edits by authors and moderators, deletes, votes
/// up, down and back, reports, rejections and approvals of public and held comments, locks,
/// moderation modes, pins) through one cached server, that server at once and the other once it
/// has heard the write answer every public read, anonymously and as a signed-in user, exactly
/// as the server without the cache does; and both served reads from their cache meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_servers_answer_as_the_database_does_per_comment() {
    model_case(Layout::PerComment, model_seed(1)).await;
}

/// [`cached_servers_answer_as_the_database_does_per_comment`] on the embedded layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_servers_answer_as_the_database_does_embedded() {
    model_case(Layout::Embedded, model_seed(2)).await;
}

/// [`cached_servers_answer_as_the_database_does_per_comment`] on the bucketed layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_servers_answer_as_the_database_does_bucketed() {
    model_case(Layout::Bucketed, model_seed(3)).await;
}

/// What viewers see differently of a discussion's comments: their votes, placeholders' texts,
/// moderators' counts, revisions, deleted comments' authors.
const VIEW: &str = r#"query($d: ID!) { discussion(id: $d) { commentCount pendingCount
  comments(first: 20) { nodes { slug text status moderationReason reportCount viewerVote deleted author { id name } revisions { text } } }
  top: comments(order: TOP, first: 20) { nodes { slug viewerVote } }
  threads(first: 10) { nodes { slug replies(first: 5) { nodes { slug text viewerVote } } } } } }"#;
/// A comment by direct link.
const LINK: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug status text moderationReason author { id name } } }";

/// What one viewer must see.
struct Sees {
    viewer: Viewer,
    /// Their vote on the first comment and on the reply.
    votes: [Value; 2],
    /// Whether they see the rejected comment's text, reason and author (its author, moderators).
    placeholder: bool,
    /// Whether they see the held comment by direct link (its author, moderators).
    held: bool,
    /// Whether they see the edited comment's revisions (its author, moderators).
    revisions: bool,
    /// Whether they are a moderator (report and pending counts, deleted comments' authors).
    moderator: bool,
}

/// The node of `slug` in a list of nodes.
fn node_in<'a>(nodes: &'a Value, slug: &str) -> &'a Value {
    nodes
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["slug"] == slug)
        .unwrap_or_else(|| panic!("no {slug} in {nodes}"))
}

/// With the read cache on and the discussion cached, each viewer reading the same queries
/// through the same server gets their own view, as the server without the cache gives it: their
/// own `viewerVote`, a rejected comment's text and reason only as its author or a moderator, a
/// held comment (pre-moderation) by direct link only as its author or a moderator and in no
/// list, revisions only as the author or a moderator, report and pending counts and a deleted
/// comment's author only as a moderator. Every read of the viewers is a cache hit (no miss).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_viewer_sees_their_own_view_of_cached_reads() {
    for layout in Layout::ALL {
        let database = unique_db("cache_viewers");
        let server = Running::start(cache_config(&database, layout, true)).await;
        let oracle = Running::start(cache_config(&database, layout, false)).await;
        let client = reqwest::Client::new();
        let d = server
            .mutate(
                &user("u1"),
                CREATE,
                json!({ "k": "viewers", "l": layout_name(layout) }),
            )
            .await["ensureDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let a = server.post(&user("u1"), &d, None, "first").await;
        let b = server.post(&user("u2"), &d, None, "second").await;
        let c = server.post(&user("u3"), &d, Some(&a), "reply").await;
        let e = server.post(&user("u1"), &d, None, "gone").await;
        let edit = json!({ "d": d, "s": a, "t": "first, edited" });
        server.mutate(&user("u1"), EDIT, edit).await;
        for (voter, slug, vote) in [("u2", &a, "UP"), ("u3", &a, "DOWN"), ("u1", &c, "UP")] {
            let vars = json!({ "d": d, "s": slug, "v": vote });
            server.mutate(&user(voter), VOTE, vars).await;
        }
        server
            .mutate(&user("u2"), VOTE, json!({ "d": d, "s": c, "v": "DOWN" }))
            .await;
        server
            .mutate(&user("u3"), REPORT, json!({ "d": d, "s": a }))
            .await;
        let reject = json!({ "d": d, "s": b, "r": "off topic" });
        server.mutate(&moderator(), REJECT, reject).await;
        server
            .mutate(&user("u1"), DELETE, json!({ "d": d, "s": e }))
            .await;
        server
            .mutate(&moderator(), SET_MODE, json!({ "d": d, "m": "PRE" }))
            .await;
        let posted = server
            .mutate(&user("u3"), POST, json!({ "d": d, "t": "held" }))
            .await;
        assert_eq!(posted["postComment"]["status"], "PENDING");
        let h = posted["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned();

        // The same reads, anonymously, until they are all served from the cache.
        let reads = [(VIEW, json!({ "d": d })), (LINK, json!({ "d": d, "s": h }))];
        for _ in 0..4 {
            for (query, vars) in &reads {
                ask(&client, &server, None, query, vars.clone()).await;
            }
        }
        let hits = metric(&server, HITS).await;
        let misses = metric(&server, MISSES).await;
        assert!(hits > 0, "{layout:?}: the discussion is cached");

        let sees = [
            Sees {
                viewer: Viewer::new("anonymous", None),
                votes: [Value::Null, Value::Null],
                placeholder: false,
                held: false,
                revisions: false,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("u1, the first comment's author", Some(user("u1"))),
                votes: [Value::Null, json!("UP")],
                placeholder: false,
                held: false,
                revisions: true,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("u2, the rejected comment's author", Some(user("u2"))),
                votes: [json!("UP"), json!("DOWN")],
                placeholder: true,
                held: false,
                revisions: false,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("u3, the held comment's author", Some(user("u3"))),
                votes: [json!("DOWN"), Value::Null],
                placeholder: false,
                held: true,
                revisions: false,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("a moderator", Some(moderator())),
                votes: [Value::Null, Value::Null],
                placeholder: true,
                held: true,
                revisions: true,
                moderator: true,
            },
        ];
        for expected in &sees {
            let context = format!("{layout:?}, as {}", expected.viewer.name);
            let token = expected.viewer.token.as_deref();
            let mut answers = Vec::new();
            for (read, (query, vars)) in ["the comments", "the held comment"].iter().zip(&reads) {
                let got = ask(&client, &server, token, query, vars.clone()).await;
                let want = ask(&client, &oracle, token, query, vars.clone()).await;
                assert_answer(&context, read, &got, &want);
                answers.push(got);
            }
            let discussion = &answers[0]["data"]["discussion"];
            let nodes = &discussion["comments"]["nodes"];
            let reply = &node_in(&discussion["threads"]["nodes"], &a)["replies"]["nodes"];
            for (slug, vote) in [(&a, &expected.votes[0]), (&c, &expected.votes[1])] {
                assert_eq!(
                    &node_in(nodes, slug)["viewerVote"],
                    vote,
                    "{context}: {slug}"
                );
                assert_eq!(
                    &node_in(&discussion["top"]["nodes"], slug)["viewerVote"],
                    vote
                );
            }
            assert_eq!(&node_in(reply, &c)["viewerVote"], &expected.votes[1]);
            let rejected = node_in(nodes, &b);
            assert_eq!(rejected["status"], "REJECTED");
            let (text, reason, name) = match expected.placeholder {
                true => (json!("second"), json!("off topic"), "Lin"),
                false => (Value::Null, Value::Null, "[hidden]"),
            };
            assert_eq!(
                (&rejected["text"], &rejected["moderationReason"]),
                (&text, &reason),
                "{context}"
            );
            assert_eq!(rejected["author"]["name"], name, "{context}");
            let first = node_in(nodes, &a);
            assert_eq!(first["text"], "first, edited");
            assert_eq!(
                first["revisions"].is_array(),
                expected.revisions,
                "{context}"
            );
            let (reports, pending, deleter) = match expected.moderator {
                true => (json!(1), json!(1), "u1"),
                false => (Value::Null, Value::Null, ""),
            };
            assert_eq!(first["reportCount"], reports, "{context}");
            assert_eq!(discussion["pendingCount"], pending, "{context}");
            assert_eq!(node_in(nodes, &e)["author"]["id"], deleter, "{context}");
            assert!(
                nodes
                    .as_array()
                    .expect("nodes")
                    .iter()
                    .all(|n| n["slug"] != h.as_str()),
                "{context}: a held comment is in no list"
            );
            let link = &answers[1];
            if expected.held {
                assert_eq!(link["data"]["comment"]["status"], "PENDING", "{context}");
                assert_eq!(link["data"]["comment"]["text"], "held", "{context}");
            } else {
                assert_eq!(
                    link["errors"][0]["extensions"]["code"], "NOT_FOUND",
                    "{context}: {link}"
                );
            }
        }
        let served = metric(&server, HITS).await;
        assert!(
            served > hits,
            "{layout:?}: the viewers' reads are served from the cache"
        );
        assert_eq!(
            metric(&server, MISSES).await,
            misses,
            "{layout:?}: no viewer's read went past the cache"
        );
        server.shutdown().await;
        oracle.shutdown().await;
    }
}

/// Sends a write until the database answers it: `UNAVAILABLE` (the database is not back yet,
/// for this server) is sent again until [`WAIT`] has passed; any other error fails the test.
async fn write_when_back(server: &Running, token: &str, query: &str, vars: Value) -> Value {
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let body = ask(&client, server, Some(token), query, vars.clone()).await;
        let Some(error) = body["errors"].as_array().and_then(|e| e.first()) else {
            return body["data"].clone();
        };
        assert_eq!(error["extensions"]["code"], "UNAVAILABLE", "{body:#}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the database did not come back within {WAIT:?}: {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A database outage: a server whose discussion is cached (hits, bytes held) drops the whole
/// cache when its change feed breaks (an invalidation of everything, 0 bytes held); a write made
/// through another server once the database is back is then read by it as a server without the
/// cache reads it, and it serves from its cache again afterwards, still the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_empties_the_cache_and_fresh_reads_follow() {
    let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let db = EmbeddedDb::start(&binary, dir.path()).await.unwrap();
    let port = db.port();
    let layout = Layout::Embedded;
    let database = unique_db("cache_outage");
    let on_db = |cached: bool| {
        let mut config = cache_config(&database, layout, cached);
        config.mongodb_uri = Some(db.uri());
        config
    };
    let writer = Running::start(on_db(true)).await;
    let oracle = Running::start(on_db(false)).await;
    // The reader gives up on the database quickly, so its feed notices the outage at once, and
    // tries to reopen it often.
    let mut config = on_db(true);
    config.db_timeout_ms = 300;
    config.live_retry_ms = 500;
    let reader = Running::start(config).await;
    let (client, viewers) = (reqwest::Client::new(), viewers());

    let d = writer
        .mutate(
            &user("u1"),
            CREATE,
            json!({ "k": "outage", "l": layout_name(layout) }),
        )
        .await["ensureDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let first = writer
        .post(&user("u1"), &d, None, "before the outage")
        .await;
    let reply = writer.post(&user("u2"), &d, Some(&first), "a reply").await;
    writer.post(&user("u3"), &d, None, "another thread").await;
    writer
        .mutate(&user("u2"), VOTE, json!({ "d": d, "s": first, "v": "UP" }))
        .await;
    let target = Target {
        d,
        key: "outage".into(),
        s: first.clone(),
        t: reply,
    };
    let same_as_uncached = {
        let (client, reader, oracle, target, viewers) =
            (&client, &reader, &oracle, &target, &viewers);
        move || async move {
            // Both may fail for a moment while they reconnect after the outage.
            let truth = snapshot(client, oracle, target, viewers).await;
            complete(&truth).is_ok() && snapshot(client, reader, target, viewers).await == truth
        }
    };
    until(
        "the reader caches the discussion and answers as the uncached server",
        || async {
            same_as_uncached().await
                && metric(&reader, HITS).await > 0
                && metric(&reader, BYTES).await > 0
        },
    )
    .await;
    let invalidations = metric(&reader, INVALIDATIONS).await;

    db.stop().await;
    let db = EmbeddedDb::start_on(&binary, dir.path(), port)
        .await
        .unwrap();
    until(
        "the reader's feed breaks and its cache drops everything",
        || async { metric(&reader, INVALIDATIONS).await > invalidations },
    )
    .await;
    until(
        "the reader's cache holds nothing after the outage",
        || async { metric(&reader, BYTES).await == 0 },
    )
    .await;

    let edit = json!({ "d": target.d, "s": first, "t": "after the outage" });
    write_when_back(&writer, &user("u1"), EDIT, edit).await;
    let post = json!({ "d": target.d, "p": first, "t": "posted after the outage" });
    write_when_back(&writer, &user("u3"), POST, post).await;
    let vote = json!({ "d": target.d, "s": first, "v": "DOWN" });
    write_when_back(&writer, &user("u3"), VOTE, vote).await;
    until(
        "the reader answers with the writes made after the outage",
        &same_as_uncached,
    )
    .await;
    let truth = snapshot(&client, &oracle, &target, &viewers).await;
    assert_complete(&truth, "after the outage");
    let link = &truth[1].1["data"]["link"];
    assert_eq!(
        link["text"], "after the outage",
        "the truth is fresh: {link}"
    );
    assert_eq!(link["replyCount"], 2, "{link}");

    let hits = metric(&reader, HITS).await;
    until(
        "the reader serves the fresh answers from its cache again",
        || async { same_as_uncached().await && metric(&reader, HITS).await > hits },
    )
    .await;
    assert!(
        metric(&reader, STREAMS).await >= 2,
        "the reader's feed was reopened after the outage"
    );
    // The reopened feed keeps the cache exact: a later write is read past the cached answers.
    let edit = json!({ "d": target.d, "s": first, "t": "long after the outage" });
    writer.mutate(&user("u1"), EDIT, edit).await;
    until(
        "the reader answers with a write made once its feed was back",
        &same_as_uncached,
    )
    .await;
    for server in [reader, oracle, writer] {
        server.shutdown().await;
    }
    db.stop().await;
}

/// A discussion read the way a crawler reads it: once, with one list.
const CRAWL: &str =
    "query($d: ID!) { discussion(id: $d) { title comments(first: 20) { nodes { slug text } } } }";

/// Admission: a crawler reading many cold discussions once each leaves the cache as it was
/// (nothing stored, no hit or miss counted), while a discussion read again and again enters it,
/// stays through a second crawl and is then still served from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_discussions_read_once_stay_out_of_the_cache() {
    let database = unique_db("cache_crawler");
    let writer = Running::start(cache_config(&database, Layout::PerComment, false)).await;
    let server = Running::start(cache_config(&database, Layout::PerComment, true)).await;
    // Its feed is open, so the cache counts reads (it is bypassed until then).
    until("the cached server opens its change feed", || async {
        metric(&server, STREAMS).await >= 1
    })
    .await;
    let author = user("u1");
    let mut discussions = Vec::new();
    for (i, layout) in Layout::ALL.iter().cycle().take(41).enumerate() {
        let d = writer.discussion(&author, *layout).await;
        writer
            .post(&author, &d, None, &format!("comment {i}"))
            .await;
        discussions.push(d);
    }
    let hot = discussions.pop().expect("a discussion");
    let client = reqwest::Client::new();
    let read = |d: String| {
        let (client, server) = (&client, &server);
        async move {
            let body = ask(client, server, None, CRAWL, json!({ "d": d })).await;
            let nodes = &body["data"]["discussion"]["comments"]["nodes"];
            assert_eq!(nodes.as_array().map(Vec::len), Some(1), "{body:#}");
        }
    };
    let counters = || async {
        let server = &server;
        [
            metric(server, HITS).await,
            metric(server, MISSES).await,
            metric(server, BYTES).await,
        ]
    };

    let (first_crawl, second_crawl) = discussions.split_at(20);
    for d in first_crawl {
        read(d.clone()).await;
    }
    assert_eq!(
        counters().await,
        [0, 0, 0],
        "hits, misses and bytes after a crawl of {} cold discussions",
        first_crawl.len()
    );
    for _ in 0..5 {
        read(hot.clone()).await;
    }
    let warm = counters().await;
    assert!(
        warm.iter().all(|v| *v > 0),
        "a discussion read 5 times is cached (hits, misses, bytes): {warm:?}"
    );
    for d in second_crawl {
        read(d.clone()).await;
    }
    assert_eq!(
        counters().await,
        warm,
        "a second crawl of {} cold discussions changes nothing in the cache",
        second_crawl.len()
    );
    read(hot).await;
    let after = counters().await;
    assert!(
        after[0] > warm[0],
        "the hot discussion is still served from the cache"
    );
    assert_eq!(after[1..], warm[1..], "without a miss");
    server.shutdown().await;
    writer.shutdown().await;
}
