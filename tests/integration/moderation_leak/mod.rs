//! The moderation leak test: seeded random sequences of posts, replies, mode changes, approvals,
//! rejections, reports and deletes, against a model of what the public may see; after every
//! few operations every public read (anonymous, and as a signed-in user who is neither author
//! nor moderator) must equal the model's view: lists in every order and page direction, trees,
//! counters, keyed and federated reads, direct links and live events. Moderators' queues and
//! counts are checked against the model too. Run once per layout. Here the model and its views;
//! the operations in `operations`, the checks in `checks`.

mod checks;
mod operations;

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use threadql::domain::Layout;

use crate::live::{await_subscribers, Protocol, Ws};
use crate::support::{unique_db, Running, Settings, TestApp};

/// The seeds, each with the mode its discussion starts in: each gives one discussion and one
/// sequence of operations.
const SEEDS: [(u64, Mode); 3] = [
    (31, Mode::Post),
    (3101, Mode::Pre),
    (310_001, Mode::PreFirst),
];
/// Operations per seed.
const OPS: usize = 60;
/// Every public read is compared with the model after this many operations (and at the end).
const CHECK_EVERY: usize = 6;
/// The page size of the paged walks: small, so that lists take several pages.
const PAGE: usize = 3;
/// Reports that hold a comment (`THREADQL_REPORTS_TO_HOLD`, lower than the default so that
/// comments are held often).
const REPORTS_TO_HOLD: usize = 2;
/// Replies go no deeper than this.
const MAX_DEPTH: usize = 5;
/// Direct links read in one request (the server's default limits: 20 root fields, 30 aliases).
const LINKS_A_REQUEST: usize = 15;
/// Users who post (and report each other's comments).
const AUTHORS: usize = 4;
/// Users who only report.
const REPORTERS: usize = 2;
/// How long to wait for one live event before failing.
const EVENT_WAIT: Duration = Duration::from_secs(15);

macro_rules! leak_suite {
    ($module:ident, $layout:expr) => {
        mod $module {
            use threadql::domain::Layout;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn nothing_hidden_leaks() {
                super::nothing_hidden_leaks_case(super::Settings::new($layout)).await;
            }
        }
    };
}

leak_suite!(per_comment, Layout::PerComment);
leak_suite!(embedded, Layout::Embedded);
leak_suite!(bucketed, Layout::Bucketed);

/// How a discussion moderates new comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Post,
    Pre,
    PreFirst,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Post => "POST",
            Mode::Pre => "PRE",
            Mode::PreFirst => "PRE_FIRST",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Approved,
    Pending,
    Rejected,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Approved => "APPROVED",
            Status::Pending => "PENDING",
            Status::Rejected => "REJECTED",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Pending,
    Reported,
    Rejected,
}

impl Queue {
    const ALL: [Queue; 3] = [Queue::Pending, Queue::Reported, Queue::Rejected];

    fn name(self) -> &'static str {
        match self {
            Queue::Pending => "PENDING",
            Queue::Reported => "REPORTED",
            Queue::Rejected => "REJECTED",
        }
    }
}

/// One comment as the model knows it.
#[derive(Debug, Clone)]
struct Model {
    slug: String,
    parent: Option<String>,
    depth: usize,
    /// Index into the users.
    author: usize,
    text: String,
    status: Status,
    /// The moderator's reason, or the rule's.
    reason: Option<String>,
    /// When it was published (its place in chronological order); `None` while it was never
    /// public (held).
    published: Option<u64>,
    deleted: bool,
    /// Users whose reports count now (since the last approval).
    reporters: BTreeSet<usize>,
    /// Users who ever reported it.
    reported_by: BTreeSet<usize>,
    /// When it entered the queue it is in.
    queued: u64,
}

impl Model {
    fn in_layout(&self) -> bool {
        self.published.is_some()
    }

    fn held(&self) -> bool {
        self.published.is_none()
    }

    fn placeholder(&self) -> bool {
        self.in_layout() && self.status != Status::Approved
    }

    fn public(&self) -> bool {
        self.in_layout() && self.status == Status::Approved && !self.deleted
    }

    fn queue(&self) -> Option<Queue> {
        match self.status {
            Status::Pending => Some(Queue::Pending),
            Status::Rejected => Some(Queue::Rejected),
            Status::Approved if self.in_layout() && !self.reporters.is_empty() => {
                Some(Queue::Reported)
            }
            Status::Approved => None,
        }
    }
}

/// A user: id, display name, token.
struct User {
    id: String,
    name: String,
    token: String,
}

