//! What operators see, over real sockets: `/metrics` after a known sequence of requests (exact
//! counter increments, consistent histograms, the cap on operation names, the database, the
//! pool, the change feed, rate limits and the process), request ids in `x-request-id`, and the
//! log lines of a request (spawning the binary with JSON logs and reading its stderr).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use threadql::config::RateLimit;
use threadql::domain::Layout;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::live::{await_subscribers, sse_events, Protocol, Ws, POSTED};
use crate::support::{
    one_shot_client, series, server_config, server_uri, token, unique_db, Running, Scrape, SECRET,
};

const REQUESTS: &str = "threadql_requests_total";
const DURATIONS: &str = "threadql_request_duration_seconds";
const ERRORS: &str = "threadql_errors_total";
const LIMITED: &str = "threadql_rate_limited_total";

/// Posts a GraphQL body (one operation or a batch) with optional token and request id; returns
/// the status, the `x-request-id` answered and the body.
async fn send_with_request_id(
    server: &Running,
    token: Option<&str>,
    body: Value,
    request_id: Option<&str>,
) -> (u16, String, Value) {
    let mut request = one_shot_client().post(server.url("/graphql")).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(id) = request_id {
        request = request.header("x-request-id", id);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (status, id, response.json().await.unwrap())
}

/// How much each series of `names` grew between two scrapes (series that grew only).
fn growth(before: &Scrape, after: &Scrape, names: &[&str]) -> BTreeMap<String, f64> {
    let mut grown = BTreeMap::new();
    for name in names {
        for (series, value) in after.family(name) {
            let was = before.family(name).into_iter().find(|(s, _)| *s == series);
            let delta = value - was.map_or(0.0, |(_, v)| v);
            if delta != 0.0 {
                grown.insert(series, delta);
            }
        }
    }
    grown
}

/// A series by name and labels, and how much it should grow.
type Growth<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

fn expected(rows: &[Growth<'_>]) -> BTreeMap<String, f64> {
    rows.iter()
        .map(|(name, labels, n)| (series(name, labels), *n))
        .collect()
}

/// Every histogram on the page: buckets never decrease, `+Inf` is the count, and a histogram
/// that counted something has a positive sum.
fn check_histograms(scrape: &Scrape) -> usize {
    let mut buckets: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for line in scrape.text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = series.split_once("_bucket{") else {
            continue;
        };
        let (labels, le) = labels.rsplit_once("le=\"").unwrap();
        let le = le.trim_end_matches("\"}").to_owned();
        let base = match labels.trim_end_matches(',') {
            "" => name.to_owned(),
            labels => format!("{name}{{{labels}}}"),
        };
        buckets
            .entry(base)
            .or_default()
            .push((le, value.parse().unwrap()));
    }
    for (base, series) in &buckets {
        assert!(
            series.windows(2).all(|w| w[0].1 <= w[1].1),
            "{base}: {series:?}"
        );
        let (last_le, inf) = series.last().unwrap();
        assert_eq!(last_le, "+Inf", "{base}");
        let (name, labels) = base.split_once('{').unwrap_or((base, ""));
        let count_key = match labels {
            "" => format!("{name}_count"),
            labels => format!("{name}_count{{{labels}"),
        };
        let sum_key = count_key.replacen("_count", "_sum", 1);
        let line_value = |key: &str| {
            scrape
                .text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key} ")))
                .unwrap_or_else(|| panic!("no {key}"))
                .parse::<f64>()
                .unwrap()
        };
        assert_eq!(line_value(&count_key), *inf, "{base}");
        let sum = line_value(&sum_key);
        assert!(sum >= 0.0 && (*inf == 0.0 || sum > 0.0), "{base}: {sum}");
    }
    buckets.len()
}

