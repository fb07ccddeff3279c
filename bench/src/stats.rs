//! Latency percentiles of one run and medians across runs.

use std::time::Duration;

use serde::Serialize;

/// Percentiles of one run of timed requests, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct RunStats {
    /// Median latency.
    pub p50_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
    /// Requests timed.
    pub count: usize,
}

impl RunStats {
    /// Summarises the latencies of one run.
    pub(crate) fn of(samples: &[Duration]) -> RunStats {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        RunStats {
            p50_ms: percentile(&ms, 0.50),
            p99_ms: percentile(&ms, 0.99),
            count: ms.len(),
        }
    }
}

/// Medians across runs, with every run kept.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    /// Median of the runs' p50.
    pub p50_ms: f64,
    /// Median of the runs' p99.
    pub p99_ms: f64,
    /// Each run.
    pub runs: Vec<RunStats>,
}

impl Summary {
    /// Medians of several runs.
    pub(crate) fn of(runs: Vec<RunStats>) -> Summary {
        Summary {
            p50_ms: median(runs.iter().map(|r| r.p50_ms).collect()),
            p99_ms: median(runs.iter().map(|r| r.p99_ms).collect()),
            runs,
        }
    }
}

/// Nearest-rank percentile of sorted values (0 for none).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median (mean of the two middle values for an even count; 0 for none).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
