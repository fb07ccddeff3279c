//! Faults: the database process stops in the middle of a stream of concurrent posts and is
//! started again by the embedded database's supervisor; afterwards every acknowledged comment is
//! readable and every counter matches what is stored.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use threadql::app::App;
use threadql::config::Config;
use threadql::domain::Layout;
use threadql::store::embedded_db::EmbeddedDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{unique_db, Running, Settings, TestApp};

/// Writers posting at once.
const WRITERS: usize = 8;

/// What the writers saw: acknowledged comments (slug → text, parent) and failure codes.
#[derive(Default)]
struct Seen {
    acknowledged: HashMap<String, (String, Option<String>)>,
    failures: HashMap<String, usize>,
}

async fn try_post(app: &TestApp, d: &str, parent: Option<&str>, text: &str) -> Value {
    app.exec(
        "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug parentSlug } }",
        json!({ "d": d, "p": parent, "t": text }),
    )
    .await
}

/// Posts until `stop`, replying to the writer's own acknowledged comments every other time.
async fn writer(
    app: Arc<TestApp>,
    d: String,
    me: usize,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
) {
    let mut mine: Vec<String> = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let parent =
            (n % 2 == 0 && !mine.is_empty()).then(|| mine[(n * 7 + me) % mine.len()].clone());
        let text = format!("writer {me} post {n}");
        let response = try_post(&app, &d, parent.as_deref(), &text).await;
        {
            let mut seen = seen.lock().unwrap();
            match response["data"]["postComment"]["slug"].as_str() {
                Some(slug) => {
                    let parent = response["data"]["postComment"]["parentSlug"]
                        .as_str()
                        .map(str::to_owned);
                    seen.acknowledged.insert(slug.to_owned(), (text, parent));
                    mine.push(slug.to_owned());
                }
                None => {
                    let code = response["errors"][0]["extensions"]["code"]
                        .as_str()
                        .unwrap_or("<none>")
                        .to_owned();
                    *seen.failures.entry(code).or_default() += 1;
                }
            }
        }
        if response.get("errors").is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Waits until the discussion's comment count has stopped moving (unchanged for a second):
/// writes whose clients hung up run on in the server, queued behind each other.
async fn settle(app: &TestApp, d: &str) {
    let q = "query($d: ID!) { discussion(id: $d) { commentCount } }";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let (mut last, mut steady) = (None, 0);
    while steady < 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "writes kept landing for two minutes after their clients hung up"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let count = app.ok(q, json!({ "d": d })).await["discussion"]["commentCount"].as_u64();
        steady = if count == last { steady + 1 } else { 0 };
        last = count;
    }
}

/// Every comment of the discussion by a chronological cursor walk.
async fn all_comments(app: &TestApp, d: &str) -> Vec<Value> {
    let q = "query($d: ID!, $after: String) { discussion(id: $d) { comments(first: 100, after: $after) {
        nodes { slug parentSlug text replyCount } pageInfo { hasNextPage endCursor } } } }";
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let data = app.ok(q, json!({ "d": d, "after": after })).await;
        let page = &data["discussion"]["comments"];
        out.extend(page["nodes"].as_array().unwrap().iter().cloned());
        if !page["pageInfo"]["hasNextPage"].as_bool().unwrap() {
            return out;
        }
        after = page["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
}

/// Every counter matches what is stored: each comment's `replyCount`, the discussion's
/// `commentCount` and its number of threads.
async fn assert_counts_match(app: &TestApp, d: &str, stored: &[Value], what: &str) {
    let mut replies: HashMap<&str, u64> = HashMap::new();
    for c in stored {
        if let Some(parent) = c["parentSlug"].as_str() {
            *replies.entry(parent).or_default() += 1;
        }
    }
    for c in stored {
        let slug = c["slug"].as_str().unwrap();
        assert_eq!(
            c["replyCount"].as_u64(),
            Some(replies.get(slug).copied().unwrap_or(0)),
            "{what}: replyCount of {slug}"
        );
    }
    let counts = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount threads(first: 1) { totalCount } } }",
            json!({ "d": d }),
        )
        .await;
    let threads = stored.iter().filter(|c| c["parentSlug"].is_null()).count() as u64;
    assert_eq!(
        counts["discussion"]["commentCount"].as_u64(),
        Some(stored.len() as u64),
        "{what}"
    );
    assert_eq!(
        counts["discussion"]["threads"]["totalCount"].as_u64(),
        Some(threads),
        "{what}"
    );
}

