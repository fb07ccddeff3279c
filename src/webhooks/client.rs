//! One HTTP attempt of a delivery: the signed POST, and what the endpoint answered.

use std::error::Error;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use reqwest::{redirect, Client, Response, StatusCode};

use super::address::{check_url, CheckedResolver, ResolveError};
use super::signature::{signature_header, Secret};

/// The most bytes of an endpoint's answer kept (for the delivery log).
const MAX_BODY: usize = 4096;

/// The `User-Agent` of every delivery.
const USER_AGENT: &str = concat!("threadql/", env!("CARGO_PKG_VERSION"));

/// What one attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The endpoint answered 2xx: the message is delivered.
    Succeeded,
    /// The endpoint answered 410 Gone: it asks to receive nothing more.
    Gone,
    /// Anything else: another status, no answer, or an address refused; try again later.
    Retry,
}

/// The record of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// When the attempt was made, in Unix seconds: the signed `webhook-timestamp`.
    pub timestamp: i64,
    /// The status the endpoint answered, if it answered.
    pub status: Option<u16>,
    /// The first 4096 bytes of the answer's body, as lossy UTF-8 (empty without an answer).
    pub body: String,
    /// Why the attempt did not succeed; `None` when it did. Never contains a secret or a
    /// signature.
    pub error: Option<String>,
    /// What the attempt leads to.
    pub outcome: Outcome,
}

impl Attempt {
    /// An attempt that got no answer, for `error`.
    fn unanswered(timestamp: i64, error: String) -> Attempt {
        Attempt {
            timestamp,
            status: None,
            body: String::new(),
            error: Some(error),
            outcome: Outcome::Retry,
        }
    }
}

/// Sends deliveries: one HTTP client with redirects off, a timeout, no proxy from the
/// environment, and a resolver that refuses names with private addresses.
#[derive(Debug, Clone)]
pub struct Sender {
    /// The client every attempt goes through.
    client: Client,
    /// The longest an attempt may take, from connecting to the end of the answer.
    timeout: Duration,
    /// Whether `http` and private addresses are allowed (tests and local development only).
    insecure: bool,
}

impl Sender {
    /// A sender whose attempts give up after `timeout`; `insecure` allows `http` URLs and
    /// private addresses.
    pub fn new(timeout: Duration, insecure: bool) -> Result<Sender, String> {
        let client = Client::builder()
            .redirect(redirect::Policy::none())
            .timeout(timeout)
            .dns_resolver(Arc::new(CheckedResolver { insecure }))
            .user_agent(USER_AGENT)
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))?;
        Ok(Sender {
            client,
            timeout,
            insecure,
        })
    }

    /// Makes one attempt: checks `url`, signs `body` for message `id` with every secret at the
    /// current time, POSTs it and reads at most 4096 bytes of the answer.
    pub async fn send(&self, url: &str, id: &str, body: &[u8], secrets: &[&Secret]) -> Attempt {
        let checked = check_url(url, self.insecure);
        let timestamp = chrono::Utc::now().timestamp();
        let url = match checked {
            Ok(url) => url,
            Err(refused) => return Attempt::unanswered(timestamp, refused),
        };
        let request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                signature_header(secrets, id, timestamp, body),
            )
            .body(body.to_vec());
        match request.send().await {
            Ok(response) => answered(timestamp, response).await,
            Err(error) => Attempt::unanswered(timestamp, self.describe(&error)),
        }
    }

    /// Why a request got no answer, in words that name no URL, secret or signature.
    fn describe(&self, error: &reqwest::Error) -> String {
        if error.is_timeout() {
            return format!("no answer within {}", format_timeout(self.timeout));
        }
        let causes = causes(error);
        if let Some(refused) = causes.iter().find_map(|e| e.downcast_ref::<ResolveError>()) {
            return refused.to_string();
        }
        let refused_connection = causes.iter().any(|e| {
            e.downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
        });
        if refused_connection {
            return "connection refused".to_owned();
        }
        let detail = causes
            .last()
            .map_or_else(|| "no cause given".to_owned(), ToString::to_string);
        if error.is_connect() {
            format!("could not connect: {detail}")
        } else {
            format!("request failed: {detail}")
        }
    }
}

/// The attempt for an answer: the outcome its status decides, and the start of its body.
async fn answered(timestamp: i64, mut response: Response) -> Attempt {
    let status = response.status();
    let (outcome, error) = judge(status);
    let body = read_capped(&mut response).await;
    Attempt {
        timestamp,
        status: Some(status.as_u16()),
        body,
        error,
        outcome,
    }
}

/// What a status leads to, and the error it records.
fn judge(status: StatusCode) -> (Outcome, Option<String>) {
    let code = status.as_u16();
    if status.is_success() {
        (Outcome::Succeeded, None)
    } else if status == StatusCode::GONE {
        (Outcome::Gone, Some(format!("answered {code}: gone")))
    } else if status.is_redirection() {
        let error = format!("answered {code}: redirects are not followed");
        (Outcome::Retry, Some(error))
    } else {
        (Outcome::Retry, Some(format!("answered {code}")))
    }
}

/// The first 4096 bytes of the body as lossy UTF-8, read chunk by chunk; reading stops at the
/// limit or at an error (the status has already decided the outcome).
async fn read_capped(response: &mut Response) -> String {
    let mut kept: Vec<u8> = Vec::new();
    while kept.len() < MAX_BODY {
        let Ok(Some(chunk)) = response.chunk().await else {
            break;
        };
        let room = MAX_BODY - kept.len();
        kept.extend(chunk.iter().take(room));
    }
    String::from_utf8_lossy(without_cut_char(&kept)).into_owned()
}

/// `bytes` without a UTF-8 character the cut at the limit left incomplete at its end, so the
/// lossy text does not grow past the limit.
fn without_cut_char(bytes: &[u8]) -> &[u8] {
    for back in 1..=bytes.len().min(3) {
        let start = bytes.len() - back;
        let byte = bytes[start];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back
        }
        let width = match byte {
            0b1100_0000..=0b1101_1111 => 2,
            0b1110_0000..=0b1110_1111 => 3,
            0b1111_0000..=0b1111_0111 => 4,
            _ => 1,
        };
        return if width > back { &bytes[..start] } else { bytes };
    }
    bytes
}

/// Every cause under `error`, outermost first.
fn causes(error: &reqwest::Error) -> Vec<&(dyn Error + 'static)> {
    let mut found = Vec::new();
    let mut next = error.source();
    while let Some(cause) = next {
        found.push(cause);
        next = cause.source();
    }
    found
}

/// A timeout in words: whole seconds as `N s`, anything else in milliseconds.
fn format_timeout(timeout: Duration) -> String {
    if timeout.subsec_nanos() == 0 {
        format!("{} s", timeout.as_secs())
    } else {
        format!("{} ms", timeout.as_millis())
    }
}

#[cfg(test)]
mod tests;
