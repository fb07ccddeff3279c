//! Atom feeds (RFC 4287) of public comments, written as XML 1.0: every text and attribute is
//! escaped, and characters XML 1.0 forbids (controls other than tab, newline and carriage
//! return, U+FFFE and U+FFFF) are dropped, so a name or title can never break the document.

use std::fmt::Write as _;

use chrono::SecondsFormat;

use super::{DiscussionId, Micros, Slug};

/// The most entries a feed holds.
pub const FEED_ENTRIES: usize = 50;

/// What the body of a feed is served as.
pub const CONTENT_TYPE: &str = "application/atom+xml; charset=utf-8";

/// The id of a discussion's feed: a URN of the discussion's id, which never changes.
pub fn discussion_feed_id(discussion: &DiscussionId) -> String {
    format!("urn:threadql:discussion:{}", discussion.as_str())
}

/// The id of the feed of recent comments.
pub const RECENT_FEED_ID: &str = "urn:threadql:recent";

/// The id of a comment's entry: a URN of its discussion's id and its slug, the same in every
/// feed it appears in and across moves between layouts.
pub fn entry_id(discussion: &DiscussionId, slug: &Slug) -> String {
    format!(
        "urn:threadql:comment:{}:{}",
        discussion.as_str(),
        slug.as_str()
    )
}

/// The link to a comment on its page: the page's address (without its own fragment) and the
/// fragment `comment-<slug>`.
pub fn comment_link(page: &str, slug: &Slug) -> String {
    let page = page.split('#').next().unwrap_or(page);
    format!("{page}#comment-{}", slug.as_str())
}

/// `key` as one path segment: every byte but ASCII letters, digits, `-`, `.`, `_` and `~`
/// percent-encoded (`/` too, so a key holding `..` segments stays one segment).
pub fn path_segment(key: &str) -> String {
    let mut encoded = String::with_capacity(key.len());
    for byte in key.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                encoded.push(char::from(byte))
            }
            other => {
                let _ = write!(encoded, "%{other:02X}");
            }
        }
    }
    encoded
}

/// One comment in a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its id ([`entry_id`]).
    pub id: String,
    /// Its title, e.g. "Ada on The Engine".
    pub title: String,
    /// Its author's name.
    pub author: String,
    /// When it was published.
    pub published: Micros,
    /// When it last changed: its edit, else its publication.
    pub updated: Micros,
    /// Where it is shown, when its page's address is known.
    pub link: Option<String>,
    /// Its sanitised HTML, carried as escaped text (`type="html"`).
    pub html: String,
}

/// A feed, its entries newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feed {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Where it is served (`rel="self"`): absolute when the server knows its public address,
    /// else a path.
    pub self_link: String,
    /// The page it follows (`rel="alternate"`), when known.
    pub alternate: Option<String>,
    /// When nothing in it is newer: `updated` of its newest entry, else `empty_since`.
    pub empty_since: Micros,
    /// Its entries, newest first.
    pub entries: Vec<Entry>,
}

impl Feed {
    /// When it last changed: the latest `updated` of its entries, else `empty_since`.
    pub fn updated(&self) -> Micros {
        self.entries
            .iter()
            .map(|e| e.updated)
            .max()
            .unwrap_or(self.empty_since)
    }

    /// The document, as XML 1.0 in UTF-8.
    pub fn to_xml(&self) -> String {
        let mut xml = String::with_capacity(1024 + self.entries.len() * 1024);
        xml.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n");
        xml.push_str("<feed xmlns=\"http://www.w3.org/2005/Atom\">\n");
        element(&mut xml, 1, "id", &self.id);
        element(&mut xml, 1, "title", &self.title);
        element(&mut xml, 1, "updated", &date(self.updated()));
        link(&mut xml, 1, "self", "application/atom+xml", &self.self_link);
        if let Some(page) = &self.alternate {
            link(&mut xml, 1, "alternate", "text/html", page);
        }
        element(&mut xml, 1, "generator", "threadql");
        for entry in &self.entries {
            xml.push_str("  <entry>\n");
            element(&mut xml, 2, "id", &entry.id);
            element(&mut xml, 2, "title", &entry.title);
            xml.push_str("    <author>\n");
            element(&mut xml, 3, "name", &entry.author);
            xml.push_str("    </author>\n");
            element(&mut xml, 2, "published", &date(entry.published));
            element(&mut xml, 2, "updated", &date(entry.updated));
            if let Some(href) = &entry.link {
                link(&mut xml, 2, "alternate", "text/html", href);
            }
            xml.push_str("    <content type=\"html\">");
            escape_into(&mut xml, &entry.html);
            xml.push_str("</content>\n");
            xml.push_str("  </entry>\n");
        }
        xml.push_str("</feed>\n");
        xml
    }
}

