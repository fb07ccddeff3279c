//! The threadql binary: parses the command line, sets up logging (and traces when an OTLP
//! endpoint is configured), runs the library.

use std::io::IsTerminal;

use clap::Parser;
use threadql::config::LogFormat;
use threadql::telemetry::trace::{Export, Traces};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

// The allocator: jemalloc by default (the `jemalloc` feature), mimalloc with the `mimalloc`
// feature, else the system's (BENCHMARKS.md, "Hot discussion", compares the three).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = threadql::config::Cli::parse();
    // Traces are set up before the logs so that their layer is part of the subscriber; a
    // configuration error is reported once the logs are up.
    let traces = Export::from_config(&cli.config).and_then(|export| {
        export
            .map(|export| Traces::start(&export).map(|traces| (export, traces)))
            .transpose()
    });
    let otlp = match &traces {
        Ok(Some((_, traces))) => Some(traces.layer()),
        _ => None,
    };
    // Each layer has its own filter: THREADQL_LOG decides what is logged, not what is traced.
    let filter = EnvFilter::try_new(cli.log_filter()).unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let json = matches!(cli.config.log_format, LogFormat::Json);
    let logs = match cli.config.log_format {
        LogFormat::Text => logs.with_filter(filter).boxed(),
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_filter(filter)
            .boxed(),
    };
    tracing_subscriber::registry().with(logs).with(otlp).init();
    if json {
        // A panic (of a task: the process goes on) is a log line like any other, so that in JSON
        // every line of stderr stays one object for the log shipper.
        std::panic::set_hook(Box::new(|info| {
            let location = info.location().map_or_else(
                || "unknown".to_owned(),
                |l| format!("{}:{}", l.file(), l.line()),
            );
            let message = info.payload_as_str().unwrap_or("(no message)");
            tracing::error!(panic.location = %location, "a task panicked: {message}");
        }));
    }
    let traces = match traces {
        Ok(traces) => traces,
        Err(err) => return failed(&err, json),
    };
    if let Some((export, _)) = &traces {
        tracing::info!(endpoint = %export.endpoint, protocol = export.protocol.name(), "traces are sent over OTLP");
    }
    let result = threadql::run(cli).await;
    // The last spans (those of the shutdown included) go out before the process ends.
    if let Some((_, traces)) = traces {
        traces.stop().await;
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => failed(&err, json),
    }
}

/// Reports the error that ends the process: as a log line, and, in text, also as a plain line
/// that shows even when the logs are turned off (in JSON every line stays one object).
fn failed(err: &anyhow::Error, json: bool) -> std::process::ExitCode {
    tracing::error!("{err:#}");
    if !json {
        eprintln!("threadql: {err:#}");
    }
    std::process::ExitCode::FAILURE
}
