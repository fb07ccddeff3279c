//! The HTTP contract of an attempt, against a real server on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;

use super::*;
use crate::webhooks::signature::sign;

/// What the test server saw.
#[derive(Default)]
struct Seen {
    /// The headers and body of every request to `/ok`.
    requests: Mutex<Vec<(HeaderMap, Bytes)>>,
    /// Requests to `/target`, where `/redirect` points.
    target_hits: AtomicUsize,
}

/// A server on 127.0.0.1 with one route per behaviour, and what it saw.
async fn server() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/ok", post(ok))
        .route("/gone", post(|| async { StatusCode::GONE }))
        .route(
            "/fail",
            post(|| async { StatusCode::INTERNAL_SERVER_ERROR }),
        )
        .route(
            "/redirect",
            post(|| async { (StatusCode::FOUND, [(header::LOCATION, "/target")]) }),
        )
        .route("/target", post(target).get(target))
        .route("/slow", post(slow))
        .route("/big", post(|| async { "a".repeat(100_000) }))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

async fn ok(State(seen): State<Arc<Seen>>, headers: HeaderMap, body: Bytes) -> &'static str {
    seen.requests.lock().unwrap().push((headers, body));
    "thanks"
}

async fn target(State(seen): State<Arc<Seen>>) -> StatusCode {
    seen.target_hits.fetch_add(1, Ordering::SeqCst);
    StatusCode::OK
}

async fn slow() -> impl IntoResponse {
    tokio::time::sleep(Duration::from_secs(3)).await;
    StatusCode::OK
}

fn insecure() -> Sender {
    Sender::new(Duration::from_secs(5), true).unwrap()
}

fn secure() -> Sender {
    Sender::new(Duration::from_secs(5), false).unwrap()
}

const BODY: &[u8] = br#"{"type":"comment.created","data":{}}"#;

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).unwrap().to_str().unwrap()
}

