//! The report: what was measured (JSON) and the markdown tables printed at the end.

use std::fmt::Write as _;

use serde::Serialize;

use crate::floor::Floor;
use crate::measure::{Effort, ReadResult, WriteResult};
use crate::plan::Shape;
use crate::reads::Read;

/// The machine the run was made on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// CPU model.
    pub cpu_model: String,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// Load average (1 min) when the run started.
    pub load_average_at_start: f64,
    /// Load average (1 min) when the run ended (or the last case was saved).
    pub load_average_at_end: f64,
}

/// The 1-minute load average.
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0.0)
}

impl Machine {
    /// Reads what Linux tells about the machine (fields it cannot read stay empty).
    pub(crate) fn detect() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|rest| rest.split(':').nth(1))
            .map(|m| m.trim().to_owned())
            .unwrap_or_default();
        let memory_kib: f64 = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
            memory_gib: (memory_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_average_at_start: load_average(),
            load_average_at_end: load_average(),
        }
    }
}

/// One layout at one discussion size.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Case {
    /// The layout asked for.
    pub layout: String,
    /// The discussion size asked for.
    pub size: usize,
    /// The share of its posts a moderator held back, in percent (`--held-percent`).
    pub held_percent: u32,
    /// Posts held before they were public (outside the layout).
    pub held: usize,
    /// Posts rejected once public (placeholders in place).
    pub rejected: usize,
    /// Comments actually loaded (fewer when the layout hit its size cap).
    pub loaded: usize,
    /// The discussion's layout after loading (a layout may move a discussion at its cap).
    pub final_layout: String,
    /// Why loading stopped early, if it did.
    pub stopped: Option<String>,
    /// The layout the comments were posted in while bulk loading.
    pub loaded_in: String,
    /// Seconds the move from `loaded_in` to the layout under test took, when they differ.
    pub move_secs: Option<f64>,
    /// Seconds the bulk load took.
    pub load_secs: f64,
    /// Bulk-load rate (in-process, concurrent posts through the layout's write path).
    pub load_posts_per_sec: f64,
    /// The generated shape.
    pub shape: Shape,
    /// Offset of the deep page.
    pub deep_offset: u64,
    /// The votes cast after loading (`--votes-per-comment`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub votes: Option<crate::load::VoteLoad>,
    /// The reads.
    pub reads: Vec<ReadResult>,
    /// Posting through GraphQL.
    pub writes: Vec<WriteResult>,
    /// The database's floor for rewriting the discussion's document (embedded layout).
    pub floor: Option<Floor>,
    /// The discussion's size after the write measurements.
    pub comments_after_writes: u64,
    /// Peak resident memory of the server process (VmHWM), MiB.
    pub server_peak_rss_mib: f64,
    /// The reads of another server binary, measured in turns with this one (`reads`) on the
    /// same data (`--compare-server-bin`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared: Option<Compared>,
}

/// The reads of another server binary, measured in turns with the server under test.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Compared {
    /// The server under test, whose reads are the case's.
    pub server_bin: String,
    /// The other server.
    pub other_bin: String,
    /// The other server's reads.
    pub reads: Vec<ReadResult>,
}

/// A layout that was not measured, and why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Skipped {
    /// The layout.
    pub layout: String,
    /// Why.
    pub reason: String,
}

/// Everything a run produced.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// The harness's command line.
    pub command: String,
    /// When the run started (UTC, RFC 3339).
    pub started: String,
    /// False while the run is still going (the file is saved after every case).
    pub complete: bool,
    /// Seconds the whole run took.
    pub total_secs: f64,
    /// The machine.
    pub machine: Machine,
    /// Where the database ran.
    pub database: String,
    /// Quick mode or not.
    pub quick: bool,
    /// Discussion sizes, by layout.
    pub sizes: Vec<(String, Vec<usize>)>,
    /// Requests per measurement.
    pub effort: Effort,
    /// Seed of the generated discussions and writers.
    pub seed: u64,
    /// Measured cases.
    pub cases: Vec<Case>,
    /// Layouts not measured.
    pub skipped: Vec<Skipped>,
    /// What counting one database command costs the server, ns (see [`counting_cost_ns`]).
    pub counting_ns_per_command: f64,
}

