//! The cache's model test: random writes through one cached server, the state a moderator sees
//! kept as a model to pick the next write from, and after each write every public read on both
//! cached servers compared with the server without the cache.

use super::*;

/// What the model needs of the discussion, as a moderator sees it (held comments included).
const STATE: &str = r#"query($d: ID!) {
  discussion(id: $d) { locked moderation comments(first: 100) { nodes { slug depth status deleted pinned author { id } } } }
  pending: moderationQueue(queue: PENDING, discussionId: $d, first: 100) { nodes { slug parentSlug depth status deleted pinned author { id } } }
  rejected: moderationQueue(queue: REJECTED, discussionId: $d, first: 100) { nodes { slug parentSlug depth status deleted pinned author { id } } }
}"#;

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
pub(super) fn model_seed(default: u64) -> u64 {
    std::env::var(SEED_VAR).map_or(default, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR} is not a number: {s}"))
    })
}

/// The model test on one layout (see [`cached_servers_answer_as_the_database_does_per_comment`]).
pub(super) async fn model_case(layout: Layout, seed: u64) {
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
    let anonymous = &viewers[..2];
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
        // Read again anonymously: what the first read kept is served (or revalidated).
        let again = snapshot(&client, writer, &target, anonymous).await;
        let anonymous_truth = reads_of(&truth, anonymous);
        let context_again = format!("{context}: {} read again anonymously", names[w]);
        assert_same(&again, &anonymous_truth, &context_again);
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
        let again = snapshot(&client, other, &target, anonymous).await;
        let context_again = format!("{context}: {} read again anonymously", names[1 - w]);
        assert_same(&again, &anonymous_truth, &context_again);
        compared += 2 * (truth.len() + anonymous_truth.len());
    }
    let answered = metrics(&cached, RESPONSE_HITS).await;
    assert!(
        answered.iter().all(|h| *h > 0) && revalidated(&viewers) > 0,
        "{layout:?}: anonymous reads were answered from the response cache ({answered:?}) and by 304 ({})",
        revalidated(&viewers)
    );

    let hits = metrics(&cached, HITS).await;
    let misses = metrics(&cached, MISSES).await;
    let invalidations = metrics(&cached, INVALIDATIONS).await;
    eprintln!(
        "cache model, {layout:?}: {OPS} writes ({conflicts} sent again after CONFLICT), {compared} answers compared with the uncached server's; hits {hits:?} (after warming {warm:?}), misses {misses:?}, invalidations {invalidations:?}; response cache hits {answered:?}, 304s {}; change events per write (events: writes): {events:?}",
        revalidated(&viewers)
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
