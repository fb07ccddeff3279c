//! `threadql serve` as a process of its own (what only a process can show: that it exits, and
//! how): started with the environment a test gives, its log lines kept, stopped with a signal.

use std::net::SocketAddr;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::tokens::SECRET;

/// How long a start may take (the embedded database included) before the test gives up.
const START: Duration = Duration::from_secs(120);

/// A `threadql serve` process.
pub(crate) struct Process {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    logs: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Process {
    /// Starts `threadql serve` on a free loopback port, logging at info as text, verifying
    /// tokens with [`SECRET`], without rate limits, with `env` on top; waits until it listens.
    pub(crate) async fn serve(env: &[(&str, String)]) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_threadql"));
        command
            .arg("serve")
            .env("THREADQL_LISTEN", "127.0.0.1:0")
            .env("THREADQL_LOG", "info")
            .env("THREADQL_LOG_FORMAT", "text")
            .env("THREADQL_JWT_SECRET", SECRET)
            .env_remove("THREADQL_JWT_PUBLIC_KEY")
            .env_remove("THREADQL_JWT_JWKS")
            .env_remove("THREADQL_METRICS_LISTEN")
            // The embedded database unless `env` names one.
            .env_remove("THREADQL_MONGODB_URI")
            .env("THREADQL_RATE_LIMIT", "off")
            .env("THREADQL_RATE_LIMIT_ANON", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn threadql serve");
        let stderr = child.stderr.take().expect("stderr");
        let logs = Arc::new(Mutex::new(String::new()));
        let (listening, heard) = oneshot::channel();
        // Read to the end, so the process never blocks on a full pipe.
        let reader = tokio::spawn({
            let logs = logs.clone();
            async move {
                let mut lines = BufReader::new(stderr).lines();
                let mut listening = Some(listening);
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(addr) = listening_at(&line) {
                        if let Some(tell) = listening.take() {
                            let _ = tell.send(addr);
                        }
                    }
                    let mut logs = logs.lock().unwrap();
                    logs.push_str(&line);
                    logs.push('\n');
                }
            }
        });
        let addr = match tokio::time::timeout(START, heard).await {
            Ok(Ok(addr)) => addr,
            _ => panic!("threadql serve never listened:\n{}", logs.lock().unwrap()),
        };
        Process {
            child,
            addr,
            logs,
            reader: Some(reader),
        }
    }

    /// The URL of a path on it.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends it a signal.
    pub(crate) fn signal(&self, signal: Signal) {
        let id = i32::try_from(self.child.id().expect("a running process")).unwrap();
        kill(Pid::from_raw(id), signal).unwrap();
    }

    /// Waits until it has exited, failing the test (with its logs) past `within`; gives its
    /// exit status and everything it logged.
    pub(crate) async fn exit_within(&mut self, within: Duration) -> (ExitStatus, String) {
        let status = match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("wait for threadql"),
            Err(_) => panic!(
                "threadql still runs {within:?} after the signal:\n{}",
                self.logs.lock().unwrap()
            ),
        };
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), reader).await;
        }
        (status, self.logs.lock().unwrap().clone())
    }
}

/// The address of a "threadql listening" log line.
fn listening_at(line: &str) -> Option<SocketAddr> {
    if !line.contains("threadql listening") {
        return None;
    }
    let (_, rest) = line.split_once("http://")?;
    rest.split('/').next()?.parse().ok()
}
