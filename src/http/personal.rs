//! `GET /me/export`: the signed-in person's own data, streamed as JSON Lines in the format of
//! `threadql export` (docs/formats.md): a header naming them, their comments (newest first,
//! held ones included, with revisions), their votes, then their reports, follows, settings and
//! ban. Each page is written as it is read, so memory does not grow with what they have.

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::response::Refusal;
use super::HttpState;
use crate::auth::AuthState;
use crate::domain::{DomainError, Micros, UserId};
use crate::import::threadql::{
    time_text, CommentLine, Header, Line, PersonalLine, VoteLine, FORMAT, VERSION,
};
use crate::service::PersonalRecord;

/// The export of the person the `Authorization` header names.
pub(super) async fn export(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    let authorization = super::authorization(&headers);
    let viewer = match state.api.authenticate(authorization.as_deref()) {
        AuthState::Authenticated(viewer) => viewer,
        AuthState::Anonymous => {
            return Refusal::new(
                StatusCode::UNAUTHORIZED,
                "UNAUTHENTICATED",
                "your data needs your sign-in: send `Authorization: Bearer <token>`",
            )
            .into_response()
        }
        AuthState::Rejected(why) => {
            return Refusal::new(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", why).into_response()
        }
    };
    let person = UserId::from_stored(viewer.author.id.clone());
    let services = state.api.services().clone();
    let start = match services.export_start(&person).await {
        Ok(start) => start,
        Err(err) => return refused(&err),
    };
    let header = Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        exported: time_text(Micros::now()),
        person: Some(person.as_str().to_owned()),
    };
    let first = futures::stream::once(async move { Ok(json_line(&header)) });
    let pages = futures::stream::unfold(Some((services, person, start)), |state| async move {
        let (services, person, at) = state?;
        match services.export_page(&person, at).await {
            Ok((records, next)) => {
                let text: String = records.iter().map(|r| record_line(&person, r)).collect();
                let next = next.map(|at| (services, person, at));
                Some((Ok::<_, std::io::Error>(text), next))
            }
            Err(err) => {
                // The status is sent already: the stream ends short, which the client sees as
                // a failed download (no last line says the export is whole).
                tracing::error!(%err, "a person's export failed midway");
                Some((Err(std::io::Error::other(err.to_string())), None))
            }
        }
    });
    let body = first
        .chain(pages)
        .filter(|chunk| std::future::ready(!matches!(chunk, Ok(text) if text.is_empty())));
    let filename = format!(
        "attachment; filename=\"threadql-my-data-{}.jsonl\"",
        Micros::now().to_datetime().format("%Y-%m-%d")
    );
    (
        [
            (
                CONTENT_TYPE,
                "application/x-ndjson; charset=utf-8".to_owned(),
            ),
            (CACHE_CONTROL, "no-store".to_owned()),
            (CONTENT_DISPOSITION, filename),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// The refusal of an export that could not start.
fn refused(err: &DomainError) -> Response {
    let (status, code) = match err {
        DomainError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
    };
    Refusal::new(status, code, err.to_string()).into_response()
}

/// One value as a line of JSON.
fn json_line(value: &impl serde::Serialize) -> String {
    let mut line = serde_json::to_string(value).unwrap_or_default();
    line.push('\n');
    line
}

/// The line of one record of `person`'s.
fn record_line(person: &UserId, record: &PersonalRecord) -> String {
    match record {
        PersonalRecord::Comment(found) => {
            let pinned: Vec<String> = found
                .discussion
                .pinned
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect();
            json_line(&Line::Comment(CommentLine::of(
                &found.comment,
                found.held,
                &pinned,
            )))
        }
        PersonalRecord::Vote(vote) => json_line(&Line::Vote(VoteLine {
            discussion: vote.discussion.to_string(),
            slug: vote.slug.as_str().to_owned(),
            voter: person.as_str().to_owned(),
            value: vote.vote.as_str().to_uppercase(),
        })),
        PersonalRecord::Report(report) => json_line(&PersonalLine::Report {
            discussion: report.discussion.to_string(),
            slug: report.slug.as_str().to_owned(),
            reason: report.reason.as_str().to_uppercase(),
            note: report.note.clone(),
            reported_at: time_text(report.at),
        }),
        PersonalRecord::Follow(discussion) => json_line(&PersonalLine::Follow {
            discussion: discussion.to_string(),
        }),
        PersonalRecord::Settings(settings) => {
            let set = settings.settings.as_ref();
            json_line(&PersonalLine::Settings {
                address: settings.address.clone(),
                email: set.map(|s| s.email.as_str().to_uppercase()),
                on_reply: set.map(|s| s.on_reply),
                on_moderation: set.map(|s| s.on_moderation),
                on_followed: set.map(|s| s.on_followed),
            })
        }
        PersonalRecord::Ban(ban) => json_line(&PersonalLine::Ban {
            until: ban.until.map(time_text),
            reason: ban.reason.as_ref().map(|r| r.as_str().to_owned()),
            banned_at: time_text(ban.at),
        }),
    }
}
