//! SVG charts of a run: each read's p50 against discussion size, and posts/s against writers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Deserialize;

use crate::report::group;

/// What the charts read from a results file (a subset of [`crate::report::Report`]).
#[derive(Debug, Deserialize)]
pub(crate) struct Results {
    started: String,
    quick: bool,
    machine: MachineIn,
    effort: EffortIn,
    cases: Vec<CaseIn>,
}

#[derive(Debug, Deserialize)]
struct MachineIn {
    cpus: usize,
    cpu_model: String,
}

#[derive(Debug, Deserialize)]
struct EffortIn {
    runs: usize,
    requests: usize,
}

#[derive(Debug, Deserialize)]
struct CaseIn {
    layout: String,
    /// The share held back (`--held-percent`; absent from files written before it).
    #[serde(default)]
    held_percent: u32,
    loaded: usize,
    reads: Vec<ReadIn>,
    writes: Vec<WriteIn>,
}

#[derive(Debug, Deserialize)]
struct ReadIn {
    label: String,
    graphql: SummaryIn,
}

#[derive(Debug, Deserialize)]
struct SummaryIn {
    p50_ms: f64,
}

#[derive(Debug, Deserialize)]
struct WriteIn {
    writers: usize,
    conversation: bool,
    posts_per_sec: f64,
}

impl Results {
    /// Reads a results file the harness wrote.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Results> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let results: Results = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a results file", path.display()))?;
        Ok(results.by_series())
    }

    /// The results of a run that just ended.
    pub(crate) fn of(report: &crate::report::Report) -> anyhow::Result<Results> {
        let results: Results = serde_json::from_value(serde_json::to_value(report)?)?;
        Ok(results.by_series())
    }

    /// Cases with a share held back are drawn as lines of their own, named after it.
    fn by_series(mut self) -> Results {
        for case in &mut self.cases {
            if case.held_percent > 0 {
                case.layout = format!("{}, {} % held back", case.layout, case.held_percent);
            }
        }
        self
    }

    /// Layouts in the order the run measured them.
    fn layouts(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for case in &self.cases {
            if !out.contains(&case.layout.as_str()) {
                out.push(&case.layout);
            }
        }
        out
    }

    fn subtitle(&self) -> String {
        format!(
            "run started {}{}; {} CPUs ({}); GraphQL over HTTP, median of {} runs × {} requests",
            self.started.get(..10).unwrap_or(&self.started),
            if self.quick { ", quick mode" } else { "" },
            self.machine.cpus,
            self.machine.cpu_model,
            self.effort.runs,
            self.effort.requests,
        )
    }
}

/// Where the two charts go: `DIR/bench-reads.svg` and `DIR/bench-writes.svg` when a directory is
/// given, else next to `beside` as `<its stem>-reads.svg` and `<its stem>-writes.svg`.
pub(crate) fn paths(dir: Option<&Path>, beside: &Path) -> (PathBuf, PathBuf) {
    match dir {
        Some(dir) => (dir.join("bench-reads.svg"), dir.join("bench-writes.svg")),
        None => {
            let stem = beside
                .file_stem()
                .map_or_else(|| "bench".into(), |s| s.to_string_lossy().into_owned());
            let at = |what: &str| beside.with_file_name(format!("{stem}-{what}.svg"));
            (at("reads"), at("writes"))
        }
    }
}

/// Draws both charts; returns the files written (the writes chart only when the run posted).
pub(crate) fn draw(results: &Results, reads: &Path, writes: &Path) -> anyhow::Result<Vec<PathBuf>> {
    for path in [reads, writes] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
    }
    let mut written = Vec::new();
    if results.cases.iter().any(|c| !c.reads.is_empty()) {
        draw_reads(results, reads).with_context(|| format!("drawing {}", reads.display()))?;
        written.push(reads.to_owned());
    }
    if results.cases.iter().any(|c| !c.writes.is_empty()) {
        draw_writes(results, writes).with_context(|| format!("drawing {}", writes.display()))?;
        written.push(writes.to_owned());
    }
    Ok(written)
}

/// The colour and marker of a layout, the same in every chart.
fn colour(layout: &str) -> RGBColor {
    match layout {
        "per_comment" => RGBColor(0x1f, 0x77, 0xb4),
        "embedded" => RGBColor(0xd6, 0x5f, 0x00),
        "bucketed" => RGBColor(0x2c, 0xa0, 0x2c),
        _ => RGBColor(0x6a, 0x3d, 0x9a),
    }
}

