//! Metrics on atomics, encoded as Prometheus text (exposition format 0.0.4) by the
//! `prometheus-client` crate. An observation is one or two relaxed atomic additions: no lock and
//! no allocation. Label values that clients choose (operation names, error codes) are capped:
//! the first values seen get a series each, and later ones share the series `other`, so a client
//! cannot grow the page without bound.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    prometheus_text, DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeMetric,
    MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

/// The label value of the series shared by the values past a cap.
pub const OTHER: &str = "other";

/// A count that only goes up (one relaxed atomic addition per increment).
pub type Counter = prometheus_client::metrics::counter::Counter<u64, AtomicU64>;

/// The upper bounds of every histogram's buckets, in nanoseconds: from 100 µs (a database
/// command on a fast network) to 10 s; slower is only in `+Inf`. On the page they are seconds.
const BOUNDS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Durations counted in fixed buckets, with their sum. The library's own histogram takes a lock
/// on every observation; this one is encoded by the library all the same ([`EncodeMetric`]).
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
            .position(|bound| nanos <= *bound)
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

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    /// Its buckets, sum and count. The count is the sum of the buckets as read, so it is the
    /// `+Inf` bucket however many observations arrive meanwhile.
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> fmt::Result {
        let mut buckets = [(f64::INFINITY, 0_u64); BOUNDS.len() + 1];
        for (n, (bucket, count)) in buckets.iter_mut().zip(&self.buckets).enumerate() {
            let bound = BOUNDS
                .get(n)
                .map_or(f64::INFINITY, |nanos| *nanos as f64 / 1e9);
            *bucket = (bound, count.load(Ordering::Relaxed));
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
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
/// a known value takes a read lock (shared: it never waits on other readers) and allocates
/// nothing, which the library's `Family` (keyed by an owned label set, and uncapped) cannot do.
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

    /// Runs `f` on the series of `value` (made when the budget allows, else [`OTHER`]'s; the
    /// value [`OTHER`] itself is counted there too, so that no two series share a label).
    pub fn with<R>(&self, value: &str, f: impl FnOnce(&T) -> R) -> R {
        if value == OTHER {
            return f(&self.other);
        }
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

    /// Every series with its label value, in the order of the values, [`OTHER`] last; stops
    /// at the first error `f` returns.
    pub fn each<E>(&self, mut f: impl FnMut(&str, &T) -> Result<(), E>) -> Result<(), E> {
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        let mut values: Vec<&str> = known.keys().map(|k| &**k).collect();
        values.sort_unstable();
        for value in values {
            if let Some(series) = known.get(value) {
                f(value, series)?;
            }
        }
        f(OTHER, &self.other)
    }
}

/// Encodes a counter family of one series read now. `name` is the family's name without
/// `_total`: the encoder adds it.
pub fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: impl EncodeCounterValue,
) -> fmt::Result {
    let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(family)
}

/// Encodes a gauge family of one series read now.
pub fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: impl EncodeGaugeValue,
) -> fmt::Result {
    let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(family)
}

/// The type of a family whose values are read at scrape time ([`Exposition::family`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// A value read at scrape time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A whole number.
    Int(u64),
    /// Any other number.
    Float(f64),
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(n)
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Self {
        Value::Int(n as u64)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

/// A family of values read at scrape time, added sample by sample, and encoded through the
/// library's collector API (it has no metric type for a value that is only read).
#[derive(Debug)]
struct Read {
    name: String,
    kind: Kind,
    help: String,
    samples: Vec<(Vec<(String, String)>, Value)>,
}

impl Collector for Read {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let (name, metric_type) = match self.kind {
            Kind::Counter => (
                self.name.strip_suffix("_total").unwrap_or(&self.name),
                MetricType::Counter,
            ),
            Kind::Gauge => (self.name.as_str(), MetricType::Gauge),
        };
        let mut family = encoder.encode_descriptor(name, &self.help, None, metric_type)?;
        for (labels, value) in &self.samples {
            let series = family.encode_family(labels)?;
            match (self.kind, *value) {
                (Kind::Counter, Value::Int(n)) => ConstCounter::new(n).encode(series)?,
                (Kind::Counter, Value::Float(x)) => ConstCounter::new(x).encode(series)?,
                (Kind::Gauge, Value::Int(n)) => ConstGauge::new(n).encode(series)?,
                (Kind::Gauge, Value::Float(x)) => ConstGauge::new(x).encode(series)?,
            }
        }
        Ok(())
    }
}

