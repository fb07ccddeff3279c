//! Moderation under concurrency: writers on two servers over one database post (some held by
//! pre-moderation), approve and reject held comments, report, reject and restore public ones,
//! and delete, in one discussion at once. Afterwards, on every layout, the counters
//! (`commentCount`, `totalCount`, `replyCount`, `pendingCount`) and the moderation queues equal
//! what a full read shows, and the full read equals what the writes that succeeded imply.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use threadql::domain::Layout;
use tokio::sync::mpsc;

use crate::support::{moderator_token, post_graphql, token, unique_db, Running, Settings};

const SET: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug parentSlug status } }";
const APPROVE: &str = "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug parentSlug status } }";
const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
const LINK: &str =
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug status deleted } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
/// One page of the chronological list, with every counter the list shows.
const PAGE: &str = r#"query($d: ID!, $after: String) { discussion(id: $d) {
  commentCount pendingCount
  comments(first: 50, after: $after) { totalCount pageInfo { hasNextPage endCursor }
    nodes { slug parentSlug deleted status replyCount reportCount moderationReason text author { id name } } } } }"#;
/// One page of a moderation queue of the discussion.
const QUEUE: &str = r#"query($q: ModerationQueue!, $d: ID, $after: String) {
  moderationQueue(queue: $q, discussionId: $d, first: 7, after: $after) {
    totalCount pageInfo { hasNextPage endCursor } nodes { slug status } } }"#;
/// One page of the top-level comments.
const THREADS: &str = r#"query($d: ID!, $after: String) { discussion(id: $d) {
  threads(first: 50, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { slug } } } }"#;
/// One page of a comment's direct replies.
const REPLIES: &str = r#"query($d: ID!, $s: String!, $after: String) { comment(discussionId: $d, slug: $s) {
  replyCount replies(first: 50, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { slug } } } }"#;

/// Writers that post, per server.
const POSTERS: usize = 4;
/// Posts per poster.
const POSTS: usize = 10;
/// Moderators acting on held and public comments, per server.
const MODERATORS: usize = 2;
/// How many times a request refused with `CONFLICT` is sent (waiting longer each time, as a
/// client told to resend would: a loaded machine keeps a change contended for seconds).
const RESENDS: usize = 20;
/// Reports that hold a public comment as a PENDING placeholder.
const REPORTS_TO_HOLD: u64 = 3;
/// Users who report.
const REPORTERS: usize = 5;
/// Public comments of each script ([`Script`]).
const PER_SCRIPT: usize = 2;

/// What happens to a public comment posted before the writers start, while they write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Reported by every reporter at once: held as a PENDING placeholder.
    HeldByReports,
    /// Reported by two: public, in the REPORTED queue.
    Reported,
    /// Reported by two while a moderator rejects it: a REJECTED placeholder.
    RejectedWhileReported,
    /// Rejected, then approved: public again.
    RejectedThenApproved,
    /// Reported by four (held), then approved once the reports are in: public, reports dismissed.
    HeldThenApproved,
    /// Reported by two while a moderator deletes it: a tombstone, in no queue.
    DeletedWhileReported,
}

impl Script {
    const ALL: [Script; 6] = [
        Script::HeldByReports,
        Script::Reported,
        Script::RejectedWhileReported,
        Script::RejectedThenApproved,
        Script::HeldThenApproved,
        Script::DeletedWhileReported,
    ];

    /// How many reporters report it.
    fn reporters(self) -> usize {
        match self {
            Script::HeldByReports => REPORTERS,
            Script::HeldThenApproved => 4,
            Script::RejectedThenApproved => 0,
            _ => 2,
        }
    }
}

/// What a held comment's moderators are told to do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Approved once.
    Approve,
    /// Rejected.
    Reject,
    /// Rejected, then approved.
    RejectThenApprove,
    /// Approved through both servers at once.
    ApproveTwiceAtOnce,
    /// Left pending.
    Leave,
}

