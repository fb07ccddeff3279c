//! The test run's database server (started once, or taken from `THREADQL_MONGODB_URI`) and a
//! fresh database name for each test.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use threadql::store::embedded_db::EmbeddedDb;

/// The connection string of the test run's database server: `THREADQL_MONGODB_URI` if set,
/// otherwise one `secantusd-rs` started for the whole run. A watchdog stops it when the test
/// process exits, and removes its files.
pub(crate) fn server_uri() -> &'static str {
    static URI: OnceLock<String> = OnceLock::new();
    URI.get_or_init(|| {
        if let Ok(uri) = std::env::var("THREADQL_MONGODB_URI") {
            return uri;
        }
        let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
        let dir = std::env::temp_dir().join(format!("threadql-test-db-{}", std::process::id()));
        let script = format!(
            "{bin} --host 127.0.0.1 --port 0 --log-level WARNING --log-file-max 32MB --cache-size 1G --storage-path '{dir}' & child=$!; \
             while kill -0 {parent} 2>/dev/null; do sleep 0.5; done; kill -TERM $child; wait $child; rm -rf '{dir}'",
            bin = binary.display(),
            dir = dir.display(),
            parent = std::process::id(),
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the test database");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the test database exited before it listened")
                .expect("read the test database output");
            if let Some(port) = line
                .split("listening on ")
                .nth(1)
                .and_then(|rest| rest.trim().rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok())
            {
                break port;
            }
        };
        std::thread::spawn(move || {
            for _ in lines.by_ref() {}
            let _ = child.wait();
        });
        format!("mongodb://127.0.0.1:{port}/?directConnection=true")
    })
}

/// A unique database name for one test.
pub(crate) fn unique_db(label: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let label: String = label
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(30)
        .collect();
    format!("t{}_{}_{}", std::process::id(), n, label)
}