#[tokio::test]
async fn a_2xx_succeeds_with_the_signed_headers() {
    let (addr, seen) = server().await;
    let secret = Secret::generate();
    let attempt = insecure()
        .send(&format!("http://{addr}/ok"), "msg_1", BODY, &[&secret])
        .await;
    assert_eq!(attempt.outcome, Outcome::Succeeded);
    assert_eq!(attempt.status, Some(200));
    assert_eq!(attempt.body, "thanks");
    assert_eq!(attempt.error, None);
    let now = chrono::Utc::now().timestamp();
    assert!(
        (now - attempt.timestamp).abs() <= 5,
        "{}",
        attempt.timestamp
    );

    let requests = seen.requests.lock().unwrap();
    let (headers, body) = &requests[0];
    assert_eq!(&body[..], BODY);
    assert_eq!(header_text(headers, "content-type"), "application/json");
    assert_eq!(header_text(headers, "webhook-id"), "msg_1");
    let timestamp: i64 = header_text(headers, "webhook-timestamp").parse().unwrap();
    assert_eq!(timestamp, attempt.timestamp);
    assert_eq!(
        header_text(headers, "webhook-signature"),
        sign(&secret, "msg_1", timestamp, BODY)
    );
    assert_eq!(
        header_text(headers, "user-agent"),
        format!("threadql/{}", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn two_secrets_send_two_signatures_that_each_verify() {
    let (addr, seen) = server().await;
    let (old, new) = (Secret::generate(), Secret::generate());
    let attempt = insecure()
        .send(&format!("http://{addr}/ok"), "msg_2", BODY, &[&old, &new])
        .await;
    assert_eq!(attempt.outcome, Outcome::Succeeded);
    let requests = seen.requests.lock().unwrap();
    let headers = &requests[0].0;
    let timestamp: i64 = header_text(headers, "webhook-timestamp").parse().unwrap();
    let signatures: Vec<&str> = header_text(headers, "webhook-signature")
        .split(' ')
        .collect();
    assert_eq!(
        signatures,
        [
            sign(&old, "msg_2", timestamp, BODY),
            sign(&new, "msg_2", timestamp, BODY)
        ]
    );
}

#[tokio::test]
async fn a_410_is_gone() {
    let (addr, _) = server().await;
    let attempt = insecure()
        .send(&format!("http://{addr}/gone"), "msg_3", BODY, &[])
        .await;
    assert_eq!(attempt.outcome, Outcome::Gone);
    assert_eq!(attempt.status, Some(410));
}

#[tokio::test]
async fn a_500_is_retried_with_its_status() {
    let (addr, _) = server().await;
    let secret = Secret::generate();
    let attempt = insecure()
        .send(&format!("http://{addr}/fail"), "msg_4", BODY, &[&secret])
        .await;
    assert_eq!(attempt.outcome, Outcome::Retry);
    assert_eq!(attempt.status, Some(500));
    assert_eq!(attempt.error.as_deref(), Some("answered 500"));
}

#[tokio::test]
async fn a_redirect_is_retried_and_not_followed() {
    let (addr, seen) = server().await;
    let attempt = insecure()
        .send(&format!("http://{addr}/redirect"), "msg_5", BODY, &[])
        .await;
    assert_eq!(attempt.outcome, Outcome::Retry);
    assert_eq!(attempt.status, Some(302));
    assert_eq!(
        attempt.error.as_deref(),
        Some("answered 302: redirects are not followed")
    );
    assert_eq!(seen.target_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn no_answer_within_the_timeout_is_retried() {
    let (addr, _) = server().await;
    let sender = Sender::new(Duration::from_secs(1), true).unwrap();
    let started = std::time::Instant::now();
    let attempt = sender
        .send(&format!("http://{addr}/slow"), "msg_6", BODY, &[])
        .await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(attempt.outcome, Outcome::Retry);
    assert_eq!(attempt.status, None);
    assert_eq!(attempt.error.as_deref(), Some("no answer within 1 s"));
}

#[tokio::test]
async fn only_the_first_4096_bytes_of_an_answer_are_kept() {
    let (addr, _) = server().await;
    let attempt = insecure()
        .send(&format!("http://{addr}/big"), "msg_7", BODY, &[])
        .await;
    assert_eq!(attempt.outcome, Outcome::Succeeded);
    assert_eq!(attempt.body.len(), 4096);
}

#[tokio::test]
async fn a_refused_connection_is_retried() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let attempt = insecure()
        .send(&format!("http://{addr}/"), "msg_8", BODY, &[])
        .await;
    assert_eq!(attempt.outcome, Outcome::Retry);
    assert_eq!(attempt.error.as_deref(), Some("connection refused"));
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_retried() {
    let attempt = insecure()
        .send("https://no-such-host.invalid/", "msg_9", BODY, &[])
        .await;
    assert_eq!(attempt.outcome, Outcome::Retry);
    let error = attempt.error.unwrap();
    assert!(
        error.starts_with("cannot resolve no-such-host.invalid"),
        "{error}"
    );
}

#[tokio::test]
async fn secure_refuses_http_and_private_ip_literals_before_connecting() {
    let (addr, seen) = server().await;
    let secret = Secret::generate();
    let cases = [
        (format!("http://127.0.0.1:{}/ok", addr.port()), "https"),
        (
            format!("https://127.0.0.1:{}/ok", addr.port()),
            "not a public",
        ),
        ("https://127.0.0.1/".to_owned(), "not a public"),
        ("https://10.0.0.1/".to_owned(), "not a public"),
        ("https://[::ffff:127.0.0.1]/".to_owned(), "not a public"),
    ];
    for (url, rule) in cases {
        let attempt = secure().send(&url, "msg_10", BODY, &[&secret]).await;
        assert_eq!(attempt.outcome, Outcome::Retry, "{url}");
        assert_eq!(attempt.status, None, "{url}");
        let error = attempt.error.unwrap();
        assert!(error.contains(rule), "{url}: {error}");
        assert!(!error.contains(secret.expose()), "{error}");
        assert!(!error.contains("v1,"), "{error}");
    }
    assert!(seen.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn secure_refuses_a_name_with_a_private_address_at_resolution() {
    let attempt = secure()
        .send("https://localhost:1/", "msg_11", BODY, &[])
        .await;
    assert_eq!(attempt.outcome, Outcome::Retry);
    assert_eq!(attempt.status, None);
    let error = attempt.error.unwrap();
    assert!(error.starts_with("localhost resolves to "), "{error}");
    assert!(error.ends_with(", a private address: refused"), "{error}");
}

#[test]
fn a_cut_character_is_dropped_not_replaced() {
    assert_eq!(without_cut_char(b"abc"), b"abc");
    assert_eq!(without_cut_char("aé".as_bytes()), "aé".as_bytes());
    assert_eq!(without_cut_char(&"aé".as_bytes()[..2]), b"a");
    assert_eq!(without_cut_char(&"a€".as_bytes()[..3]), b"a");
    assert_eq!(without_cut_char(&"a😀".as_bytes()[..4]), b"a");
    assert_eq!(without_cut_char("a😀".as_bytes()), "a😀".as_bytes());
    assert_eq!(without_cut_char(b""), b"");
    assert_eq!(without_cut_char(b"\xff"), b"\xff");
}

#[test]
fn statuses_decide_the_outcome() {
    let cases = [
        (200, Outcome::Succeeded),
        (204, Outcome::Succeeded),
        (299, Outcome::Succeeded),
        (410, Outcome::Gone),
        (301, Outcome::Retry),
        (400, Outcome::Retry),
        (404, Outcome::Retry),
        (429, Outcome::Retry),
        (503, Outcome::Retry),
    ];
    for (code, outcome) in cases {
        let status = StatusCode::from_u16(code).unwrap();
        assert_eq!(judge(status).0, outcome, "{code}");
        assert_eq!(judge(status).1.is_none(), outcome == Outcome::Succeeded);
    }
}
