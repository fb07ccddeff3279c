//! Atom feeds: `/feeds/discussion/<key>.atom` (a discussion's newest public comments, by the
//! host page's key, percent-encoded) and `/feeds/recent.atom` (the newest across the server).
//! Each answer carries an `ETag` (a hash of its body) and a `Last-Modified` (its newest entry's
//! `updated`), and a conditional GET that still holds is `304` without a body. `no-cache`: a
//! reader or a shared cache may keep a feed, but checks it on every use, so a comment deleted
//! or rejected leaves every feed at once. Callers count against the anonymous rate like
//! GraphQL's.

use axum::extract::{Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE, LAST_MODIFIED, RETRY_AFTER,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use percent_encoding::percent_decode_str;
use sha2::{Digest, Sha256};

use super::{client_of, count_request, HttpState};
use crate::domain::atom::{Feed, CONTENT_TYPE as ATOM};
use crate::domain::{DiscussionKey, DomainError, Micros};

/// Where a discussion's feed is, before its key.
const DISCUSSION_PREFIX: &str = "/feeds/discussion/";
/// What ends a discussion's feed's path.
const SUFFIX: &str = ".atom";
/// The longest key, percent-encoded, worth decoding: 512 characters of 4 bytes, each byte
/// written as 3 characters.
const MAX_ENCODED_KEY: usize = DiscussionKey::MAX_CHARS * 4 * 3;

/// `GET /feeds/discussion/<key>.atom`.
pub(super) async fn discussion(State(state): State<HttpState>, request: Request) -> Response {
    let (parts, _body) = request.into_parts();
    if let Some(refused) = refused(&state, &parts) {
        return refused;
    }
    let key = match key_of(parts.uri.path()) {
        Ok(key) => key,
        Err((status, message)) => return text(status, message),
    };
    let base = base_of(&state);
    match state.api.services().discussion_feed(&key, &base).await {
        Ok(Some(feed)) => answer(&feed, &parts.headers),
        Ok(None) => text(
            StatusCode::NOT_FOUND,
            "no discussion has this key".to_owned(),
        ),
        Err(err) => failed(&err),
    }
}

/// `GET /feeds/recent.atom`.
pub(super) async fn recent(State(state): State<HttpState>, request: Request) -> Response {
    let (parts, _body) = request.into_parts();
    if let Some(refused) = refused(&state, &parts) {
        return refused;
    }
    let base = base_of(&state);
    match state.api.services().recent_feed(&base).await {
        Ok(feed) => answer(&feed, &parts.headers),
        Err(err) => failed(&err),
    }
}

/// Counts the request against its client's anonymous allowance: `429` past it.
fn refused(state: &HttpState, parts: &axum::http::request::Parts) -> Option<Response> {
    let client = client_of(state, parts);
    let anonymous = crate::auth::AuthState::Anonymous;
    let refusal = count_request(state, &anonymous, client.as_ref()).err()?;
    let mut response = text(refusal.status, refusal.message);
    if let Some(secs) = refusal.retry_after {
        if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(RETRY_AFTER, value);
        }
    }
    Some(response)
}

/// What goes before a feed's path in its `self` link: the public address when there is one,
/// else nothing (a path, which a reader resolves against the feed's own address).
fn base_of(state: &HttpState) -> String {
    state
        .limits
        .public_url
        .as_ref()
        .map(|origin| origin.to_string().trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

/// The key of a discussion feed's path: `400` for a key that is malformed, not UTF-8 once
/// decoded, or far too long to be one; `404` for a path that does not end in `.atom`.
fn key_of(path: &str) -> Result<DiscussionKey, (StatusCode, String)> {
    let rest = path.strip_prefix(DISCUSSION_PREFIX).unwrap_or_default();
    let Some(encoded) = rest.strip_suffix(SUFFIX) else {
        return Err((
            StatusCode::NOT_FOUND,
            "a discussion's feed is /feeds/discussion/<key>.atom, with the key percent-encoded"
                .to_owned(),
        ));
    };
    if encoded.len() > MAX_ENCODED_KEY {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "a discussion key has at most {} characters",
                DiscussionKey::MAX_CHARS
            ),
        ));
    }
    let Ok(decoded) = percent_decode_str(encoded).decode_utf8() else {
        return Err((
            StatusCode::BAD_REQUEST,
            "the key is not UTF-8 once percent-decoded".to_owned(),
        ));
    };
    DiscussionKey::parse(&decoded).map_err(|err| (StatusCode::BAD_REQUEST, err.to_string()))
}

/// The feed, or `304` when the request's condition still holds: `If-None-Match` naming its
/// tag (or `*`), else, without `If-None-Match`, `If-Modified-Since` not before its
/// `Last-Modified` (to the second).
fn answer(feed: &Feed, request: &HeaderMap) -> Response {
    let body = feed.to_xml();
    let tag = etag(&body);
    let modified = http_date(feed.updated());
    let mut headers = HeaderMap::new();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Ok(value) = HeaderValue::from_str(&tag) {
        headers.insert(ETAG, value);
    }
    if let Ok(value) = HeaderValue::from_str(&modified) {
        headers.insert(LAST_MODIFIED, value);
    }
    if unchanged(request, &tag, feed.updated()) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(ATOM));
    (headers, body).into_response()
}

