//! The response cache of anonymous reads, and HTTP revalidation (docs/operations.md, "The
//! response cache").
//!
//! The answer to a query sent without a token is kept as the bytes that were sent, keyed by the
//! document's hash, the operation's name, the variables and the response format, with what the
//! execution read ([`Reads`]: each discussion with its read-cache generation, and the cache's
//! epoch). It is served only while every one of those is unchanged, which is a check of memory
//! alone. Answers with errors, answers that read anything no generation tracks, and mutations
//! are never kept; signed-in requests never look.
//!
//! An anonymous GET answer that could be kept carries an `ETag` derived from what it read (and
//! from this process: another process numbers its generations its own way), and a request
//! naming it gets `304` without running the query while the answer kept under it is current.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use moka::sync::Cache;
use sha2::{Digest, Sha256};

use super::response::{respond, Format};
use super::HttpState;
use crate::auth::AuthState;
use crate::graphql::observe;
use crate::store::{recording, Freshness, Reads};
use crate::telemetry::request::{OperationType, Outcome};

/// Requests for one answer within [`ADMIT_WINDOW`] before it is kept (as the read cache admits
/// a discussion).
const ADMIT_AFTER: u64 = 3;
/// How long requests for an answer count towards keeping it.
const ADMIT_WINDOW: Duration = Duration::from_secs(60);
/// Answers whose requests are counted (the least recently seen are forgotten).
const COUNTED: u64 = 100_000;
/// Of the cache's bytes, the share one answer may take at most (a larger one is kept without
/// its body: its tag still answers revalidations without running the query).
const LARGEST_SHARE: u64 = 16;
/// What an entry takes besides its body.
const ENTRY_OVERHEAD: usize = 256;
/// `Cache-Control` of an answer a browser or a CDN may keep: each use is revalidated.
const REVALIDATE: &str = "public, max-age=0, must-revalidate";

/// What identifies an answer: a SHA-256 of the format, the document's hash, the operation's
/// name and the variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct AnswerKey([u8; 32]);

/// A kept answer.
pub(super) struct Kept {
    /// The body sent; `None` when it was too large to keep (its tag is kept).
    body: Option<Bytes>,
    reads: Reads,
    tag: HeaderValue,
    /// The operation's name, for the request's log line and metrics.
    operation: Option<async_graphql::Name>,
}

/// The counters `/metrics` shows.
#[derive(Default)]
struct Stats {
    hits: AtomicU64,
    not_modified: AtomicU64,
    stored: AtomicU64,
    untracked: AtomicU64,
}

/// The response cache of anonymous answers (and the tags of anonymous GET answers); one per
/// process, shared by its listeners.
pub struct ResponseCache {
    kept: Option<Cache<AnswerKey, Arc<Kept>>>,
    counted: Cache<AnswerKey, Arc<AtomicU64>>,
    largest: u64,
    /// This process's part of every tag.
    salt: [u8; 16],
    stats: Stats,
}

