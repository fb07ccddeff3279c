//! What ties a discussion to the host's page: its key (the page's own identifier) and the
//! page's URL, with their rules, its title, and what a new discussion is made of.

use std::fmt;

use unicode_normalization::UnicodeNormalization as _;

use super::{text, DiscussionId, DomainError, Layout, Micros};

/// A validated discussion title: 1 to 300 characters, not blank, one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscussionTitle(String);

impl DiscussionTitle {
    /// Longest title accepted.
    pub const MAX_CHARS: usize = 300;

    /// Validates a client-supplied title (surrounding white space is trimmed). It follows the
    /// text rules of [`CommentText`](super::CommentText), on one line: blank titles (only white
    /// space or invisible characters), titles over [`Self::MAX_CHARS`] characters and control
    /// characters (newline and tab included) are refused; bidirectional controls left open are
    /// closed at its end.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let title = raw.trim();
        if text::is_blank(title) {
            return Err(DomainError::bad_input(
                "title must not be empty (white space and invisible characters alone are empty)",
            ));
        }
        if title.chars().count() > Self::MAX_CHARS {
            return Err(DomainError::bad_input(format!(
                "title is longer than {} characters",
                Self::MAX_CHARS
            )));
        }
        text::check_characters(title, "title", &[])?;
        let mut title = title.to_owned();
        text::close_bidi(&mut title);
        Ok(Self(title))
    }

    /// The title.
    pub fn into_inner(self) -> String {
        self.0
    }

    /// The title as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A discussion's key: the host page's own identifier for it (an article id, a path, a URL).
/// 1 to 512 characters in Unicode's composed form (NFC), without control characters or
/// invisible ones other than the space; compared exactly once composed (no trimming, no case
/// folding), and unique among discussions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiscussionKey(String);

impl DiscussionKey {
    /// Longest key accepted, in characters.
    pub const MAX_CHARS: usize = 512;

    /// Validates a client-supplied key, composed (NFC): `"é"` written as `e` and a combining
    /// accent is the key `"é"`. It is kept otherwise as sent: `"a"` and `"a "` are two keys.
    /// Zero-width and other invisible characters (see [`text::is_invisible`]) are refused, so
    /// two keys that look alike are one key.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let key: String = raw.nfc().collect();
        let chars = key.chars().count();
        if chars == 0 {
            return Err(DomainError::bad_input(
                "a discussion key must not be empty (1 to 512 characters)",
            ));
        }
        if chars > Self::MAX_CHARS {
            return Err(DomainError::bad_input(format!(
                "a discussion key has at most {} characters (this one has {chars})",
                Self::MAX_CHARS
            )));
        }
        if let Some(c) = key.chars().find(|c| c.is_control()) {
            return Err(DomainError::bad_input(format!(
                "a discussion key must not contain control characters (found U+{:04X})",
                u32::from(c)
            )));
        }
        if let Some(c) = key.chars().find(|&c| c != ' ' && text::is_invisible(c)) {
            return Err(DomainError::bad_input(format!(
                "a discussion key must not contain invisible characters other than the space \
                 (found U+{:04X})",
                u32::from(c)
            )));
        }
        Ok(Self(key))
    }

    /// A key as stored, composed (NFC) and not checked again: keys stored before the rules
    /// above (a decomposed or invisible character) still read, and compare as clients send them.
    pub fn stored(raw: &str) -> Self {
        Self(raw.nfc().collect())
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key in its decomposed form (NFD), when that differs: how a key sent decomposed
    /// before keys were composed may be stored.
    pub fn decomposed(&self) -> Option<String> {
        let decomposed: String = self.0.nfd().collect();
        (decomposed != self.0).then_some(decomposed)
    }
}

impl fmt::Display for DiscussionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The address of the page a discussion belongs to: an absolute `http` or `https` URL with a
/// host and no credentials, at most 2 048 characters, without white space or control
/// characters. It is kept as the WHATWG URL parser writes it (lowercase scheme and host,
/// default port dropped, at least `/` as the path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscussionUrl(String);

impl DiscussionUrl {
    /// Longest URL accepted, in characters (before and after it is normalised).
    pub const MAX_CHARS: usize = 2_048;

