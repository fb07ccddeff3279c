//! The threadql file format (docs/formats.md): JSON Lines, a header, then per discussion one
//! `discussion` line, its comments in posting order (held ones after the others) and its votes.
//! `threadql export` writes it with [`Line`]; [`ThreadqlReader`] reads it back line by line.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use super::source::FormatError;
use crate::domain::{Author, Comment, Micros};

/// The format's name in the header.
pub const FORMAT: &str = "threadql";
/// The version this build writes and reads.
pub const VERSION: u64 = 1;
/// The longest line a file may have, in bytes: a longer one is never held whole.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The first line of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u64,
    /// When the export was made (RFC 3339).
    pub exported: String,
    /// Whose data it holds, in a person's own export (`GET /me/export`); absent in a site's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
}

/// Every line after the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    /// A discussion, before its comments.
    Discussion(DiscussionLine),
    /// A comment of the last discussion.
    Comment(CommentLine),
    /// A vote on a comment of the last discussion.
    Vote(VoteLine),
}

/// A discussion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscussionLine {
    /// Its id.
    pub id: String,
    /// The host page's key.
    pub key: Option<String>,
    /// The page's address.
    pub url: Option<String>,
    /// Its title.
    pub title: String,
    /// `per_comment`, `embedded` or `bucketed`.
    pub layout: String,
    /// Whether posting is closed.
    pub locked: bool,
    /// `post`, `pre` or `pre_first` when a moderator set it; `null` follows the server's default.
    pub moderation: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// Its pinned comments' slugs, in pin order.
    #[serde(default)]
    pub pinned: Vec<String>,
}

/// A comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentLine {
    /// Its discussion's id.
    pub discussion: String,
    /// Its slug (kept: direct links survive).
    pub slug: String,
    /// Its parent's slug (`null` at the top level).
    pub parent_slug: Option<String>,
    /// When it was posted (RFC 3339, microseconds).
    pub posted: String,
    /// Its author.
    pub author: Author,
    /// Its text (`null` once deleted).
    pub text: Option<String>,
    /// A tombstone.
    pub deleted: bool,
    /// When it was last edited.
    pub edited_at: Option<String>,
    /// Who wrote the current text, when not its author (a moderator's edit).
    #[serde(default)]
    pub edited_by: Option<Author>,
    /// Earlier versions of its text, oldest first.
    #[serde(default)]
    pub revisions: Vec<RevisionLine>,
    /// `approved`, `pending` or `rejected`.
    pub status: String,
    /// A moderator's reason, for a held or rejected comment.
    #[serde(default)]
    pub reason: Option<String>,
    /// Held for a moderator and never public (kept apart from the discussion's layout).
    #[serde(default)]
    pub held: bool,
    /// Whether the discussion pins it.
    #[serde(default)]
    pub pinned: bool,
    /// Votes for it.
    #[serde(default)]
    pub upvotes: u64,
    /// Votes against it.
    #[serde(default)]
    pub downvotes: u64,
}

/// An earlier version of a comment's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionLine {
    /// The text of that version.
    pub text: String,
    /// When it was written (RFC 3339).
    pub edited_at: String,
    /// Who wrote it.
    pub editor: Author,
}

/// A vote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteLine {
    /// The discussion's id.
    pub discussion: String,
    /// The comment's slug.
    pub slug: String,
    /// The voter's user id.
    pub voter: String,
    /// `UP` or `DOWN`.
    pub value: String,
}

/// The lines only a person's own export has (`GET /me/export`), after their comments and votes.
/// A site's export has none, and an import does not take a person's export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PersonalLine {
    /// A comment they reported.
    #[serde(rename_all = "camelCase")]
    Report {
        /// The comment's discussion.
        discussion: String,
        /// The comment's slug.
        slug: String,
        /// `SPAM`, `ABUSE`, `OFF_TOPIC` or `OTHER`.
        reason: String,
        /// What they added.
        note: Option<String>,
        /// When (RFC 3339).
        reported_at: String,
    },
    /// A discussion they follow.
    Follow {
        /// Its id.
        discussion: String,
    },
    /// Their notification settings and the address they are mailed at.
    #[serde(rename_all = "camelCase")]
    Settings {
        /// Their latest verified address.
        address: Option<String>,
        /// `NEVER`, `DAILY`… (null: the site's default).
        email: Option<String>,
        /// Mail about replies.
        on_reply: Option<bool>,
        /// Mail about the moderation of their comments.
        on_moderation: Option<bool>,
        /// Mail about discussions they follow.
        on_followed: Option<bool>,
    },
    /// Their ban, while it lasts.
    #[serde(rename_all = "camelCase")]
    Ban {
        /// Until when (null: until lifted).
        until: Option<String>,
        /// Why, as the moderator wrote it.
        reason: Option<String>,
        /// When (RFC 3339).
        banned_at: String,
    },
}

impl CommentLine {
    /// The line of `comment` (`held`: kept apart from its discussion's layout; `pinned`: the
    /// discussion's pinned slugs).
    pub fn of(comment: &Comment, held: bool, pinned: &[String]) -> CommentLine {
        CommentLine {
            discussion: comment.discussion_id.to_string(),
            slug: comment.slug.as_str().to_owned(),
            parent_slug: comment.parent.as_ref().map(|p| p.as_str().to_owned()),
            posted: time_text(comment.posted),
            author: comment.author.clone(),
            text: comment.text.clone(),
            deleted: comment.deleted,
            edited_at: comment.edited.map(time_text),
            edited_by: comment.edited_by.clone(),
            revisions: comment
                .revisions
                .iter()
                .map(|r| RevisionLine {
                    text: r.text.clone(),
                    edited_at: time_text(r.edited),
                    editor: r.editor.clone(),
                })
                .collect(),
            status: comment.standing.status.as_str().to_owned(),
            reason: comment.standing.reason.clone(),
            held,
            pinned: pinned.iter().any(|p| p == comment.slug.as_str()),
            upvotes: comment.votes.up,
            downvotes: comment.votes.down,
        }
    }
}

