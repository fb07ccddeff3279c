//! The embedded development database: runs `secantusd-rs` as a child process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The binary's name.
pub const BINARY: &str = "secantusd-rs";
/// How to install it, shown when it is missing.
pub const INSTALL_HINT: &str = "install it with: apt-get install -y cmake && cargo install secantus-mdb --version =0.5.3-beta.196 --locked --ignore-rust-version (or run ./scripts/serve.sh, which does this), or set THREADQL_MONGODB_URI to use a MongoDB server";
/// How long start-up may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a graceful stop may take before the process is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

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

/// A running `secantusd-rs`, stopped gracefully by [`EmbeddedDb::stop`] (killed if dropped).
pub struct EmbeddedDb {
    child: Child,
    port: u16,
    data_dir: PathBuf,
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

    /// Starts the server on a free loopback port with its files in `data_dir`, and waits until it
    /// reports the port it listens on.
    pub async fn start(binary: &Path, data_dir: &Path) -> Result<Self, EmbeddedDbError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            EmbeddedDbError::Start(format!("cannot create {}: {e}", data_dir.display()))
        })?;
        let mut child = Command::new(binary)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--log-level",
                "WARNING",
                "--storage-path",
            ])
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
        Ok(Self {
            child,
            port,
            data_dir: data_dir.to_path_buf(),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
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
        if let Some(pid) = self.child.id() {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            tracing::warn!("the embedded database did not stop in time; killing it");
            let _ = self.child.kill().await;
        }
    }
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
