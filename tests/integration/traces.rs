//! Traces over OTLP: the real binary, configured with the standard OTEL_* variables, sends its
//! spans to a collector running in the test, which decodes them with the protocol's own
//! messages. A request joins the caller's trace (`traceparent`); the GraphQL parse, validation
//! and operation, the store calls and dataloader batches, and the driver's database commands
//! nest under it; the spans still waiting are sent when the server stops; a collector that is
//! down costs one warning; bad settings stop the server at start.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::live::{sse_events, POSTED};
use crate::support::{
    dump, metric_from, server_uri, token, unique_db, Collector, ReceivedSpan, SECRET,
};

/// Every variable the server reads that the test environment could have set.
const INHERITED: &[&str] = &[
    "THREADQL_LOG",
    "THREADQL_LOG_FORMAT",
    "THREADQL_JWT_PUBLIC_KEY",
    "THREADQL_JWT_JWKS",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_SDK_DISABLED",
    "OTEL_BSP_SCHEDULE_DELAY",
];

/// `threadql serve` on a loopback port over a fresh database, with `env`.
fn command(label: &str, env: &[(&str, String)]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"));
    command.arg("serve");
    for name in INHERITED {
        command.env_remove(name);
    }
    command
        .env("THREADQL_LISTEN", "127.0.0.1:0")
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_DATABASE", unique_db(label))
        .env("THREADQL_JWT_SECRET", SECRET)
        .env("THREADQL_RATE_LIMIT", "off")
        .env("THREADQL_RATE_LIMIT_ANON", "off")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// A server process, its standard error read as it comes.
struct Served {
    child: tokio::process::Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Served {
    /// Starts the server and waits until it listens.
    async fn start(label: &str, env: &[(&str, String)]) -> Served {
        let mut child = command(label, env).spawn().expect("spawn threadql serve");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr"));
        let mut seen = String::new();
        let addr = loop {
            let mut line = String::new();
            let n = lines.read_line(&mut line).await.expect("read stderr");
            assert!(n > 0, "serve stopped before it listened:\n{seen}");
            seen.push_str(&line);
            if line.contains("threadql listening") {
                let addr = line
                    .split("addr=")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .expect("the address in the listening line");
                break addr.parse().expect("an address");
            }
        };
        let stderr = Arc::new(Mutex::new(seen));
        let keep = stderr.clone();
        let reader = tokio::spawn(async move {
            let mut line = String::new();
            while lines.read_line(&mut line).await.is_ok_and(|n| n > 0) {
                keep.lock().expect("lock").push_str(&line);
                line.clear();
            }
        });
        Served {
            child,
            addr,
            stderr,
            reader,
        }
    }

    /// What it wrote to standard error so far.
    fn stderr(&self) -> String {
        self.stderr.lock().expect("lock").clone()
    }

    /// Runs a GraphQL request as a signed-in user, with a `traceparent` when given; fails the
    /// test unless it succeeds.
    async fn gql(&self, traceparent: Option<&str>, query: &str, variables: Value) -> Value {
        let mut request = reqwest::Client::new()
            .post(format!("http://{}/graphql", self.addr))
            .bearer_auth(token("u1", "Ada"))
            .json(&json!({ "query": query, "variables": variables }));
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let response = request.send().await.expect("send");
        let status = response.status().as_u16();
        let body: Value = response.json().await.expect("json");
        assert!(
            status == 200 && body.get("errors").is_none(),
            "{status} {body:#}"
        );
        body["data"].clone()
    }

    /// Stops it with SIGTERM; returns everything it wrote to standard error once it has exited
    /// (successfully: the test fails otherwise).
    async fn stop(mut self) -> String {
        let pid = self.child.id().expect("pid");
        kill(
            Pid::from_raw(i32::try_from(pid).expect("pid")),
            Signal::SIGTERM,
        )
        .expect("SIGTERM");
        let status = self.child.wait().await.expect("wait");
        let _ = (&mut self.reader).await;
        let stderr = self.stderr();
        assert!(status.success(), "{status}:\n{stderr}");
        stderr
    }
}

/// The settings that send traces to `collector` every tenth of a second.
fn exporting_to(collector: &Collector) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ]
}