async fn restart_during_posts(db: &EmbeddedDb, layout: Layout) {
    let settings = Settings {
        bucket_size: 5,
        ..Settings::new(layout)
    };
    let database = unique_db(&format!("faults_{layout}"));
    let mut config = settings.config(&database);
    config.mongodb_uri = Some(db.uri());
    config.db_timeout_ms = 1_000;
    config.request_timeout_secs = 10;
    let app = App::build(&config).await.expect("build the app");
    let app = Arc::new(TestApp::from_app(app, database, settings));
    let d = app.discussion("faults").await;

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|me| {
            tokio::spawn(writer(
                app.clone(),
                d.clone(),
                me,
                stop.clone(),
                seen.clone(),
            ))
        })
        .collect();
    let acknowledged = || seen.lock().unwrap().acknowledged.len();
    while acknowledged() < 60 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = acknowledged();
    let pid = db.pid();
    kill(Pid::from_raw(i32::try_from(pid).unwrap()), Signal::SIGTERM).unwrap();
    // The supervisor starts it again; posts go on once the driver reconnects.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while db.pid() == pid || acknowledged() < before + 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "posting did not resume after the restart"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let stored = all_comments(&app, &d).await;
    let by_slug: HashMap<&str, &Value> = stored
        .iter()
        .map(|c| (c["slug"].as_str().unwrap(), c))
        .collect();
    assert_eq!(by_slug.len(), stored.len(), "a comment is listed twice");
    for (slug, (text, parent)) in &seen.acknowledged {
        let c = by_slug
            .get(slug.as_str())
            .unwrap_or_else(|| panic!("acknowledged comment {slug} is missing after the restart"));
        assert_eq!(c["text"].as_str(), Some(text.as_str()), "{slug}");
        assert_eq!(c["parentSlug"].as_str(), parent.as_deref(), "{slug}");
    }
    assert_counts_match(&app, &d, &stored, &layout.to_string()).await;
    for code in seen.failures.keys() {
        assert!(
            ["UNAVAILABLE", "CONFLICT"].contains(&code.as_str()),
            "a post failed with {code} (failures: {:?})",
            seen.failures
        );
    }
    eprintln!(
        "{layout}: {} posts acknowledged, {} comments stored and found, {} counters checked, failures {:?}",
        seen.acknowledged.len(),
        stored.len(),
        stored.len() + 2,
        seen.failures
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_posts_and_counters_survive_a_database_restart() {
    let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let db = EmbeddedDb::start(&binary, dir.path()).await.unwrap();
    for layout in Layout::ALL {
        restart_during_posts(&db, layout).await;
    }
    db.stop().await;
}

/// A server on a loopback socket over a fresh database, and a test app over its API.
struct Served {
    app: Arc<TestApp>,
    server: Running,
}

async fn serve(label: &str, settings: Settings, change: impl FnOnce(&mut Config)) -> Served {
    let database = unique_db(label);
    let mut config = settings.config(&database);
    change(&mut config);
    let server = Running::start(config).await;
    let app = TestApp::from_parts(server.api.clone(), server.store.clone(), database, settings);
    Served {
        app: Arc::new(app),
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_requests_in_flight() {
    let mut served = serve("drain", Settings::new(Layout::PerComment), |_| {}).await;
    let d = served.app.discussion("drain").await;
    let token = served.app.token("u1", "Ada");
    let body = json!({
        "query": "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"sent during shutdown\"}) { slug } }",
        "variables": { "d": d },
    })
    .to_string();
    let head = format!(
        "POST /graphql HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\nauthorization: Bearer {token}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        served.server.addr,
        body.len()
    );
    // The request is in flight: its head and half its body have arrived when shutdown starts.
    let mut socket = TcpStream::connect(served.server.addr).await.unwrap();
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(first).await.unwrap();
    socket.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    served.server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        TcpStream::connect(served.server.addr).await.is_err(),
        "a stopping server takes no new connections"
    );
    socket.write_all(rest).await.unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"slug\""), "{answer}");
    let app = served.app.clone();
    served.server.shutdown().await;
    let count = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(count["discussion"]["commentCount"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_leave_only_complete_writes() {
    for layout in Layout::ALL {
        let served = serve(&format!("hangups_{layout}"), Settings::new(layout), |_| {}).await;
        let d = served.app.discussion("hang-ups").await;
        let token = served.app.token("u1", "Ada");
        let top = served.app.post(&d, None, "the first").await;
        let url = format!("http://{}/graphql", served.server.addr);
        // Writers whose clients give up after a few milliseconds, mid-request.
        let mut writers = Vec::new();
        for w in 0..16u64 {
            let (url, token, d, top) = (url.clone(), token.clone(), d.clone(), top.clone());
            writers.push(tokio::spawn(async move {
                for i in 0..12u64 {
                    let client = reqwest::Client::builder()
                        .timeout(Duration::from_millis(2 + (w * 7 + i * 13) % 60))
                        .build()
                        .unwrap();
                    let parent = (i % 2 == 1).then(|| top.clone());
                    let _ = client
                        .post(&url)
                        .bearer_auth(&token)
                        .json(&json!({
                            "query": "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
                            "variables": { "d": d, "p": parent, "t": format!("writer {w} post {i}") },
                        }))
                        .send()
                        .await;
                }
            }));
        }
        for w in writers {
            w.await.unwrap();
        }
        // Writes that were cut off by their client finish on their own: wait until they have.
        settle(&served.app, &d).await;
        let stored = all_comments(&served.app, &d).await;
        assert_counts_match(&served.app, &d, &stored, &layout.to_string()).await;
        // Nothing is left stuck: every later request is served.
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        for i in 0..20 {
            let response: Value = client
                .post(&url)
                .bearer_auth(&token)
                .json(&json!({
                    "query": "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }",
                    "variables": { "d": d, "t": format!("after {i}") },
                }))
                .send()
                .await
                .expect("served after the hang-ups")
                .json()
                .await
                .unwrap();
            assert!(
                response["data"]["postComment"]["slug"].is_string(),
                "{response}"
            );
        }
        eprintln!(
            "{layout}: {} comments stored by clients that hung up",
            stored.len()
        );
        served.server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_fast_and_the_server_recovers_without_a_restart() {
    let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let db = EmbeddedDb::start(&binary, dir.path()).await.unwrap();
    let port = db.port();
    let uri = db.uri();
    let served = serve("outage", Settings::new(Layout::PerComment), |config| {
        config.mongodb_uri = Some(uri);
        config.db_timeout_ms = 500;
    })
    .await;
    let (test_app, addr) = (served.app.clone(), served.server.addr);
    let client = reqwest::Client::new();
    let ready = || async {
        client
            .get(format!("http://{addr}/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let d = test_app.discussion("outage").await;
    test_app.post(&d, None, "before").await;
    assert_eq!(ready().await, 200);

    db.stop().await;
    assert_eq!(
        ready().await,
        503,
        "/readyz is red while the database is down"
    );
    let read = "query($d: ID!) { discussion(id: $d) { commentCount } }";
    let response = test_app.exec(read, json!({ "d": d })).await;
    assert_eq!(
        crate::support::error_code(&response),
        "UNAVAILABLE",
        "{response:#}"
    );
    let response = try_post(&test_app, &d, None, "during").await;
    assert_eq!(
        crate::support::error_code(&response),
        "UNAVAILABLE",
        "{response:#}"
    );

    // The database comes back on the same address: no restart of threadql is needed.
    let db = EmbeddedDb::start_on(&binary, dir.path(), port)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ready().await != 200 {
        assert!(tokio::time::Instant::now() < deadline, "/readyz stayed red");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    test_app.post(&d, None, "after").await;
    let data = test_app.ok(read, json!({ "d": d })).await;
    assert_eq!(data["discussion"]["commentCount"], 2);
    served.server.shutdown().await;
    db.stop().await;
}