/// A known sequence of requests moves the request, error, rate-limit and database metrics by
/// exactly what it should; the cap on operation names groups later names under `other`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_a_known_sequence_of_requests() {
    let mut config = server_config("observe_metrics");
    // Without the read cache no change feed runs beside the requests: every command and pool
    // connection counted below is theirs.
    config.cache_bytes = 0;
    config.metrics_operations = 2;
    config.rate_limit_anon = RateLimit::Every {
        count: 2,
        per: Duration::from_secs(600),
    };
    let pool_size = config.db_pool_size;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let before = Scrape::of(&server).await;

    // A named mutation (it takes one of the two named series).
    let (status, _, body) = send_with_request_id(
        &server,
        Some(&ada),
        json!({ "query": "mutation CreateIt { createDiscussion(input: {title: \"observed\"}) { id } }" }),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let d = body["data"]["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = |name: &str| json!({ "query": format!("query {name}($d: ID!) {{ discussion(id: $d) {{ id title }} }}"), "variables": { "d": d } });
    // A named query (the other named series), an anonymous one, two named past the cap, and
    // the first named one again.
    for body in [
        read("Q1"),
        json!({ "query": "query($d: ID!) { discussion(id: $d) { id } }", "variables": { "d": d } }),
        read("Q2"),
        read("Q3"),
        read("Q1"),
    ] {
        let (status, _, answer) = send_with_request_id(&server, Some(&ada), body, None).await;
        assert!(status == 200 && answer.get("errors").is_none(), "{answer}");
    }
    // An error with a known code (a page larger than the largest), named past the cap.
    let (status, _, answer) = send_with_request_id(
        &server,
        Some(&ada),
        json!({ "query": "query Bad($d: ID!) { discussion(id: $d) { comments(first: 1000) { totalCount } } }", "variables": { "d": d } }),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{answer}"
    );
    // A batch.
    let (status, _, answer) = send_with_request_id(
        &server,
        Some(&ada),
        json!([{ "query": "{ __typename }" }, { "query": "{ __typename }" }]),
        None,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    // Two anonymous requests pass; the third is over the client's allowance.
    for _ in 0..2 {
        let (status, _, answer) =
            send_with_request_id(&server, None, json!({ "query": "{ __typename }" }), None).await;
        assert_eq!(status, 200, "{answer}");
    }
    let (status, _, answer) =
        send_with_request_id(&server, None, json!({ "query": "{ __typename }" }), None).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["errors"][0]["extensions"]["code"], "RATE_LIMITED");

    let after = Scrape::of(&server).await;
    let ok = |t: &'static str| -> [(&'static str, &'static str); 2] {
        [("operation_type", t), ("status", "ok")]
    };
    assert_eq!(
        growth(&before, &after, &[REQUESTS, ERRORS, LIMITED]),
        expected(&[
            (REQUESTS, &ok("mutation"), 1.0),
            (REQUESTS, &ok("query"), 7.0),
            (
                REQUESTS,
                &[("operation_type", "query"), ("status", "error")],
                1.0
            ),
            (REQUESTS, &ok("batch"), 1.0),
            (
                REQUESTS,
                &[("operation_type", "unknown"), ("status", "refused")],
                1.0
            ),
            (ERRORS, &[("code", "BAD_USER_INPUT")], 1.0),
            (ERRORS, &[("code", "RATE_LIMITED")], 1.0),
            (LIMITED, &[("limit", "anonymous")], 1.0),
        ])
    );
    let count = |of_type: &str, operation: &str| {
        after.value(
            &format!("{DURATIONS}_count"),
            &[("operation_type", of_type), ("operation", operation)],
        ) - before.value(
            &format!("{DURATIONS}_count"),
            &[("operation_type", of_type), ("operation", operation)],
        )
    };
    assert_eq!(count("mutation", "CreateIt"), 1.0);
    assert_eq!(count("query", "Q1"), 2.0);
    assert_eq!(count("query", "anonymous"), 3.0);
    assert_eq!(
        count("query", "other"),
        3.0,
        "Q2, Q3 and Bad are past the cap"
    );
    assert_eq!(count("query", "Q2"), 0.0);
    assert_eq!(count("batch", "anonymous"), 1.0);
    assert_eq!(count("unknown", "anonymous"), 1.0);
    assert!(!after.text.contains("operation=\"Q2\""), "{}", after.text);

    // Every database command the store awaited was timed under its name: as many durations as
    // commands of each name, and the reads went to the database.
    let commands = growth(&before, &after, &["threadql_db_commands_total"]);
    assert!(
        commands.contains_key("threadql_db_commands_total{command=\"find\"}"),
        "{commands:?}"
    );
    for (series, sent) in &commands {
        let name = series
            .trim_start_matches("threadql_db_commands_total{command=\"")
            .trim_end_matches("\"}");
        if name == "other" {
            continue;
        }
        let labels = [("command", name)];
        let timed = after.value("threadql_db_command_duration_seconds_count", &labels)
            - before.value("threadql_db_command_duration_seconds_count", &labels);
        assert_eq!(timed, *sent, "{name}");
    }
    // One checkout per command, each with its wait counted; the pool's size as configured.
    let all_commands: f64 = after
        .family("threadql_db_commands_total")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(
        after.value("threadql_db_pool_wait_seconds_count", &[]),
        all_commands
    );
    assert_eq!(
        after.value("threadql_db_pool_connections_max", &[]),
        f64::from(pool_size)
    );
    // Connections go back to the pool once the requests are done.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let in_use = Scrape::of(&server)
            .await
            .value("threadql_db_pool_connections_in_use", &[]);
        if in_use == 0.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{in_use} in use");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Histograms are consistent (requests, commands, pool waits at least).
    assert!(check_histograms(&after) >= 3, "{}", after.text);
    // The process metrics are there and plausible.
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(after.value(name, &[]) > 0.0, "{name}: {}", after.text);
    }
    assert!(after.value("process_open_fds", &[]) <= after.value("process_max_fds", &[]));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = after.value("process_start_time_seconds", &[]);
    assert!(started <= now && started > now - 86_400.0, "{started}");
    // The metrics every page had before are still there.
    for name in [
        "threadql_connections_open",
        "threadql_live_subscribers",
        "threadql_change_streams_opened_total",
    ] {
        assert!(after.get(name, &[]).is_some(), "{name}");
    }
    server.shutdown().await;
}