const TREE: &str = "query Tree($d: ID!) { discussion(id: $d) { title threads(first: 10) { nodes { slug replies(first: 10) { nodes { slug replies(first: 10) { nodes { slug text } } } } } } } }";
const POST_AS: &str = "mutation Post($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";

/// Creates a discussion and a thread three comments deep; the first post carries
/// `traceparent`. Returns the discussion's id.
async fn thread(server: &Served, traceparent: &str) -> String {
    let data = server
        .gql(
            None,
            "mutation NewDiscussion { createDiscussion(input: {title: \"traced\"}) { id } }",
            json!({}),
        )
        .await;
    let d = data["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut parent: Option<String> = None;
    for (n, text) in ["top", "reply", "reply to the reply"].iter().enumerate() {
        let caller = (n == 0).then_some(traceparent);
        let data = server
            .gql(caller, POST_AS, json!({ "d": d, "p": parent, "t": text }))
            .await;
        parent = data["postComment"]["slug"].as_str().map(str::to_owned);
    }
    d
}

/// The spans of one trace, by id, with their request span.
struct Trace<'a> {
    spans: Vec<&'a ReceivedSpan>,
    by_id: HashMap<&'a str, &'a ReceivedSpan>,
    request: &'a ReceivedSpan,
}

impl<'a> Trace<'a> {
    fn of(all: &'a [ReceivedSpan], trace_id: &str) -> Trace<'a> {
        let spans: Vec<&ReceivedSpan> = all.iter().filter(|s| s.trace_id == trace_id).collect();
        let by_id = spans.iter().map(|s| (s.span_id.as_str(), *s)).collect();
        let requests: Vec<&&ReceivedSpan> =
            spans.iter().filter(|s| s.name == "POST /graphql").collect();
        assert_eq!(
            requests.len(),
            1,
            "one request span in {trace_id}:\n{}",
            dump(all)
        );
        let request = *requests[0];
        Trace {
            spans,
            by_id,
            request,
        }
    }

    /// The span's ancestors in the trace, nearest first.
    fn ancestors(&self, span: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
        let mut out = Vec::new();
        let mut at = span.parent_id.as_str();
        while let Some(parent) = self.by_id.get(at) {
            out.push(*parent);
            at = parent.parent_id.as_str();
        }
        out
    }

    fn named(&self, name: &str) -> Vec<&'a ReceivedSpan> {
        self.spans
            .iter()
            .copied()
            .filter(|s| s.name == name)
            .collect()
    }

