//! The public GraphQL-over-HTTP conformance audit (`serverAudits` of the `graphql-http` package,
//! run by tests/node/audit.mjs) against a real server: every MUST and every SHOULD audit passes.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use threadql::domain::Layout;
use tokio::process::Command;

use crate::support::{unique_db, Running, Settings};

/// What to do when the audit cannot run at all.
const SETUP: &str = "the GraphQL-over-HTTP audit needs Node 20 (or newer) and npm: install them, \
                     then run ./scripts/install-deps.sh (it runs `npm ci` in tests/node)";

/// The longest the whole audit may take.
const AUDIT_TIMEOUT: Duration = Duration::from_secs(180);

fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Runs `node` with `args` in tests/node, failing the test with setup instructions when there is
/// no `node` to run.
async fn node(args: &[&str]) -> Output {
    let mut command = Command::new("node");
    command
        .args(args)
        .current_dir(node_dir())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(AUDIT_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) if e.kind() == ErrorKind::NotFound => panic!("`node` is not on PATH: {SETUP}"),
        Ok(Err(e)) => panic!("cannot run `node {}`: {e}. {SETUP}", args.join(" ")),
        Err(_) => panic!(
            "`node {}` did not finish within {AUDIT_TIMEOUT:?}",
            args.join(" ")
        ),
    }
}

/// Fails the test unless Node 20+ and the packages of tests/node are installed.
async fn require_node() {
    let output = node(&["--version"]).await;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let major = version
        .strip_prefix('v')
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    assert!(
        output.status.success() && major.is_some_and(|m| m >= 20),
        "`node --version` gave {version:?}: {SETUP}"
    );
    let package = node_dir().join("node_modules/graphql-http/package.json");
    assert!(
        package.is_file(),
        "{} is missing: {SETUP}",
        package.display()
    );
}

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
    require_node().await;
    let server =
        Running::start(Settings::new(Layout::PerComment).config(&unique_db("audit"))).await;
    let url = server.url("/graphql");
    let script = node_dir().join("audit.mjs");
    let output = node(&[&script.to_string_lossy(), &url]).await;
    server.shutdown().await;

    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");

    let line = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("AUDIT "))
        .unwrap_or_else(|| {
            panic!(
                "tests/node/audit.mjs printed no AUDIT summary (exit status {}); stderr:\n{stderr}",
                output.status
            )
        });
    let summary: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("the AUDIT summary is not JSON ({e}): {line}"));
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