/// Live updates: change events are counted with their lag, streams count as requests when they
/// start, errors inside streams are counted by code, and the per-author and per-socket limits
/// are counted apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_change_events_streams_and_limits() {
    let mut config = server_config("observe_live");
    config.rate_limit = RateLimit::Every {
        count: 1,
        per: Duration::from_secs(600),
    };
    config.max_ws_operations = 1;
    let server = Running::start(config).await;
    let owner = token("u0", "Owner");
    let d = server.discussion(&owner, Layout::PerComment).await;
    let before = Scrape::of(&server).await;
    let sse = |body: Value| {
        reqwest::Client::new()
            .post(server.url("/graphql"))
            .header("Accept", "text/event-stream")
            .json(&body)
            .send()
    };
    let mut live = sse(json!({ "query": POSTED, "variables": { "d": d } }))
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    await_subscribers(&server, 1).await;
    for (n, author) in ["u1", "u2", "u3"].into_iter().enumerate() {
        server
            .post(&token(author, author), &d, None, &format!("post {n}"))
            .await;
    }
    let events = sse_events(&mut live, 3).await;
    assert!(events.iter().all(|(e, _)| e == "next"), "{events:?}");
    // A second post by an author inside the window is over the author's allowance.
    let (status, _, answer) = send_with_request_id(
        &server,
        Some(&token("u1", "u1")),
        json!({ "query": "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"again\"}) { slug } }", "variables": { "d": d } }),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer["errors"][0]["extensions"]["code"], "RATE_LIMITED");
    // An error inside a stream is counted when the stream sends it.
    let mut bad = sse(json!({ "query": "query($d: ID!) { discussion(id: $d) { comments(first: 1000) { totalCount } } }", "variables": { "d": d } }))
        .await
        .unwrap();
    let events = sse_events(&mut bad, 2).await;
    assert!(events[0].1.contains("BAD_USER_INPUT"), "{events:?}");
    // A WebSocket that runs one operation at most refuses the second.
    let mut ws = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    ws.start("1", POSTED, json!({ "d": d })).await;
    ws.start("2", POSTED, json!({ "d": d })).await;
    let refused = ws.message().await;
    assert_eq!(refused["id"], "2", "{refused}");
    assert!(refused.to_string().contains("RATE_LIMITED"), "{refused}");

    let after = Scrape::of(&server).await;
    let ok = |t: &'static str| -> [(&'static str, &'static str); 2] {
        [("operation_type", t), ("status", "ok")]
    };
    assert_eq!(
        growth(
            &before,
            &after,
            &[REQUESTS, ERRORS, LIMITED, "threadql_change_events_total"]
        ),
        expected(&[
            (REQUESTS, &ok("sse"), 2.0),
            (REQUESTS, &ok("mutation"), 3.0),
            (
                REQUESTS,
                &[("operation_type", "mutation"), ("status", "error")],
                1.0
            ),
            (REQUESTS, &ok("websocket"), 1.0),
            (ERRORS, &[("code", "BAD_USER_INPUT")], 1.0),
            (ERRORS, &[("code", "RATE_LIMITED")], 2.0),
            (LIMITED, &[("limit", "author")], 1.0),
            (LIMITED, &[("limit", "socket_operations")], 1.0),
            ("threadql_change_events_total", &[], 3.0),
        ])
    );
    // Same machine, same clock: the last event was read well within a minute of its time.
    let lag = after
        .get("threadql_change_stream_lag_seconds", &[])
        .expect("a lag once an event was read");
    assert!((-1.0..60.0).contains(&lag), "{lag}");
    check_histograms(&after);
    drop(live);
    drop(ws);
    server.shutdown().await;
}

