//! Typed configuration: CLI flags with matching `THREADQL_*` environment variables.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::domain::Layout;

/// The threadql command line.
#[derive(Debug, Parser)]
#[command(
    name = "threadql",
    version,
    about = "A GraphQL API for threaded comments on MongoDB"
)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Server and database settings.
    #[command(flatten)]
    pub config: Config,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the GraphQL server (the default).
    Serve,
    /// Print the GraphQL schema (SDL) to standard output.
    PrintSchema,
    /// Mint a development JWT signed with the configured secret.
    Token(TokenArgs),
}

/// Arguments of `threadql token`.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// Author id (`sub` claim).
    #[arg(long)]
    pub sub: String,
    /// Author display name (`name` claim).
    #[arg(long)]
    pub name: String,
    /// Roles to grant (repeatable), e.g. `--role moderator`.
    #[arg(long = "role")]
    pub roles: Vec<String>,
    /// Lifetime of the token in seconds.
    #[arg(long, default_value_t = 86_400)]
    pub ttl_secs: u64,
}

/// A storage layout as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum LayoutArg {
    /// One document per comment.
    PerComment,
    /// All comments in the discussion document.
    Embedded,
    /// Buckets of comments.
    Bucketed,
}

impl From<LayoutArg> for Layout {
    fn from(arg: LayoutArg) -> Self {
        match arg {
            LayoutArg::PerComment => Layout::PerComment,
            LayoutArg::Embedded => Layout::Embedded,
            LayoutArg::Bucketed => Layout::Bucketed,
        }
    }
}

/// Every setting, read once at start and passed down.
#[derive(Clone, Args)]
pub struct Config {
    /// Address to listen on.
    #[arg(
        long,
        env = "THREADQL_LISTEN",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub listen: SocketAddr,
    /// MongoDB connection string; unset = start the embedded development database.
    #[arg(
        long,
        env = "THREADQL_MONGODB_URI",
        hide_env_values = true,
        global = true
    )]
    pub mongodb_uri: Option<String>,
    /// Database name.
    #[arg(
        long,
        env = "THREADQL_DATABASE",
        default_value = "threadql",
        global = true
    )]
    pub database: String,
    /// Where the embedded development database keeps its files.
    #[arg(
        long,
        env = "THREADQL_DATA_DIR",
        default_value = "./threadql-data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// Layout of new discussions that do not name one.
    #[arg(
        long,
        env = "THREADQL_DEFAULT_LAYOUT",
        value_enum,
        default_value = "per_comment",
        global = true
    )]
    pub default_layout: LayoutArg,
    /// Comments per bucket in the bucketed layout.
    #[arg(long, env = "THREADQL_BUCKET_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000), global = true)]
    pub bucket_size: u32,
    /// Size cap of one discussion in the embedded layout, in bytes (MongoDB's document limit is
    /// 16 MiB); a post that would cross it fails with DISCUSSION_TOO_LARGE.
    #[arg(long, env = "THREADQL_EMBEDDED_MAX_BYTES", default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(16 * 1024..=16_000_000), global = true)]
    pub embedded_max_bytes: u64,
    /// HS256 secret for JWTs; unset = a development secret (never use it in production).
    #[arg(
        long,
        env = "THREADQL_JWT_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub jwt_secret: Option<String>,
    /// Tracing filter, e.g. `info` or `threadql=debug,tower_http=debug`.
    #[arg(long, env = "THREADQL_LOG", default_value = "info", global = true)]
    pub log: String,
    /// Deepest comment nesting: a reply deeper than this attaches to the deepest allowed ancestor.
    #[arg(long, env = "THREADQL_MAX_DEPTH", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=40), global = true)]
    pub max_depth: u32,
    /// Longest comment text, in characters.
    #[arg(
        long,
        env = "THREADQL_MAX_TEXT_CHARS",
        default_value_t = 10_000,
        global = true
    )]
    pub max_text_chars: usize,
    /// Page size when a client gives no `first`.
    #[arg(
        long,
        env = "THREADQL_DEFAULT_PAGE_SIZE",
        default_value_t = 20,
        global = true
    )]
    pub default_page_size: usize,
    /// How long an author may edit a comment after posting it, in seconds; 0 = authors never
    /// edit (moderators always may).
    #[arg(
        long,
        env = "THREADQL_EDIT_WINDOW_SECS",
        default_value_t = 900,
        global = true
    )]
    pub edit_window_secs: u64,
    /// Largest page a client may ask for.
    #[arg(
        long,
        env = "THREADQL_MAX_PAGE_SIZE",
        default_value_t = 100,
        global = true
    )]
    pub max_page_size: usize,
    /// Path of the `secantusd-rs` binary for the embedded database (default: found on PATH or in
    /// ~/.cargo/bin).
    #[arg(long, env = "THREADQL_SECANTUSD", global = true)]
    pub secantusd: Option<PathBuf>,
}

impl Config {
    /// The settings of `threadql` run with no flags: the defaults, with the `THREADQL_*`
    /// variables of the environment applied (an error when one is not valid). Tools and tests
    /// start from here and change what they need.
    pub fn defaults() -> Result<Self, clap::Error> {
        Cli::try_parse_from(["threadql"]).map(|cli| cli.config)
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("mongodb_uri", &self.mongodb_uri.as_ref().map(|_| "<set>"))
            .field("database", &self.database)
            .field("data_dir", &self.data_dir)
            .field("default_layout", &self.default_layout)
            .field("bucket_size", &self.bucket_size)
            .field("embedded_max_bytes", &self.embedded_max_bytes)
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| "<set>"))
            .field("log", &self.log)
            .field("max_depth", &self.max_depth)
            .field("max_text_chars", &self.max_text_chars)
            .field("default_page_size", &self.default_page_size)
            .field("max_page_size", &self.max_page_size)
            .field("edit_window_secs", &self.edit_window_secs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_size_cap_stays_under_mongodbs_limit() {
        let cap = |value: &str| {
            Cli::try_parse_from(["threadql", "--embedded-max-bytes", value])
                .map(|cli| cli.config.embedded_max_bytes)
        };
        assert_eq!(cap("65536").ok(), Some(65_536));
        assert!(cap("1000").is_err());
        assert!(cap("16777216").is_err());
        assert!(cap("-1").is_err());
    }
}
