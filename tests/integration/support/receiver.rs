//! A Standard Webhooks receiver on a real socket (tests/node/webhooks.mjs): it verifies every
//! delivery with the reference implementation, answers as a test tells it, and reports each
//! request it took.

use std::io::ErrorKind;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot, watch, Mutex};
use tokio::task::JoinHandle;

use crate::node::{self, SETUP};

/// How long the receiver may take to listen, or to acknowledge a command.
const RECEIVER_READY: Duration = Duration::from_secs(30);

/// One request the receiver took.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Delivery {
    /// Its `webhook-id` header (empty when it had none).
    pub id: String,
    /// Its `webhook-timestamp` header, in Unix seconds (0 when it had none, or not a number).
    pub timestamp: i64,
    /// Its `webhook-signature` header, split on spaces (`v1,<base64>` each).
    pub signatures: Vec<String>,
    /// Whether the reference implementation accepts it, one per secret set, in order.
    pub verified: Vec<bool>,
    /// The status answered; 0 when no answer went out (hanging, or the client left first).
    pub status: u16,
    /// Whether the client closed the connection before an answer went out.
    pub cut: bool,
    /// The body's `type` (empty when there was none).
    pub kind: String,
    /// The body as JSON (null when it was not JSON).
    pub body: Value,
    /// The URL's path.
    pub path: String,
    /// When the request arrived, in Unix milliseconds.
    pub received_at_ms: u64,
}

impl Delivery {
    /// Whether every secret set verifies it (and at least one was set).
    pub(crate) fn verified_by_all(&self) -> bool {
        !self.verified.is_empty() && self.verified.iter().all(|&v| v)
    }

    /// Whether some secret set verifies it.
    pub(crate) fn verified_by_any(&self) -> bool {
        self.verified.iter().any(|&v| v)
    }

    /// Whether an answer went out.
    pub(crate) fn answered(&self) -> bool {
        self.status != 0
    }
}

/// A delivery line as the script prints it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeliveryLine {
    id: Option<String>,
    timestamp: Option<i64>,
    signatures: Vec<String>,
    verified: Vec<bool>,
    status: Option<u16>,
    cut: bool,
    #[serde(rename = "type")]
    kind: Option<String>,
    body: Value,
    path: String,
    received_at: u64,
}

impl From<DeliveryLine> for Delivery {
    fn from(line: DeliveryLine) -> Delivery {
        Delivery {
            id: line.id.unwrap_or_default(),
            timestamp: line.timestamp.unwrap_or_default(),
            signatures: line.signatures,
            verified: line.verified,
            status: line.status.unwrap_or_default(),
            cut: line.cut,
            kind: line.kind.unwrap_or_default(),
            body: line.body,
            path: line.path,
            received_at_ms: line.received_at,
        }
    }
}

/// The way to the script's commands: its stdin and its acknowledgements, one command at a time.
struct Commands {
    stdin: ChildStdin,
    acks: mpsc::UnboundedReceiver<Result<String, String>>,
}

