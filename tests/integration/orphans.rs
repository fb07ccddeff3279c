//! The embedded development database never outlives `threadql serve`: a threadql killed with
//! `kill -9` leaves it running, and the next start on the same data directory stops it first.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::support::{graphql_data_at, token, SECRET};

/// How long a start or a stop may take before the test gives up.
const DEADLINE: Duration = Duration::from_secs(120);

/// The ids of every live `secantusd-rs` whose command line names `data_dir`.
pub(crate) fn databases_on(data_dir: &Path) -> Vec<u32> {
    let needle = data_dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|id| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{id}/cmdline")) else {
                return false;
            };
            let args: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect();
            args.first()
                .is_some_and(|program| program.ends_with("secantusd-rs"))
                && args.iter().any(|arg| arg.contains(&needle))
        })
        .collect()
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `threadql serve` with its own development database in `data_dir`, and waits until it
/// answers `/healthz`. Returns the process and its base URL.
async fn serve_process(data_dir: &Path) -> (Child, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_threadql"))
        .arg("serve")
        .env_remove("THREADQL_MONGODB_URI")
        .env("THREADQL_LISTEN", format!("127.0.0.1:{port}"))
        .env("THREADQL_DATA_DIR", data_dir)
        .env("THREADQL_JWT_SECRET", SECRET)
        .env("THREADQL_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn threadql serve");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        let health = client.get(format!("{base}/healthz")).send().await;
        if health.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "threadql serve never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, base)
}

/// Waits until `check` holds, failing after the deadline.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < DEADLINE, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Kills whatever database is still running on the data directory when the test ends, so a
/// failing run leaves nothing behind.
pub(crate) struct Cleanup<'a>(pub(crate) &'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for id in databases_on(self.0) {
            let _ = kill(Pid::from_raw(i32::try_from(id).unwrap()), Signal::SIGKILL);
        }
    }
}

fn signal(child: &Child, signal: Signal) {
    let id = i32::try_from(child.id().expect("a running process")).unwrap();
    kill(Pid::from_raw(id), signal).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_threadql_leaves_no_second_database_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().canonicalize().unwrap().join("data");
    let _cleanup = Cleanup(&data_dir);

    let (mut first, base) = serve_process(&data_dir).await;
    let created = graphql_data_at(
        &format!("{base}/graphql"),
        &token("orphans", "Orphans"),
        "mutation($t: String!) { createDiscussion(input: {title: $t}) { id } }",
        json!({ "t": "still here" }),
    )
    .await;
    let id = created["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(databases_on(&data_dir).len(), 1, "one database runs");

    signal(&first, Signal::SIGKILL);
    first.wait().await.unwrap();
    let leftover = databases_on(&data_dir);
    assert_eq!(leftover.len(), 1, "kill -9 cannot stop the database itself");

    let (mut second, base) = serve_process(&data_dir).await;
    let running = databases_on(&data_dir);
    assert_eq!(running.len(), 1, "exactly one database runs: {running:?}");
    assert_ne!(running, leftover, "the leftover was stopped");
    let read = graphql_data_at(
        &format!("{base}/graphql"),
        &token("orphans", "Orphans"),
        "query($d: ID!) { discussion(id: $d) { title } }",
        json!({ "d": id }),
    )
    .await;
    assert_eq!(read["discussion"]["title"], "still here");

    signal(&second, Signal::SIGTERM);
    assert!(second.wait().await.unwrap().success());
    eventually("the database stops with threadql", || {
        databases_on(&data_dir).is_empty()
    })
    .await;
}
