//! An author's history (`--author-history`): per layout, a few discussions where a light author
//! and a heavy one post side by side (so every discussion document and page holds comments of
//! both), then `commentsByAuthor` pages of each, timed in alternation: the first page and the
//! page after it. A page reads one range of the author's comment numbers, so the heavy author's
//! pages should cost what the light author's cost; the ratio says whether they do.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::bail;
use futures::stream::{self, StreamExt as _, TryStreamExt as _};
use serde::Serialize;
use serde_json::{json, Value};
use threadql::auth::JwtKeys;

use crate::client::GraphqlClient;
use crate::server::Server;
use crate::stats::{median, RunStats};

const CREATE: &str = "mutation($t: String!, $l: StorageLayout) { createDiscussion(input: { title: $t, layout: $l }) { id } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug } }";
const HISTORY: &str = "query($u: ID!, $n: Int, $a: String) { commentsByAuthor(userId: $u, first: $n, after: $a) { edges { node { slug text } } pageInfo { endCursor } } }";
/// Comments of a page.
const PAGE: i64 = 20;
/// Posts in flight while loading.
const IN_FLIGHT: usize = 8;
/// Target: the heavy author's page p50 ÷ the light author's, at most.
pub(crate) const RATIO_TARGET: f64 = 1.5;

/// What the scenario runs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Settings {
    /// The layouts, as the API names them.
    pub layouts: Vec<String>,
    /// Discussions per layout.
    pub discussions: usize,
    /// The light author's comments per layout.
    pub light: usize,
    /// The heavy author's comments per layout.
    pub heavy: usize,
    /// Untimed requests before each run.
    pub warmup: usize,
    /// Timed requests per run and page.
    pub requests: usize,
    /// Runs.
    pub runs: usize,
}

/// One page of one author, timed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PageCost {
    /// The median over the runs of the p50, in ms.
    pub p50_ms: f64,
    /// Database commands per request.
    pub commands: f64,
    /// Each run.
    pub runs: Vec<RunStats>,
}

/// One layout's result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LayoutHistory {
    /// The layout.
    pub layout: String,
    /// Seconds the posts of both authors took.
    pub load_secs: f64,
    /// The light author's first page and second page.
    pub light: [PageCost; 2],
    /// The heavy author's.
    pub heavy: [PageCost; 2],
    /// Heavy ÷ light p50, first page and second.
    pub ratio: [f64; 2],
}

/// Creates the discussions of `layout` and posts the light and heavy authors' comments into
/// them.
async fn load(
    client: &GraphqlClient,
    keys: &JwtKeys,
    layout: &str,
    settings: &Settings,
    [light_id, heavy_id]: [&str; 2],
) -> anyhow::Result<Vec<String>> {
    let admin = keys.mint(
        "bench-admin",
        "Bench Admin",
        &["moderator".to_owned()],
        3600,
    );
    let mut discussions = Vec::with_capacity(settings.discussions);
    for n in 0..settings.discussions {
        let vars = json!({ "t": format!("history {layout} {n}"), "l": layout });
        let data = client.send(CREATE, &vars, Some(&admin)).await?.data()?;
        let Some(id) = data["createDiscussion"]["id"].as_str() else {
            bail!("createDiscussion gave no id: {data}");
        };
        discussions.push(id.to_owned());
    }
    let light = keys.mint(light_id, "Light Author", &[], 24 * 3600);
    let heavy = keys.mint(heavy_id, "Heavy Author", &[], 24 * 3600);
    // Each author's n-th comment goes to discussion n (round robin), so that a page of either
    // author's finds its comments in as many discussions (a page reads one document per
    // comment); the light author's posts are spread over the heavy one's.
    let every = (settings.heavy / settings.light.max(1)).max(1);
    let mut posts = Vec::with_capacity(settings.heavy + settings.light);
    let mut lights = 0;
    for i in 0..settings.heavy {
        posts.push((heavy.clone(), i));
        if i % every == 0 && lights < settings.light {
            posts.push((light.clone(), lights));
            lights += 1;
        }
    }
    for n in lights..settings.light {
        posts.push((light.clone(), n));
    }
    stream::iter(posts)
        .map(|(token, n)| {
            let vars = json!({
                "d": discussions[n % discussions.len()],
                "t": format!("comment {n} of the history benchmark, with a few words in it"),
            });
            async move { client.send(POST, &vars, Some(&token)).await?.check() }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(discussions)
}

/// The cursor after the author's first page.
async fn second_page_cursor(
    client: &GraphqlClient,
    moderator: &str,
    author: &str,
) -> anyhow::Result<String> {
    let vars = json!({ "u": author, "n": PAGE });
    let data = client.send(HISTORY, &vars, Some(moderator)).await?.data()?;
    let page = &data["commentsByAuthor"];
    let edges = page["edges"].as_array().map_or(0, Vec::len);
    match page["pageInfo"]["endCursor"].as_str() {
        Some(cursor) if edges == PAGE as usize => Ok(cursor.to_owned()),
        _ => bail!("{author}'s first page holds {edges} comments, not {PAGE}: {data}"),
    }
}

/// Times the four pages in alternation, `settings.runs` runs.
async fn time_pages(
    server: &Server,
    client: &GraphqlClient,
    moderator: &str,
    settings: &Settings,
    authors: [&str; 2],
) -> anyhow::Result<[PageCost; 4]> {
    let mut pages: Vec<Value> = Vec::new();
    for author in authors {
        let after = second_page_cursor(client, moderator, author).await?;
        pages.push(json!({ "u": author, "n": PAGE }));
        pages.push(json!({ "u": author, "n": PAGE, "a": after }));
    }
    let mut runs: Vec<Vec<RunStats>> = vec![Vec::new(); pages.len()];
    let mut commands = [0_u64; 4];
    for _ in 0..settings.runs {
        for vars in &pages {
            for _ in 0..settings.warmup {
                client.send(HISTORY, vars, Some(moderator)).await?.check()?;
            }
        }
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); pages.len()];
        for _ in 0..settings.requests {
            for (i, vars) in pages.iter().enumerate() {
                let before = server.db_commands().await?;
                let timed = client.send(HISTORY, vars, Some(moderator)).await?;
                commands[i] += server.db_commands().await?.saturating_sub(before);
                timed.check()?;
                samples[i].push(timed.elapsed);
            }
        }
        for (run, samples) in runs.iter_mut().zip(&samples) {
            run.push(RunStats::of(samples));
        }
    }
    let requests = (settings.runs * settings.requests).max(1) as f64;
    let mut costs = runs
        .into_iter()
        .zip(commands)
        .map(|(runs, commands)| PageCost {
            p50_ms: median(runs.iter().map(|r| r.p50_ms).collect()),
            commands: commands as f64 / requests,
            runs,
        });
    let mut next = || costs.next().ok_or_else(|| anyhow::anyhow!("four pages"));
    Ok([next()?, next()?, next()?, next()?])
}

