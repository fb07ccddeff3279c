//! Hostile input over a real socket: a table of malformed, oversized, abusive and forged requests,
//! each with the HTTP status and error code it must get. The server must still answer `/healthz`
//! after every one, and the requests refused by a limit (size, CSRF, batch, depth, cost, aliases,
//! root fields, tokens) must not reach the database. Then the rate limits, and batches.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde::Serialize;
use serde_json::{json, Value};
use threadql::config::{Config, RateLimit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{server_uri, unique_db, Running, SECRET};

/// The audience the hostile server requires in every token.
const AUDIENCE: &str = "threadql-hostile";

/// The codes the GraphQL engine may give a document it cannot parse, validate or afford.
const ENGINE_CODES: [&str; 3] = [
    "BAD_USER_INPUT",
    "GRAPHQL_PARSE_FAILED",
    "GRAPHQL_VALIDATION_FAILED",
];

/// Regular-expression and query-operator metacharacters, sent in every string argument.
const META: &str = r#".*+?^${}()|[]\/ $where {"$ne": 1} (?i)^a.*$"#;

const KIB: usize = 1024;

// ----- the server -----

fn config(label: &str) -> Config {
    let mut config = crate::support::defaults();
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.mongodb_uri = Some(server_uri().to_owned());
    config.database = unique_db(label);
    config.jwt_secret = Some(SECRET.to_owned());
    config.jwt_audience = Some(AUDIENCE.to_owned());
    config.rate_limit = RateLimit::Off;
    config.rate_limit_anon = RateLimit::Off;
    config
}

/// A client that opens a connection per request: the server rightly closes a connection whose
/// request it refused before reading the body (413), and a pooled client could race that close.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(0)
        .build()
        .expect("http client")
}

async fn assert_healthy(client: &reqwest::Client, server: &Running, after: &str) {
    let status = client
        .get(server.url("/healthz"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or_else(|e| panic!("the server stopped answering after {after}: {e}"));
    assert_eq!(status, 200, "/healthz after {after}");
}

/// Database commands the server has sent so far, summed over commands, read from `/metrics`.
async fn db_commands(client: &reqwest::Client, server: &Running) -> u64 {
    let text = client
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .filter(|l| l.starts_with("threadql_db_commands_total{"))
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("unreadable metrics line {l:?}"))
        })
        .sum()
}

// ----- tokens -----

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

#[derive(Debug, Clone, Serialize)]
struct Claims {
    sub: String,
    name: String,
    roles: Vec<String>,
    exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    nbf: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<String>,
}

fn claims(sub: &str, name: &str) -> Claims {
    Claims {
        sub: sub.to_owned(),
        name: name.to_owned(),
        roles: Vec::new(),
        exp: now() + 600,
        nbf: None,
        aud: Some(AUDIENCE.to_owned()),
    }
}

fn sign_with(alg: Algorithm, claims: &impl Serialize, secret: &str) -> String {
    encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("sign")
}

fn sign(claims: &impl Serialize) -> String {
    sign_with(Algorithm::HS256, claims, SECRET)
}

fn user(sub: &str, name: &str) -> String {
    sign(&claims(sub, name))
}

fn moderator(sub: &str, name: &str) -> String {
    sign(&Claims {
        roles: vec!["moderator".to_owned()],
        ..claims(sub, name)
    })
}

/// A token with `alg: none` and no signature.
fn unsigned(claims: &Claims) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims"));
    format!("{header}.{payload}.")
}

// ----- requests -----

/// How a case's request is sent.
#[derive(Debug, Clone)]
enum Outgoing {
    /// `POST /graphql` with exactly these headers and this body.
    Post {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `GET /graphql` with these query-string parameters.
    Get {
        params: Vec<(String, String)>,
        headers: Vec<(String, String)>,
    },
    /// `POST /graphql` written by hand over TCP: `Content-Length` as given in `headers` (or the
    /// body's length), or a chunked body without one.
    Raw {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        chunked: bool,
    },
}

impl Outgoing {
    fn with_auth(mut self, token: &str) -> Outgoing {
        self.headers_mut()
            .push(("authorization".to_owned(), format!("Bearer {token}")));
        self
    }

    fn headers_mut(&mut self) -> &mut Vec<(String, String)> {
        match self {
            Outgoing::Post { headers, .. }
            | Outgoing::Get { headers, .. }
            | Outgoing::Raw { headers, .. } => headers,
        }
    }
}

/// A JSON body with `Content-Type: application/json`.
fn post_json(body: &Value) -> Outgoing {
    post_bytes("application/json", serde_json::to_vec(body).expect("json"))
}

/// A body as given, with a content type.
fn post_bytes(content_type: &str, body: impl Into<Vec<u8>>) -> Outgoing {
    Outgoing::Post {
        headers: vec![("content-type".to_owned(), content_type.to_owned())],
        body: body.into(),
    }
}

/// A GraphQL request as JSON.
fn gql(query: &str, variables: Value) -> Outgoing {
    post_json(&json!({ "query": query, "variables": variables }))
}

/// What a case must get.
#[derive(Debug, Clone)]
enum Expect {
    /// 200 with data and no errors.
    Ok,
    /// 200 with no errors and this value at this JSON pointer.
    Data(&'static str, Value),
    /// This status and this `errors[0].extensions.code`.
    Code(u16, &'static str),
    /// An error from the GraphQL engine (parse, validation, document limits): 200 with
    /// `BAD_USER_INPUT`, or one of the engine codes.
    Engine,
}

struct Case {
    name: String,
    send: Outgoing,
    expect: Expect,
    /// Refused before anything reaches the database.
    no_db: bool,
    /// A header the response must carry.
    header: Option<(&'static str, &'static str)>,
}

impl Case {
    fn new(name: impl Into<String>, send: Outgoing, expect: Expect) -> Case {
        Case {
            name: name.into(),
            send,
            expect,
            no_db: false,
            header: None,
        }
    }

    fn auth(mut self, token: &str) -> Case {
        self.send = self.send.with_auth(token);
        self
    }

    fn header(mut self, name: &str, value: &str) -> Case {
        self.send
            .headers_mut()
            .push((name.to_owned(), value.to_owned()));
        self
    }

    fn no_db(mut self) -> Case {
        self.no_db = true;
        self
    }

    fn expect_header(mut self, name: &'static str, value: &'static str) -> Case {
        self.header = Some((name, value));
        self
    }
}

/// What came back.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
    text: String,
}

impl Answer {
    fn new(status: u16, headers: Vec<(String, String)>, raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw).into_owned();
        let body = serde_json::from_slice(raw).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            body,
            text,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `status code` for the report.
    fn summary(&self) -> String {
        let code = self.body["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or("-");
        format!("{} {}", self.status, code)
    }
}

async fn send(client: &reqwest::Client, server: &Running, send: &Outgoing) -> Answer {
    match send {
        Outgoing::Post { headers, body } => {
            let mut request = client.post(server.url("/graphql")).body(body.clone());
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            from_reqwest(request.send().await.expect("send")).await
        }
        Outgoing::Get { params, headers } => {
            let mut request = client.get(server.url("/graphql")).query(params);
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            from_reqwest(request.send().await.expect("send")).await
        }
        Outgoing::Raw {
            headers,
            body,
            chunked,
        } => raw_post(server.addr, headers, body, *chunked).await,
    }
}

async fn from_reqwest(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect();
    let bytes = response.bytes().await.expect("response body");
    Answer::new(status, headers, &bytes)
}

/// Sends a POST by hand, so the body can be chunked or its declared length can lie. The body is
/// written while the answer is read: the server may answer (and close) before reading it all.
async fn raw_post(
    addr: SocketAddr,
    headers: &[(String, String)],
    body: &[u8],
    chunked: bool,
) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let mut head = format!("POST /graphql HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    if chunked {
        head.push_str("transfer-encoding: chunked\r\n");
    } else if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let _ = write!(head, "content-length: {}\r\n", body.len());
    }
    head.push_str("\r\n");
    let body = body.to_vec();
    // The write half is handed back rather than dropped: dropping it would half-close the
    // connection before the answer is read.
    let writing = tokio::spawn(async move {
        let result = async {
            writer.write_all(head.as_bytes()).await?;
            if chunked {
                for chunk in body.chunks(16 * KIB) {
                    writer
                        .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                        .await?;
                    writer.write_all(chunk).await?;
                    writer.write_all(b"\r\n").await?;
                }
                writer.write_all(b"0\r\n\r\n").await?;
            } else {
                writer.write_all(&body).await?;
            }
            writer.flush().await
        }
        .await;
        (writer, result)
    });
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut chunk = vec![0u8; 16 * KIB];
        loop {
            if parse_http(&received).is_some() {
                break;
            }
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    writing.abort();
    assert!(read.is_ok(), "no answer within 30 s to a hand-written POST");
    parse_http(&received).unwrap_or_else(|| {
        panic!(
            "an incomplete HTTP answer: {:?}",
            String::from_utf8_lossy(&received)
        )
    })
}

/// A complete HTTP/1.1 response (its body decoded), or `None` if more is needed.
fn parse_http(bytes: &[u8]) -> Option<Answer> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        let mut at = 0;
        loop {
            let line_end = rest[at..].windows(2).position(|w| w == b"\r\n")? + at;
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&rest[at..line_end])
                    .split(';')
                    .next()?
                    .trim(),
                16,
            )
            .ok()?;
            let start = line_end + 2;
            if size == 0 {
                return Some(Answer::new(status, headers, &body));
            }
            if rest.len() < start + size + 2 {
                return None;
            }
            body.extend_from_slice(&rest[start..start + size]);
            at = start + size + 2;
        }
    }
    let length: usize = header("content-length")?.parse().ok()?;
    (rest.len() >= length).then(|| Answer::new(status, headers, &rest[..length]))
}