/// An RFC 3339 date in UTC, to the second.
fn date(at: Micros) -> String {
    at.to_datetime().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `<name>text</name>` on a line of its own, `depth` levels in.
fn element(xml: &mut String, depth: usize, name: &str, text: &str) {
    indent(xml, depth);
    let _ = write!(xml, "<{name}>");
    escape_into(xml, text);
    let _ = writeln!(xml, "</{name}>");
}

/// `<link rel="…" type="…" href="…"/>`.
fn link(xml: &mut String, depth: usize, rel: &str, kind: &str, href: &str) {
    indent(xml, depth);
    let _ = write!(xml, "<link rel=\"{rel}\" type=\"{kind}\" href=\"");
    escape_into(xml, href);
    xml.push_str("\"/>\n");
}

fn indent(xml: &mut String, depth: usize) {
    for _ in 0..depth {
        xml.push_str("  ");
    }
}

/// Whether XML 1.0 allows `c` in a document.
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// `text` escaped for element content and double- or single-quoted attributes, without the
/// characters XML 1.0 forbids. Tab, newline and carriage return are written as references, so
/// an attribute keeps them (a parser would turn them into spaces) and a carriage return
/// survives line-end normalisation.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    escape_into(&mut escaped, text);
    escaped
}

fn escape_into(xml: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => xml.push_str("&amp;"),
            '<' => xml.push_str("&lt;"),
            '>' => xml.push_str("&gt;"),
            '"' => xml.push_str("&quot;"),
            '\'' => xml.push_str("&apos;"),
            '\t' => xml.push_str("&#9;"),
            '\n' => xml.push_str("&#10;"),
            '\r' => xml.push_str("&#13;"),
            c if allowed(c) => xml.push(c),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slug(text: &str) -> Slug {
        Slug::parse(text).unwrap()
    }

    fn id() -> DiscussionId {
        DiscussionId::parse("0123456789abcdef01234567").unwrap()
    }

    #[test]
    fn escaping_drops_what_xml_forbids_and_escapes_the_rest() {
        assert_eq!(
            escape("A & <B> \"q\" 'a'"),
            "A &amp; &lt;B&gt; &quot;q&quot; &apos;a&apos;"
        );
        assert_eq!(escape("a\u{0}b\u{1}c\u{8}d\u{b}e\u{c}f\u{1f}g"), "abcdefg");
        assert_eq!(escape("x\u{FFFE}\u{FFFF}y"), "xy");
        assert_eq!(escape("t\tn\nr\r"), "t&#9;n&#10;r&#13;");
        // Allowed outside ASCII: accents, private use, astral planes, the last BMP character.
        assert_eq!(
            escape("é\u{E000}\u{1F600}\u{FFFD}"),
            "é\u{E000}\u{1F600}\u{FFFD}"
        );
        assert_eq!(escape("]]>"), "]]&gt;");
    }

    #[test]
    fn keys_become_one_path_segment() {
        assert_eq!(path_segment("article-42"), "article-42");
        assert_eq!(path_segment("a/../b c"), "a%2F..%2Fb%20c");
        assert_eq!(path_segment("é?#%"), "%C3%A9%3F%23%25");
    }

    #[test]
    fn ids_and_links_are_built_from_the_discussion_and_slug() {
        let s = slug("abcdef12/34567890");
        assert_eq!(
            entry_id(&id(), &s),
            "urn:threadql:comment:0123456789abcdef01234567:abcdef12/34567890"
        );
        assert_eq!(
            comment_link("https://blog.example/a#top", &s),
            "https://blog.example/a#comment-abcdef12/34567890"
        );
        assert_eq!(
            discussion_feed_id(&id()),
            "urn:threadql:discussion:0123456789abcdef01234567"
        );
    }

    #[test]
    fn a_feed_is_escaped_atom_updated_by_its_newest_entry() {
        let entry = |n: i64, edited: Option<i64>| Entry {
            id: format!("urn:e:{n}"),
            title: "A & <B> on \"T\"\u{1}".into(),
            author: "A & <B>".into(),
            published: Micros(n * 1_000_000),
            updated: Micros(edited.unwrap_or(n) * 1_000_000),
            link: Some("https://x.example/p?a=1&b=2#comment-s".into()),
            html: "<p>x &amp; <script>y</script></p>".into(),
        };
        let feed = Feed {
            id: "urn:f".into(),
            title: "Comments on <T>".into(),
            self_link: "/feeds/discussion/k.atom".into(),
            alternate: None,
            empty_since: Micros(0),
            entries: vec![entry(20, None), entry(10, Some(30))],
        };
        assert_eq!(feed.updated(), Micros(30_000_000));
        let xml = feed.to_xml();
        assert!(
            xml.contains("<updated>1970-01-01T00:00:30Z</updated>"),
            "{xml}"
        );
        assert!(xml.contains("<title>A &amp; &lt;B&gt; on &quot;T&quot;</title>"));
        assert!(xml.contains("<name>A &amp; &lt;B&gt;</name>"));
        assert!(xml.contains("href=\"https://x.example/p?a=1&amp;b=2#comment-s\""));
        assert!(xml.contains(
            "<content type=\"html\">&lt;p&gt;x &amp;amp; &lt;script&gt;y&lt;/script&gt;&lt;/p&gt;</content>"
        ));
        assert!(!xml.contains("<script"));
        let empty = Feed {
            entries: Vec::new(),
            empty_since: Micros(5_000_000),
            ..feed
        };
        assert_eq!(empty.updated(), Micros(5_000_000));
        assert!(!empty.to_xml().contains("<entry>"));
    }
}
