//! What one notification message says: its items, subject, Message-ID and the References that
//! thread it per discussion in mail clients. The two bodies are written by `body`.

use super::body;
use super::clean::{one_line, shortened, title_line};
use super::item::{by_discussion, Discussion, Item, ItemKind};

/// The longest subject, in characters (a title in it is shortened to fit).
pub const MAX_SUBJECT_CHARS: usize = 150;

/// The longest name of a person in a subject, in characters.
const MAX_NAME_CHARS: usize = 40;

/// One composed message, ready for [`super::Mailer::send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The recipient's address.
    pub to: String,
    /// The subject: one line, no control characters, at most [`MAX_SUBJECT_CHARS`].
    pub subject: String,
    /// The text/plain part.
    pub text: String,
    /// The text/html part.
    pub html: String,
    /// `<random@host>`, unique per message.
    pub message_id: String,
    /// `<discussion-…@host>`, one per discussion in the message, in the order they come.
    pub references: Vec<String>,
    /// The one-click unsubscribe URL (`{PUBLIC_URL}/notifications/unsubscribe?token=…`).
    pub unsubscribe_url: String,
}

/// Composes one message for `to` from `items` (a digest when there are several). `host` is the
/// public URL's host, used in the Message-ID and References; `unsubscribe_url` goes into the
/// List-Unsubscribe header and each body's footer. With no items the message says so.
pub fn compose(to: &str, items: &[Item], host: &str, unsubscribe_url: &str) -> Outgoing {
    let host = id_host(host);
    let discussions = by_discussion(items);
    Outgoing {
        to: to.to_owned(),
        subject: subject(items, &discussions),
        text: body::text(&discussions, unsubscribe_url),
        html: body::html(&discussions, unsubscribe_url),
        message_id: format!("<{}@{host}>", random_hex()),
        references: discussions
            .iter()
            .map(|d| format!("<{}@{host}>", discussion_local_part(d.id)))
            .collect(),
        unsubscribe_url: unsubscribe_url.to_owned(),
    }
}

/// The subject: what happened for one item, how many notifications in which discussion for
/// several.
fn subject(items: &[Item], discussions: &[Discussion<'_>]) -> String {
    let (Some(first), Some(discussion)) = (items.first(), discussions.first()) else {
        return "No new notifications".to_owned();
    };
    let (before, after) = match (items.len(), discussions.len()) {
        (1, _) => single_subject(first),
        (n, 1) => (format!("{n} new notifications in “"), "”".to_owned()),
        (n, d) => {
            let others = match d - 1 {
                1 => "1 other discussion".to_owned(),
                o => format!("{o} other discussions"),
            };
            (
                format!("{n} new notifications in “"),
                format!("” and {others}"),
            )
        }
    };
    let room = MAX_SUBJECT_CHARS.saturating_sub(before.chars().count() + after.chars().count());
    let title = shortened(&title_line(discussion.title), room.max(1));
    shortened(&format!("{before}{title}{after}"), MAX_SUBJECT_CHARS)
}

/// The subject around the title for one item: the text before it and the text after it.
fn single_subject(item: &Item) -> (String, String) {
    let actor = item
        .actor_name
        .as_deref()
        .map(|name| shortened(&one_line(name), MAX_NAME_CHARS))
        .filter(|name| !name.is_empty());
    let before = match (item.kind, actor, item.approved) {
        (ItemKind::Reply, Some(actor), _) => format!("{actor} replied to you in “"),
        (ItemKind::Reply, None, _) => "New reply to you in “".to_owned(),
        (ItemKind::Moderation, _, _) => "Your comment in “".to_owned(),
        (ItemKind::Followed, _, _) => "New comment in “".to_owned(),
    };
    let after = match (item.kind, item.approved) {
        (ItemKind::Moderation, Some(true)) => "” was approved",
        (ItemKind::Moderation, Some(false)) => "” was rejected",
        (ItemKind::Moderation, None) => "” was moderated",
        (ItemKind::Reply | ItemKind::Followed, _) => "”",
    };
    (before, after.to_owned())
}

/// The host for ids: its letters, digits, dots and hyphens (`localhost` when none are left).
fn id_host(host: &str) -> String {
    let kept: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        .collect();
    let kept = kept.trim_matches('.');
    if kept.is_empty() {
        "localhost".to_owned()
    } else {
        kept.to_owned()
    }
}

/// The part before `@` of a discussion's id in References: `discussion-<id>` when the id is
/// made of letters, digits, `-` and `_` (as discussion ids are), else `discussion.<hash>`.
fn discussion_local_part(id: &str) -> String {
    let plain = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if plain {
        return format!("discussion-{id}");
    }
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("discussion.{hex}")
}

/// 16 random bytes as hex, for a Message-ID.
fn random_hex() -> String {
    use rand::RngCore as _;
    let mut bytes = [0_u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