/// Sends one request over a raw socket (header bytes as given) and returns the answer's head.
async fn raw_request(server: &Running, header: &[u8]) -> String {
    let mut socket = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut request = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n".to_vec();
    request.extend_from_slice(header);
    request.extend_from_slice(b"\r\n\r\n");
    socket.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A sane `x-request-id` comes back as sent; without one, or with one that is not printable
/// ASCII of at most 128 characters, the answer carries a new one, unique per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_echoed_or_made() {
    let server = Running::start(server_config("observe_ids")).await;
    let query = || json!({ "query": "{ __typename }" });
    let (_, id, _) = send_with_request_id(&server, None, query(), Some("trace-42 / A:b")).await;
    assert_eq!(id, "trace-42 / A:b");
    let longest = "r".repeat(128);
    let (_, id, _) = send_with_request_id(&server, None, query(), Some(&longest)).await;
    assert_eq!(id, longest);
    let fresh = |id: &str| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    let mut made = std::collections::HashSet::new();
    for _ in 0..20 {
        let (_, id, _) = send_with_request_id(&server, None, query(), None).await;
        assert!(fresh(&id), "{id}");
        assert!(made.insert(id), "request ids are unique");
    }
    let too_long = "x".repeat(10_000);
    for hostile in [too_long.as_str(), "a\tb", "caf\u{e9}", " "] {
        let response = one_shot_client()
            .post(server.url("/graphql"))
            .header(
                "x-request-id",
                reqwest::header::HeaderValue::from_bytes(hostile.as_bytes()).unwrap(),
            )
            .json(&query())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["x-request-id"].to_str().unwrap();
        assert!(fresh(id), "{hostile:?} gave {id:?}");
    }
    // Two ids: neither is taken.
    let response = one_shot_client()
        .post(server.url("/graphql"))
        .header("x-request-id", "one")
        .header("x-request-id", "two")
        .json(&query())
        .send()
        .await
        .unwrap();
    assert!(fresh(response.headers()["x-request-id"].to_str().unwrap()));
    // Control characters never come back: the request is refused by the HTTP parser, or
    // answered with a new id.
    for hostile in [
        &b"x-request-id: a\x01b"[..],
        b"x-request-id: \x1b[31mred",
        b"x-request-id: del\x7f",
    ] {
        let head = raw_request(&server, hostile).await;
        let status = head.split(' ').nth(1).unwrap_or_default();
        assert!(status == "200" || status == "400", "{head}");
        let echoed = head
            .lines()
            .find_map(|l| l.strip_prefix("x-request-id: "))
            .map(str::trim);
        if status == "200" {
            assert!(echoed.is_some_and(fresh), "{head}");
        }
        assert!(!head.contains('\x01') && !head.contains('\x1b') && !head.contains('\x7f'));
    }
    // Every route answers with an id, and a refusal too.
    let health = reqwest::get(server.url("/healthz")).await.unwrap();
    assert!(fresh(health.headers()["x-request-id"].to_str().unwrap()));
    let refused = one_shot_client()
        .post(server.url("/graphql"))
        .header("content-type", "text/plain")
        .header("x-request-id", "refused-1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert_eq!(refused.headers()["x-request-id"], "refused-1");
    server.shutdown().await;
}

/// The binary's JSON log lines: one debug line per request and one warn line per error, each
/// with the operation's name and type, the status, the duration and the request id (the
/// `request` span's field), which every line logged while serving the request carries too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_logs_carry_the_operation_and_the_request_id() {
    let data = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
        .arg("serve")
        .env("THREADQL_LOG", "debug")
        .env("THREADQL_LOG_FORMAT", "json")
        .env("THREADQL_LISTEN", "127.0.0.1:0")
        .env("THREADQL_DATA_DIR", data.path())
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_DATABASE", unique_db("observe_logs"))
        .env("THREADQL_JWT_SECRET", SECRET)
        .env("THREADQL_MAX_DEPTH", "1")
        .env("THREADQL_RATE_LIMIT", "off")
        .env("THREADQL_RATE_LIMIT_ANON", "off")
        .env_remove("THREADQL_JWT_PUBLIC_KEY")
        .env_remove("THREADQL_JWT_JWKS")
        .env_remove("THREADQL_METRICS_LISTEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines: Vec<Value> = Vec::new();
    let addr = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).await.unwrap() > 0, "{lines:?}");
        let value: Value = serde_json::from_str(&line).unwrap();
        let listening = value["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("threadql listening"));
        if listening {
            break value["fields"]["addr"].as_str().unwrap().to_owned();
        }
        lines.push(value);
    };
    let client = one_shot_client();
    let ada = token("u1", "Ada");
    let graphql = |body: Value, id: &str| {
        client
            .post(format!("http://{addr}/graphql"))
            .bearer_auth(&ada)
            .header("x-request-id", id)
            .json(&body)
            .send()
    };
    let created: Value = graphql(
        json!({ "query": "mutation { createDiscussion(input: {title: \"logged\"}) { id } }" }),
        "log-create",
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let d = created["data"]["createDiscussion"]["id"].as_str().unwrap();
    let read = graphql(
        json!({ "query": "query ReadIt($d: ID!) { discussion(id: $d) { id } }", "variables": { "d": d } }),
        "log-read",
    )
    .await
    .unwrap();
    assert_eq!(read.status(), 200);
    let bad = graphql(
        json!({ "query": "query PageTooLarge($d: ID!) { discussion(id: $d) { comments(first: 1000) { totalCount } } }", "variables": { "d": d } }),
        "log-bad",
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), 200);
    // A reply past the depth cap is logged (at info) inside its request.
    let mut parent: Option<String> = None;
    for n in 0..3 {
        let posted: Value = graphql(
            json!({ "query": "mutation Post($d: ID!, $p: String) { postComment(input: {discussionId: $d, parentSlug: $p, text: \"deep\"}) { slug } }", "variables": { "d": d, "p": parent } }),
            &format!("log-post-{n}"),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        parent = Some(
            posted["data"]["postComment"]["slug"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }

    let pid = i32::try_from(child.id().unwrap()).unwrap();
    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).await.unwrap();
    assert!(child.wait().await.unwrap().success(), "{rest}");
    lines.extend(
        rest.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))),
    );
    let of = |id: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["span"]["request_id"] == id)
            .collect()
    };
    let request_line = |id: &str| -> &Value {
        let found: Vec<&Value> = of(id)
            .into_iter()
            .filter(|l| l["fields"]["message"] == "request")
            .collect();
        assert_eq!(found.len(), 1, "{id}: {lines:#?}");
        found[0]
    };

    let read = request_line("log-read");
    assert_eq!(read["level"], "DEBUG");
    assert_eq!(read["span"]["name"], "request");
    let fields = &read["fields"];
    assert_eq!(fields["operation_name"], "ReadIt", "{read}");
    assert_eq!(fields["operation_type"], "query");
    assert_eq!(fields["status"], 200);
    assert_eq!(fields["result"], "ok");
    assert_eq!(read["span"]["url.path"], "/graphql");
    assert_eq!(read["span"]["http.route"], "/graphql");
    assert!(
        fields["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{read}"
    );
    assert!(of("log-read").iter().all(|l| l["level"] != "WARN"));

    let bad_line = request_line("log-bad");
    assert_eq!(bad_line["fields"]["result"], "error");
    let warned: Vec<&Value> = of("log-bad")
        .into_iter()
        .filter(|l| l["level"] == "WARN")
        .collect();
    assert_eq!(warned.len(), 1, "{warned:#?}");
    let warn = &warned[0]["fields"];
    assert_eq!(warn["message"], "request error");
    assert_eq!(warn["code"], "BAD_USER_INPUT");
    assert!(
        warn["error"].as_str().is_some_and(|m| !m.is_empty()),
        "{warn}"
    );
    assert_eq!(warn["operation_name"], "PageTooLarge");
    assert_eq!(warn["operation_type"], "query");
    assert_eq!(warn["status"], 200);
    assert!(warn["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0));

    let create = request_line("log-create");
    assert_eq!(create["fields"]["operation_type"], "mutation");
    assert!(create["fields"].get("operation_name").is_none(), "{create}");

    // The reply past the cap was logged inside its request's span.
    let deep: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("deeper than the depth cap"))
        })
        .collect();
    assert!(!deep.is_empty(), "{lines:#?}");
    for line in deep {
        // Logged inside a store span, itself inside the request span (the list of spans holds
        // them outermost first).
        let id = line["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find(|s| s["name"] == "request"))
            .and_then(|request| request["request_id"].as_str())
            .unwrap_or_else(|| panic!("no request span: {line}"));
        assert!(id.starts_with("log-post-"), "{line}");
        assert_eq!(request_line(id)["fields"]["operation_name"], "Post");
    }
}