/// A number for an axis label: grouped digits from 1 000 up, two significant digits below 10.
fn number(v: f64) -> String {
    if v >= 1000.0 {
        group(v.round() as usize)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        let s = format!("{v:.1}");
        s.trim_end_matches(".0").to_owned()
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Ticks of a log axis between `lo` and `hi`: 1, 2 and 5 times the powers of ten, or every
/// multiple of them when that gives fewer than four.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let within = |mantissas: &[f64]| {
        let mut out = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let v = decade * m;
                if v >= lo && v <= hi {
                    out.push(v);
                }
            }
            decade *= 10.0;
        }
        out
    };
    let ticks = within(&[1.0, 2.0, 5.0]);
    if ticks.len() >= 4 {
        return ticks;
    }
    within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

/// A log range around the values, a little wider than they are.
fn around(values: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (1.0, 10.0);
    }
    (lo / pad, hi * pad)
}

/// The title and legend band above the panels; returns the area left for them.
fn header<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
    subtitle: &str,
    layouts: &[&str],
) -> anyhow::Result<DrawingArea<SVGBackend<'a>, Shift>> {
    let (band, body) = root.split_vertically(92);
    band.draw(&Text::new(
        title.to_owned(),
        (16, 10),
        ("sans-serif", 24).into_font().style(FontStyle::Bold),
    ))?;
    band.draw(&Text::new(
        subtitle.to_owned(),
        (16, 40),
        ("sans-serif", 17)
            .into_font()
            .color(&RGBColor(0x44, 0x44, 0x44)),
    ))?;
    let mut x = 16;
    for layout in layouts {
        let c = colour(layout);
        band.draw(&PathElement::new(
            vec![(x, 74), (x + 34, 74)],
            c.stroke_width(3),
        ))?;
        band.draw(&Circle::new((x + 17, 74), 4, c.filled()))?;
        band.draw(&Text::new(
            (*layout).to_owned(),
            (x + 42, 65),
            ("sans-serif", 19).into_font(),
        ))?;
        x += 70 + 10 * i32::try_from(layout.len()).unwrap_or(10);
    }
    Ok(body)
}

/// One log–log panel: a line with markers per layout.
fn panel<'a>(
    area: &DrawingArea<SVGBackend<'a>, Shift>,
    caption: &str,
    (x_desc, y_desc): (&str, &str),
    x_ticks: Vec<f64>,
    y_range: Option<(f64, f64)>,
    lines: &[(&str, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let (x_lo, x_hi) = around(x_ticks.iter().copied(), 1.5);
    let (y_lo, y_hi) = y_range
        .unwrap_or_else(|| around(lines.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)), 1.6));
    let x_range = (x_lo..x_hi).log_scale().with_key_points(x_ticks);
    let y_range = (y_lo..y_hi)
        .log_scale()
        .with_key_points(log_ticks(y_lo, y_hi));
    let mut chart = ChartBuilder::on(area)
        .caption(
            caption,
            ("sans-serif", 19).into_font().style(FontStyle::Bold),
        )
        .margin(8)
        .margin_right(20)
        .x_label_area_size(40)
        .y_label_area_size(52)
        .build_cartesian_2d(x_range, y_range)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| number(*v))
        .y_label_formatter(&|v| number(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .draw()?;
    for (layout, points) in lines {
        let c = colour(layout);
        chart.draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))?;
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
    }
    Ok(())
}

/// A grid of `n` panels with `cols` columns.
fn grid<'a>(
    body: &DrawingArea<SVGBackend<'a>, Shift>,
    n: usize,
    cols: usize,
) -> Vec<DrawingArea<SVGBackend<'a>, Shift>> {
    let rows = n.div_ceil(cols).max(1);
    body.split_evenly((rows, cols))
}