/// The document a request runs: the hash it names (a persisted query sent without its text),
/// else the hash of its text. `None` when it names a hash that is not one.
fn document_hash(request: &async_graphql::Request) -> Option<[u8; 32]> {
    if !request.query.is_empty() {
        return Some(Sha256::digest(request.query.as_bytes()).into());
    }
    let persisted = request.extensions.get("persistedQuery")?;
    let async_graphql::Value::Object(fields) = persisted else {
        return None;
    };
    let Some(async_graphql::Value::String(hash)) = fields.get("sha256Hash") else {
        return None;
    };
    let mut out = [0_u8; 32];
    if hash.len() != 64 {
        return None;
    }
    for (i, pair) in hash.as_bytes().chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

impl ResponseCache {
    /// A cache of at most `bytes` (`THREADQL_RESPONSE_CACHE_BYTES`; 0: none, while tags are
    /// still given).
    pub fn new(bytes: u64) -> Self {
        let kept = (bytes > 0).then(|| {
            Cache::builder()
                .max_capacity(bytes)
                .weigher(|_: &AnswerKey, kept: &Arc<Kept>| {
                    let body = kept.body.as_ref().map_or(0, Bytes::len);
                    u32::try_from(body + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
                })
                .build()
        });
        Self {
            kept,
            counted: Cache::builder()
                .max_capacity(COUNTED)
                .time_to_live(ADMIT_WINDOW)
                .build(),
            largest: bytes / LARGEST_SHARE,
            salt: rand::random(),
            stats: Stats::default(),
        }
    }

    /// The key of a request's answer in `format`.
    pub(super) fn key(format: Format, request: &async_graphql::Request) -> Option<AnswerKey> {
        let document = document_hash(request)?;
        let variables = serde_json::to_vec(&request.variables).ok()?;
        let mut hasher = Sha256::new();
        hasher.update([format as u8]);
        hasher.update(document);
        match &request.operation_name {
            Some(name) => {
                hasher.update([1]);
                hasher.update((name.len() as u64).to_le_bytes());
                hasher.update(name.as_bytes());
            }
            None => hasher.update([0]),
        }
        hasher.update(variables);
        Some(AnswerKey(hasher.finalize().into()))
    }

    /// The answer kept under `key`, while what it read is unchanged.
    pub(super) fn current(&self, key: &AnswerKey, freshness: &dyn Freshness) -> Option<Arc<Kept>> {
        let kept = self.kept.as_ref()?.get(key)?;
        freshness.current(&kept.reads).then_some(kept)
    }

    /// The tag of an answer to `key` that read `reads`.
    fn tag(&self, key: &AnswerKey, reads: &Reads) -> HeaderValue {
        let mut salt = Vec::with_capacity(48);
        salt.extend_from_slice(&self.salt);
        salt.extend_from_slice(&key.0);
        let tag = format!("\"{:016x}\"", reads.tag(&salt));
        HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("\"\""))
    }

    /// Keeps (once asked for often enough) the answer `body` to `key` that read `reads`, and
    /// gives its tag.
    pub(super) fn keep(
        &self,
        key: AnswerKey,
        body: &Bytes,
        reads: Option<Reads>,
        operation: Option<async_graphql::Name>,
    ) -> Option<HeaderValue> {
        let Some(reads) = reads else {
            self.stats.untracked.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let tag = self.tag(&key, &reads);
        let Some(kept) = &self.kept else {
            return Some(tag);
        };
        let asked = self
            .counted
            .get_with(key, || Arc::new(AtomicU64::new(0)))
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        if asked >= ADMIT_AFTER {
            let body = (body.len() as u64 <= self.largest).then(|| body.clone());
            let entry = Kept {
                body,
                reads,
                tag: tag.clone(),
                operation,
            };
            kept.insert(key, Arc::new(entry));
            self.stats.stored.fetch_add(1, Ordering::Relaxed);
        }
        Some(tag)
    }

    /// A kept answer as the response to a request with `headers` (`304` when it names the
    /// answer's tag); `None` when its body was not kept and the request does not name its tag.
    pub(super) fn serve(
        &self,
        kept: &Kept,
        format: Format,
        get: bool,
        headers: &HeaderMap,
    ) -> Option<Response> {
        if get && if_none_match(headers, &kept.tag) == Some(true) {
            self.stats.not_modified.fetch_add(1, Ordering::Relaxed);
            return Some(not_modified(kept.tag.clone()));
        }
        let body = kept.body.clone()?;
        self.stats.hits.fetch_add(1, Ordering::Relaxed);
        let tag = get.then(|| kept.tag.clone());
        Some(answer(format, body, tag))
    }

    /// The response to a request that ran: `304` when it is a GET naming `tag`.
    pub(super) fn ran(
        &self,
        format: Format,
        body: Bytes,
        tag: Option<HeaderValue>,
        get: bool,
        headers: &HeaderMap,
    ) -> Response {
        let tag = tag.filter(|_| get);
        if let Some(tag) = &tag {
            if if_none_match(headers, tag) == Some(true) {
                self.stats.not_modified.fetch_add(1, Ordering::Relaxed);
                return not_modified(tag.clone());
            }
        }
        answer(format, body, tag)
    }

    /// Writes the cache's metrics.
    pub(super) fn write_metrics(&self, out: &mut crate::telemetry::metrics::Exposition) {
        use crate::telemetry::metrics::Kind;
        let counters = [
            ("threadql_response_cache_hits_total", "Anonymous queries answered with the bytes of a kept answer, without running.", &self.stats.hits),
            ("threadql_response_cache_not_modified_total", "Anonymous GETs answered 304 because the ETag they named is current.", &self.stats.not_modified),
            ("threadql_response_cache_stored_total", "Anonymous answers kept by the response cache.", &self.stats.stored),
            ("threadql_response_cache_untracked_total", "Anonymous answers without errors that could not be kept: they read something no generation tracks.", &self.stats.untracked),
        ];
        for (name, help, value) in counters {
            out.family(name, Kind::Counter, help);
            out.sample(name, &[], value.load(Ordering::Relaxed));
        }
        let bytes = self.kept.as_ref().map_or(0, |kept| {
            kept.run_pending_tasks();
            kept.weighted_size()
        });
        out.family(
            "threadql_response_cache_bytes",
            Kind::Gauge,
            "Bytes the response cache holds now (bodies and their overhead).",
        );
        out.sample("threadql_response_cache_bytes", &[], bytes);
    }
}

/// The answer kept for an operation of a caller without a token, while it is current (only
/// queries' answers are kept, so a GET is answered before its document is parsed).
pub(super) fn kept(
    state: &HttpState,
    request: &async_graphql::Request,
    format: Format,
    get: bool,
    headers: &HeaderMap,
) -> Option<(Response, Outcome)> {
    let cache = &state.responses;
    let key = ResponseCache::key(format, request)?;
    let kept = cache.current(&key, state.api.freshness()?)?;
    let response = cache.serve(&kept, format, get, headers)?;
    let name = kept.operation.clone();
    Some((
        response,
        Outcome::answered(OperationType::Query, name, Vec::new()),
    ))
}

/// Runs one operation of a caller without a token (`get`: sent by GET or HEAD): from the
/// response cache while its answer there is current, else run, recording what it reads, and
/// kept when it may be.
pub(super) async fn anonymous(
    state: &HttpState,
    request: async_graphql::Request,
    auth: AuthState,
    format: Format,
    get: bool,
    headers: &HeaderMap,
) -> (Response, Outcome) {
    if let Some(answered) = kept(state, &request, format, get, headers) {
        return answered;
    }
    let cache = &state.responses;
    let freshness = state.api.freshness();
    let key = ResponseCache::key(format, &request);
    let ((response, operation), reads) = recording(state.api.execute_observed(request, auth)).await;
    let outcome = Outcome::answered(
        operation.of_type,
        operation.name.clone(),
        observe::errors([&response]),
    );
    let keepable = operation.of_type == OperationType::Query
        && response.errors.is_empty()
        && freshness.is_some();
    let body = keepable
        .then(|| serde_json::to_vec(&response).ok())
        .flatten()
        .zip(key);
    let Some((body, key)) = body else {
        return (
            respond(format, &async_graphql::BatchResponse::Single(response)),
            outcome,
        );
    };
    let body = Bytes::from(body);
    let tag = cache.keep(key, &body, reads, operation.name);
    (cache.ran(format, body, tag, get, headers), outcome)
}

/// A `200` answer with `body`, and a tag with the headers that let caches revalidate it.
fn answer(format: Format, body: Bytes, tag: Option<HeaderValue>) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, format.content_type());
    if let Some(tag) = tag {
        revalidated(headers, tag);
    }
    response
}

