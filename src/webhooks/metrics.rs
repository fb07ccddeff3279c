//! The dispatcher's figures on `/metrics`: attempts by result, deliveries pending, and the lag
//! from an event's commit to its 2xx answer.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;

use crate::telemetry::metrics::{gauge, Counter, Exposition, Histogram};

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Result {
    /// Answered with a 2xx.
    Succeeded,
    /// Failed, to be tried again.
    Retried,
    /// Failed for the last time.
    Failed,
    /// Answered 410: the endpoint is disabled.
    Gone,
}

impl Result {
    const ALL: [Result; 4] = [
        Result::Succeeded,
        Result::Retried,
        Result::Failed,
        Result::Gone,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Result::Succeeded => "succeeded",
            Result::Retried => "retried",
            Result::Failed => "failed",
            Result::Gone => "gone",
        }
    }
}

/// The figures, shared by the dispatcher (which counts) and `/metrics` (which reads).
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    attempts: [Counter; 4],
    pending: AtomicU64,
    lag: Histogram,
}

impl WebhookMetrics {
    /// Counts an attempt that ended as `result`.
    pub fn attempted(&self, result: Result) {
        if let Some(at) = Result::ALL.iter().position(|r| *r == result) {
            self.attempts[at].inc();
        }
    }

    /// Counts the lag of a delivery answered with a 2xx.
    pub fn delivered_after(&self, lag: Duration) {
        self.lag.observe(lag);
    }

    /// Sets the number of deliveries pending, as last counted.
    pub fn set_pending(&self, pending: u64) {
        self.pending.store(pending, Ordering::Relaxed);
    }

    /// Adds the figures to the page.
    pub fn write(self: &Arc<Self>, out: &mut Exposition) {
        out.collect(self.clone());
    }
}

impl Collector for WebhookMetrics {
    fn encode(&self, mut out: DescriptorEncoder<'_>) -> fmt::Result {
        let mut family = out.encode_descriptor(
            "threadql_webhook_deliveries",
            "Webhook delivery attempts by result: succeeded (a 2xx), retried (failed, tried again later), failed (the last attempt failed), gone (a 410 disabled the endpoint).",
            None,
            MetricType::Counter,
        )?;
        for (result, counter) in Result::ALL.iter().zip(&self.attempts) {
            counter.encode(family.encode_family(&[("result", result.as_str())])?)?;
        }
        gauge(
            &mut out,
            "threadql_webhook_pending",
            "Webhook deliveries waiting for a 2xx, as this process last counted them.",
            self.pending.load(Ordering::Relaxed),
        )?;
        let family = out.encode_descriptor(
            "threadql_webhook_lag_seconds",
            "Time from an event's commit to the 2xx answer of its delivery.",
            None,
            MetricType::Histogram,
        )?;
        self.lag.encode(family)
    }
}
