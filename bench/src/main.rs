//! threadql-bench: compares the storage layouts and the GraphQL overhead on generated discussions.

mod bombs;
mod charts;
mod client;
mod edits;
mod erasure;
mod fanout;
mod floor;
mod history;
mod hot;
mod import;
mod load;
mod markdown;
mod measure;
mod notify;
mod plan;
mod probe;
mod reads;
mod report;
mod server;
mod stats;
mod votes;
mod webhooks;
mod wire;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use rand::Rng as _;
use threadql::auth::JwtKeys;
use threadql::config::LayoutArg;
use threadql::domain::{DiscussionTitle, Layout, Slug};
use threadql::store::embedded_db::EmbeddedDb;
use threadql::store::{Storage, Store};

use crate::client::GraphqlClient;
use crate::measure::{Effort, WriteTarget};
use crate::plan::{Plan, MAX_REPLY_DEPTH};
use crate::reads::{Fixtures, Read};
use crate::report::{group, Case, Machine, Report, Skipped};
use crate::server::Server;

/// Benchmarks the storage layouts and the GraphQL overhead: loads generated discussions, then
/// measures reads (over GraphQL/HTTP and as direct store calls), writes and server memory.
#[derive(Debug, Parser)]
#[command(name = "threadql-bench", version)]
struct Args {
    /// Small sizes and few requests (what CI runs; timings mean little).
    #[arg(long)]
    quick: bool,
    /// Discussion sizes, comma-separated [default: 1000,10000,100000; quick: 100,500].
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Sizes of the embedded layout, whose every post rewrites the whole document, comma-separated
    /// [default: 1000,5000,10000; quick: 100,500].
    #[arg(long, value_delimiter = ',')]
    embedded_sizes: Option<Vec<usize>>,
    /// Concurrent writers for the embedded layout.
    #[arg(long, default_value_t = 16)]
    embedded_writers: usize,
    /// Layouts to measure, comma-separated [default: every layout this build has].
    #[arg(long, value_enum, value_delimiter = ',')]
    layouts: Option<Vec<LayoutArg>>,
    /// Reads to measure, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    reads: Option<Vec<Read>>,
    /// Skip the write measurements.
    #[arg(long)]
    no_writes: bool,
    /// Shares of each discussion's posts that a moderator holds back, in percent, comma-separated:
    /// each size is loaded and measured once per share. Part of the share is held before it is
    /// public (kept outside the layout, as a post to a pre-moderated discussion is), the rest
    /// (`--rejected-share`) is rejected once public (a placeholder in place). `0,10` measures
    /// every size without and with 10 %, in one run.
    #[arg(long, value_delimiter = ',', value_name = "PERCENT,...", default_value = "0", value_parser = clap::value_parser!(u32).range(0..=50))]
    held_percent: Vec<u32>,
    /// How much of the share held back is rejected once public, in percent (the rest is held
    /// before it is public). Rejections go one at a time through the change path, which is
    /// slow on large per-comment discussions.
    #[arg(long, value_name = "PERCENT", default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100))]
    rejected_share: u32,
    /// MongoDB connection string [default: start the embedded development database in a
    /// temporary directory].
    #[arg(long)]
    mongodb_uri: Option<String>,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results.json")]
    out: PathBuf,
    /// Where to draw the charts at the end of the run, as `bench-reads.svg` and
    /// `bench-writes.svg` (by default next to the results, as `<name>-reads.svg` and
    /// `<name>-writes.svg`).
    #[arg(long, value_name = "DIR")]
    charts_dir: Option<PathBuf>,
    /// Measure nothing: draw the charts of a results file written earlier (into `--charts-dir`,
    /// or next to the file).
    #[arg(long, value_name = "FILE")]
    charts_from: Option<PathBuf>,
    /// Measured runs per read and write measurement [default: 3; quick: 2].
    #[arg(long)]
    runs: Option<usize>,
    /// Timed requests per run [default: 100; quick: 20].
    #[arg(long)]
    requests: Option<usize>,
    /// Untimed warm-up requests before each run [default: 20; quick: 3].
    #[arg(long)]
    warmup: Option<usize>,
    /// Longest a run of one read or write measurement may take, in seconds (slow ones make fewer
    /// requests: at least 5 per read, one post per writer) [default: 5; quick: 1].
    #[arg(long)]
    run_secs: Option<f64>,
    /// Posts per run with one writer [default: 300; quick: 20].
    #[arg(long)]
    posts: Option<usize>,
    /// Posts per run with concurrent writers [default: 1600; quick: 64].
    #[arg(long)]
    concurrent_posts: Option<usize>,
    /// Concurrent writers.
    #[arg(long, default_value_t = 32)]
    writers: usize,
    /// Further numbers of concurrent writers to post with, each measured like `--writers` and
    /// drawn in the writes chart, comma-separated (none by default; the embedded layout takes
    /// those below `--embedded-writers`). They run last, in ascending order, on the discussion
    /// the earlier writes grew.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    more_writers: Vec<usize>,
    /// Posts in flight while bulk loading.
    #[arg(long, default_value_t = 8)]
    load_concurrency: usize,
    /// Where discussions are bulk loaded: `per-comment` posts them in the per_comment layout
    /// (the fastest to post into) and then moves them online to the layout under test, as
    /// `threadql migrate` does; `own` posts them in the layout under test. The write
    /// measurements post in the layout under test either way.
    #[arg(long, value_enum, default_value_t = LoadIn::PerComment)]
    load_in: LoadIn,
    /// Longest the bulk load of one discussion may take, in seconds; a layout whose posts are too
    /// slow is measured at the size it reached, and not at larger sizes [default: 1800; quick: 30].
    #[arg(long)]
    load_secs: Option<f64>,
    /// Seed of the generated discussions and writers.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The `threadql` binary to run as the server under test [default: next to this binary].
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Another `threadql` binary to compare the reads with: on each loaded discussion, the two
    /// servers take turns (one run of every read each, `--runs` rounds) on the same data, so the
    /// noise of separate loads stays out of the comparison. Both must read the same stored
    /// layout.
    #[arg(long, value_name = "BIN")]
    compare_server_bin: Option<PathBuf>,
    /// With `--hot-discussion`: another `threadql` binary measured in the same run, on each
    /// layout right after `--server-bin` (repeatable; e.g. builds with `--features mimalloc`
    /// or `--features jemalloc`). Each layout's rows then name their binary.
    #[arg(long, value_name = "BIN")]
    also_server_bin: Vec<PathBuf>,
    /// The tracing filter the servers under test log with (`THREADQL_LOG`): `warn` keeps their
    /// output to problems; `info` is the server's own default, with every request in a span.
    #[arg(long, default_value = "warn")]
    server_log: String,
    /// The `secantusd-rs` binary for the embedded database [default: on PATH or in ~/.cargo/bin].
    #[arg(long)]
    secantusd: Option<PathBuf>,
    /// Measure only the live fan-out: the database commands of one post heard by each of these
    /// numbers of identical subscribers (graphql-transport-ws, 100 per socket), e.g. `1,1000`.
    /// The results go to `--out` as JSON and to standard output as a table.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    fanout: Option<Vec<usize>>,
    /// Votes to cast per comment after each discussion is loaded, through the store's vote path
    /// (32 in flight), by `voter-0` … `voter-199` on comments drawn at random, 70 % UP: the
    /// ranked reads then have scores to order by. `0.2` casts 20 000 votes on 100 000 comments.
    #[arg(long, default_value_t = 0.0, value_name = "F")]
    votes_per_comment: f64,
    /// Measure only the vote throughput: per layout, a discussion of `--vote-comments` comments
    /// is loaded and `voteComment` measured through the server over HTTP with one voter and
    /// with `--voters` concurrent voters (each with its own token). The results go to `--out`
    /// as JSON and to standard output as a table.
    #[arg(long)]
    vote_throughput: bool,
    /// Votes per configuration of the vote throughput.
    #[arg(long, default_value_t = 600)]
    votes: usize,
    /// Concurrent voters of the vote throughput (besides one voter alone).
    #[arg(long, default_value_t = 32)]
    voters: usize,
    /// Comments of the discussion the vote throughput votes in.
    #[arg(long, default_value_t = 1_000)]
    vote_comments: usize,
    /// Measure only the import throughput: a generated Disqus file of `--import-comments`
    /// comments in `--import-discussions` discussions is imported with `threadql import` into
    /// each of `--layouts` (an empty database each), exported, and the export imported again;
    /// each import's time and peak memory go to `--out` as JSON and to standard output.
    #[arg(long)]
    import_throughput: bool,
    /// Measure only the ranked deep-offset probe: per layout, a discussion of
    /// `--ranked-comments` comments with votes, on a server of its own; the server's peak memory
    /// above idle and the time of one request of thirty aliases of `comments(order: TOP,
    /// first: 1)` at the deepest offset it takes (19 990, or the cap), and of one such alias
    /// against the same offset in chronological order; with `--compare-server-bin`, that server
    /// too, on the same data. Results go to `--out` and standard output.
    #[arg(long)]
    ranked_offset: bool,
    /// Comments of the ranked deep-offset probe's discussion [default: 20000; quick: 2000].
    #[arg(long)]
    ranked_comments: Option<usize>,
    /// Measure only the import bombs: the peak memory of `threadql import --dry-run` on a
    /// gzipped Disqus file nested 20 000 deep and on one holding a 50 MB text (no database
    /// needed). `--server-bin` picks the binary, so two builds can be compared; the results go
    /// to `--out` as JSON and to standard output as a table.
    #[arg(long)]
    import_bombs: bool,
    /// Comments of the import throughput's file [default: 100000; quick: 2000].
    #[arg(long)]
    import_comments: Option<usize>,
    /// Discussions of the import throughput's file [default: 500; quick: 20].
    #[arg(long)]
    import_discussions: Option<usize>,
    /// Measure only the hot-discussion scenario: per layout, one discussion of
    /// `--hot-comments` on three servers of one database, started for that layout: A and B with
    /// the read cache at its default size, U without it. Each read of the mix (first page, deep
    /// page by cursor, tree, direct link) is read by `--hot-clients` clients in a closed loop for
    /// `--run-secs`, on U and then on A (once A answers it from its cache), in `--runs` rounds
    /// [default: 3; quick: 1, without warm-up]; then the tree again while a writer posts once a
    /// second through B; then how long B's posts take to show on A (and on B). Discussions read
    /// only once are read on A and on U before all that (A's cache empty) and after it (A's
    /// cache holding what the hot reads left). The results go to `--out` as JSON and to standard
    /// output as tables, with the ratios against the read cache's targets.
    #[arg(long)]
    hot_discussion: bool,
    /// Measure only the worst-case Markdown page: a page of 20 comments of 10 000 characters
    /// nested as deep as the server allows, read with `html` only over HTTP, against a page of
    /// 20 plain comments of the same length (`--runs` rounds of `--requests` reads each). The
    /// results go to `--out` as JSON and to standard output as a table, with each page's ratio
    /// to the plain one.
    #[arg(long)]
    markdown_page: bool,
    /// Measure only the webhook deliveries: with 1 and with 16 writers, posts/s of writers
    /// posting top-level comments to one shared bucketed discussion in a closed loop for
    /// `--run-secs` [default: 10; quick: 2], in `--runs` rounds [default: 3; quick: 1] of a
    /// phase without a webhook endpoint and one with an endpoint subscribed to every kind
    /// (delivering to a receiver in this process), and the lag from each post's commit to its
    /// delivery. The results go to `--out` as JSON and to standard output as a table; the run
    /// fails when a post's delivery does not arrive within 60 s.
    #[arg(long)]
    webhooks: bool,
    /// Measures notifications only: the p50 of posts into a discussion nobody follows and into
    /// one with `--followers` followers (10 000; 1 000 with `--quick`) while its fan-outs run,
    /// and how long the fan-out takes to notify them all. Fails when one does not end within
    /// 300 s.
    #[arg(long)]
    notifications: bool,
    /// Measure only an author's history: per layout, pages of `commentsByAuthor` for an author
    /// of 3 000 comments against one of 40, in the same discussions (quick: 300 against 40).
    /// Fails when the heavy author's page takes more database commands.
    #[arg(long)]
    author_history: bool,
    /// Measure only a person's erasure: per layout, `deleteMyAccount` of a person with 10 000
    /// comments over 500 discussions and a vote in each, and of one with 20 (quick: 1 000 over
    /// 50).
    #[arg(long)]
    erasure: bool,
    /// Followers of the followed discussion (`--notifications`).
    #[arg(long)]
    followers: Option<usize>,
    /// Comments of the hot discussion [default: 2000; quick: 500].
    #[arg(long)]
    hot_comments: Option<usize>,
    /// Concurrent readers of the hot discussion [default: 32; quick: 8].
    #[arg(long)]
    hot_clients: Option<usize>,
    /// Posts through B while A and B are polled for them [default: 20; quick: 5].
    #[arg(long)]
    hot_posts: Option<usize>,
    /// Discussions read only once through each of A and U, half of them before the hot reads
    /// and half after [default: 200; quick: 20].
    #[arg(long)]
    cold_discussions: Option<usize>,
}