/// Loads and measures every layout of `settings` on one server.
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    keys: &JwtKeys,
    settings: &Settings,
) -> anyhow::Result<Vec<LayoutHistory>> {
    let moderator = keys.mint(
        "bench-mod",
        "Bench Moderator",
        &["moderator".to_owned()],
        3600,
    );
    let mut results = Vec::with_capacity(settings.layouts.len());
    for layout in &settings.layouts {
        // Each layout's authors are their own (a history spans every layout).
        let ids = [format!("light-{layout}"), format!("heavy-{layout}")];
        let authors = [ids[0].as_str(), ids[1].as_str()];
        let started = std::time::Instant::now();
        load(client, keys, layout, settings, authors).await?;
        let load_secs = started.elapsed().as_secs_f64();
        let [light0, light1, heavy0, heavy1] =
            time_pages(server, client, &moderator, settings, authors).await?;
        let ratio = [heavy0.p50_ms / light0.p50_ms, heavy1.p50_ms / light1.p50_ms];
        eprintln!(
            "{layout}: heavy ÷ light p50 {:.2} (first page), {:.2} (second)",
            ratio[0], ratio[1]
        );
        results.push(LayoutHistory {
            layout: layout.clone(),
            load_secs,
            light: [light0, light1],
            heavy: [heavy0, heavy1],
            ratio,
        });
    }
    Ok(results)
}

/// The results as a markdown table.
pub(crate) fn markdown(results: &[LayoutHistory], settings: &Settings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Pages of {PAGE} of `commentsByAuthor`: an author of {} comments against one of {}, in the \
         same {} discussions per layout (p50 in ms, median of {} runs; database commands per page; \
         target: a ratio of at most {RATIO_TARGET}).\n",
        settings.heavy, settings.light, settings.discussions, settings.runs
    );
    let _ = writeln!(
        out,
        "| layout | light, first page | heavy, first page | ratio | light, second page | heavy, second page | ratio | commands (first, second) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1}, {:.1} |",
            r.layout,
            r.light[0].p50_ms,
            r.heavy[0].p50_ms,
            r.ratio[0],
            r.light[1].p50_ms,
            r.heavy[1].p50_ms,
            r.ratio[1],
            r.heavy[0].commands,
            r.heavy[1].commands,
        );
    }
    out
}

/// Fails when a heavy author's page costs more database commands than a light one's: a page
/// must read the same whatever the author wrote. The counts are means, and background work
/// (change streams, workers) adds a fraction now and then, so half a command is the margin.
/// (Timings are reported, not checked: the quick mode's are noise.)
pub(crate) fn check(results: &[LayoutHistory]) -> anyhow::Result<()> {
    for r in results {
        for page in 0..2 {
            if r.heavy[page].commands > r.light[page].commands + 0.5 {
                bail!(
                    "{}: the heavy author's page {} took {} commands, the light one's {}",
                    r.layout,
                    page + 1,
                    r.heavy[page].commands,
                    r.light[page].commands
                );
            }
        }
    }
    Ok(())
}
