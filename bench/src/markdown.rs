//! The worst-case Markdown page: a page of 20 comments of about 10 000 characters nested as deep
//! as the server allows, read with `html` only, against a page of 20 plain comments of the same
//! length, through the server over HTTP. Reads return the HTML stored at write time, so what is
//! left to compare is the volume: the nested texts' HTML is up to 8 times their length.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::json;

use crate::client::GraphqlClient;
use crate::measure::Effort;
use crate::stats::{RunStats, Summary};

/// Comments on the page.
const PAGE: usize = 20;
/// About how long each comment is, in characters.
const CHARS: usize = 10_000;
/// The server's default nesting limit (`THREADQL_MAX_MARKDOWN_DEPTH`).
const DEPTH: usize = 16;

const CREATE: &str = "mutation($t: String!) { createDiscussion(input: { title: $t }) { id } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug } }";
const READ: &str =
    "query($d: ID!) { discussion(id: $d) { comments(first: 20) { edges { node { html } } } } }";

/// One page's reads.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PageReads {
    /// What its comments are.
    pub page: String,
    /// Characters of each comment's text.
    pub text_chars: usize,
    /// Bytes of the answer (the 20 comments' HTML in JSON).
    pub response_bytes: usize,
    /// Latency of one read of the page.
    pub latency: Summary,
    /// Its median latency over the plain page's.
    pub ratio: f64,
}

/// The texts of the pages: plain words, then the worst cases within the nesting limit.
fn texts() -> Vec<(&'static str, String)> {
    let fill = |unit: &str| unit.repeat(CHARS / unit.len()).trim_end().to_owned();
    vec![
        ("plain words", fill("plain words ")),
        // Every line 16 nested lists: about 10 bytes of HTML a character, past the HTML bound,
        // so stored as plain paragraphs.
        (
            "deepest lists (- - - … x lines)",
            fill(&format!("{}x\n", "- ".repeat(DEPTH))),
        ),
        // 16 nested quotes around 44 characters, apart: 484 bytes of HTML for 63 characters,
        // about the most HTML within the bound (8 bytes a character; 40 characters would pass it
        // and be stored as plain paragraphs).
        (
            "deepest quotes, largest HTML",
            fill(&format!("{} {}\n\n", ">".repeat(DEPTH), "q".repeat(44))),
        ),
    ]
}

/// Loads one discussion per page through the server and reads each page in turn, `effort.runs`
/// rounds of `effort.requests` reads each, after `effort.warmup` untimed reads.
pub(crate) async fn measure(
    client: &GraphqlClient,
    token: &str,
    effort: Effort,
) -> anyhow::Result<Vec<PageReads>> {
    let mut pages = Vec::new();
    for (name, text) in texts() {
        let vars = json!({ "t": format!("benchmark Markdown page: {name}") });
        let created = client.send(CREATE, &vars, Some(token)).await?.data()?;
        let id = created["createDiscussion"]["id"]
            .as_str()
            .context("no discussion id")?
            .to_owned();
        for _ in 0..PAGE {
            let vars = json!({ "d": id, "t": text });
            client.send(POST, &vars, Some(token)).await?.data()?;
        }
        let vars = json!({ "d": id });
        let first = client.send(READ, &vars, None).await?;
        let data = first.data()?;
        let shown = data["discussion"]["comments"]["edges"]
            .as_array()
            .map_or(0, Vec::len);
        anyhow::ensure!(shown == PAGE, "the {name} page has {shown} comments");
        let bytes = serde_json::to_vec(&json!({ "data": data }))?.len();
        pages.push((name, text.chars().count(), id, bytes));
    }
    for (_, _, id, _) in &pages {
        for _ in 0..effort.warmup {
            client
                .send(READ, &json!({ "d": id }), None)
                .await?
                .check()?;
        }
    }
    let mut runs: Vec<Vec<RunStats>> = vec![Vec::new(); pages.len()];
    for _ in 0..effort.runs {
        // Pages take turns within each round, so drift in the machine's load hits them alike.
        for (n, (_, _, id, _)) in pages.iter().enumerate() {
            let mut samples: Vec<Duration> = Vec::with_capacity(effort.requests);
            for _ in 0..effort.requests {
                let timed = client.send(READ, &json!({ "d": id }), None).await?;
                timed.check()?;
                samples.push(timed.elapsed);
            }
            runs[n].push(RunStats::of(&samples));
        }
    }
    let summaries: Vec<Summary> = runs.into_iter().map(Summary::of).collect();
    let plain = summaries.first().map_or(f64::NAN, |s| s.p50_ms);
    Ok(pages
        .into_iter()
        .zip(summaries)
        .map(|((name, chars, _, bytes), latency)| PageReads {
            page: name.to_owned(),
            text_chars: chars,
            response_bytes: bytes,
            ratio: latency.p50_ms / plain,
            latency,
        })
        .collect())
}

/// The results as a Markdown table.
pub(crate) fn markdown(pages: &[PageReads]) -> String {
    let mut out = String::from(
        "| page of 20 | characters each | response bytes | p50 ms | p99 ms | p50 ÷ plain |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for p in pages {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} |",
            p.page, p.text_chars, p.response_bytes, p.latency.p50_ms, p.latency.p99_ms, p.ratio
        );
    }
    out
}
