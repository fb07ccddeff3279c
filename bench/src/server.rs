//! The server under test: a `threadql serve` child process, its metrics and its peak memory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How long the server may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Finds the `threadql` binary: an explicit path, or the one built next to this harness.
pub(crate) fn locate(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let candidate = match explicit {
        Some(path) => path.to_path_buf(),
        None => std::env::current_exe()
            .context("cannot find the harness's own path")?
            .with_file_name("threadql"),
    };
    if candidate.is_file() {
        Ok(candidate)
    } else {
        bail!(
            "the server binary {} does not exist: build it with `cargo build --release --bins` (or pass --server-bin)",
            candidate.display()
        )
    }
}

/// A running `threadql serve`.
pub(crate) struct Server {
    child: Child,
    pid: u32,
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub base: String,
    http: reqwest::Client,
}

impl Server {
    /// Starts the server on a free loopback port against `uri`/`database`, logging with the
    /// tracing filter `log`, and waits until `/readyz` answers.
    pub(crate) async fn start(
        binary: &Path,
        uri: &str,
        database: &str,
        jwt_secret: &str,
        log: &str,
        http: reqwest::Client,
    ) -> anyhow::Result<Server> {
        Self::start_with(binary, uri, database, jwt_secret, log, http, &[]).await
    }

    /// [`Server::start`] with more settings: each `(name, Some(value))` of `env` is set in the
    /// server's environment after the harness's own, each `(name, None)` removed from it (the
    /// server's default then holds, whatever the harness's environment says).
    pub(crate) async fn start_with(
        binary: &Path,
        uri: &str,
        database: &str,
        jwt_secret: &str,
        log: &str,
        http: reqwest::Client,
        env: &[(&str, Option<&str>)],
    ) -> anyhow::Result<Server> {
        let port = free_port()?;
        let listen = format!("127.0.0.1:{port}");
        let mut command = Command::new(binary);
        command
            .arg("serve")
            .env("THREADQL_MONGODB_URI", uri)
            .env("THREADQL_DATABASE", database)
            .env("THREADQL_LISTEN", &listen)
            .env("THREADQL_JWT_SECRET", jwt_secret)
            .env("THREADQL_LOG", log)
            // The harness loads data and measures throughput: no rate limits.
            .env("THREADQL_RATE_LIMIT", "off")
            .env("THREADQL_RATE_LIMIT_ANON", "off")
            .env("THREADQL_RATE_LIMIT_READS", "off")
            .env("THREADQL_VOTE_RATE_LIMIT", "off")
            // The tree read (20 threads, 4 levels of 10 replies) may return 222 220 comments in
            // principle, far past the default cost limit that protects a public server.
            .env("THREADQL_MAX_COMPLEXITY", "100000000")
            // The fan-out measurement holds thousands of subscriptions from one address.
            .env("THREADQL_MAX_SUBSCRIPTIONS", "1000000")
            .env("THREADQL_MAX_SUBSCRIPTIONS_PER_CLIENT", "1000000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (name, value) in env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        let child = command
            .spawn()
            .with_context(|| format!("cannot run {}", binary.display()))?;
        let pid = child.id().context("the server exited at once")?;
        let mut server = Server {
            child,
            pid,
            base: format!("http://{listen}"),
            http,
        };
        server.wait_ready().await?;
        Ok(server)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let url = format!("{}/readyz", self.base);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("the server exited before it was ready ({status})");
            }
            if let Ok(response) = self.http.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!("the server was not ready after {READY_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The GraphQL endpoint.
    pub(crate) fn graphql_url(&self) -> String {
        format!("{}/graphql", self.base)
    }

    /// Database commands the server has sent so far (sum of `threadql_db_commands_total`).
    pub(crate) async fn db_commands(&self) -> anyhow::Result<u64> {
        let body = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        Ok(parse_commands_total(&body))
    }

    /// Database commands the server has sent so far, by command name.
    pub(crate) async fn db_commands_by_name(
        &self,
    ) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
        let body = self.metrics().await?;
        Ok(body
            .lines()
            .filter_map(|line| line.strip_prefix("threadql_db_commands_total{command=\""))
            .filter_map(|rest| {
                let (name, count) = rest.split_once("\"} ")?;
                Some((name.to_owned(), count.trim().parse::<u64>().ok()?))
            })
            .collect())
    }

    /// A counter of the server's `/metrics` with one label, by the label's value (`name{label="value"} N`).
    pub(crate) async fn counters_by_label(
        &self,
        name: &str,
    ) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
        Ok(parse_by_label(&self.metrics().await?, name))
    }

