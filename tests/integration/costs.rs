//! Honest query costs over a real socket: counts that read cost what they read, `_entities`
//! costs its selection per representation, and a batch is limited as a whole. Each abusive shape
//! is refused with `GRAPHQL_VALIDATION_FAILED` before any database command (counted on
//! `/metrics`), while ordinary queries of the same shapes still run.

use serde_json::{json, Value};
use threadql::config::Config;
use threadql::domain::Layout;

use crate::support::{db_commands, post_graphql, server_config, token, Running};

/// A server with `config` over a bucketed discussion of three threads of two comments each;
/// returns it with the discussion's id and its top-level slugs.
async fn world(mut config: Config) -> (Running, String, Vec<String>) {
    // Costs are counted in database commands: without the read cache, whose change feed sends
    // commands of its own and whose hits would spare some.
    config.cache_bytes = 0;
    let server = Running::start(config).await;
    let author = token("costs", "Cost Tester");
    let d = server.discussion(&author, Layout::Bucketed).await;
    let mut threads = Vec::new();
    for i in 0..3 {
        let top = server.post(&author, &d, None, &format!("thread {i}")).await;
        server
            .post(&author, &d, Some(&top), &format!("reply {i}"))
            .await;
        threads.push(top);
    }
    (server, d, threads)
}

/// Posts `body` (one request or a batch) and returns the JSON answer, with the database
/// commands the server sent meanwhile.
async fn send_counted(server: &Running, body: &Value) -> (Value, u64) {
    let client = reqwest::Client::new();
    let before = db_commands(&client, server).await;
    let response = client
        .post(server.url("/graphql"))
        .json(body)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let answer: Value = response.json().await.expect("json");
    (answer, db_commands(&client, server).await - before)
}

/// Asserts that `answer` (a response) was refused for a limit.
fn assert_refused(answer: &Value, what: &str) {
    assert!(answer["data"].is_null(), "{what}: {answer:#}");
    assert_eq!(
        answer["errors"][0]["extensions"]["code"], "GRAPHQL_VALIDATION_FAILED",
        "{what}: {answer:#}"
    );
}

/// Asserts that `answer` (a response) ran without errors.
fn assert_ran(answer: &Value, what: &str) {
    assert!(
        answer.get("errors").is_none() && !answer["data"].is_null(),
        "{what}: {answer:#}"
    );
}