    /// Validates a client-supplied URL.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let bad = |why: &str| {
            DomainError::bad_input(format!(
                "url must be an absolute http or https URL (e.g. https://example.com/article): {why}"
            ))
        };
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(bad(&format!(
                "it is longer than {} characters",
                Self::MAX_CHARS
            )));
        }
        if raw.is_empty() {
            return Err(bad("it is empty"));
        }
        if let Some(c) = raw.chars().find(|c| c.is_control() || c.is_whitespace()) {
            // The parser would drop tabs and newlines silently and encode spaces.
            return Err(bad(&format!(
                "it contains white space or a control character (U+{:04X})",
                u32::from(c)
            )));
        }
        let parsed = url::Url::parse(raw).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad(&format!("the scheme is {:?}", parsed.scheme())));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad("it has no host"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad("it must not carry a user name or password"));
        }
        let url = String::from(parsed);
        if url.chars().count() > Self::MAX_CHARS {
            return Err(bad(&format!(
                "it is longer than {} characters once written out",
                Self::MAX_CHARS
            )));
        }
        Ok(Self(url))
    }

    /// The URL as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The URL.
    pub fn into_inner(self) -> String {
        self.0
    }
}

/// A discussion to create.
#[derive(Debug, Clone)]
pub struct NewDiscussion {
    /// Its title.
    pub title: DiscussionTitle,
    /// How its comments are stored.
    pub layout: Layout,
    /// The host page's identifier for it, if any (unique).
    pub key: Option<DiscussionKey>,
    /// The page's address, if known.
    pub url: Option<DiscussionUrl>,
    /// The id to give it (an import keeping a discussion's id); a fresh one when `None`.
    pub id: Option<DiscussionId>,
    /// When it was created (an import keeping the original time); now when `None`.
    pub created: Option<Micros>,
}

impl NewDiscussion {
    /// A discussion with a title and a layout, without a key or a URL.
    pub fn new(title: DiscussionTitle, layout: Layout) -> Self {
        Self {
            title,
            layout,
            key: None,
            url: None,
            id: None,
            created: None,
        }
    }
}

/// A moderator's correction of a discussion's title and page address (its key stays).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiscussionUpdate {
    /// Its new title, if it changes.
    pub title: Option<DiscussionTitle>,
    /// Its new address, if it changes.
    pub url: Option<DiscussionUrl>,
}

impl DiscussionUpdate {
    /// Whether it names nothing to change.
    pub fn is_empty(&self) -> bool {
        self.title.is_none() && self.url.is_none()
    }

    /// What of it differs from a discussion with `title` and `url`: `None` when nothing does.
    pub fn against(&self, title: &str, url: Option<&str>) -> Option<DiscussionUpdate> {
        let changed = DiscussionUpdate {
            title: self.title.clone().filter(|new| new.as_str() != title),
            url: self.url.clone().filter(|new| Some(new.as_str()) != url),
        };
        (!changed.is_empty()).then_some(changed)
    }

