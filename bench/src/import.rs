//! The import throughput: a generated Disqus export (discussions of equal size, a third of the
//! comments replies, a reply listed before its parent now and then) is imported with
//! `threadql import` into an empty database, then exported with `threadql export` and that
//! threadql file imported into another empty database. Each import is timed from start to
//! exit, with the peak resident memory of its process.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::{Rng as _, SeedableRng as _};
use serde::Serialize;

/// One timed import (or the export between them).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ImportRun {
    /// `disqus` or `threadql` for an import of that file; `export` for the export.
    pub(crate) format: String,
    /// The layout imported into.
    pub(crate) layout: String,
    /// Discussions in the file.
    pub(crate) discussions: usize,
    /// Comments in the file.
    pub(crate) comments: usize,
    /// The file's size.
    pub(crate) file_bytes: u64,
    /// From start to exit.
    pub(crate) seconds: f64,
    /// Comments per second.
    pub(crate) per_second: f64,
    /// The import process's peak resident memory.
    pub(crate) peak_rss_mb: f64,
}

/// Writes a Disqus export of `discussions` discussions of `per` comments each to `path`,
/// without holding it in memory.
pub(crate) fn write_disqus(
    path: &Path,
    discussions: usize,
    per: usize,
    seed: u64,
) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).context("cannot create the Disqus file")?;
    let mut out = std::io::BufWriter::new(file);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    writeln!(
        out,
        r#"<?xml version="1.0" encoding="utf-8"?>
<disqus xmlns="http://disqus.com" xmlns:dsq="http://disqus.com/disqus-internals" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <category dsq:id="1"><forum>bench</forum><title>General</title><isDefault>true</isDefault></category>"#
    )?;
    for d in 0..discussions {
        writeln!(
            out,
            r#"  <thread dsq:id="{}"><id>article-{d}</id><forum>bench</forum><category dsq:id="1"/><link>https://example.com/articles/{d}</link><title>Article {d} &amp; its comments</title><message/><createdAt>2019-01-01T00:00:00Z</createdAt><author><name>Editor</name><email>editor@example.com</email><isAnonymous>false</isAnonymous><username>editor</username></author><isClosed>false</isClosed><isDeleted>false</isDeleted></thread>"#,
            1_000_000 + d
        )?;
    }
    let start = 1_546_300_800_i64; // 2019-01-01
    let mut id = 10_000_000_u64;
    for d in 0..discussions {
        // Each discussion's posts: a third reply to an earlier one; one in ten replies is listed
        // before its parent (swapped with it in the file).
        let mut posts: Vec<(u64, Option<u64>, i64)> = Vec::with_capacity(per);
        for i in 0..per {
            id += 1;
            let parent = (i > 0 && rng.gen_range(0..3) == 0).then(|| posts[rng.gen_range(0..i)].0);
            let time = start + (d as i64) * 86_400 + (i as i64) * 7;
            posts.push((id, parent, time));
        }
        for i in 1..posts.len() {
            if posts[i].1.is_some() && rng.gen_range(0..10) == 0 {
                posts.swap(i - 1, i);
            }
        }
        for (post, parent, time) in posts {
            let at = chrono::DateTime::from_timestamp(time, 0)
                .unwrap_or_default()
                .format("%Y-%m-%dT%H:%M:%SZ");
            let parent = parent
                .map(|p| format!(r#"<parent dsq:id="{p}"/>"#))
                .unwrap_or_default();
            let user = post % 997;
            let author = match user % 3 {
                0 => format!("<name>Guest {user}</name><email>guest{user}@example.com</email><isAnonymous>true</isAnonymous>"),
                1 => format!("<name>Reader {user}</name><email>reader{user}@example.com</email><isAnonymous>false</isAnonymous><username>reader{user}</username>"),
                _ => format!("<name>Anon {user}</name><isAnonymous>true</isAnonymous>"),
            };
            writeln!(
                out,
                r#"  <post dsq:id="{post}"><id/><message><![CDATA[<p>Comment {post} on article {d}: I <em>really</em> think &amp; so do <a href="https://example.com/{user}">others</a>.</p><p>Second paragraph, with some more words to make a typical comment of a few hundred bytes; Grüße.</p>]]></message><createdAt>{at}</createdAt><isDeleted>false</isDeleted><isSpam>false</isSpam><author>{author}</author><ipAddress>127.0.0.1</ipAddress><thread dsq:id="{}"/>{parent}</post>"#,
                1_000_000 + d
            )?;
        }
    }
    writeln!(out, "</disqus>")?;
    out.flush()?;
    Ok(())
}

/// A `threadql` command that ran to its end.
pub(crate) struct Measured {
    /// Whether it exited with success.
    pub(crate) success: bool,
    /// From start to exit.
    pub(crate) elapsed: Duration,
    /// Its peak resident memory in MB (its high-water mark, read while it ran).
    pub(crate) peak_mb: f64,
    /// What it printed on standard output.
    pub(crate) stdout: String,
    /// What it printed on standard error.
    pub(crate) stderr: String,
}

/// Runs `threadql <args>` with `env` on top of a quiet log, reading its memory's high-water mark
/// every `every` while it runs.
pub(crate) async fn measured(
    server_bin: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    every: Duration,
) -> anyhow::Result<Measured> {
    use tokio::io::AsyncReadExt as _;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(server_bin)
        .args(args)
        .envs(env.iter().copied())
        .env("THREADQL_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run threadql")?;
    let status_file = child.id().map(|pid| format!("/proc/{pid}/status"));
    let mut stdout = child.stdout.take().context("no standard output")?;
    let mut stderr = child.stderr.take().context("no standard error")?;
    let printed = tokio::spawn(async move {
        let (mut out, mut err) = (String::new(), String::new());
        let _ = tokio::join!(
            stdout.read_to_string(&mut out),
            stderr.read_to_string(&mut err)
        );
        (out, err)
    });
    let mut peak_kb = 0_u64;
    let status = loop {
        if let Some(file) = &status_file {
            if let Some(kb) = high_water_kb(file) {
                peak_kb = peak_kb.max(kb);
            }
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        tokio::time::sleep(every).await;
    };
    let elapsed = started.elapsed();
    let (stdout, stderr) = printed.await.unwrap_or_default();
    Ok(Measured {
        success: status.success(),
        elapsed,
        peak_mb: peak_kb as f64 / 1024.0,
        stdout,
        stderr,
    })
}

/// Runs `threadql <args>` against `database` on `uri`; returns its time, its peak resident
/// memory in MB (its high-water mark, read every 20 ms while it runs) and what it printed.
pub(crate) async fn timed(
    server_bin: &Path,
    (uri, database): (&str, &str),
    args: &[&str],
) -> anyhow::Result<(Duration, f64, String)> {
    let env = [
        ("THREADQL_MONGODB_URI", uri),
        ("THREADQL_DATABASE", database),
    ];
    let run = measured(server_bin, args, &env, Duration::from_millis(20)).await?;
    if !run.success {
        anyhow::bail!(
            "threadql {} failed: {}\n{}",
            args.join(" "),
            run.stdout,
            run.stderr
        );
    }
    Ok((run.elapsed, run.peak_mb, run.stdout))
}

/// `VmHWM` of a `/proc/<pid>/status` file, in kB.
fn high_water_kb(file: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The Disqus import, the export and the threadql import, into `layout`.
pub(crate) async fn measure(
    server_bin: &Path,
    uri: &str,
    dir: &Path,
    (discussions, per, seed): (usize, usize, u64),
    layout: &str,
) -> anyhow::Result<Vec<ImportRun>> {
    let disqus = dir.join("bench-disqus.xml");
    write_disqus(&disqus, discussions, per, seed)?;
    let exported: PathBuf = dir.join("bench-export.jsonl");
    let pid = std::process::id();
    let first_db = format!("threadql_bench_import_{pid}_{layout}_a");
    let second_db = format!("threadql_bench_import_{pid}_{layout}_b");
    let mut runs = Vec::new();
    let comments = discussions * per;
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let (disqus_path, export_path) = (path(&disqus), path(&exported));
    let cases = [
        ("disqus", &disqus_path, &first_db),
        ("threadql", &export_path, &second_db),
    ];
    for (format, file, db) in cases {
        if format == "threadql" {
            let (elapsed, peak, _) = timed(
                server_bin,
                (uri, &first_db),
                &["export", "--out", &export_path],
            )
            .await?;
            let seconds = elapsed.as_secs_f64();
            eprintln!("exported {comments} comments from {layout} in {seconds:.1} s, peak RSS {peak:.0} MB");
            runs.push(ImportRun {
                format: "export".to_owned(),
                layout: layout.to_owned(),
                discussions,
                comments,
                file_bytes: std::fs::metadata(&exported).map(|m| m.len()).unwrap_or(0),
                seconds,
                per_second: comments as f64 / seconds.max(1e-9),
                peak_rss_mb: peak,
            });
        }
        let file_bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let (elapsed, peak, report) = timed(
            server_bin,
            (uri, db),
            &["import", file, "--format", format, "--layout", layout],
        )
        .await?;
        if !report.contains(&format!("comments: {comments} ({comments} added)")) {
            anyhow::bail!("the {format} import did not add every comment:\n{report}");
        }
        let seconds = elapsed.as_secs_f64();
        eprintln!("imported {comments} comments from a {format} file into {layout} in {seconds:.1} s, peak RSS {peak:.0} MB");
        runs.push(ImportRun {
            format: format.to_owned(),
            layout: layout.to_owned(),
            discussions,
            comments,
            file_bytes,
            seconds,
            per_second: comments as f64 / seconds.max(1e-9),
            peak_rss_mb: peak,
        });
    }
    Ok(runs)
}