impl Fate {
    fn of(n: usize) -> Fate {
        match n % 5 {
            0 => Fate::Approve,
            1 => Fate::Reject,
            2 => Fate::RejectThenApprove,
            3 => Fate::ApproveTwiceAtOnce,
            _ => Fate::Leave,
        }
    }
}

/// What the writes that succeeded imply.
#[derive(Debug, Default)]
struct Expected {
    /// Public comments: slug → parent slug.
    public: BTreeMap<String, Option<String>>,
    /// Held comments still held: slug → status (PENDING or REJECTED).
    held: BTreeMap<String, &'static str>,
    /// Public comments deleted.
    deleted: BTreeSet<String>,
    /// The public comments with a script, which writers neither reply to nor delete.
    scripted: BTreeMap<String, Script>,
    /// Reports that counted, by comment.
    reports: BTreeMap<String, u64>,
    /// Every error code met, by operation (each must be one the operation may meet).
    refused: Vec<(&'static str, String)>,
}

/// The shared state of one run.
struct Run<'a> {
    servers: &'a [Running; 2],
    client: reqwest::Client,
    d: String,
    expected: Mutex<Expected>,
}

impl Run<'_> {
    /// Sends a request through server `s`; `Ok(data)` or `Err(code)`.
    async fn send(&self, s: usize, token: &str, query: &str, vars: Value) -> Result<Value, String> {
        self.send_as(s, Some(token), query, vars).await
    }

    /// Sends a request through server `s`, anonymous without a token.
    async fn send_as(
        &self,
        s: usize,
        token: Option<&str>,
        query: &str,
        vars: Value,
    ) -> Result<Value, String> {
        // `CONFLICT` (a write that kept meeting concurrent writes, nothing written) is sent
        // again, as its message tells clients to.
        for resend in 0..RESENDS {
            let (status, body) = post_graphql(
                &self.client,
                &self.servers[s % 2],
                token,
                query,
                vars.clone(),
            )
            .await;
            assert_eq!(status, 200, "{body:#}");
            let Some(error) = body["errors"].as_array().and_then(|e| e.first()) else {
                return Ok(body["data"].clone());
            };
            let code = error["extensions"]["code"]
                .as_str()
                .unwrap_or_else(|| panic!("an error without a code: {body:#}"))
                .to_owned();
            if code != "CONFLICT" {
                return Err(code);
            }
            let wait = 50 * (resend as u64 + 1);
            tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
        }
        panic!("{query} met CONFLICT {RESENDS} times");
    }

    /// A public comment without a script to reply to or act on.
    fn pick_public(&self, rng: &mut StdRng) -> Option<String> {
        let expected = self.expected.lock().unwrap();
        let free: Vec<&String> = expected
            .public
            .keys()
            .filter(|s| !expected.scripted.contains_key(*s))
            .collect();
        (!free.is_empty()).then(|| free[rng.gen_range(0..free.len())].clone())
    }

    /// Reports a comment as `reporter` through server `s`.
    async fn report(&self, s: usize, reporter: &str, slug: &str) {
        match self
            .send(s, reporter, REPORT, json!({ "d": self.d, "s": slug }))
            .await
        {
            Ok(data) => {
                assert_eq!(
                    data["reportComment"], true,
                    "a first report by this user counts"
                );
                *self
                    .expected
                    .lock()
                    .unwrap()
                    .reports
                    .entry(slug.to_owned())
                    .or_default() += 1;
            }
            Err(code) => self.refused("report", code),
        }
    }

    fn refused(&self, operation: &'static str, code: String) {
        self.expected
            .lock()
            .unwrap()
            .refused
            .push((operation, code));
    }

    /// Posts as `token` through server `s`: public for moderators, held for everyone else.
    async fn post(
        &self,
        s: usize,
        token: &str,
        parent: Option<String>,
        text: &str,
    ) -> Option<(String, String)> {
        let vars = json!({ "d": self.d, "p": parent, "t": text });
        match self.send(s, token, POST, vars).await {
            Ok(data) => {
                let posted = &data["postComment"];
                let slug = posted["slug"].as_str().unwrap().to_owned();
                let status = posted["status"].as_str().unwrap().to_owned();
                assert_eq!(
                    posted["parentSlug"].as_str(),
                    parent.as_deref(),
                    "{posted:#}"
                );
                let mut expected = self.expected.lock().unwrap();
                match status.as_str() {
                    "APPROVED" => {
                        assert!(expected.public.insert(slug.clone(), parent).is_none());
                    }
                    "PENDING" => {
                        assert!(expected.held.insert(slug.clone(), "PENDING").is_none());
                    }
                    other => panic!("a new post is {other}"),
                }
                Some((slug, status))
            }
            Err(code) => {
                self.refused("post", code);
                None
            }
        }
    }

    /// Approves a held comment through server `s`; whether it was published.
    async fn approve(&self, s: usize, moderator: &str, slug: &str) -> bool {
        match self
            .send(s, moderator, APPROVE, json!({ "d": self.d, "s": slug }))
            .await
        {
            Ok(data) => {
                let approved = &data["approveComment"];
                assert_eq!(approved["status"], "APPROVED", "{approved:#}");
                assert_eq!(approved["slug"], slug, "the slug is kept");
                let parent = approved["parentSlug"].as_str().map(str::to_owned);
                let mut expected = self.expected.lock().unwrap();
                expected.held.remove(slug);
                if let Some(was) = expected.public.insert(slug.to_owned(), parent.clone()) {
                    assert_eq!(was, parent, "approved twice, under different parents");
                }
                true
            }
            Err(code) => {
                self.refused("approve", code);
                false
            }
        }
    }

    /// Rejects a held comment through server `s`.
    async fn reject(&self, s: usize, moderator: &str, slug: &str) {
        let vars = json!({ "d": self.d, "s": slug, "r": "not today" });
        match self.send(s, moderator, REJECT, vars).await {
            Ok(data) => {
                assert_eq!(data["rejectComment"]["status"], "REJECTED");
                let mut expected = self.expected.lock().unwrap();
                // A rejection that overtook an approval of the same comment leaves it public.
                if !expected.public.contains_key(slug) {
                    expected.held.insert(slug.to_owned(), "REJECTED");
                }
            }
            Err(code) => self.refused("reject", code),
        }
    }

    /// Rejects or approves a public comment through server `s`; fails the test when refused.
    async fn moderate_public(&self, s: usize, moderator: &str, slug: &str, approve: bool) {
        let (query, vars) = if approve {
            (APPROVE, json!({ "d": self.d, "s": slug }))
        } else {
            (REJECT, json!({ "d": self.d, "s": slug, "r": "not today" }))
        };
        let data = self.send(s, moderator, query, vars).await.unwrap();
        let done = if approve {
            &data["approveComment"]
        } else {
            &data["rejectComment"]
        };
        assert_eq!(
            done["status"],
            if approve { "APPROVED" } else { "REJECTED" }
        );
    }

    /// Deletes a public comment through server `s`.
    async fn delete(&self, s: usize, moderator: &str, slug: &str) {
        match self
            .send(s, moderator, DELETE, json!({ "d": self.d, "s": slug }))
            .await
        {
            Ok(data) => {
                assert_eq!(data["deleteComment"]["deleted"], true);
                self.expected
                    .lock()
                    .unwrap()
                    .deleted
                    .insert(slug.to_owned());
            }
            Err(code) => self.refused("delete", code),
        }
    }
}

