//! The threadql binary: parses the command line, sets up logging, runs the library.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = threadql::config::Cli::parse();
    let filter = EnvFilter::try_new(&cli.config.log).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match threadql::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("threadql: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
