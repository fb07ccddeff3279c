//! Servers on a loopback socket, and GraphQL over HTTP to them.

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::{json, Value};
use threadql::app::App;
use threadql::config::{Config, RateLimit};
use threadql::graphql::Api;
use threadql::store::Store;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::app::defaults;
use super::database::{server_uri, unique_db};
use super::tokens::SECRET;

/// The server's defaults on a loopback port over a fresh database, signing with [`SECRET`],
/// without rate limits (votes and signed-in operations included).
pub(crate) fn server_config(label: &str) -> Config {
    let mut config = defaults();
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.mongodb_uri = Some(server_uri().to_owned());
    config.database = unique_db(label);
    config.jwt_secret = Some(SECRET.to_owned());
    config.rate_limit = RateLimit::Off;
    config.rate_limit_anon = RateLimit::Off;
    config.rate_limit_reads = RateLimit::Off;
    config.vote_rate_limit = RateLimit::Off;
    config
}

/// A server on a loopback socket until `shutdown`, with handles on its API and store.
pub(crate) struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its GraphQL API.
    pub api: Api,
    /// Its storage.
    pub store: Arc<Store>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Builds the app from `config` and serves it.
    pub(crate) async fn start(config: Config) -> Running {
        let app = App::build(&config).await.expect("build the app");
        let (addr, api, store) = (app.addr, app.api.clone(), app.store.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(app.serve(async move {
            let _ = stopped.await;
        }));
        Running {
            addr,
            api,
            store,
            stop,
            task,
        }
    }

    /// The URL of a path on it.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Starts a graceful shutdown without waiting for it.
    pub(crate) fn begin_shutdown(&mut self) {
        let (placeholder, _) = oneshot::channel();
        let _ = std::mem::replace(&mut self.stop, placeholder).send(());
    }

    /// Stops it gracefully and waits until it has.
    pub(crate) async fn shutdown(mut self) {
        self.begin_shutdown();
        self.task
            .await
            .expect("server task")
            .expect("server ran cleanly");
    }
}

/// Posts a GraphQL request to a running server, with an optional bearer token; returns the HTTP
/// status and the JSON body.
pub(crate) async fn post_graphql(
    client: &reqwest::Client,
    server: &Running,
    token: Option<&str>,
    query: &str,
    variables: Value,
) -> (u16, Value) {
    let mut request = client
        .post(server.url("/graphql"))
        .json(&json!({ "query": query, "variables": variables }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json body"))
}

/// Runs a GraphQL request over HTTP, with an optional bearer token; returns its `data`, failing
/// the test on any error.
pub(crate) async fn graphql_data(
    client: &reqwest::Client,
    server: &Running,
    token: Option<&str>,
    query: &str,
    variables: Value,
) -> Value {
    let (status, body) = post_graphql(client, server, token, query, variables).await;
    assert!(
        status == 200 && body.get("errors").is_none(),
        "{status} {body:#}"
    );
    body["data"].clone()
}

/// Runs one GraphQL operation at the endpoint `url` as `token`; returns its `data`, failing the
/// test on errors.
pub(crate) async fn graphql_data_at(
    url: &str,
    token: &str,
    query: &str,
    variables: Value,
) -> Value {
    let response: Value = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(response["errors"].is_null(), "{response:#}");
    response["data"].clone()
}

/// A document's SHA-256 in hex, as automatic persisted queries name it.
pub(crate) fn sha256_hex(text: &str) -> String {
    use std::fmt::Write as _;
    let digest = <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes());
    digest.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A gauge or counter from the server's /metrics.
pub(crate) async fn metric(server: &Running, name: &str) -> u64 {
    metric_from(&server.url("/metrics"), name).await
}

/// A gauge or counter from the /metrics at `url`.
pub(crate) async fn metric_from(url: &str, name: &str) -> u64 {
    let body = reqwest::get(url).await.unwrap().text().await.unwrap();
    body.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("/metrics has no {name}:\n{body}"))
        .trim()
        .parse()
        .unwrap()
}

/// One reading of a server's `/metrics`: every sample by its series (`name{labels}` as the
/// page writes it).
pub(crate) struct Scrape {
    /// The page.
    pub text: String,
    samples: std::collections::BTreeMap<String, f64>,
}

impl Scrape {
    /// Reads the server's `/metrics`.
    pub(crate) async fn of(server: &Running) -> Scrape {
        let text = reqwest::get(server.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                let value = match value {
                    "+Inf" => f64::INFINITY,
                    v => v.parse().unwrap_or_else(|_| panic!("not a number: {l}")),
                };
                (series.to_owned(), value)
            })
            .collect();
        Scrape { text, samples }
    }

    /// The sample of `name` with `labels` (in the order the page writes them), if there is one.
    pub(crate) fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples.get(&series(name, labels)).copied()
    }

    /// The sample of `name` with `labels`; 0 when the page has none (a series not yet counted).
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(0.0)
    }

    /// Every series whose name is `name`, with its value.
    pub(crate) fn family(&self, name: &str) -> Vec<(String, f64)> {
        let braced = format!("{name}{{");
        self.samples
            .iter()
            .filter(|(s, _)| s.as_str() == name || s.starts_with(&braced))
            .map(|(s, v)| (s.clone(), *v))
            .collect()
    }
}

/// `name{a="x",b="y"}` (or `name` without labels).
pub(crate) fn series(name: &str, labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return name.to_owned();
    }
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

/// A client that opens a connection per request: the server rightly closes a connection whose
/// request it refused before reading the body (413, 429), and a pooled client could race that
/// close.
pub(crate) fn one_shot_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .pool_max_idle_per_host(0)
        .build()
        .expect("http client")
}
