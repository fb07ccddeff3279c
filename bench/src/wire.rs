//! Hot reads against the HTTP stack's floor, on the cached server A in one run: `GET /healthz`
//! (what a request costs this stack doing nothing), the first page and the tree read anonymously
//! (the response cache answers them), the same read signed in (the read cache only: a signed-in
//! request never uses the response cache), and a `304` revalidation of the first page by GET.
//! Each is a closed loop of the same clients; rounds interleave them, and medians are reported.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde::Serialize;
use serde_json::{json, Value};

use crate::measure::{LoopRun, Throughput};

/// The least share of `/healthz`'s requests per second an anonymous cached first page must reach.
pub(crate) const FIRST_PAGE_OF_FLOOR: f64 = 0.5;
/// The least share of `/healthz`'s requests per second a `304` must reach.
pub(crate) const NOT_MODIFIED_OF_FLOOR: f64 = 0.8;
/// The least ratio of the anonymous tree (response cache) to the signed-in one (read cache only).
pub(crate) const TREE_OVER_READ_CACHE: f64 = 5.0;

/// One request of a loop, built anew each time.
type Make = Arc<dyn Fn() -> reqwest::RequestBuilder + Send + Sync>;

/// One measured request kind.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WireRead {
    /// What was sent.
    pub label: String,
    /// Its loops.
    pub throughput: Throughput,
    /// Its requests per second ÷ `/healthz`'s.
    pub of_floor: f64,
}

/// Everything measured against the floor on one layout.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Wire {
    /// Concurrent clients of every loop.
    pub clients: usize,
    /// `GET /healthz`, then each read.
    pub reads: Vec<WireRead>,
    /// Anonymous first page ÷ `/healthz` (target [`FIRST_PAGE_OF_FLOOR`]).
    pub first_page_of_floor: f64,
    /// `304` ÷ `/healthz` (target [`NOT_MODIFIED_OF_FLOOR`]).
    pub not_modified_of_floor: f64,
    /// Anonymous tree ÷ signed-in tree (target [`TREE_OVER_READ_CACHE`]).
    pub tree_over_read_cache: f64,
    /// Signed-in first page ÷ `/healthz`, for comparing runs' signed-in paths by ratio.
    pub signed_in_first_page_of_floor: f64,
}

/// What the loops need.
pub(crate) struct Setup<'a> {
    pub http: reqwest::Client,
    /// A's base URL.
    pub base: String,
    /// A signed-in reader's token.
    pub token: String,
    pub first_page: (&'a str, &'a Value),
    pub tree: (&'a str, &'a Value),
    pub clients: usize,
    pub run: Duration,
    pub warmup: Option<Duration>,
    pub rounds: usize,
}

/// A closed loop of `clients` sending `make()`'s request for `duration`, each answer expected
/// with `status` and read whole.
async fn closed(
    make: &Make,
    status: u16,
    clients: usize,
    duration: Duration,
) -> anyhow::Result<LoopRun> {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let make = make.clone();
            tokio::spawn(async move {
                let mut samples = Vec::new();
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    let response = make().send().await?;
                    let got = response.status().as_u16();
                    let body = response.bytes().await?;
                    if got != status {
                        bail!(
                            "HTTP {got} (expected {status}): {}",
                            String::from_utf8_lossy(&body[..body.len().min(300)])
                        );
                    }
                    samples.push(sent.elapsed());
                }
                anyhow::Ok(samples)
            })
        })
        .collect();
    LoopRun::gather(tasks, started).await
}

/// A POST of `query` (as `token` when given).
fn post(setup: &Setup<'_>, (query, variables): (&str, &Value), token: Option<&str>) -> Make {
    let body =
        serde_json::to_vec(&json!({ "query": query, "variables": variables })).unwrap_or_default();
    let (http, url) = (setup.http.clone(), format!("{}/graphql", setup.base));
    let token = token.map(str::to_owned);
    Arc::new(move || {
        let request = http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        match &token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    })
}

/// The URL of a persisted-query GET of `query` (by its hash; with its text too when `text`), as
/// the embed and CDNs send it.
fn get_url(
    base: &str,
    (query, variables): (&str, &Value),
    text: bool,
) -> anyhow::Result<reqwest::Url> {
    use sha2::Digest as _;
    let hash = format!("{:x}", sha2::Sha256::digest(query.as_bytes()));
    let extensions = json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } });
    let mut url = reqwest::Url::parse(&format!("{base}/graphql"))?;
    url.query_pairs_mut()
        .append_pair("extensions", &extensions.to_string())
        .append_pair("variables", &variables.to_string());
    if text {
        url.query_pairs_mut().append_pair("query", query);
    }
    Ok(url)
}

