//! The public GraphQL-over-HTTP conformance audit (`serverAudits` of the `graphql-http` package,
//! run by tests/node/audit.mjs) against a real server: every MUST and every SHOULD audit passes.

use std::time::Duration;

use serde_json::Value;
use threadql::domain::Layout;

use crate::node;
use crate::support::{unique_db, Running, Settings};

/// The longest the whole audit may take.
const AUDIT_TIMEOUT: Duration = Duration::from_secs(180);

/// `ok` of `total` audits at one requirement level of the summary.
fn level(summary: &Value, name: &str) -> (u64, u64) {
    let counts = &summary[name];
    match (counts["ok"].as_u64(), counts["total"].as_u64()) {
        (Some(ok), Some(total)) => (ok, total),
        _ => panic!("the AUDIT summary has no {name} counts: {summary}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_over_http_audit_passes_every_must_and_should() {
    node::require("graphql-http").await;
    let server =
        Running::start(Settings::new(Layout::PerComment).config(&unique_db("audit"))).await;
    let url = server.url("/graphql");
    let (summary, output) = node::summary("audit.mjs", &[&url], &[], "AUDIT", AUDIT_TIMEOUT).await;
    server.shutdown().await;
    let stdout = String::from_utf8_lossy(&output.stdout);

    let (must_ok, must_total) = level(&summary, "must");
    let (should_ok, should_total) = level(&summary, "should");
    let (may_ok, may_total) = level(&summary, "may");
    println!(
        "graphql-http audit of {url}: MUST {must_ok}/{must_total} ok, SHOULD {should_ok}/{should_total} ok, MAY {may_ok}/{may_total} ok"
    );
    assert!(
        must_total > 0 && should_total > 0,
        "the audit ran no MUST or no SHOULD audits: {summary}"
    );

    let failed: Vec<&str> = summary["failed"]
        .as_array()
        .unwrap_or_else(|| panic!("the AUDIT summary has no failed list: {summary}"))
        .iter()
        .map(|name| name.as_str().unwrap_or("<not a string>"))
        .collect();
    // Each failing audit with the reason its output line gives.
    let report: Vec<&str> = failed
        .iter()
        .map(|name| {
            stdout
                .lines()
                .find(|l| l.contains(&format!("  {name}  ")) || l.ends_with(&format!("  {name}")))
                .unwrap_or(name)
        })
        .collect();
    assert!(
        must_ok == must_total && should_ok == should_total && failed.is_empty(),
        "GraphQL-over-HTTP audit: MUST {must_ok}/{must_total} ok, SHOULD {should_ok}/{should_total} ok; \
         {} failing:\n{}",
        failed.len(),
        report.join("\n")
    );
}
