//! `threadql import` as a process of its own, measured: what it printed, whether it succeeded,
//! and its peak resident memory; and the files it is given (gzipped, Disqus, threadql lines).

use std::io::Write as _;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt as _;

use super::app::TestApp;
use super::database::server_uri;

/// What one run of `threadql import` did.
#[derive(Debug)]
pub(crate) struct ImportRun {
    /// Whether it exited with success.
    pub ok: bool,
    /// Its standard output (the report).
    pub stdout: String,
    /// Its standard error (errors, progress).
    pub stderr: String,
    /// Its peak resident memory (`VmHWM`), in MiB, read every 10 ms while it ran.
    pub peak_mib: f64,
}

/// Runs `threadql import <args>` against `app`'s database (none needed for `--dry-run`), with
/// `env` on top; measures its peak resident memory.
pub(crate) async fn import_measured(
    app: Option<&TestApp>,
    args: &[&str],
    env: &[(&str, &str)],
) -> ImportRun {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"));
    command
        .arg("import")
        .args(args)
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_LOG", "warn")
        .env("THREADQL_MOVE_LEASE_SECS", "1")
        .env_remove("THREADQL_IMPORT_MAX_EXPANDED")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(app) = app {
        command.env("THREADQL_DATABASE", &app.database);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("run threadql import");
    let status_file = format!("/proc/{}/status", child.id().expect("a running import"));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let printed = tokio::spawn(async move {
        let (mut out, mut err) = (String::new(), String::new());
        let _ = tokio::join!(
            stdout.read_to_string(&mut out),
            stderr.read_to_string(&mut err)
        );
        (out, err)
    });
    let mut peak_kib = 0_u64;
    let status = loop {
        if let Some(kib) = high_water_kib(&status_file) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().expect("wait for the import") {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let (stdout, stderr) = printed.await.expect("the import's output");
    ImportRun {
        ok: status.success(),
        stdout,
        stderr,
        peak_mib: peak_kib as f64 / 1024.0,
    }
}

/// `VmHWM` of a `/proc/<pid>/status` file, in KiB (`None` once the process is gone).
fn high_water_kib(file: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Writes `parts` (written one after another, never whole in memory) gzipped to `path`.
pub(crate) fn write_gzipped<'a>(path: &std::path::Path, parts: impl Iterator<Item = &'a [u8]>) {
    let file = std::fs::File::create(path).expect("create the file");
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    for part in parts {
        gz.write_all(part).expect("write the file");
    }
    gz.finish().expect("finish the file");
}

/// A Disqus export of one thread (`dsq:id` 1) with `posts` inside (each a `<post>` element).
pub(crate) fn disqus_export(posts: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<disqus xmlns:dsq="http://disqus.com/disqus-internals">
  <thread dsq:id="1"><id>probe</id><link>https://example.com/probe</link><title>Probe</title><createdAt>2020-01-01T00:00:00Z</createdAt></thread>
{posts}
</disqus>
"#
    )
}

/// A Disqus `<post>` of thread 1: `id`, by the user `username`, with `message` as written.
pub(crate) fn disqus_post(id: u32, username: &str, message: &str) -> String {
    format!(
        r#"<post dsq:id="{id}"><message>{message}</message><createdAt>2020-01-02T00:00:{:02}Z</createdAt><isDeleted>false</isDeleted><isSpam>false</isSpam><author><name>{username}</name><username>{username}</username></author><thread dsq:id="1"/></post>"#,
        id % 60
    )
}

/// A threadql file: its header, then `lines` (discussion, comment and vote lines), one a line.
pub(crate) fn threadql_file(lines: &[Value]) -> Vec<u8> {
    let mut out =
        String::from(r#"{"format":"threadql","version":1,"exported":"2020-01-01T00:00:00Z"}"#);
    out.push('\n');
    for line in lines {
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out.into_bytes()
}
