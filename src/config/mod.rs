//! Typed configuration: CLI flags with matching `THREADQL_*` environment variables.

mod cli; // the command line: subcommands, their arguments, the flags' value names
mod settings; // `Config`: every setting with its default and range, printed without secrets
mod values; // rate limits and CORS origins, parsed from text

pub use cli::{
    Cli, Command, ExportArgs, ImportArgs, ImportFormat, ImportKey, LayoutArg, LogFormat,
    MigrateArgs, ModerationArg, TokenArgs,
};
pub use settings::{Config, DEFAULT_SERVICE_NAME};
pub use values::{CorsOrigins, Origin, RateLimit};