    /// One unlabelled gauge or counter of the server's `/metrics`.
    pub(crate) async fn metric(&self, name: &str) -> anyhow::Result<u64> {
        let [value] = self.metrics_of([name]).await?;
        Ok(value)
    }

    /// Several unlabelled gauges or counters of the server's `/metrics`, read at once.
    pub(crate) async fn metrics_of<const N: usize>(
        &self,
        names: [&str; N],
    ) -> anyhow::Result<[u64; N]> {
        let body = self.metrics().await?;
        let mut values = [0; N];
        for (value, name) in values.iter_mut().zip(names) {
            *value = body
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|value| value.trim().parse::<u64>().ok())
                .with_context(|| format!("/metrics has no {name}"))?;
        }
        Ok(values)
    }

    async fn metrics(&self) -> anyhow::Result<String> {
        Ok(self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?)
    }

    /// Peak resident memory of the server process so far, in bytes (`VmHWM`).
    pub(crate) fn peak_rss_bytes(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("cannot read the server's /proc status")?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .context("no VmHWM line in the server's /proc status")
    }

    /// CPU time the server's threads have used so far.
    pub(crate) fn cpu_time(&self) -> Duration {
        cpu_time(&format!("/proc/{}", self.pid))
    }

    /// The server's process id (for profiling).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Stops the server with SIGTERM and waits for it (killing it after a while).
    pub(crate) async fn stop(mut self) {
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// CPU time used by the live threads of a process (`/proc/<pid>/task/*/schedstat`, in ns).
pub(crate) fn cpu_time(proc_dir: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("{proc_dir}/task")) else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// A loopback port that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Sums every `threadql_db_commands_total{…} N` line of a Prometheus text body.
fn parse_commands_total(body: &str) -> u64 {
    body.lines()
        .filter(|line| line.starts_with("threadql_db_commands_total"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Every `name{label="value"} N` line of a Prometheus text body, as value → N.
fn parse_by_label(body: &str, name: &str) -> std::collections::BTreeMap<String, u64> {
    body.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|rest| {
            let (labels, count) = rest.split_once("} ")?;
            let (_, value) = labels.split_once("=\"")?;
            let count = count.trim().parse::<f64>().ok()?;
            Some((value.trim_end_matches('"').to_owned(), count as u64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_the_command_counter() {
        let body = "# HELP x\n# TYPE threadql_db_commands_total counter\nthreadql_db_commands_total{command=\"find\"} 12\nthreadql_db_commands_total{command=\"insert\"} 3\nother 9\n";
        assert_eq!(super::parse_commands_total(body), 15);
    }

    #[test]
    fn reads_a_counter_by_its_label() {
        let body = "# TYPE threadql_webhook_deliveries_total counter\nthreadql_webhook_deliveries_total{result=\"succeeded\"} 7\nthreadql_webhook_deliveries_total{result=\"retried\"} 0\nthreadql_webhook_lag_seconds_count 7\n";
        let found = super::parse_by_label(body, "threadql_webhook_deliveries_total");
        assert_eq!(found.get("succeeded"), Some(&7));
        assert_eq!(found.get("retried"), Some(&0));
        assert_eq!(found.len(), 2);
    }
}