/// A time as the format writes it: RFC 3339 in UTC, with as many fractional digits as it has.
pub fn time_text(at: Micros) -> String {
    at.to_datetime()
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// A time the format wrote (any RFC 3339 offset is accepted).
pub fn parse_time(text: &str) -> Option<Micros> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| Micros(t.timestamp_micros()))
}

/// Reads a threadql file line by line: the header first (an unknown format or version is an
/// error), then one [`Line`] per line. Blank lines are skipped.
pub struct ThreadqlReader<R> {
    reader: R,
    position: u64,
    number: u64,
    header: bool,
    failed: bool,
    buffer: String,
}

impl<R: BufRead> ThreadqlReader<R> {
    /// A reader of `reader`.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            position: 0,
            number: 0,
            header: false,
            failed: false,
            buffer: String::new(),
        }
    }

    fn error(&mut self, message: impl AsRef<str>) -> FormatError {
        self.failed = true;
        FormatError {
            format: FORMAT,
            position: self.position,
            message: format!("line {}: {}", self.number, message.as_ref()),
        }
    }

    /// The next non-blank line, or `None` at the end.
    fn next_line(&mut self) -> Result<Option<String>, FormatError> {
        loop {
            self.buffer.clear();
            let limit = MAX_LINE_BYTES as u64 + 1;
            let read = std::io::Read::take(&mut self.reader, limit).read_line(&mut self.buffer);
            let n = match read {
                Ok(n) => n,
                Err(e) => return Err(self.error(format!("cannot be read: {e}"))),
            };
            if n == 0 {
                return Ok(None);
            }
            self.number += 1;
            self.position += n as u64;
            if n > MAX_LINE_BYTES {
                return Err(self.error(format!(
                    "longer than {MAX_LINE_BYTES} bytes: the file is refused (a comment's line \
                     holds its text and revisions, far less)"
                )));
            }
            if !self.buffer.trim().is_empty() {
                return Ok(Some(std::mem::take(&mut self.buffer)));
            }
        }
    }

    fn check_header(&mut self, line: &str) -> Result<(), FormatError> {
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| self.error(format!("the header is not JSON: {e}")))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(self.error(format!(
                "not a threadql file: the first line must be {{\"format\":\"{FORMAT}\",\"version\":{VERSION},…}}"
            )));
        }
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(VERSION) => Ok(()),
            Some(other) => Err(self.error(format!(
                "version {other} is not one this build reads (it reads version {VERSION})"
            ))),
            None => Err(self.error("the header has no version number")),
        }
    }
}

impl<R: BufRead> Iterator for ThreadqlReader<R> {
    type Item = Result<Line, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if !self.header {
            match self.next_line() {
                Ok(Some(line)) => {
                    if let Err(e) = self.check_header(&line) {
                        return Some(Err(e));
                    }
                    self.header = true;
                }
                Ok(None) => return Some(Err(self.error("the file is empty"))),
                Err(e) => return Some(Err(e)),
            }
        }
        let line = match self.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let value: serde_json::Value = match serde_json::from_str(&line) {
            Ok(value) => value,
            Err(e) => return Some(Err(self.error(format!("not JSON: {e}")))),
        };
        if !value.is_object() {
            return Some(Err(self.error("not a JSON object")));
        }
        match serde_json::from_value::<Line>(value) {
            Ok(line) => Some(Ok(line)),
            Err(e) => Some(Err(
                self.error(format!("not a discussion, comment or vote: {e}"))
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<Result<Line, FormatError>> {
        ThreadqlReader::new(text.as_bytes()).collect()
    }

    #[test]
    fn lines_after_the_header_are_read_and_bad_ones_stop_the_file() {
        let header = r#"{"format":"threadql","version":1,"exported":"2026-01-01T00:00:00Z"}"#;
        let vote = r#"{"type":"vote","discussion":"d","slug":"s","voter":"u","value":"UP"}"#;
        let ok = read(&format!("{header}\n\n{vote}\n"));
        assert_eq!(ok.len(), 1);
        assert!(matches!(&ok[0], Ok(Line::Vote(v)) if v.voter == "u"));
        let not_object = read(&format!("{header}\n[1,2]\n{vote}\n"));
        assert_eq!(not_object.len(), 1);
        let err = not_object[0]
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(err.contains("line 2: not a JSON object"), "{err}");
        let version = read(r#"{"format":"threadql","version":7,"exported":"x"}"#);
        let err = version[0]
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(err.contains("version 7"), "{err}");
        let other = read("{\"format\":\"csv\"}\n");
        assert!(other[0].is_err());
        assert!(read("")[0].is_err());
    }

    #[test]
    fn times_keep_their_microseconds() {
        let t = Micros(1_700_000_000_123_456);
        assert_eq!(parse_time(&time_text(t)), Some(t));
        assert_eq!(
            time_text(Micros(1_700_000_000_000_000)),
            "2023-11-14T22:13:20Z"
        );
    }
}
