//! Runs the Node scripts of tests/node (the GraphQL-over-HTTP audit, the GraphiQL browser test)
//! with a time limit, failing the test with setup instructions when Node cannot run them.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::Command;

/// What to do when a Node script cannot run at all.
pub const SETUP: &str = "this test needs Node 20 (or newer) and npm: install them, then run \
                         ./scripts/install-deps.sh (it runs `npm ci` in tests/node)";

/// tests/node, where the scripts and their packages are.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Runs `node` with `args` and extra environment variables in tests/node, failing the test with
/// setup instructions when there is no `node` to run, or when it runs longer than `timeout`.
pub async fn run(args: &[&str], envs: &[(&str, &str)], timeout: Duration) -> Output {
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
pub async fn require(package: &str) {
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
