//! The import bombs: two small gzipped Disqus files that used to cost an import hundreds of
//! megabytes (one nested 20 000 elements deep, one holding a 50 MB text) are read by
//! `threadql import --dry-run`, and the peak resident memory of each run is measured. Neither
//! file needs a database: a dry run connects to none.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

/// One measured run of a bomb.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BombRun {
    /// `deep-20000` or `text-50MB`.
    pub(crate) bomb: String,
    /// The gzipped file's size.
    pub(crate) file_bytes: u64,
    /// Whether the import exited with success (the deep file is refused).
    pub(crate) succeeded: bool,
    /// From start to exit.
    pub(crate) seconds: f64,
    /// The import's peak resident memory (`VmHWM`).
    pub(crate) peak_rss_mb: f64,
    /// The report's or the error's last line.
    pub(crate) said: String,
}

/// Writes `parts` one after another, gzipped, to `path`.
fn gzipped<'a>(path: &Path, parts: impl Iterator<Item = &'a [u8]>) -> anyhow::Result<u64> {
    let file = std::fs::File::create(path).context("cannot create a bomb file")?;
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    for part in parts {
        gz.write_all(part)?;
    }
    gz.finish()?;
    Ok(std::fs::metadata(path)?.len())
}

/// A Disqus file of one thread and one post whose message is `head`, `body`… and `tail`.
fn disqus<'a>(head: &'a str, body: impl Iterator<Item = &'a [u8]>, tail: &'a str) -> Vec<Vec<u8>> {
    let start = format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<disqus xmlns:dsq="http://disqus.com/disqus-internals">
  <thread dsq:id="1"><id>bomb</id><link>https://example.com/bomb</link><title>Bomb</title></thread>
  <post dsq:id="2"><createdAt>2020-01-01T00:00:00Z</createdAt><author><name>Eve</name><username>eve</username></author><thread dsq:id="1"/><message>{head}"#
    );
    let end = format!("{tail}</message></post>\n</disqus>\n");
    let mut parts = vec![start.into_bytes()];
    parts.extend(body.map(<[u8]>::to_vec));
    parts.push(end.into_bytes());
    parts
}

/// Runs `threadql import <file> --format disqus --dry-run`, reading its `VmHWM` every 5 ms.
async fn run_bomb(server_bin: &Path, bomb: &str, file: &Path) -> anyhow::Result<BombRun> {
    let path = file.to_str().context("the file's path is not UTF-8")?;
    let args = ["import", path, "--format", "disqus", "--dry-run"];
    let run = crate::import::measured(server_bin, &args, &[], Duration::from_millis(5)).await?;
    let printed = format!("{}{}", run.stdout, run.stderr);
    Ok(BombRun {
        bomb: bomb.to_owned(),
        file_bytes: std::fs::metadata(file)?.len(),
        succeeded: run.success,
        seconds: run.elapsed.as_secs_f64(),
        peak_rss_mb: run.peak_mb,
        said: printed
            .lines()
            .rfind(|l| l.contains("refused") || l.contains("nests") || l.contains("Error"))
            .unwrap_or_default()
            .to_owned(),
    })
}

/// Writes both bombs to `dir` and measures an import of each with `server_bin`.
pub(crate) async fn measure(server_bin: &Path, dir: &Path) -> anyhow::Result<Vec<BombRun>> {
    let deep = dir.join("deep-20000.xml.gz");
    let (open, close) = ("<a>".repeat(20_000), "</a>".repeat(20_000));
    let parts = disqus("", [open.as_bytes(), close.as_bytes()].into_iter(), "");
    gzipped(&deep, parts.iter().map(Vec::as_slice))?;
    let text = dir.join("text-50MB.xml.gz");
    let megabyte = vec![b'a'; 1 << 20];
    let parts = disqus(
        "<![CDATA[",
        std::iter::repeat_n(megabyte.as_slice(), 50),
        "]]>",
    );
    gzipped(&text, parts.iter().map(Vec::as_slice))?;
    let mut runs = Vec::new();
    for (bomb, file) in [("deep-20000", &deep), ("text-50MB", &text)] {
        let run = run_bomb(server_bin, bomb, file).await?;
        eprintln!(
            "{bomb}: {} bytes gzipped, peak RSS {:.1} MB in {:.1} s",
            run.file_bytes, run.peak_rss_mb, run.seconds
        );
        runs.push(run);
    }
    Ok(runs)
}
