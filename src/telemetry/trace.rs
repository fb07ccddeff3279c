//! Traces over OTLP, when an OpenTelemetry collector is configured with the standard `OTEL_*`
//! variables (read in [`Config`]): the request span and its children (the GraphQL parse,
//! validation and operation, each store call and dataloader batch, each database command the
//! driver sends) go to the collector in batches, from a task on the runtime.
//!
//! With no endpoint, nothing here runs: no exporter, no OpenTelemetry layer, and the request
//! span carries no trace fields.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use axum::extract::MatchedPath;
use axum::http::header::HeaderName;
use axum::http::{HeaderMap, Request, StatusCode, Uri};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::resource::{EnvResourceDetector, TelemetryResourceDetector};
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tracing::field::Empty;
use tracing::{Level, Metadata, Span, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{filter_fn, Filtered};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::{Config, DEFAULT_SERVICE_NAME};

/// Whether spans are exported (set once traces start): only then does a request span read the
/// caller's `traceparent` and carry the OpenTelemetry fields.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over HTTP, protobuf bodies (`http/protobuf`, the default).
    HttpProtobuf,
    /// OTLP over gRPC (`grpc`).
    Grpc,
}

impl Protocol {
    /// The name the `OTEL_EXPORTER_OTLP_PROTOCOL` variable gives it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }
}

/// Where and how traces go, read from the standard variables and checked.
#[derive(Debug, Clone)]
pub struct Export {
    /// The URL spans are sent to (for HTTP, with its `/v1/traces` path).
    pub endpoint: String,
    /// The protocol.
    pub protocol: Protocol,
    /// Which traces are kept.
    pub sampler: Sampler,
    /// The `service.name` given explicitly (OTEL_SERVICE_NAME).
    service_name: Option<String>,
}

impl Export {
    /// The export the configuration asks for: `None` when no endpoint is set (or
    /// OTEL_SDK_DISABLED is `true`); an error naming the variable when one is not valid.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Export>> {
        if !config.traces() {
            return Ok(None);
        }
        let protocol = protocol(config)?;
        let endpoint = endpoint(config, protocol)?;
        check_headers("OTEL_EXPORTER_OTLP_HEADERS", config.otlp_headers.as_deref())?;
        check_headers(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            config.otlp_traces_headers.as_deref(),
        )?;
        let sampler = sampler(
            config.otel_traces_sampler.as_deref(),
            config.otel_traces_sampler_arg.as_deref(),
        )?;
        Ok(Some(Export {
            endpoint,
            protocol,
            sampler,
            service_name: set(config.otel_service_name.as_deref()).map(str::to_owned),
        }))
    }
}