/// Checks an answer against what its case expects; `Err` says what was wrong.
fn check(case: &Case, answer: &Answer) -> Result<(), String> {
    let errors = answer.body.get("errors").and_then(Value::as_array);
    if let Some(errors) = errors {
        if let Some(bare) = errors
            .iter()
            .find(|e| e["extensions"]["code"].as_str().is_none_or(str::is_empty))
        {
            return Err(format!("an error without a code: {bare}"));
        }
    }
    let code = answer.body["errors"][0]["extensions"]["code"].as_str();
    let no_errors = errors.is_none_or(Vec::is_empty);
    match &case.expect {
        Expect::Ok | Expect::Data(..) => {
            if answer.status != 200 || !no_errors || answer.body["data"].is_null() {
                return Err(format!("expected 200 with data, got {}", answer.summary()));
            }
            if let Expect::Data(pointer, want) = &case.expect {
                let got = answer.body.pointer(pointer);
                if got != Some(want) {
                    return Err(format!("expected {pointer} = {want}, got {got:?}"));
                }
            }
        }
        Expect::Code(status, want) => {
            if answer.status != *status || code != Some(*want) {
                return Err(format!(
                    "expected {status} {want}, got {}",
                    answer.summary()
                ));
            }
        }
        Expect::Engine => {
            let ok = match code {
                Some("BAD_USER_INPUT") => answer.status == 200,
                Some(code) => ENGINE_CODES.contains(&code) && [200, 400].contains(&answer.status),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "expected an engine error (200 BAD_USER_INPUT, or one of {ENGINE_CODES:?}), got {}",
                    answer.summary()
                ));
            }
        }
    }
    if let Some((name, want)) = case.header {
        let got = answer.header(name);
        if got != Some(want) {
            return Err(format!("expected header {name}: {want}, got {got:?}"));
        }
    }
    Ok(())
}

// ----- documents -----

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug text } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
const LOCK: &str =
    "mutation($id: ID!, $l: Boolean!) { lockDiscussion(id: $id, locked: $l) { id locked } }";
const CREATE: &str = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id title } }";
const DISCUSSION: &str = "query($d: ID!) { discussion(id: $d) { id title } }";
const COMMENT: &str =
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug text } }";
const DISCUSSION_COMMENT: &str =
    "query($d: ID!, $s: String!) { discussion(id: $d) { comment(slug: $s) { slug } } }";
const COMMENTS: &str = "query($d: ID!, $o: CommentOrder!, $f: Int, $a: String, $x: Int) { discussion(id: $d) { comments(order: $o, first: $f, after: $a, offset: $x) { totalCount nodes { slug } pageInfo { endCursor } } } }";
const THREADS: &str =
    "query($d: ID!, $a: String) { discussion(id: $d) { threads(after: $a) { totalCount } } }";
const REPLIES: &str = "query($d: ID!, $s: String!, $a: String) { comment(discussionId: $d, slug: $s) { replies(after: $a) { totalCount } } }";
const SUB_DISCUSSION: &str = "query($d: ID!, $s: String!, $a: String) { comment(discussionId: $d, slug: $s) { subDiscussion(after: $a) { totalCount } } }";
const DISCUSSIONS: &str =
    "query($f: Int, $a: String) { discussions(first: $f, after: $a) { totalCount } }";
const SIMPLE: &str = "{ discussions(first: 1) { totalCount } }";

/// What the setup created for the cases to aim at.
struct World {
    /// An open discussion.
    d: String,
    /// A locked discussion.
    locked: String,
    /// Alice's top-level comment in `d`.
    c1: String,
    /// Alice's reply to `c1`.
    c2: String,
    /// Alice's deleted comment in `d`.
    gone: String,
    /// A chronological comment cursor, a threaded one and a discussion-list one.
    chrono: String,
    threaded: String,
    listed: String,
    alice: String,
    bob: String,
    moderator: String,
}

/// A query sent with a bearer token; returns `data`, failing on any error.
async fn ok(
    client: &reqwest::Client,
    server: &Running,
    token: Option<&str>,
    query: &str,
    variables: Value,
) -> Value {
    let (status, body) =
        crate::support::post_graphql(client, server, token, query, variables).await;
    assert!(
        status == 200 && body.get("errors").is_none(),
        "setup failed: {status} {body:#}"
    );
    body["data"].clone()
}

