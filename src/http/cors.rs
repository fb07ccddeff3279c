//! Cross-origin use of `/graphql`: the CORS layer that answers browsers' preflights for the
//! origins `THREADQL_CORS_ORIGINS` allows, and the origin check of WebSocket upgrades and
//! Server-Sent Events, which CORS does not guard (a browser opens a WebSocket to any origin, and
//! an event stream's request runs before the browser judges its answer).

use std::time::Duration;

use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, ORIGIN, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::response::Refusal;
use crate::config::{CorsOrigins, Origin};

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The CORS layer of `/graphql` for the allowed origins (`None` when none are configured: then
/// only the server's own origin may call it, and a browser needs no CORS for that). It answers
/// preflights for POST and GET with `Content-Type`, `Authorization` and the headers Apollo
/// clients send to force one (`Apollo-Require-Preflight`, `X-Apollo-Operation-Name`), and lets
/// pages read `Retry-After`. It never allows credentials: tokens travel in a header, not in
/// cookies.
pub(super) fn layer(origins: Option<&CorsOrigins>) -> Option<CorsLayer> {
    let allow_origin = match origins? {
        CorsOrigins::Any => AllowOrigin::any(),
        CorsOrigins::List(origins) => AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(&o.to_string()).ok()),
        ),
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::POST, Method::GET])
            .allow_headers([
                CONTENT_TYPE,
                AUTHORIZATION,
                HeaderName::from_static("apollo-require-preflight"),
                HeaderName::from_static("x-apollo-operation-name"),
            ])
            .expose_headers([RETRY_AFTER])
            .max_age(PREFLIGHT_MAX_AGE),
    )
}

/// Refuses (403, `FORBIDDEN`) a WebSocket upgrade or an event stream sent by a page of another
/// origin than the allowed ones and the server's own (`own`: `THREADQL_PUBLIC_URL`, else the
/// listener's), so such a page cannot hold a live connection on its visitor's behalf. Scheme,
/// host and port must all match; `Host` is never trusted, since a page whose name was rebound
/// to this server's address sends its own name there. Requests without `Origin` (clients that
/// are not browsers) pass.
pub(super) fn check_origin(
    origins: Option<&CorsOrigins>,
    own: &[Origin],
    headers: &HeaderMap,
    what: &str,
) -> Result<(), Refusal> {
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    if matches!(origins, Some(CorsOrigins::Any)) {
        return Ok(());
    }
    let text = origin.to_str().unwrap_or_default();
    let allowed = text.parse::<Origin>().ok().is_some_and(|origin| {
        own.contains(&origin) || origins.is_some_and(|origins| origins.allows(&origin))
    });
    if allowed {
        return Ok(());
    }
    let own: Vec<String> = own.iter().map(Origin::to_string).collect();
    Err(Refusal::new(
        StatusCode::FORBIDDEN,
        "FORBIDDEN",
        format!(
            "{what} from the origin {text:?} is refused: only the server's own origins ({}; \
             THREADQL_PUBLIC_URL names another) and those of THREADQL_CORS_ORIGINS may open one",
            own.join(", ")
        ),
    ))
}
