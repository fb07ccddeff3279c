//! Metrics on atomics, written as Prometheus text (exposition format 0.0.4). An observation is
//! one or two relaxed atomic additions: no lock and no allocation. Label values that clients
//! choose (operation names, error codes) are capped: the first values seen get a series each,
//! and later ones share the series `other`, so a client cannot grow the page without bound.

use std::collections::HashMap;
use std::fmt::{Display, Write as _};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// The label value of the series shared by the values past a cap.
pub const OTHER: &str = "other";

/// A count that only goes up.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The upper bounds of every histogram's buckets, as written (seconds) and in nanoseconds: from
/// 100 µs (a database command on a fast network) to 10 s; slower is only in `+Inf`.
const BOUNDS: [(&str, u64); 16] = [
    ("0.0001", 100_000),
    ("0.00025", 250_000),
    ("0.0005", 500_000),
    ("0.001", 1_000_000),
    ("0.0025", 2_500_000),
    ("0.005", 5_000_000),
    ("0.01", 10_000_000),
    ("0.025", 25_000_000),
    ("0.05", 50_000_000),
    ("0.1", 100_000_000),
    ("0.25", 250_000_000),
    ("0.5", 500_000_000),
    ("1", 1_000_000_000),
    ("2.5", 2_500_000_000),
    ("5", 5_000_000_000),
    ("10", 10_000_000_000),
];

/// Durations counted in fixed buckets, with their sum.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last one holds those past every bound.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    /// The sum of the observations, in nanoseconds.
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Counts one duration.
    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BOUNDS
            .iter()
            .position(|(_, bound)| nanos <= *bound)
            .unwrap_or(BOUNDS.len());
        if let Some(bucket) = self.buckets.get(bucket) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }
}

/// A number of series that several label sets draw from, first come first served.
#[derive(Debug)]
pub struct Budget {
    taken: AtomicUsize,
    cap: usize,
}

impl Budget {
    /// A budget of `cap` series.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            taken: AtomicUsize::new(0),
            cap,
        })
    }

    /// Takes one series; false when none is left.
    fn take(&self) -> bool {
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.cap).then_some(n + 1)
            })
            .is_ok()
    }
}

/// Series by a label whose values clients choose: a value gets a series of its own while the
/// budget lasts, and once it is spent every new value shares the series [`OTHER`]. Looking up
/// a known value takes a read lock (shared: it never waits on other readers).
#[derive(Debug)]
pub struct Capped<T> {
    known: RwLock<HashMap<Box<str>, T>>,
    other: T,
    budget: Arc<Budget>,
}

impl<T: Default> Capped<T> {
    /// Series drawing their places from `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        Self {
            known: RwLock::default(),
            other: T::default(),
            budget,
        }
    }

    /// Runs `f` on the series of `value` (made when the budget allows, else [`OTHER`]'s).
    pub fn with<R>(&self, value: &str, f: impl FnOnce(&T) -> R) -> R {
        {
            let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(series) = known.get(value) {
                return f(series);
            }
        }
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        if !known.contains_key(value) {
            if !self.budget.take() {
                drop(known);
                return f(&self.other);
            }
            known.insert(value.into(), T::default());
        }
        match known.get(value) {
            Some(series) => f(series),
            None => f(&self.other),
        }
    }

    /// Every series with its label value, in the order of the values, [`OTHER`] last.
    pub fn each(&self, mut f: impl FnMut(&str, &T)) {
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        let mut values: Vec<&str> = known.keys().map(|k| &**k).collect();
        values.sort_unstable();
        for value in values {
            if let Some(series) = known.get(value) {
                f(value, series);
            }
        }
        f(OTHER, &self.other);
    }
}

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations in buckets.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A `/metrics` page being written, in the Prometheus text format.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a family: its help line and its type.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(
            self.text,
            "# HELP {name} {help}\n# TYPE {name} {}",
            kind.as_str()
        );
    }

    /// One sample of a counter or gauge.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.text.push_str(name);
        self.labels(labels, None);
        let _ = writeln!(self.text, " {value}");
    }

    /// A histogram's series: its cumulative buckets, sum and count. The count is the `+Inf`
    /// bucket, read once, so the two agree however many observations arrive meanwhile.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], histogram: &Histogram) {
        let mut cumulative = 0_u64;
        let bounds = BOUNDS.iter().map(|(le, _)| *le).chain(["+Inf"]);
        for (le, bucket) in bounds.zip(&histogram.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = write!(self.text, "{name}_bucket");
            self.labels(labels, Some(le));
            let _ = writeln!(self.text, " {cumulative}");
        }
        let sum = histogram.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = write!(self.text, "{name}_sum");
        self.labels(labels, None);
        let _ = writeln!(self.text, " {sum}");
        let _ = write!(self.text, "{name}_count");
        self.labels(labels, None);
        let _ = writeln!(self.text, " {cumulative}");
    }

    /// `{name="value",…}`, values escaped, with `le` last when given.
    fn labels(&mut self, labels: &[(&str, &str)], le: Option<&str>) {
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.text.push('{');
        let all = labels.iter().copied().chain(le.map(|le| ("le", le)));
        for (n, (name, value)) in all.enumerate() {
            if n > 0 {
                self.text.push(',');
            }
            self.text.push_str(name);
            self.text.push_str("=\"");
            for c in value.chars() {
                match c {
                    '\\' => self.text.push_str("\\\\"),
                    '"' => self.text.push_str("\\\""),
                    '\n' => self.text.push_str("\\n"),
                    c => self.text.push(c),
                }
            }
            self.text.push('"');
        }
        self.text.push('}');
    }

    /// The page.
    pub fn into_text(self) -> String {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_their_count_is_the_last_bucket() {
        let histogram = Histogram::default();
        for micros in [50, 100, 101, 3_000, 20_000_000] {
            histogram.observe(Duration::from_micros(micros));
        }
        assert_eq!(histogram.count(), 5);
        let mut page = Exposition::new();
        page.histogram("t_seconds", &[("op", "a\"b\\c\nd")], &histogram);
        let text = page.into_text();
        let line = |le: &str| {
            text.lines()
                .find(|l| l.contains(&format!("le=\"{le}\"")))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(line("0.0001").ends_with(" 2"), "{text}");
        assert!(line("0.00025").ends_with(" 3"), "{text}");
        assert!(line("0.005").ends_with(" 4"), "{text}");
        assert!(line("10").ends_with(" 4"), "{text}");
        assert!(line("+Inf").ends_with(" 5"), "{text}");
        assert!(
            text.contains("t_seconds_count{op=\"a\\\"b\\\\c\\nd\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("t_seconds_sum{op=\"a\\\"b\\\\c\\nd\"} 20.003251"),
            "{text}"
        );
    }

    #[test]
    fn a_capped_label_shares_other_once_its_budget_is_spent() {
        let budget = Budget::new(2);
        let (a, b) = (
            Capped::<Counter>::new(budget.clone()),
            Capped::<Counter>::new(budget),
        );
        for value in ["x", "y", "x", "z"] {
            a.with(value, Counter::inc);
        }
        b.with("x", Counter::inc);
        let mut seen = Vec::new();
        a.each(|value, c| seen.push((value.to_owned(), c.get())));
        b.each(|value, c| seen.push((format!("b:{value}"), c.get())));
        let expected: Vec<(String, u64)> = [("x", 2), ("y", 1), (OTHER, 1), ("b:other", 1)]
            .into_iter()
            .map(|(v, n)| (v.to_owned(), n))
            .collect();
        assert_eq!(seen, expected);
    }
}