    fn one(&self, name: &str) -> &'a ReceivedSpan {
        let found = self.named(name);
        assert_eq!(found.len(), 1, "one {name} span in:\n{}", self.dump());
        found[0]
    }

    fn db(&self) -> Vec<&'a ReceivedSpan> {
        self.spans
            .iter()
            .copied()
            .filter(|s| s.scope == "mongodb")
            .collect()
    }

    fn dump(&self) -> String {
        dump(&self.spans.iter().map(|s| (*s).clone()).collect::<Vec<_>>())
    }

    /// Checks what every traced request has: a server span continuing `caller` (or starting
    /// the trace when `None`), every span of the trace under it, the parse span under it, and
    /// the operation (with the validation under it) named as OpenTelemetry's GraphQL
    /// conventions say; database spans under a store span under the operation. Returns the
    /// operation span.
    fn check(&self, caller: Option<&str>, ty: &str, name: &str) -> &'a ReceivedSpan {
        let request = self.request;
        assert_eq!(request.parent_id, caller.unwrap_or(""), "{}", self.dump());
        assert_eq!(request.kind, 2, "a server span");
        assert_eq!(request.scope, "threadql");
        assert_eq!(request.attr("http.request.method"), Some("POST"));
        assert_eq!(request.attr("url.path"), Some("/graphql"));
        assert_eq!(request.attr("http.route"), Some("/graphql"));
        assert_eq!(request.attr("http.response.status_code"), Some("200"));
        assert!(!request.error);
        for span in &self.spans {
            if span.span_id != request.span_id {
                assert!(
                    self.ancestors(span)
                        .iter()
                        .any(|a| a.span_id == request.span_id),
                    "{} is not under the request span:\n{}",
                    span.name,
                    self.dump()
                );
            }
            assert!(
                span.scope == "threadql" || span.scope == "mongodb",
                "only threadql's spans and the driver's: {span:?}"
            );
        }
        assert_eq!(self.one("graphql.parse").parent_id, request.span_id);
        let operation = self.one(&format!("{ty} {name}"));
        assert_eq!(operation.parent_id, request.span_id);
        assert_eq!(operation.attr("graphql.operation.type"), Some(ty));
        assert_eq!(operation.attr("graphql.operation.name"), Some(name));
        assert_eq!(self.one("graphql.validate").parent_id, operation.span_id);
        let db = self.db();
        assert!(!db.is_empty(), "database spans in:\n{}", self.dump());
        for span in db {
            assert_eq!(span.attr("db.system"), Some("mongodb"), "{span:?}");
            let above = self.ancestors(span);
            let store = above.iter().position(|a| a.scope == "threadql");
            let store = store.map(|at| above[at]);
            assert!(
                store.is_some_and(|s| s.name.starts_with("store.")),
                "{} is not under a store span:\n{}",
                span.name,
                self.dump()
            );
            assert!(above.iter().any(|a| a.span_id == operation.span_id));
        }
        operation
    }

    /// The `db.operation.name`s of the driver's operation spans under `span`.
    fn db_operations_under(&self, span: &ReceivedSpan) -> Vec<String> {
        self.db()
            .into_iter()
            .filter(|db| self.ancestors(db).iter().any(|a| a.span_id == span.span_id))
            .filter_map(|db| db.attr("db.operation.name").map(str::to_owned))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_and_a_tree_join_the_callers_traces_with_every_level_under_them() {
    let collector = Collector::http().await;
    let server = Served::start("traces_tree", &exporting_to(&collector)).await;
    let (post_trace, post_caller) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let (tree_trace, tree_caller) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let d = thread(&server, &format!("00-{post_trace}-{post_caller}-01")).await;
    let tree = server
        .gql(
            Some(&format!("00-{tree_trace}-{tree_caller}-01")),
            TREE,
            json!({ "d": d }),
        )
        .await;
    let deepest = &tree["discussion"]["threads"]["nodes"][0]["replies"]["nodes"][0]["replies"]
        ["nodes"][0]["text"];
    assert_eq!(deepest, "reply to the reply");
    // A `traceparent` that does not parse, and one with the invalid all-zero trace id, are
    // ignored: each request starts a trace of its own.
    for (name, traceparent) in [
        ("Garbled", "00-not-a-trace-01"),
        (
            "ZeroTrace",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ),
    ] {
        let query = format!("query {name} {{ discussions(first: 1) {{ totalCount }} }}");
        server.gql(Some(traceparent), &query, json!({})).await;
    }

    let request_of = |spans: &[ReceivedSpan], trace: &str| {
        spans
            .iter()
            .any(|s| s.trace_id == trace && s.name == "POST /graphql")
    };
    let spans = collector
        .wait_for(
            "both callers' request spans and the garbled ones'",
            |spans| {
                request_of(spans, post_trace)
                    && request_of(spans, tree_trace)
                    && ["query Garbled", "query ZeroTrace"].iter().all(|op| {
                        spans
                            .iter()
                            .any(|s| &s.name == op && request_of(spans, &s.trace_id))
                    })
            },
        )
        .await;
    assert!(
        spans.iter().all(|s| s.service == "threadql"),
        "{}",
        dump(&spans)
    );

    // The post: its write (in a task of its own) stays in the trace, under `store.post`.
    let post = Trace::of(&spans, post_trace);
    post.check(Some(post_caller), "mutation", "Post");
    let written = post.db_operations_under(post.one("store.post"));
    assert!(
        written.iter().any(|op| op == "insert"),
        "the comment's insert under store.post: {written:?}\n{}",
        post.dump()
    );

    // The tree: the discussion's dataloader batch and the threads read, each with its
    // database commands; no span per field.
    let tree = Trace::of(&spans, tree_trace);
    let operation = tree.check(Some(tree_caller), "query", "Tree");
    let discussions = tree.one("store.discussions");
    assert_eq!(discussions.attr("store.keys"), Some("1"));
    assert!(
        tree.db_operations_under(discussions)
            .iter()
            .any(|op| op == "find"),
        "{}",
        tree.dump()
    );
    let threads = tree.named("store.threads");
    assert!(!threads.is_empty(), "{}", tree.dump());
    assert!(threads
        .iter()
        .all(|t| !tree.db_operations_under(t).is_empty()));
    let threadql_spans = tree.spans.iter().filter(|s| s.scope == "threadql").count();
    assert!(
        threadql_spans < 15,
        "a handful of spans, not one per field: {}",
        tree.dump()
    );
    for span in tree.named("store.replies") {
        assert!(tree
            .ancestors(span)
            .iter()
            .any(|a| a.span_id == operation.span_id));
    }

    for name in ["Garbled", "ZeroTrace"] {
        let op = spans
            .iter()
            .find(|s| s.name == format!("query {name}"))
            .expect("the operation span");
        assert_ne!(op.trace_id, post_trace);
        assert_ne!(op.trace_id, tree_trace);
        assert_ne!(op.trace_id, "0".repeat(32));
        Trace::of(&spans, &op.trace_id).check(None, "query", name);
    }

    let stderr = server.stop().await;
    // The debug spans reach the collector, not the log (THREADQL_LOG is `info`).
    for quiet in [
        "graphql.parse",
        "graphql.validate",
        "store.threads",
        "store.post",
    ] {
        assert!(!stderr.contains(quiet), "{quiet} in the log:\n{stderr}");
    }
    assert!(stderr.contains("traces are sent over OTLP"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_delivery_is_a_trace_of_its_own_and_the_change_stream_is_not_traced() {
    let collector = Collector::http().await;
    let server = Served::start("traces_live", &exporting_to(&collector)).await;
    let data = server
        .gql(
            None,
            "mutation { createDiscussion(input: {title: \"live\"}) { id } }",
            json!({}),
        )
        .await;
    let d = data["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut live = reqwest::Client::new()
        .post(format!("http://{}/graphql", server.addr))
        .header("Accept", "text/event-stream")
        .json(&json!({ "query": POSTED, "variables": { "d": d } }))
        .send()
        .await
        .expect("subscribe");
    assert_eq!(live.status(), 200);
    let metrics = format!("http://{}/metrics", server.addr);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while metric_from(&metrics, "threadql_live_subscribers").await != 1 {
        assert!(tokio::time::Instant::now() < deadline, "no subscriber");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let posted = server
        .gql(None, POST_AS, json!({ "d": d, "p": null, "t": "live" }))
        .await;
    let events = sse_events(&mut live, 1).await;
    let event: Value = serde_json::from_str(&events[0].1).expect("json");
    assert_eq!(
        event["data"]["commentPosted"]["slug"],
        posted["postComment"]["slug"]
    );

    let spans = collector
        .wait_for("the delivery's span", |spans| {
            spans.iter().any(|s| s.name == "live.deliver")
        })
        .await;
    let deliver = spans
        .iter()
        .find(|s| s.name == "live.deliver")
        .expect("live.deliver");
    assert_eq!(deliver.parent_id, "", "a trace of its own");
    assert_eq!(deliver.attr("changes"), Some("1"));
    let trace: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id == deliver.trace_id)
        .collect();
    assert!(
        trace.iter().any(|s| s.scope == "mongodb"),
        "its reads: {}",
        dump(&spans)
    );
    assert!(trace
        .iter()
        .all(|s| s.scope == "mongodb" || s.span_id == deliver.span_id));
    // The stream waited for the post with a getMore (and opened with an aggregate): neither
    // is traced, nor is the subscription's own run (a task of its own, for as long as the
    // client stays), nor are the scrapes of /metrics.
    for span in &spans {
        let operation = span.attr("db.operation.name");
        assert!(
            operation != Some("getMore")
                && !(span.parent_id.is_empty() && operation == Some("aggregate")),
            "{span:?}"
        );
        assert!(span.name != "GET /metrics", "{span:?}");
        if span.scope == "threadql" && span.name != "live.deliver" {
            let trace = Trace::of(&spans, &span.trace_id);
            assert!(trace.request.parent_id.is_empty());
        }
    }
    drop(live);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spans_still_waiting_are_sent_when_the_server_stops() {
    let collector = Collector::http().await;
    // Batches every ten minutes: only the stop can send these spans.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()),
        ("OTEL_BSP_SCHEDULE_DELAY", "600000".to_owned()),
    ];
    let server = Served::start("traces_flush", &env).await;
    let caller = "00-11111111111111111111111111111111-2222222222222222-01";
    server
        .gql(
            Some(caller),
            "query Last { discussions(first: 5) { totalCount nodes { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        collector.exports(),
        0,
        "nothing is sent before the batch is due"
    );
    server.stop().await;
    let spans = collector.spans();
    let trace = Trace::of(&spans, "11111111111111111111111111111111");
    trace.check(Some("2222222222222222"), "query", "Last");
    assert_eq!(
        trace.named("store.discussionList").len(),
        1,
        "{}",
        trace.dump()
    );
    assert_eq!(
        trace.named("store.discussionCount").len(),
        1,
        "{}",
        trace.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_refuses_connections_costs_one_warning_and_no_request() {
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        listener.local_addr().expect("addr")
    };
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{closed}")),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".to_owned()),
    ];
    let server = Served::start("traces_refused", &env).await;
    let query = "query Probe { discussions(first: 1) { totalCount } }";
    server.gql(None, query, json!({})).await;
    // The first batch fails (a generous bound: it is due in a twentieth of a second).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !server.stderr().contains("cannot send traces") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no warning:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Later spans fail to go out too (at the latest when the server stops, which sends what
    // waits), and are not reported again.
    for _ in 0..5 {
        server.gql(None, query, json!({})).await;
    }
    let stderr = server.stop().await;
    assert_eq!(
        stderr.matches("cannot send traces").count(),
        1,
        "one warning:\n{stderr}"
    );
    assert!(!stderr.contains("the last spans"), "{stderr}");
    assert!(
        stderr.contains(&closed.to_string()),
        "the endpoint is named:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_go_over_grpc_with_the_service_name_the_variables_give() {
    let collector = Collector::grpc().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        ("OTEL_SERVICE_NAME", "comments-grpc".to_owned()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=ignored,deployment.environment=test".to_owned(),
        ),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    let server = Served::start("traces_grpc", &env).await;
    let (trace_id, caller) = ("33333333333333333333333333333333", "4444444444444444");
    server
        .gql(
            Some(&format!("00-{trace_id}-{caller}-01")),
            "query Listed { discussions(first: 3) { nodes { id } } }",
            json!({}),
        )
        .await;
    let spans = collector
        .wait_for("the request span over gRPC", |spans| {
            spans
                .iter()
                .any(|s| s.trace_id == trace_id && s.name == "POST /graphql")
        })
        .await;
    Trace::of(&spans, trace_id).check(Some(caller), "query", "Listed");
    assert!(
        spans.iter().all(|s| s.service == "comments-grpc"),
        "{}",
        dump(&spans)
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_trace_settings_stop_the_server_at_start_naming_the_variable() {
    let endpoint = (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://127.0.0.1:4318".to_owned(),
    );
    let cases: [(Vec<(&str, String)>, &str); 6] = [
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318".to_owned())],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://".to_owned())],
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (
            vec![(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "collector:4318/v1/traces".to_owned(),
            )],
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
        (
            vec![
                endpoint.clone(),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".to_owned()),
            ],
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        (
            vec![
                endpoint.clone(),
                ("OTEL_TRACES_SAMPLER", "sometimes".to_owned()),
            ],
            "OTEL_TRACES_SAMPLER",
        ),
        (
            vec![
                endpoint.clone(),
                ("OTEL_EXPORTER_OTLP_HEADERS", "api-key".to_owned()),
            ],
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
    ];
    for (env, variable) in cases {
        let out = command("traces_bad", &env)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn")
            .wait_with_output()
            .await
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{env:?} started:\n{stderr}");
        assert!(stderr.contains(variable), "{env:?}:\n{stderr}");
        assert!(!stderr.contains("threadql listening"), "{stderr}");
    }
}
