//! What an import reads from a file, whatever its format: discussions, comments and what was
//! skipped, in the order the file gives them (a reply may come before its parent).

use serde::{Deserialize, Serialize};

use crate::domain::{Author, CommentStatus, Micros};

/// Which of a source's identifiers keys a discussion (`--key`); `None` is the format's default
/// (Disqus: the identifier when it is not empty, else the link; WordPress: the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFrom {
    /// Disqus `<id>` (the `disqus_identifier`), WordPress `wp:post_id`.
    Identifier,
    /// The page's `<link>`.
    Link,
}

/// A discussion as a file gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceDiscussion {
    /// The file's id for it (Disqus `dsq:id`, WordPress `wp:post_id`, or the link of an item
    /// without one): what its comments name.
    pub source_id: String,
    /// The key it gets, chosen by [`KeyFrom`]; `None` when the file gives nothing to key it by.
    pub key: Option<String>,
    /// The page's address.
    pub url: Option<String>,
    /// Its title (the page's).
    pub title: String,
    /// When the file says it was created.
    pub created: Option<Micros>,
}

/// A comment as a file gives it, its text converted to Markdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceComment {
    /// The `source_id` of its discussion.
    pub discussion: String,
    /// The file's id for it (Disqus post `dsq:id`, WordPress `wp:comment_id`).
    pub source_id: String,
    /// The `source_id` of the comment it replies to (`None` at the top level).
    pub parent: Option<String>,
    /// When it was posted (UTC).
    pub posted: Micros,
    /// Who posted it: `<source>:<user id>` or `<source>-guest:<hash>` (see [`guest_id`]).
    pub author: Author,
    /// Its text, as Markdown (empty for a deleted comment whose text the file left out).
    pub text: String,
    /// A tombstone: it keeps its place and its replies.
    pub deleted: bool,
    /// Approved (public) or pending (held for a moderator).
    pub status: CommentStatus,
}

/// Why a comment of the file is not imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SkipReason {
    /// Marked as spam.
    Spam,
    /// In the trash.
    Trash,
    /// Its text is longer than an import reads (`bounded::MAX_TEXT_BYTES`): only its start
    /// was read, and it is left out.
    TooLong,
}

impl SkipReason {
    /// Why, as the report says it.
    pub fn describe(self) -> String {
        match self {
            SkipReason::Spam => "marked as spam".to_owned(),
            SkipReason::Trash => "in the trash".to_owned(),
            SkipReason::TooLong => format!(
                "its text is longer than {} bytes: not read past that, left out",
                super::bounded::MAX_TEXT_BYTES
            ),
        }
    }
}

/// One item of a file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A discussion (before or after its comments: the file decides).
    Discussion(SourceDiscussion),
    /// A comment to import.
    Comment(SourceComment),
    /// A comment left out, counted in the report.
    Skipped {
        /// The `source_id` of its discussion.
        discussion: String,
        /// Its own source id.
        source_id: String,
        /// Why.
        reason: SkipReason,
    },
}

/// A file that cannot be read as its format: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{format} file, at byte {position}: {message}")]
pub struct FormatError {
    /// The format's name (`disqus`, `wordpress`, `threadql`).
    pub format: &'static str,
    /// The byte offset in the file where reading stopped.
    pub position: u64,
    /// What is wrong.
    pub message: String,
}

/// The unkeyed id of an author without an account at the source: `<source>-guest:` and the
/// first 16 hex digits of the SHA-256 of the lower-cased e-mail, or of the name when there is no
/// e-mail. It never leaves the import unkeyed: the engine keys it with the server key
/// (`domain::GuestIds`) before anything is written.
pub fn guest_id(source: &str, email: Option<&str>, name: &str) -> String {
    use sha2::{Digest, Sha256};
    let basis = match email.map(str::trim).filter(|e| !e.is_empty()) {
        Some(email) => email.to_lowercase(),
        None => name.to_owned(),
    };
    let digest = Sha256::digest(basis.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{source}-guest:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guests_are_known_by_their_lower_cased_email_or_their_name() {
        let by_mail = guest_id("disqus", Some("Ann@Example.com"), "Ann");
        assert_eq!(
            by_mail,
            guest_id("disqus", Some("ann@example.com"), "Other")
        );
        assert!(by_mail.starts_with("disqus-guest:"));
        assert_eq!(by_mail.len(), "disqus-guest:".len() + 16);
        // sha256("ann@example.com") starts with 71d4f55f72fa128d.
        assert_eq!(by_mail, "disqus-guest:71d4f55f72fa128d");
        assert_ne!(
            guest_id("disqus", None, "Ann"),
            guest_id("disqus", None, "Bob")
        );
        assert_eq!(
            guest_id("wordpress", Some(" "), "Ann"),
            guest_id("wordpress", None, "Ann")
        );
    }
}