/// Where discussions are bulk loaded (see `--load-in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LoadIn {
    PerComment,
    Own,
}

impl Args {
    /// The layout a discussion measured in `layout` is posted in before it is moved there.
    fn load_layout(&self, store: &Store, layout: Layout) -> Layout {
        match self.load_in {
            LoadIn::PerComment if store.layout(Layout::PerComment).is_ok() => Layout::PerComment,
            _ => layout,
        }
    }

    fn sizes(&self, layout: Layout) -> Vec<usize> {
        match (layout, &self.sizes, &self.embedded_sizes) {
            (Layout::Embedded, _, Some(sizes)) | (_, Some(sizes), _) => sizes.clone(),
            _ if self.quick => vec![100, 500],
            (Layout::Embedded, ..) => vec![1_000, 5_000, 10_000],
            _ => vec![1_000, 10_000, 100_000],
        }
    }

    /// Concurrent writers of the concurrent write measurement.
    fn writers(&self, layout: Layout) -> usize {
        match layout {
            Layout::Embedded => self.embedded_writers.max(1),
            _ => self.writers.max(1),
        }
    }

    /// The `--more-writers` counts a layout posts with: each once, none that the single writer
    /// or the concurrent measurement already covers, and for the embedded layout none past its
    /// own number of writers.
    fn more_writers(&self, layout: Layout) -> Vec<usize> {
        let main = self.writers(layout);
        let mut counts: Vec<usize> = self
            .more_writers
            .iter()
            .copied()
            .filter(|n| *n > 1 && *n != main)
            .filter(|n| layout != Layout::Embedded || *n < main)
            .collect();
        counts.sort_unstable();
        counts.dedup();
        counts
    }

