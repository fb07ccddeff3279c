//! The load generator's GraphQL-over-HTTP client.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

/// A keep-alive HTTP client posting GraphQL requests to one endpoint.
#[derive(Clone)]
pub(crate) struct GraphqlClient {
    http: reqwest::Client,
    url: String,
}

/// A GraphQL response body with the time it took to arrive.
pub(crate) struct Timed {
    /// From sending the request to having the whole body.
    pub elapsed: Duration,
    body: Vec<u8>,
}

impl Timed {
    /// Fails when the answer carries GraphQL errors (a cheap scan: the generated texts never
    /// contain a quote).
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        let needle = b"\"errors\"";
        if self.body.windows(needle.len()).any(|w| w == needle) {
            self.data()?;
        }
        Ok(())
    }

    /// The response's `data`, failing on any GraphQL error.
    pub(crate) fn data(&self) -> anyhow::Result<Value> {
        let value: Value =
            serde_json::from_slice(&self.body).context("the response is not JSON")?;
        if let Some(errors) = value.get("errors").and_then(Value::as_array) {
            if !errors.is_empty() {
                bail!("GraphQL errors: {}", Value::Array(errors.clone()));
            }
        }
        Ok(value.get("data").cloned().unwrap_or(Value::Null))
    }
}

impl GraphqlClient {
    /// A client for `url` sharing `http`'s connection pool.
    pub(crate) fn new(http: reqwest::Client, url: String) -> Self {
        Self { http, url }
    }

    /// Sends one request and times it until the whole body has arrived (the body is parsed
    /// afterwards, outside the timing).
    pub(crate) async fn send(
        &self,
        query: &str,
        variables: &Value,
        token: Option<&str>,
    ) -> anyhow::Result<Timed> {
        let body = serde_json::to_vec(&json!({ "query": query, "variables": variables }))?;
        let started = Instant::now();
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        let elapsed = started.elapsed();
        if !status.is_success() {
            bail!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            );
        }
        Ok(Timed {
            elapsed,
            body: bytes.to_vec(),
        })
    }
}

/// The client's HTTP connection pool.
pub(crate) fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(128)
        .timeout(Duration::from_secs(120))
        .build()?)
}
