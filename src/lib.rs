//! threadql: a GraphQL API for threaded comments over three MongoDB storage layouts.

pub mod admin; // the moderation console at /admin, served from the binary
pub mod app; // wiring: config -> store -> API -> router
mod assets; // files built into the binary, served by name
pub mod auth; // bearer JWTs
pub mod background; // the loop of background workers' rounds
pub mod config; // typed CLI flags and THREADQL_* env vars
pub mod domain; // comments, slugs, paging, errors (no I/O)
pub mod embed; // the reference embed at /embed, served from the binary
pub mod export; // `threadql export`: discussions, comments and votes to a threadql file
pub mod graphiql; // GraphiQL at /, served from the binary
pub mod graphql; // schema, resolvers, dataloaders, error codes
pub mod http; // axum routes
pub mod import; // `threadql import`: comments from threadql, Disqus and WordPress files
pub mod mail; // notification mail: composing, unsubscribe tokens, sending over SMTP
pub mod migrate; // `threadql migrate` and `key-guest-ids`: migrations of stored data
pub mod notify; // notifications off the write path: the fan-out into inboxes, and mail
pub mod rate; // rate limits per author and per client
pub mod service; // the workflows: checked callers in, domain values and events out
pub mod store; // CommentStore and the MongoDB layouts
pub mod telemetry; // metrics, request ids and spans, request logs, traces over OTLP
pub mod upgrade; // the upgrades of stored data every start runs once
pub mod webhooks; // Standard Webhooks delivery: signing, retries, address rules, the POST

use config::{Cli, Command};

/// Runs the command line's subcommand.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let app = app::App::build(&cli.config).await?;
            app.serve(app::shutdown_signal()).await
        }
        Command::PrintSchema => {
            print!("{}", graphql::sdl());
            Ok(())
        }
        Command::Token(args) => {
            // Only an HS256 secret (or the development secret) can mint: with a public key or
            // a JWKS, tokens come from the identity provider.
            let keys = app::jwt_keys(&cli.config)?;
            let token = anyhow::Context::context(
                keys.try_mint(&args.sub, &args.name, &args.roles, args.ttl_secs),
                "`threadql token` mints only with THREADQL_JWT_SECRET or the development secret",
            )?;
            println!("{token}");
            Ok(())
        }
        Command::Migrate(args) => migrate::run(&cli.config, &args).await,
        Command::Export(args) => export::run(&cli.config, &args).await,
        Command::Import(args) => import::run(&cli.config, &args).await,
        Command::KeyGuestIds => migrate::key_guest_ids(&cli.config).await,
        Command::RenderHtml(args) => migrate::render_html(&cli.config, &args).await,
        Command::ShardSetup => {
            let (store, embedded) = app::connect(&cli.config).await?;
            let done = store.shard_setup().await;
            if let Some(db) = embedded {
                db.stop().await;
            }
            for line in done? {
                println!("{line}");
            }
            Ok(())
        }
    }
}