/// A comment as the full read shows it.
#[derive(Debug, Clone)]
struct Seen {
    parent: Option<String>,
    deleted: bool,
    status: String,
    reply_count: u64,
    report_count: Option<u64>,
    reason: Option<String>,
}

/// Walks every page of a connection read by `query` (its `after` the cursor) at `path`; returns
/// the nodes, and the `totalCount` each page gave.
async fn walk_pages(
    run: &Run<'_>,
    s: usize,
    token: Option<&str>,
    query: &str,
    vars: Value,
    path: &[&str],
) -> (Vec<Value>, BTreeSet<u64>, Value) {
    let mut nodes = Vec::new();
    let mut totals = BTreeSet::new();
    let mut after: Option<String> = None;
    let mut first = Value::Null;
    for _ in 0..1_000 {
        let mut v = vars.clone();
        v["after"] = json!(after);
        let data = run.send_as(s, token, query, v).await.unwrap();
        let connection = path.iter().fold(&data, |v, k| &v[*k]);
        nodes.extend(connection["nodes"].as_array().unwrap().iter().cloned());
        totals.insert(connection["totalCount"].as_u64().unwrap());
        if first.is_null() {
            first = data.clone();
        }
        if connection["pageInfo"]["hasNextPage"] != json!(true) {
            return (nodes, totals, first);
        }
        after = connection["pageInfo"]["endCursor"]
            .as_str()
            .map(str::to_owned);
    }
    panic!("paging never ended");
}

