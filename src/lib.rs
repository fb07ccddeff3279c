//! threadql: a GraphQL API for threaded comments over three MongoDB storage layouts.

pub mod app; // wiring: config -> store -> API -> router
pub mod auth; // bearer JWTs
pub mod config; // typed CLI flags and THREADQL_* env vars
pub mod domain; // comments, slugs, paging, errors (no I/O)
pub mod graphql; // schema, resolvers, dataloaders, error codes
pub mod http; // axum routes
pub mod store; // CommentStore and the MongoDB layouts

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
            let keys = app::jwt_keys(&cli.config);
            println!(
                "{}",
                keys.mint(&args.sub, &args.name, &args.roles, args.ttl_secs)
            );
            Ok(())
        }
    }
}
