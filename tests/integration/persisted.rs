//! Automatic persisted queries over a real socket: a document is kept only once it has passed
//! every limit, and the cache is bounded in bytes, least recently used dropped first.

use serde_json::{json, Value};

use crate::support::{db_commands, error_code, server_config, sha256_hex, Running};

/// Sends `query` with its hash (`with_text`) or its hash alone; returns the answer and the
/// database commands the server sent meanwhile.
async fn persisted(server: &Running, query: &str, with_text: bool) -> (Value, u64) {
    let client = reqwest::Client::new();
    let extensions = json!({ "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(query) } });
    let body = match with_text {
        true => json!({ "query": query, "extensions": extensions }),
        false => json!({ "extensions": extensions }),
    };
    let before = db_commands(&client, server).await;
    let answer: Value = client
        .post(server.url("/graphql"))
        .json(&body)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    (answer, db_commands(&client, server).await - before)
}

/// A document refused by a limit (aliases, root fields, depth, cost) used to be kept before it
/// was checked, so refused documents could fill the cache. Now it is not kept: its hash alone is
/// still unknown. A document that passes is kept as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_document_is_not_persisted() {
    let mut config = server_config("apq_refused");
    // Without the read cache no change feed reads beside the requests (commands are counted).
    config.cache_bytes = 0;
    config.max_aliases = 2;
    config.max_root_fields = 2;
    config.max_query_depth = 5;
    config.max_complexity = 100;
    let server = Running::start(config).await;
    let refused = [
        ("aliases", "{ discussions(first: 1) { a: totalCount b: totalCount c: totalCount } }".to_owned()),
        ("root fields", "{ a: __typename discussions(first: 1) { totalCount } d2: discussions(first: 2) { totalCount } d3: discussions(first: 3) { totalCount } }".to_owned()),
        (
            "depth",
            format!(
                "{{ comment(discussionId: \"000000000000000000000000\", slug: \"abc\") {{ {} slug {} }} }}",
                "parent { ".repeat(5),
                "} ".repeat(5)
            ),
        ),
        ("cost", "{ discussions(first: 100) { nodes { id title } } }".to_owned()),
    ];
    for (limit, query) in &refused {
        let (answer, commands) = persisted(&server, query, true).await;
        assert_eq!(
            error_code(&answer),
            "GRAPHQL_VALIDATION_FAILED",
            "{limit}: {answer:#}"
        );
        assert_eq!(commands, 0, "{limit}");
        let (answer, commands) = persisted(&server, query, false).await;
        assert_eq!(
            error_code(&answer),
            "PERSISTED_QUERY_NOT_FOUND",
            "{limit}: {answer:#}"
        );
        assert_eq!(commands, 0, "{limit}");
    }
    let fine = "{ discussions(first: 2) { nodes { id } } }";
    let (answer, _) = persisted(&server, fine, true).await;
    assert!(answer.get("errors").is_none(), "{answer:#}");
    let (answer, _) = persisted(&server, fine, false).await;
    assert!(
        answer["data"]["discussions"]["nodes"].is_array(),
        "{answer:#}"
    );
    server.shutdown().await;
}

/// The cache used to be bounded by entries only, so a thousand large documents took about a
/// gigabyte. With a budget of bytes, keeping one more document past it drops the least recently
/// used, and a document larger than the whole budget runs but is not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persisted_cache_is_bounded_in_bytes() {
    let mut config = server_config("apq_bytes");
    // Room for two of the documents below (64 bytes of hash, about 40 of text, 128 of
    // bookkeeping each), not three.
    config.apq_cache_bytes = 600;
    let server = Running::start(config).await;
    let document = |n: usize| format!("{{ discussions(first: {n}) {{ nodes {{ id }} }} }}");
    for n in 1..=3 {
        let (answer, _) = persisted(&server, &document(n), true).await;
        assert!(answer.get("errors").is_none(), "{answer:#}");
    }
    let (answer, _) = persisted(&server, &document(1), false).await;
    assert_eq!(
        error_code(&answer),
        "PERSISTED_QUERY_NOT_FOUND",
        "{answer:#}"
    );
    for n in [2, 3] {
        let (answer, _) = persisted(&server, &document(n), false).await;
        assert!(
            answer["data"]["discussions"]["nodes"].is_array(),
            "{n}: {answer:#}"
        );
    }
    // Using 2 makes 3 the least recently used: registering 4 drops 3.
    persisted(&server, &document(2), false).await;
    persisted(&server, &document(4), true).await;
    let (answer, _) = persisted(&server, &document(3), false).await;
    assert_eq!(
        error_code(&answer),
        "PERSISTED_QUERY_NOT_FOUND",
        "{answer:#}"
    );
    for n in [2, 4] {
        let (answer, _) = persisted(&server, &document(n), false).await;
        assert!(
            answer["data"]["discussions"]["nodes"].is_array(),
            "{n}: {answer:#}"
        );
    }
    // Larger than the budget: it runs, and is not kept (nor does it push the others out).
    let large = format!(
        "{{ discussions(first: 1) {{ nodes {{ id {} }} }} }}",
        (0..28)
            .map(|i| format!("a_rather_long_alias_number_{i}: id"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(large.len() > 600);
    let (answer, _) = persisted(&server, &large, true).await;
    assert!(
        answer["data"]["discussions"]["nodes"].is_array(),
        "{answer:#}"
    );
    let (answer, _) = persisted(&server, &large, false).await;
    assert_eq!(
        error_code(&answer),
        "PERSISTED_QUERY_NOT_FOUND",
        "{answer:#}"
    );
    let (answer, _) = persisted(&server, &document(4), false).await;
    assert!(
        answer["data"]["discussions"]["nodes"].is_array(),
        "{answer:#}"
    );
    server.shutdown().await;
}
