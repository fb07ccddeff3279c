//! Comment text as HTML: CommonMark rendered, then cleaned by an allow-list sanitiser.
//!
//! The text stays the source; the HTML is made on read. Two layers keep markup out:
//! * raw HTML in the text is turned into text before rendering, so a `<b>` shows as typed;
//! * what the renderer makes is then cleaned by `ammonia` against a short allow-list (the tags
//!   CommonMark makes, `href`/`title` on links, `start` on lists, `http`, `https` and `mailto`
//!   URLs only), so no script, style, frame, event attribute, `javascript:` or `data:` URL can
//!   pass even if the renderer had a flaw.
//!
//! Images are shown as links (a comment must not make its readers fetch from other hosts), and
//! every link gets `rel="nofollow ugc noopener"`.

use std::collections::HashSet;
use std::sync::LazyLock;

use ammonia::{Builder, UrlRelative};
use pulldown_cmark::{html, Event, Options, Parser, Tag, TagEnd};

/// The `rel` of every link in a comment.
pub const LINK_REL: &str = "nofollow ugc noopener";

/// The tags CommonMark makes, and nothing else.
const TAGS: [&str; 19] = [
    "p",
    "br",
    "em",
    "strong",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
];

/// The sanitiser, built once.
static CLEANER: LazyLock<Builder<'static>> = LazyLock::new(|| {
    let mut builder = Builder::empty();
    builder
        .tags(TAGS.into_iter().collect())
        .tag_attributes(
            [("a", ["href", "title"].into()), ("ol", ["start"].into())]
                .into_iter()
                .collect(),
        )
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .url_relative(UrlRelative::Deny)
        .link_rel(Some(LINK_REL))
        .clean_content_tags(HashSet::from(["script", "style"]))
        .strip_comments(true);
    builder
});