async fn setup(client: &reqwest::Client, server: &Running) -> World {
    let alice = user("alice", "Alice");
    let bob = user("bob", "Bob");
    let moderator = moderator("mo", "Mo");
    let created = ok(
        client,
        server,
        Some(&alice),
        CREATE,
        json!({ "t": "hostile" }),
    )
    .await;
    let d = created["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let created = ok(
        client,
        server,
        Some(&alice),
        CREATE,
        json!({ "t": "locked" }),
    )
    .await;
    let locked = created["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let post = |parent: Option<String>, text: &'static str| {
        let (d, alice) = (d.clone(), alice.clone());
        async move {
            let data = ok(
                client,
                server,
                Some(&alice),
                POST,
                json!({ "d": d, "p": parent, "t": text }),
            )
            .await;
            data["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned()
        }
    };
    let c1 = post(None, "first").await;
    let c2 = post(Some(c1.clone()), "a reply").await;
    let gone = post(None, "soon deleted").await;
    ok(
        client,
        server,
        Some(&alice),
        DELETE,
        json!({ "d": d, "s": gone }),
    )
    .await;
    let locking = ok(
        client,
        server,
        Some(&moderator),
        LOCK,
        json!({ "id": locked, "l": true }),
    )
    .await;
    assert_eq!(locking["lockDiscussion"]["locked"], true);
    let cursor = |data: Value| {
        data["discussion"]["comments"]["pageInfo"]["endCursor"]
            .as_str()
            .expect("cursor")
            .to_owned()
    };
    let chrono = cursor(
        ok(
            client,
            server,
            None,
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "f": 1 }),
        )
        .await,
    );
    let threaded = cursor(
        ok(
            client,
            server,
            None,
            COMMENTS,
            json!({ "d": d, "o": "THREADED", "f": 1 }),
        )
        .await,
    );
    let listed = ok(
        client,
        server,
        None,
        "{ discussions(first: 1) { pageInfo { endCursor } } }",
        json!({}),
    )
    .await["discussions"]["pageInfo"]["endCursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    World {
        d,
        locked,
        c1,
        c2,
        gone,
        chrono,
        threaded,
        listed,
        alice,
        bob,
        moderator,
    }
}

/// A body of `size` bytes: `body` padded with trailing spaces (still one JSON value).
fn padded(body: &Value, size: usize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(body).expect("json");
    assert!(bytes.len() <= size, "the body is already over {size} bytes");
    bytes.resize(size, b' ');
    bytes
}

/// A JSON body written by hand (for what `serde_json` would never write).
fn hand_written(query: &str, variables: &str) -> Vec<u8> {
    format!(
        r#"{{"query": {}, "variables": {variables}}}"#,
        serde_json::to_string(query).expect("json")
    )
    .into_bytes()
}

fn cursor(raw: &str) -> String {
    URL_SAFE_NO_PAD.encode(raw)
}