/// A variable's value unless it is unset or blank (the specification reads an empty value as
/// unset).
fn set(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// The protocol: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else
/// `http/protobuf`.
fn protocol(config: &Config) -> anyhow::Result<Protocol> {
    let (variable, value) = match (
        set(config.otlp_traces_protocol.as_deref()),
        set(config.otlp_protocol.as_deref()),
    ) {
        (Some(value), _) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", value),
        (None, Some(value)) => ("OTEL_EXPORTER_OTLP_PROTOCOL", value),
        (None, None) => return Ok(Protocol::HttpProtobuf),
    };
    match value {
        "http/protobuf" => Ok(Protocol::HttpProtobuf),
        "grpc" => Ok(Protocol::Grpc),
        other => bail!(
            "{variable}={other:?} is not supported: traces are sent with `http/protobuf` (the default) or `grpc`"
        ),
    }
}

/// The URL spans are sent to. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is;
/// OTEL_EXPORTER_OTLP_ENDPOINT is a base, to which HTTP adds `/v1/traces` (gRPC uses it as it
/// is). Either must be an `http://` or `https://` URL with a host.
fn endpoint(config: &Config, protocol: Protocol) -> anyhow::Result<String> {
    let (variable, url, signal) = match (
        set(config.otlp_traces_endpoint.as_deref()),
        set(config.otlp_endpoint.as_deref()),
    ) {
        (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url, true),
        (None, Some(url)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", url, false),
        (None, None) => bail!("no OTLP endpoint is set"),
    };
    let bad = |why: &str| {
        anyhow::anyhow!(
            "{variable}={url:?} is not a collector URL ({why}): expected e.g. http://localhost:4318 (http/protobuf) or http://localhost:4317 (grpc)"
        )
    };
    let uri: Uri = url
        .parse()
        .map_err(|err| bad(&format!("it does not parse: {err}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("it must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("it has no host"));
    }
    if uri.query().is_some() {
        return Err(bad("it has a query string"));
    }
    Ok(match (protocol, signal) {
        (Protocol::HttpProtobuf, false) => format!("{}/v1/traces", url.trim_end_matches('/')),
        _ => url.to_owned(),
    })
}

/// Checks an OTLP headers variable: comma-separated `key=value` entries whose keys are header
/// names. The values are not repeated in the error: they may be credentials.
fn check_headers(variable: &str, value: Option<&str>) -> anyhow::Result<()> {
    let Some(value) = set(value) else {
        return Ok(());
    };
    for (n, entry) in value.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((key, _)) = entry.split_once('=') else {
            bail!(
                "{variable}: entry {} is not `key=value` (entries are separated by commas)",
                n + 1
            );
        };
        if HeaderName::from_bytes(key.trim().as_bytes()).is_err() {
            bail!(
                "{variable}: entry {} has the key {:?}, which is not a header name",
                n + 1,
                key.trim()
            );
        }
    }
    Ok(())
}

/// The sampler OTEL_TRACES_SAMPLER names (with its ratio from OTEL_TRACES_SAMPLER_ARG);
/// `parentbased_always_on` when unset.
fn sampler(name: Option<&str>, arg: Option<&str>) -> anyhow::Result<Sampler> {
    let ratio = || -> anyhow::Result<f64> {
        let Some(arg) = set(arg) else {
            return Ok(1.0);
        };
        match arg.parse::<f64>() {
            Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
            _ => bail!("OTEL_TRACES_SAMPLER_ARG={arg:?} is not a ratio from 0 to 1"),
        }
    };
    let parent_based = |root: Sampler| Sampler::ParentBased(Box::new(root));
    Ok(match set(name).unwrap_or("parentbased_always_on") {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio()?),
        "parentbased_always_on" => parent_based(Sampler::AlwaysOn),
        "parentbased_always_off" => parent_based(Sampler::AlwaysOff),
        "parentbased_traceidratio" => parent_based(Sampler::TraceIdRatioBased(ratio()?)),
        other => bail!(
            "OTEL_TRACES_SAMPLER={other:?} is not supported: use parentbased_always_on (the default), always_on, always_off, traceidratio, parentbased_traceidratio or parentbased_always_off"
        ),
    })
}

/// The resource spans describe: `service.name` from OTEL_SERVICE_NAME, else from
/// OTEL_RESOURCE_ATTRIBUTES, else `threadql`; the other attributes of OTEL_RESOURCE_ATTRIBUTES;
/// the SDK's own.
fn resource(service_name: Option<&str>) -> Resource {
    let resource = Resource::builder_empty()
        .with_service_name(DEFAULT_SERVICE_NAME)
        .with_detectors(&[
            Box::new(TelemetryResourceDetector),
            Box::new(EnvResourceDetector::new()),
        ]);
    match service_name {
        Some(name) => resource.with_service_name(name.to_owned()),
        None => resource,
    }
    .build()
}

/// Traces being exported: stop them (which sends the last spans) when the server stops.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
    /// Whether the last export failed (then the failure has been logged already).
    failing: Arc<AtomicBool>,
}

impl Traces {
    /// Starts exporting: builds the exporter and its batching task (on the running Tokio
    /// runtime), and makes the provider the global one (the database driver's command spans
    /// go there).
    pub fn start(export: &Export) -> anyhow::Result<Traces> {
        let what = || {
            format!(
                "cannot set up the OTLP exporter for {} ({}) from the OTEL_EXPORTER_OTLP_* variables",
                export.endpoint,
                export.protocol.name()
            )
        };
        let exporter = match export.protocol {
            Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(export.endpoint.clone())
                .build(),
            Protocol::Grpc => {
                let builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(export.endpoint.clone());
                let builder = match export.endpoint.starts_with("https:") {
                    true => builder.with_tls_config(
                        opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new()
                            .with_webpki_roots(),
                    ),
                    false => builder,
                };
                builder.build()
            }
        }
        .with_context(what)?;
        let failing = Arc::new(AtomicBool::new(false));
        let exporter = Reported {
            inner: exporter,
            endpoint: export.endpoint.clone(),
            failing: failing.clone(),
        };
        let processor =
            BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(export.sampler.clone())
            .with_resource(resource(export.service_name.as_deref()))
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        EXPORTING.store(true, Ordering::Relaxed);
        Ok(Traces { provider, failing })
    }

