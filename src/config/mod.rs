//! Typed configuration: CLI flags with matching `THREADQL_*` environment variables.

mod cli; // the command line: subcommands, their arguments, the flags' value names
mod guests; // whether guests comment: the policy, the proof of work, limits per network
mod notifications; // how people are notified: retention, e-mail
mod origins; // the server's own origins and the pages' origins, read from text
mod settings; // `Config`: every setting with its default and range, printed without secrets
mod values; // rate limits, CORS origins and the value names of flags, parsed from text
mod webhooks; // how webhooks are delivered: timeouts, retries, leases, limits

pub use cli::{
    Cli, Command, ExportArgs, ImportArgs, ImportFormat, ImportKey, MigrateArgs, RenderHtmlArgs,
    TokenArgs,
};
pub use guests::{GuestArg, GuestSettings};
pub use notifications::NotifySettings;
pub use origins::{origin_of, own_origins};
pub use settings::{Config, DEFAULT_SERVICE_NAME};
pub use values::{AutoClose, CorsOrigins, LayoutArg, LogFormat, ModerationArg, Origin, RateLimit};
pub use webhooks::WebhookSettings;
