//! Guests post without an account, on every layout, under each policy, over real HTTP from
//! addresses a proxy names: each post pays a proof of work that is accepted once (on every
//! replica), a honeypot catches bots without telling them, limits hold per /24 and /48, a
//! guest's token edits their own comment within the window only, signed-in users' names stay
//! theirs, and a guest's e-mail address reaches moderators and nobody else.

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use threadql::config::{Config, GuestArg};
use threadql::domain::proof::Proofs;
use threadql::domain::{Layout, ServerKey};
use threadql::store::Storage as _;

use crate::support::{
    layout_name, moderator_token, one_shot_client, outcome, server_config, token, Running,
};

/// The proxy header the servers here read the client's address from.
const FORWARDED: &str = "x-forwarded-for";

/// The cost of the test servers' proofs (the least allowed): solved in a millisecond.
const MAX_NUMBER: u64 = 1_000;

const POST: &str = "mutation($input: PostCommentInput!) { postComment(input: $input) { slug status text guestToken author { id name guest } } }";

const PUBLIC: &str = "query($id: ID!) { discussion(id: $id) { guests comments(first: 50) { edges { node { slug text author { id name guest } guestDetails { email } } } } } }";

/// A server taking guests' comments as `policy`, behind a proxy, with `edit` guests edit
/// within.
fn guest_config(label: &str, policy: GuestArg, rate: &str) -> Config {
    let mut config = server_config(label);
    config.client_ip_header = Some(FORWARDED.to_owned());
    config.guests.policy = policy;
    config.guests.pow_max_number = MAX_NUMBER;
    config.guests.rate_limit = rate.parse().expect("a rate");
    config
}

/// Sends one operation from `from` (an `X-Forwarded-For` value), signed in with `bearer` when
/// given; the JSON body.
async fn send(
    server: &Running,
    from: &str,
    bearer: Option<&str>,
    query: &str,
    vars: Value,
) -> Value {
    let mut request = one_shot_client()
        .post(server.url("/graphql"))
        .header(FORWARDED, from)
        .json(&json!({ "query": query, "variables": vars }));
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    request
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("a JSON body")
}

/// Sends as a moderator and fails the test on an error; the data.
async fn as_moderator(server: &Running, query: &str, vars: Value) -> Value {
    let body = send(
        server,
        "192.0.2.1",
        Some(&moderator_token("mod", "Moderator")),
        query,
        vars,
    )
    .await;
    assert_eq!(outcome(&body), "ok", "{body:#}");
    body["data"].clone()
}

/// ALTCHA's payload answering `challenge` (as `GET /guest/challenge` gives it).
fn solve(challenge: &Value) -> String {
    let salt = challenge["salt"].as_str().expect("a salt");
    let target = challenge["challenge"].as_str().expect("a challenge");
    let max = challenge["maxnumber"].as_u64().expect("a maxnumber");
    let number = (0..=max)
        .find(|n| {
            let digest = Sha256::digest(format!("{salt}{n}"));
            digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                == target
        })
        .expect("the number is within maxnumber");
    payload(challenge, number)
}

/// ALTCHA's payload for `challenge` with `number`, right or not.
fn payload(challenge: &Value, number: u64) -> String {
    let sent = json!({
        "algorithm": challenge["algorithm"],
        "challenge": challenge["challenge"],
        "number": number,
        "salt": challenge["salt"],
        "signature": challenge["signature"],
    });
    base64::engine::general_purpose::STANDARD.encode(sent.to_string())
}

/// A fresh challenge from the server's plain HTTP endpoint.
async fn challenge(server: &Running) -> Value {
    let response = one_shot_client()
        .get(server.url("/guest/challenge"))
        .send()
        .await
        .expect("send");
    assert_eq!(
        response
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap_or("")),
        Some("no-store")
    );
    response.json().await.expect("a challenge")
}

/// A guest's post input: `name` with a freshly solved proof, in `discussion`, under `parent`.
async fn guest_input(
    server: &Running,
    discussion: &str,
    parent: Option<&str>,
    name: &str,
    text: &str,
) -> Value {
    json!({
        "discussionId": discussion,
        "parentSlug": parent,
        "text": text,
        "guest": { "name": name, "email": format!("{}@example.org", name.to_lowercase().replace(' ', ".")), "proof": solve(&challenge(server).await) },
    })
}

