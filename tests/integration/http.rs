//! The HTTP contract, over a real socket: routes, status codes, auth header, metrics, restarts.

use serde_json::{json, Value};

use crate::support::{post_graphql, server_config, sha256_hex, token, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_contract_over_a_real_socket() {
    let server = Running::start(server_config("http_contract")).await;
    let client = reqwest::Client::new();
    let token = token("u7", "Lin");

    let health = client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let ready = client.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 200);

    let page = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.to_lowercase().contains("graphiql") && html.contains("/graphiql/threadql-graphiql.js"),
        "{html}"
    );
    // Its own script (no inline script runs under its policy) points at this server's API.
    let script = client
        .get(server.url("/graphiql/threadql-graphiql.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status().as_u16(), 200);
    assert!(script.text().await.unwrap().contains("/graphql"));

    let create = "mutation { createDiscussion(input: {title: \"over http\"}) { id } }";
    let (status, body) = post_graphql(&client, &server, None, create, json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");

    let (status, body) = post_graphql(&client, &server, Some(&token), create, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let d = body["data"]["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let post = "mutation($d: ID!, $p: String) { postComment(input: {discussionId: $d, parentSlug: $p, text: \"hi\"}) { slug author { name } } }";
    let (_, body) = post_graphql(&client, &server, Some(&token), post, json!({ "d": d })).await;
    assert_eq!(body["data"]["postComment"]["author"]["name"], "Lin");
    let top = body["data"]["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = post_graphql(
        &client,
        &server,
        Some(&token),
        post,
        json!({ "d": d, "p": top }),
    )
    .await;
    assert!(body["data"]["postComment"]["slug"]
        .as_str()
        .unwrap()
        .starts_with(&top));

    // Reads over GET need no token.
    let query = format!("{{ discussion(id: \"{d}\") {{ title commentCount }} }}");
    let response = client
        .get(server.url("/graphql"))
        .query(&[("query", query.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["data"]["discussion"],
        json!({ "title": "over http", "commentCount": 2 })
    );

    // Mutations are refused over GET (no state change from a link or an image tag).
    let response = client
        .get(server.url("/graphql"))
        .query(&[("query", create)])
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 405);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");

    // A body that is not a GraphQL request is a 400 with a GraphQL-shaped error.
    let response = client
        .post(server.url("/graphql"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");

    // A malformed Authorization header is refused on mutations, ignored by nothing.
    let response = client
        .post(server.url("/graphql"))
        .header("authorization", "Token abc")
        .json(&json!({ "query": create }))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");

    let metrics = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("# TYPE threadql_db_commands_total counter"),
        "{metrics}"
    );
    let finds: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("threadql_db_commands_total{command=\"find\"} "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(finds >= 1, "{metrics}");

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_database_keeps_data_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = server_config("restart");
    config.mongodb_uri = None;
    config.data_dir = dir.path().join("data");
    let client = reqwest::Client::new();
    let token = token("u1", "Ada");

    let server = Running::start(config.clone()).await;
    let (_, body) = post_graphql(
        &client,
        &server,
        Some(&token),
        "mutation { createDiscussion(input: {title: \"durable\"}) { id } }",
        json!({}),
    )
    .await;
    let d = body["data"]["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, body) = post_graphql(&client, &server, Some(&token), "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"still here\"}) { slug } }", json!({ "d": d })).await;
    let slug = body["data"]["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    server.shutdown().await;

    let server = Running::start(config).await;
    let (_, body) = post_graphql(
        &client,
        &server,
        None,
        "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { text } discussion(id: $d) { title commentCount } }",
        json!({ "d": d, "s": slug }),
    )
    .await;
    assert_eq!(body["data"]["comment"]["text"], "still here", "{body}");
    assert_eq!(
        body["data"]["discussion"],
        json!({ "title": "durable", "commentCount": 1 })
    );
    server.shutdown().await;
}

/// Posts a raw JSON body with an `Accept` header; returns status, content type and body.
async fn post_accepting(
    client: &reqwest::Client,
    server: &Running,
    accept: Option<&str>,
    body: Value,
) -> (u16, String, Value) {
    let mut request = client.post(server.url("/graphql")).json(&body);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (
        status,
        content_type,
        response.json().await.expect("json body"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_over_http_negotiates_and_codes_its_errors() {
    let server = Running::start(server_config("negotiation")).await;
    let client = reqwest::Client::new();
    let graphql_response = "application/graphql-response+json";
    let ok = json!({ "query": "{ discussions(first: 1) { nodes { id } } }" });
    let parse = json!({ "query": "{ discussions(first: " });
    let invalid = json!({ "query": "{ nope }" });
    let bad_variable = json!({
        "query": "query($n: Int) { discussions(first: $n) { nodes { id } } }",
        "variables": { "n": "ten" },
    });

    // application/graphql-response+json: 200 for results, 400 without `data` for requests that
    // could not run, each error with the code clients know.
    for accept in [
        graphql_response,
        "application/graphql-response+json, application/json;q=0.9",
    ] {
        let (status, content_type, body) =
            post_accepting(&client, &server, Some(accept), ok.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert!(content_type.starts_with(graphql_response), "{content_type}");
        for (request, code) in [
            (&parse, "GRAPHQL_PARSE_FAILED"),
            (&invalid, "GRAPHQL_VALIDATION_FAILED"),
            (&bad_variable, "BAD_USER_INPUT"),
        ] {
            let (status, content_type, body) =
                post_accepting(&client, &server, Some(accept), request.clone()).await;
            assert_eq!(status, 400, "{request} -> {body}");
            assert!(content_type.starts_with(graphql_response));
            assert!(body.get("data").is_none(), "{body}");
            assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
        }
    }
    // application/json (or no Accept, or */*): 200 for every GraphQL result.
    for accept in [
        None,
        Some("application/json"),
        Some("*/*"),
        Some("application/json, application/graphql-response+json;q=0.5"),
    ] {
        for (request, code) in [
            (&parse, "GRAPHQL_PARSE_FAILED"),
            (&invalid, "GRAPHQL_VALIDATION_FAILED"),
        ] {
            let (status, content_type, body) =
                post_accepting(&client, &server, accept, request.clone()).await;
            assert_eq!(status, 200, "{accept:?} {body}");
            assert!(
                content_type.starts_with("application/json"),
                "{content_type}"
            );
            assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
        }
    }
    let (status, _, body) = post_accepting(&client, &server, Some("text/html"), ok.clone()).await;
    assert_eq!(status, 406, "{body}");

    // Null propagation stops at the failing root field: the other root fields keep their data.
    let (status, _, body) = post_accepting(
        &client,
        &server,
        Some(graphql_response),
        json!({ "query": "{ missing: discussion(id: \"000000000000000000000000\") { id } discussions(first: 1) { nodes { id } } }" }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["data"]["missing"].is_null(), "{body}");
    assert!(body["data"]["discussions"]["nodes"].is_array(), "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "NOT_FOUND");

    // Automatic persisted queries: the hash alone is unknown first, then works after the full
    // query was sent once, by POST and by GET.
    let query = "{ discussions(first: 2) { nodes { id } } }";
    let hash = sha256_hex(query);
    let persisted = json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } });
    let (_, _, body) =
        post_accepting(&client, &server, None, json!({ "extensions": persisted })).await;
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "PERSISTED_QUERY_NOT_FOUND",
        "{body}"
    );
    assert_eq!(body["errors"][0]["message"], "PersistedQueryNotFound");
    let (_, _, body) = post_accepting(
        &client,
        &server,
        None,
        json!({ "query": query, "extensions": persisted }),
    )
    .await;
    assert!(body["data"]["discussions"]["nodes"].is_array(), "{body}");
    let (_, _, body) =
        post_accepting(&client, &server, None, json!({ "extensions": persisted })).await;
    assert!(body["data"]["discussions"]["nodes"].is_array(), "{body}");
    let url = format!(
        "{}?extensions={}",
        server.url("/graphql"),
        urlencode(&persisted.to_string())
    );
    let body: Value = client.get(url).send().await.unwrap().json().await.unwrap();
    assert!(body["data"]["discussions"]["nodes"].is_array(), "{body}");
    server.shutdown().await;
}

/// The engine's own refusals, raised before it runs anything, keep the codes clients know now
/// that the server checks documents before the engine and codes its errors after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_running_have_their_codes() {
    let server = Running::start(server_config("refusals")).await;
    let client = reqwest::Client::new();
    let sha = sha256_hex;
    // Past the parser's recursion limit (32 nested selections), though within the token limit.
    let deep = format!("{}{}", "{ a ".repeat(40), "}".repeat(40));
    let broken = "{ discussions(first: ";
    let two = "query A { discussions(first: 1) { nodes { id } } } query B { discussions(first: 2) { nodes { id } } }";
    let cases = [
        (
            "nested past the parser's limit",
            json!({ "query": deep }),
            "GRAPHQL_PARSE_FAILED",
        ),
        (
            "a persisted query that does not parse",
            json!({ "query": broken, "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha(broken) } } }),
            "GRAPHQL_PARSE_FAILED",
        ),
        (
            "a persisted query whose hash is not its text's",
            json!({ "query": "{ discussions(first: 1) { nodes { id } } }", "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha("other") } } }),
            "BAD_USER_INPUT",
        ),
        (
            "a persisted query of another version",
            json!({ "extensions": { "persistedQuery": { "version": 2, "sha256Hash": sha("x") } } }),
            "BAD_USER_INPUT",
        ),
        (
            "a persisted query extension of the wrong shape",
            json!({ "query": "{ __typename }", "extensions": { "persistedQuery": "yes" } }),
            "BAD_USER_INPUT",
        ),
        (
            "two operations and no name",
            json!({ "query": two }),
            "BAD_USER_INPUT",
        ),
        (
            "an operation name not in the document",
            json!({ "query": two, "operationName": "C" }),
            "BAD_USER_INPUT",
        ),
        (
            "an unknown field",
            json!({ "query": "{ nope }" }),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        (
            "a variable of the wrong type",
            json!({ "query": "query($n: Int) { discussions(first: $n) { nodes { id } } }", "variables": { "n": "ten" } }),
            "BAD_USER_INPUT",
        ),
        (
            "a literal argument of the wrong type",
            json!({ "query": "{ discussions(first: \"ten\") { nodes { id } } }" }),
            "GRAPHQL_VALIDATION_FAILED",
        ),
    ];
    for (what, request, code) in cases {
        let (status, _, body) = post_accepting(&client, &server, None, request).await;
        assert_eq!(status, 200, "{what}: {body}");
        assert!(body["data"].is_null(), "{what}: {body}");
        assert_eq!(
            body["errors"][0]["extensions"]["code"], code,
            "{what}: {body}"
        );
    }
    // Naming one of two operations runs it.
    let (_, _, body) = post_accepting(
        &client,
        &server,
        None,
        json!({ "query": two, "operationName": "B" }),
    )
    .await;
    assert!(body["data"]["discussions"]["nodes"].is_array(), "{body}");
    server.shutdown().await;
}

/// The server keeps documents parsed from the texts it was sent; a text sent again runs afresh
/// with its own variables (a field skipped once is there the next time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_sent_again_runs_with_its_own_variables() {
    let server = Running::start(server_config("documents")).await;
    let client = reqwest::Client::new();
    let token = token("u1", "Ada");
    let (_, created) = post_graphql(
        &client,
        &server,
        Some(&token),
        "mutation { createDiscussion(input: {title: \"kept\"}) { id } }",
        json!({}),
    )
    .await;
    assert!(
        created["data"]["createDiscussion"]["id"].is_string(),
        "{created}"
    );
    let query =
        "query($s: Boolean!) { discussions(first: 1) { nodes { id title @skip(if: $s) } } }";
    for skip in [true, false, true, false] {
        let (_, _, body) = post_accepting(
            &client,
            &server,
            None,
            json!({ "query": query, "variables": { "s": skip } }),
        )
        .await;
        let node = &body["data"]["discussions"]["nodes"][0];
        assert!(node["id"].is_string(), "{body}");
        assert_eq!(node.get("title").is_none(), skip, "skip {skip}: {body}");
    }
    // The same text sent as GET may not write, even when its parse was kept from a POST.
    let mutation = "mutation { createDiscussion(input: {title: \"twice\"}) { id } }";
    let (_, body) = post_graphql(&client, &server, Some(&token), mutation, json!({})).await;
    assert!(body["data"]["createDiscussion"]["id"].is_string(), "{body}");
    let url = format!("{}?query={}", server.url("/graphql"), urlencode(mutation));
    let status = client.get(url).send().await.unwrap().status().as_u16();
    assert_eq!(status, 405);
    server.shutdown().await;
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
