//! Counting the database commands a test's work sent: in process through the store's counter,
//! or from outside through a server's `/metrics`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::app::TestApp;
use super::server::Running;

impl TestApp {
    /// Database commands sent so far by this app.
    pub(crate) fn commands(&self) -> u64 {
        self.store().commands().total()
    }
}

/// The commands of one name the app has sent so far.
pub(crate) fn sent(app: &TestApp, command: &str) -> u64 {
    app.store()
        .commands()
        .snapshot()
        .get(command)
        .copied()
        .unwrap_or(0)
}

/// `find` commands the app has sent so far.
pub(crate) fn finds(app: &TestApp) -> u64 {
    sent(app, "find")
}

/// The commands sent between two snapshots of the command counter, by name (those sent at all).
pub(crate) fn diff(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Commands the app sent while running one query, by name.
pub(crate) async fn cost(
    app: &TestApp,
    query: &str,
    vars: Value,
) -> (Value, BTreeMap<String, u64>) {
    let before = app.store().commands().snapshot();
    let data = app.ok(query, vars).await;
    let mut spent = app.store().commands().snapshot();
    for (name, n) in &mut spent {
        *n -= before.get(name).copied().unwrap_or(0);
    }
    spent.retain(|_, n| *n > 0);
    (data, spent)
}

/// Database commands the server has sent so far, summed over commands, read from `/metrics`.
pub(crate) async fn db_commands(client: &reqwest::Client, server: &Running) -> u64 {
    let text = client
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .filter(|l| l.starts_with("threadql_db_commands_total{"))
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("unreadable metrics line {l:?}"))
        })
        .sum()
}
