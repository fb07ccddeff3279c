//! An erasure cut short: `threadql serve` is killed (SIGKILL) in the middle of a person's
//! erasure, and the same request sent to a new process finishes it, on every layout. Reads
//! meanwhile show each comment either whole or erased, never half.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{layout_name, server_uri, stored_strings, token, unique_db, Process};

/// The person erased, and how many comments they have.
const CARL: &str = "u-resume-carl";
const CARL_NAME: &str = "Carl Cutshort";
const COMMENTS: usize = 300;

/// One GraphQL request to a process as `token`; its whole body.
async fn ask_process(process: &Process, token: &str, query: &str, variables: Value) -> Value {
    reqwest::Client::new()
        .post(process.url("/graphql"))
        .bearer_auth(token)
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json")
}

/// How many of the stored author ids are erased ones.
async fn erased_ids(database: &str) -> usize {
    stored_strings(database)
        .await
        .iter()
        .filter(|s| s.starts_with("erased:"))
        .count()
}

async fn a_killed_erasure_is_finished_by_running_it_again(layout: Layout) {
    let database = unique_db("erase_resume");
    let env = [
        ("THREADQL_MONGODB_URI", server_uri().to_owned()),
        ("THREADQL_DATABASE", database.clone()),
    ];
    let first = Process::serve(&env).await;
    let carl = token(CARL, CARL_NAME);
    let dana = token("u-resume-dana", "Dana Stays");
    let created = ask_process(
        &first,
        &dana,
        "mutation($l: StorageLayout) { createDiscussion(input: {title: \"resume\", layout: $l}) { id } }",
        json!({ "l": layout_name(layout) }),
    )
    .await;
    let d = created["data"]["createDiscussion"]["id"]
        .as_str()
        .expect("a discussion")
        .to_owned();
    const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
    let mut first_slug = String::new();
    for n in 0..COMMENTS {
        let posted = ask_process(
            &first,
            &carl,
            POST,
            json!({ "d": d, "t": format!("carl-words {n}") }),
        )
        .await;
        if n == 0 {
            first_slug = posted["data"]["postComment"]["slug"]
                .as_str()
                .expect("a slug")
                .to_owned();
        }
    }
    ask_process(
        &first,
        &dana,
        POST,
        json!({ "d": d, "p": first_slug, "t": "dana replies" }),
    )
    .await;
    // Each erased comment names its author once (and once more in the embedded layout's list
    // of authors).
    let per_comment = match layout {
        Layout::Embedded => 2,
        _ => 1,
    };

    let erasing = tokio::spawn({
        let url = first.url("/graphql");
        let carl = carl.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(carl)
                .json(
                    &json!({ "query": "mutation { deleteMyAccount(confirm: \"u-resume-carl\") }" }),
                )
                .send()
                .await
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while erased_ids(&database).await < per_comment {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the erasure never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.signal(Signal::SIGKILL);
    let _ = erasing.await;
    let cut = erased_ids(&database).await / per_comment;
    assert!(
        cut > 0 && cut < COMMENTS,
        "the kill came in the middle: {cut} of {COMMENTS} erased"
    );

    // The same request to a new process finishes it.
    // A transaction the killed process left open holds its writes until the database ends it
    // (its lifetime limit): until then the request is refused as a `CONFLICT`, which says that
    // sending it again is safe.
    let second = Process::serve(&env).await;
    let started = tokio::time::Instant::now();
    loop {
        let done = ask_process(
            &second,
            &carl,
            "mutation { deleteMyAccount(confirm: \"u-resume-carl\") }",
            json!({}),
        )
        .await;
        if done["data"]["deleteMyAccount"] == true {
            break;
        }
        assert_eq!(
            done["errors"][0]["extensions"]["code"], "CONFLICT",
            "{done:#}"
        );
        assert!(started.elapsed() < Duration::from_secs(180), "{done:#}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("finished {:?} after the restart", started.elapsed());
    assert_eq!(erased_ids(&database).await, COMMENTS * per_comment);
    for s in stored_strings(&database).await {
        assert!(
            !s.contains(CARL) && !s.contains(CARL_NAME) && !s.contains("carl-words"),
            "{s:?} is stored after the erasure"
        );
    }
    let read = ask_process(
        &second,
        &dana,
        "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 5) { nodes { slug deleted text author { name } replies(first: 5) { nodes { text } } } } } }",
        json!({ "d": d }),
    )
    .await;
    let discussion = &read["data"]["discussion"];
    assert_eq!(discussion["commentCount"], COMMENTS + 1, "{read:#}");
    let top = &discussion["comments"]["nodes"][0];
    assert_eq!(top["slug"], first_slug.as_str());
    assert_eq!(
        (top["deleted"].clone(), top["text"].clone()),
        (json!(true), Value::Null)
    );
    assert_eq!(top["author"]["name"], "[deleted]");
    assert_eq!(top["replies"]["nodes"][0]["text"], "dana replies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_comment_killed_erasure_is_finished_by_running_it_again() {
    a_killed_erasure_is_finished_by_running_it_again(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_killed_erasure_is_finished_by_running_it_again() {
    a_killed_erasure_is_finished_by_running_it_again(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucketed_killed_erasure_is_finished_by_running_it_again() {
    a_killed_erasure_is_finished_by_running_it_again(Layout::Bucketed).await;
}