/// Posts as the guest `name` from `from`; the JSON body.
async fn guest_post(
    server: &Running,
    from: &str,
    discussion: &str,
    parent: Option<&str>,
    name: &str,
    text: &str,
) -> Value {
    let input = guest_input(server, discussion, parent, name, text).await;
    send(server, from, None, POST, json!({ "input": input })).await
}

/// A discussion in `layout`, created by a moderator.
async fn guest_discussion(server: &Running, layout: Layout) -> String {
    let data = as_moderator(
        server,
        "mutation($l: StorageLayout) { createDiscussion(input: {title: \"Guests welcome\", layout: $l}) { id } }",
        json!({ "l": layout_name(layout) }),
    )
    .await;
    data["createDiscussion"]["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

/// The public comments of a discussion (anonymous).
async fn public_read(server: &Running, discussion: &str) -> Value {
    let body = send(
        server,
        "192.0.2.200",
        None,
        PUBLIC,
        json!({ "id": discussion }),
    )
    .await;
    assert_eq!(outcome(&body), "ok", "{body:#}");
    body["data"]["discussion"].clone()
}

/// The number of comments stored for `discussion` in every place a comment can be.
async fn comments_stored(server: &Running, discussion: &str) -> u64 {
    let data = as_moderator(
        server,
        "query($id: ID!) { discussion(id: $id) { commentCount } p: moderationQueue(queue: PENDING, discussionId: $id) { totalCount } r: moderationQueue(queue: REJECTED, discussionId: $id) { totalCount } }",
        json!({ "id": discussion }),
    )
    .await;
    ["discussion", "p", "r"]
        .iter()
        .map(|k| {
            let v = if *k == "discussion" {
                &data[k]["commentCount"]
            } else {
                &data[k]["totalCount"]
            };
            v.as_u64().unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_post_on_every_layout_under_each_policy() {
    let server = Running::start(guest_config("guest_policies", GuestArg::Post, "off")).await;
    for layout in Layout::ALL {
        let open = guest_discussion(&server, layout).await;
        let held = guest_discussion(&server, layout).await;
        let closed = guest_discussion(&server, layout).await;
        for (id, policy) in [(&held, "PRE"), (&closed, "OFF")] {
            as_moderator(
                &server,
                "mutation($id: ID!, $p: GuestPolicy) { setGuestPolicy(id: $id, policy: $p) { guests } }",
                json!({ "id": id, "p": policy }),
            )
            .await;
        }
        // Published, marked as a guest's, with the token only in the answer.
        let posted = guest_post(
            &server,
            "203.0.113.10",
            &open,
            None,
            "Grace Guest",
            "Hello from a guest",
        )
        .await;
        assert_eq!(outcome(&posted), "ok", "{layout:?} {posted:#}");
        let comment = &posted["data"]["postComment"];
        assert_eq!(comment["status"], "APPROVED", "{layout:?}");
        assert_eq!(comment["author"]["guest"], true);
        assert!(comment["author"]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("guest:")));
        assert!(comment["guestToken"].as_str().is_some_and(|t| t.len() > 20));
        let read = public_read(&server, &open).await;
        assert_eq!(read["guests"], "POST");
        let node = &read["comments"]["edges"][0]["node"];
        assert_eq!(node["text"], "Hello from a guest", "{layout:?}");
        assert_eq!(node["author"]["guest"], true);
        assert_eq!(
            node["guestDetails"],
            Value::Null,
            "details are for moderators only"
        );
        // Held under PRE: its poster sees it, the public does not, moderators see the details.
        let posted = guest_post(
            &server,
            "203.0.113.10",
            &held,
            None,
            "Grace Guest",
            "Held for review",
        )
        .await;
        assert_eq!(
            posted["data"]["postComment"]["status"], "PENDING",
            "{layout:?} {posted:#}"
        );
        assert_eq!(posted["data"]["postComment"]["text"], "Held for review");
        assert_eq!(
            public_read(&server, &held).await["comments"]["edges"],
            json!([])
        );
        let queue = as_moderator(
            &server,
            "query($id: ID!) { moderationQueue(queue: PENDING, discussionId: $id) { edges { node { text author { guest } guestDetails { email website network lastPostedAt } } } } }",
            json!({ "id": held }),
        )
        .await;
        let details = &queue["moderationQueue"]["edges"][0]["node"]["guestDetails"];
        assert_eq!(details["email"], "grace.guest@example.org", "{queue:#}");
        assert_eq!(details["network"], "203.0.113.0/24");
        // Refused under OFF, and nothing stored.
        let refused = guest_post(
            &server,
            "203.0.113.10",
            &closed,
            None,
            "Grace Guest",
            "Not here",
        )
        .await;
        assert_eq!(outcome(&refused), "FORBIDDEN", "{layout:?} {refused:#}");
        assert_eq!(comments_stored(&server, &closed).await, 0);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_proofs_are_refused_and_store_nothing() {
    let config = guest_config("guest_bad_proofs", GuestArg::Post, "off");
    let server = Running::start(config.clone()).await;
    let discussion = guest_discussion(&server, Layout::PerComment).await;
    let input = |proof: String| json!({ "input": { "discussionId": discussion, "text": "spam?", "guest": { "name": "Bot", "proof": proof } } });
    let fresh = challenge(&server).await;
    let right = solve(&fresh);
    let mut forged = fresh.clone();
    forged["signature"] = json!("00".repeat(32));
    let key = server
        .store
        .server()
        .server_key(&ServerKey::generate())
        .await
        .expect("the server's key");
    let now = chrono::Utc::now().timestamp();
    let expired = Proofs::new(&key, MAX_NUMBER, 600).challenge(now - 601);
    let expired = json!({
        "algorithm": expired.algorithm, "challenge": expired.challenge, "salt": expired.salt,
        "signature": expired.signature, "maxnumber": expired.max_number,
    });
    let wrong = {
        let solved: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(&right)
                .expect("base64"),
        )
        .expect("json");
        payload(
            &fresh,
            (solved["number"].as_u64().expect("a number") + 1) % (MAX_NUMBER + 1),
        )
    };
    // Refused proofs cost the server no database command.
    let metrics = one_shot_client();
    let before = crate::support::db_commands(&metrics, &server).await;
    for (what, proof) in [
        ("forged", solve(&forged)),
        ("expired", solve(&expired)),
        ("wrong number", wrong),
        ("not base64", "%%%".to_owned()),
        (
            "not a payload",
            base64::engine::general_purpose::STANDARD.encode("{}"),
        ),
    ] {
        let body = send(&server, "203.0.113.20", None, POST, input(proof)).await;
        assert_eq!(outcome(&body), "BAD_USER_INPUT", "{what}: {body:#}");
    }
    assert_eq!(crate::support::db_commands(&metrics, &server).await, before);
    assert_eq!(comments_stored(&server, &discussion).await, 0);
    // The right proof holds once: a replay is refused here and by another replica.
    let body = send(&server, "203.0.113.20", None, POST, input(right.clone())).await;
    assert_eq!(outcome(&body), "ok", "{body:#}");
    let replay = send(&server, "203.0.113.20", None, POST, input(right.clone())).await;
    assert_eq!(outcome(&replay), "BAD_USER_INPUT", "{replay:#}");
    let mut second = config;
    second.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let replica = Running::start(second).await;
    let replay = send(&replica, "198.51.100.20", None, POST, input(right)).await;
    assert_eq!(outcome(&replay), "BAD_USER_INPUT", "{replay:#}");
    assert_eq!(comments_stored(&server, &discussion).await, 1);
    // A signed-in request may not post as a guest.
    let proof = solve(&challenge(&server).await);
    let mixed = send(
        &server,
        "203.0.113.20",
        Some(&token("ann", "Ann")),
        POST,
        input(proof),
    )
    .await;
    assert_eq!(outcome(&mixed), "BAD_USER_INPUT", "{mixed:#}");
    replica.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_honeypot_answers_as_if_taken_and_publishes_nothing() {
    let words = tempfile::NamedTempFile::new().expect("a file");
    std::fs::write(words.path(), "# test\nunobtainium\n").expect("write");
    let mut config = guest_config("guest_honeypot", GuestArg::Post, "off");
    config.banned_words = Some(words.path().to_owned());
    let server = Running::start(config).await;
    let discussion = guest_discussion(&server, Layout::Bucketed).await;
    let mut input = guest_input(&server, &discussion, None, "Bot", "Buy cheap pills").await;
    input["guest"]["trap"] = json!("http://spam.example");
    let body = send(
        &server,
        "203.0.113.30",
        None,
        POST,
        json!({ "input": input }),
    )
    .await;
    assert_eq!(outcome(&body), "ok", "{body:#}");
    assert_eq!(
        body["data"]["postComment"]["status"], "APPROVED",
        "{body:#}"
    );
    assert_eq!(
        public_read(&server, &discussion).await["comments"]["edges"],
        json!([])
    );
    let rejected = as_moderator(
        &server,
        "query($id: ID!) { moderationQueue(queue: REJECTED, discussionId: $id) { edges { node { text moderationReason } } } }",
        json!({ "id": discussion }),
    )
    .await;
    let node = &rejected["moderationQueue"]["edges"][0]["node"];
    assert_eq!(node["text"], "Buy cheap pills");
    assert_eq!(node["moderationReason"], "honeypot");
    // The word lists screen guests as anyone.
    let listed = guest_post(
        &server,
        "203.0.113.31",
        &discussion,
        None,
        "Seller",
        "cheap unobtainium",
    )
    .await;
    assert_eq!(
        listed["data"]["postComment"]["status"], "REJECTED",
        "{listed:#}"
    );
    assert_eq!(
        public_read(&server, &discussion).await["comments"]["edges"],
        json!([])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_per_network_and_links_hold_a_comment() {
    let server = Running::start(guest_config("guest_limits", GuestArg::Post, "2/3600s")).await;
    let discussion = guest_discussion(&server, Layout::Embedded).await;
    let post_from = |from: &'static str, text: &'static str| {
        let (server, discussion) = (&server, &discussion);
        async move { outcome(&guest_post(server, from, discussion, None, "Net Guest", text).await) }
    };
    // IPv4 by /24.
    assert_eq!(post_from("203.0.113.1", "one").await, "ok");
    assert_eq!(post_from("203.0.113.254", "two").await, "ok");
    assert_eq!(post_from("203.0.113.77", "three").await, "RATE_LIMITED");
    assert_eq!(post_from("203.0.114.1", "elsewhere").await, "ok");
    // IPv6 by /48.
    assert_eq!(post_from("2001:db8:1:2::1", "v6 one").await, "ok");
    assert_eq!(post_from("2001:db8:1:ffff::9", "v6 two").await, "ok");
    assert_eq!(
        post_from("[2001:db8:1:abcd::5]", "v6 three").await,
        "RATE_LIMITED"
    );
    assert_eq!(post_from("2001:db8:2::1", "v6 elsewhere").await, "ok");
    server.shutdown().await;

    let server = Running::start(guest_config("guest_replies", GuestArg::Post, "off")).await;
    let discussion = guest_discussion(&server, Layout::PerComment).await;
    let parent = guest_post(
        &server,
        "198.51.100.1",
        &discussion,
        None,
        "Root",
        "a thread",
    )
    .await;
    let parent = parent["data"]["postComment"]["slug"]
        .as_str()
        .expect("a slug")
        .to_owned();
    for n in 0..3 {
        let reply = guest_post(
            &server,
            "198.51.100.2",
            &discussion,
            Some(&parent),
            "Replier",
            &format!("reply {n}"),
        )
        .await;
        assert_eq!(outcome(&reply), "ok", "{reply:#}");
    }
    let fourth = guest_post(
        &server,
        "198.51.100.3",
        &discussion,
        Some(&parent),
        "Replier",
        "reply 3",
    )
    .await;
    assert_eq!(outcome(&fourth), "RATE_LIMITED", "{fourth:#}");
    let other = guest_post(
        &server,
        "198.51.101.3",
        &discussion,
        Some(&parent),
        "Replier",
        "from elsewhere",
    )
    .await;
    assert_eq!(outcome(&other), "ok", "{other:#}");
    // Three links hold a guest comment whatever the policy; two do not.
    let linked = "[a](https://a.example) [b](https://b.example) [c](https://c.example)";
    let held = guest_post(&server, "198.51.100.9", &discussion, None, "Linker", linked).await;
    assert_eq!(held["data"]["postComment"]["status"], "PENDING", "{held:#}");
    let two = guest_post(
        &server,
        "198.51.100.9",
        &discussion,
        None,
        "Linker",
        "[a](https://a.example) [b](https://b.example)",
    )
    .await;
    assert_eq!(two["data"]["postComment"]["status"], "APPROVED", "{two:#}");
    // A banned network posts nothing until the ban is lifted; signed-in users there still do.
    as_moderator(
        &server,
        "mutation { banNetwork(cidr: \"198.51.100.0/24\", reason: \"spam run\") { cidr } }",
        json!({}),
    )
    .await;
    let banned = guest_post(&server, "198.51.100.77", &discussion, None, "Root", "again").await;
    assert_eq!(outcome(&banned), "FORBIDDEN", "{banned:#}");
    let bans = as_moderator(&server, "{ networkBans { cidr reason } }", json!({})).await;
    assert_eq!(
        bans["networkBans"],
        json!([{ "cidr": "198.51.100.0/24", "reason": "spam run" }])
    );
    let signed_in = send(
        &server,
        "198.51.100.77",
        Some(&token("ann", "Ann")),
        POST,
        json!({ "input": { "discussionId": discussion, "text": "signed in" } }),
    )
    .await;
    assert_eq!(outcome(&signed_in), "ok", "{signed_in:#}");
    as_moderator(
        &server,
        "mutation { unbanNetwork(cidr: \"198.51.100.0/24\") }",
        json!({}),
    )
    .await;
    let lifted = guest_post(
        &server,
        "198.51.100.77",
        &discussion,
        None,
        "Root",
        "after the ban",
    )
    .await;
    assert_eq!(outcome(&lifted), "ok", "{lifted:#}");
    server.shutdown().await;
}

const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!, $g: String) { editComment(input: {discussionId: $d, slug: $s, text: $t, guestToken: $g}) { text } }";
const DELETE: &str = "mutation($d: ID!, $s: String!, $g: String) { deleteComment(discussionId: $d, slug: $s, guestToken: $g) { deleted } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_changes_their_own_comment_with_its_token_within_the_window() {
    let mut config = guest_config("guest_edits", GuestArg::Post, "off");
    config.edit_window_secs = 3;
    let server = Running::start(config).await;
    let discussion = guest_discussion(&server, Layout::Bucketed).await;
    let mine = guest_post(
        &server,
        "203.0.113.40",
        &discussion,
        None,
        "Edith",
        "first words",
    )
    .await;
    let theirs = guest_post(
        &server,
        "203.0.113.41",
        &discussion,
        None,
        "Other",
        "not yours",
    )
    .await;
    let token_of = |body: &Value| {
        let c = &body["data"]["postComment"];
        (
            c["slug"].as_str().expect("a slug").to_owned(),
            c["guestToken"].as_str().expect("a token").to_owned(),
        )
    };
    let (mine_slug, mine_token) = token_of(&mine);
    let (their_slug, _) = token_of(&theirs);
    let edited = send(
        &server,
        "203.0.113.40",
        None,
        EDIT,
        json!({ "d": discussion, "s": mine_slug, "t": "better words", "g": mine_token }),
    )
    .await;
    assert_eq!(
        edited["data"]["editComment"]["text"], "better words",
        "{edited:#}"
    );
    // Another comment's token, an altered token, and a token with a bearer are refused.
    let other = send(
        &server,
        "203.0.113.40",
        None,
        EDIT,
        json!({ "d": discussion, "s": their_slug, "t": "hijack", "g": mine_token }),
    )
    .await;
    assert_eq!(outcome(&other), "FORBIDDEN", "{other:#}");
    let altered = send(
        &server,
        "203.0.113.40",
        None,
        DELETE,
        json!({ "d": discussion, "s": mine_slug, "g": format!("x{mine_token}") }),
    )
    .await;
    assert_eq!(outcome(&altered), "FORBIDDEN", "{altered:#}");
    let none = send(
        &server,
        "203.0.113.40",
        None,
        DELETE,
        json!({ "d": discussion, "s": mine_slug }),
    )
    .await;
    assert_eq!(outcome(&none), "UNAUTHENTICATED", "{none:#}");
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let late = send(
        &server,
        "203.0.113.40",
        None,
        EDIT,
        json!({ "d": discussion, "s": mine_slug, "t": "too late", "g": mine_token }),
    )
    .await;
    assert_eq!(outcome(&late), "FORBIDDEN", "{late:#}");
    let late = send(
        &server,
        "203.0.113.40",
        None,
        DELETE,
        json!({ "d": discussion, "s": mine_slug, "g": mine_token }),
    )
    .await;
    assert_eq!(outcome(&late), "FORBIDDEN", "{late:#}");
    let read = public_read(&server, &discussion).await;
    let kept = read["comments"]["edges"]
        .as_array()
        .and_then(|edges| {
            edges
                .iter()
                .find(|e| e["node"]["slug"] == mine_slug.as_str())
        })
        .map(|e| e["node"]["text"].clone());
    assert_eq!(kept, Some(json!("better words")), "{read:#}");
    // Within the window, the token deletes.
    let fresh = guest_post(&server, "203.0.113.40", &discussion, None, "Edith", "brief").await;
    let (slug, token) = token_of(&fresh);
    let gone = send(
        &server,
        "203.0.113.40",
        None,
        DELETE,
        json!({ "d": discussion, "s": slug, "g": token }),
    )
    .await;
    assert_eq!(gone["data"]["deleteComment"]["deleted"], true, "{gone:#}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_cannot_take_a_signed_in_users_name_and_their_email_stays_private() {
    let config = guest_config("guest_names", GuestArg::Post, "off");
    let server = Running::start(config.clone()).await;
    let discussion = guest_discussion(&server, Layout::Embedded).await;
    let signed_in = send(
        &server,
        "192.0.2.9",
        Some(&token("ada", "Ada Lovelace")),
        POST,
        json!({ "input": { "discussionId": discussion, "text": "I was here first" } }),
    )
    .await;
    assert_eq!(outcome(&signed_in), "ok", "{signed_in:#}");
    for taken in [
        "Ada Lovelace",
        "ada lovelace",
        "ＡＤＡ LOVELACE",
        "[deleted]",
    ] {
        let body = guest_post(
            &server,
            "203.0.113.50",
            &discussion,
            None,
            taken,
            "impostor",
        )
        .await;
        assert_eq!(outcome(&body), "BAD_USER_INPUT", "{taken}: {body:#}");
    }
    // A subscriber (anonymous) hears the guest's comment, without the address.
    let mut live = one_shot_client()
        .post(server.url("/graphql"))
        .header("Accept", "text/event-stream")
        .json(&json!({ "query": "subscription($d: ID!) { commentPosted(discussionId: $d) { text author { id name guest } guestDetails { email } } }", "variables": { "d": discussion } }))
        .send()
        .await
        .expect("subscribe");
    crate::live::await_subscribers(&server, 1).await;
    let body = guest_post(
        &server,
        "203.0.113.50",
        &discussion,
        None,
        "Ada Fan",
        "an honest guest",
    )
    .await;
    assert_eq!(outcome(&body), "ok", "{body:#}");
    // The change stream may still deliver Ada's earlier post after the subscription began:
    // read on to the guest's (each event within the wait), none of them holding the address.
    let heard = loop {
        let heard = crate::live::sse_events(&mut live, 1).await;
        assert!(!heard[0].1.contains("ada.fan@example.org"), "{heard:?}");
        if heard[0].1.contains("an honest guest") {
            break heard;
        }
    };
    assert!(heard[0].1.contains("\"guest\":true"), "{heard:?}");
    drop(live);
    let slug = body["data"]["postComment"]["slug"]
        .as_str()
        .expect("a slug")
        .to_owned();
    // The address is in no public read, cached or not, nor in `_entities` or the event log.
    let email = "ada.fan@example.org";
    for _ in 0..2 {
        let read = send(&server, "192.0.2.200", None, "query($id: ID!) { discussion(id: $id) { comments(first: 10) { edges { node { author { id name guest } guestDetails { email } } } } } }", json!({ "id": discussion })).await;
        assert!(!read.to_string().contains(email), "{read:#}");
        assert!(read.to_string().contains("Ada Fan"));
    }
    let entities = send(&server, "192.0.2.200", Some(&token("bob", "Bob")), "query($r: [_Any!]!) { _entities(representations: $r) { ... on Comment { text author { name guest } guestDetails { email } } } }", json!({ "r": [{ "__typename": "Comment", "discussionId": discussion, "slug": slug }] })).await;
    assert_eq!(
        entities["data"]["_entities"][0]["author"]["guest"], true,
        "{entities:#}"
    );
    assert!(!entities.to_string().contains(email), "{entities:#}");
    let admin = crate::support::admin_token_for("root", "Root");
    let events = send(
        &server,
        "192.0.2.1",
        Some(&admin),
        "{ events(first: 50) { edges { node { type actor { id name guest } } } } }",
        json!({}),
    )
    .await;
    assert_eq!(outcome(&events), "ok", "{events:#}");
    assert!(!events.to_string().contains(email), "{events:#}");
    assert!(!events.to_string().contains("203.0.113"), "{events:#}");
    // The moderator sees it.
    let seen = as_moderator(&server, "query($id: ID!) { discussion(id: $id) { comments(first: 10) { edges { node { guestDetails { email network } } } } } }", json!({ "id": discussion })).await;
    assert!(seen.to_string().contains(email), "{seen:#}");
    // A ban of the guest's id holds them back, whatever network they post from.
    let id = body["data"]["postComment"]["author"]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    as_moderator(
        &server,
        "mutation($u: ID!) { banUser(userId: $u, reason: \"trolling\") { userId } }",
        json!({ "u": id }),
    )
    .await;
    let banned = guest_post(
        &server,
        "198.51.100.50",
        &discussion,
        None,
        "Ada Fan",
        "me again",
    )
    .await;
    assert_eq!(outcome(&banned), "FORBIDDEN", "{banned:#}");
    // Stored in one collection only, which no public path reads.
    let db = crate::support::test_database(&config.database).await;
    for name in db.list_collection_names().await.expect("collections") {
        let docs: Vec<mongodb::bson::Document> = futures::TryStreamExt::try_collect(
            db.collection::<mongodb::bson::Document>(&name)
                .find(mongodb::bson::doc! {})
                .await
                .expect("find"),
        )
        .await
        .expect("read");
        let mut strings = Vec::new();
        for d in docs {
            crate::support::strings_in(&mongodb::bson::Bson::Document(d), &mut strings);
        }
        let holds = strings.iter().any(|s| s.contains(email));
        assert_eq!(holds, name == "guest_details", "{name}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_signed_in_users_posted_under_before_the_upgrade_stay_theirs() {
    let config = guest_config("guest_name_upgrade", GuestArg::Post, "off");
    let server = Running::start(config.clone()).await;
    // A signed-in author per layout, and one whose comment waits for a moderator.
    let mut discussions = Vec::new();
    for (layout, (sub, name)) in Layout::ALL.into_iter().zip([
        ("babbage", "Charles Babbage"),
        ("somerville", "Mary Somerville"),
        ("herschel", "John Herschel"),
    ]) {
        let discussion = guest_discussion(&server, layout).await;
        let signed_in = send(
            &server,
            "192.0.2.9",
            Some(&token(sub, name)),
            POST,
            json!({ "input": { "discussionId": discussion, "text": "an engine" } }),
        )
        .await;
        assert_eq!(outcome(&signed_in), "ok", "{layout:?} {signed_in:#}");
        discussions.push((discussion, name));
    }
    let held = discussions[0].0.clone();
    as_moderator(
        &server,
        "mutation($id: ID!) { setModeration(id: $id, mode: PRE) { id } }",
        json!({ "id": held }),
    )
    .await;
    let waiting = send(
        &server,
        "192.0.2.9",
        Some(&token("de-morgan", "Augustus De Morgan")),
        POST,
        json!({ "input": { "discussionId": held, "text": "held" } }),
    )
    .await;
    assert_eq!(
        waiting["data"]["postComment"]["status"], "PENDING",
        "{waiting:#}"
    );
    discussions.push((held.clone(), "Augustus De Morgan"));
    server.shutdown().await;
    // As an earlier version left it: no names recorded, no record of the upgrade.
    let db = crate::support::test_database(&config.database).await;
    db.collection::<mongodb::bson::Document>("people")
        .update_many(
            mongodb::bson::doc! {},
            mongodb::bson::doc! { "$unset": { "name_keys": "" } },
        )
        .await
        .expect("unset");
    db.collection::<mongodb::bson::Document>("server")
        .delete_one(mongodb::bson::doc! { "_id": "name_keys" })
        .await
        .expect("forget the upgrade");
    let server = Running::start(config).await;
    for (discussion, name) in &discussions {
        let body = guest_post(
            &server,
            "203.0.113.60",
            discussion,
            None,
            &name.to_uppercase(),
            "impostor",
        )
        .await;
        assert_eq!(outcome(&body), "BAD_USER_INPUT", "{name}: {body:#}");
    }
    let discussion = discussions[1].0.clone();
    let body = guest_post(&server, "203.0.113.60", &discussion, None, "Ada", "a guest").await;
    assert_eq!(outcome(&body), "ok", "{body:#}");
    server.shutdown().await;
}