fn draw_reads(results: &Results, path: &Path) -> anyhow::Result<()> {
    let mut reads: Vec<&str> = Vec::new();
    for case in &results.cases {
        for r in &case.reads {
            if !reads.contains(&r.label.as_str()) {
                reads.push(&r.label);
            }
        }
    }
    let layouts = results.layouts();
    let sizes: BTreeSet<usize> = results
        .cases
        .iter()
        .filter(|c| !c.reads.is_empty())
        .map(|c| c.loaded)
        .collect();
    let cols = 4.min(reads.len()).max(1);
    let rows = reads.len().div_ceil(cols).max(1);
    let (w, h) = (400 * u32::try_from(cols)?, 92 + 330 * u32::try_from(rows)?);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = header(
        &root,
        "Reads: GraphQL p50 latency against discussion size (log–log)",
        &results.subtitle(),
        &layouts,
    )?;
    let panels = grid(&body, reads.len(), cols);
    for (area, read) in panels.iter().zip(&reads) {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = layouts
            .iter()
            .map(|layout| {
                let points = results
                    .cases
                    .iter()
                    .filter(|c| c.layout == *layout)
                    .filter_map(|c| {
                        let r = c.reads.iter().find(|r| r.label == *read)?;
                        Some((c.loaded as f64, r.graphql.p50_ms))
                    })
                    .collect();
                (*layout, points)
            })
            .collect();
        panel(
            area,
            read,
            ("comments in the discussion", "p50, ms"),
            sizes.iter().map(|s| *s as f64).collect(),
            None,
            &lines,
        )?;
    }
    if let Some(spare) = panels.get(reads.len()) {
        let note = [
            "Each point: the median of the runs' p50",
            "of one read, as a client sees it over HTTP.",
            "Deep pages sit at offset 10 000, or at",
            "N − 50 in shorter discussions.",
            "A flat line is a read bounded by its page;",
            "a rising one grows with the discussion.",
        ];
        for (i, line) in note.iter().enumerate() {
            spare.draw(&Text::new(
                (*line).to_owned(),
                (24, 60 + 24 * i32::try_from(i)?),
                ("sans-serif", 17)
                    .into_font()
                    .color(&RGBColor(0x44, 0x44, 0x44)),
            ))?;
        }
    }
    root.present()?;
    Ok(())
}

fn draw_writes(results: &Results, path: &Path) -> anyhow::Result<()> {
    let layouts = results.layouts();
    let sizes: BTreeSet<usize> = results
        .cases
        .iter()
        .filter(|c| c.writes.iter().any(|w| !w.conversation))
        .map(|c| c.loaded)
        .collect();
    let writers: BTreeSet<usize> = results
        .cases
        .iter()
        .flat_map(|c| c.writes.iter().filter(|w| !w.conversation))
        .map(|w| w.writers)
        .collect();
    let cols = 2.min(sizes.len()).max(1);
    let rows = sizes.len().div_ceil(cols).max(1);
    let (w, h) = (520 * u32::try_from(cols)?, 92 + 360 * u32::try_from(rows)?);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE)?;
    let subtitle = format!(
        "run started {}{}; {} CPUs; GraphQL postComment over HTTP, median of {} runs",
        results.started.get(..10).unwrap_or(&results.started),
        if results.quick { ", quick mode" } else { "" },
        results.machine.cpus,
        results.effort.runs,
    );
    let body = header(
        &root,
        "Writes: posts/s against concurrent writers, one discussion (log–log)",
        &subtitle,
        &layouts,
    )?;
    // One scale for every size, so the panels compare at a glance.
    let y_range = around(
        results
            .cases
            .iter()
            .flat_map(|c| c.writes.iter().filter(|w| !w.conversation))
            .map(|w| w.posts_per_sec),
        1.6,
    );
    let panels = grid(&body, sizes.len(), cols);
    for (area, size) in panels.iter().zip(&sizes) {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = layouts
            .iter()
            .filter_map(|layout| {
                let case = results
                    .cases
                    .iter()
                    .find(|c| c.layout == *layout && c.loaded == *size)?;
                let mut points: Vec<(f64, f64)> = case
                    .writes
                    .iter()
                    .filter(|w| !w.conversation)
                    .map(|w| (w.writers as f64, w.posts_per_sec))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Some((*layout, points))
            })
            .collect();
        panel(
            area,
            &format!("{} comments", group(*size)),
            ("concurrent writers", "posts/s"),
            writers.iter().map(|w| *w as f64).collect(),
            Some(y_range),
            &lines,
        )?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers_and_ticks() {
        assert_eq!(number(100_000.0), "100\u{202f}000");
        assert_eq!(number(50.0), "50");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(log_ticks(0.7, 60.0), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
        assert_eq!(
            log_ticks(70.0, 350.0),
            vec![70.0, 80.0, 90.0, 100.0, 200.0, 300.0]
        );
    }

    #[test]
    fn chart_paths() {
        let (r, w) = paths(None, Path::new("out/run.json"));
        assert_eq!(r, Path::new("out/run-reads.svg"));
        assert_eq!(w, Path::new("out/run-writes.svg"));
        let (r, _) = paths(Some(Path::new("docs/img")), Path::new("x.json"));
        assert_eq!(r, Path::new("docs/img/bench-reads.svg"));
    }
}
