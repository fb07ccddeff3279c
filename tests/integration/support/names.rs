//! Identities as a server takes them: the refusal a response carries, and waiting until a
//! server refuses a name (a reservation made through another server reaches it within seconds).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::app::error_code;
use super::responses::error_message;
use super::server::{one_shot_client, post_graphql, Running};
use super::tokens::token;

/// A mutation any signed-in user may make: creating a discussion.
pub(crate) const CREATE_AS: &str =
    "mutation { createDiscussion(input: {title: \"who am I\"}) { id } }";

/// The first error of `response`, as (code, message).
pub(crate) fn refusal_of(response: &Value) -> (String, String) {
    (error_code(response), error_message(response).to_owned())
}

/// Sends `mutation` as user `u7` named `name` to `server` until it is refused for a reserved
/// name (true; any other refusal fails the test) or `within` has passed (false).
pub(crate) async fn refused_within(
    server: &Running,
    mutation: &str,
    name: &str,
    within: Duration,
) -> bool {
    let client = one_shot_client();
    let started = Instant::now();
    loop {
        let (_, response) = post_graphql(
            &client,
            server,
            Some(&token("u7", name)),
            mutation,
            json!({}),
        )
        .await;
        if response.get("errors").is_some() {
            let (code, message) = refusal_of(&response);
            assert_eq!(code, "UNAUTHENTICATED", "{response:#}");
            assert!(message.contains("reserved"), "{message}");
            return true;
        }
        if started.elapsed() > within {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
