//! The command line: the subcommands and their arguments, and the names flags give layouts,
//! moderation modes and log formats.

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::{Config, LayoutArg};

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

impl Cli {
    /// The tracing filter of this run: `THREADQL_LOG` when set, else `info` for `serve` (its
    /// start-up lines say how it runs) and `warn` for the other subcommands, which print only
    /// what they exist for.
    pub fn log_filter(&self) -> &str {
        match (&self.config.log, &self.command) {
            (Some(filter), _) => filter,
            (None, None | Some(Command::Serve)) => "info",
            (None, Some(_)) => "warn",
        }
    }
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
    /// Move discussions to another storage layout while the servers keep running (safe to run
    /// again after an interruption).
    Migrate(MigrateArgs),
    /// Write discussions, comments and votes to a threadql file (JSON Lines; gzipped when the
    /// name ends in `.gz`).
    Export(ExportArgs),
    /// Read discussions and comments from a threadql, Disqus or WordPress file (safe to run
    /// again: what is there already is not added twice).
    Import(ImportArgs),
    /// Key the imported guest ids an earlier version stored unkeyed, in every layout, held
    /// comments, bans and the moderation log (a server does it once at its first start; safe
    /// to run again: keyed ids are never keyed twice).
    KeyGuestIds,
    /// Render and store the HTML of every comment stored without it (stored before HTML was
    /// stored with comments), in batches, while the servers keep running (safe to run again).
    RenderHtml(RenderHtmlArgs),
    /// Shard threadql's collections on a sharded cluster (connect to a mongos): every shard key
    /// starts with the discussion, so each request reaches one shard.
    ShardSetup,
}

/// Arguments of `threadql migrate`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["discussion", "all_from"])))]
pub struct MigrateArgs {
    /// The discussion to move (its id).
    #[arg(long)]
    pub discussion: Option<String>,
    /// Move every discussion that has this layout.
    #[arg(long, value_enum)]
    pub all_from: Option<LayoutArg>,
    /// The layout to move to.
    #[arg(long, value_enum)]
    pub to: LayoutArg,
}

/// Arguments of `threadql render-html`.
#[derive(Debug, Clone, Args)]
pub struct RenderHtmlArgs {
    /// Comments (and discussions) read per command.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch: u32,
}

/// Arguments of `threadql export`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("which").args(["discussion", "key"])))]
pub struct ExportArgs {
    /// Export this discussion only (its id).
    #[arg(long)]
    pub discussion: Option<String>,
    /// Export the discussion with this key only.
    #[arg(long)]
    pub key: Option<String>,
    /// Where to write: a file (gzipped when it ends in `.gz`), or `-` for standard output
    /// (the default).
    #[arg(long)]
    pub out: Option<String>,
}

/// The formats `threadql import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFormat {
    /// A `threadql export` file (JSON Lines, gzipped or not).
    Threadql,
    /// A Disqus XML export.
    Disqus,
    /// A WordPress WXR export.
    Wordpress,
}

/// What keys an imported discussion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportKey {
    /// The source's identifier (Disqus `<id>`, WordPress `wp:post_id`).
    Identifier,
    /// The page's link.
    Link,
}

/// Arguments of `threadql import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The file to read (`-` for standard input).
    pub file: String,
    /// Its format.
    #[arg(long, value_enum)]
    pub format: ImportFormat,
    /// The layout of the discussions it creates (default: `THREADQL_DEFAULT_LAYOUT`; a
    /// threadql file's own layouts when it is not given).
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
    /// What keys a discussion (default: Disqus `<id>` when it has one, else the link;
    /// WordPress the link).
    #[arg(long, value_enum)]
    pub key: Option<ImportKey>,
    /// Read the file and print the report without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// The most bytes a gzipped file may expand to: past it the import stops with an error
    /// (the flag wins over the variable).
    #[arg(
        long,
        env = "THREADQL_IMPORT_MAX_EXPANDED",
        default_value_t = DEFAULT_MAX_EXPANDED,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_expanded: u64,
}

/// The default of `threadql import --max-expanded` (`THREADQL_IMPORT_MAX_EXPANDED`): 10 GB.
pub(crate) const DEFAULT_MAX_EXPANDED: u64 = 10_000_000_000;

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

impl Config {
    /// The settings of `threadql` run with no flags: the defaults, with the `THREADQL_*`
    /// variables of the environment applied (an error when one is not valid). Tools and tests
    /// start from here and change what they need.
    pub fn defaults() -> Result<Self, clap::Error> {
        Cli::try_parse_from(["threadql"]).map(|cli| cli.config)
    }
}
