//! An SMTP server on a real socket (tests/node/smtp.mjs): it takes messages over plain SMTP,
//! parses each one with mailparser, answers as a test tells it, and reports each message it took.

use std::collections::BTreeMap;
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

/// How long the server may take to listen, or to acknowledge a command.
const SMTP_READY: Duration = Duration::from_secs(30);

/// One message the server took to the end of DATA, as mailparser reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Mail {
    /// The envelope's sender (MAIL FROM).
    pub from: Option<String>,
    /// The envelope's recipients (RCPT TO).
    pub to: Vec<String>,
    /// The decoded subject.
    pub subject: Option<String>,
    /// The text/plain part.
    pub text: Option<String>,
    /// The text/html part.
    pub html: Option<String>,
    /// The Message-ID, as sent (`<…>`).
    pub message_id: Option<String>,
    /// The References, one id (`<…>`) each.
    pub references: Vec<String>,
    /// Every header by lowercased name, unfolded, as sent (repeated ones joined with `\n`).
    pub headers: BTreeMap<String, String>,
    /// The code answered at the end of DATA.
    pub status: u16,
    /// The user name that authenticated, if one did.
    pub user: Option<String>,
}

impl Mail {
    /// The header `name` (lowercase), if it was sent.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// The way to the script's commands: its stdin and its acknowledgements, one command at a time.
struct SmtpCommands {
    stdin: ChildStdin,
    acks: mpsc::UnboundedReceiver<Result<String, String>>,
}

/// A running tests/node/smtp.mjs, stopped when dropped.
pub(crate) struct SmtpServer {
    port: u16,
    commands: Mutex<SmtpCommands>,
    seen: watch::Receiver<Vec<Mail>>,
    reader: JoinHandle<()>,
    // Held for `kill_on_drop`.
    _child: Child,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SmtpServer {
    /// Starts the server (AUTH optional and refused, every message answered 250) and waits until
    /// it listens.
    pub(crate) async fn start() -> SmtpServer {
        node::require("smtp-server").await;
        node::require("mailparser").await;
        let mut child = Command::new("node")
            .arg(node::dir().join("smtp.mjs"))
            .current_dir(node::dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| match e.kind() {
                ErrorKind::NotFound => panic!("`node` is not on PATH: {SETUP}"),
                _ => panic!("cannot run `node smtp.mjs`: {e}. {SETUP}"),
            });
        let stdin = child.stdin.take().expect("the SMTP server's stdin");
        let stdout = child.stdout.take().expect("the SMTP server's stdout");
        let (listening, heard) = oneshot::channel();
        let (ack, acks) = mpsc::unbounded_channel();
        let (seen_tx, seen) = watch::channel(Vec::new());
        let reader = tokio::spawn(read_smtp_lines(stdout, listening, ack, seen_tx));
        let port = match tokio::time::timeout(SMTP_READY, heard).await {
            Ok(Ok(port)) => port,
            Ok(Err(_)) => panic!("tests/node/smtp.mjs exited before it listened: {SETUP}"),
            Err(_) => panic!("tests/node/smtp.mjs did not listen within {SMTP_READY:?}"),
        };
        SmtpServer {
            port,
            commands: Mutex::new(SmtpCommands { stdin, acks }),
            seen,
            reader,
            _child: child,
        }
    }

    /// Where to send: `smtp://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Answers the next messages at the end of DATA with `codes`, in order, then 250 again.
    pub(crate) async fn answer_next(&self, codes: &[u16]) {
        self.command("answer", json!(codes)).await;
    }

    /// Like [`SmtpServer::answer_next`], with the text of each answer.
    pub(crate) async fn answer_next_with(&self, answers: &[(u16, &str)]) {
        let answers: Vec<Value> = answers
            .iter()
            .map(|(code, text)| json!({ "code": code, "text": text }))
            .collect();
        self.command("answer", json!(answers)).await;
    }

    /// Accepts AUTH with this user name and password only.
    pub(crate) async fn accept_credentials(&self, user: &str, pass: &str) {
        self.command("credentials", json!({ "user": user, "pass": pass }))
            .await;
    }

    /// Refuses mail (530) before a successful AUTH, or takes it without one again.
    pub(crate) async fn require_auth(&self, required: bool) {
        self.command("requireAuth", json!(required)).await;
    }

    /// Sends one command and waits for its acknowledgement.
    async fn command(&self, name: &str, value: Value) {
        let mut commands = self.commands.lock().await;
        let line = format!("{}\n", json!({ name: value }));
        commands
            .stdin
            .write_all(line.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("send {name} to the SMTP server: {e}"));
        commands
            .stdin
            .flush()
            .await
            .expect("flush the SMTP server's stdin");
        match tokio::time::timeout(SMTP_READY, commands.acks.recv()).await {
            Ok(Some(Ok(ok))) => {
                assert_eq!(ok, name, "the SMTP server acknowledged another command")
            }
            Ok(Some(Err(error))) => panic!("the SMTP server refused {line}: {error}"),
            Ok(None) => panic!("the SMTP server exited before it acknowledged {name}"),
            Err(_) => panic!("the SMTP server did not acknowledge {name} within {SMTP_READY:?}"),
        }
    }

    /// Every message so far, in the order they ended.
    pub(crate) fn messages(&self) -> Vec<Mail> {
        self.seen.borrow().clone()
    }

    /// Waits until at least `n` messages arrived and returns them all; fails the test, saying how
    /// many did, after `within`.
    pub(crate) async fn wait_for(&self, n: usize, within: Duration) -> Vec<Mail> {
        let mut seen = self.seen.clone();
        let outcome = tokio::time::timeout(within, seen.wait_for(|m| m.len() >= n))
            .await
            .map(|waited| waited.map(|messages| messages.clone()));
        match outcome {
            Ok(Ok(messages)) => messages,
            Ok(Err(_)) => panic!(
                "the SMTP server exited after {} of {n} messages",
                self.seen.borrow().len()
            ),
            Err(_) => panic!(
                "{} of {n} messages arrived within {within:?}: {:#?}",
                self.seen.borrow().len(),
                *self.seen.borrow()
            ),
        }
    }
}

/// Reads the server's stdout to the end: its port, its acknowledgements and its messages.
async fn read_smtp_lines(
    stdout: tokio::process::ChildStdout,
    listening: oneshot::Sender<u16>,
    ack: mpsc::UnboundedSender<Result<String, String>>,
    seen: watch::Sender<Vec<Mail>>,
) {
    let mut listening = Some(listening);
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("the SMTP server printed a line that is not JSON ({e}): {line}")
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
            let mail: Mail = serde_json::from_value(value).unwrap_or_else(|e| {
                panic!("the SMTP server printed an unknown line ({e}): {line}")
            });
            seen.send_modify(|all| all.push(mail));
        }
    }
}
