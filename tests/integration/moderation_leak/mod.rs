//! The moderation leak test: seeded random sequences of posts, replies, mode changes, approvals,
//! rejections, reports and deletes, against a model of what the public may see; after every
//! few operations every public read (anonymous, and as a signed-in user who is neither author
//! nor moderator) must equal the model's view: lists in every order and page direction, trees,
//! counters, keyed and federated reads, direct links and live events. Moderators' queues and
//! counts are checked against the model too. Run once per layout.

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

    // ----- operations -----

    /// Runs one random operation on the server and the model.
    async fn step(&mut self) {
        let roll = self.rng.gen_range(0..100);
        match roll {
            0..=13 => self.post_top().await,
            14..=33 => self.reply().await,
            34..=38 => self.set_mode().await,
            39..=52 => self.approve().await,
            53..=60 => self.reject().await,
            61..=79 => self.report().await,
            80..=85 => self.delete().await,
            86..=99 => self.refused().await,
            _ => self.reply().await,
        }
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.rng.gen_range(0..items.len())].clone())
        }
    }

    /// An author who may post now (under PRE_FIRST, none whose trust the contract leaves open).
    fn poster(&mut self) -> Option<usize> {
        let candidates: Vec<usize> = (0..AUTHORS)
            .filter(|a| self.mode != Mode::PreFirst || !self.run.unsure.contains(a))
            .collect();
        self.pick(&candidates)
    }

    async fn post_top(&mut self) {
        if let Some(author) = self.poster() {
            self.post(author, None).await;
        }
    }

    async fn reply(&mut self) {
        let Some(author) = self.poster() else { return };
        // Public comments anyone sees, and the author's own held comments.
        let parents: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                c.depth < MAX_DEPTH
                    && !c.deleted
                    && (c.public() || (c.held() && c.author == author))
            })
            .collect();
        match self.pick(&parents) {
            Some(parent) => self.post(author, Some(parent)).await,
            None => self.post(author, None).await,
        }
    }

    async fn post(&mut self, author: usize, parent: Option<usize>) {
        let now = self.tick();
        let text = format!("text {} of seed {} by {author}", self.op, self.seed);
        let parent_slug = parent.map(|p| self.comments[p].slug.clone());
        let parent_held = parent.is_some_and(|p| self.comments[p].held());
        let held = parent_held
            || match self.mode {
                Mode::Post => false,
                Mode::Pre => true,
                Mode::PreFirst => !self.run.trusted.contains(&author),
            };
        let response = self
            .run
            .app
            .exec_as(
                Some(&self.run.users[author].token),
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug parentSlug status text } }",
                json!({ "d": self.d, "p": parent_slug, "t": text }),
            )
            .await;
        let got = &response["data"]["postComment"];
        let slug = got["slug"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: post: {response:#}", self.at()))
            .to_owned();
        let status = if held {
            Status::Pending
        } else {
            Status::Approved
        };
        assert_eq!(
            *got,
            json!({ "slug": slug, "parentSlug": parent_slug, "status": status.name(), "text": text }),
            "{}: postComment (mode {:?}, parent held {parent_held}) answered {response:#}",
            self.at(),
            self.mode
        );
        let comment = Model {
            slug,
            parent: parent_slug,
            depth: parent.map_or(0, |p| self.comments[p].depth + 1),
            author,
            text,
            status,
            reason: None,
            published: (!held).then_some(now),
            deleted: false,
            reporters: BTreeSet::new(),
            reported_by: BTreeSet::new(),
            queued: now,
        };
        self.note(&format!(
            "author {author} posts {} under {:?} (mode {:?}): {}",
            comment.slug,
            comment.parent,
            self.mode,
            status.name()
        ));
        self.comments.push(comment);
        self.states.push(Vec::new());
        if !held {
            let due = self.state(self.comments.len() - 1);
            self.posted_expected.push(due);
        }
    }

    async fn set_mode(&mut self) {
        let modes: Vec<Mode> = [Mode::Post, Mode::Pre, Mode::PreFirst]
            .into_iter()
            .filter(|m| *m != self.mode)
            .collect();
        let Some(mode) = self.pick(&modes) else {
            return;
        };
        self.set(mode).await;
    }

    async fn set(&mut self, mode: Mode) {
        self.tick();
        let data = self
            .moderate(
                "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }",
                json!({ "d": self.d, "m": mode.name() }),
            )
            .await;
        assert_eq!(
            data["setModeration"]["moderation"],
            mode.name(),
            "{}",
            self.at()
        );
        self.mode = mode;
        self.note(&format!("setModeration {mode:?}"));
    }

    /// Runs a mutation as the moderator; its data, failing on errors.
    async fn moderate(&self, query: &str, variables: Value) -> Value {
        let response = self
            .run
            .app
            .exec_as(Some(&self.run.moderator), query, variables.clone())
            .await;
        assert!(
            response.get("errors").is_none(),
            "{}: {query} with {variables}: {response:#}",
            self.at()
        );
        response["data"].clone()
    }

    async fn approve(&mut self) {
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                if c.held() {
                    return true;
                }
                !c.deleted
                    && (c.placeholder() || c.status == Status::Approved && !c.reporters.is_empty())
            })
            .collect();
        let held: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| self.comments[i].held())
            .collect();
        let pick = if !held.is_empty() && self.rng.gen_bool(0.5) {
            self.pick(&held)
        } else {
            self.pick(&candidates)
        };
        let Some(i) = pick else {
            return self.post_top().await;
        };
        let now = self.tick();
        let vars = json!({ "d": self.d, "s": self.comments[i].slug });
        const APPROVE: &str = "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug status text } }";
        let parent_held = self.comments[i]
            .parent
            .as_ref()
            .is_some_and(|p| self.comments[self.index(p)].held());
        if self.comments[i].held() && parent_held {
            // Its parent first: refused, nothing changes.
            let response = self
                .run
                .app
                .exec_as(Some(&self.run.moderator), APPROVE, vars)
                .await;
            self.expect_code(
                &response,
                "BAD_USER_INPUT",
                "approving a reply under a held parent",
            );
            self.note(&format!(
                "approve {} before its parent: refused",
                self.comments[i].slug
            ));
            return;
        }
        let data = self.moderate(APPROVE, vars).await;
        let c = &self.comments[i];
        let kind = if c.held() {
            "held"
        } else if c.placeholder() {
            "placeholder"
        } else {
            "reported"
        };
        self.note(&format!("approve {kind} {}", c.slug));
        let c = &mut self.comments[i];
        assert_eq!(
            data["approveComment"],
            json!({ "slug": c.slug, "status": "APPROVED", "text": c.text }),
            "{}: approveComment",
            self.run.layout_at(self.seed, self.op)
        );
        let author = c.author;
        if c.held() {
            c.published = Some(now);
            c.status = Status::Approved;
            c.reason = None;
            self.run.trusted.insert(author);
            let due = self.state(i);
            self.posted_expected.push(due);
        } else if c.placeholder() {
            c.status = Status::Approved;
            c.reason = None;
            c.reporters.clear();
            self.run.trusted.insert(author);
            let due = self.state(i);
            self.changed_expected.push(due);
        } else {
            // Reports dismissed: nothing public changes, and no event says so.
            c.reporters.clear();
            self.run.unsure.insert(author);
        }
    }

    async fn reject(&mut self) {
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                (c.held() && c.status == Status::Pending) || (c.public() && c.reporters.is_empty())
            })
            .collect();
        let Some(i) = self.pick(&candidates) else {
            return self.reply().await;
        };
        let now = self.tick();
        let reason = self
            .rng
            .gen_bool(0.6)
            .then(|| format!("reason {} of seed {}", self.op, self.seed));
        let data = self
            .moderate(
                "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status moderationReason } }",
                json!({ "d": self.d, "s": self.comments[i].slug, "r": reason }),
            )
            .await;
        let kind = if self.comments[i].held() {
            "held"
        } else {
            "public"
        };
        self.note(&format!(
            "reject {kind} {} ({reason:?})",
            self.comments[i].slug
        ));
        let c = &mut self.comments[i];
        assert_eq!(
            data["rejectComment"],
            json!({ "slug": c.slug, "status": "REJECTED", "moderationReason": reason }),
            "{}: rejectComment",
            self.run.layout_at(self.seed, self.op)
        );
        c.status = Status::Rejected;
        c.reason = reason;
        c.queued = now;
        if c.in_layout() {
            let due = self.state(i);
            self.changed_expected.push(due);
        }
    }

    async fn report(&mut self) {
        // A reporter and a public comment not theirs (a user's report counts once per comment,
        // dismissed or not).
        let reporter = self.rng.gen_range(0..AUTHORS + REPORTERS);
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                c.public() && c.author != reporter
            })
            .collect();
        let Some(i) = self.pick(&candidates) else {
            return self.post_top().await;
        };
        let now = self.tick();
        let reason = ["SPAM", "ABUSE", "OFF_TOPIC", "OTHER"][self.rng.gen_range(0..4)];
        let repeat = self.comments[i].reported_by.contains(&reporter);
        let response = self
            .run
            .app
            .exec_as(
                Some(&self.run.users[reporter].token),
                "mutation($d: ID!, $s: String!, $r: ReportReason!, $n: String) { reportComment(discussionId: $d, slug: $s, reason: $r, note: $n) }",
                json!({ "d": self.d, "s": self.comments[i].slug, "r": reason, "n": "see the seed" }),
            )
            .await;
        assert_eq!(
            response,
            json!({ "data": { "reportComment": !repeat } }),
            "{}: reportComment by user {reporter} on {} (repeat: {repeat})",
            self.at(),
            self.comments[i].slug
        );
        let holds = !repeat && self.comments[i].reporters.len() + 1 == REPORTS_TO_HOLD;
        self.note(&format!(
            "user {reporter} reports {} (repeat: {repeat}, holds: {holds})",
            self.comments[i].slug
        ));
        if repeat {
            return;
        }
        let c = &mut self.comments[i];
        if c.reporters.is_empty() {
            c.queued = now;
        }
        c.reporters.insert(reporter);
        c.reported_by.insert(reporter);
        if c.reporters.len() == REPORTS_TO_HOLD {
            c.status = Status::Pending;
            c.reason = Some(format!("reported by {REPORTS_TO_HOLD} users"));
            c.queued = now;
            let due = self.state(i);
            self.changed_expected.push(due);
        }
    }

    async fn delete(&mut self) {
        // A public comment without reports and without held replies (what happens to those is
        // not this test's subject).
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                c.public()
                    && c.reporters.is_empty()
                    && !self
                        .comments
                        .iter()
                        .any(|r| r.held() && r.parent.as_deref() == Some(c.slug.as_str()))
            })
            .collect();
        let Some(i) = self.pick(&candidates) else {
            return self.post_top().await;
        };
        self.tick();
        let token = if self.rng.gen_bool(0.5) {
            self.run.moderator.clone()
        } else {
            self.run.users[self.comments[i].author].token.clone()
        };
        let response = self
            .run
            .app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted text } }",
                json!({ "d": self.d, "s": self.comments[i].slug }),
            )
            .await;
        assert_eq!(
            response["data"]["deleteComment"],
            json!({ "slug": self.comments[i].slug, "deleted": true, "text": null }),
            "{}: deleteComment: {response:#}",
            self.at()
        );
        self.comments[i].deleted = true;
        self.note(&format!("delete {}", self.comments[i].slug));
        let due = self.state(i);
        self.changed_expected.push(due);
    }

    /// What others may not do with what they cannot see: reply to a held comment, or report a
    /// held comment or a placeholder (NOT_FOUND; a placeholder is visible, as a tombstone is,
    /// so replying to it is allowed); report their own comment (BAD_USER_INPUT) or a deleted
    /// one (COMMENT_DELETED). Nothing changes.
    async fn refused(&mut self) {
        let hidden: Vec<usize> = (0..self.comments.len())
            .filter(|&i| self.comments[i].held() || self.comments[i].placeholder())
            .collect();
        let kind = self.rng.gen_range(0..4);
        let held: Vec<usize> = (0..self.comments.len())
            .filter(|&i| self.comments[i].held())
            .collect();
        let target = match kind {
            0 => self.pick(&held),
            1 => self.pick(&hidden),
            2 => {
                let public: Vec<usize> = (0..self.comments.len())
                    .filter(|&i| self.comments[i].public())
                    .collect();
                self.pick(&public)
            }
            _ => {
                let deleted: Vec<usize> = (0..self.comments.len())
                    .filter(|&i| self.comments[i].deleted)
                    .collect();
                self.pick(&deleted)
            }
        };
        let Some(i) = target else {
            return self.post_top().await;
        };
        self.tick();
        let c = self.comments[i].clone();
        // Someone else than its author (for kind 2: its author).
        let user = if kind == 2 {
            c.author
        } else {
            (c.author + 1 + self.rng.gen_range(0..AUTHORS + REPORTERS - 1)) % (AUTHORS + REPORTERS)
        };
        let token = self.run.users[user].token.clone();
        let (query, vars, code) = match kind {
            0 => (
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
                json!({ "d": self.d, "p": c.slug, "t": "a reply to what I cannot see" }),
                "NOT_FOUND",
            ),
            _ => (
                "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }",
                json!({ "d": self.d, "s": c.slug }),
                match kind {
                    1 => "NOT_FOUND",
                    2 => "BAD_USER_INPUT",
                    _ => "COMMENT_DELETED",
                },
            ),
        };
        let response = self.run.app.exec_as(Some(&token), query, vars).await;
        self.note(&format!(
            "user {user} tries kind {kind} on {}: {code}",
            c.slug
        ));
        self.expect_code(
            &response,
            code,
            &format!("user {user} on {} (kind {kind})", c.slug),
        );
    }

    fn expect_code(&self, response: &Value, code: &str, what: &str) {
        let got = response["errors"][0]["extensions"]["code"].as_str();
        assert!(
            got == Some(code),
            "{}: {what}: expected {code}, got {}\n  the operations so far:\n    {}",
            self.at(),
            cut(response),
            self.log.join("\n    ")
        );
        // The message does not give away what is hidden.
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        for c in &self.comments {
            assert!(
                !message.contains(&c.text),
                "{}: {what}: the error shows a comment's text: {message}",
                self.at()
            );
        }
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

    // ----- comparing -----

    /// Runs a read; its data, failing on errors.
    async fn read(&self, token: Option<&str>, query: &str, variables: Value, what: &str) -> Value {
        let response = self.run.app.exec_as(token, query, variables).await;
        assert!(
            response.get("errors").is_none(),
            "{}: {what} failed: {response:#}",
            self.at()
        );
        normal(&response["data"])
    }

    fn same(&self, what: &str, got: &Value, expected: &Value) {
        assert!(
            got == expected,
            "{}: {what} differs from the model: {}\n  got:      {}\n  expected: {}\n  the operations so far:\n    {}",
            self.at(),
            describe_difference(got, expected),
            cut(got),
            cut(expected),
            self.log.join("\n    ")
        );
    }

    /// Compares every read with the model, and the live events so far.
    async fn check(&mut self) {
        let tokens = [None, Some(self.run.viewer.clone())];
        for token in &tokens {
            let who = if token.is_some() {
                "viewer"
            } else {
                "anonymous"
            };
            self.check_public(token.as_deref(), who).await;
        }
        self.check_links().await;
        self.check_moderators().await;
        self.check_events().await;
    }

    async fn check_public(&mut self, token: Option<&str>, who: &str) {
        let chronological = self.chronological();
        let mut newest = chronological.clone();
        newest.reverse();
        let threaded = self.threaded();
        let top: Vec<usize> = self.children(None);
        let mut top_newest = top.clone();
        top_newest.reverse();
        let count = chronological.len();

        // The discussion, by id, by key, and as a federation entity by both keys.
        let mut reps = vec![
            json!({ "__typename": "Discussion", "id": self.d }),
            json!({ "__typename": "Discussion", "key": self.key }),
        ];
        let mut expected_entities = vec![
            json!({ "id": self.d, "commentCount": count }),
            json!({ "id": self.d, "commentCount": count }),
        ];
        for (i, c) in self.comments.iter().enumerate() {
            reps.push(json!({ "__typename": "Comment", "discussionId": self.d, "slug": c.slug }));
            expected_entities.push(if c.in_layout() {
                self.public_view(i)
            } else {
                Value::Null
            });
        }
        let query = format!(
            "query($d: ID!, $k: String!, $r: [_Any!]!) {{ discussion(id: $d) {{ commentCount moderation pendingCount }} discussionsByKeys(keys: [$k]) {{ id commentCount pendingCount }} _entities(representations: $r) {{ ... on Discussion {{ id commentCount }} ... on Comment {{ ...C }} }} }} {}",
            fragment()
        );
        let got = self
            .read(
                token,
                &query,
                json!({ "d": self.d, "k": self.key, "r": reps }),
                "discussion, discussionsByKeys, _entities",
            )
            .await;
        self.same(
            &format!("{who}: discussion counters"),
            &got["discussion"],
            &json!({ "commentCount": count, "moderation": self.mode.name(), "pendingCount": null }),
        );
        self.same(
            &format!("{who}: discussionsByKeys"),
            &got["discussionsByKeys"],
            &json!([{ "id": self.d, "commentCount": count, "pendingCount": null }]),
        );
        self.same(
            &format!("{who}: _entities"),
            &got["_entities"],
            &Value::Array(expected_entities),
        );

        // Every list, walked forward, backward and by offset.
        let lists = [
            (Source::Comments("CHRONOLOGICAL"), chronological.clone()),
            (Source::Comments("NEWEST"), newest),
            (Source::Comments("THREADED"), threaded),
            (Source::Threads("CHRONOLOGICAL"), top.clone()),
            (Source::Threads("NEWEST"), top_newest),
        ];
        for (source, list) in lists {
            self.walk(token, who, &source, &self.views(&list)).await;
        }

        // Every comment's replies, in both orders: the tree, walked down from the threads
        // (a few comments a request, within the server's alias and root-field limits).
        for batch in chronological.chunks(LINKS_A_REQUEST / 2) {
            let decls: Vec<String> = (0..batch.len())
                .map(|j| format!("$s{j}: String!"))
                .collect();
            let roots: Vec<String> = (0..batch.len())
                .map(|j| {
                    format!(
                        "c{j}: comment(discussionId: $d, slug: $s{j}) {{ chronological: replies(first: 100) {{ totalCount nodes {{ ...C }} }} newest: replies(order: NEWEST, first: 100) {{ totalCount nodes {{ ...C }} }} }}"
                    )
                })
                .collect();
            let query = format!(
                "query($d: ID!, {}) {{ {} }} {}",
                decls.join(", "),
                roots.join(" "),
                fragment()
            );
            let mut vars = json!({ "d": self.d });
            for (j, &i) in batch.iter().enumerate() {
                vars[format!("s{j}")] = json!(self.comments[i].slug);
            }
            let got = self.read(token, &query, vars, "replies").await;
            for (j, &i) in batch.iter().enumerate() {
                let slug = &self.comments[i].slug;
                let replies = self.children(Some(slug));
                let mut newest = replies.clone();
                newest.reverse();
                let expected = json!({
                    "chronological": { "totalCount": replies.len(), "nodes": self.views(&replies) },
                    "newest": { "totalCount": newest.len(), "nodes": self.views(&newest) },
                });
                self.same(
                    &format!("{who}: the replies of {slug} (both orders)"),
                    &got[format!("c{j}")],
                    &expected,
                );
            }
        }

        // Some comments' replies and sub-discussions, paged.
        let parents: Vec<usize> = chronological
            .iter()
            .copied()
            .filter(|&i| self.reply_count(i) > 0)
            .collect();
        for _ in 0..2 {
            let Some(i) = self.pick(&parents) else { break };
            let slug = self.comments[i].slug.clone();
            let replies = self.children(Some(&slug));
            let mut newest = replies.clone();
            newest.reverse();
            let mut sub = Vec::new();
            self.threaded_under(Some(&slug), &mut sub);
            let lists = [
                (Source::Replies(slug.clone(), "CHRONOLOGICAL"), replies),
                (Source::Replies(slug.clone(), "NEWEST"), newest),
                (Source::Sub(slug.clone()), sub),
            ];
            for (source, list) in lists {
                self.walk(token, who, &source, &self.views(&list)).await;
            }
        }
    }

    /// Walks a list forward (`first`/`after`), backward (`last`/`before`) and by offset, each
    /// page against the model.
    async fn walk(&self, token: Option<&str>, who: &str, source: &Source, expected: &[Value]) {
        let total = expected.len();
        let vars = |n: usize, cursor: Option<&str>, offset: Option<usize>| json!({ "d": self.d, "s": source.slug(), "n": n, "c": cursor, "o": offset });
        // Forward.
        let query = source.query("first: $n, after: $c");
        let (mut at, mut after, mut pages) = (0, None::<String>, 0);
        loop {
            let what = format!("{who}: {source:?} forward from {at}");
            let data = self
                .read(token, &query, vars(PAGE, after.as_deref(), None), &what)
                .await;
            let conn = source.connection(&data);
            let end = (at + PAGE).min(total);
            self.page(
                &what,
                conn,
                &expected[at..end],
                total,
                end < total,
                after.is_some(),
            );
            after = conn["pageInfo"]["endCursor"].as_str().map(str::to_owned);
            at = end;
            pages += 1;
            if at >= total || pages > total {
                break;
            }
        }
        // Backward.
        let query = source.query("last: $n, before: $c");
        let (mut end, mut before, mut pages) = (total, None::<String>, 0);
        loop {
            let what = format!("{who}: {source:?} backward from {end}");
            let data = self
                .read(token, &query, vars(PAGE, before.as_deref(), None), &what)
                .await;
            let conn = source.connection(&data);
            let start = end.saturating_sub(PAGE);
            self.page(
                &what,
                conn,
                &expected[start..end],
                total,
                before.is_some(),
                start > 0,
            );
            before = conn["pageInfo"]["startCursor"].as_str().map(str::to_owned);
            end = start;
            pages += 1;
            if end == 0 || pages > total {
                break;
            }
        }
        // By offset, one past the end included.
        if source.offsets() {
            let query = source.query("first: $n, offset: $o");
            let mut at = 0;
            loop {
                let what = format!("{who}: {source:?} at offset {at}");
                let data = self
                    .read(token, &query, vars(PAGE, None, Some(at)), &what)
                    .await;
                let start = at.min(total);
                let end = (at + PAGE).min(total);
                self.page(
                    &what,
                    source.connection(&data),
                    &expected[start..end],
                    total,
                    end < total,
                    at > 0,
                );
                if at >= total {
                    break;
                }
                at += PAGE;
            }
        }
    }

    fn page(
        &self,
        what: &str,
        conn: &Value,
        expected: &[Value],
        total: usize,
        next: bool,
        previous: bool,
    ) {
        let nodes: Vec<Value> = conn["edges"]
            .as_array()
            .map(|edges| edges.iter().map(|e| e["node"].clone()).collect())
            .unwrap_or_default();
        let got = json!({
            "totalCount": conn["totalCount"],
            "hasNextPage": conn["pageInfo"]["hasNextPage"],
            "hasPreviousPage": conn["pageInfo"]["hasPreviousPage"],
            "nodes": nodes,
        });
        let expected = json!({
            "totalCount": total,
            "hasNextPage": next,
            "hasPreviousPage": previous,
            "nodes": expected,
        });
        self.same(what, &got, &expected);
    }

    /// Direct links to every comment: the public gets NOT_FOUND for held ones and the
    /// placeholder for the others; authors see their own with status and reason; moderators
    /// see all.
    async fn check_links(&mut self) {
        if self.comments.is_empty() {
            return;
        }
        let n = self.comments.len();
        let mut callers: Vec<(String, Option<String>, Option<usize>, bool)> = vec![
            ("anonymous".into(), None, None, false),
            ("viewer".into(), Some(self.run.viewer.clone()), None, false),
            (
                "moderator".into(),
                Some(self.run.moderator.clone()),
                None,
                true,
            ),
        ];
        for a in 0..AUTHORS {
            callers.push((
                format!("author {a}"),
                Some(self.run.users[a].token.clone()),
                Some(a),
                false,
            ));
        }
        let all: Vec<usize> = (0..n).collect();
        for batch in all.chunks(LINKS_A_REQUEST) {
            let decls: Vec<String> = (0..batch.len())
                .map(|j| format!("$s{j}: String!"))
                .collect();
            let roots: Vec<String> = (0..batch.len())
                .map(|j| format!("q{j}: comment(discussionId: $d, slug: $s{j}) {{ ...C }}"))
                .collect();
            let query = format!(
                "query($d: ID!, {}) {{ {} }} {}",
                decls.join(", "),
                roots.join(" "),
                fragment()
            );
            let mut vars = json!({ "d": self.d });
            for (j, &i) in batch.iter().enumerate() {
                vars[format!("s{j}")] = json!(self.comments[i].slug);
            }
            for (who, token, author, moderator) in &callers {
                let response = self
                    .run
                    .app
                    .exec_as(token.as_deref(), &query, vars.clone())
                    .await;
                for (j, &i) in batch.iter().enumerate() {
                    let c = &self.comments[i];
                    let expected = if *moderator || *author == Some(c.author) {
                        self.own_view(i, *moderator)
                    } else if c.held() {
                        json!({ "error": "NOT_FOUND" })
                    } else {
                        self.public_view(i)
                    };
                    self.same(
                        &format!(
                            "{who}: the direct link comment(discussionId, slug: {})",
                            c.slug
                        ),
                        &aliased_outcome(&response, &format!("q{j}")),
                        &expected,
                    );
                }
            }
        }
        // The discussion's own direct link, for the public: held ones one by one (the field is
        // not nullable, so an error takes the discussion with it).
        for i in 0..n {
            let c = &self.comments[i];
            let query = format!(
                "query($d: ID!, $s: String!) {{ discussion(id: $d) {{ comment(slug: $s) {{ ...C }} }} }} {}",
                fragment()
            );
            let response = self
                .run
                .app
                .exec_as(None, &query, json!({ "d": self.d, "s": c.slug }))
                .await;
            let got = match response["errors"][0]["extensions"]["code"].as_str() {
                Some(code) => json!({ "error": code }),
                None => normal(&response["data"]["discussion"]["comment"]),
            };
            let expected = if c.held() {
                json!({ "error": "NOT_FOUND" })
            } else {
                self.public_view(i)
            };
            self.same(
                &format!("anonymous: discussion.comment(slug: {})", c.slug),
                &got,
                &expected,
            );
        }
    }

    /// The moderators' queues and pending count.
    async fn check_moderators(&mut self) {
        let pending = self.queue(Queue::Pending, Some(&self.d)).len();
        let data = self
            .read(
                Some(&self.run.moderator.clone()),
                "query($d: ID!, $k: String!) { discussion(id: $d) { pendingCount } discussionsByKeys(keys: [$k]) { pendingCount } }",
                json!({ "d": self.d, "k": self.key }),
                "pendingCount",
            )
            .await;
        self.same(
            "moderator: pendingCount",
            &data,
            &json!({ "discussion": { "pendingCount": pending }, "discussionsByKeys": [{ "pendingCount": pending }] }),
        );
        for queue in Queue::ALL {
            for scope in [Some(self.d.clone()), None] {
                let expected = self.queue(queue, scope.as_deref());
                let data = self
                    .read(
                        Some(&self.run.moderator.clone()),
                        "query($q: ModerationQueue!, $d: ID) { moderationQueue(queue: $q, discussionId: $d, first: 100) { totalCount nodes { slug discussionId } } }",
                        json!({ "q": queue.name(), "d": scope }),
                        "moderationQueue",
                    )
                    .await;
                let got: Vec<Value> = data["moderationQueue"]["nodes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                // Across all discussions the slugs are told apart by discussion.
                let got_slugs: Vec<String> = got
                    .iter()
                    .map(|n| n["slug"].as_str().unwrap_or_default().to_owned())
                    .collect();
                self.same(
                    &format!(
                        "moderator: moderationQueue({}) in {}",
                        queue.name(),
                        scope.as_deref().unwrap_or("every discussion")
                    ),
                    &json!({ "totalCount": data["moderationQueue"]["totalCount"], "slugs": got_slugs }),
                    &json!({ "totalCount": expected.len(), "slugs": expected }),
                );
            }
        }
    }

    /// The live events so far: exactly the model's, in order, on each subscription.
    async fn check_events(&mut self) {
        while self.posted_got.len() < self.posted_expected.len()
            || self.changed_got.len() < self.changed_expected.len()
        {
            let Ok((id, payload)) = tokio::time::timeout(EVENT_WAIT, self.ws.next()).await else {
                panic!(
                    "{}: live events missing\n  posted got:      {:?}\n  posted expected: {:?}\n  changed got:      {:?}\n  changed expected: {:?}",
                    self.at(),
                    self.posted_got,
                    self.posted_expected,
                    self.changed_got,
                    self.changed_expected
                );
            };
            match id.as_str() {
                "posted" => self
                    .posted_got
                    .push(normal(&payload["data"]["commentPosted"]).or(&payload)),
                "changed" => self
                    .changed_got
                    .push(normal(&payload["data"]["commentChanged"]).or(&payload)),
                other => panic!("{}: an event of operation {other}: {payload}", self.at()),
            }
        }
        for (what, got, due) in [
            ("commentPosted", &self.posted_got, &self.posted_expected),
            ("commentChanged", &self.changed_got, &self.changed_expected),
        ] {
            let slugs = |events: &[Value]| -> Vec<Value> {
                events.iter().map(|e| e["slug"].clone()).collect()
            };
            let due_slugs: Vec<Value> = due
                .iter()
                .map(|&(i, _)| json!(self.comments[i].slug))
                .collect();
            self.same(
                &format!("anonymous: the comments of the {what} events"),
                &Value::Array(slugs(got)),
                &Value::Array(due_slugs),
            );
            for (n, (event, &(i, since))) in got.iter().zip(due.iter()).enumerate() {
                let allowed = &self.states[i][since..];
                if !allowed.contains(event) {
                    self.same(
                        &format!(
                            "anonymous: {what} event {n} (the comment as it was then, or any later state: {})",
                            Value::Array(allowed.to_vec())
                        ),
                        event,
                        &allowed[0],
                    );
                }
            }
        }
    }

    /// The last check, after a public post and its delete: nothing arrived that the model did
    /// not expect, since those two come last.
    async fn finish(mut self) {
        self.op += 1;
        if self.mode != Mode::Post {
            self.tick();
            self.moderate(
                "mutation($d: ID!) { setModeration(id: $d, mode: POST) { moderation } }",
                json!({ "d": self.d }),
            )
            .await;
            self.mode = Mode::Post;
        }
        self.post(0, None).await;
        let last = self.comments.len() - 1;
        self.tick();
        let token = self.run.users[0].token.clone();
        let response = self
            .run
            .app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
                json!({ "d": self.d, "s": self.comments[last].slug }),
            )
            .await;
        assert_eq!(
            response["data"]["deleteComment"]["deleted"],
            true,
            "{}: {response:#}",
            self.at()
        );
        self.comments[last].deleted = true;
        let due = self.state(last);
        self.changed_expected.push(due);
        self.check().await;
        let Case {
            run,
            d,
            comments,
            ws,
            ..
        } = self;
        drop(ws);
        await_subscribers(&run.server, 0).await;
        run.finished.push((d, comments));
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