/// The case: writers at once through two servers, then every counter checked against a full
/// read, and the full read against the writes that succeeded, through both servers.
async fn counters_are_exact_under_concurrency_case(layout: Layout) {
    let mut settings = Settings::new(layout);
    settings.reports_to_hold = REPORTS_TO_HOLD;
    let config = settings.config(&unique_db("moderation_concurrency"));
    let servers = [
        Running::start(config.clone()).await,
        Running::start(config).await,
    ];
    let boss = moderator_token("boss", "Boss");
    let mut run = Run {
        servers: &servers,
        client: reqwest::Client::new(),
        d: String::new(),
        expected: Mutex::new(Expected::default()),
    };
    run.d = servers[0].discussion(&boss, layout).await;
    run.send(0, &boss, SET, json!({ "d": run.d, "m": "PRE" }))
        .await
        .unwrap();
    // A few public comments to start from, and those with a script.
    for i in 0..4 {
        run.post(i, &boss, None, &format!("seed {i}"))
            .await
            .unwrap();
    }
    let mut scripted = Vec::new();
    for (i, script) in Script::ALL
        .iter()
        .flat_map(|s| [*s; PER_SCRIPT])
        .enumerate()
    {
        let author = token(&format!("author{i}"), "Author");
        // Published by a moderator's approval, so that its author is not a moderator.
        let (slug, _) = run
            .post(i, &author, None, &format!("scripted {i}"))
            .await
            .unwrap();
        assert!(run.approve(i + 1, &boss, &slug).await);
        run.expected
            .lock()
            .unwrap()
            .scripted
            .insert(slug.clone(), script);
        scripted.push((slug, script));
    }

    let run = &run;
    let (to_moderate, moderated) = mpsc::unbounded_channel::<(usize, String)>();
    let moderated = tokio::sync::Mutex::new(moderated);
    let held_posts = std::sync::atomic::AtomicUsize::new(0);
    // Posters: even ones are moderators (their posts are public), odd ones users (held).
    let posters: Vec<_> = (0..POSTERS * 2)
        .map(|w| {
            let to_moderate = to_moderate.clone();
            let held_posts = &held_posts;
            async move {
                let mut rng = StdRng::seed_from_u64(w as u64);
                let poster = if w % 2 == 0 {
                    moderator_token(&format!("m{w}"), "Mod")
                } else {
                    token(&format!("u{w}"), "User")
                };
                for i in 0..POSTS {
                    let parent = if i % 3 == 0 {
                        None
                    } else {
                        run.pick_public(&mut rng)
                    };
                    let text = format!("w{w} p{i}");
                    if let Some((slug, status)) = run.post(w, &poster, parent, &text).await {
                        if status == "PENDING" {
                            let n = held_posts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            to_moderate.send((n, slug)).unwrap();
                        }
                    }
                }
            }
        })
        .collect();
    drop(to_moderate);
    // Moderators: take held comments as they come and do what each one's fate says; every
    // third one also deletes a public comment.
    let moderators = (0..MODERATORS * 2).map(|m| {
        let moderated = &moderated;
        async move {
            let mut rng = StdRng::seed_from_u64(100 + m as u64);
            let token = moderator_token(&format!("mod{m}"), "Moderator");
            let mut acted = 0;
            loop {
                let next = moderated.lock().await.recv().await;
                let Some((n, slug)) = next else { break };
                match Fate::of(n) {
                    Fate::Approve => {
                        run.approve(m, &token, &slug).await;
                    }
                    Fate::Reject => run.reject(m, &token, &slug).await,
                    Fate::RejectThenApprove => {
                        run.reject(m, &token, &slug).await;
                        run.approve(m + 1, &token, &slug).await;
                    }
                    Fate::ApproveTwiceAtOnce => {
                        let (a, b) = tokio::join!(
                            run.approve(m, &token, &slug),
                            run.approve(m + 1, &token, &slug)
                        );
                        assert!(a || b, "one of two approvals of {slug} succeeds");
                    }
                    Fate::Leave => {}
                }
                acted += 1;
                if acted % 3 == 0 {
                    if let Some(victim) = run.pick_public(&mut rng) {
                        run.delete(m, &token, &victim).await;
                    }
                }
            }
        }
    });
    // Reporters: each reports, in an order of its own, the scripted comments it is one of the
    // reporters of.
    let reporters = (0..REPORTERS).map(|r| {
        let scripted = &scripted;
        async move {
            let reporter = token(&format!("r{r}"), "Reporter");
            let mut mine: Vec<&String> = scripted
                .iter()
                .filter(|(_, script)| r < script.reporters())
                .map(|(slug, _)| slug)
                .collect();
            rand::seq::SliceRandom::shuffle(
                &mut mine[..],
                &mut StdRng::seed_from_u64(200 + r as u64),
            );
            for slug in mine {
                run.report(r, &reporter, slug).await;
            }
        }
    });
    // A moderator works through the scripts while the reports come in; approvals of comments
    // held by reports wait for the reports.
    let scripts = async {
        let moderator = moderator_token("scripts", "Scripts");
        let during = scripted.iter().enumerate().map(|(i, (slug, script))| {
            let moderator = &moderator;
            async move {
                match script {
                    Script::RejectedWhileReported => {
                        run.moderate_public(i, moderator, slug, false).await;
                    }
                    Script::RejectedThenApproved => {
                        run.moderate_public(i, moderator, slug, false).await;
                        run.moderate_public(i + 1, moderator, slug, true).await;
                    }
                    Script::DeletedWhileReported => run.delete(i, moderator, slug).await,
                    _ => {}
                }
            }
        });
        tokio::join!(
            futures::future::join_all(reporters),
            futures::future::join_all(during)
        );
        for (i, (slug, script)) in scripted.iter().enumerate() {
            if *script == Script::HeldThenApproved {
                run.moderate_public(i, &moderator, slug, true).await;
            }
        }
    };
    tokio::join!(
        futures::future::join_all(posters),
        futures::future::join_all(moderators),
        scripts
    );

    let expected = std::mem::take(&mut *run.expected.lock().unwrap());
    // Every refusal is one the operation may meet in this race: a reply or an approval under a
    // comment deleted meanwhile, a second approval of a comment the first one published.
    for (operation, code) in &expected.refused {
        let allowed: &[&str] = match *operation {
            "post" => &["COMMENT_DELETED"],
            "approve" => &["NOT_FOUND", "COMMENT_DELETED"],
            // A report of a comment held or rejected meanwhile (no longer visible to its
            // reporter), or deleted meanwhile.
            "report" => &["NOT_FOUND", "COMMENT_DELETED"],
            _ => &[],
        };
        assert!(
            allowed.contains(&code.as_str()),
            "{operation} refused with {code}: {:?}",
            expected.refused
        );
    }
    assert!(expected.held.len() >= POSTERS * POSTS / 5, "{expected:?}");
    assert!(!expected.deleted.is_empty());

    for s in 0..2 {
        // The chronological list, every page.
        let (nodes, totals, first) = walk_pages(
            run,
            s,
            Some(&boss),
            PAGE,
            json!({ "d": run.d }),
            &["discussion", "comments"],
        )
        .await;
        let mut seen: HashMap<String, Seen> = HashMap::new();
        for node in &nodes {
            let slug = node["slug"].as_str().unwrap().to_owned();
            let comment = Seen {
                parent: node["parentSlug"].as_str().map(str::to_owned),
                deleted: node["deleted"].as_bool().unwrap(),
                status: node["status"].as_str().unwrap().to_owned(),
                reply_count: node["replyCount"].as_u64().unwrap(),
                report_count: node["reportCount"].as_u64(),
                reason: node["moderationReason"].as_str().map(str::to_owned),
            };
            assert!(
                seen.insert(slug.clone(), comment).is_none(),
                "{slug} listed twice"
            );
        }
        let listed = nodes.len() as u64;
        assert_eq!(totals, BTreeSet::from([listed]), "totalCount on every page");
        assert_eq!(first["discussion"]["commentCount"], listed);
        // Counters against the full read.
        for (slug, comment) in &seen {
            let replies = seen
                .values()
                .filter(|c| c.parent.as_deref() == Some(slug.as_str()))
                .count() as u64;
            assert_eq!(comment.reply_count, replies, "replyCount of {slug}");
        }
        // The full read against what the writes imply.
        let listed: BTreeMap<String, Option<String>> = seen
            .iter()
            .map(|(slug, c)| (slug.clone(), c.parent.clone()))
            .collect();
        assert_eq!(
            listed, expected.public,
            "the public comments, through server {s}"
        );
        for (slug, comment) in &seen {
            assert_eq!(comment.deleted, expected.deleted.contains(slug), "{slug}");
            let script = expected.scripted.get(slug).copied();
            let status = match script {
                Some(Script::HeldByReports) => "PENDING",
                Some(Script::RejectedWhileReported) => "REJECTED",
                _ => "APPROVED",
            };
            assert_eq!(comment.status, status, "{slug} ({script:?})");
            let counted = expected.reports.get(slug).copied().unwrap_or(0);
            match script {
                Some(Script::HeldByReports) => {
                    assert!(counted >= REPORTS_TO_HOLD, "{slug}: {counted} reports");
                    assert_eq!(comment.report_count, Some(counted), "{slug}");
                    let reason = comment.reason.as_deref().unwrap_or_default();
                    assert!(reason.starts_with("reported by "), "{slug}: {reason}");
                }
                Some(Script::Reported) => {
                    assert_eq!(counted, 2, "{slug}");
                    assert_eq!(comment.report_count, Some(2), "{slug}");
                }
                Some(Script::RejectedWhileReported | Script::DeletedWhileReported) => {}
                // Approval dismissed the reports; the others had none.
                _ => assert_eq!(comment.report_count, Some(0), "{slug} ({script:?})"),
            }
        }
        // The queues, walked, against their sizes and against what the writes imply.
        let in_script = |wanted: Script| -> BTreeSet<String> {
            expected
                .scripted
                .iter()
                .filter(|(_, script)| **script == wanted)
                .map(|(slug, _)| slug.clone())
                .collect()
        };
        let held_in = |wanted: &str| -> BTreeSet<String> {
            expected
                .held
                .iter()
                .filter(|(_, status)| **status == wanted)
                .map(|(slug, _)| slug.clone())
                .collect()
        };
        let queues = [
            (
                "PENDING",
                &held_in("PENDING") | &in_script(Script::HeldByReports),
            ),
            (
                "REJECTED",
                &held_in("REJECTED") | &in_script(Script::RejectedWhileReported),
            ),
            ("REPORTED", in_script(Script::Reported)),
        ];
        for (queue, wanted) in &queues {
            let vars = json!({ "q": queue, "d": run.d });
            let (nodes, totals, _) =
                walk_pages(run, s, Some(&boss), QUEUE, vars, &["moderationQueue"]).await;
            let walked: Vec<String> = nodes
                .iter()
                .map(|n| n["slug"].as_str().unwrap().to_owned())
                .collect();
            let unique: BTreeSet<String> = walked.iter().cloned().collect();
            assert_eq!(
                unique.len(),
                walked.len(),
                "{queue}: a comment listed twice"
            );
            assert_eq!(totals, BTreeSet::from([walked.len() as u64]), "{queue}");
            let why = |slug: &String| {
                let scripted = expected.scripted.iter().find(|(s, _)| *s == slug);
                let held = expected.held.iter().find(|(s, _)| *s == slug);
                format!("{slug}: scripted {scripted:?}, held {held:?}")
            };
            let missing: Vec<String> = wanted.difference(&unique).map(why).collect();
            let extra: Vec<String> = unique.difference(wanted).map(why).collect();
            assert_eq!(
                &unique, wanted,
                "the {queue} queue, through server {s}: missing {missing:?}, extra {extra:?}"
            );
            let status = if *queue == "REPORTED" {
                "APPROVED"
            } else {
                queue
            };
            assert!(
                nodes.iter().all(|n| n["status"] == status),
                "{queue}: {nodes:?}"
            );
        }
        assert_eq!(
            first["discussion"]["pendingCount"],
            queues[0].1.len() as u64,
            "pendingCount is the size of the PENDING queue"
        );

        // The public sees the placeholders in place, without their text and author.
        let (public, totals, _) = walk_pages(
            run,
            s,
            None,
            PAGE,
            json!({ "d": run.d }),
            &["discussion", "comments"],
        )
        .await;
        assert_eq!(totals, BTreeSet::from([seen.len() as u64]));
        assert_eq!(public.len(), seen.len());
        for node in &public {
            let slug = node["slug"].as_str().unwrap();
            assert_eq!(
                node["status"].as_str(),
                Some(seen[slug].status.as_str()),
                "{slug}"
            );
            assert_eq!(node["reportCount"], Value::Null, "{slug}");
            assert_eq!(node["moderationReason"], Value::Null, "{slug}");
            if seen[slug].status != "APPROVED" && !seen[slug].deleted {
                assert_eq!(node["text"], Value::Null, "{slug}");
                assert_eq!(
                    node["author"],
                    json!({ "id": "", "name": "[hidden]" }),
                    "{slug}"
                );
            }
        }

        // Top-level comments, every page.
        let (threads, totals, _) = walk_pages(
            run,
            s,
            Some(&boss),
            THREADS,
            json!({ "d": run.d }),
            &["discussion", "threads"],
        )
        .await;
        let threads: BTreeSet<String> = threads
            .iter()
            .map(|n| n["slug"].as_str().unwrap().to_owned())
            .collect();
        let top: BTreeSet<String> = expected
            .public
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|(s, _)| s.clone())
            .collect();
        assert_eq!(totals, BTreeSet::from([top.len() as u64]));
        assert_eq!(threads, top);

        // Each comment with replies: its replies, every page.
        for (slug, comment) in seen.iter().filter(|(_, c)| c.reply_count > 0) {
            let (replies, totals, first) = walk_pages(
                run,
                s,
                Some(&boss),
                REPLIES,
                json!({ "d": run.d, "s": slug }),
                &["comment", "replies"],
            )
            .await;
            let replies: BTreeSet<String> = replies
                .iter()
                .map(|n| n["slug"].as_str().unwrap().to_owned())
                .collect();
            let children: BTreeSet<String> = seen
                .iter()
                .filter(|(_, c)| c.parent.as_deref() == Some(slug.as_str()))
                .map(|(s, _)| s.clone())
                .collect();
            assert_eq!(replies, children, "replies of {slug}");
            assert_eq!(totals, BTreeSet::from([comment.reply_count]));
            assert_eq!(first["comment"]["replyCount"], comment.reply_count);
        }

        // Held comments: absent from the lists, shown to a moderator by direct link.
        for (slug, status) in &expected.held {
            assert!(!seen.contains_key(slug), "held {slug} is listed");
            let data = run
                .send(s, &boss, LINK, json!({ "d": run.d, "s": slug }))
                .await
                .unwrap();
            assert_eq!(data["comment"]["status"], *status, "{slug}");
        }
    }
    let [a, b] = servers;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_exact_under_concurrency_per_comment() {
    counters_are_exact_under_concurrency_case(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_exact_under_concurrency_embedded() {
    counters_are_exact_under_concurrency_case(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_exact_under_concurrency_bucketed() {
    counters_are_exact_under_concurrency_case(Layout::Bucketed).await;
}
