//! What the server tells its operators beyond its answers: metrics, request ids, request spans
//! and their log lines, traces.

pub mod metrics; // counters and histograms on atomics, capped label sets, the page (prometheus-client)
pub mod process; // CPU, memory and descriptors of this process, read from /proc/self
pub mod request; // request ids, the request span and its log lines, request metrics
pub mod trace; // traces over OTLP
