//! Deep ranked offsets and unthrottled signed-in reads: a ranked `offset` is capped, costs each
//! comment it skips, and signed-in callers spend a per-user allowance weighted by cost.

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{
    error_code, layout_name, one_shot_client, post_graphql, server_config, token, Running,
};

const CREATE: &str = "mutation($t: String!, $l: StorageLayout) { createDiscussion(input: {title: $t, layout: $l}) { id } }";
const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";
const VOTE: &str = "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: UP) { slug } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_offsets_are_capped_on_every_layout_and_cost_what_they_skip() {
    let mut config = server_config("probe_ranked_offset");
    // Thirty aliases at the cap skip 30 000 comments: more than this limit allows.
    config.max_complexity = 20_000;
    let server = Running::start(config).await;
    let client = one_shot_client();
    let ann = token("ann", "Ann");
    let bob = token("bob", "Bob");
    for layout in [Layout::PerComment, Layout::Embedded, Layout::Bucketed] {
        let (_, body) = post_graphql(
            &client,
            &server,
            Some(&ann),
            CREATE,
            json!({ "t": "ranked", "l": layout_name(layout) }),
        )
        .await;
        let id = body["data"]["createDiscussion"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{body}"))
            .to_owned();
        let mut slugs = Vec::new();
        for n in 0..3 {
            let (_, body) = post_graphql(
                &client,
                &server,
                Some(&ann),
                POST,
                json!({ "d": id, "t": format!("comment {n}") }),
            )
            .await;
            slugs.push(
                body["data"]["postComment"]["slug"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{body}"))
                    .to_owned(),
            );
        }
        let (_, body) = post_graphql(
            &client,
            &server,
            Some(&bob),
            VOTE,
            json!({ "d": id, "s": slugs[2] }),
        )
        .await;
        assert!(body.get("errors").is_none(), "{body}");

        for (order, field) in [
            ("TOP", "comments"),
            ("BEST", "threads"),
            ("CONTROVERSIAL", "comments"),
        ] {
            let read = |offset: i64| {
                let query = format!(
                    "query($d: ID!, $o: Int) {{ discussion(id: $d) {{ {field}(order: {order}, first: 2, offset: $o) {{ nodes {{ slug }} pageInfo {{ hasPreviousPage }} }} }} }}"
                );
                let (client, server, id) = (&client, &server, &id);
                async move {
                    post_graphql(
                        client,
                        server,
                        None,
                        &query,
                        json!({ "d": id, "o": offset }),
                    )
                    .await
                }
            };
            let (status, body) = read(1).await;
            assert_eq!(status, 200, "{body}");
            let nodes = &body["data"]["discussion"][field]["nodes"];
            assert_eq!(
                nodes.as_array().map(Vec::len),
                Some(2),
                "{layout:?} {order}: {body}"
            );
            if order == "TOP" {
                // The voted comment leads; one skipped, the two others follow in posting order.
                assert_eq!(nodes[0]["slug"], slugs[0].as_str(), "{body}");
            }
            let (_, body) = read(1_000).await;
            assert!(
                body.get("errors").is_none(),
                "{layout:?} {order} at the cap: {body}"
            );
            assert_eq!(
                body["data"]["discussion"][field]["nodes"],
                json!([]),
                "{body}"
            );
            let (_, body) = read(1_001).await;
            assert_eq!(
                error_code(&body),
                "BAD_USER_INPUT",
                "{layout:?} {order}: {body}"
            );
            let message = body["errors"][0]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("at most 1000") && message.contains("after"),
                "{message}"
            );
        }
        // The probe's shape: a deep offset on a ranked order is refused, not read.
        let (_, body) = post_graphql(
            &client,
            &server,
            None,
            "query($d: ID!) { discussion(id: $d) { comments(order: TOP, first: 1, offset: 19990) { nodes { slug } } } }",
            json!({ "d": id }),
        )
        .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        // The same offset in an order an index serves is a bounded read, and allowed.
        let (_, body) = post_graphql(
            &client,
            &server,
            None,
            "query($d: ID!) { discussion(id: $d) { comments(first: 1, offset: 19990) { nodes { slug } } } }",
            json!({ "d": id }),
        )
        .await;
        assert!(body.get("errors").is_none(), "{body}");
        // Thirty aliases at the cap cost the comments they skip: over the cost limit.
        let aliases: Vec<String> = (0..30)
            .map(|i| {
                format!("a{i}: comments(order: TOP, first: 1, offset: 1000) {{ nodes {{ slug }} }}")
            })
            .collect();
        let query = format!(
            "query($d: ID!) {{ discussion(id: $d) {{ {} }} }}",
            aliases.join(" ")
        );
        let (_, body) = post_graphql(&client, &server, None, &query, json!({ "d": id })).await;
        assert_eq!(error_code(&body), "GRAPHQL_VALIDATION_FAILED", "{body}");
        // The same thirty in chronological order are index ranges: within the limit.
        let query = query.replace("order: TOP, ", "");
        let (_, body) = post_graphql(&client, &server, None, &query, json!({ "d": id })).await;
        assert!(body.get("errors").is_none(), "{body}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_in_operations_spend_a_per_user_allowance_weighted_by_cost() {
    let mut config = server_config("probe_signed_in_reads");
    config.rate_limit_reads = "6/60s".parse().expect("rate");
    // A tenth of the cost limit is 100: an operation costing 403 spends 5.
    config.max_complexity = 1_000;
    let server = Running::start(config).await;
    let client = one_shot_client();
    let (ann, bob, cy) = (token("ann", "Ann"), token("bob", "Bob"), token("cy", "Cy"));
    let cheap = "{ discussions(first: 1) { nodes { id } } }";
    for n in 1..=6 {
        let (status, body) = post_graphql(&client, &server, Some(&ann), cheap, json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "operation {n}: {body}");
    }
    let (status, body) = post_graphql(&client, &server, Some(&ann), cheap, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(error_code(&body), "RATE_LIMITED", "{body}");
    assert!(
        body["errors"][0]["extensions"]["retryAfter"]
            .as_u64()
            .is_some_and(|s| s >= 1),
        "{body}"
    );
    // Another user keeps their own allowance; a batch spends one per operation.
    let batch = json!([{ "query": cheap }, { "query": cheap }, { "query": cheap }, { "query": cheap }, { "query": cheap }, { "query": cheap }, { "query": cheap }]);
    let answers: Value = client
        .post(server.url("/graphql"))
        .bearer_auth(&bob)
        .json(&batch)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let answers = answers.as_array().expect("a batch answer");
    assert_eq!(answers.len(), 7, "{answers:?}");
    assert!(
        answers[..6].iter().all(|a| a.get("errors").is_none()),
        "{answers:?}"
    );
    assert_eq!(error_code(&answers[6]), "RATE_LIMITED");
    // An operation that costs 403 (over four tenths of the limit) spends five.
    let heavy = "{ discussion(id: \"000000000000000000000000\") { comments(first: 100) { nodes { slug text author { name } } } } }";
    let (_, body) = post_graphql(&client, &server, Some(&cy), heavy, json!({})).await;
    assert_eq!(error_code(&body), "NOT_FOUND", "it ran: {body}");
    let (_, body) = post_graphql(&client, &server, Some(&cy), cheap, json!({})).await;
    assert!(body.get("errors").is_none(), "the sixth unit: {body}");
    let (_, body) = post_graphql(&client, &server, Some(&cy), cheap, json!({})).await;
    assert_eq!(error_code(&body), "RATE_LIMITED", "{body}");
    // Past the allowance, anonymous reads from the same address are still served.
    let (_, body) = post_graphql(&client, &server, None, cheap, json!({})).await;
    assert!(body.get("errors").is_none(), "{body}");
    server.shutdown().await;
}
