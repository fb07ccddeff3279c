//! `threadql import`: discussions and comments from a threadql, Disqus or WordPress file
//! (docs/formats.md), streamed, idempotent and safe to run again after an interruption.

pub mod bounded;
pub mod disqus;
pub mod engine;
#[cfg(test)]
mod fixtures;
pub mod html;
pub mod source;
pub mod threadql;
pub mod wordpress;
mod xml;

use std::io::{BufRead, IsTerminal as _};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};

use std::sync::Arc;

use crate::app;
use crate::config::{Config, ImportArgs, ImportFormat, ImportKey};
use crate::domain::WordLists;
use engine::{Item, Options, Report};
use source::{FormatError, KeyFrom};

/// Runs `threadql import`: prints the report, and fails when the file could not be read or
/// something in it could not be imported.
pub async fn run(config: &Config, args: &ImportArgs) -> anyhow::Result<()> {
    let format = match args.format {
        ImportFormat::Threadql => "threadql",
        ImportFormat::Disqus => "disqus",
        ImportFormat::Wordpress => "wordpress",
    };
    let options = Options {
        format,
        layout: args.layout.map(Into::into),
        default_layout: config.default_layout.into(),
        max_depth: usize::try_from(config.max_depth)
            .unwrap_or(usize::MAX)
            .max(1),
        max_text_chars: config.max_text_chars,
        max_markdown_depth: config.max_markdown_depth as usize,
        dry_run: args.dry_run,
        lease: Duration::from_secs(config.move_lease_secs),
    };
    // The file is checked before anything connects: a file that cannot be opened costs nothing.
    let input = open(&args.file, args.max_expanded)?;
    let key = args.key.map(|k| match k {
        ImportKey::Identifier => KeyFrom::Identifier,
        ImportKey::Link => KeyFrom::Link,
    });
    let items = items(args.format, input, key);
    let progress = Progress::new();
    let report = if args.dry_run {
        engine::import(None, items, &options, &|done, total| {
            progress.show(done, total)
        })
        .await
    } else {
        let configured = app::configured_key(config)?;
        let (store, embedded) = app::connect(config).await?;
        let report = async {
            let key = app::server_key(configured, store.as_ref()).await?;
            let words = Arc::new(WordLists::default());
            let services = app::services(config, store.clone(), words, &key);
            services
                .load_reserved_names()
                .await
                .context("cannot read the reserved names")?;
            engine::import(Some(&services), items, &options, &|done, total| {
                progress.show(done, total)
            })
            .await
        }
        .await;
        if let Some(db) = embedded {
            db.stop().await;
        }
        report
    };
    progress.finish();
    let report = report?;
    print(&report, args.dry_run);
    if report.problems.is_empty() {
        Ok(())
    } else {
        anyhow::bail!("{} problems: see the report", report.problems.len())
    }
}

/// The file, or standard input for `-`; gunzipped when its name ends in `.gz`, to at most
/// `max_expanded` bytes.
fn open(file: &str, max_expanded: u64) -> anyhow::Result<Box<dyn BufRead + Send>> {
    if file == "-" {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let opened =
        std::fs::File::open(file).with_context(|| format!("cannot open the file {file}"))?;
    if file.ends_with(".gz") {
        let unzipped = flate2::read::GzDecoder::new(opened);
        let bounded = bounded::Expansion::new(unzipped, max_expanded);
        return Ok(Box::new(std::io::BufReader::new(bounded)));
    }
    Ok(Box::new(std::io::BufReader::new(opened)))
}

/// The items of a file of `format`.
pub fn items(
    format: ImportFormat,
    input: Box<dyn BufRead + Send>,
    key: Option<KeyFrom>,
) -> Box<dyn Iterator<Item = Result<Item, FormatError>> + Send> {
    match format {
        // A threadql file keys its discussions itself.
        ImportFormat::Threadql => {
            Box::new(threadql::ThreadqlReader::new(input).map(|r| r.map(Item::Line)))
        }
        ImportFormat::Disqus => {
            Box::new(disqus::DisqusReader::new(input, key).map(|r| r.map(Item::Source)))
        }
        ImportFormat::Wordpress => {
            Box::new(wordpress::WordPressReader::new(input, key).map(|r| r.map(Item::Source)))
        }
    }
}

fn print(report: &Report, dry_run: bool) {
    if dry_run {
        println!("dry run: nothing was written");
    }
    for line in report.lines() {
        println!("{line}");
    }
}

/// Progress: a bar on a terminal, a line every few seconds otherwise (on standard error).
struct Progress {
    bar: Option<ProgressBar>,
    last: std::sync::Mutex<Instant>,
}

impl Progress {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "importing [{bar:30}] {pos}/{len} discussions ({elapsed})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar
        });
        Self {
            bar,
            last: std::sync::Mutex::new(Instant::now()),
        }
    }

    fn show(&self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_position(done);
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if done == total || last.elapsed() >= Duration::from_secs(2) {
            *last = Instant::now();
            eprintln!("imported {done}/{total} discussions");
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
