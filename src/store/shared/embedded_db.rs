//! The embedded development database: runs `secantusd-rs` as a child process.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The binary's name.
pub const BINARY: &str = "secantusd-rs";
/// How to install it, shown when it is missing.
pub const INSTALL_HINT: &str = "install it with: apt-get install -y cmake && cargo install secantus-mdb --version =0.5.3-beta.196 --locked --ignore-rust-version (or run ./scripts/serve.sh, which does this), or set THREADQL_MONGODB_URI to use a MongoDB server";
/// How long start-up may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a graceful stop may take before the process is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long to wait before starting a dead server again (doubling up to 10 s while it fails).
const RESTART_DELAY: Duration = Duration::from_millis(200);
/// How long a leftover server from an earlier run may take to stop before it is killed.
const LEFTOVER_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The file in the data directory that names the running server and the threadql that owns it.
pub const PID_FILE: &str = "threadql-secantusd.pid";

/// Why the embedded database could not start.
#[derive(Debug, Error)]
pub enum EmbeddedDbError {
    /// The binary is not installed.
    #[error("`{BINARY}` was not found; {INSTALL_HINT}")]
    NotInstalled,
    /// It could not be spawned or did not report its port.
    #[error("the embedded database failed to start: {0}")]
    Start(String),
}

/// A supervised `secantusd-rs`: when the process dies while nobody asked it to stop, it is
/// started again on the same port and data, so the server's connection string stays valid and
/// the driver reconnects by itself. Stopped gracefully by [`EmbeddedDb::stop`].
pub struct EmbeddedDb {
    port: u16,
    data_dir: PathBuf,
    pid: Arc<AtomicU32>,
    stop: Option<oneshot::Sender<()>>,
    supervisor: Option<JoinHandle<()>>,
}

impl EmbeddedDb {
    /// Finds the binary: an explicit path, then `PATH`, then `~/.cargo/bin`.
    pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, EmbeddedDbError> {
        if let Some(path) = explicit {
            return if path.is_file() {
                Ok(path.to_path_buf())
            } else {
                Err(EmbeddedDbError::NotInstalled)
            };
        }
        let on_path = std::env::var_os("PATH")
            .map(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join(BINARY))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let in_cargo = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
            .map(|home| home.join("bin").join(BINARY));
        on_path
            .into_iter()
            .chain(in_cargo)
            .find(|candidate| candidate.is_file())
            .ok_or(EmbeddedDbError::NotInstalled)
    }

    /// Starts the server on a free loopback port with its files in `data_dir`, waits until it
    /// reports the port it listens on, and supervises it from then on.
    pub async fn start(binary: &Path, data_dir: &Path) -> Result<Self, EmbeddedDbError> {
        Self::start_on(binary, data_dir, 0).await
    }

    /// Starts the server on `port` (0: a free one), otherwise like [`EmbeddedDb::start`].
    pub async fn start_on(
        binary: &Path,
        data_dir: &Path,
        port: u16,
    ) -> Result<Self, EmbeddedDbError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            EmbeddedDbError::Start(format!("cannot create {}: {e}", data_dir.display()))
        })?;
        // An absolute path on the command line lets a later start recognise a leftover server.
        let data_dir = &std::fs::canonicalize(data_dir).map_err(|e| {
            EmbeddedDbError::Start(format!("cannot resolve {}: {e}", data_dir.display()))
        })?;
        stop_leftover(data_dir).await?;
        let (child, port) = spawn_child(binary, data_dir, port).await?;
        let pid = Arc::new(AtomicU32::new(child.id().unwrap_or(0)));
        let (stop, stopped) = oneshot::channel();
        let supervisor = tokio::spawn(supervise(
            binary.to_path_buf(),
            data_dir.to_path_buf(),
            port,
            child,
            pid.clone(),
            stopped,
        ));
        Ok(Self {
            port,
            data_dir: data_dir.to_path_buf(),
            pid,
            stop: Some(stop),
            supervisor: Some(supervisor),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the server process running now.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::SeqCst)
    }

    /// Where its files are.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A connection string for it.
    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }

    /// Stops it with SIGTERM so it can close its files, killing it if it does not exit in time.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(supervisor) = self.supervisor.take() {
            let _ = supervisor.await;
        }
    }
}

impl Drop for EmbeddedDb {
    fn drop(&mut self) {
        // Without a graceful stop the supervisor ends and the child is killed with it.
        if let Some(supervisor) = self.supervisor.take() {
            supervisor.abort();
        }
    }
}

