//! Runs the Node scripts of tests/node (the GraphQL-over-HTTP audit, the GraphiQL browser test,
//! federation, real clients) with a time limit, failing the test with setup instructions when
//! Node cannot run them.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

/// What to do when a Node script cannot run at all.
pub(crate) const SETUP: &str =
    "this test needs Node 20 (or newer) and npm: install them, then run \
                         ./scripts/install-deps.sh (it runs `npm ci` in tests/node)";

/// tests/node, where the scripts and their packages are.
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Runs `node` with `args` and extra environment variables in tests/node, failing the test with
/// setup instructions when there is no `node` to run, or when it runs longer than `timeout`.
pub(crate) async fn run(args: &[&str], envs: &[(&str, &str)], timeout: Duration) -> Output {
    let mut command = Command::new("node");
    command
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(dir())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(timeout, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) if e.kind() == ErrorKind::NotFound => panic!("`node` is not on PATH: {SETUP}"),
        Ok(Err(e)) => panic!("cannot run `node {}`: {e}. {SETUP}", args.join(" ")),
        Err(_) => panic!(
            "`node {}` did not finish within {timeout:?}",
            args.join(" ")
        ),
    }
}

/// Fails the test unless Node 20+ runs and the package `package` of tests/node is installed.
pub(crate) async fn require(package: &str) {
    let output = run(&["--version"], &[], Duration::from_secs(30)).await;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let major = version
        .strip_prefix('v')
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    assert!(
        output.status.success() && major.is_some_and(|m| m >= 20),
        "`node --version` gave {version:?}: {SETUP}"
    );
    let manifest = dir()
        .join("node_modules")
        .join(package)
        .join("package.json");
    assert!(
        manifest.is_file(),
        "{} is missing: {SETUP}",
        manifest.display()
    );
}

/// Runs the script `script` of tests/node with `args` and environment `envs`, echoes its output,
/// and returns the JSON of its last line that starts with `<label> ` (failing the test when there
/// is none), with the output itself.
pub(crate) async fn summary(
    script: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    label: &str,
    timeout: Duration,
) -> (Value, Output) {
    let path = dir().join(script);
    let path = path.to_string_lossy();
    let mut all = vec![path.as_ref()];
    all.extend_from_slice(args);
    let output = run(&all, envs, timeout).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    let prefix = format!("{label} ");
    let line = stdout
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| {
            panic!(
                "tests/node/{script} printed no {label} summary (exit status {}); stderr:\n{stderr}",
                output.status
            )
        });
    let summary: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("the {label} summary is not JSON ({e}): {line}"));
    (summary, output)
}
