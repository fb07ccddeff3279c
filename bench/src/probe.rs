//! The ranked deep-offset probe (`--ranked-offset`): per layout, one discussion of
//! `--ranked-comments` comments with votes, on a server of its own; the server's peak memory and
//! time for one request of thirty aliases that each read `comments(order: TOP, first: 1)` at the
//! deepest offset the server takes (19 990 where it takes it, as before the cap; else the cap),
//! and for one such alias against the same offset in chronological order.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use threadql::domain::{DiscussionTitle, Layout};
use threadql::store::{Storage as _, Store};

use crate::client::GraphqlClient;
use crate::load::{self, cast_votes};
use crate::plan::Plan;
use crate::server::Server;

/// Aliases in the probe's request.
const ALIASES: usize = 30;
/// The offset the probe asks first: as deep as the probe's discussion of 20 000 comments.
const DEEP: i64 = 19_990;
/// The ranked offset cap, asked when the server refuses [`DEEP`].
const CAP: i64 = 1_000;
/// Votes per comment, so the ranked list has classes above and below 0.
const VOTES_PER_COMMENT: f64 = 0.2;

/// What the probe measured on one layout.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RankedOffset {
    /// The server binary measured.
    pub server: String,
    /// The layout.
    pub layout: String,
    /// Comments in the discussion.
    pub comments: usize,
    /// The offset the server took.
    pub offset: i64,
    /// Whether it refused thirty aliases at [`DEEP`] (`BAD_USER_INPUT` or over the cost limit).
    pub deep_refused: bool,
    /// The server's peak resident memory before the request, in MB.
    pub idle_mb: f64,
    /// Whether the request of thirty aliases ran past the server's request timeout.
    pub timed_out: bool,
    /// Its peak resident memory after the request of thirty aliases, in MB.
    pub peak_mb: f64,
    /// Milliseconds the request of thirty aliases took.
    pub thirty_ms: f64,
    /// Milliseconds one alias took in TOP order (just under the thirty's offsets).
    pub one_ranked_ms: f64,
    /// Milliseconds the same offset took in chronological order.
    pub one_chronological_ms: f64,
}

/// The read of alias `n`: at `offset - n`, so no two aliases (nor two requests) share a page of
/// the read cache, as an attacker would vary them.
fn alias(n: usize, order: &str, offset: i64) -> String {
    let at = offset - n as i64;
    format!("a{n}: comments({order}first: 1, offset: {at}) {{ nodes {{ slug }} }}")
}

/// A query of `count` aliases in `order` at `offset` and just under it.
fn query(count: usize, order: &str, offset: i64) -> String {
    let aliases: Vec<String> = (0..count).map(|n| alias(n, order, offset)).collect();
    format!(
        "query($d: ID!) {{ discussion(id: $d) {{ {} }} }}",
        aliases.join(" ")
    )
}

/// Loads a discussion of `comments` comments in `layout`, with votes; returns its id and how
/// many comments it holds (an embedded discussion stops at its size cap).
pub(crate) async fn load(
    store: &Store,
    layout: Layout,
    comments: usize,
    seed: u64,
) -> anyhow::Result<(String, usize)> {
    let label = format!("{layout} {comments} (ranked offset)");
    let plan = Plan::generate(comments, seed);
    let title = DiscussionTitle::parse(&format!("ranked offset: {layout}, {comments} comments"))?;
    let discussion = store.discussions().create(title, layout).await?;
    let loaded = load::load(
        store,
        discussion,
        &plan,
        &HashSet::new(),
        32,
        Duration::from_secs(1800),
        &label,
    )
    .await?;
    let slugs: Vec<_> = loaded.slugs.iter().flatten().cloned().collect();
    cast_votes(
        store,
        &loaded.discussion,
        &slugs,
        VOTES_PER_COMMENT,
        seed,
        &label,
    )
    .await?;
    Ok((loaded.discussion.id.as_str().to_owned(), loaded.posted))
}