/// Runs `secantusd-rs` on `port` (0: any free port) and waits for the port it reports.
async fn spawn_child(
    binary: &Path,
    data_dir: &Path,
    port: u16,
) -> Result<(Child, u16), EmbeddedDbError> {
    let mut child = Command::new(binary)
        .args(["--host", "127.0.0.1", "--port"])
        .arg(port.to_string())
        .args(["--log-level", "WARNING", "--storage-path"])
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        // Its own process group: a terminal Ctrl-C reaches threadql, which stops the database
        // only after in-flight requests finish.
        .process_group(0)
        .spawn()
        .map_err(|e| EmbeddedDbError::Start(format!("cannot run {}: {e}", binary.display())))?;
    if let Some(id) = child.id() {
        let record = format!("{id} {}\n", std::process::id());
        if let Err(err) = std::fs::write(data_dir.join(PID_FILE), record) {
            tracing::warn!(%err, "cannot write the embedded database's pid file");
        }
    }
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| EmbeddedDbError::Start("no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
            if let Some(port) = parse_port(&line) {
                return Ok(port);
            }
        }
        Err("the server exited before it listened (is the data directory locked by another instance?)".to_owned())
    })
    .await
    .map_err(|_| EmbeddedDbError::Start("timed out waiting for the port".into()))?
    .map_err(EmbeddedDbError::Start)?;
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, port))
}

/// Watches the child: restarts it on the same port and data when it exits unasked, stops it
/// gracefully when `stopped` fires.
async fn supervise(
    binary: PathBuf,
    data_dir: PathBuf,
    port: u16,
    mut child: Child,
    pid: Arc<AtomicU32>,
    mut stopped: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                tracing::error!(%status, port, "the embedded database exited unexpectedly; starting it again on the same data");
                let mut delay = RESTART_DELAY;
                loop {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        _ = &mut stopped => return,
                    }
                    match spawn_child(&binary, &data_dir, port).await {
                        Ok((next, _)) => {
                            child = next;
                            pid.store(child.id().unwrap_or(0), Ordering::SeqCst);
                            tracing::info!(port, "the embedded database is running again");
                            break;
                        }
                        Err(err) => {
                            tracing::error!(%err, "the embedded database did not start again; retrying");
                            delay = (delay * 2).min(Duration::from_secs(10));
                        }
                    }
                }
            }
            _ = &mut stopped => {
                if let Some(id) = child.id().and_then(|id| i32::try_from(id).ok()) {
                    let _ = kill(Pid::from_raw(id), Signal::SIGTERM);
                }
                if tokio::time::timeout(STOP_TIMEOUT, child.wait()).await.is_err() {
                    tracing::warn!("the embedded database did not stop in time; killing it");
                    let _ = child.kill().await;
                }
                let _ = std::fs::remove_file(data_dir.join(PID_FILE));
                return;
            }
        }
    }
}

/// Stops a server left running on `data_dir` by an earlier threadql that was killed without a
/// chance to stop it (`kill -9`): the pid file names it, and it is stopped only while its command
/// line is still `secantusd-rs` on this data directory. A server whose threadql still runs is
/// left alone, and the start is refused.
async fn stop_leftover(data_dir: &Path) -> Result<(), EmbeddedDbError> {
    let Ok(record) = std::fs::read_to_string(data_dir.join(PID_FILE)) else {
        return Ok(());
    };
    let mut ids = record.split_whitespace().map(str::parse::<i32>);
    let (Some(Ok(id)), owner) = (ids.next(), ids.next().and_then(Result::ok)) else {
        return Ok(());
    };
    if !serves(id, data_dir) {
        return Ok(());
    }
    // While its threadql lives, the server is still that process's child.
    if let Some(owner) = owner.filter(|&owner| parent_of(id) == Some(owner)) {
        return Err(EmbeddedDbError::Start(format!(
            "{} is in use by another threadql (pid {owner})",
            data_dir.display()
        )));
    }
    tracing::warn!(
        pid = id,
        "stopping the embedded database left running by an earlier threadql"
    );
    let _ = kill(Pid::from_raw(id), Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + LEFTOVER_STOP_TIMEOUT;
    while serves(id, data_dir) {
        if tokio::time::Instant::now() >= deadline {
            let _ = kill(Pid::from_raw(id), Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_file(data_dir.join(PID_FILE));
    Ok(())
}

/// Whether process `id` is a live `secantusd-rs` with `--storage-path data_dir`.
fn serves(id: i32, data_dir: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{id}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let is_binary = args
        .first()
        .and_then(|program| Path::new(std::str::from_utf8(program).ok()?).file_name())
        .is_some_and(|name| name == BINARY);
    let on_dir = args.windows(2).any(|pair| {
        pair[0] == b"--storage-path" && Path::new(OsStr::from_bytes(pair[1])) == data_dir
    });
    is_binary && on_dir
}

/// The parent process id of process `id`, from `/proc/ID/stat`.
fn parent_of(id: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{id}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(1)?.parse().ok()
}

/// Reads the port out of `secantusd-rs listening on 127.0.0.1:PORT`.
fn parse_port(line: &str) -> Option<u16> {
    let rest = line.split("listening on ").nth(1)?;
    rest.trim().rsplit(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_port_line() {
        assert_eq!(
            super::parse_port("secantusd-rs listening on 127.0.0.1:45163"),
            Some(45163)
        );
        assert_eq!(super::parse_port("starting"), None);
    }
}