/// 30 aliases of a page of 100 comments, each asking its sub-discussion's `totalCount` with
/// `first: 0`, read 3 000 subtrees while costing about 6 000 (each count cost 1). A count that
/// reads now costs a page of the largest size, so the document is refused before it reads
/// anything; a page of counts that fits the limit still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_that_read_cost_what_they_read() {
    let (server, d, _) = world(server_config("costs_counts")).await;
    let client = reqwest::Client::new();
    let aliased = format!(
        "query($d: ID!) {{ discussion(id: $d) {{ {} }} }}",
        (0..30)
            .map(|i| format!(
                "c{i}: comments(first: 100, offset: {}) {{ nodes {{ subDiscussion(first: 0) {{ totalCount }} }} }}",
                i * 100
            ))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (answer, commands) = send_counted(
        &server,
        &json!({ "query": aliased, "variables": { "d": d } }),
    )
    .await;
    assert_refused(&answer, "30 aliased pages of sub-discussion counts");
    assert_eq!(commands, 0, "a refused document reads nothing");

    // A fragment on the connection does not hide the count.
    let hidden = format!(
        "query($d: ID!) {{ discussion(id: $d) {{ {} }} }} fragment N on CommentConnection {{ totalCount }}",
        (0..30)
            .map(|i| format!(
                "c{i}: comments(first: 100, offset: {}) {{ nodes {{ subDiscussion(first: 0) {{ ...N }} }} }}",
                i * 100
            ))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (answer, commands) = send_counted(
        &server,
        &json!({ "query": hidden, "variables": { "d": d } }),
    )
    .await;
    assert_refused(&answer, "counts behind a fragment");
    assert_eq!(commands, 0);

    // One page of counts fits the default limit, and counters kept with the data stay cheap.
    let (status, body) = post_graphql(
        &client,
        &server,
        None,
        "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 100) { totalCount nodes { replyCount subDiscussion(first: 0) { totalCount } } } } }",
        json!({ "d": d }),
    )
    .await;
    assert_eq!(status, 200);
    assert_ran(&body, "one page of counts");
    let counts: Vec<u64> = body["data"]["discussion"]["comments"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["subDiscussion"]["totalCount"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 0, 1, 0, 1, 0]);
    server.shutdown().await;
}

/// `_entities` used to cost its selection once, however many representations it was sent: 2 200
/// sub-discussion pages came back under a limit of 400. Now each representation costs the
/// selection again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_cost_their_selection_per_representation() {
    let mut config = server_config("costs_entities");
    config.max_complexity = 400;
    let (server, d, threads) = world(config).await;
    let query = "query($r: [_Any!]!) { _entities(representations: $r) { ... on Comment { slug subDiscussion(first: 10) { nodes { slug text } } } } }";
    let representations = |n: usize| {
        (0..n)
            .map(|i| json!({ "__typename": "Comment", "discussionId": d, "slug": threads[i % threads.len()] }))
            .collect::<Vec<_>>()
    };
    let (answer, commands) = send_counted(
        &server,
        &json!({ "query": query, "variables": { "r": representations(2_200) } }),
    )
    .await;
    assert_refused(&answer, "2 200 representations");
    assert_eq!(commands, 0, "a refused document reads nothing");
    // The same representations written into the document.
    let inline = format!(
        "{{ _entities(representations: [{}]) {{ ... on Comment {{ subDiscussion(first: 10) {{ nodes {{ slug }} }} }} }} }}",
        (0..100)
            .map(|i| format!(
                "{{__typename: \"Comment\", discussionId: \"{d}\", slug: \"{}\"}}",
                threads[i % threads.len()]
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (answer, commands) = send_counted(&server, &json!({ "query": inline })).await;
    assert_refused(&answer, "100 representations in the document");
    assert_eq!(commands, 0);

    // A gateway's ordinary fetch: a few representations, under the same limit.
    let (answer, _) = send_counted(
        &server,
        &json!({ "query": query, "variables": { "r": representations(3) } }),
    )
    .await;
    assert_ran(&answer, "3 representations");
    let entities = answer["data"]["_entities"].as_array().unwrap();
    assert_eq!(entities.len(), 3);
    for entity in entities {
        assert_eq!(
            entity["subDiscussion"]["nodes"].as_array().unwrap().len(),
            1
        );
    }
    server.shutdown().await;
}

/// The operations of a batch used to be limited one by one, so a batch of ten cost ten times
/// the limit. Their costs, aliases and root fields are now summed against the limits: over any
/// of them, no operation runs and each gets the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_limited_as_a_whole() {
    let mut config = server_config("costs_batch");
    config.max_complexity = 400;
    config.max_aliases = 6;
    config.max_root_fields = 6;
    let (server, d, _) = world(config).await;
    // About 100 each: under the limit alone, 1 000 together.
    let costly =
        "query($d: ID!) { discussion(id: $d) { comments(first: 50) { nodes { slug text } } } }";
    let operation = json!({ "query": costly, "variables": { "d": d } });
    let (answer, commands) = send_counted(&server, &Value::Array(vec![operation; 10])).await;
    let answers = answer.as_array().expect("one answer per operation");
    assert_eq!(answers.len(), 10);
    for (i, answer) in answers.iter().enumerate() {
        assert_refused(answer, &format!("costly operation {i} of a batch"));
    }
    assert_eq!(commands, 0, "a refused batch reads nothing");

    // Aliases and root fields add up too.
    let aliased = "query($d: ID!) { a: discussion(id: $d) { t: title } }";
    let (answer, commands) = send_counted(
        &server,
        &Value::Array(vec![
            json!({ "query": aliased, "variables": { "d": d } });
            4
        ]),
    )
    .await;
    for answer in answer.as_array().unwrap() {
        assert_refused(answer, "8 aliases in a batch");
    }
    assert_eq!(commands, 0);
    let rooted = "query($d: ID!) { discussion(id: $d) { title } }";
    let (answer, commands) = send_counted(
        &server,
        &Value::Array(vec![json!({ "query": rooted, "variables": { "d": d } }); 7]),
    )
    .await;
    for answer in answer.as_array().unwrap() {
        assert_refused(answer, "7 root fields in a batch");
    }
    assert_eq!(commands, 0);

    // Within every limit, the batch runs, in order; an operation refused on its own is refused
    // alone.
    let (answer, _) = send_counted(
        &server,
        &json!([
            { "query": rooted, "variables": { "d": d } },
            { "query": "{ discussions(first: 1000000) { nodes { id } } }" },
            { "query": costly, "variables": { "d": d } },
        ]),
    )
    .await;
    let answers = answer.as_array().unwrap();
    assert_ran(&answers[0], "a cheap operation");
    assert_refused(&answers[1], "an operation too costly alone");
    assert_ran(&answers[2], "a costly operation alone");
    assert_eq!(
        answers[2]["data"]["discussion"]["comments"]["nodes"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    server.shutdown().await;
}

/// Under the default limits, the tree a comment widget asks for (20 threads, replies 10, 10 and 5
/// deep, about 12 000 potential comments) runs; `first: 100` four levels deep is refused with a
/// message that states its cost and the limit and names the connections driving the cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_run_a_widget_tree_and_explain_a_refusal() {
    let (server, d, _) = world(server_config("costs_defaults")).await;
    let tree = "query Tree($d: ID!) { discussion(id: $d) { threads(first: 20) { nodes { ...C replies(first: 10) { nodes { ...C replies(first: 10) { nodes { ...C replies(first: 5) { nodes { ...C } } } } } } } } } } fragment C on Comment { slug text author { name } posted replyCount }";
    let (answer, _) =
        send_counted(&server, &json!({ "query": tree, "variables": { "d": d } })).await;
    assert_ran(&answer, "the widget tree");
    assert_eq!(
        answer["data"]["discussion"]["threads"]["nodes"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    let wide = "query Wide($d: ID!) { discussion(id: $d) { threads(first: 100) { nodes { slug replies(first: 100) { nodes { slug replies(first: 100) { nodes { slug big: replies(first: 100) { nodes { slug } } } } } } } } } }";
    let (answer, commands) =
        send_counted(&server, &json!({ "query": wide, "variables": { "d": d } })).await;
    assert_refused(&answer, "four levels of 100");
    assert_eq!(commands, 0, "refused before any database command");
    let error = &answer["errors"][0];
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains("`threads(first: 100)`")
            && message.contains("`replies(first: 100)`")
            && message.contains("`big: replies(first: 100)`"),
        "{message}"
    );
    let limit = Config::defaults().expect("defaults").max_complexity;
    assert!(
        message.contains(&format!("more than the limit of {limit}")),
        "{message}"
    );
    assert_eq!(error["extensions"]["maxCost"], limit);
    let cost = error["extensions"]["cost"].as_u64().expect("cost");
    assert!(cost > 100_000_000, "{cost}");
    assert!(message.contains(&format!("costs {cost}")), "{message}");
}
