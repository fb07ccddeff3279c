//! `/notifications/unsubscribe?token=…`, the one-click unsubscribe of RFC 8058: a POST turns
//! the person's e-mail off without a sign-in; a GET only shows a page whose button makes that
//! POST (link scanners follow links, so a GET never unsubscribes).

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::HttpState;
use crate::domain::DomainError;

/// The page's policy: no script, no style from elsewhere, forms only to this server.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The link's query.
#[derive(Deserialize)]
pub(super) struct Link {
    token: Option<String>,
}

/// The page of a link: a button that unsubscribes, or why the link is not valid.
pub(super) async fn show(State(state): State<HttpState>, Query(link): Query<Link>) -> Response {
    let token = link.token.unwrap_or_default();
    if state.api.services().check_unsubscribe(&token).is_none() {
        return page(StatusCode::BAD_REQUEST, INVALID);
    }
    let form = format!(
        "<p>Stop e-mail about replies and discussions you follow?</p>\
         <form method=\"post\" action=\"/notifications/unsubscribe?token={}\">\
         <input type=\"hidden\" name=\"List-Unsubscribe\" value=\"One-Click\">\
         <button type=\"submit\">Unsubscribe</button></form>\
         <p>Your notifications stay in the app; you can turn e-mail on again in your settings.</p>",
        escape(&token)
    );
    page(StatusCode::OK, &form)
}

/// Unsubscribes the person the link names.
pub(super) async fn confirm(State(state): State<HttpState>, Query(link): Query<Link>) -> Response {
    let token = link.token.unwrap_or_default();
    match state.api.services().unsubscribe_with(&token).await {
        Ok(_) => page(
            StatusCode::OK,
            "<p>You are unsubscribed: no more notification e-mail will be sent to you.</p>",
        ),
        Err(DomainError::BadInput(_)) => page(StatusCode::BAD_REQUEST, INVALID),
        Err(err) => {
            tracing::warn!(%err, "an unsubscribe failed");
            page(
                StatusCode::SERVICE_UNAVAILABLE,
                "<p>That did not work this time: please try again in a moment.</p>",
            )
        }
    }
}

/// What an unsigned, altered or foreign link shows.
const INVALID: &str = "<p>This unsubscribe link is not valid. Use the link of a recent message, or change your settings in the app.</p>";

/// A small HTML page around `body`.
fn page(status: StatusCode, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>Notification e-mail</title>\
         </head><body>{body}</body></html>"
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        html,
    )
        .into_response()
}

/// `text` for an HTML attribute.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