    fn effort(&self) -> Effort {
        let pick = |given: Option<usize>, quick: usize, full: usize| {
            given.unwrap_or(if self.quick { quick } else { full })
        };
        Effort {
            runs: pick(self.runs, 2, 3).max(1),
            requests: pick(self.requests, 20, 100).max(1),
            warmup: pick(self.warmup, 5, 20),
            run_secs: self.run_secs.unwrap_or(if self.quick { 1.0 } else { 5.0 }),
            posts_single: pick(self.posts, 30, 300).max(1),
            posts_concurrent: pick(self.concurrent_posts, 128, 1_600).max(1),
            writers: self.writers.max(1),
        }
    }

    fn reads(&self) -> Vec<Read> {
        match &self.reads {
            Some(chosen) => Read::ALL
                .into_iter()
                .filter(|r| chosen.contains(r))
                .collect(),
            None => Read::ALL.to_vec(),
        }
    }

    fn layouts(&self) -> Vec<Layout> {
        match &self.layouts {
            Some(chosen) => Layout::ALL
                .into_iter()
                .filter(|l| chosen.iter().any(|c| Layout::from(*c) == *l))
                .collect(),
            None => Layout::ALL.to_vec(),
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let result = match (&args.charts_from, &args.fanout) {
        (Some(file), _) => redraw(file, args.charts_dir.as_deref()),
        (None, Some(counts)) => run_fanout(&args, counts).await,
        (None, None) if args.vote_throughput => run_votes(&args).await,
        (None, None) if args.import_throughput => run_import(&args).await,
        (None, None) if args.ranked_offset => run_ranked_offset(&args).await,
        (None, None) if args.import_bombs => run_bombs(&args).await,
        (None, None) if args.hot_discussion => run_hot(&args).await,
        (None, None) if args.markdown_page => run_markdown(&args).await,
        (None, None) if args.webhooks => run_webhooks(&args).await,
        (None, None) if args.notifications => run_notifications(&args).await,
        (None, None) if args.author_history => run_history(&args).await,
        (None, None) if args.erasure => run_erasure(&args).await,
        (None, None) => run(args).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("threadql-bench: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A random signing secret for the servers a measurement starts (and the tokens it mints).
fn new_secret() -> String {
    rand::thread_rng()
        .sample_iter(rand::distributions::Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

/// The database the run uses: one it started, or the one it was given.
struct Database {
    uri: String,
    embedded: Option<(EmbeddedDb, PathBuf)>,
}

impl Database {
    /// A store over a database of its own, `<prefix>_<pid>`, with its name. The loader fills
    /// embedded discussions up to their cap and stops there, so they are never promoted.
    async fn store(&self, prefix: &str) -> anyhow::Result<(Store, String)> {
        let db_name = format!("{prefix}_{}", std::process::id());
        let mut config = threadql::config::Config::defaults()?;
        config.database = db_name.clone();
        config.promote_embedded = false;
        let store = Store::connect(&threadql::app::store_config(&config, self.uri.clone()))
            .await
            .context("cannot connect to the benchmark database")?;
        Ok((store, db_name))
    }

    async fn open(args: &Args) -> anyhow::Result<Database> {
        if let Some(uri) = &args.mongodb_uri {
            return Ok(Database {
                uri: uri.clone(),
                embedded: None,
            });
        }
        let binary = EmbeddedDb::locate(args.secantusd.as_deref())?;
        let dir = std::env::temp_dir().join(format!("threadql-bench-{}", std::process::id()));
        let db = EmbeddedDb::start(&binary, &dir).await?;
        eprintln!(
            "started the embedded development database (secantusd-rs) on port {} in {}",
            db.port(),
            dir.display()
        );
        Ok(Database {
            uri: db.uri(),
            embedded: Some((db, dir)),
        })
    }

    fn describe(&self) -> String {
        match &self.embedded {
            Some(_) => {
                "embedded development database (secantusd-rs), started by the harness".into()
            }
            None => "the MongoDB server given with --mongodb-uri".into(),
        }
    }

    async fn close(self) {
        if let Some((db, dir)) = self.embedded {
            db.stop().await;
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let started_at = chrono::Utc::now().to_rfc3339();
    let sizes: Vec<(String, Vec<usize>)> = args
        .layouts()
        .into_iter()
        .map(|layout| (layout.to_string(), args.sizes(layout)))
        .collect();
    let effort = args.effort();
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let database = Database::open(&args).await?;
    let mut report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        started: started_at,
        complete: false,
        total_secs: 0.0,
        machine: Machine::detect(),
        database: database.describe(),
        quick: args.quick,
        sizes: sizes.clone(),
        effort,
        seed: args.seed,
        cases: Vec::new(),
        skipped: Vec::new(),
        counting_ns_per_command: report::counting_cost_ns(),
    };
    // Ctrl-C or SIGTERM stop the run, and still stop the servers and remove the temporary files.
    let result = tokio::select! {
        result = bench(&args, &database, &mut report, &server_bin, started) => result,
        () = threadql::app::shutdown_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    database.close().await;
    result?;
    report.complete = true;
    report.total_secs = started.elapsed().as_secs_f64();
    report.save(&args.out)?;
    println!("{}", report.markdown());
    eprintln!("results written to {}", args.out.display());
    let (reads, writes) = charts::paths(args.charts_dir.as_deref(), &args.out);
    for chart in charts::draw(&charts::Results::of(&report)?, &reads, &writes)? {
        eprintln!("chart drawn in {}", chart.display());
    }
    Ok(())
}

/// Runs `measure` with one server of the binary under test, over a database of its own
/// (`threadql_bench_<name>_<pid>`) and a token it signs; stops the server and the database after
/// it, or when the run is interrupted. Gives the results and the database's description.
async fn on_one_server<T>(
    args: &Args,
    name: &str,
    measure: impl AsyncFnOnce(&Server, &GraphqlClient, &str) -> anyhow::Result<T>,
) -> anyhow::Result<(T, String)> {
    on_one_server_with(args, name, &[], async |server, client, keys, _| {
        let token = keys.mint("bench", "Bench", &[], 3600);
        measure(server, client, &token).await
    })
    .await
}

/// [`on_one_server`] with more server settings (`env`, as [`Server::start_with`] takes them),
/// giving `measure` the keys its tokens are signed with and the process id of the database the
/// harness started (none with `--mongodb-uri`).
async fn on_one_server_with<T>(
    args: &Args,
    name: &str,
    env: &[(&str, Option<&str>)],
    measure: impl AsyncFnOnce(&Server, &GraphqlClient, &JwtKeys, Option<u32>) -> anyhow::Result<T>,
) -> anyhow::Result<(T, String)> {
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let database = Database::open(args).await?;
    let described = database.describe();
    let measured = async {
        let secret = new_secret();
        let keys = JwtKeys::new(&secret);
        let http = client::http_client()?;
        let db_name = format!("threadql_bench_{name}_{}", std::process::id());
        let server = Server::start_with(
            &server_bin,
            &database.uri,
            &db_name,
            &secret,
            &args.server_log,
            http.clone(),
            env,
        )
        .await?;
        let client = GraphqlClient::new(http, server.graphql_url());
        let database_pid = database.embedded.as_ref().map(|(db, _)| db.pid());
        let results = measure(&server, &client, &keys, database_pid).await;
        server.stop().await;
        results
    };
    let results = tokio::select! {
        results = measured => results,
        () = threadql::app::shutdown_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    database.close().await;
    Ok((results?, described))
}

/// Measures the live fan-out only (`--fanout`).
async fn run_fanout(args: &Args, counts: &[usize]) -> anyhow::Result<()> {
    let (results, _) = on_one_server(args, "fanout", async |server, client, token| {
        fanout::measure(server, client, token, counts).await
    })
    .await?;
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)?)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("{}", fanout::markdown(&results));
    eprintln!("results written to {}", args.out.display());
    Ok(())
}

/// `--import-throughput`: the Disqus and threadql imports, per layout.
async fn run_import(args: &Args) -> anyhow::Result<()> {
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let database = Database::open(args).await?;
    let described = database.describe();
    let dir = std::env::temp_dir().join(format!("threadql-bench-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).context("cannot create a directory for the files")?;
    let comments = args
        .import_comments
        .unwrap_or(if args.quick { 2_000 } else { 100_000 });
    let discussions = args
        .import_discussions
        .unwrap_or(if args.quick { 20 } else { 500 })
        .max(1);
    let per = (comments / discussions).max(1);
    let measured = async {
        let mut runs = Vec::new();
        for layout in args.layouts() {
            let found = import::measure(
                &server_bin,
                &database.uri,
                &dir,
                (discussions, per, args.seed),
                layout.as_str(),
            )
            .await?;
            runs.extend(found);
        }
        Ok::<_, anyhow::Error>(runs)
    }
    .await;
    database.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    let runs = measured?;
    println!("| format | layout | discussions | comments | file MB | seconds | comments/s | peak RSS MB |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} |",
            r.format,
            r.layout,
            r.discussions,
            r.comments,
            r.file_bytes as f64 / 1e6,
            r.seconds,
            r.per_second,
            r.peak_rss_mb
        );
    }
    let json = serde_json::json!({
        "kind": "import",
        "database": described,
        "machine": Machine::detect(),
        "runs": runs,
    });
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&json)?)?;
    Ok(())
}

/// `--import-bombs`: the peak memory of imports of the two bomb files.
async fn run_bombs(args: &Args) -> anyhow::Result<()> {
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let dir = std::env::temp_dir().join(format!("threadql-bench-bombs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).context("cannot create a directory for the files")?;
    let measured = bombs::measure(&server_bin, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    let runs = measured?;
    println!("| bomb | file bytes | exit | seconds | peak RSS MB | said |");
    println!("|---|---:|---|---:|---:|---|");
    for r in &runs {
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {} |",
            r.bomb,
            r.file_bytes,
            if r.succeeded { "ok" } else { "error" },
            r.seconds,
            r.peak_rss_mb,
            r.said.trim()
        );
    }
    let json = serde_json::json!({
        "kind": "import-bombs",
        "server_bin": server_bin.display().to_string(),
        "machine": Machine::detect(),
        "runs": runs,
    });
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&json)?)?;
    Ok(())
}

/// Measures the worst-case Markdown page only (`--markdown-page`).
async fn run_markdown(args: &Args) -> anyhow::Result<()> {
    let effort = args.effort();
    let (results, described) = on_one_server(args, "markdown", async |_, client, token| {
        markdown::measure(client, token, effort).await
    })
    .await?;
    let saved = serde_json::json!({
        "kind": "markdown-page",
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "machine": Machine::detect(),
        "database": described,
        "pages": results,
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&saved)?)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("{}", markdown::markdown(&results));
    eprintln!("results written to {}", args.out.display());
    Ok(())
}

/// Measures the webhook deliveries only (`--webhooks`): posts/s without and with an endpoint,
/// and the delivery lag, on one server that may deliver to the loopback receiver.
async fn run_webhooks(args: &Args) -> anyhow::Result<()> {
    let settings = webhooks::Settings::new(
        args.run_secs.unwrap_or(if args.quick { 2.0 } else { 10.0 }),
        args.runs.unwrap_or(if args.quick { 1 } else { 3 }),
        args.seed,
    );
    let env = [("THREADQL_WEBHOOK_ALLOW_INSECURE", Some("true"))];
    let load_at_start = report::load_average();
    let (results, described) =
        on_one_server_with(args, "webhooks", &env, async |server, client, keys, db| {
            webhooks::measure(server, client, keys, db, &settings).await
        })
        .await?;
    let saved = serde_json::json!({
        "kind": "webhooks",
        "quick": args.quick,
        "load_average_at_start": load_at_start,
        "settings": settings,
        "writers": results,
    });
    write_results(args, &described, &saved, &webhooks::markdown(&results))?;
    webhooks::check(&results)
}

/// Measures notifications only (`--notifications`).
async fn run_notifications(args: &Args) -> anyhow::Result<()> {
    let settings = notify::Settings {
        followers: args
            .followers
            .unwrap_or(if args.quick { 1_000 } else { 10_000 }),
        posts: if args.quick { 5 } else { 30 },
        rounds: args.runs.unwrap_or(if args.quick { 1 } else { 3 }),
        alone: if args.quick { 1 } else { 3 },
        seed: args.seed,
    };
    let load_at_start = report::load_average();
    let (result, described) = on_one_server_with(
        args,
        "notifications",
        &[],
        async |server, client, keys, _| notify::measure(server, client, keys, &settings).await,
    )
    .await?;
    let saved = serde_json::json!({
        "kind": "notifications",
        "quick": args.quick,
        "load_average_at_start": load_at_start,
        "settings": settings,
        "result": result,
    });
    write_results(args, &described, &saved, &notify::markdown(&result))
}

/// Measures an author's history only (`--author-history`).
async fn run_history(args: &Args) -> anyhow::Result<()> {
    let settings = history::Settings {
        layouts: ["PER_COMMENT", "BUCKETED", "EMBEDDED"]
            .map(str::to_owned)
            .to_vec(),
        discussions: if args.quick { 10 } else { 30 },
        light: 40,
        heavy: if args.quick { 300 } else { 3_000 },
        warmup: args.warmup.unwrap_or(if args.quick { 3 } else { 20 }),
        requests: args.requests.unwrap_or(if args.quick { 10 } else { 100 }),
        runs: args.runs.unwrap_or(if args.quick { 1 } else { 3 }),
    };
    let load_at_start = report::load_average();
    let (results, described) =
        on_one_server_with(args, "history", &[], async |server, client, keys, _| {
            history::measure(server, client, keys, &settings).await
        })
        .await?;
    let saved = serde_json::json!({
        "kind": "author-history",
        "quick": args.quick,
        "load_average_at_start": load_at_start,
        "settings": settings,
        "layouts": results,
    });
    write_results(
        args,
        &described,
        &saved,
        &history::markdown(&results, &settings),
    )?;
    history::check(&results)
}

/// Measures a person's erasure only (`--erasure`).
async fn run_erasure(args: &Args) -> anyhow::Result<()> {
    let settings = erasure::Settings {
        layouts: ["PER_COMMENT", "BUCKETED", "EMBEDDED"]
            .map(str::to_owned)
            .to_vec(),
        discussions: if args.quick { 50 } else { 500 },
        heavy: if args.quick { 1_000 } else { 10_000 },
        light: 20,
    };
    let load_at_start = report::load_average();
    // One request erases a person of 10 000 comments: longer than the default timeout.
    let env = [("THREADQL_REQUEST_TIMEOUT_SECS", Some("900"))];
    let (results, described) =
        on_one_server_with(args, "erasure", &env, async |server, client, keys, _| {
            erasure::measure(server, client, keys, &settings).await
        })
        .await?;
    let saved = serde_json::json!({
        "kind": "erasure",
        "quick": args.quick,
        "load_average_at_start": load_at_start,
        "settings": settings,
        "layouts": results,
    });
    write_results(
        args,
        &described,
        &saved,
        &erasure::markdown(&results, &settings),
    )
}

/// Comments edited, never voted on and then voted on, before the votes of `--vote-throughput`.
const EDITS: usize = 100;

/// Measures the vote throughput only (`--vote-throughput`), and the cost of an edit.
async fn run_votes(args: &Args) -> anyhow::Result<()> {
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let database = Database::open(args).await?;
    let described = database.describe();
    let measured = async {
        let (store, db_name) = database.store("threadql_bench_votes").await?;
        let secret = new_secret();
        let keys = JwtKeys::new(&secret);
        let http = client::http_client()?;
        let (mut results, mut edited) = (Vec::new(), Vec::new());
        for layout in args.layouts() {
            if store.layout(layout).is_err() {
                eprintln!("skipping the {layout} layout: this build does not have it");
                continue;
            }
            let size = args.vote_comments.max(1);
            let label = format!("{layout} {} (votes)", group(size));
            let plan = Plan::generate(size, args.seed);
            let title =
                DiscussionTitle::parse(&format!("benchmark votes: {layout}, {size} comments"))?;
            let discussion = store
                .discussions()
                .create(title, args.load_layout(&store, layout))
                .await?;
            let loaded = load::load(
                &store,
                discussion,
                &plan,
                &HashSet::new(),
                args.load_concurrency,
                Duration::from_secs(1800),
                &label,
            )
            .await?;
            let (loaded, _) = move_to(&store, loaded, layout, &label).await?;
            let comments: Vec<_> = loaded.slugs.iter().flatten().cloned().collect();
            let server = Server::start(
                &server_bin,
                &database.uri,
                &db_name,
                &secret,
                &args.server_log,
                http.clone(),
            )
            .await?;
            let client = GraphqlClient::new(http.clone(), server.graphql_url());
            let target = votes::VoteTarget {
                layout: loaded.discussion.layout.to_string(),
                discussion: &loaded.discussion.id,
                comments: Arc::new(comments),
                keys: &keys,
                seed: args.seed,
            };
            let mut counts = vec![1, args.voters.max(1)];
            counts.dedup();
            let mut measured = match edits::measure(&server, &client, &target, EDITS).await {
                Ok(costs) => {
                    eprint!("{}", edits::markdown(&costs));
                    edited.extend(costs);
                    Ok(())
                }
                Err(err) => Err(err),
            };
            for voters in counts.into_iter().filter(|_| measured.is_ok()) {
                eprintln!("{label}: {} votes by {voters} voter(s)", args.votes);
                let tag = format!("{layout}-{voters}");
                match votes::measure(&server, &client, &target, voters, args.votes, &tag).await {
                    Ok(result) => {
                        eprint!("{}", votes::markdown(std::slice::from_ref(&result)));
                        results.push(result);
                    }
                    Err(err) => {
                        measured = Err(err);
                        break;
                    }
                }
            }
            server.stop().await;
            measured?;
        }
        anyhow::Ok((results, edited))
    };
    let results = tokio::select! {
        results = measured => results,
        () = threadql::app::shutdown_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    database.close().await;
    let (results, edited) = results?;
    let table = format!(
        "{}\n{}",
        votes::markdown(&results),
        edits::markdown(&edited)
    );
    let saved = serde_json::json!({ "votes": results, "edits": edited });
    write_results(args, &described, &saved, &table)
}

/// Writes a measurement's `results` to `--out` as JSON, with the command, the machine, the
/// database and the seed, and prints its `table`.
fn write_results(
    args: &Args,
    described: &str,
    results: &impl serde::Serialize,
    table: &str,
) -> anyhow::Result<()> {
    let saved = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "machine": Machine::detect(),
        "database": described,
        "seed": args.seed,
        "results": results,
    });
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&saved)?)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("{table}");
    eprintln!("results written to {}", args.out.display());
    Ok(())
}

/// Measures the ranked deep-offset probe only (`--ranked-offset`).
async fn run_ranked_offset(args: &Args) -> anyhow::Result<()> {
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let database = Database::open(args).await?;
    let described = database.describe();
    let comments = args
        .ranked_comments
        .unwrap_or(if args.quick { 2_000 } else { 20_000 });
    let measured = async {
        let (store, db_name) = database.store("threadql_bench_ranked").await?;
        let secret = new_secret();
        let http = client::http_client()?;
        let mut results = Vec::new();
        for layout in args.layouts() {
            if store.layout(layout).is_err() {
                eprintln!("skipping the {layout} layout: this build does not have it");
                continue;
            }
            let loaded = probe::load(&store, layout, comments, args.seed).await?;
            // The server under test, then the one to compare with, on the same stored data.
            let binaries = std::iter::once(&server_bin).chain(args.compare_server_bin.as_ref());
            for binary in binaries {
                let server = Server::start(
                    binary,
                    &database.uri,
                    &db_name,
                    &secret,
                    &args.server_log,
                    http.clone(),
                )
                .await?;
                let mut result =
                    probe::measure(server, http.clone(), layout, loaded.clone()).await?;
                result.server = binary.display().to_string();
                eprint!("{}", probe::markdown(std::slice::from_ref(&result)));
                results.push(result);
            }
        }
        anyhow::Ok(results)
    };
    let results = tokio::select! {
        results = measured => results,
        () = threadql::app::shutdown_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    database.close().await;
    let results = results?;
    write_results(args, &described, &results, &probe::markdown(&results))
}

/// Measures the hot-discussion scenario only (`--hot-discussion`).
async fn run_hot(args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let started_at = chrono::Utc::now().to_rfc3339();
    let server_bin = server::locate(args.server_bin.as_deref())?;
    let effort = args.effort();
    let settings = hot::Settings {
        comments: args
            .hot_comments
            .unwrap_or(if args.quick { 500 } else { 2_000 })
            .max(1),
        clients: args
            .hot_clients
            .unwrap_or(if args.quick { 8 } else { 32 })
            .max(1),
        // Quick mode only shows that the scenario runs: one round, no warm-up.
        rounds: args.runs.unwrap_or(if args.quick { 1 } else { 3 }).max(1),
        run_secs: effort.run_secs,
        warmup_secs: if args.quick {
            0.0
        } else {
            effort.run_secs / 5.0
        },
        staleness_posts: args
            .hot_posts
            .unwrap_or(if args.quick { 5 } else { 20 })
            .max(1),
        cold_discussions: args
            .cold_discussions
            .unwrap_or(if args.quick { 20 } else { 200 })
            .max(2),
        cold_comments: hot::COLD_COMMENTS,
        load_concurrency: args.load_concurrency,
        seed: args.seed,
    };
    let machine = Machine::detect();
    let database = Database::open(args).await?;
    let described = database.describe();
    let measured = async {
        let (store, db_name) = database.store("threadql_bench_hot").await?;
        let mut prepared = Vec::new();
        for layout in args.layouts() {
            if store.layout(layout).is_err() {
                eprintln!("skipping the {layout} layout: this build does not have it");
                continue;
            }
            let load_in = args.load_layout(&store, layout);
            prepared.push(hot::prepare(&store, (layout, load_in), &settings).await?);
        }
        let http = client::http_client()?;
        let secret = new_secret();
        let keys = JwtKeys::new(&secret);
        let binaries: Vec<&std::path::Path> = std::iter::once(server_bin.as_path())
            .chain(args.also_server_bin.iter().map(PathBuf::as_path))
            .collect();
        let mut results = Vec::new();
        for prepared in &prepared {
            for binary in &binaries {
                // Servers of their own for each layout and binary: A's cache holds only what
                // these reads left in it.
                let servers = hot::Servers::start(
                    binary,
                    (&database.uri, &db_name),
                    &secret,
                    &args.server_log,
                    &http,
                )
                .await?;
                let result =
                    hot::measure(&store, &servers, &http, (&keys, &settings), prepared).await;
                servers.stop().await;
                let mut result = result?;
                result.server = binary_name(binary);
                if binaries.len() > 1 {
                    result.layout = format!("{} ({})", result.layout, result.server);
                }
                eprint!("{}", hot::markdown(std::slice::from_ref(&result)));
                results.push(result);
            }
        }
        anyhow::Ok(results)
    };
    let results = tokio::select! {
        results = measured => results,
        () = threadql::app::shutdown_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    database.close().await;
    let results = results?;
    let saved = serde_json::json!({
        "kind": "hot-discussion",
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "started": started_at,
        "total_secs": started.elapsed().as_secs_f64(),
        "machine": Machine {
            load_average_at_end: report::load_average(),
            ..machine
        },
        "database": described,
        "quick": args.quick,
        "settings": settings,
        "layouts": results,
    });
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&saved)?)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("{}", hot::markdown(&results));
    eprintln!(
        "results written to {} ({:.0} s)",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    hot::check_staleness(&results)
}

/// A server binary's file name, which names its build in a comparison.
fn binary_name(binary: &std::path::Path) -> String {
    binary.file_name().map_or_else(
        || binary.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// Draws the charts of a results file written earlier.
fn redraw(file: &std::path::Path, dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let results = charts::Results::load(file)?;
    let (reads, writes) = charts::paths(dir, file);
    for chart in charts::draw(&results, &reads, &writes)? {
        eprintln!("chart drawn in {}", chart.display());
    }
    Ok(())
}

/// Measures every case, saving the report after each one (so a long run that is cut short
/// still leaves its results).
async fn bench(
    args: &Args,
    database: &Database,
    report: &mut Report,
    server_bin: &std::path::Path,
    started: Instant,
) -> anyhow::Result<()> {
    let effort = report.effort;
    let (store, db_name) = database.store("threadql_bench").await?;
    let http = client::http_client()?;
    let secret = new_secret();
    let keys = JwtKeys::new(&secret);
    for layout in args.layouts() {
        if store.layout(layout).is_err() {
            eprintln!("skipping the {layout} layout: this build does not have it");
            report.skipped.push(Skipped {
                layout: layout.to_string(),
                reason: "not available in this build".into(),
            });
            continue;
        }
        let mut capped_at: Option<usize> = None;
        for size in args.sizes(layout) {
            if let Some(cap) = capped_at.filter(|cap| size > *cap) {
                eprintln!(
                    "skipping {layout} at {}: it stopped at {} comments already",
                    group(size),
                    group(cap)
                );
                continue;
            }
            for &held_percent in &args.held_percent {
                let case = bench_case(
                    args,
                    &store,
                    &database.uri,
                    &db_name,
                    &http,
                    &secret,
                    &keys,
                    (layout, size, held_percent),
                    effort,
                    server_bin,
                )
                .await
                .with_context(|| {
                    format!(
                        "{layout} at {} comments, {held_percent} % held back",
                        group(size)
                    )
                })?;
                if case.stopped.is_some() {
                    capped_at = Some(case.loaded);
                }
                eprint!("{}", case.summary());
                report.cases.push(case);
                report.total_secs = started.elapsed().as_secs_f64();
                report.save(&args.out)?;
            }
        }
    }
    if database.embedded.is_none() {
        eprintln!("the benchmark data is left in database {db_name}");
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn bench_case(
    args: &Args,
    store: &Store,
    uri: &str,
    db_name: &str,
    http: &reqwest::Client,
    secret: &str,
    keys: &JwtKeys,
    (layout, size, held_percent): (Layout, usize, u32),
    effort: Effort,
    server_bin: &std::path::Path,
) -> anyhow::Result<Case> {
    let label = match held_percent {
        0 => format!("{layout} {}", group(size)),
        p => format!("{layout} {}, {p} % held back", group(size)),
    };
    let plan = Plan::generate(size, args.seed);
    // The reads' fixtures stay public; the comments held back are chosen among the others.
    let keep: Vec<usize> = [
        plan.link_target(3),
        plan.largest_thread_root(),
        plan.busiest(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let (held, rejected) = plan.moderated(held_percent, args.rejected_share, args.seed, &keep);
    let held: HashSet<usize> = held.into_iter().collect();
    let title = DiscussionTitle::parse(&format!("benchmark: {layout}, {size} comments"))?;
    let discussion = store
        .discussions()
        .create(title, args.load_layout(store, layout))
        .await?;
    let budget = args
        .load_secs
        .unwrap_or(if args.quick { 30.0 } else { 1800.0 });
    let loaded = load::load(
        store,
        discussion,
        &plan,
        &held,
        args.load_concurrency,
        Duration::from_secs_f64(budget.max(0.0)),
        &label,
    )
    .await?;
    let (loaded, move_secs) = move_to(store, loaded, layout, &label).await?;
    // Half of the share held back is rejected once public, in the layout under test.
    let to_reject: Vec<_> = rejected
        .iter()
        .filter_map(|&i| loaded.slugs.get(i).cloned().flatten())
        .collect();
    // One at a time: changes of one discussion's comments in flight together abort each
    // other's transactions (each marks the discussion), and a moderator rejects one by one.
    let rejected_in_place = load::reject_in_place(store, &loaded.discussion, &to_reject, 1).await?;
    if rejected_in_place > 0 {
        eprintln!("{label}: rejected {rejected_in_place} comments in place");
    }
    // Votes on the comments public in the layout (not those held, nor the placeholders).
    let votes = if args.votes_per_comment > 0.0 {
        let rejected: HashSet<usize> = rejected.iter().copied().collect();
        let public: Vec<_> = loaded
            .slugs
            .iter()
            .enumerate()
            .filter(|(i, _)| !held.contains(i) && !rejected.contains(i))
            .filter_map(|(_, slug)| slug.clone())
            .collect();
        Some(
            load::cast_votes(
                store,
                &loaded.discussion,
                &public,
                args.votes_per_comment,
                args.seed,
                &label,
            )
            .await?,
        )
    } else {
        None
    };
    // Fixtures come from the comments that were loaded (all of them unless a cap stopped it).
    let loaded_prefix = loaded
        .slugs
        .iter()
        .position(Option::is_none)
        .unwrap_or(loaded.slugs.len());
    let plan = plan.prefix(loaded_prefix);
    let fixtures = fixtures_of(store, &loaded, &plan).await?;
    let parents = reply_targets(&loaded, &plan, &held);

    let turns = Turns {
        store,
        uri,
        db_name,
        secret,
        log: &args.server_log,
        http,
        fixtures: &fixtures,
        reads: args.reads(),
        effort,
    };
    let compared = match &args.compare_server_bin {
        Some(other) => Some(turns.compare(server_bin, other, &label).await?),
        None => None,
    };
    let server = Server::start(
        server_bin,
        uri,
        db_name,
        secret,
        &args.server_log,
        http.clone(),
    )
    .await?;
    let client = GraphqlClient::new(http.clone(), server.graphql_url());
    let measured = async {
        let reads = match &compared {
            Some(compared) => compared.reads.clone(),
            None => {
                eprintln!("{label}: measuring reads (server pid {})", server.pid());
                measure::reads(store, &server, &client, &fixtures, &args.reads(), effort).await?
            }
        };
        if args.no_writes {
            let peak = server.peak_rss_bytes()?;
            return anyhow::Ok((reads, Vec::new(), peak, None));
        }
        let floor = match layout {
            Layout::Embedded => {
                eprintln!("{label}: measuring the database's floor for rewriting the document");
                Some(floor::measure(uri, db_name, &loaded.discussion.id, effort).await?)
            }
            _ => None,
        };
        eprintln!("{label}: measuring writes");
        let target = WriteTarget {
            discussion: &loaded.discussion.id,
            parents: Arc::new(parents),
            keys,
            seed: args.seed,
        };
        let single = measure::writes(
            &server,
            &client,
            &target,
            (1, false),
            effort.posts_single,
            effort,
        )
        .await?;
        let floor = match floor {
            Some(mut floor) => {
                eprintln!("{label}: measuring the floor again on the grown document");
                let after = floor::measure(uri, db_name, &loaded.discussion.id, effort).await?;
                floor.after = Some(Box::new(after));
                Some(floor)
            }
            None => None,
        };
        let many = measure::writes(
            &server,
            &client,
            &target,
            (args.writers(layout), false),
            effort.posts_concurrent,
            effort,
        )
        .await?;
        eprintln!("{label}: measuring a conversation (replies to this run's comments)");
        let talk = measure::writes(
            &server,
            &client,
            &target,
            (1, true),
            effort.posts_single,
            effort,
        )
        .await?;
        let mut writes = vec![single, many, talk];
        for writers in args.more_writers(layout) {
            eprintln!("{label}: measuring writes with {writers} writers");
            let more = measure::writes(
                &server,
                &client,
                &target,
                (writers, false),
                effort.posts_concurrent,
                effort,
            )
            .await?;
            writes.push(more);
        }
        let peak = server.peak_rss_bytes()?;
        anyhow::Ok((reads, writes, peak, floor))
    }
    .await;
    server.stop().await;
    let (reads, writes, peak, floor) = measured?;
    let after = load::reload(store, &loaded.discussion).await?;
    Ok(Case {
        layout: layout.to_string(),
        size,
        held_percent,
        held: loaded.held,
        rejected: rejected_in_place,
        loaded: loaded.posted,
        final_layout: after.layout.to_string(),
        loaded_in: args.load_layout(store, layout).to_string(),
        move_secs,
        stopped: loaded.stopped.clone(),
        load_secs: loaded.elapsed.as_secs_f64(),
        load_posts_per_sec: loaded.posted as f64 / loaded.elapsed.as_secs_f64().max(1e-9),
        shape: plan.shape(),
        deep_offset: fixtures.deep_offset,
        votes,
        reads,
        writes,
        floor,
        comments_after_writes: after.comment_count,
        server_peak_rss_mib: peak as f64 / (1024.0 * 1024.0),
        compared: compared.map(|c| c.other),
    })
}

/// What the reads of a discussion loaded from `plan` point at: the direct link to a comment at
/// depth 3 near the middle, the largest thread's sub-discussion, the busiest comment's replies.
async fn fixtures_of(
    store: &Store,
    loaded: &load::Loaded,
    plan: &Plan,
) -> anyhow::Result<Fixtures> {
    let stored = |index: Option<usize>| {
        index
            .and_then(|i| loaded.slugs.get(i).cloned().flatten())
            .context("the planned comment was not loaded")
    };
    let link = stored(plan.link_target(3))?;
    let sub_root = stored(plan.largest_thread_root())?;
    let busiest = stored(plan.busiest())?;
    Fixtures::new(store, &loaded.discussion, link, sub_root, busiest).await
}

/// The loaded comments a writer may reply to: those above the deepest generated level, not held
/// back.
fn reply_targets(loaded: &load::Loaded, plan: &Plan, held: &HashSet<usize>) -> Vec<Slug> {
    loaded
        .slugs
        .iter()
        .zip(&plan.comments)
        .enumerate()
        .filter(|(i, (_, c))| c.depth < MAX_REPLY_DEPTH && !held.contains(i))
        .filter_map(|(_, (s, _))| s.clone())
        .collect()
}

/// What the reads of one loaded discussion need, to measure them with any server binary.
struct Turns<'a> {
    store: &'a Store,
    uri: &'a str,
    db_name: &'a str,
    secret: &'a str,
    log: &'a str,
    http: &'a reqwest::Client,
    fixtures: &'a Fixtures,
    reads: Vec<Read>,
    effort: Effort,
}

/// The reads of the server under test and of the one compared with it, measured in turns.
struct Compared {
    reads: Vec<measure::ReadResult>,
    other: report::Compared,
}

impl Turns<'_> {
    /// One run of every read with a fresh server of `binary`.
    async fn once(&self, binary: &std::path::Path) -> anyhow::Result<Vec<measure::ReadResult>> {
        let server = Server::start(
            binary,
            self.uri,
            self.db_name,
            self.secret,
            self.log,
            self.http.clone(),
        )
        .await?;
        let client = GraphqlClient::new(self.http.clone(), server.graphql_url());
        let one = Effort {
            runs: 1,
            ..self.effort
        };
        let reads = measure::reads(
            self.store,
            &server,
            &client,
            self.fixtures,
            &self.reads,
            one,
        )
        .await
        .with_context(|| format!("reads with {}", binary.display()));
        server.stop().await;
        reads
    }

    /// `effort.runs` rounds, each one run of every read with `ours` and then with `other`.
    async fn compare(
        &self,
        ours: &std::path::Path,
        other: &std::path::Path,
        label: &str,
    ) -> anyhow::Result<Compared> {
        let (mut mine, mut theirs) = (Vec::new(), Vec::new());
        for round in 1..=self.effort.runs.max(1) {
            eprintln!(
                "{label}: reads, round {round} of {}: {} then {}",
                self.effort.runs,
                ours.display(),
                other.display()
            );
            mine.push(self.once(ours).await?);
            theirs.push(self.once(other).await?);
        }
        Ok(Compared {
            reads: measure::merge_turns(&mine),
            other: report::Compared {
                server_bin: ours.display().to_string(),
                other_bin: other.display().to_string(),
                reads: measure::merge_turns(&theirs),
            },
        })
    }
}

/// Moves a discussion loaded in another layout to `layout` (online, as `threadql migrate`
/// does); returns it as it is then and how long the move took. A discussion that stopped
/// loading early (a layout's cap moved it) stays where it is.
async fn move_to(
    store: &Store,
    mut loaded: load::Loaded,
    layout: Layout,
    label: &str,
) -> anyhow::Result<(load::Loaded, Option<f64>)> {
    if loaded.discussion.layout == layout || loaded.stopped.is_some() {
        return Ok((loaded, None));
    }
    let from = loaded.discussion.layout;
    eprintln!("{label}: moving the discussion from {from} to {layout}");
    let started = Instant::now();
    let moved = store
        .moves()
        .migrate(&loaded.discussion.id, layout, &|_| {}, &|_| Vec::new())
        .await
        .with_context(|| format!("moving the loaded discussion from {from} to {layout}"))?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{label}: moved {} comments in {secs:.1}s",
        group(usize::try_from(moved.comments).unwrap_or(usize::MAX))
    );
    loaded.discussion = moved.discussion;
    Ok((loaded, Some(secs)))
}