/// What lasts over the seeds of one layout: the server, its users, who is trusted.
struct Run {
    server: Running,
    app: TestApp,
    layout: Layout,
    /// Authors, then reporters.
    users: Vec<User>,
    viewer: String,
    moderator: String,
    /// Authors with an approved held comment (trusted under PRE_FIRST, anywhere).
    trusted: HashSet<usize>,
    /// Authors whose reports were dismissed: the contract does not say whether that trusts
    /// them, so they do not post under PRE_FIRST.
    unsure: HashSet<usize>,
    /// The logical clock: one tick per operation, over all seeds.
    clock: u64,
    /// The finished seeds' discussions (id, comments), for the queues over all discussions.
    finished: Vec<(String, Vec<Model>)>,
}

/// One seed's discussion and its model.
struct Case<'r> {
    run: &'r mut Run,
    seed: u64,
    op: usize,
    rng: StdRng,
    d: String,
    key: String,
    mode: Mode,
    comments: Vec<Model>,
    ws: Ws,
    /// The live events due: (comment, the first of its states the payload may show).
    posted_expected: Vec<(usize, usize)>,
    changed_expected: Vec<(usize, usize)>,
    /// Each comment's public states since it was published, as a live event shows it. A
    /// subscriber reads the comment when the event reaches it, so an event shows the comment
    /// as it was then or as any later state.
    states: Vec<Vec<Value>>,
    posted_got: Vec<Value>,
    changed_got: Vec<Value>,
    /// What each operation did, for failure messages.
    log: Vec<String>,
}

/// The comment fields every read asks for.
const FIELDS: &str = "slug parentSlug status text html author { id name } deleted moderationReason replyCount reportCount";

fn fragment() -> String {
    format!("fragment C on Comment {{ {FIELDS} }}")
}

/// The fields of a live event.
const EVENT: &str = "slug parentSlug status text html author { id name } deleted";

/// A read's comment with its `html` reduced to whether there is one (the rendering is another
/// test's business).
fn normal(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    if k == "html" {
                        (k.clone(), Value::Bool(!v.is_null()))
                    } else {
                        (k.clone(), normal(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normal).collect()),
        other => other.clone(),
    }
}

