//! The notifications' figures on `/metrics`: notifications stored, the lag from an event's
//! commit to its notifications being stored, and e-mails by result.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;

use crate::telemetry::metrics::{Counter, Exposition, Histogram};

/// How a message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mailed {
    /// The SMTP server took it.
    Sent,
    /// A temporary failure (a 4xx answer, no connection): tried again later.
    Retried,
    /// A permanent failure (a 5xx answer), or too many temporary ones: given up.
    Dropped,
}

impl Mailed {
    const ALL: [Mailed; 3] = [Mailed::Sent, Mailed::Retried, Mailed::Dropped];

    fn as_str(self) -> &'static str {
        match self {
            Mailed::Sent => "sent",
            Mailed::Retried => "retried",
            Mailed::Dropped => "dropped",
        }
    }
}

/// The figures, shared by the workers (which count) and `/metrics` (which reads).
#[derive(Debug, Default)]
pub struct NotifyMetrics {
    stored: Counter,
    lag: Histogram,
    emails: [Counter; 3],
}

impl NotifyMetrics {
    /// Counts `n` notifications stored.
    pub fn stored(&self, n: u64) {
        self.stored.inc_by(n);
    }

    /// Counts the lag from an event's commit to the end of its fan-out.
    pub fn fanned_out_after(&self, lag: Duration) {
        self.lag.observe(lag);
    }

    /// Counts a message that ended as `result`.
    pub fn mailed(&self, result: Mailed) {
        if let Some(at) = Mailed::ALL.iter().position(|r| *r == result) {
            self.emails[at].inc();
        }
    }

    /// Adds the figures to the page.
    pub fn write(self: &Arc<Self>, out: &mut Exposition) {
        out.collect(self.clone());
    }
}

impl Collector for NotifyMetrics {
    fn encode(&self, mut out: DescriptorEncoder<'_>) -> fmt::Result {
        let family = out.encode_descriptor(
            "threadql_notifications",
            "Notifications stored by this process's fan-out.",
            None,
            MetricType::Counter,
        )?;
        self.stored.encode(family)?;
        let family = out.encode_descriptor(
            "threadql_notification_lag_seconds",
            "Time from an event's commit to the end of its notifications' fan-out.",
            None,
            MetricType::Histogram,
        )?;
        self.lag.encode(family)?;
        let mut family = out.encode_descriptor(
            "threadql_emails",
            "Notification e-mails by result: sent, retried (a temporary failure), dropped (a permanent failure).",
            None,
            MetricType::Counter,
        )?;
        for (result, counter) in Mailed::ALL.iter().zip(&self.emails) {
            counter.encode(family.encode_family(&[("result", result.as_str())])?)?;
        }
        Ok(())
    }
}