    /// The layer that turns this program's spans into OpenTelemetry spans. It has its own
    /// filter: every span of threadql's own code at `debug` and above (whatever THREADQL_LOG
    /// says), and the warnings and errors logged inside them (as span events); nothing of
    /// other crates (the exporter's own HTTP client would otherwise trace itself).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        let layer: Filtered<_, _, S> = tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("threadql"))
            .with_threads(false)
            .with_location(false)
            .with_filter(filter_fn(exported));
        layer
    }

    /// Stops exporting: sends the spans still waiting, then closes the exporter. Waits at most
    /// as long as one export may take (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default). A failure
    /// is logged unless the collector was already known to be unreachable (and logged so).
    pub async fn stop(self) {
        EXPORTING.store(false, Ordering::Relaxed);
        let provider = self.provider;
        let failed = match tokio::task::spawn_blocking(move || provider.shutdown()).await {
            Ok(Ok(())) => return,
            Ok(Err(err)) => err.to_string(),
            Err(err) => err.to_string(),
        };
        if self.failing.load(Ordering::Relaxed) {
            tracing::debug!(err = failed, "the last spans were not sent either");
        } else {
            tracing::warn!(err = failed, "the last spans may not have been sent");
        }
    }
}

/// Whether the OpenTelemetry layer takes a span or an event (see [`Traces::layer`]).
fn exported(metadata: &Metadata<'_>) -> bool {
    let ours = metadata.target() == "threadql" || metadata.target().starts_with("threadql::");
    let level = match metadata.is_span() {
        true => Level::DEBUG,
        false => Level::WARN,
    };
    ours && *metadata.level() <= level
}

/// The exporter, reporting failures in the log once per outage (a warning when spans first
/// fail to go out, a line when they go out again) instead of once per batch.
#[derive(Debug)]
struct Reported {
    inner: opentelemetry_otlp::SpanExporter,
    endpoint: String,
    failing: Arc<AtomicBool>,
}

impl SpanExporter for Reported {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let spans = batch.len();
        let sent = self.inner.export(batch);
        async move {
            let result = sent.await;
            match &result {
                Err(err) => {
                    if !self.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            endpoint = %self.endpoint,
                            %err,
                            spans,
                            "cannot send traces to the collector: spans are dropped until it answers (this is logged once)"
                        );
                    }
                }
                Ok(()) => {
                    if self.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(endpoint = %self.endpoint, "traces reach the collector again");
                    }
                }
            }
            result
        }
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A request's headers, as the trace-context propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Routes whose requests are not traced: probes and scrapes, which come every few seconds and
/// would bury the traces of the API.
const UNTRACED: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// The span of one HTTP request (`request`, at `info`, made by the request layer in
/// `telemetry::request`, so every log line written while serving the request carries it): its
/// request id, method, path and route, and once answered its status. While traces are exported
/// it is a server span named `METHOD route` that continues the caller's trace when the request
/// carries a W3C `traceparent` (one that does not parse is ignored: the request starts a trace
/// of its own); requests to `/healthz`, `/readyz` and `/metrics` are not traced.
pub fn request_span<B>(request: &Request<B>, request_id: &str) -> Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let span = tracing::info_span!(
        "request",
        request_id,
        http.request.method = %request.method(),
        url.path = request.uri().path(),
        http.route = route,
        http.response.status_code = Empty,
        otel.name = Empty,
        otel.kind = Empty,
        otel.status_code = Empty,
    );
    if EXPORTING.load(Ordering::Relaxed) && !span.is_disabled() {
        if route.is_some_and(|route| UNTRACED.contains(&route)) {
            // Neither this span nor anything under it (the database ping) is recorded.
            let _ = span.set_parent(opentelemetry::Context::new().with_telemetry_suppressed());
            return span;
        }
        let name = match route {
            Some(route) => format!("{} {route}", request.method()),
            None => request.method().to_string(),
        };
        span.record("otel.name", name.as_str());
        span.record("otel.kind", "server");
        let parent = TraceContextPropagator::new().extract(&Headers(request.headers()));
        if parent.span().span_context().is_valid() {
            // Fails only when the span is not exported (filtered out): nothing to join then.
            let _ = span.set_parent(parent);
        }
    }
    span
}

