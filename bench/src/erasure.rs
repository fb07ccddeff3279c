//! A person's erasure (`--erasure`): per layout, a heavy person whose comments are spread over
//! many discussions (10 000 over 500), who also voted on another person's comment in each, and
//! a light person of 20 comments in the same discussions; then `deleteMyAccount` of each, timed,
//! with the database commands it took. An erasure walks the person's own comments by number, so
//! its cost per comment should not depend on how many they wrote, nor on what else is stored.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::bail;
use futures::stream::{self, StreamExt as _, TryStreamExt as _};
use serde::Serialize;
use serde_json::json;
use threadql::auth::JwtKeys;

use crate::client::GraphqlClient;
use crate::server::Server;

const CREATE: &str = "mutation($t: String!, $l: StorageLayout) { createDiscussion(input: { title: $t, layout: $l }) { id } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug } }";
const VOTE: &str =
    "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: UP) { slug } }";
const ERASE: &str = "mutation($c: String!) { deleteMyAccount(confirm: $c) }";
/// Requests in flight while loading.
const IN_FLIGHT: usize = 8;

/// What the scenario runs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Settings {
    /// The layouts, as the API names them.
    pub layouts: Vec<String>,
    /// Discussions per layout.
    pub discussions: usize,
    /// The heavy person's comments per layout.
    pub heavy: usize,
    /// The light person's comments per layout.
    pub light: usize,
}

/// One person's erasure.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ErasureCost {
    /// Their comments.
    pub comments: usize,
    /// Their votes.
    pub votes: usize,
    /// Seconds `deleteMyAccount` took.
    pub secs: f64,
    /// Database commands it took (background work included).
    pub commands: u64,
}

impl ErasureCost {
    /// Milliseconds per comment.
    fn ms_per_comment(&self) -> f64 {
        self.secs * 1000.0 / self.comments.max(1) as f64
    }

    /// Commands per comment.
    fn commands_per_comment(&self) -> f64 {
        self.commands as f64 / self.comments.max(1) as f64
    }
}

/// One layout's result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LayoutErasure {
    /// The layout.
    pub layout: String,
    /// Seconds the load took.
    pub load_secs: f64,
    /// The light person's erasure.
    pub light: ErasureCost,
    /// The heavy person's.
    pub heavy: ErasureCost,
}

/// Posts `count` comments as `token`, the n-th into discussion n (round robin); the slugs, by
/// discussion, of the first comment in each.
async fn post_round_robin(
    client: &GraphqlClient,
    token: &str,
    discussions: &[String],
    count: usize,
    what: &str,
) -> anyhow::Result<Vec<String>> {
    let slugs: Vec<(usize, String)> = stream::iter(0..count)
        .map(|n| {
            let d = n % discussions.len();
            let vars =
                json!({ "d": discussions[d], "t": format!("{what} {n}, with a few words in it") });
            async move {
                let data = client.send(POST, &vars, Some(token)).await?.data()?;
                let slug = data["postComment"]["slug"].as_str().unwrap_or_default();
                anyhow::Ok((n, slug.to_owned()))
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect()
        .await?;
    let mut first = vec![String::new(); discussions.len().min(count)];
    for (n, slug) in slugs {
        if n < first.len() {
            first[n] = slug;
        }
    }
    Ok(first)
}

/// Erases `person` and measures it.
async fn erase(
    server: &Server,
    token: &str,
    person: &str,
    (comments, votes): (usize, usize),
) -> anyhow::Result<ErasureCost> {
    // The erasure of a heavy person outlasts the pool's request timeout.
    let patient = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(900))
        .build()?;
    let patient = GraphqlClient::new(patient, server.graphql_url());
    let before = server.db_commands().await?;
    let started = Instant::now();
    let data = patient
        .send(ERASE, &json!({ "c": person }), Some(token))
        .await?
        .data()?;
    let secs = started.elapsed().as_secs_f64();
    if data["deleteMyAccount"] != true {
        bail!("the erasure of {person} gave {data}");
    }
    let commands = server.db_commands().await?.saturating_sub(before);
    Ok(ErasureCost {
        comments,
        votes,
        secs,
        commands,
    })
}

/// Loads and measures every layout of `settings` on one server.
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    keys: &JwtKeys,
    settings: &Settings,
) -> anyhow::Result<Vec<LayoutErasure>> {
    let admin = keys.mint(
        "bench-admin",
        "Bench Admin",
        &["moderator".to_owned()],
        3600,
    );
    let other = keys.mint("erase-other", "Other Person", &[], 24 * 3600);
    let mut results = Vec::with_capacity(settings.layouts.len());
    for layout in &settings.layouts {
        let started = Instant::now();
        let mut discussions = Vec::with_capacity(settings.discussions);
        for n in 0..settings.discussions {
            let vars = json!({ "t": format!("erasure {layout} {n}"), "l": layout });
            let data = client.send(CREATE, &vars, Some(&admin)).await?.data()?;
            let Some(id) = data["createDiscussion"]["id"].as_str() else {
                bail!("createDiscussion gave no id: {data}");
            };
            discussions.push(id.to_owned());
        }
        let ids = [
            format!("erase-heavy-{layout}"),
            format!("erase-light-{layout}"),
        ];
        let heavy = keys.mint(&ids[0], "Heavy Person", &[], 24 * 3600);
        let light = keys.mint(&ids[1], "Light Person", &[], 24 * 3600);
        let others =
            post_round_robin(client, &other, &discussions, discussions.len(), "another's").await?;
        post_round_robin(client, &heavy, &discussions, settings.heavy, "heavy").await?;
        post_round_robin(client, &light, &discussions, settings.light, "light").await?;
        // The heavy person votes on the other person's comment in every discussion.
        stream::iter(discussions.iter().zip(&others))
            .map(|(d, s)| {
                let vars = json!({ "d": d, "s": s });
                let heavy = &heavy;
                async move { client.send(VOTE, &vars, Some(heavy)).await?.check() }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        let load_secs = started.elapsed().as_secs_f64();
        let light_cost = erase(server, &light, &ids[1], (settings.light, 0)).await?;
        let heavy_cost =
            erase(server, &heavy, &ids[0], (settings.heavy, discussions.len())).await?;
        eprintln!(
            "{layout}: {} comments erased in {:.1} s ({:.2} ms and {:.1} commands a comment); {} in {:.2} s",
            heavy_cost.comments,
            heavy_cost.secs,
            heavy_cost.ms_per_comment(),
            heavy_cost.commands_per_comment(),
            light_cost.comments,
            light_cost.secs,
        );
        results.push(LayoutErasure {
            layout: layout.clone(),
            load_secs,
            light: light_cost,
            heavy: heavy_cost,
        });
    }
    Ok(results)
}

/// The results as a markdown table.
pub(crate) fn markdown(results: &[LayoutErasure], settings: &Settings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`deleteMyAccount` of a person with {} comments over {} discussions (and a vote in each), \
         and of one with {} in the same discussions, per layout.\n",
        settings.heavy, settings.discussions, settings.light
    );
    let _ = writeln!(
        out,
        "| layout | heavy: s | ms a comment | commands a comment | light: s | ms a comment | commands a comment |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2} | {:.1} |",
            r.layout,
            r.heavy.secs,
            r.heavy.ms_per_comment(),
            r.heavy.commands_per_comment(),
            r.light.secs,
            r.light.ms_per_comment(),
            r.light.commands_per_comment(),
        );
    }
    out
}
