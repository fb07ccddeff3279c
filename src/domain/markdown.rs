//! Comment text as HTML: CommonMark rendered, then cleaned by an allow-list sanitiser; and the
//! bounds that keep that cheap: how deep block quotes and lists nest, and how large the HTML may
//! be.
//!
//! The HTML is made when a text is written and stored with it. Two layers keep markup out:
//! * raw HTML in the text is turned into text before rendering, so a `<b>` shows as typed;
//! * what the renderer makes is then cleaned by `ammonia` against a short allow-list (the tags
//!   CommonMark makes, `href`/`title` on links, `start` on lists, `http`, `https` and `mailto`
//!   URLs only), so no script, style, frame, event attribute, `javascript:` or `data:` URL can
//!   pass even if the renderer had a flaw.
//!
//! Images are shown as links (a comment must not make its readers fetch from other hosts), and
//! every link gets `rel="nofollow ugc noopener"`.
//!
//! Nesting is what makes rendering expensive: 10 000 `>` make 10 000 nested block quotes, 270 KB
//! of HTML that the sanitiser's parser takes long to walk. Texts are bounded in depth
//! ([`depth`]; [`flatten`] brings a deeper text within a bound) and the stored HTML in size
//! ([`html_bound`]; past it, [`render`] stores the text as escaped plain paragraphs).

use std::collections::HashSet;
use std::sync::LazyLock;

use ammonia::{Builder, UrlRelative};
use pulldown_cmark::{html, Event, Options, Parser, Tag, TagEnd};

/// The Markdown the renderer reads: CommonMark with ~~strikethrough~~.
fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH)
}

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

/// `text` rendered as CommonMark (with ~~strikethrough~~) and sanitised, whatever its size: what
/// [`render`] stores when it is within the bounds.
fn to_html(text: &str) -> String {
    let mut events = Vec::new();
    // An image becomes a link; one without alt text shows its address.
    let mut image_text: Option<(bool, pulldown_cmark::CowStr<'_>)> = None;
    for event in parser(text) {
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

/// The most bytes of HTML stored for `text`: 8 per character of it, and 1 KiB. Escaped plain
/// paragraphs ([`plain`]) always fit: at most 6 bytes a character (`&quot;`) and 8 bytes for
/// the first paragraph's tags.
pub fn html_bound(text: &str) -> usize {
    text.chars().count().saturating_mul(8).saturating_add(1024)
}

/// The HTML stored with `text`: rendered as CommonMark and sanitised (after [`flatten`] when it
/// nests deeper than `max_depth`, as a text stored before the nesting rule may), or, when that
/// HTML would be larger than [`html_bound`] (`- - - x` lines, a short reference link used many
/// times), the text as escaped plain paragraphs, so no comment's HTML is ever more than 8 times
/// its length and a kilobyte. A pure function of its arguments; it takes milliseconds for a
/// long text, so servers call it off their runtime's threads.
pub fn render(text: &str, max_depth: usize) -> String {
    let flat = flatten(text, max_depth);
    let html = to_html(flat.as_deref().unwrap_or(text));
    if html.len() <= html_bound(text) {
        html
    } else {
        plain(text)
    }
}

/// `text` as escaped plain paragraphs: blank lines part paragraphs, other line ends become
/// `<br>`; `&`, `<`, `>`, `"` and `'` are escaped, so nothing in it is markup.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4 + 16);
    let mut open = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            if open {
                out.push_str("</p>\n");
                open = false;
            }
            continue;
        }
        out.push_str(if open { "<br>\n" } else { "<p>" });
        open = true;
        for c in line.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str("&quot;"),
                '\'' => out.push_str("&#39;"),
                c => out.push(c),
            }
        }
    }
    if open {
        out.push_str("</p>\n");
    }
    out
}

/// How deep block quotes and lists nest in `text`, together, as the renderer reads it (from
/// the parser's events, not by counting characters): 0 without either, 1 for a list, 2 for a
/// list in a block quote or a list in a list item.
pub fn depth(text: &str) -> usize {
    let mut open = 0_usize;
    let mut deepest = 0;
    for event in parser(text) {
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::List(_)) => {
                open += 1;
                deepest = deepest.max(open);
            }
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_)) => {
                open = open.saturating_sub(1);
            }
            _ => {}
        }
    }
    deepest
}