fn only(value: &Value, keys: &str) -> Value {
    let mut out = Map::new();
    for key in keys.split_whitespace() {
        if let Some(v) = value.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

/// A source of a paged list.
#[derive(Debug, Clone)]
enum Source {
    Comments(&'static str),
    Threads(&'static str),
    Replies(String, &'static str),
    Sub(String),
}

impl Source {
    /// The query for a page; `args` are the paging arguments.
    fn query(&self, args: &str) -> String {
        let sel = "totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { ...C } }";
        let body = match self {
            Source::Comments(order) => {
                format!("conn: comments(order: {order}, {args}) {{ {sel} }}")
            }
            Source::Threads(order) => format!("conn: threads(order: {order}, {args}) {{ {sel} }}"),
            Source::Replies(_, order) => {
                format!("comment(slug: $s) {{ conn: replies(order: {order}, {args}) {{ {sel} }} }}")
            }
            Source::Sub(_) => {
                format!("comment(slug: $s) {{ conn: subDiscussion({args}) {{ {sel} }} }}")
            }
        };
        let mut decls = vec!["$d: ID!", "$n: Int!"];
        if matches!(self, Source::Replies(..) | Source::Sub(_)) {
            decls.push("$s: String!");
        }
        if args.contains("$c") {
            decls.push("$c: String");
        }
        if args.contains("$o") {
            decls.push("$o: Int");
        }
        format!(
            "query({}) {{ discussion(id: $d) {{ {body} }} }} {}",
            decls.join(", "),
            fragment()
        )
    }

    fn slug(&self) -> &str {
        match self {
            Source::Replies(s, _) | Source::Sub(s) => s,
            _ => "",
        }
    }

    fn connection<'v>(&self, data: &'v Value) -> &'v Value {
        match self {
            Source::Comments(_) | Source::Threads(_) => &data["discussion"]["conn"],
            _ => &data["discussion"]["comment"]["conn"],
        }
    }

    fn offsets(&self) -> bool {
        matches!(self, Source::Comments(_) | Source::Threads(_))
    }
}

pub(crate) async fn nothing_hidden_leaks_case(mut settings: Settings) {
    settings.reports_to_hold = REPORTS_TO_HOLD as u64;
    let layout = settings.layout;
    let database = unique_db("moderation_leak");
    let config = settings.config(&database);
    let server = Running::start(config).await;
    let app = TestApp::from_parts(server.api.clone(), server.store.clone(), database, settings);
    let mut users = Vec::new();
    for i in 0..AUTHORS + REPORTERS {
        let (id, name) = if i < AUTHORS {
            (format!("author{i}"), format!("Author {i}"))
        } else {
            (format!("reporter{i}"), format!("Reporter {i}"))
        };
        let token = app.token(&id, &name);
        users.push(User { id, name, token });
    }
    let viewer = app.token("viewer", "Vi Ewer");
    let moderator = app.moderator_token("mod", "Mo Derator");
    let mut run = Run {
        server,
        app,
        layout,
        users,
        viewer,
        moderator,
        trusted: HashSet::new(),
        unsure: HashSet::new(),
        clock: 0,
        finished: Vec::new(),
    };
    for (seed, mode) in SEEDS {
        let mut case = Case::start(&mut run, seed).await;
        if mode != Mode::Post {
            case.set(mode).await;
        }
        for _ in 0..OPS {
            case.op += 1;
            case.step().await;
            if case.op % CHECK_EVERY == 0 {
                case.check().await;
            }
        }
        case.finish().await;
    }
    let Run { server, .. } = run;
    server.shutdown().await;
}

impl<'r> Case<'r> {
    async fn start(run: &'r mut Run, seed: u64) -> Case<'r> {
        let key = format!("leak-{seed}");
        let created = run
            .app
            .exec_as(
                Some(&run.moderator),
                "mutation($k: String!) { createDiscussion(input: {title: \"leak\", key: $k}) { id layout } }",
                json!({ "k": key }),
            )
            .await;
        let d = created["data"]["createDiscussion"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("seed {seed}: create the discussion: {created:#}"))
            .to_owned();
        assert_eq!(
            created["data"]["createDiscussion"]["layout"],
            crate::support::layout_name(run.layout)
        );
        let mut ws = Ws::connect(&run.server, Protocol::TransportWs, json!({})).await;
        ws.start(
            "posted",
            &format!("subscription($d: ID!) {{ commentPosted(discussionId: $d) {{ {EVENT} }} }}"),
            json!({ "d": d }),
        )
        .await;
        ws.start(
            "changed",
            &format!("subscription($d: ID!) {{ commentChanged(discussionId: $d) {{ {EVENT} }} }}"),
            json!({ "d": d }),
        )
        .await;
        await_subscribers(&run.server, 2).await;
        Case {
            run,
            seed,
            op: 0,
            rng: StdRng::seed_from_u64(seed),
            d,
            key,
            mode: Mode::Post,
            comments: Vec::new(),
            ws,
            posted_expected: Vec::new(),
            changed_expected: Vec::new(),
            states: Vec::new(),
            posted_got: Vec::new(),
            changed_got: Vec::new(),
            log: Vec::new(),
        }
    }

    /// Where a failure happened.
    fn at(&self) -> String {
        format!(
            "layout {:?}, seed {}, op {}",
            self.run.layout, self.seed, self.op
        )
    }

    /// Records what an operation did.
    fn note(&mut self, what: &str) {
        self.log.push(format!("op {}: {what}", self.op));
    }

    fn tick(&mut self) -> u64 {
        self.run.clock += 1;
        self.run.clock
    }

    fn index(&self, slug: &str) -> usize {
        self.comments
            .iter()
            .position(|c| c.slug == slug)
            .unwrap_or_else(|| panic!("{}: the model has no {slug}", self.at()))
    }

    // ----- the model's views -----

    /// The comments in the layout, in chronological order.
    fn chronological(&self) -> Vec<usize> {
        let mut list: Vec<usize> = (0..self.comments.len())
            .filter(|&i| self.comments[i].in_layout())
            .collect();
        list.sort_by_key(|&i| self.comments[i].published);
        list
    }

    fn children(&self, parent: Option<&str>) -> Vec<usize> {
        self.chronological()
            .into_iter()
            .filter(|&i| self.comments[i].parent.as_deref() == parent)
            .collect()
    }

    fn threaded_under(&self, parent: Option<&str>, out: &mut Vec<usize>) {
        for i in self.children(parent) {
            out.push(i);
            self.threaded_under(Some(&self.comments[i].slug.clone()), out);
        }
    }

    fn threaded(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.threaded_under(None, &mut out);
        out
    }

    fn reply_count(&self, i: usize) -> usize {
        self.children(Some(&self.comments[i].slug)).len()
    }

    /// The comment as the public sees it.
    fn public_view(&self, i: usize) -> Value {
        let c = &self.comments[i];
        let visible = c.public();
        let author = if c.deleted {
            json!({ "id": "", "name": "[deleted]" })
        } else if c.status != Status::Approved {
            json!({ "id": "", "name": "[hidden]" })
        } else {
            let u = &self.run.users[c.author];
            json!({ "id": u.id, "name": u.name })
        };
        json!({
            "slug": c.slug,
            "parentSlug": c.parent,
            "status": c.status.name(),
            "text": if visible { json!(c.text) } else { Value::Null },
            "html": visible,
            "author": author,
            "deleted": c.deleted,
            "moderationReason": null,
            "replyCount": self.reply_count(i),
            "reportCount": null,
        })
    }

    /// The comment as its author (or, with `moderator`, a moderator) sees it by direct link.
    fn own_view(&self, i: usize, moderator: bool) -> Value {
        let c = &self.comments[i];
        let u = &self.run.users[c.author];
        let author = if c.deleted && !moderator {
            json!({ "id": "", "name": "[deleted]" })
        } else {
            json!({ "id": u.id, "name": u.name })
        };
        json!({
            "slug": c.slug,
            "parentSlug": c.parent,
            "status": c.status.name(),
            "text": if c.deleted { Value::Null } else { json!(c.text) },
            "html": !c.deleted,
            "author": author,
            "deleted": c.deleted,
            "moderationReason": c.reason,
            "replyCount": self.reply_count(i),
            "reportCount": if moderator { json!(c.reporters.len()) } else { Value::Null },
        })
    }

    /// Records the comment's public state as it is now, for the live events; the event due.
    fn state(&mut self, i: usize) -> (usize, usize) {
        let view = only(&self.public_view(i), EVENT);
        self.states[i].push(view);
        (i, self.states[i].len() - 1)
    }

    fn views(&self, list: &[usize]) -> Vec<Value> {
        list.iter().map(|&i| self.public_view(i)).collect()
    }

    /// The queue's comments in `scope` (one discussion's, or `None`: all), oldest first.
    fn queue(&self, queue: Queue, scope: Option<&str>) -> Vec<String> {
        let mut entries: Vec<(u64, String)> = Vec::new();
        let current = (self.d.clone(), self.comments.clone());
        for (d, comments) in self.run.finished.iter().chain(std::iter::once(&current)) {
            if scope.is_some_and(|s| s != d) {
                continue;
            }
            for c in comments {
                if c.queue() == Some(queue) {
                    entries.push((c.queued, c.slug.clone()));
                }
            }
        }
        entries.sort();
        entries.into_iter().map(|(_, s)| s).collect()
    }
}

impl Run {
    fn layout_at(&self, seed: u64, op: usize) -> String {
        format!("layout {:?}, seed {seed}, op {op}", self.layout)
    }
}

/// Where two reads first differ, briefly.
fn describe_difference(got: &Value, expected: &Value) -> String {
    match (got, expected) {
        (Value::Array(g), Value::Array(e)) => match g.iter().zip(e).position(|(a, b)| a != b) {
            Some(i) => format!(
                "item {i} of {} (expected {}): {}",
                g.len(),
                e.len(),
                describe_difference(&g[i], &e[i])
            ),
            None => format!("{} items, expected {}", g.len(), e.len()),
        },
        (Value::Object(g), Value::Object(e)) => {
            let keys: BTreeSet<&String> = g.keys().chain(e.keys()).collect();
            let differing: Vec<String> = keys
                .into_iter()
                .filter(|k| g.get(*k) != e.get(*k))
                .map(|k| {
                    let (a, b) = (
                        g.get(k).cloned().unwrap_or(Value::Null),
                        e.get(k).cloned().unwrap_or(Value::Null),
                    );
                    format!("{k}: {}", describe_difference(&a, &b))
                })
                .collect();
            let slug = e.get("slug").or_else(|| g.get("slug"));
            match slug {
                Some(slug) => format!("(comment {slug}) {}", differing.join("; ")),
                None => differing.join("; "),
            }
        }
        _ => format!("got {}, expected {}", cut(got), cut(expected)),
    }
}

/// A read, shortened for a failure message.
fn cut(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 1200 {
        let head: String = text.chars().take(1200).collect();
        format!("{head}…")
    } else {
        text
    }
}

/// What a caller gets for one aliased field: the comment, or its error's code.
fn aliased_outcome(response: &Value, alias: &str) -> Value {
    let error = response["errors"].as_array().and_then(|errors| {
        errors
            .iter()
            .find(|e| e["path"][0] == alias)
            .map(|e| json!({ "error": e["extensions"]["code"] }))
    });
    error.unwrap_or_else(|| normal(&response["data"][alias]))
}

/// `or` for a read that may be null: the whole payload when the field is missing.
trait OrPayload {
    fn or(self, payload: &Value) -> Value;
}

impl OrPayload for Value {
    fn or(self, payload: &Value) -> Value {
        if self.is_null() {
            payload.clone()
        } else {
            self
        }
    }
}
