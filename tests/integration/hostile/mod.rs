//! Hostile input over a real socket: a table of malformed, oversized, abusive and forged requests,
//! each with the HTTP status and error code it must get. The server must still answer `/healthz`
//! after every one, and the requests refused by a limit (size, CSRF, batch, depth, cost, aliases,
//! root fields, tokens) must not reach the database. Then the rate limits, and batches.

mod access;
mod arguments;
mod documents;
mod rate_limits;
mod requests;
mod transport;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::Algorithm;
use serde_json::{json, Value};
use threadql::config::Config;

use crate::support::{
    db_commands, graphql_data, now, one_shot_client, server_config, sign, sign_with, unsigned,
    Claims, Running, SECRET,
};
use requests::{check, post_json, send_outgoing, Case};

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

fn hostile_config(label: &str) -> Config {
    let mut config = server_config(label);
    config.jwt_audience = Some(AUDIENCE.to_owned());
    // The cases count the database commands each one sends: without the read cache, whose
    // change feed sends commands of its own.
    config.cache_bytes = 0;
    config
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

// ----- tokens -----

/// Valid claims for the hostile server (its audience).
fn hostile_claims(sub: &str, name: &str) -> Claims {
    Claims {
        aud: Some(AUDIENCE.to_owned()),
        ..Claims::new(sub, name)
    }
}

fn hostile_user(sub: &str, name: &str) -> String {
    sign(&hostile_claims(sub, name))
}

fn hostile_moderator(sub: &str, name: &str) -> String {
    sign(&Claims {
        roles: vec!["moderator".to_owned()],
        ..hostile_claims(sub, name)
    })
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

async fn setup(client: &reqwest::Client, server: &Running) -> World {
    let alice = hostile_user("alice", "Alice");
    let bob = hostile_user("bob", "Bob");
    let moderator = hostile_moderator("mo", "Mo");
    let created = graphql_data(
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
    let created = graphql_data(
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
            let data = graphql_data(
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
    graphql_data(
        client,
        server,
        Some(&alice),
        DELETE,
        json!({ "d": d, "s": gone }),
    )
    .await;
    let locking = graphql_data(
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
        graphql_data(
            client,
            server,
            None,
            COMMENTS,
            json!({ "d": d, "o": "CHRONOLOGICAL", "f": 1 }),
        )
        .await,
    );
    let threaded = cursor(
        graphql_data(
            client,
            server,
            None,
            COMMENTS,
            json!({ "d": d, "o": "THREADED", "f": 1 }),
        )
        .await,
    );
    let listed = graphql_data(
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

/// Every case of every group, in order.
fn every_case(w: &World) -> Vec<Case> {
    let mut cases = Vec::new();
    transport::transport_cases(w, &mut cases);
    documents::document_cases(w, &mut cases);
    arguments::argument_cases(w, &mut cases);
    access::access_cases(w, &mut cases);
    cases
}

const EMOJI: &str = "4-byte: 😀 🧵 𝄞 👩🏽‍💻 🇺🇳 🫠";
const RTL: &str = "\u{202e}txet desrever\u{202c} \u{200f}שלום\u{200e} and \u{2067}isolate\u{2069}";
const ZERO_WIDTH: &str = "e\u{301}\u{327} a\u{200d}b \u{feff}x \u{200b}y";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_clear_refusals_and_the_server_stays_up() {
    let server = Running::start(hostile_config("hostile")).await;
    let client = one_shot_client();
    let world = setup(&client, &server).await;
    let cases = every_case(&world);
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
        let answer = send_outgoing(&client, &server, &case.send).await;
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
    let read = graphql_data(
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
    let server = Running::start(hostile_config("hostile_batch")).await;
    let client = one_shot_client();
    let alice = hostile_user("alice", "Alice");
    let created = graphql_data(
        &client,
        &server,
        Some(&alice),
        CREATE,
        json!({ "t": "batched" }),
    )
    .await;
    let d = created["createDiscussion"]["id"].as_str().expect("id");

    let answer = send_outgoing(
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
    let answer = send_outgoing(&client, &server, &post_json(&Value::Array(batch))).await;
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
