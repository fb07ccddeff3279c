//! Test support, the one home of what tests share: one dev database server per test run and a
//! fresh database per test (`database`), the test app and its settings (`app`), servers on a
//! real socket (`server`) and what a probe does on them (`probing`), `threadql serve` as a
//! process (`process`), tokens (`tokens`), posting (`posting`), reading responses
//! (`responses`), the change feed (`feed`), command counting (`commands`), live connections with
//! chosen headers (`live_origin`), an OpenTelemetry collector (`otlp`), the repository's own
//! files (`files`), imported guests' ids as stored (`guests`), import files and their measured
//! runs (`imports`), reserved names (`names`), comments as the database stores them
//! (`stored`) and an SMTP server that reports the mail it takes (`smtp`).

mod app;
mod commands;
mod database;
mod feed;
mod files;
mod guests;
mod imports;
mod live_origin;
mod names;
mod otlp;
mod posting;
mod probing;
mod process;
mod receiver;
mod responses;
mod server;
mod smtp;
mod stored;
mod tokens;

pub(crate) use app::{
    defaults, error_code, layout_config, layout_name, store_config, Settings, TestApp,
};
pub(crate) use commands::{cost, db_commands, diff, finds, sent};
pub(crate) use database::{server_uri, unique_db};
pub(crate) use feed::{open_feed, posts_reported};
pub(crate) use files::{files_with_extension, repository};
pub(crate) use guests::{
    fixture_unkeyed_ids, import_fixture_path, keyed_guest_ids, served_guest_ids, stored_strings,
    strings_in, test_database, threadql_against, write_as_before_keyed_ids, OTHER_ID_KEY,
    TEST_ID_KEY,
};
pub(crate) use imports::{
    disqus_export, disqus_post, import_measured, threadql_file, write_gzipped,
};
pub(crate) use live_origin::{live_status, LiveKind};
pub(crate) use names::{refusal_of, refused_within, CREATE_AS};
pub(crate) use otlp::{dump, Collector, ReceivedSpan};
pub(crate) use posting::{load_discussion, post_in};
pub(crate) use probing::{comment_over_http, deepest_lists, discussion_over_http};
pub(crate) use process::Process;
pub(crate) use receiver::{Delivery, Receiver};
pub(crate) use responses::{error_message, node_slugs, outcome, outcomes};
pub(crate) use server::{
    graphql_data, graphql_data_at, metric, metric_from, one_shot_client, post_graphql, series,
    server_config, sha256_hex, Running, Scrape,
};
pub(crate) use smtp::{Mail, SmtpServer};
pub(crate) use stored::{rewrite_stored_comment, stored_comment, stored_events, stored_html, Home};
pub(crate) use tokens::{
    admin_token_for, ec_token, fixture, moderator_token, now, rsa_key, rsa_token, sign, sign_key,
    sign_with, token, unsigned, Claims, SECRET,
};
