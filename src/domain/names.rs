//! Who a signed-in user is, as tokens and imports name them: the rule for display names, the
//! names nobody may take (the placeholders the API shows, and those moderators reserve), and
//! the one check every identity passes ([`check_identity`]).

use unicode_normalization::UnicodeNormalization as _;

use super::moderation::{Reason, UserId};
use super::text::{self, is_invisible};
use super::{Author, DomainError, Micros};

/// Names the API itself shows in place of an author (`Comment.author` of a deleted or hidden
/// comment): nobody may carry them.
pub const PLACEHOLDER_NAMES: [&str; 2] = ["[deleted]", "[hidden]"];

/// A display name: 1 to [`DisplayName::MAX_CHARS`] characters as given (nothing trimmed), at
/// least one visible, no control characters, and no bidirectional embedding, override or
/// isolate controls (U+202A–U+202E, U+2066–U+2069): a name is shown inline next to other text,
/// where such a control would reorder what follows it, so they are refused rather than closed.
/// The marks U+200E and U+200F, which reorder nothing after them, are allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayName(String);

impl DisplayName {
    /// Longest display name accepted, in characters.
    pub const MAX_CHARS: usize = 64;

    /// Validates a display name (a token's `name`, an imported author's, a reserved one).
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        if text::is_blank(raw) {
            return Err(DomainError::bad_input(format!(
                "a name must have a visible character (1 to {} characters)",
                Self::MAX_CHARS
            )));
        }
        let chars = raw.chars().count();
        if chars > Self::MAX_CHARS {
            return Err(DomainError::bad_input(format!(
                "a name has at most {} characters (this one has {chars})",
                Self::MAX_CHARS
            )));
        }
        text::check_characters(raw, "a name", &[])?;
        if let Some(c) = raw.chars().find(|&c| is_bidi_control(c)) {
            return Err(DomainError::bad_input(format!(
                "a name must not contain bidirectional controls (found U+{:04X})",
                u32::from(c)
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    /// A name read from storage (written by [`DisplayName::parse`]).
    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as reservations compare it (see [`name_key`]).
    pub fn key(&self) -> String {
        name_key(&self.0)
    }
}

/// Whether a character opens or closes a bidirectional embedding, override or isolate.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A name as reservations compare it: invisible characters (white space included) dropped,
/// NFKC-normalised, case folded (lower, upper, lower: "ß" and "SS" agree), normalised again.
/// `[Deleted]`, `[ deleted ]`, `［deleted］` and `[del\u{200B}eted]` all give `[deleted]`.
pub fn name_key(name: &str) -> String {
    let visible: String = name.chars().filter(|&c| !is_invisible(c)).nfkc().collect();
    visible
        .to_lowercase()
        .to_uppercase()
        .to_lowercase()
        .nfkc()
        .filter(|&c| !is_invisible(c))
        .collect()
}

/// A name a moderator reserved: no token may carry it (nor any name with the same
/// [`name_key`]) until it is released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedName {
    /// The name as the moderator wrote it.
    pub name: DisplayName,
    /// Why, as the moderator wrote it.
    pub reason: Option<Reason>,
    /// The moderator who reserved it.
    pub by: Author,
    /// When.
    pub at: Micros,
}

/// The refusal of an identity whose name is reserved (`name` as the token has it).
pub fn reserved_refusal(name: &str) -> String {
    format!(
        "the token's `name` {name:?} is reserved on this service: the site must give this user \
         another name"
    )
}

/// Checks an identity as a token or an import gives it: its id is one `banUser` accepts
/// ([`UserId::parse`]) and its name a [`DisplayName`], not a placeholder the API shows. The
/// message says which claim is wrong and why. Names moderators reserve are checked apart,
/// against the service's copy of them.
pub fn check_identity(id: &str, name: &str) -> Result<(UserId, DisplayName), DomainError> {
    let user =
        UserId::parse(id).map_err(|e| DomainError::bad_input(format!("user id refused: {e}")))?;
    let shown = DisplayName::parse(name)
        .map_err(|e| DomainError::bad_input(format!("name refused: {e}")))?;
    let key = shown.key();
    if PLACEHOLDER_NAMES.iter().any(|p| name_key(p) == key) {
        return Err(DomainError::bad_input(format!(
            "name refused: {name:?} is what the API shows in place of a hidden author"
        )));
    }
    Ok((user, shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_visible_short_and_free_of_controls() {
        for good in [
            "Ann",
            "Ann Smith",
            "山田",
            "שלום",
            "a\u{200F}b",
            &"x".repeat(64),
        ] {
            assert!(DisplayName::parse(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "   ",
            "\u{200B}",
            "x\ny",
            "tab\there",
            "\u{1b}[31mred",
            "evil\u{202E}gnp.exe",
            "\u{2066}iso\u{2069}",
            &"x".repeat(65),
        ] {
            assert!(DisplayName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn placeholders_are_refused_however_written() {
        for placeholder in [
            "[deleted]",
            "[Hidden]",
            "[DELETED]",
            "[ deleted ]",
            "［deleted］",
            "[del\u{200B}eted]",
            "[ᴴidden]",
        ] {
            let refused = check_identity("u1", placeholder);
            assert!(
                matches!(refused, Err(DomainError::BadInput(_))),
                "{placeholder:?}"
            );
        }
        assert!(check_identity("u1", "deleted").is_ok());
    }

    #[test]
    fn the_user_id_follows_the_ban_rule() {
        for bad in [&"x".repeat(300), "\u{200B}", "x\ny", ""] {
            let refused = check_identity(bad, "Ann");
            assert!(
                matches!(&refused, Err(DomainError::BadInput(m)) if m.contains("user id")),
                "{bad:?}"
            );
        }
        assert!(check_identity(&"x".repeat(256), "Ann").is_ok());
    }

    #[test]
    fn keys_fold_case_width_and_invisible_characters() {
        assert_eq!(name_key("Straße"), name_key("STRASSE"));
        assert_eq!(name_key("Ａｄｍｉｎ"), name_key("admin"));
        assert_eq!(name_key("ad\u{AD}min"), "admin");
        assert_ne!(name_key("admin"), name_key("admins"));
    }
}
