//! Running the Node tools of tests/node (audit, federation, clients) from a test, and reading the
//! one-line JSON summary each prints.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

/// What to do when a Node test cannot run at all.
pub const SETUP: &str = "the Node tests need Node 20 (or newer) and npm: install them, then run \
                         ./scripts/install-deps.sh (it runs `npm ci` in tests/node)";

/// The directory of the Node tools and their packages.
pub fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Runs `node` with `args` in tests/node, killing it and failing the test after `timeout`, and
/// failing the test with setup instructions when there is no `node` to run.
pub async fn node(args: &[&str], timeout: Duration) -> Output {
    let mut command = Command::new("node");
    command
        .args(args)
        .current_dir(node_dir())
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

/// Fails the test unless Node 20+ and every package of tests/node/package.json are installed.
pub async fn require_node() {
    let output = node(&["--version"], Duration::from_secs(30)).await;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let major = version
        .strip_prefix('v')
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    assert!(
        output.status.success() && major.is_some_and(|m| m >= 20),
        "`node --version` gave {version:?}: {SETUP}"
    );
    let manifest = std::fs::read_to_string(node_dir().join("package.json"))
        .expect("read tests/node/package.json");
    let manifest: Value = serde_json::from_str(&manifest).expect("tests/node/package.json is JSON");
    let packages = manifest["dependencies"]
        .as_object()
        .expect("tests/node/package.json has dependencies");
    for package in packages.keys() {
        let installed = node_dir()
            .join("node_modules")
            .join(package)
            .join("package.json");
        assert!(
            installed.is_file(),
            "{} is missing: {SETUP}",
            installed.display()
        );
    }
}

/// Runs a script of tests/node with `args`, echoes its output, and returns the JSON of its last
/// line starting with `<label> ` together with its stdout and exit status (fails the test when
/// there is no such line).
pub async fn run_script(
    script: &str,
    args: &[&str],
    label: &str,
    timeout: Duration,
) -> (Value, String, Output) {
    let path = node_dir().join(script);
    let path = path.to_string_lossy();
    let mut all = vec![path.as_ref()];
    all.extend_from_slice(args);
    let output = node(&all, timeout).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
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
    (summary, stdout, output)
}