    /// The names of the fields it changes, as the API names them (`title, url`).
    pub fn fields(&self) -> String {
        let mut fields: Vec<&str> = Vec::new();
        if self.title.is_some() {
            fields.push("title");
        }
        if self.url.is_some() {
            fields.push("url");
        }
        fields.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_to_512_characters_without_controls_and_kept_exactly() {
        let key = |raw: &str| DiscussionKey::parse(raw).map(|k| k.as_str().to_owned());
        for good in [
            "a",
            " padded ",
            "/blog/2024/01/hello-world?x=1#c",
            "https://example.com/a b",
            "文章-42",
            "🦀",
            "\u{e9}t\u{e9}",
        ] {
            assert_eq!(key(good), Ok(good.to_owned()), "{good:?}");
        }
        assert!(key(&"é".repeat(512)).is_ok());
        assert!(key(&"🦀".repeat(512)).is_ok());
        // Composed: a decomposed key is its composed form, and 512 composed characters fit.
        assert_eq!(key("e\u{301}t\u{e9}"), Ok("\u{e9}t\u{e9}".to_owned()));
        assert!(key(&"e\u{301}".repeat(512)).is_ok());
        for bad in [
            String::new(),
            "\u{200B}".into(),
            "page\u{200B}".into(),
            "a\u{200D}b".into(),
            "\u{FEFF}page".into(),
            "page\u{2060}".into(),
            "rtl\u{202E}".into(),
            "\u{E0041}".into(),
            "no\u{A0}break".into(),
            "\u{3000}".into(),
            "\u{3164}".into(),
            "x".repeat(513),
            "🦀".repeat(513),
            "nul\0".into(),
            "line\nbreak".into(),
            "tab\t".into(),
            "cr\r".into(),
            "del\u{7F}".into(),
            "next line\u{85}".into(),
            "\u{9F}".into(),
            "\u{1B}[2J".into(),
        ] {
            assert!(
                matches!(key(&bad), Err(DomainError::BadInput(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_update_keeps_only_what_changes() {
        let title = |t: &str| Some(DiscussionTitle::parse(t).unwrap());
        let url = |u: &str| Some(DiscussionUrl::parse(u).unwrap());
        let update = DiscussionUpdate {
            title: title("New"),
            url: url("https://a.example/x"),
        };
        assert_eq!(update.fields(), "title, url");
        assert_eq!(update.against("New", Some("https://a.example/x")), None);
        let changed = update.against("Old", Some("https://a.example/x")).unwrap();
        assert_eq!(
            (changed.title.is_some(), changed.url.is_none()),
            (true, true)
        );
        assert_eq!(changed.fields(), "title");
        let added = update.against("New", None).unwrap();
        assert_eq!(added.fields(), "url");
        assert!(DiscussionUpdate::default().is_empty());
    }

    #[test]
    fn stored_keys_read_composed_and_unchecked() {
        assert_eq!(DiscussionKey::stored("e\u{301}").as_str(), "\u{e9}");
        assert_eq!(DiscussionKey::stored("a\u{200B}").as_str(), "a\u{200B}");
        let key = DiscussionKey::parse("caf\u{e9}").unwrap();
        assert_eq!(key.decomposed().as_deref(), Some("cafe\u{301}"));
        assert_eq!(DiscussionKey::parse("plain").unwrap().decomposed(), None);
    }

    #[test]
    fn urls_are_absolute_http_and_written_out_by_the_parser() {
        let url = |raw: &str| DiscussionUrl::parse(raw).map(DiscussionUrl::into_inner);
        assert_eq!(
            url("https://example.com/a?b=c#d"),
            Ok("https://example.com/a?b=c#d".into())
        );
        assert_eq!(
            url("HTTP://Example.COM:80"),
            Ok("http://example.com/".into())
        );
        assert_eq!(
            url("https://[::1]:8443/x"),
            Ok("https://[::1]:8443/x".into())
        );
        assert_eq!(
            url("https://bücher.example/é"),
            Ok("https://xn--bcher-kva.example/%C3%A9".into())
        );
        let long = format!("https://example.com/{}", "a".repeat(2_048 - 20));
        assert_eq!(url(&long), Ok(long.clone()));
        for bad in [
            "".to_owned(),
            "example.com/article".into(),
            "/relative/path".into(),
            "//example.com/x".into(),
            "ftp://example.com/file".into(),
            "javascript:alert(1)".into(),
            "data:text/html,<script>alert(1)</script>".into(),
            "mailto:someone@example.com".into(),
            "file:///etc/passwd".into(),
            "http://".into(),
            "https://user:secret@example.com/".into(),
            "https://user@example.com/".into(),
            "https://exa mple.com/".into(),
            " https://example.com/".into(),
            "https://example.com/\n".into(),
            "https://example.com/\t".into(),
            "https://example.com/\0".into(),
            "http://[::1".into(),
            "http://example.com:99999/".into(),
            format!("{long}a"),
            // Grows past the limit when the parser percent-encodes it.
            format!("https://example.com/{}", "é".repeat(1_000)),
        ] {
            assert!(
                matches!(url(&bad), Err(DomainError::BadInput(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn titles_follow_the_text_rules_on_one_line() {
        let title = |raw: &str| DiscussionTitle::parse(raw).map(DiscussionTitle::into_inner);
        assert_eq!(title("  A title  "), Ok("A title".into()));
        for bad in [
            "",
            "   ",
            "nul\0",
            "\u{1b}[2J",
            "two\nlines",
            "a\tb",
            "del\u{7F}",
            "\u{200B}",
            "\u{200B}\u{FEFF}\u{3164}\u{2800}",
        ] {
            assert!(
                matches!(title(bad), Err(DomainError::BadInput(_))),
                "{bad:?}"
            );
        }
        assert!(title(&"é".repeat(DiscussionTitle::MAX_CHARS)).is_ok());
        assert!(title(&"é".repeat(DiscussionTitle::MAX_CHARS + 1)).is_err());
        assert!(title("👩\u{200D}💻 עברית\u{200F}").is_ok());
        assert_eq!(
            title("rtl\u{202E}gpj.exe"),
            Ok("rtl\u{202E}gpj.exe\u{202C}".into())
        );
        assert_eq!(
            title("\u{2067}isolate\u{2069}"),
            Ok("\u{2067}isolate\u{2069}".into())
        );
    }
}
