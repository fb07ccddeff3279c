//! Test support, the one home of what tests share: one dev database server per test run and a
//! fresh database per test (`database`), the test app and its settings (`app`), servers on a
//! real socket (`server`), `threadql serve` as a process (`process`), tokens (`tokens`), posting
//! (`posting`), the change feed (`feed`), command counting (`commands`) and an OpenTelemetry
//! collector (`otlp`).

mod app;
mod commands;
mod database;
mod feed;
mod otlp;
mod posting;
mod process;
mod server;
mod tokens;

pub(crate) use app::{defaults, error_code, layout_name, store_config, Settings, TestApp};
pub(crate) use commands::{cost, db_commands, diff, finds, sent};
pub(crate) use database::{server_uri, unique_db};
pub(crate) use feed::{open_feed, posts_reported};
pub(crate) use otlp::{dump, Collector, ReceivedSpan};
pub(crate) use posting::{load_discussion, post_in};
pub(crate) use process::Process;
pub(crate) use server::{
    graphql_data, metric, metric_from, one_shot_client, post_graphql, series, server_config,
    Running, Scrape,
};
pub(crate) use tokens::{
    ec_token, fixture, now, rsa_key, rsa_token, sign, sign_key, sign_with, token, unsigned, Claims,
    SECRET,
};