/// Measures the floor and the reads on A (see the module's text).
pub(crate) async fn measure(setup: &Setup<'_>) -> anyhow::Result<Wire> {
    // The query is registered by a GET with its text, then asked by its hash until the answer
    // is kept (three asks admit it); its tag is revalidated.
    let registered = setup
        .http
        .get(get_url(&setup.base, setup.first_page, true)?)
        .send()
        .await?;
    registered.error_for_status()?.bytes().await?;
    let url = get_url(&setup.base, setup.first_page, false)?;
    let mut tag = None;
    for _ in 0..4 {
        let response = setup.http.get(url.clone()).send().await?;
        tag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        response.bytes().await?;
    }
    let tag = tag.context("an anonymous GET of the first page carries no ETag")?;
    let healthz = format!("{}/healthz", setup.base);
    let http = setup.http.clone();
    let floor: Make = Arc::new(move || http.get(&healthz));
    let http = setup.http.clone();
    let revalidate: Make = Arc::new(move || {
        http.get(url.clone())
            .header(reqwest::header::IF_NONE_MATCH, &tag)
    });
    let token = Some(setup.token.as_str());
    let kinds: Vec<(&str, Make, u16)> = vec![
        ("GET /healthz (the floor)", floor, 200),
        (
            "first page, anonymous (response cache)",
            post(setup, setup.first_page, None),
            200,
        ),
        (
            "first page, signed in (read cache)",
            post(setup, setup.first_page, token),
            200,
        ),
        (
            "first page, persisted GET revalidated (304)",
            revalidate,
            304,
        ),
        (
            "tree, anonymous (response cache)",
            post(setup, setup.tree, None),
            200,
        ),
        (
            "tree, signed in (read cache)",
            post(setup, setup.tree, token),
            200,
        ),
    ];
    let mut runs: Vec<Vec<LoopRun>> = vec![Vec::new(); kinds.len()];
    for round in 0..setup.rounds {
        for (n, (label, make, status)) in kinds.iter().enumerate() {
            if let Some(warmup) = setup.warmup {
                closed(make, *status, setup.clients, warmup).await?;
            }
            eprintln!("  round {}: {label}", round + 1);
            runs[n].push(closed(make, *status, setup.clients, setup.run).await?);
        }
    }
    let throughputs: Vec<Throughput> = runs.into_iter().map(Throughput::of).collect();
    let floor = throughputs[0].req_per_sec;
    let of = |n: usize| throughputs[n].req_per_sec / floor.max(1e-9);
    let wire = Wire {
        clients: setup.clients,
        first_page_of_floor: of(1),
        signed_in_first_page_of_floor: of(2),
        not_modified_of_floor: of(3),
        tree_over_read_cache: throughputs[4].req_per_sec / throughputs[5].req_per_sec.max(1e-9),
        reads: kinds
            .iter()
            .zip(throughputs.iter())
            .enumerate()
            .map(|(n, ((label, _, _), throughput))| WireRead {
                label: (*label).to_owned(),
                throughput: throughput.clone(),
                of_floor: of(n),
            })
            .collect(),
    };
    Ok(wire)
}

/// The results as a markdown table, a row per read and layout, and the targets.
pub(crate) fn markdown(results: &[(String, &Wire)]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "| layout | read | req/s | ÷ /healthz | p50 / p99 ms |\n|---|---|---:|---:|---:|\n",
    );
    for (layout, wire) in results {
        for read in &wire.reads {
            let _ = writeln!(
                out,
                "| {layout} | {} | {:.0} | {:.3} | {:.2} / {:.2} |",
                read.label,
                read.throughput.req_per_sec,
                read.of_floor,
                read.throughput.latency.p50_ms,
                read.throughput.latency.p99_ms,
            );
        }
    }
    let _ = writeln!(
        out,
        "\n| layout | anonymous first page ÷ /healthz (≥ {FIRST_PAGE_OF_FLOOR}) | 304 ÷ /healthz (≥ {NOT_MODIFIED_OF_FLOOR}) | anonymous tree ÷ signed-in tree (≥ {TREE_OVER_READ_CACHE}) |\n|---|---:|---:|---:|"
    );
    let met = |ok: bool| if ok { "met" } else { "missed" };
    for (layout, wire) in results {
        let _ = writeln!(
            out,
            "| {layout} | {:.3} ({}) | {:.3} ({}) | {:.2} ({}) |",
            wire.first_page_of_floor,
            met(wire.first_page_of_floor >= FIRST_PAGE_OF_FLOOR),
            wire.not_modified_of_floor,
            met(wire.not_modified_of_floor >= NOT_MODIFIED_OF_FLOOR),
            wire.tree_over_read_cache,
            met(wire.tree_over_read_cache >= TREE_OVER_READ_CACHE),
        );
    }
    out
}