/// `text` rendered as CommonMark (with ~~strikethrough~~) and sanitised.
pub fn to_html(text: &str) -> String {
    let mut events = Vec::new();
    // An image becomes a link; one without alt text shows its address.
    let mut image_text: Option<(bool, pulldown_cmark::CowStr<'_>)> = None;
    for event in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Html(raw) | Event::InlineHtml(raw) => events.push(Event::Text(raw)),
            Event::Start(Tag::HtmlBlock) => events.push(Event::Start(Tag::Paragraph)),
            Event::End(TagEnd::HtmlBlock) => events.push(Event::End(TagEnd::Paragraph)),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                image_text = Some((false, dest_url.clone()));
                events.push(Event::Start(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                }));
            }
            Event::End(TagEnd::Image) => {
                if let Some((false, url)) = image_text.take() {
                    events.push(Event::Text(url));
                }
                events.push(Event::End(TagEnd::Link));
            }
            other => {
                if let Some((seen, _)) = image_text.as_mut() {
                    *seen = true;
                }
                events.push(other);
            }
        }
    }
    let mut raw = String::with_capacity(text.len() + text.len() / 2);
    html::push_html(&mut raw, events.into_iter());
    CLEANER.clean(&raw).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(text: &str) -> String {
        to_html(text)
    }

    #[test]
    fn formats_commonmark() {
        assert_eq!(
            html("*a* **b** ~~c~~"),
            "<p><em>a</em> <strong>b</strong> <del>c</del></p>\n"
        );
        assert_eq!(html("`x < y`"), "<p><code>x &lt; y</code></p>\n");
        assert_eq!(
            html("- one\n- two"),
            "<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n"
        );
        assert_eq!(
            html("3. c\n4. d"),
            "<ol start=\"3\">\n<li>c</li>\n<li>d</li>\n</ol>\n"
        );
        assert_eq!(
            html("> quoted"),
            "<blockquote>\n<p>quoted</p>\n</blockquote>\n"
        );
        assert_eq!(
            html("```\n<script>alert(1)</script>\n```"),
            "<pre><code>&lt;script&gt;alert(1)&lt;/script&gt;\n</code></pre>\n"
        );
    }

    #[test]
    fn links_are_nofollow_and_images_are_links() {
        assert_eq!(
            html("[site](https://example.org/a?b=1&c=2 \"t\")"),
            "<p><a href=\"https://example.org/a?b=1&amp;c=2\" title=\"t\" rel=\"nofollow ugc noopener\">site</a></p>\n"
        );
        assert_eq!(
            html("![a cat](https://example.org/cat.png)"),
            "<p><a href=\"https://example.org/cat.png\" rel=\"nofollow ugc noopener\">a cat</a></p>\n"
        );
        assert_eq!(
            html("![](https://example.org/cat.png)"),
            "<p><a href=\"https://example.org/cat.png\" rel=\"nofollow ugc noopener\">https://example.org/cat.png</a></p>\n"
        );
        assert_eq!(
            html("<https://example.org>"),
            "<p><a href=\"https://example.org\" rel=\"nofollow ugc noopener\">https://example.org</a></p>\n"
        );
        assert!(html("[mail](mailto:a@example.org)").contains("href=\"mailto:a@example.org\""));
    }

    #[test]
    fn raw_html_shows_as_text() {
        assert_eq!(html("a <b>bold</b>"), "<p>a &lt;b&gt;bold&lt;/b&gt;</p>\n");
        assert_eq!(
            html("<script>alert(1)</script>"),
            "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
        );
    }

    #[test]
    fn nothing_active_passes() {
        let hostile = [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "<iframe src=\"https://evil.example\"></iframe>",
            "<style>body{display:none}</style>",
            "<a href=\"javascript:alert(1)\">x</a>",
            "<svg onload=alert(1)>",
            "<div onclick=\"alert(1)\">x</div>",
            "[x](javascript:alert(1))",
            "[x](JavaScript:alert(1))",
            "[x](  javascript:alert(1))",
            "[x](java\tscript:alert(1))",
            "[x](&#106;avascript:alert(1))",
            "[x](javascript&#58;alert(1))",
            "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
            "![x](data:image/svg+xml,<svg onload=alert(1)>)",
            "![x](javascript:alert(1))",
            "[x](vbscript:msgbox(1))",
            "<javascript:alert(1)>",
            "[x]: javascript:alert(1)\n\n[y][x]",
            "<!-- <script>alert(1)</script> -->",
            "<details open ontoggle=alert(1)>",
            "[x](//evil.example/path)",
            "[x](/relative)",
        ];
        for text in hostile {
            let out = html(text);
            for (tag, attributes) in tags(&out) {
                assert!(
                    TAGS.contains(&tag.as_str()),
                    "{text:?} made <{tag}> in {out:?}"
                );
                for (name, value) in attributes {
                    assert!(
                        ["href", "title", "rel", "start"].contains(&name.as_str()),
                        "{text:?} made {name}= in {out:?}"
                    );
                    if name == "href" {
                        assert!(
                            ["http://", "https://", "mailto:"]
                                .iter()
                                .any(|scheme| value.starts_with(scheme)),
                            "{text:?} made href={value:?}"
                        );
                    }
                }
            }
        }
    }

    /// The tags of well-formed HTML (as the sanitiser writes it), with their attributes.
    fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
        let mut found = Vec::new();
        let mut rest = html;
        while let Some(at) = rest.find('<') {
            let end = rest[at..].find('>').map_or(rest.len(), |e| at + e);
            let inside = rest[at + 1..end].trim_start_matches('/');
            let (name, mut attrs) = inside.split_at(
                inside
                    .find(|c: char| c.is_whitespace())
                    .unwrap_or(inside.len()),
            );
            let mut attributes = Vec::new();
            loop {
                attrs = attrs.trim_start();
                let Some(eq) = attrs.find('=') else { break };
                let key = attrs[..eq].to_owned();
                let value_start = eq + 2;
                let value_end = value_start + attrs[value_start..].find('"').unwrap_or(0);
                attributes.push((key, attrs[value_start..value_end].to_owned()));
                attrs = &attrs[value_end + 1..];
            }
            found.push((name.to_owned(), attributes));
            rest = &rest[end.min(rest.len())..];
            rest = rest.get(1..).unwrap_or("");
        }
        found
    }

    #[test]
    fn every_link_gets_the_rel() {
        let out = html("[a](https://a.example) [b](http://b.example) <https://c.example>");
        assert_eq!(out.matches("<a ").count(), 3);
        assert_eq!(out.matches("rel=\"nofollow ugc noopener\"").count(), 3);
    }
}