/// Whether the request's validators say it has this feed already.
fn unchanged(request: &HeaderMap, tag: &str, updated: Micros) -> bool {
    if let Some(named) = HeaderValue::from_str(tag)
        .ok()
        .and_then(|tag| super::answers::if_none_match(request, &tag))
    {
        return named;
    }
    let since = request
        .get(IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| DateTime::parse_from_rfc2822(v).ok());
    since.is_some_and(|since| since.timestamp() >= updated.0.div_euclid(1_000_000))
}

/// The entity tag of a body: its SHA-256, the first 16 bytes in hex, quoted.
fn etag(body: &str) -> String {
    let sum: String = Sha256::digest(body.as_bytes())[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"{sum}\"")
}

/// A time as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(at: Micros) -> String {
    let at: DateTime<Utc> = at.to_datetime();
    at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

/// A short plain-text answer.
fn text(status: StatusCode, message: String) -> Response {
    (
        status,
        [
            (CONTENT_TYPE, "text/plain; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
        ],
        message,
    )
        .into_response()
}

/// What a failed read answers: `400` for bad input, `429` past a rate, `503` when the store is
/// away or the discussion is moving, `500` otherwise (logged).
fn failed(err: &DomainError) -> Response {
    match err {
        DomainError::BadInput(message) => text(StatusCode::BAD_REQUEST, message.clone()),
        DomainError::NotFound(_) => text(
            StatusCode::NOT_FOUND,
            "no discussion has this key".to_owned(),
        ),
        DomainError::Unavailable(_) | DomainError::Moving(_) => {
            tracing::warn!(%err, "a feed could not be read");
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the feed cannot be read right now: try again in a moment".to_owned(),
            )
        }
        _ => {
            tracing::warn!(%err, "a feed could not be read");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the feed could not be read".to_owned(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(path: &str) -> Result<String, StatusCode> {
        key_of(path)
            .map(|k| k.as_str().to_owned())
            .map_err(|(status, _)| status)
    }

    #[test]
    fn keys_come_from_the_path_percent_decoded() {
        assert_eq!(
            status_of("/feeds/discussion/article-42.atom"),
            Ok("article-42".into())
        );
        assert_eq!(
            status_of("/feeds/discussion/posts%2F2024%2Fhello%20world.atom"),
            Ok("posts/2024/hello world".into())
        );
        assert_eq!(status_of("/feeds/discussion/a/b.atom"), Ok("a/b".into()));
        assert_eq!(
            status_of("/feeds/discussion/caf%C3%A9.atom"),
            Ok("café".into())
        );
        assert_eq!(
            status_of("/feeds/discussion/..%2F..%2Fetc%2Fpasswd.atom"),
            Ok("../../etc/passwd".into())
        );
        for (path, status) in [
            ("/feeds/discussion/article-42", StatusCode::NOT_FOUND),
            ("/feeds/discussion/article-42.rss", StatusCode::NOT_FOUND),
            ("/feeds/discussion/.atom", StatusCode::BAD_REQUEST),
            ("/feeds/discussion/a%00b.atom", StatusCode::BAD_REQUEST),
            ("/feeds/discussion/a%0Ab.atom", StatusCode::BAD_REQUEST),
            ("/feeds/discussion/%FF%FE.atom", StatusCode::BAD_REQUEST),
            (
                "/feeds/discussion/a%E2%80%8Bb.atom",
                StatusCode::BAD_REQUEST,
            ),
        ] {
            assert_eq!(status_of(path), Err(status), "{path}");
        }
        let long = format!("/feeds/discussion/{}.atom", "k".repeat(513));
        assert_eq!(status_of(&long), Err(StatusCode::BAD_REQUEST));
        let huge = format!("/feeds/discussion/{}.atom", "%41".repeat(10_000));
        assert_eq!(status_of(&huge), Err(StatusCode::BAD_REQUEST));
        let longest = format!("/feeds/discussion/{}.atom", "k".repeat(512));
        assert_eq!(status_of(&longest).map(|k| k.len()), Ok(512));
    }

    #[test]
    fn conditions_follow_the_tag_first_then_the_date() {
        let updated = Micros(784_111_777_500_000);
        assert_eq!(http_date(updated), "Sun, 06 Nov 1994 08:49:37 GMT");
        let tag = "\"abc\"";
        let headers = |pairs: &[(&str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(
                    axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            map
        };
        assert!(unchanged(
            &headers(&[("if-none-match", "\"abc\"")]),
            tag,
            updated
        ));
        assert!(unchanged(
            &headers(&[("if-none-match", "\"x\", W/\"abc\"")]),
            tag,
            updated
        ));
        assert!(unchanged(&headers(&[("if-none-match", "*")]), tag, updated));
        assert!(!unchanged(
            &headers(&[("if-none-match", "\"x\"")]),
            tag,
            updated
        ));
        // A tag that does not match wins over a date that would.
        assert!(!unchanged(
            &headers(&[
                ("if-none-match", "\"x\""),
                ("if-modified-since", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ]),
            tag,
            updated
        ));
        let since = |date: &str| unchanged(&headers(&[("if-modified-since", date)]), tag, updated);
        assert!(since("Sun, 06 Nov 1994 08:49:37 GMT"));
        assert!(since("Mon, 07 Nov 1994 00:00:00 GMT"));
        assert!(!since("Sun, 06 Nov 1994 08:49:36 GMT"));
        assert!(!since("not a date"));
        assert!(!unchanged(&HeaderMap::new(), tag, updated));
    }
}