fn cases(w: &World) -> Vec<Case> {
    use Expect::{Code, Data, Engine};
    let bad = || Code(200, "BAD_USER_INPUT");
    let d = w.d.as_str();
    let unknown_id = "0123456789abcdef01234567";
    let simple = json!({ "query": SIMPLE });
    let simple_bytes = serde_json::to_vec(&simple).expect("json");
    let csrf = || Code(400, "BAD_USER_INPUT");
    let http_bad = || Code(400, "BAD_USER_INPUT");
    let too_large = || Code(413, "REQUEST_TOO_LARGE");
    let unauthenticated = || Code(200, "UNAUTHENTICATED");
    let create = || gql(CREATE, json!({ "t": "a title" }));

    let mut cases = Vec::new();
    // ----- bodies that are not a GraphQL request -----
    cases.push(
        Case::new(
            "malformed JSON",
            post_bytes("application/json", "{not json"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON object cut short",
            post_bytes(
                "application/json",
                r#"{"query": "{ discussions { totalCount } }""#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON cut inside a string",
            post_bytes("application/json", r#"{"query": "{ discuss"#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "batch cut short",
            post_bytes(
                "application/json",
                r#"[{"query": "{ discussions { totalCount } }"},"#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(Case::new("empty body", post_bytes("application/json", ""), http_bad()).no_db());
    cases.push(
        Case::new(
            "JSON null",
            post_bytes("application/json", "null"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON number",
            post_bytes("application/json", "42"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON true",
            post_bytes("application/json", "true"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON string holding a query",
            post_bytes("application/json", r#""{ discussions { totalCount } }""#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON array of strings",
            post_bytes("application/json", r#"["{ discussions { totalCount } }"]"#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON array of numbers",
            post_bytes("application/json", "[1, 2]"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "query is a number",
            post_bytes("application/json", r#"{"query": 42}"#),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "variables is a string",
            post_bytes("application/json", hand_written(SIMPLE, r#""{}""#)),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "duplicate query key",
            post_bytes(
                "application/json",
                r#"{"query": "{ discussions { totalCount } }", "query": "{ nope }"}"#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "garbage after the JSON value",
            post_bytes(
                "application/json",
                [simple_bytes.as_slice(), b" trailing"].concat(),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "invalid UTF-8 in a string",
            post_bytes(
                "application/json",
                [
                    &br#"{"query": "{ discussions { totalCount } }", "variables": {"t": ""#[..],
                    b"\xff\xfe",
                    b"\"}}",
                ]
                .concat(),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "UTF-8 byte order mark before the JSON",
            post_bytes(
                "application/json",
                [&b"\xef\xbb\xbf"[..], simple_bytes.as_slice()].concat(),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "JSON arrays nested 10 000 deep",
            post_bytes(
                "application/json",
                format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "variables nested 10 000 deep",
            post_bytes(
                "application/json",
                hand_written(
                    SIMPLE,
                    &format!(r#"{{"v": {}{}}}"#, "[".repeat(10_000), "]".repeat(10_000)),
                ),
            ),
            http_bad(),
        )
        .no_db(),
    );
    // ----- content types (the CSRF guard) -----
    cases.push(
        Case::new(
            "text/plain",
            post_bytes("text/plain", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "form-urlencoded",
            post_bytes("application/x-www-form-urlencoded", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "multipart",
            post_bytes("multipart/form-data; boundary=xyz", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "no content type",
            Outgoing::Post {
                headers: Vec::new(),
                body: simple_bytes.clone(),
            },
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "application/jsonp",
            post_bytes("application/jsonp", simple_bytes.clone()),
            csrf(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "text/plain with an empty Apollo-Require-Preflight",
            post_bytes("text/plain", simple_bytes.clone()),
            csrf(),
        )
        .header("apollo-require-preflight", "")
        .no_db(),
    );
    cases.push(
        Case::new(
            "text/plain with Apollo-Require-Preflight",
            post_bytes("text/plain", simple_bytes.clone()),
            Expect::Ok,
        )
        .header("apollo-require-preflight", "true"),
    );
    cases.push(
        Case::new(
            "form-urlencoded with X-Apollo-Operation-Name",
            post_bytes("application/x-www-form-urlencoded", simple_bytes.clone()),
            Expect::Ok,
        )
        .header("x-apollo-operation-name", "Anything"),
    );
    cases.push(Case::new(
            "multipart body with Apollo-Require-Preflight",
            post_bytes(
                "multipart/form-data; boundary=xyz",
                "--xyz\r\ncontent-disposition: form-data; name=\"operations\"\r\n\r\n{}\r\n--xyz--\r\n",
            ),
            http_bad(),
        )
        .header("apollo-require-preflight", "true")
        .no_db());
    cases.push(Case::new(
        "application/graphql-response+json with a charset",
        post_bytes(
            "application/graphql-response+json; charset=utf-8",
            simple_bytes.clone(),
        ),
        Expect::Ok,
    ));
    cases.push(Case::new(
        "Application/JSON in capitals",
        post_bytes("Application/JSON; Charset=UTF-8", simple_bytes.clone()),
        Expect::Ok,
    ));
    // ----- sizes -----
    cases.push(
        Case::new(
            "300 KiB text with Content-Length",
            Outgoing::Raw {
                headers: vec![("content-type".into(), "application/json".into())],
                body: serde_json::to_vec(
                    &json!({ "query": POST, "variables": { "d": d, "t": "x".repeat(300 * KIB) } }),
                )
                .expect("json"),
                chunked: false,
            },
            too_large(),
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "300 KiB text chunked, without Content-Length",
            Outgoing::Raw {
                headers: vec![("content-type".into(), "application/json".into())],
                body: serde_json::to_vec(
                    &json!({ "query": POST, "variables": { "d": d, "t": "x".repeat(300 * KIB) } }),
                )
                .expect("json"),
                chunked: true,
            },
            too_large(),
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "Content-Length of 10 MB on a small body",
            Outgoing::Raw {
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("content-length".into(), (10 * KIB * KIB).to_string()),
                ],
                body: simple_bytes.clone(),
                chunked: false,
            },
            too_large(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "300 KiB of JSON white space",
            post_bytes("application/json", padded(&simple, 300 * KIB)),
            too_large(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "200 KiB text in a 250 KiB body",
            post_bytes(
                "application/json",
                padded(
                    &json!({ "query": POST, "variables": { "d": d, "t": "y".repeat(200 * KIB) } }),
                    250 * KIB,
                ),
            ),
            bad(),
        )
        .auth(&w.alice),
    );
    // ----- batches -----
    cases.push(
        Case::new(
            "empty batch",
            post_bytes("application/json", "[]"),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "11-operation batch",
            post_json(&Value::Array(vec![simple.clone(); 11])),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "batch holding a number",
            post_json(&json!([simple.clone(), 5])),
            http_bad(),
        )
        .no_db(),
    );
    // ----- document limits -----
    cases.push(Case::new(
            "depth 61",
            gql(
                &format!(
                    "query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ {} slug {} }} }}",
                    "parent { ".repeat(59),
                    "} ".repeat(59)
                ),
                json!({ "d": d, "s": w.c2 }),
            ),
            Engine,
        )
        .no_db());
    cases.push(Case::new(
            "first: 100 four levels deep",
            gql(
                "query($d: ID!) { discussion(id: $d) { threads(first: 100) { nodes { replies(first: 100) { nodes { replies(first: 100) { nodes { replies(first: 100) { nodes { slug } } } } } } } } } }",
                json!({ "d": d }),
            ),
            Engine,
        )
        .no_db());
    cases.push(Case::new(
            "first: 100 by variables, three levels deep",
            gql(
                "query($d: ID!, $f: Int) { discussion(id: $d) { threads(first: $f) { nodes { replies(first: $f) { nodes { replies(first: $f) { nodes { slug text } } } } } } } }",
                json!({ "d": d, "f": 100 }),
            ),
            Engine,
        )
        .no_db());
    cases.push(
        Case::new(
            "31 aliases",
            gql(
                &format!(
                    "{{ discussions(first: 1) {{ {} }} }}",
                    (0..31)
                        .map(|i| format!("a{i}: totalCount"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "21 root fields",
            gql(
                &format!(
                    "{{ {} }}",
                    "discussions(first: 1) { totalCount } ".repeat(21)
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "21 root fields in a fragment",
            gql(
                &format!(
                    "query {{ ...R }} fragment R on Query {{ {} }}",
                    "discussions(first: 1) { totalCount } ".repeat(21)
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(Case::new(
            "4 spreads of a fragment with 8 aliases",
            gql(
                &format!(
                    "query {{ discussions(first: 1) {{ ...A }} }} fragment A on DiscussionConnection {{ ...B ...B ...B ...B }} fragment B on DiscussionConnection {{ {} }}",
                    (0..8).map(|i| format!("x{i}: totalCount")).collect::<Vec<_>>().join(" ")
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db());
    cases.push(
        Case::new(
            "6 000 tokens",
            gql(
                &format!(
                    "{{ discussions(first: 1) {{ {}}} }}",
                    "totalCount ".repeat(6_000)
                ),
                json!({}),
            ),
            Engine,
        )
        .no_db(),
    );
    cases.push(Case::new("6 000 braces", gql(&"{".repeat(6_000), json!({})), Engine).no_db());
    cases.push(Case::new(
            "fragments spreading each other",
            gql(
                "query { discussions { ...A } } fragment A on DiscussionConnection { totalCount ...B } fragment B on DiscussionConnection { ...A }",
                json!({}),
            ),
            Engine,
        )
        .no_db());
    // ----- documents the engine refuses -----
    cases.push(
        Case::new(
            "syntax error",
            gql("{ discussions { totalCount ", json!({})),
            Engine,
        )
        .no_db(),
    );
    cases.push(Case::new("blank query", gql("   ", json!({})), Engine).no_db());
    cases.push(
        Case::new(
            "object without a query",
            post_bytes("application/json", "{}"),
            Code(400, "BAD_USER_INPUT"),
        )
        .no_db(),
    );
    cases.push(Case::new("unknown field", gql("{ nope }", json!({})), Engine).no_db());
    cases.push(
        Case::new(
            "unknown operation name",
            post_json(
                &json!({ "query": "query A { discussions { totalCount } }", "operationName": "B" }),
            ),
            Engine,
        )
        .no_db(),
    );
    let two_queries =
        "query A { discussions { totalCount } } query B { discussions { totalCount } }";
    cases.push(
        Case::new(
            "operation name full of metacharacters",
            post_json(&json!({ "query": two_queries, "operationName": META })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given a string",
            gql(DISCUSSIONS, json!({ "f": "ten" })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given 1.5",
            gql(DISCUSSIONS, json!({ "f": 1.5 })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given 2^40",
            gql(DISCUSSIONS, json!({ "f": 1_u64 << 40 })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "Int variable given an array",
            gql(DISCUSSIONS, json!({ "f": [1] })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "enum variable given an unknown value",
            gql(COMMENTS, json!({ "d": d, "o": "SIDEWAYS" })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "String! variable given an object",
            gql(COMMENT, json!({ "d": d, "s": { "a": 1 } })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "ID! variable given a query operator",
            gql(DISCUSSION, json!({ "d": { "$ne": 1 } })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "ID! variable given true",
            gql(DISCUSSION, json!({ "d": true })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "missing required variable",
            gql(DISCUSSION, json!({})),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "required variable null",
            gql(DISCUSSION, json!({ "d": null })),
            Engine,
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "variables is an array",
            post_bytes("application/json", hand_written(DISCUSSION, "[1, 2]")),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "input without its required text",
            gql(
                "mutation($d: ID!) { postComment(input: {discussionId: $d}) { slug } }",
                json!({ "d": d }),
            ),
            Engine,
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "input with an unknown field",
            gql(
                "mutation($i: PostCommentInput!) { postComment(input: $i) { slug } }",
                json!({ "i": { "discussionId": d, "text": "hi", "author": "someone else" } }),
            ),
            Engine,
        )
        .auth(&w.alice)
        .no_db(),
    );
    // ----- ids and slugs -----
    cases.push(Case::new(
        "unknown discussion id",
        gql(DISCUSSION, json!({ "d": unknown_id })),
        Code(200, "NOT_FOUND"),
    ));
    cases.push(Case::new(
        "discussion id .*",
        gql(DISCUSSION, json!({ "d": ".*" })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id {\"$ne\":1}",
        gql(DISCUSSION, json!({ "d": "{\"$ne\":1}" })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id ../../etc",
        gql(DISCUSSION, json!({ "d": "../../etc" })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id in capitals",
        gql(DISCUSSION, json!({ "d": d.to_uppercase() })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id as a number",
        gql(DISCUSSION, json!({ "d": 12345 })),
        bad(),
    ));
    cases.push(Case::new(
        "10 KB discussion id",
        gql(DISCUSSION, json!({ "d": "a".repeat(10_000) })),
        bad(),
    ));
    cases.push(Case::new(
        "discussion id of emoji",
        gql(DISCUSSION, json!({ "d": "😀".repeat(6) })),
        bad(),
    ));
    cases.push(Case::new(
        "slug .*",
        gql(COMMENT, json!({ "d": d, "s": ".*" })),
        bad(),
    ));
    cases.push(Case::new(
        "slug {\"$ne\":1}",
        gql(COMMENT, json!({ "d": d, "s": "{\"$ne\":1}" })),
        bad(),
    ));
    cases.push(Case::new(
        "slug ../../etc",
        gql(COMMENT, json!({ "d": d, "s": "../../etc" })),
        bad(),
    ));
    cases.push(Case::new(
        "10 KB slug",
        gql(
            COMMENT,
            json!({ "d": d, "s": "abcdefgh/".repeat(1_111) + "abcdefgh" }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "slug with a trailing slash",
        gql(COMMENT, json!({ "d": d, "s": format!("{}/", w.c1) })),
        bad(),
    ));
    cases.push(Case::new(
        "empty slug",
        gql(COMMENT, json!({ "d": d, "s": "" })),
        bad(),
    ));
    cases.push(Case::new(
        "slug with a right-to-left override",
        gql(COMMENT, json!({ "d": d, "s": "\u{202e}abcdefg" })),
        bad(),
    ));
    cases.push(Case::new(
        "unknown slug",
        gql(COMMENT, json!({ "d": d, "s": "zzzzzzzz" })),
        Code(200, "NOT_FOUND"),
    ));
    cases.push(Case::new(
        "comment in an unknown discussion",
        gql(COMMENT, json!({ "d": unknown_id, "s": w.c1 })),
        Code(200, "NOT_FOUND"),
    ));
    cases.push(Case::new(
        "Discussion.comment slug .*",
        gql(DISCUSSION_COMMENT, json!({ "d": d, "s": ".*" })),
        bad(),
    ));
    cases.push(
        Case::new(
            "postComment to an unknown discussion",
            gql(POST, json!({ "d": unknown_id, "t": "hello" })),
            Code(200, "NOT_FOUND"),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "postComment to an unknown parent",
            gql(POST, json!({ "d": d, "p": "zzzzzzzz", "t": "hello" })),
            Code(200, "NOT_FOUND"),
        )
        .auth(&w.alice),
    );
    // ----- cursors and paging -----
    cases.push(Case::new(
        "cursor !!!",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": "!!!" }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "cursor with a bad time",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": cursor(&format!("c|soon|{}", w.c1)) }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "cursor with a regex slug",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": cursor("c|1|.*") }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "chronological cursor in the threaded order",
        gql(COMMENTS, json!({ "d": d, "o": "THREADED", "a": w.chrono })),
        bad(),
    ));
    cases.push(Case::new(
        "threaded cursor in the chronological order",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": w.threaded }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "discussion-list cursor in a comment list",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "a": w.listed }),
        ),
        bad(),
    ));
    cases.push(Case::new(
        "comment cursor in the discussion list",
        gql(DISCUSSIONS, json!({ "a": w.chrono })),
        bad(),
    ));
    cases.push(Case::new(
        "threaded cursor in replies",
        gql(REPLIES, json!({ "d": d, "s": w.c1, "a": w.threaded })),
        bad(),
    ));
    cases.push(Case::new(
        "chronological cursor in a sub-discussion",
        gql(SUB_DISCUSSION, json!({ "d": d, "s": w.c1, "a": w.chrono })),
        bad(),
    ));
    cases.push(Case::new(
        "threaded cursor in threads",
        gql(THREADS, json!({ "d": d, "a": w.threaded })),
        bad(),
    ));
    cases.push(Case::new(
        "first: -1",
        gql(COMMENTS, json!({ "d": d, "o": "CHRONOLOGICAL", "f": -1 })),
        bad(),
    ));
    cases.push(Case::new(
        "first: 101",
        gql(COMMENTS, json!({ "d": d, "o": "CHRONOLOGICAL", "f": 101 })),
        bad(),
    ));
    cases.push(Case::new(
        "offset: -1",
        gql(COMMENTS, json!({ "d": d, "o": "CHRONOLOGICAL", "x": -1 })),
        bad(),
    ));
    cases.push(Case::new(
        "offset and after together",
        gql(
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "x": 1, "a": w.chrono }),
        ),
        bad(),
    ));
    // ----- metacharacters in every string argument -----
    cases.push(
        Case::new(
            "title of metacharacters",
            gql(CREATE, json!({ "t": META })),
            Data("/data/createDiscussion/title", json!(META)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text of metacharacters",
            gql(POST, json!({ "d": d, "t": META })),
            Data("/data/postComment/text", json!(META)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "edited text of metacharacters",
            gql(EDIT, json!({ "d": d, "s": w.c1, "t": META })),
            Data("/data/editComment/text", json!(META)),
        )
        .auth(&w.alice),
    );
    cases.push(Case::new(
        "discussion(id:) metacharacters",
        gql(DISCUSSION, json!({ "d": META })),
        bad(),
    ));
    cases.push(Case::new(
        "comment(discussionId:) metacharacters",
        gql(COMMENT, json!({ "d": META, "s": w.c1 })),
        bad(),
    ));
    cases.push(Case::new(
        "comment(slug:) metacharacters",
        gql(COMMENT, json!({ "d": d, "s": META })),
        bad(),
    ));
    cases.push(Case::new(
        "Discussion.comment(slug:) metacharacters",
        gql(DISCUSSION_COMMENT, json!({ "d": d, "s": META })),
        bad(),
    ));
    cases.push(
        Case::new(
            "postComment discussionId metacharacters",
            gql(POST, json!({ "d": META, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "postComment parentSlug metacharacters",
            gql(POST, json!({ "d": d, "p": META, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "editComment discussionId metacharacters",
            gql(EDIT, json!({ "d": META, "s": w.c1, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "editComment slug metacharacters",
            gql(EDIT, json!({ "d": d, "s": META, "t": "x" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "deleteComment discussionId metacharacters",
            gql(DELETE, json!({ "d": META, "s": w.c1 })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "deleteComment slug metacharacters",
            gql(DELETE, json!({ "d": d, "s": META })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "lockDiscussion id metacharacters",
            gql(LOCK, json!({ "id": META, "l": true })),
            bad(),
        )
        .auth(&w.moderator),
    );
    cases.push(Case::new(
        "comments(after:) metacharacters",
        gql(COMMENTS, json!({ "d": d, "o": "THREADED", "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "threads(after:) metacharacters",
        gql(THREADS, json!({ "d": d, "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "replies(after:) metacharacters",
        gql(REPLIES, json!({ "d": d, "s": w.c1, "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "subDiscussion(after:) metacharacters",
        gql(SUB_DISCUSSION, json!({ "d": d, "s": w.c1, "a": META })),
        bad(),
    ));
    cases.push(Case::new(
        "discussions(after:) metacharacters",
        gql(DISCUSSIONS, json!({ "a": META })),
        bad(),
    ));
    // ----- text -----
    cases.push(
        Case::new(
            "blank text",
            gql(POST, json!({ "d": d, "t": "  \n\t \r\n" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text with NUL",
            gql(POST, json!({ "d": d, "t": "a\u{0}b" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text with a bell",
            gql(POST, json!({ "d": d, "t": "ding\u{7}" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text with an escape sequence",
            gql(POST, json!({ "d": d, "t": "\u{1b}[31mred" })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "text of 10 001 characters",
            gql(POST, json!({ "d": d, "t": "z".repeat(10_001) })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(Case::new("empty title", gql(CREATE, json!({ "t": "" })), bad()).auth(&w.alice));
    cases.push(
        Case::new(
            "title of 301 characters",
            gql(CREATE, json!({ "t": "t".repeat(301) })),
            bad(),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "HTML text comes back verbatim",
            gql(
                POST,
                json!({ "d": d, "t": "<script>alert('x')</script><img src=x onerror=alert(1)>" }),
            ),
            Data(
                "/data/postComment/text",
                json!("<script>alert('x')</script><img src=x onerror=alert(1)>"),
            ),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "CRLF becomes LF",
            gql(POST, json!({ "d": d, "t": "one\r\ntwo\r\n" })),
            Data("/data/postComment/text", json!("one\ntwo")),
        )
        .auth(&w.alice),
    );
    // ----- unicode -----
    cases.push(
        Case::new(
            "lone leading surrogate escape in a variable",
            post_bytes(
                "application/json",
                hand_written(POST, &format!(r#"{{"d": "{d}", "t": "a\ud800b"}}"#)),
            ),
            http_bad(),
        )
        .auth(&w.alice)
        .no_db(),
    );
    cases.push(
        Case::new(
            "lone trailing surrogate escape in the query",
            post_bytes(
                "application/json",
                r#"{"query": "{ discussions { totalCount } } # \udc00"}"#,
            ),
            http_bad(),
        )
        .no_db(),
    );
    cases.push(
        Case::new(
            "4-byte emoji text",
            gql(POST, json!({ "d": d, "t": EMOJI })),
            Data("/data/postComment/text", json!(EMOJI)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "right-to-left marks in text",
            gql(POST, json!({ "d": d, "t": RTL })),
            Data("/data/postComment/text", json!(RTL)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "combining marks and zero-width characters in text",
            gql(POST, json!({ "d": d, "t": ZERO_WIDTH })),
            Data("/data/postComment/text", json!(ZERO_WIDTH)),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "surrogate pair escapes make an emoji",
            post_bytes(
                "application/json",
                hand_written(
                    POST,
                    &format!(r#"{{"d": "{d}", "t": "pair \ud83d\ude00"}}"#),
                ),
            ),
            Data("/data/postComment/text", json!("pair 😀")),
        )
        .auth(&w.alice),
    );
    // ----- tokens -----
    cases.push(Case::new(
        "mutation without a token",
        create(),
        unauthenticated(),
    ));
    cases.push(
        Case::new(
            "token signed with another secret",
            create(),
            unauthenticated(),
        )
        .auth(&sign_with(
            Algorithm::HS256,
            &claims("alice", "Alice"),
            "not-the-secret",
        )),
    );
    cases.push(
        Case::new("expired token", create(), unauthenticated()).auth(&sign(&Claims {
            exp: now() - 3_600,
            ..claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("token not valid yet", create(), unauthenticated()).auth(&sign(&Claims {
            nbf: Some(now() + 3_600),
            ..claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("alg: none token", create(), unauthenticated())
            .auth(&unsigned(&claims("alice", "Alice"))),
    );
    cases.push(
        Case::new(
            "HS384 token with the right secret",
            create(),
            unauthenticated(),
        )
        .auth(&sign_with(
            Algorithm::HS384,
            &claims("alice", "Alice"),
            SECRET,
        )),
    );
    cases.push(
        Case::new("token for another audience", create(), unauthenticated()).auth(&sign(&Claims {
            aud: Some("someone-else".into()),
            ..claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("token without an audience", create(), unauthenticated()).auth(&sign(&Claims {
            aud: None,
            ..claims("alice", "Alice")
        })),
    );
    cases.push(
        Case::new("token with an empty sub", create(), unauthenticated()).auth(&user("", "Nobody")),
    );
    let roles_string = json!({
        "sub": "alice", "name": "Alice", "roles": "moderator", "exp": now() + 600, "aud": AUDIENCE,
    });
    cases.push(
        Case::new("token whose roles is a string", create(), unauthenticated())
            .auth(&sign(&roles_string)),
    );
    cases.push(Case::new("garbage token", create(), unauthenticated()).auth("abc.def.ghi"));
    cases.push(
        Case::new("empty bearer token", create(), unauthenticated())
            .header("authorization", "Bearer"),
    );
    cases.push(
        Case::new("Basic authorization", create(), unauthenticated())
            .header("authorization", "Basic YWxpY2U6c2VjcmV0"),
    );
    cases.push(
        Case::new(
            "forged moderator token locking",
            gql(LOCK, json!({ "id": d, "l": true })),
            unauthenticated(),
        )
        .auth(&sign_with(
            Algorithm::HS256,
            &Claims {
                roles: vec!["moderator".into()],
                ..claims("mallory", "Mallory")
            },
            "guessed",
        )),
    );
    // ----- lifecycle -----
    cases.push(
        Case::new(
            "editing someone else's comment",
            gql(EDIT, json!({ "d": d, "s": w.c1, "t": "mine now" })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.bob),
    );
    cases.push(
        Case::new(
            "deleting someone else's comment",
            gql(DELETE, json!({ "d": d, "s": w.c2 })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.bob),
    );
    cases.push(
        Case::new(
            "posting to a locked discussion",
            gql(POST, json!({ "d": w.locked, "t": "let me in" })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.alice),
    );
    cases.push(
        Case::new(
            "locking without the moderator role",
            gql(LOCK, json!({ "id": d, "l": true })),
            Code(200, "FORBIDDEN"),
        )
        .auth(&w.bob),
    );
    cases.push(
        Case::new(
            "editing a deleted comment",
            gql(EDIT, json!({ "d": d, "s": w.gone, "t": "back" })),
            Code(200, "COMMENT_DELETED"),
        )
        .auth(&w.alice),
    );
    // ----- GET -----
    cases.push(
        Case::new(
            "mutation over GET",
            Outgoing::Get {
                params: vec![
                    ("query".into(), CREATE.into()),
                    ("variables".into(), r#"{"t": "by link"}"#.into()),
                ],
                headers: Vec::new(),
            },
            Code(405, "BAD_USER_INPUT"),
        )
        .auth(&w.alice)
        .expect_header("allow", "POST")
        .no_db(),
    );
    let query_and_mutation = format!(
        "query Q {{ discussions {{ totalCount }} }} mutation M {{ lockDiscussion(id: \"{d}\", locked: true) {{ id }} }}"
    );
    cases.push(
        Case::new(
            "mutation over GET chosen by operationName",
            Outgoing::Get {
                params: vec![
                    ("query".into(), query_and_mutation.clone()),
                    ("operationName".into(), "M".into()),
                ],
                headers: Vec::new(),
            },
            Code(405, "BAD_USER_INPUT"),
        )
        .auth(&w.moderator)
        .expect_header("allow", "POST")
        .no_db(),
    );
    cases.push(
        Case::new(
            "mutation over GET chosen by operation_name",
            Outgoing::Get {
                params: vec![
                    ("query".into(), query_and_mutation.clone()),
                    ("operation_name".into(), "M".into()),
                ],
                headers: Vec::new(),
            },
            Code(405, "BAD_USER_INPUT"),
        )
        .auth(&w.moderator)
        .expect_header("allow", "POST")
        .no_db(),
    );
    cases.push(
        Case::new(
            "GET with a syntax error",
            Outgoing::Get {
                params: vec![("query".into(), "{ discussions {".into())],
                headers: Vec::new(),
            },
            Engine,
        )
        .no_db(),
    );
    cases
}

const EMOJI: &str = "4-byte: 😀 🧵 𝄞 👩🏽‍💻 🇺🇳 🫠";
const RTL: &str = "\u{202e}txet desrever\u{202c} \u{200f}שלום\u{200e} and \u{2067}isolate\u{2069}";
const ZERO_WIDTH: &str = "e\u{301}\u{327} a\u{200d}b \u{feff}x \u{200b}y";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_clear_refusals_and_the_server_stays_up() {
    let server = Running::start(config("hostile")).await;
    let client = client();
    let world = setup(&client, &server).await;
    let cases = cases(&world);
    let mut names = std::collections::HashSet::new();
    for case in &cases {
        assert!(
            names.insert(case.name.clone()),
            "two cases named {}",
            case.name
        );
    }
    assert!(cases.len() >= 50, "only {} cases", cases.len());

    let mut failures = Vec::new();
    for case in &cases {
        let before = db_commands(&client, &server).await;
        let answer = send(&client, &server, &case.send).await;
        let after = db_commands(&client, &server).await;
        let mut verdict = check(case, &answer);
        if verdict.is_ok() && case.no_db && after != before {
            verdict = Err(format!(
                "it sent {} database command(s); it should have been refused before any",
                after - before
            ));
        }
        println!(
            "{:<60} -> {}{}",
            case.name,
            answer.summary(),
            if case.no_db {
                format!(" (db commands {before} -> {after})")
            } else {
                String::new()
            }
        );
        if let Err(why) = verdict {
            let shown: String = answer.text.chars().take(600).collect();
            failures.push(format!("{}: {why}\n    body: {shown}", case.name));
        }
        assert_healthy(&client, &server, &case.name).await;
    }

    // What was accepted reads back exactly as sent.
    let read = ok(
        &client,
        &server,
        None,
        "query($d: ID!) { discussion(id: $d) { comments(first: 100) { nodes { text } } } }",
        json!({ "d": world.d }),
    )
    .await;
    let texts: Vec<&str> = read["discussion"]["comments"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["text"].as_str())
        .collect();
    for want in [EMOJI, RTL, ZERO_WIDTH, META, "pair 😀", "one\ntwo"] {
        if !texts.contains(&want) {
            failures.push(format!("{want:?} did not read back: {texts:?}"));
        }
    }

    assert!(
        failures.is_empty(),
        "{} of {} hostile cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_answer_in_order() {
    let server = Running::start(config("hostile_batch")).await;
    let client = client();
    let alice = user("alice", "Alice");
    let created = ok(
        &client,
        &server,
        Some(&alice),
        CREATE,
        json!({ "t": "batched" }),
    )
    .await;
    let d = created["createDiscussion"]["id"].as_str().expect("id");

    let answer = send(
        &client,
        &server,
        &post_json(&json!([
            { "query": SIMPLE },
            { "query": DISCUSSION, "variables": { "d": d } },
        ])),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let results = answer.body.as_array().expect("an array of results");
    assert_eq!(results.len(), 2, "{}", answer.text);
    assert_eq!(results[0]["data"]["discussions"]["totalCount"], 1);
    assert_eq!(results[1]["data"]["discussion"]["title"], "batched");
    assert!(
        results.iter().all(|r| r.get("errors").is_none()),
        "{}",
        answer.text
    );

    // The largest batch allowed, with one failing operation in the middle: one result each.
    let mut batch = vec![json!({ "query": SIMPLE }); 10];
    batch[4] = json!({ "query": DISCUSSION, "variables": { "d": ".*" } });
    let answer = send(&client, &server, &post_json(&Value::Array(batch))).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let results = answer.body.as_array().expect("an array of results");
    assert_eq!(results.len(), 10);
    assert_eq!(
        results[4]["errors"][0]["extensions"]["code"],
        "BAD_USER_INPUT"
    );
    assert_eq!(results[5]["data"]["discussions"]["totalCount"], 1);
    assert_healthy(&client, &server, "batches").await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_stop_floods_per_author_and_per_address() {
    let mut config = config("hostile_rate");
    config.rate_limit = "3/60s".parse().expect("rate");
    config.rate_limit_anon = "5/60s".parse().expect("rate");
    let server = Running::start(config).await;
    let client = client();
    let alice = user("alice", "Alice");
    let bob = user("bob", "Bob");

    let create = |token: &str| {
        let mut request = client
            .post(server.url("/graphql"))
            .json(&json!({ "query": CREATE, "variables": { "t": "flood" } }));
        request = request.bearer_auth(token);
        async move {
            let response = request.send().await.expect("send");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("json"))
        }
    };
    for n in 1..=3 {
        let (status, body) = create(&alice).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "mutation {n}: {body}");
    }
    let (status, body) = create(&alice).await;
    assert_eq!(status, 200, "{body}");
    let error = &body["errors"][0];
    assert_eq!(error["extensions"]["code"], "RATE_LIMITED", "{body}");
    assert!(
        error["extensions"]["retryAfter"]
            .as_u64()
            .is_some_and(|s| s >= 1),
        "{body}"
    );
    assert!(body["data"].is_null(), "{body}");
    assert_healthy(&client, &server, "the 4th mutation").await;

    // Another author is still served.
    let (status, body) = create(&bob).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("errors").is_none(), "{body}");

    // Anonymous requests are counted per address: the 6th is refused with 429.
    for n in 1..=5 {
        let answer = send(&client, &server, &gql(SIMPLE, json!({}))).await;
        assert_eq!(answer.status, 200, "anonymous request {n}: {}", answer.text);
    }
    let answer = send(&client, &server, &gql(SIMPLE, json!({}))).await;
    assert_eq!(answer.status, 429, "{}", answer.text);
    assert_eq!(
        answer.body["errors"][0]["extensions"]["code"],
        "RATE_LIMITED"
    );
    let retry = answer.body["errors"][0]["extensions"]["retryAfter"]
        .as_u64()
        .expect("retryAfter");
    assert!(retry >= 1);
    let header: u64 = answer
        .header("retry-after")
        .expect("a Retry-After header")
        .parse()
        .expect("Retry-After in seconds");
    assert!(header >= 1, "Retry-After: {header}");
    assert_healthy(&client, &server, "the 6th anonymous request").await;

    // A signed-in read is not counted against the address.
    let answer = send(&client, &server, &gql(SIMPLE, json!({})).with_auth(&bob)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    server.shutdown().await;
}

/// The outcome of each response: `"ok"` when it has no errors, otherwise its first error's code.
fn outcomes(responses: &[Value]) -> Vec<String> {
    responses
        .iter()
        .map(|response| {
            if response.get("errors").is_none() {
                "ok".to_owned()
            } else {
                crate::support::error_code(response)
            }
        })
        .collect()
}

/// Sends `mutations` (document, variables) together as `token` and checks that `allowed` of them
/// succeed and the rest are `RATE_LIMITED`. They are sent at once because the bucket gains a
/// token every `per / count`: sent one by one, a slow database could refill it between them.
async fn spend_together(
    app: &crate::support::TestApp,
    token: &str,
    what: &str,
    mutations: Vec<(&str, Value)>,
    allowed: usize,
) {
    let sent = mutations.len();
    let responses = futures::future::join_all(
        mutations
            .into_iter()
            .map(|(document, variables)| app.exec_as(Some(token), document, variables)),
    )
    .await;
    let outcomes = outcomes(&responses);
    let ok = outcomes.iter().filter(|o| *o == "ok").count();
    let limited = outcomes.iter().filter(|o| *o == "RATE_LIMITED").count();
    assert_eq!(
        (ok, limited),
        (allowed, sent - allowed),
        "{what}: {outcomes:?}\n{responses:#?}"
    );
}

/// Each mutation spends exactly one token of its author's rate. Under `10/10s`, ten edits all
/// succeed and the eleventh change is `RATE_LIMITED`; and so for every other mutation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mutation_spends_one_rate_token() {
    use crate::support::{post_in, Settings, TestApp};
    use threadql::domain::{DiscussionTitle, Layout};
    use threadql::store::Storage;

    let settings = Settings {
        rate_limit: "10/10s".parse().expect("rate"),
        ..Settings::new(Layout::PerComment)
    };
    let app = TestApp::with("rate_one_token", settings).await;
    // The data is made through the store: no token is spent on it.
    let new_discussion = |title: String| {
        let store = app.store().clone();
        async move {
            let title = DiscussionTitle::parse(&title).expect("title");
            store
                .discussions()
                .create(title, Layout::PerComment)
                .await
                .expect("create")
        }
    };
    let discussion = new_discussion("rate".to_owned()).await;
    let d = discussion.id.to_string();
    // Comments by Ada (`u1`).
    let mut slugs = Vec::new();
    for n in 0..22 {
        let slug = post_in(
            app.store(),
            Layout::PerComment,
            &discussion,
            None,
            &format!("c{n}"),
        )
        .await;
        slugs.push(slug.to_string());
    }
    let (ada_slugs, moderated_slugs) = slugs.split_at(11);

    // The author edits her comments: ten edits, then an eleventh change.
    let ada = app.token("u1", "Ada");
    let mut changes: Vec<(&str, Value)> = ada_slugs[..10]
        .iter()
        .map(|s| (EDIT, json!({ "d": d, "s": s, "t": "edited" })))
        .collect();
    changes.push((DELETE, json!({ "d": d, "s": ada_slugs[10] })));
    spend_together(&app, &ada, "ten edits and a delete", changes, 10).await;

    // Deletes (a moderator deletes anyone's comment).
    let deleter = app.moderator_token("m-delete", "Deleter");
    let deletes = moderated_slugs
        .iter()
        .map(|s| (DELETE, json!({ "d": d, "s": s })))
        .collect();
    spend_together(&app, &deleter, "eleven deletes", deletes, 10).await;

    // Posts and new discussions.
    let poster = app.token("poster", "Poster");
    let posts = (0..11)
        .map(|n| (POST, json!({ "d": d, "t": format!("p{n}") })))
        .collect();
    spend_together(&app, &poster, "eleven posts", posts, 10).await;
    let creator = app.token("creator", "Creator");
    let creates = (0..11)
        .map(|n| (CREATE, json!({ "t": format!("d{n}") })))
        .collect();
    spend_together(&app, &creator, "eleven new discussions", creates, 10).await;

    // Locks and moves (moderators), each on a discussion of its own.
    let mut own = Vec::new();
    for n in 0..11 {
        own.push(new_discussion(format!("own {n}")).await.id.to_string());
    }
    let locker = app.moderator_token("m-lock", "Locker");
    let locks = own
        .iter()
        .map(|id| (LOCK, json!({ "id": id, "l": true })))
        .collect();
    spend_together(&app, &locker, "eleven locks", locks, 10).await;
    let mover = app.moderator_token("m-move", "Mover");
    let moves = own
        .iter()
        .map(|id| {
            (
                "mutation($id: ID!) { migrateDiscussion(id: $id, layout: PER_COMMENT) { id layout } }",
                json!({ "id": id }),
            )
        })
        .collect();
    spend_together(&app, &mover, "eleven moves", moves, 10).await;
}