/// A running tests/node/webhooks.mjs, stopped when dropped.
pub(crate) struct Receiver {
    port: u16,
    commands: Mutex<Commands>,
    seen: watch::Receiver<Vec<Delivery>>,
    reader: JoinHandle<()>,
    // Held for `kill_on_drop`.
    _child: Child,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Receiver {
    /// Starts the receiver (no secrets, answering 200 at once) and waits until it listens.
    pub(crate) async fn start() -> Receiver {
        node::require("standardwebhooks").await;
        let mut child = Command::new("node")
            .arg(node::dir().join("webhooks.mjs"))
            .current_dir(node::dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| match e.kind() {
                ErrorKind::NotFound => panic!("`node` is not on PATH: {SETUP}"),
                _ => panic!("cannot run `node webhooks.mjs`: {e}. {SETUP}"),
            });
        let stdin = child.stdin.take().expect("the receiver's stdin");
        let stdout = child.stdout.take().expect("the receiver's stdout");
        let (listening, heard) = oneshot::channel();
        let (ack, acks) = mpsc::unbounded_channel();
        let (seen_tx, seen) = watch::channel(Vec::new());
        let reader = tokio::spawn(read_receiver_lines(stdout, listening, ack, seen_tx));
        let port = match tokio::time::timeout(RECEIVER_READY, heard).await {
            Ok(Ok(port)) => port,
            Ok(Err(_)) => panic!("tests/node/webhooks.mjs exited before it listened: {SETUP}"),
            Err(_) => panic!("tests/node/webhooks.mjs did not listen within {RECEIVER_READY:?}"),
        };
        Receiver {
            port,
            commands: Mutex::new(Commands { stdin, acks }),
            seen,
            reader,
            _child: child,
        }
    }

    /// Where to deliver: `http://127.0.0.1:<port>/hook`.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Verifies every delivery from now on against each of `secrets` (`whsec_…`) separately.
    pub(crate) async fn secrets(&self, secrets: &[&str]) {
        self.command("secrets", json!(secrets)).await;
    }

    /// Answers the next requests with `statuses`, in order, then with the `otherwise` status.
    pub(crate) async fn respond(&self, statuses: &[u16]) {
        self.command("respond", json!(statuses)).await;
    }

    /// Answers with `status` once the `respond` list is used up (200 until told otherwise).
    pub(crate) async fn otherwise(&self, status: u16) {
        self.command("otherwise", json!(status)).await;
    }

    /// Waits `ms` milliseconds before each answer from now on.
    pub(crate) async fn delay_ms(&self, ms: u64) {
        self.command("delayMs", json!(ms)).await;
    }

    /// Takes every request from now on and never answers it.
    pub(crate) async fn hang(&self) {
        self.command("hang", json!(true)).await;
    }

    /// Answers requests again after [`Receiver::hang`].
    pub(crate) async fn stop_hanging(&self) {
        self.command("hang", json!(false)).await;
    }

    /// Sends one command and waits for its acknowledgement.
    async fn command(&self, name: &str, value: Value) {
        let mut commands = self.commands.lock().await;
        let line = format!("{}\n", json!({ name: value }));
        commands
            .stdin
            .write_all(line.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("send {name} to the receiver: {e}"));
        commands
            .stdin
            .flush()
            .await
            .expect("flush the receiver's stdin");
        match tokio::time::timeout(RECEIVER_READY, commands.acks.recv()).await {
            Ok(Some(Ok(ok))) => assert_eq!(ok, name, "the receiver acknowledged another command"),
            Ok(Some(Err(error))) => panic!("the receiver refused {line}: {error}"),
            Ok(None) => panic!("the receiver exited before it acknowledged {name}"),
            Err(_) => panic!("the receiver did not acknowledge {name} within {RECEIVER_READY:?}"),
        }
    }

    /// Every delivery so far, in the order they were reported.
    pub(crate) fn deliveries(&self) -> Vec<Delivery> {
        self.seen.borrow().clone()
    }

    /// Waits until at least `n` deliveries arrived and returns them all; fails the test, saying how
    /// many did, after `within`.
    pub(crate) async fn wait_for(&self, n: usize, within: Duration) -> Vec<Delivery> {
        let mut seen = self.seen.clone();
        let outcome = tokio::time::timeout(within, seen.wait_for(|d| d.len() >= n))
            .await
            .map(|waited| waited.map(|deliveries| deliveries.clone()));
        match outcome {
            Ok(Ok(deliveries)) => deliveries,
            Ok(Err(_)) => panic!(
                "the receiver exited after {} of {n} deliveries",
                self.seen.borrow().len()
            ),
            Err(_) => panic!(
                "{} of {n} deliveries arrived within {within:?}: {:#?}",
                self.seen.borrow().len(),
                *self.seen.borrow()
            ),
        }
    }

    /// Waits until `pred` holds for the deliveries so far and returns them; fails the test, showing
    /// those that came, after `within`.
    pub(crate) async fn wait_until(
        &self,
        pred: impl Fn(&[Delivery]) -> bool,
        within: Duration,
    ) -> Vec<Delivery> {
        let mut seen = self.seen.clone();
        let outcome = tokio::time::timeout(within, seen.wait_for(|d| pred(d)))
            .await
            .map(|waited| waited.map(|deliveries| deliveries.clone()));
        match outcome {
            Ok(Ok(deliveries)) => deliveries,
            Ok(Err(_)) => panic!(
                "the receiver exited before the deliveries were as expected: {:#?}",
                *self.seen.borrow()
            ),
            Err(_) => panic!(
                "the deliveries were not as expected within {within:?}: {:#?}",
                *self.seen.borrow()
            ),
        }
    }
}

/// Reads the receiver's stdout to the end: its port, its acknowledgements and its deliveries.
async fn read_receiver_lines(
    stdout: tokio::process::ChildStdout,
    listening: oneshot::Sender<u16>,
    ack: mpsc::UnboundedSender<Result<String, String>>,
    seen: watch::Sender<Vec<Delivery>>,
) {
    let mut listening = Some(listening);
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("the receiver printed a line that is not JSON ({e}): {line}")
        });
        if let Some(port) = value["listening"].as_u64() {
            let port = u16::try_from(port).expect("a port");
            if let Some(listening) = listening.take() {
                let _ = listening.send(port);
            }
        } else if let Some(name) = value["ok"].as_str() {
            let _ = ack.send(Ok(name.to_owned()));
        } else if let Some(error) = value["error"].as_str() {
            let _ = ack.send(Err(error.to_owned()));
        } else {
            let delivery: DeliveryLine = serde_json::from_value(value)
                .unwrap_or_else(|e| panic!("the receiver printed an unknown line ({e}): {line}"));
            seen.send_modify(|all| all.push(delivery.into()));
        }
    }
}