/// Rounds of [`flatten`] that escape the markers of the levels past the bound; a text still
/// too deep after them (a long block quote past the bound, each of its lines a round) has the
/// first marker of every line escaped instead.
const FLATTEN_ROUNDS: usize = 16;

/// `text` brought within `max_depth` levels of block quotes and lists (see [`depth`]), or
/// `None` when it is within already. The first marker of each level past the bound (`>`, `-`,
/// `+`, `*`, the `.` or `)` of `1.`) is escaped with a backslash, so that level and those
/// inside it show as typed, in the paragraph of the level around them; nothing is removed.
/// Each round escapes the outermost levels past the bound; when `FLATTEN_ROUNDS` do not
/// suffice, the first marker of every line is escaped, which leaves no block quote or list at
/// all. What the text says stays; only its nesting goes.
pub fn flatten(text: &str, max_depth: usize) -> Option<String> {
    let mut flat: Option<String> = None;
    for _ in 0..FLATTEN_ROUNDS {
        let current = flat.as_deref().unwrap_or(text);
        let starts = levels_past(current, max_depth);
        if starts.is_empty() {
            return flat;
        }
        let mut next = current.to_owned();
        // From the end, so that the offsets before each insertion stay true.
        let mut escaped = false;
        for &at in starts.iter().rev() {
            escaped |= escape_marker(&mut next, at);
        }
        if !escaped {
            break;
        }
        flat = Some(next);
    }
    let current = flat.as_deref().unwrap_or(text);
    if depth(current) <= max_depth {
        return flat;
    }
    let mut out = String::with_capacity(current.len() + current.len() / 8);
    for line in current.split_inclusive('\n') {
        let mut line = line.to_owned();
        escape_marker(&mut line, 0);
        out.push_str(&line);
    }
    Some(out)
}

/// Where the block quotes and lists that open `max_depth` levels deep start in `text`: the
/// outermost levels past the bound.
fn levels_past(text: &str, max_depth: usize) -> Vec<usize> {
    let mut open = 0_usize;
    let mut starts = Vec::new();
    for (event, range) in parser(text).into_offset_iter() {
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::List(_)) => {
                if open == max_depth {
                    starts.push(range.start);
                }
                open += 1;
            }
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_)) => {
                open = open.saturating_sub(1);
            }
            _ => {}
        }
    }
    starts
}

