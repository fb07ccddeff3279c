//! The process's own metrics, under the names every Prometheus client library gives them: CPU
//! time, resident memory, open and allowed file descriptors, and start time. They are read at
//! each scrape (`getrusage`, `getrlimit`, `/proc/self`) by a collector, so requests pay nothing
//! for them; what cannot be read (no `/proc`) is left out of the page.

use std::fmt;
use std::sync::OnceLock;

use nix::sys::resource::{getrlimit, getrusage, Resource, UsageWho};
use nix::sys::time::TimeVal;
use nix::unistd::{sysconf, SysconfVar};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::metrics::{counter, gauge, Exposition};

/// Adds the process metrics to the page; they are read when it is encoded.
pub fn write(out: &mut Exposition) {
    out.collect(Process);
}

/// The process metrics that can be read, at each scrape.
#[derive(Debug)]
struct Process;

impl Collector for Process {
    fn encode(&self, mut out: DescriptorEncoder<'_>) -> fmt::Result {
        if let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) {
            let secs = |t: TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            counter(
                &mut out,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                secs(usage.user_time()) + secs(usage.system_time()),
            )?;
        }
        if let Some(bytes) = resident_bytes() {
            gauge(
                &mut out,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                bytes,
            )?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            gauge(
                &mut out,
                "process_open_fds",
                "Number of open file descriptors.",
                fds.count(),
            )?;
        }
        if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
            gauge(
                &mut out,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                soft,
            )?;
        }
        if let Some(start) = start_time() {
            gauge(
                &mut out,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                start,
            )?;
        }
        Ok(())
    }
}

/// Resident pages (`/proc/self/statm`) times the page size.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = u64::try_from(sysconf(SysconfVar::PAGE_SIZE).ok()??).ok()?;
    Some(pages * page)
}

/// When the process started, in seconds since the epoch: the boot time (`btime` in
/// `/proc/stat`) plus the process's start in clock ticks after boot (field 22 of
/// `/proc/self/stat`). It never changes, so it is read once.
fn start_time() -> Option<f64> {
    static START: OnceLock<Option<f64>> = OnceLock::new();
    *START.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (field 2) may hold spaces and parentheses: count from its end, where
        // field 3 starts.
        let after_name = stat.get(stat.rfind(')')? + 1..)?;
        let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
        let per_sec = sysconf(SysconfVar::CLK_TCK).ok()??;
        let boot: u64 = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse()
            .ok()?;
        (per_sec > 0).then(|| boot as f64 + ticks as f64 / per_sec as f64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_metrics_are_read_on_linux() {
        let mut page = Exposition::new();
        write(&mut page);
        let text = page.into_text();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1.0)
        };
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
        ] {
            assert!(value(name) > 0.0, "{name}: {text}");
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let start = value("process_start_time_seconds");
        assert!(start > now - 3600.0 && start <= now + 1.0, "{start} {now}");
    }
}