fn not_modified(tag: HeaderValue) -> Response {
    let mut response = StatusCode::NOT_MODIFIED.into_response();
    revalidated(response.headers_mut(), tag);
    response
}

fn revalidated(headers: &mut HeaderMap, tag: HeaderValue) {
    headers.insert(ETAG, tag);
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(REVALIDATE));
    headers.insert(VARY, HeaderValue::from_static("Accept, Authorization"));
}

/// Whether `If-None-Match` names `tag` (weakly compared, or `*`); `None` without the header.
pub(super) fn if_none_match(headers: &HeaderMap, tag: &HeaderValue) -> Option<bool> {
    let tag = tag.to_str().ok()?;
    let mut named = headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .peekable();
    named.peek()?;
    Some(named.any(|t| t == "*" || t.trim_start_matches("W/") == tag.trim_start_matches("W/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        map
    }

    #[test]
    fn a_request_names_a_tag_weakly_among_several() {
        let tag = HeaderValue::from_static("\"abc\"");
        assert_eq!(if_none_match(&headers(&[]), &tag), None);
        let named = |v: &str| if_none_match(&headers(&[("if-none-match", v)]), &tag);
        assert_eq!(named("\"abc\""), Some(true));
        assert_eq!(named("\"x\", W/\"abc\""), Some(true));
        assert_eq!(named("*"), Some(true));
        assert_eq!(named("\"x\""), Some(false));
        assert_eq!(named("\"abcd\""), Some(false));
    }

    #[test]
    fn keys_differ_by_document_operation_variables_and_format() {
        let request = |query: &str, name: Option<&str>, vars: serde_json::Value| {
            let mut r = async_graphql::Request::new(query)
                .variables(async_graphql::Variables::from_json(vars));
            r.operation_name = name.map(str::to_owned);
            r
        };
        let base = request("{ a }", None, serde_json::json!({"x": 1}));
        let key = |f, r: &async_graphql::Request| ResponseCache::key(f, r).expect("a key");
        let k = key(Format::Json, &base);
        assert_eq!(
            k,
            key(
                Format::Json,
                &request("{ a }", None, serde_json::json!({"x": 1}))
            )
        );
        assert_ne!(k, key(Format::GraphqlResponse, &base));
        assert_ne!(
            k,
            key(
                Format::Json,
                &request("{ b }", None, serde_json::json!({"x": 1}))
            )
        );
        assert_ne!(
            k,
            key(
                Format::Json,
                &request("{ a }", Some("A"), serde_json::json!({"x": 1}))
            )
        );
        assert_ne!(
            k,
            key(
                Format::Json,
                &request("{ a }", None, serde_json::json!({"x": 2}))
            )
        );
        // A persisted query sent by its hash is the same document as its text.
        let hash = format!("{:x}", Sha256::digest(b"{ a }"));
        let mut by_hash = request("", None, serde_json::json!({"x": 1}));
        by_hash.extensions.insert(
            "persistedQuery".into(),
            async_graphql::Value::from_json(serde_json::json!({"version": 1, "sha256Hash": hash}))
                .expect("a value"),
        );
        assert_eq!(k, key(Format::Json, &by_hash));
        by_hash.extensions.insert(
            "persistedQuery".into(),
            async_graphql::Value::from_json(serde_json::json!({"version": 1, "sha256Hash": "zz"}))
                .expect("a value"),
        );
        assert!(ResponseCache::key(Format::Json, &by_hash).is_none());
    }
}