/// Escapes the block quote or list marker at `at` in `text` (after spaces and tabs): a
/// backslash before `>`, `-`, `+` or `*`, or before the `.` or `)` after an ordered list's
/// number. Whether there was one.
fn escape_marker(text: &mut String, at: usize) -> bool {
    let Some(rest) = text.get(at..) else {
        return false;
    };
    let at = at + (rest.len() - rest.trim_start_matches([' ', '\t']).len());
    let bytes = text.as_bytes();
    let place = match bytes.get(at) {
        Some(b'>' | b'-' | b'+' | b'*') => Some(at),
        Some(b'0'..=b'9') => {
            let digits = bytes[at..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            matches!(bytes.get(at + digits), Some(b'.' | b')')).then_some(at + digits)
        }
        _ => None,
    };
    match place {
        Some(place) => {
            text.insert(place, '\\');
            true
        }
        None => false,
    }
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
    fn depth_counts_block_quotes_and_lists_together() {
        for (text, want) in [
            ("plain *text*", 0),
            ("- a", 1),
            ("> - a", 2),
            ("- a\n  - b\n    - c", 3),
            ("1. a\n   > b", 2),
            ("- - - x", 3),
            ("- - -", 0),
            ("```\n> > > not a quote\n```", 0),
            ("    > > indented code", 0),
            ("\\> escaped", 0),
        ] {
            assert_eq!(depth(text), want, "{text:?}");
        }
        assert_eq!(depth(&">".repeat(10_000)), 10_000);
    }

    /// A small deterministic generator of Markdown made of nesting markers.
    fn texts() -> Vec<String> {
        const PIECES: [&str; 12] = [
            ">", "> ", "- ", "* ", "+ ", "1. ", "2) ", "  ", "    ", "x", "\n", "\n\n",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        (0..400)
            .map(|_| {
                let mut text = String::new();
                for _ in 0..120 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    text.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
                }
                text
            })
            .collect()
    }

    #[test]
    fn flattening_brings_any_text_within_the_bound_and_keeps_what_it_says() {
        let unescaped = |t: &str| t.replace('\\', "");
        let mut samples = texts();
        samples.push(">".repeat(10_000));
        samples.push("- ".repeat(40) + "x");
        samples.push("- - - - - - - - - - - - - - - - - - - - x\n".repeat(300));
        // A block quote past the bound on 40 lines: more than the rounds, every line escaped.
        samples.push("> > > > quoted\n".repeat(40));
        samples.push("- a\n  - b\n    - c\n      - d\n        1. e\n           > f".into());
        for max in [0, 1, 2, 3, 16] {
            for text in &samples {
                match flatten(text, max) {
                    None => assert!(depth(text) <= max, "{max} {text:?}"),
                    Some(flat) => {
                        assert!(depth(text) > max, "{max} {text:?}");
                        assert!(depth(&flat) <= max, "{max} {text:?} -> {flat:?}");
                        assert_eq!(unescaped(&flat), unescaped(text), "{max}");
                    }
                }
            }
        }
        // The levels within the bound stay.
        let deep = ">".repeat(10_000) + " x";
        let flat = flatten(&deep, 16).unwrap_or_default();
        assert_eq!(depth(&flat), 16);
        assert!(
            flat.starts_with(&format!("{}\\>", ">".repeat(16))),
            "{flat:.40}"
        );
        assert_eq!(flat.len(), deep.len() + 1);
    }

    #[test]
    fn stored_html_stays_within_its_bound() {
        // Within 16 levels, 15 nested lists a line make about 10 bytes of HTML a character.
        let lists = "- - - - - - - - - - - - - - - x\n".repeat(300);
        assert_eq!(depth(&lists), 15);
        assert!(to_html(&lists).len() > html_bound(&lists));
        assert_eq!(render(&lists, 16), plain(&lists));
        // A short reference to a long address, many times.
        let refs = format!(
            "[a]: https://example.org/{}\n\n{}",
            "p".repeat(900),
            "[a] ".repeat(2_000)
        );
        assert!(to_html(&refs).len() > html_bound(&refs));
        assert_eq!(render(&refs, 16), plain(&refs));
        // Deeper than the bound (stored before the rule): rendered flattened.
        let quotes = ">".repeat(10_000) + " x";
        let html = render(&quotes, 16);
        assert!(html.len() <= html_bound(&quotes), "{}", html.len());
        assert_eq!(html.matches("<blockquote>").count(), 16);
        for text in texts().iter().chain([&lists, &refs, &quotes]) {
            assert!(render(text, 16).len() <= html_bound(text));
            assert!(plain(text).len() <= html_bound(text));
        }
        // Ordinary text renders as it always did.
        assert_eq!(render("*a* > b", 16), to_html("*a* > b"));
    }

    #[test]
    fn plain_paragraphs_hold_no_markup() {
        assert_eq!(plain("a\nb\n\n\nc"), "<p>a<br>\nb</p>\n<p>c</p>\n");
        let out = plain("<script>alert(1)</script> & \"x\" 'y'\n\n<img src=x onerror=alert(1)>");
        assert_eq!(
            out,
            "<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot; &#39;y&#39;</p>\n<p>&lt;img src=x onerror=alert(1)&gt;</p>\n"
        );
        for (tag, attributes) in tags(&out) {
            assert!(
                ["p", "br"].contains(&tag.as_str()) && attributes.is_empty(),
                "{out}"
            );
        }
    }

    #[test]
    fn every_link_gets_the_rel() {
        let out = html("[a](https://a.example) [b](http://b.example) <https://c.example>");
        assert_eq!(out.matches("<a ").count(), 3);
        assert_eq!(out.matches("rel=\"nofollow ugc noopener\"").count(), 3);
    }
}