/// Records a response's status on its request span (a 5xx marks the span as failed).
pub fn record_status(span: &Span, status: StatusCode) {
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> Config {
        let mut all = vec!["threadql"];
        all.extend_from_slice(args);
        match crate::config::Cli::try_parse_from(all) {
            Ok(cli) => cli.config,
            Err(err) => panic!("{err}"),
        }
    }

    fn export(args: &[&str]) -> Result<Option<Export>, String> {
        Export::from_config(&config(args)).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn no_endpoint_means_no_traces() {
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        {
            return;
        }
        assert!(matches!(export(&[]), Ok(None)));
        assert!(matches!(export(&["--otlp-endpoint", " "]), Ok(None)));
        assert!(matches!(
            export(&[
                "--otlp-endpoint",
                "http://collector:4318",
                "--otel-sdk-disabled",
                "true"
            ]),
            Ok(None)
        ));
    }

    #[test]
    fn endpoints_follow_the_specification_and_bad_ones_are_refused() {
        let url = |args: &[&str]| export(args).map(|e| e.map(|e| (e.endpoint, e.protocol)));
        assert_eq!(
            url(&["--otlp-endpoint", "http://collector:4318"]),
            Ok(Some((
                "http://collector:4318/v1/traces".to_owned(),
                Protocol::HttpProtobuf
            )))
        );
        assert_eq!(
            url(&["--otlp-endpoint", "https://collector:4318/base/"]),
            Ok(Some((
                "https://collector:4318/base/v1/traces".to_owned(),
                Protocol::HttpProtobuf
            )))
        );
        assert_eq!(
            url(&[
                "--otlp-endpoint",
                "http://wrong:1",
                "--otlp-traces-endpoint",
                "http://collector:4318/custom"
            ]),
            Ok(Some((
                "http://collector:4318/custom".to_owned(),
                Protocol::HttpProtobuf
            )))
        );
        assert_eq!(
            url(&[
                "--otlp-endpoint",
                "http://collector:4317",
                "--otlp-protocol",
                "grpc"
            ]),
            Ok(Some(("http://collector:4317".to_owned(), Protocol::Grpc)))
        );
        for bad in [
            "collector:4318",
            "localhost",
            "ftp://collector:21",
            "http://",
            "http://collector:4318/?x=1",
            "http://coll ector:4318",
        ] {
            let refused = url(&["--otlp-endpoint", bad]);
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("OTEL_EXPORTER_OTLP_ENDPOINT")),
                "{bad}: {refused:?}"
            );
        }
        let refused = url(&["--otlp-traces-endpoint", "nope"]);
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
            "{refused:?}"
        );
    }

    #[test]
    fn unsupported_protocols_samplers_and_headers_are_refused_by_name() {
        let with = |extra: &[&str]| {
            let mut args = vec!["--otlp-endpoint", "http://collector:4318"];
            args.extend_from_slice(extra);
            export(&args).map(|e| e.is_some())
        };
        let refused_naming = |extra: &[&str], variable: &str| {
            let result = with(extra);
            assert!(
                result.as_ref().is_err_and(|e| e.contains(variable)),
                "{extra:?}: {result:?}"
            );
        };
        refused_naming(
            &["--otlp-protocol", "http/json"],
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        );
        refused_naming(&["--otlp-protocol", "udp"], "OTEL_EXPORTER_OTLP_PROTOCOL");
        refused_naming(
            &[
                "--otlp-protocol",
                "grpc",
                "--otlp-traces-protocol",
                "carrier",
            ],
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        );
        refused_naming(
            &["--otel-traces-sampler", "sometimes"],
            "OTEL_TRACES_SAMPLER",
        );
        refused_naming(
            &[
                "--otel-traces-sampler",
                "traceidratio",
                "--otel-traces-sampler-arg",
                "1.5",
            ],
            "OTEL_TRACES_SAMPLER_ARG",
        );
        refused_naming(
            &["--otlp-headers", "api-key=secret,broken"],
            "OTEL_EXPORTER_OTLP_HEADERS",
        );
        refused_naming(
            &["--otlp-traces-headers", "bad key=1"],
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        );
        let secret = with(&["--otlp-headers", "api-key=s3cr3t,broken"]);
        assert!(secret.is_err_and(|e| !e.contains("s3cr3t")));
        assert_eq!(
            with(&[
                "--otlp-headers",
                "api-key=secret, x-tenant=a%20b",
                "--otel-traces-sampler",
                "parentbased_traceidratio",
                "--otel-traces-sampler-arg",
                "0.25",
                "--otlp-traces-protocol",
                "http/protobuf"
            ]),
            Ok(true)
        );
    }

    #[test]
    fn the_service_is_named_threadql_unless_the_variables_say_otherwise() {
        let name = |explicit: Option<&str>| {
            resource(explicit)
                .get(&opentelemetry::Key::new("service.name"))
                .map(|v| v.to_string())
        };
        assert_eq!(name(Some("comments-eu")).as_deref(), Some("comments-eu"));
        if std::env::var_os("OTEL_RESOURCE_ATTRIBUTES").is_none() {
            assert_eq!(name(None).as_deref(), Some(DEFAULT_SERVICE_NAME));
        }
    }
}