/// What the server's command counting costs per command, ns: naming the command
/// (`CommandCounter::sent`) and the connection checkout's atomic increment, timed over a million
/// commands on one thread.
pub(crate) fn counting_cost_ns() -> f64 {
    const COMMANDS: u32 = 1_000_000;
    let counter = threadql::store::CommandCounter::new();
    let checkouts = std::sync::atomic::AtomicU64::new(0);
    let started = std::time::Instant::now();
    for _ in 0..COMMANDS {
        counter.sent(std::hint::black_box("find"));
        checkouts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let elapsed = started.elapsed();
    std::hint::black_box(counter.snapshot());
    elapsed.as_secs_f64() * 1e9 / f64::from(COMMANDS)
}

fn read_of(case: &Case, read: Read) -> Option<&ReadResult> {
    case.reads.iter().find(|r| r.read == read)
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn trips(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn size_label(case: &Case) -> String {
    if case.loaded == case.size {
        group(case.size)
    } else {
        format!("{} (capped at {})", group(case.size), group(case.loaded))
    }
}

fn layout_label(case: &Case) -> String {
    let layout = if case.final_layout == case.layout {
        case.layout.clone()
    } else {
        format!("{} → {}", case.layout, case.final_layout)
    };
    match case.held_percent {
        0 => layout,
        p => format!("{layout}, {p} % held back"),
    }
}

/// The layout and the share held back: the cases whose reads scale together.
fn series(case: &Case) -> String {
    match case.held_percent {
        0 => case.layout.clone(),
        p => format!("{}, {p} % held back", case.layout),
    }
}

/// 100000 → "100 000".
pub(crate) fn group(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

fn check(ok: bool) -> &'static str {
    if ok {
        "✅"
    } else {
        "❌"
    }
}

/// The bulk load's rate, and where it was posted when the discussion was then moved.
fn load_label(case: &Case) -> String {
    match case.move_secs {
        Some(secs) => format!(
            "{:.0} ({}, moved in {secs:.1} s)",
            case.load_posts_per_sec, case.loaded_in
        ),
        None => format!("{:.0}", case.load_posts_per_sec),
    }
}

impl Case {
    /// The single writer posting the harness's mix (replies to loaded comments).
    fn single_writer(&self) -> Option<&WriteResult> {
        self.writes
            .iter()
            .find(|w| w.writers == 1 && !w.conversation)
    }

    /// A few lines on standard error once the case is measured.
    pub(crate) fn summary(&self) -> String {
        let mut out = String::new();
        if let Some(v) = &self.votes {
            let _ = writeln!(
                out,
                "  {} {}: {} votes cast ({} UP) at {:.0} votes/s",
                series(self),
                group(self.size),
                v.cast,
                v.up,
                v.votes_per_sec
            );
        }
        for r in &self.reads {
            let _ = writeln!(
                out,
                "  {} {}: {:<22} GraphQL p50 {:>7} ms, direct p50 {:>7} ms ({:.2}×), round trips {} / {}, CPU µs/request server {:.0}, direct {:.0}",
                series(self),
                group(self.size),
                r.label,
                ms(r.graphql.p50_ms),
                ms(r.direct.p50_ms),
                r.ratio_p50,
                trips(r.graphql_round_trips),
                trips(r.direct_round_trips),
                r.graphql_server_cpu_us,
                r.direct_cpu_us,
            );
        }
        for w in &self.writes {
            let _ = writeln!(
                out,
                "  {} {}: {} writer(s){}: {:.0} posts/s, {} round trips per post",
                self.layout,
                group(self.size),
                w.writers,
                if w.conversation {
                    " in a conversation"
                } else {
                    ""
                },
                w.posts_per_sec,
                trips(w.round_trips)
            );
        }
        out
    }
}

impl Report {
    /// The table of reads measured in turns with another server binary, if any were.
    fn compared_markdown(&self, out: &mut String) {
        let mut titled = false;
        for case in &self.cases {
            let Some(compared) = &case.compared else {
                continue;
            };
            if !titled {
                let _ = writeln!(
                    out,
                    "\n## Reads in turns: A = {}, B = {} (GraphQL p50 ms, same data)\n",
                    compared.server_bin, compared.other_bin
                );
                let _ = writeln!(
                    out,
                    "| layout | comments | read | A p50 | B p50 | B ÷ A | server CPU µs/request (A / B) | A − B, % of B | DB round trips (A / B) |"
                );
                let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
                titled = true;
            }
            for (a, b) in case.reads.iter().zip(&compared.reads) {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {:.2} | {:.1} / {:.1} | {:+.1} | {} / {} |",
                    layout_label(case),
                    size_label(case),
                    a.label,
                    ms(a.graphql.p50_ms),
                    ms(b.graphql.p50_ms),
                    b.graphql.p50_ms / a.graphql.p50_ms.max(1e-9),
                    a.graphql_server_cpu_us,
                    b.graphql_server_cpu_us,
                    (a.graphql_server_cpu_us / b.graphql_server_cpu_us.max(1e-9) - 1.0) * 100.0,
                    trips(a.graphql_round_trips),
                    trips(b.graphql_round_trips),
                );
            }
        }
    }

    /// Writes the report as JSON.
    pub(crate) fn save(&mut self, path: &std::path::Path) -> anyhow::Result<()> {
        self.machine.load_average_at_end = load_average();
        let json = serde_json::to_string_pretty(self)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(path, json + "\n")
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    }

    /// The markdown tables.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## Reads: latency in ms (median of {} runs × {} requests; p50 / p99)\n",
            self.effort.runs, self.effort.requests
        );
        let _ = writeln!(out, "| layout | comments | read | items | GraphQL p50 | GraphQL p99 | direct p50 | direct p99 | GraphQL / direct | DB round trips (GraphQL / direct) |");
        let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
        for case in &self.cases {
            for r in &case.reads {
                let label = match r.read {
                    Read::OffsetPage
                    | Read::CursorPage
                    | Read::ThreadedOffset
                    | Read::ThreadedCursor
                    | Read::TopCursor
                    | Read::BestCursor => {
                        format!("{} {}", r.label, group(case.deep_offset as usize))
                    }
                    _ => r.label.to_owned(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} / {} |",
                    layout_label(case),
                    size_label(case),
                    label,
                    r.items,
                    ms(r.graphql.p50_ms),
                    ms(r.graphql.p99_ms),
                    ms(r.direct.p50_ms),
                    ms(r.direct.p99_ms),
                    r.ratio_p50,
                    trips(r.graphql_round_trips),
                    trips(r.direct_round_trips),
                );
            }
        }

        self.compared_markdown(&mut out);

        let _ = writeln!(out, "\n## Writes, bulk load and memory\n");
        let _ = writeln!(out, "| layout | comments | posts/s, 1 writer | posts/s, N writers (N) | N ÷ 1 | post p50 / p99 ms, 1 writer | post p50 / p99 ms, N writers | DB commands per post (1 / N writers) | DB commands per post, 1 writer in a conversation | bulk load posts/s (in-process, in the layout named when it was moved) | server peak RSS MiB |");
        let _ = writeln!(
            out,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for case in &self.cases {
            let single = case.single_writer();
            let many = case.writes.iter().find(|w| w.writers > 1);
            let talk = case.writes.iter().find(|w| w.conversation);
            let rate = |w: Option<&WriteResult>| {
                w.map_or("–".into(), |w| format!("{:.0}", w.posts_per_sec))
            };
            let lat = |w: Option<&WriteResult>| {
                w.map_or("–".into(), |w| {
                    format!("{} / {}", ms(w.latency.p50_ms), ms(w.latency.p99_ms))
                })
            };
            let scale = match (single, many) {
                (Some(one), Some(n)) => {
                    format!("{:.2}", n.posts_per_sec / one.posts_per_sec.max(1e-9))
                }
                _ => "–".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} ({}) | {} | {} | {} | {} / {} | {} | {} | {:.0} |",
                layout_label(case),
                size_label(case),
                rate(single),
                rate(many),
                many.map_or(0, |w| w.writers),
                scale,
                lat(single),
                lat(many),
                single.map_or("–".into(), |w| trips(w.round_trips)),
                many.map_or("–".into(), |w| trips(w.round_trips)),
                talk.map_or("–".into(), |w| trips(w.round_trips)),
                load_label(case),
                case.server_peak_rss_mib,
            );
        }

        let floors: Vec<&Case> = self.cases.iter().filter(|c| c.floor.is_some()).collect();
        if !floors.is_empty() {
            let _ = writeln!(out, "\n## Embedded posts against the database's floor\n");
            let _ = writeln!(out, "The floor is one `$set` of a changing value on the discussion's document (the database rewrites the whole document for any update), measured before the single writer's posts and again after them (they grow the document); posts are held against the mean of the two.\n");
            let _ = writeln!(out, "| comments | document MiB (before → after) | floor p50 ms (before → after) | post p50 ms, 1 writer | post ÷ floor (≤ 2.5) |");
            let _ = writeln!(out, "|---:|---:|---:|---:|---:|");
            for case in floors {
                let Some(floor) = &case.floor else { continue };
                let single = case.single_writer();
                let ratio = single.map(|w| w.latency.p50_ms / floor.for_posts_ms().max(1e-9));
                let mib = |f: &Floor| format!("{:.2}", f.document_bytes as f64 / (1024.0 * 1024.0));
                let (sizes, times) = match &floor.after {
                    Some(after) => (
                        format!("{} → {}", mib(floor), mib(after)),
                        format!("{} → {}", ms(floor.set_p50_ms), ms(after.set_p50_ms)),
                    ),
                    None => (mib(floor), ms(floor.set_p50_ms)),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    size_label(case),
                    sizes,
                    times,
                    single.map_or("–".into(), |w| ms(w.latency.p50_ms)),
                    ratio.map_or("–".into(), |r| format!("{r:.2} {}", check(r <= 2.5))),
                );
            }
        }

        let many_rate = |layout: &str, size: usize| {
            self.cases
                .iter()
                .find(|c| c.layout == layout && c.size == size)
                .and_then(|c| c.writes.iter().find(|w| w.writers > 1))
                .map(|w| w.posts_per_sec)
        };
        let mut compared = false;
        for case in self.cases.iter().filter(|c| c.layout == "bucketed") {
            if let (Some(b), Some(p)) = (
                many_rate("bucketed", case.size),
                many_rate("per_comment", case.size),
            ) {
                if !compared {
                    let _ = writeln!(
                        out,
                        "\n## Bucketed against per-comment, concurrent writers\n"
                    );
                    let _ = writeln!(
                        out,
                        "| comments | bucketed posts/s | per-comment posts/s | ratio (≥ 0.5) |"
                    );
                    let _ = writeln!(out, "|---:|---:|---:|---:|");
                    compared = true;
                }
                let r = b / p.max(1e-9);
                let _ = writeln!(
                    out,
                    "| {} | {b:.0} | {p:.0} | {r:.2} {} |",
                    size_label(case),
                    check(r >= 0.5)
                );
            }
        }

        let _ = writeln!(
            out,
            "\n## How reads scale: GraphQL p50 at the largest size ÷ at the smallest\n"
        );
        let mut layouts: Vec<String> = Vec::new();
        for case in &self.cases {
            if !layouts.contains(&series(case)) {
                layouts.push(series(case));
            }
        }
        let _ = writeln!(
            out,
            "| read | {} |",
            layouts
                .iter()
                .map(|l| {
                    let sizes: Vec<usize> = self
                        .cases
                        .iter()
                        .filter(|c| series(c) == *l)
                        .map(|c| c.size)
                        .collect();
                    format!(
                        "{l} ({} → {})",
                        group(sizes.iter().copied().min().unwrap_or(0)),
                        group(sizes.iter().copied().max().unwrap_or(0))
                    )
                })
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(out, "|---|{}", "---:|".repeat(layouts.len()));
        let mut reads: Vec<Read> = Vec::new();
        for case in &self.cases {
            for r in &case.reads {
                if !reads.contains(&r.read) {
                    reads.push(r.read);
                }
            }
        }
        for read in reads {
            let cells: Vec<String> = layouts
                .iter()
                .map(|l| {
                    let cases: Vec<&Case> = self.cases.iter().filter(|c| series(c) == *l).collect();
                    let p50 = |c: Option<&&Case>| {
                        c.and_then(|c| read_of(c, read)).map(|r| r.graphql.p50_ms)
                    };
                    let small = p50(cases.iter().min_by_key(|c| c.size));
                    let large = p50(cases.iter().max_by_key(|c| c.size));
                    match (small, large) {
                        (Some(a), Some(b)) => {
                            let r = b / a.max(1e-9);
                            format!("{r:.2} {}", check(r <= 1.5))
                        }
                        _ => "–".into(),
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} | {} |", read.label(), cells.join(" | "));
        }
        let _ = writeln!(
            out,
            "\n## What counting database commands costs the server\n"
        );
        let _ = writeln!(out, "Counting one command costs {:.0} ns (naming it, and the connection checkout's increment).\n", self.counting_ns_per_command);
        let _ = writeln!(out, "| layout | comments | tree: commands | tree: server CPU µs | counting, % of it (≤ 5 %) |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        for case in &self.cases {
            let Some(tree) = read_of(case, Read::Tree) else {
                continue;
            };
            let share = tree.graphql_round_trips * self.counting_ns_per_command
                / 1e3
                / tree.graphql_server_cpu_us.max(1e-9)
                * 100.0;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {share:.4} {} |",
                layout_label(case),
                size_label(case),
                trips(tree.graphql_round_trips),
                tree.graphql_server_cpu_us,
                check(share <= 5.0),
            );
        }
        let _ = writeln!(
            out,
            "\n## First page and tree against the deep cursor page (GraphQL p50)\n"
        );
        let _ = writeln!(
            out,
            "| layout | comments | first page ÷ cursor page | tree ÷ cursor page |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for case in &self.cases {
            let (Some(first), Some(cursor), Some(tree)) = (
                read_of(case, Read::FirstPage),
                read_of(case, Read::CursorPage),
                read_of(case, Read::Tree),
            ) else {
                continue;
            };
            let c = cursor.graphql.p50_ms.max(1e-9);
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} | {:.2} |",
                layout_label(case),
                size_label(case),
                first.graphql.p50_ms / c,
                tree.graphql.p50_ms / c,
            );
        }

        let _ = writeln!(out, "\n## Targets\n");
        let _ = writeln!(out, "| layout | comments | first page GraphQL / direct (≤ 1.25) | cursor page / first page, GraphQL (≤ 1.5) | cursor page / first page, direct | offset page / first page, GraphQL | tree round trips |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        for case in &self.cases {
            let (Some(first), Some(cursor), Some(offset), Some(tree)) = (
                read_of(case, Read::FirstPage),
                read_of(case, Read::CursorPage),
                read_of(case, Read::OffsetPage),
                read_of(case, Read::Tree),
            ) else {
                continue;
            };
            let cursor_gql = cursor.graphql.p50_ms / first.graphql.p50_ms;
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} {} | {:.2} {} | {:.2} | {:.2} | {} |",
                layout_label(case),
                size_label(case),
                first.ratio_p50,
                check(first.ratio_p50 <= 1.25),
                cursor_gql,
                check(cursor_gql <= 1.5),
                cursor.direct.p50_ms / first.direct.p50_ms,
                offset.graphql.p50_ms / first.graphql.p50_ms,
                trips(tree.graphql_round_trips),
            );
        }
        for layout in &layouts {
            let counts: Vec<f64> = self
                .cases
                .iter()
                .filter(|c| c.layout == *layout)
                .filter_map(|c| read_of(c, Read::Tree).map(|r| r.graphql_round_trips))
                .collect();
            // The bound: the discussion, the threads and one command per level at most (a
            // level whose pages the request already read sends none); one document read and
            // the discussion for the embedded layout.
            let bound = if *layout == "embedded" {
                2.0
            } else {
                (crate::reads::TREE_LEVELS + 2) as f64
            };
            let within = counts.iter().all(|c| *c <= bound + 0.05);
            let _ = writeln!(
                out,
                "\nTree round trips for {layout} across sizes: {} — {}",
                counts
                    .iter()
                    .map(|c| trips(*c))
                    .collect::<Vec<_>>()
                    .join(", "),
                if within {
                    format!("at most {} at every size ✅", trips(bound))
                } else {
                    format!("over {} at some size ❌", trips(bound))
                }
            );
        }
        for case in &self.cases {
            if let Some(why) = &case.stopped {
                let _ = writeln!(
                    out,
                    "\n{} at {}: loading stopped after {} comments: {why}",
                    case.layout,
                    group(case.size),
                    group(case.loaded)
                );
            }
        }
        for case in self.cases.iter().filter(|c| c.held_percent > 0) {
            let _ = writeln!(
                out,
                "\n{}: of {} posts, {} held before they were public (outside the layout) and {} rejected in place (placeholders)",
                layout_label(case),
                group(case.loaded),
                group(case.held),
                group(case.rejected)
            );
        }
        for skipped in &self.skipped {
            let _ = writeln!(out, "\nSkipped {}: {}", skipped.layout, skipped.reason);
        }
        let _ = writeln!(
            out,
            "\nMachine: {} CPUs ({}), {} GiB, Linux {}, load average {:.2} at start and {:.2} at the end. Run took {:.0} s.",
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.memory_gib,
            self.machine.kernel,
            self.machine.load_average_at_start,
            self.machine.load_average_at_end,
            self.total_secs
        );
        out
    }
}