/// Sends the probe to `server`, which serves the discussion `id` of `comments` comments in
/// `layout`, and stops it.
pub(crate) async fn measure(
    server: Server,
    http: reqwest::Client,
    layout: Layout,
    (id, comments): (String, usize),
) -> anyhow::Result<RankedOffset> {
    let variables = json!({ "d": id });
    let client = GraphqlClient::new(http, server.graphql_url());
    // Warm: the discussion document and the server's pools.
    client
        .send(&query(1, "", 0), &variables, None)
        .await?
        .check()?;
    let idle = server.peak_rss_bytes()?;
    // Thirty aliases at 19 990; where that is refused (by the cap or the cost, before anything
    // is read), at the cap.
    let mut offset = DEEP;
    let mut thirty = client
        .send(&query(ALIASES, "order: TOP, ", offset), &variables, None)
        .await?;
    let answer = thirty.data();
    let timed_out = answer
        .as_ref()
        .is_err_and(|e| e.to_string().contains("UNAVAILABLE"));
    let deep_refused = !timed_out && refused(&answer)?;
    if deep_refused {
        offset = CAP;
        thirty = client
            .send(&query(ALIASES, "order: TOP, ", offset), &variables, None)
            .await?;
        thirty.check()?;
    }
    let peak = server.peak_rss_bytes()?;
    // One alias below the thirty's offsets (a page none of them left in the cache).
    let single = offset - ALIASES as i64 - 1;
    let one_ranked = client
        .send(&query(1, "order: TOP, ", single), &variables, None)
        .await?;
    one_ranked.check()?;
    let one_chronological = client.send(&query(1, "", single), &variables, None).await?;
    one_chronological.check()?;
    server.stop().await;
    let mb = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(RankedOffset {
        server: String::new(),
        layout: layout.to_string(),
        comments,
        offset,
        deep_refused,
        timed_out,
        idle_mb: mb(idle),
        peak_mb: mb(peak),
        thirty_ms: ms(thirty.elapsed),
        one_ranked_ms: ms(one_ranked.elapsed),
        one_chronological_ms: ms(one_chronological.elapsed),
    })
}

/// Whether an answer is the refusal of a bad argument or of a document over the cost limit.
fn refused(answer: &anyhow::Result<Value>) -> anyhow::Result<bool> {
    match answer {
        Ok(_) => Ok(false),
        Err(error)
            if ["BAD_USER_INPUT", "GRAPHQL_VALIDATION_FAILED"]
                .iter()
                .any(|code| error.to_string().contains(code)) =>
        {
            Ok(true)
        }
        Err(error) => Err(anyhow::anyhow!("the deep offset failed: {error}")),
    }
}

/// Most memory one request may take above the server's idle peak, in MB.
const TARGET_MB: f64 = 50.0;

/// The results as a Markdown table, with the memory target.
pub(crate) fn markdown(results: &[RankedOffset]) -> String {
    let mut out = String::from(
        "| server | layout | comments | offset | 19 990 refused | idle MB | peak MB | above idle MB | 30 aliases ms | 1 TOP ms | 1 chronological ms |\n| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0}{} | {:.1} | {:.1} |\n",
            std::path::Path::new(&r.server)
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
            r.layout,
            r.comments,
            r.offset,
            if r.deep_refused { "yes" } else { "no" },
            r.idle_mb,
            r.peak_mb,
            r.peak_mb - r.idle_mb,
            r.thirty_ms,
            if r.timed_out { " (timed out)" } else { "" },
            r.one_ranked_ms,
            r.one_chronological_ms
        ));
    }
    // The target is the server under test's (the first measured; `--compare-server-bin` adds
    // another after it).
    let tested = results.first().map(|r| r.server.as_str());
    let worst = results
        .iter()
        .filter(|r| Some(r.server.as_str()) == tested)
        .map(|r| r.peak_mb - r.idle_mb)
        .fold(0.0, f64::max);
    let verdict = if worst <= TARGET_MB { "met" } else { "missed" };
    out.push_str(&format!(
        "\nTarget: at most {TARGET_MB:.0} MB above idle for one request: {verdict} (worst {worst:.0} MB).\n"
    ));
    out
}
