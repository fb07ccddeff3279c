//! The cost of an edit (`editComment` over HTTP, by a moderator, one after the other) of
//! comments never voted on and of voted ones, whose bucketed copies the edit also writes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::json;
use threadql::domain::Slug;

use crate::client::GraphqlClient;
use crate::server::Server;
use crate::stats::RunStats;
use crate::votes::VoteTarget;

const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: { discussionId: $d, slug: $s, text: $t }) { slug } }";
const UP: &str = "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: UP) { slug } }";

/// Edits of one kind of comment.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EditCost {
    /// The layout of the discussion.
    pub layout: String,
    /// Whether the comments edited were voted on.
    pub voted: bool,
    /// Edits made (all answered without errors).
    pub edits: usize,
    /// Latency of one edit, as the client saw it.
    pub latency: RunStats,
    /// Database commands per edit (all `threadql_db_commands_total`).
    pub commands_per_edit: f64,
    /// Database commands per edit by command name.
    pub commands_per_edit_by_name: BTreeMap<String, f64>,
}

/// Edits `count` comments of the target never voted on, then votes once on each (untimed)
/// and edits them again: call it before any vote in the discussion.
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    target: &VoteTarget<'_>,
    count: usize,
) -> anyhow::Result<Vec<EditCost>> {
    let editor = target.keys.mint(
        "bench-editor",
        "Editor",
        &["moderator".to_owned()],
        24 * 3600,
    );
    let voter = target
        .keys
        .mint("bench-edit-voter", "Voter", &[], 24 * 3600);
    // Every tenth comment, from the end (the warm-up votes of the vote runs come later).
    let chosen: Vec<&Slug> = target
        .comments
        .iter()
        .rev()
        .step_by(10)
        .take(count)
        .collect();
    let mut out = Vec::new();
    for voted in [false, true] {
        if voted {
            for slug in &chosen {
                let vars = json!({ "d": target.discussion.as_str(), "s": slug.as_str() });
                client.send(UP, &vars, Some(&voter)).await?.check()?;
            }
        }
        let before = server.db_commands_by_name().await?;
        let mut samples: Vec<Duration> = Vec::with_capacity(chosen.len());
        for (i, slug) in chosen.iter().enumerate() {
            let text = format!(
                "edited {} {i}: the same length of text as before",
                u8::from(voted)
            );
            let vars = json!({ "d": target.discussion.as_str(), "s": slug.as_str(), "t": text });
            let answer = client.send(EDIT, &vars, Some(&editor)).await?;
            answer
                .check()
                .with_context(|| format!("editing comment {slug}"))?;
            samples.push(answer.elapsed);
        }
        let after = server.db_commands_by_name().await?;
        let per = |n: u64| n as f64 / samples.len().max(1) as f64;
        let spent: BTreeMap<String, u64> = after
            .iter()
            .map(|(name, n)| {
                (
                    name.clone(),
                    n.saturating_sub(before.get(name).copied().unwrap_or(0)),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        out.push(EditCost {
            layout: target.layout.clone(),
            voted,
            edits: samples.len(),
            latency: RunStats::of(&samples),
            commands_per_edit: per(spent.values().sum()),
            commands_per_edit_by_name: spent.iter().map(|(k, n)| (k.clone(), per(*n))).collect(),
        });
    }
    Ok(out)
}

/// The results as a markdown table.
pub(crate) fn markdown(results: &[EditCost]) -> String {
    let mut out = String::from(
        "| layout | comments edited | edits | p50 (ms) | p99 (ms) | DB commands per edit | by command |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in results {
        let names: Vec<String> = r
            .commands_per_edit_by_name
            .iter()
            .map(|(name, n)| format!("{name} {n:.2}"))
            .collect();
        let kind = if r.voted {
            "voted on"
        } else {
            "never voted on"
        };
        let _ = writeln!(
            out,
            "| {} | {kind} | {} | {:.2} | {:.2} | {:.2} | {} |",
            r.layout,
            r.edits,
            r.latency.p50_ms,
            r.latency.p99_ms,
            r.commands_per_edit,
            names.join(", ")
        );
    }
    out
}