/// A `/metrics` page being put together: its parts are encoded by `prometheus-client`, in the
/// order they were added, when the page is taken ([`Exposition::into_text`]).
#[derive(Debug, Default)]
pub struct Exposition {
    registry: Registry,
    /// The family [`Exposition::sample`] adds to.
    open: Option<Read>,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the families `collector` encodes at each scrape.
    pub fn collect(&mut self, collector: impl Collector) {
        self.close();
        self.registry.register_collector(Box::new(collector));
    }

    /// Starts a family of values read now: its name (a counter's with its `_total`), type and
    /// help; [`Exposition::sample`] adds its series.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        self.close();
        debug_assert!(kind != Kind::Counter || name.ends_with("_total"), "{name}");
        self.open = Some(Read {
            name: name.to_owned(),
            kind,
            help: help.to_owned(),
            samples: Vec::new(),
        });
    }

    /// One series of the family last started, which `name` is.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        let Some(family) = self.open.as_mut() else {
            debug_assert!(false, "{name} sampled outside a family");
            return;
        };
        debug_assert_eq!(family.name, name);
        let labels = labels
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        family.samples.push((labels, value.into()));
    }

    fn close(&mut self) {
        if let Some(family) = self.open.take() {
            self.registry.register_collector(Box::new(family));
        }
    }

    /// The page.
    pub fn into_text(mut self) -> String {
        self.close();
        let mut text = String::new();
        if prometheus_text::encode(&mut text, &self.registry).is_err() {
            tracing::error!("the metrics page could not be encoded");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One histogram with one label, as a collector.
    #[derive(Debug)]
    struct OneHistogram(Histogram, &'static str);

    impl Collector for OneHistogram {
        fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
            let mut family =
                encoder.encode_descriptor("t_seconds", "Times.", None, MetricType::Histogram)?;
            self.0.encode(family.encode_family(&[("op", self.1)])?)
        }
    }

    #[test]
    fn histograms_are_cumulative_and_their_count_is_the_last_bucket() {
        let histogram = Histogram::default();
        for micros in [50, 100, 101, 3_000, 20_000_000] {
            histogram.observe(Duration::from_micros(micros));
        }
        assert_eq!(histogram.count(), 5);
        let mut page = Exposition::new();
        page.collect(OneHistogram(histogram, "a\"b\\c\nd"));
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
        assert_eq!(text.matches("le=\"+Inf\"").count(), 1, "{text}");
        assert!(
            text.contains("t_seconds_bucket{op=\"a\\\"b\\\\c\\nd\",le=\"1\"} 4"),
            "{text}"
        );
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
    fn values_read_at_scrape_keep_their_names_and_labels() {
        let mut page = Exposition::new();
        page.family("t_commands_total", Kind::Counter, "Commands.");
        page.sample("t_commands_total", &[("command", "find")], 3_u64);
        page.sample("t_commands_total", &[("command", "other")], 1_u64);
        page.family("t_open", Kind::Gauge, "Open now.");
        page.sample("t_open", &[], 2_usize);
        page.family("t_cpu_seconds_total", Kind::Counter, "CPU.");
        page.sample("t_cpu_seconds_total", &[], 0.5);
        let expected = "\
# HELP t_commands_total Commands.
# TYPE t_commands_total counter
t_commands_total{command=\"find\"} 3
t_commands_total{command=\"other\"} 1
# HELP t_open Open now.
# TYPE t_open gauge
t_open 2
# HELP t_cpu_seconds_total CPU.
# TYPE t_cpu_seconds_total counter
t_cpu_seconds_total 0.5
";
        assert_eq!(page.into_text(), expected);
    }

    #[test]
    fn a_capped_label_shares_other_once_its_budget_is_spent() {
        let budget = Budget::new(2);
        let (a, b) = (
            Capped::<Counter>::new(budget.clone()),
            Capped::<Counter>::new(budget),
        );
        for value in ["x", OTHER, "y", "x", "z"] {
            a.with(value, Counter::inc);
        }
        b.with("x", Counter::inc);
        let mut seen = Vec::new();
        for (prefix, capped) in [("", &a), ("b:", &b)] {
            let _ = capped.each(|value, c| {
                seen.push((format!("{prefix}{value}"), c.get()));
                Ok::<(), ()>(())
            });
        }
        let expected: Vec<(String, u64)> = [("x", 2), ("y", 1), (OTHER, 2), ("b:other", 1)]
            .into_iter()
            .map(|(v, n)| (v.to_owned(), n))
            .collect();
        assert_eq!(seen, expected);
    }
}
