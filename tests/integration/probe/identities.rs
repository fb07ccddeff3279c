//! Identities over real sockets: a token's `sub` is an id `banUser` accepts and its `name` a
//! name the service may show, or every request with it is UNAUTHENTICATED with the reason;
//! names moderators reserve are refused at once on the server that reserved them, within
//! seconds on the others, and accepted again once released.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use crate::live::{Protocol, Ws};
use crate::support::{
    error_code, moderator_token, one_shot_client, post_graphql, refusal_of, refused_within,
    server_config, token, Running,
};

const CREATE: &str = crate::support::CREATE_AS;
const BAN: &str = "mutation($u: ID!) { banUser(userId: $u) { userId } }";
const RESERVE: &str = "mutation($n: String!, $r: String) { reserveName(name: $n, reason: $r) { name reason by { id } } }";
const RELEASE: &str = "mutation($n: String!) { releaseName(name: $n) }";
const RESERVED: &str = "{ reservedNames { name reason } }";
const LOG: &str = "{ moderationLog(first: 20) { nodes { action reason detail } } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_whose_sub_no_ban_could_name_are_refused_with_the_reason() {
    let server = Running::start(server_config("probe_subs")).await;
    let client = one_shot_client();
    let moderator = moderator_token("mod", "Mo");
    for sub in ["x".repeat(300), "\u{200B}".to_owned(), "x\ny".to_owned()] {
        let (_, response) = post_graphql(
            &client,
            &server,
            Some(&token(&sub, "Ann")),
            CREATE,
            json!({}),
        )
        .await;
        let (code, message) = refusal_of(&response);
        assert_eq!(code, "UNAUTHENTICATED", "{sub:?}: {response:#}");
        assert!(message.contains("user id"), "{sub:?}: {message}");
        assert!(
            response["data"]["createDiscussion"].is_null(),
            "{response:#}"
        );
        // The same rule as banUser's: what no token may carry, no ban can name.
        let (_, banned) =
            post_graphql(&client, &server, Some(&moderator), BAN, json!({ "u": sub })).await;
        assert_eq!(error_code(&banned), "BAD_USER_INPUT", "{banned:#}");
    }
    // The longest id a ban accepts is a token's too.
    let longest = "y".repeat(256);
    let (_, response) = post_graphql(
        &client,
        &server,
        Some(&token(&longest, "Ann")),
        CREATE,
        json!({}),
    )
    .await;
    assert!(response.get("errors").is_none(), "{response:#}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_with_names_the_service_must_not_show_are_refused() {
    let server = Running::start(server_config("probe_names")).await;
    let client = one_shot_client();
    for name in [
        "bell\u{7}".to_owned(),
        "x\ny".to_owned(),
        "evil\u{202E}gnp.exe".to_owned(),
        "[deleted]".to_owned(),
        "[Hidden]".to_owned(),
        "[ DELETED ]".to_owned(),
        "\u{200B}".to_owned(),
        "n".repeat(65),
    ] {
        let (_, response) = post_graphql(
            &client,
            &server,
            Some(&token("u1", &name)),
            CREATE,
            json!({}),
        )
        .await;
        let (code, message) = refusal_of(&response);
        assert_eq!(code, "UNAUTHENTICATED", "{name:?}: {response:#}");
        assert!(message.contains("name"), "{name:?}: {message}");
    }
    for fine in ["Ann Smith", "山田 太郎", "שלום", &"n".repeat(64)] {
        let (_, response) = post_graphql(
            &client,
            &server,
            Some(&token("u1", fine)),
            CREATE,
            json!({}),
        )
        .await;
        assert!(response.get("errors").is_none(), "{fine:?}: {response:#}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_moderators_reserve_are_refused_until_released_on_every_server() {
    let config = server_config("probe_reserved");
    let here = Running::start(config.clone()).await;
    let there = Running::start(config).await;
    let client = one_shot_client();
    let moderator = moderator_token("mod", "Mo");
    let user = token("u7", "Ada Admin");

    // Before: the name is anybody's.
    let (_, response) = post_graphql(&client, &here, Some(&user), CREATE, json!({})).await;
    assert!(response.get("errors").is_none(), "{response:#}");
    assert!(!refused_within(&there, CREATE, "Ada Admin", Duration::ZERO).await);

    // Only moderators reserve names, list them, or release them.
    for (query, vars) in [
        (RESERVE, json!({ "n": "Ada Admin" })),
        (RELEASE, json!({ "n": "Ada Admin" })),
        (RESERVED, json!({})),
    ] {
        let (_, response) = post_graphql(&client, &here, Some(&user), query, vars).await;
        assert_eq!(error_code(&response), "FORBIDDEN", "{response:#}");
    }
    for bad in ["", "a\u{202E}b", "[deleted]", &"n".repeat(65)] {
        let (_, response) = post_graphql(
            &client,
            &here,
            Some(&moderator),
            RESERVE,
            json!({ "n": bad }),
        )
        .await;
        assert_eq!(
            error_code(&response),
            "BAD_USER_INPUT",
            "{bad:?}: {response:#}"
        );
    }

    let (_, response) = post_graphql(
        &client,
        &here,
        Some(&moderator),
        RESERVE,
        json!({ "n": "ada admin", "r": "staff only" }),
    )
    .await;
    assert_eq!(
        response["data"]["reserveName"],
        json!({ "name": "ada admin", "reason": "staff only", "by": { "id": "mod" } }),
        "{response:#}"
    );
    // At once where it was reserved, in any spelling; within seconds elsewhere.
    for spelling in [
        "Ada Admin",
        "ADA ADMIN",
        "Ａｄａ Ａｄｍｉｎ",
        "Ada\u{200B}Admin",
    ] {
        assert!(
            refused_within(&here, CREATE, spelling, Duration::ZERO).await,
            "{spelling:?}"
        );
    }
    assert!(refused_within(&there, CREATE, "Ada Admin", Duration::from_secs(12)).await);
    // Over a WebSocket too: the connection is refused with the reason.
    let init = json!({ "Authorization": format!("Bearer {user}") });
    let (_, answer) = Ws::open(&here, Protocol::TransportWs, init.clone()).await;
    match answer {
        Message::Close(Some(frame)) => assert_eq!(frame.code, CloseCode::from(4403)),
        other => panic!("expected a 4403 close, got {other:?}"),
    }
    let (_, answer) = Ws::open(&here, Protocol::LegacyGraphqlWs, init).await;
    let Message::Text(text) = answer else {
        panic!("expected a connection_error, got {answer:?}");
    };
    assert!(
        text.contains("connection_error") && text.contains("reserved"),
        "{text}"
    );

    let data = post_graphql(&client, &here, Some(&moderator), RESERVED, json!({})).await;
    assert_eq!(
        data.1["data"]["reservedNames"],
        json!([{ "name": "ada admin", "reason": "staff only" }])
    );

    // Released in another spelling: accepted again at once here, within seconds there.
    let (_, response) = post_graphql(
        &client,
        &here,
        Some(&moderator),
        RELEASE,
        json!({ "n": "ADA ADMIN" }),
    )
    .await;
    assert_eq!(response["data"]["releaseName"], true, "{response:#}");
    let (_, response) = post_graphql(&client, &here, Some(&user), CREATE, json!({})).await;
    assert!(response.get("errors").is_none(), "{response:#}");
    let started = Instant::now();
    while refused_within(&there, CREATE, "Ada Admin", Duration::ZERO).await {
        assert!(started.elapsed() < Duration::from_secs(12), "still refused");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, response) = post_graphql(
        &client,
        &here,
        Some(&moderator),
        RELEASE,
        json!({ "n": "Ada Admin" }),
    )
    .await;
    assert_eq!(response["data"]["releaseName"], false, "{response:#}");

    let (_, log) = post_graphql(&client, &here, Some(&moderator), LOG, json!({})).await;
    let actions: Vec<&str> = log["data"]["moderationLog"]["nodes"]
        .as_array()
        .expect("log nodes")
        .iter()
        .filter_map(|n| n["action"].as_str())
        .collect();
    assert_eq!(actions, ["RELEASE_NAME", "RESERVE_NAME"], "{log:#}");
    here.shutdown().await;
    there.shutdown().await;
}
