//! A comment's HTML (Disqus `<message>`, WordPress `wp:comment_content`) as Markdown text.
//!
//! `htmd` converts; before it does, a pass over the parsed tree applies our rules: what is
//! dropped with its content, how bare newlines count, which characters of the text are
//! escaped, and how deep the tree may go.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::LazyLock;

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::options::{BulletListMarker, Options};
use htmd::{Element, HtmlToMarkdown};
use markup5ever_rcdom::{Handle, Node, NodeData};

/// Elements dropped together with everything inside them (images too: a comment shows none).
const DROPPED: [&str; 7] = [
    "script", "style", "iframe", "object", "noscript", "template", "img",
];

/// Elements whose text is code: taken as it stands, never escaped.
const CODE: [&str; 5] = ["pre", "code", "kbd", "samp", "tt"];

/// Elements that stand as blocks.
#[rustfmt::skip]
const BLOCKS: [&str; 43] = [
    "html", "body", "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
    "header", "footer", "nav", "aside", "main", "address", "figure", "figcaption", "table",
    "thead", "tbody", "tfoot", "tr", "td", "th", "caption", "dl", "dt", "dd", "hr", "center",
    "details", "summary", "ul", "ol", "li", "pre", "blockquote", "form", "fieldset", "textarea",
];

/// Deeper elements are read as text only, so a hostile nesting cannot exhaust the stack
/// (the conversion recurses once per level).
const MAX_DEPTH: usize = 64;

/// Stands in the tree's text for a backslash that escapes the next character (`htmd` would
/// escape a real one); a noncharacter, and none from the input survives.
const ESCAPE: char = '\u{fdd0}';

/// The converter with our handlers, built once.
static CONVERTER: LazyLock<HtmlToMarkdown> = LazyLock::new(|| {
    HtmlToMarkdown::builder()
        .options(Options {
            bullet_list_marker: BulletListMarker::Dash,
            ul_bullet_spacing: 1,
            ol_number_spacing: 1,
            ..Options::default()
        })
        .skip_tags(DROPPED.to_vec())
        .add_handler(vec!["a"], link)
        .add_handler(vec!["em", "i"], emphasis)
        .add_handler(vec!["strong", "b"], strong)
        .add_handler(vec!["del", "s", "strike"], strike)
        .add_handler(CODE[1..].to_vec(), code_span)
        .add_handler(vec!["pre"], code_block)
        .add_handler(vec!["blockquote"], quote)
        .add_handler(vec!["span"], inline)
        .add_handler(vec!["td", "th"], cell)
        .add_handler(
            vec!["table", "thead", "tbody", "tfoot", "tr", "caption"],
            block,
        )
        .build()
});

/// `html` as Markdown: paragraphs, line breaks, links (`http`, `https`, `mailto` and relative
/// ones only), emphasis, code, block quotes, lists and headings keep their meaning; entities
/// are decoded; characters Markdown would read as markup are escaped so plain text stays plain.
///
/// Bare newlines count as in WordPress content: one is a line break, two start a paragraph.
/// Never fails: malformed HTML is read the way a browser reads it.
pub fn to_markdown(html: &str) -> String {
    // Parsing a string cannot fail.
    let Ok(tree) = CONVERTER.html_to_tree(html) else {
        return String::new();
    };
    prepare(&tree);
    let markdown = CONVERTER.tree_to_markdown(&tree);
    markdown.replace(ESCAPE, "\\").trim().to_owned()
}

/// `text` with its character references decoded as HTML decodes them (a WordPress title);
/// everything else in it stays as it stands.
pub(crate) fn decode_entities(text: &str) -> String {
    // A leading character keeps leading spaces (the parser skips them before the body), and
    // with every `<` a reference, the whole text is one text node.
    let escaped = format!(".{}", text.replace('<', "&lt;"));
    let Ok(tree) = CONVERTER.html_to_tree(&escaped) else {
        return text.to_owned();
    };
    let decoded = text_of(&tree);
    decoded.strip_prefix('.').unwrap_or(&decoded).to_owned()
}

/// What the HTML named character reference `&name;` stands for, if HTML knows it.
pub(crate) fn named_entity(name: &str) -> Option<String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let decoded = decode_entities(&format!("&{name};"));
    // A known name is one or two characters; an unknown one stays as written, or has only a
    // known start decoded (`&ampx;` reads as `&x;`).
    (decoded.chars().count() <= 2).then_some(decoded)
}

// ---------------------------------------------------------------------------------------------
// The pass over the tree

/// Applies our rules to the tree, top down (with a stack of its own: the tree may be deep).
fn prepare(root: &Handle) {
    let mut stack = vec![(Rc::clone(root), 0_usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= MAX_DEPTH {
            let text = text_of(&node);
            *node.children.borrow_mut() = vec![text_node(&text)];
        }
        let children = node.children.take();
        let children = rebuild(&node, children);
        for child in &children {
            if let NodeData::Element { name, .. } = &child.data {
                if !CODE.contains(&&*name.local) {
                    stack.push((Rc::clone(child), depth + 1));
                }
            }
        }
        *node.children.borrow_mut() = children;
    }
}

/// A child list read as text, line breaks and other nodes.
enum Piece {
    /// Text on one line.
    Text(String),
    /// `<br>`s and bare newlines (with the spaces around them).
    Break {
        /// How many count: a newline just after a `<br>` does not.
        count: usize,
        /// Whether the last was a `<br>`.
        after_br: bool,
    },
    /// Any other node, kept.
    Node(Handle),
}

/// The children of `parent` with dropped elements, empty list items and comments left out,
/// text escaped, and line breaks made elements: one is a `<br>`, more end a paragraph (an
/// empty `<div>`), and those at a block's edge go.
fn rebuild(parent: &Handle, children: Vec<Handle>) -> Vec<Handle> {
    let mut pieces = Vec::with_capacity(children.len());
    for child in children {
        match &child.data {
            NodeData::Text { contents } => {
                let text = contents.borrow().replace(ESCAPE, "\u{fffd}");
                for (n, line) in text.split('\n').enumerate() {
                    if n > 0 {
                        line_break(&mut pieces, false);
                    }
                    push_text(&mut pieces, line);
                }
            }
            NodeData::Element { name, .. } => match &*name.local {
                "br" => line_break(&mut pieces, true),
                "li" if is_blank(&child) => {}
                tag if DROPPED.contains(&tag) => {}
                _ => pieces.push(Piece::Node(child)),
            },
            _ => {}
        }
    }
    // A block's own spaces at its ends are none.
    let block = is_block(parent);
    if let (true, Some(Piece::Text(text))) = (block, pieces.last_mut()) {
        text.truncate(text.trim_end_matches(is_space).len());
    }
    if let (true, Some(Piece::Text(text))) = (block, pieces.first_mut()) {
        *text = text.trim_start_matches(is_space).to_owned();
    }
    let at_edge = |piece: Option<&Piece>| match piece {
        None => true,
        Some(Piece::Node(node)) => is_block(node),
        Some(_) => false,
    };
    let mut out = Vec::with_capacity(pieces.len());
    for (at, piece) in pieces.iter().enumerate() {
        let node = match piece {
            Piece::Text(text) => text_node(&escape(text)),
            Piece::Node(node) => Rc::clone(node),
            Piece::Break { .. }
                if at_edge(at.checked_sub(1).and_then(|before| pieces.get(before)))
                    || at_edge(pieces.get(at + 1)) =>
            {
                if block {
                    continue;
                }
                text_node(" ")
            }
            Piece::Break { count, .. } => {
                let tag = if *count == 1 { "br" } else { "div" };
                match element_like(parent, tag) {
                    Some(node) => node,
                    None => text_node(" "),
                }
            }
        };
        node.parent.set(Some(Rc::downgrade(parent)));
        out.push(node);
    }
    out
}

/// HTML's spaces (a no-break space counts: WordPress pads empty paragraphs with it).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}' | '\u{a0}')
}

fn line_break(pieces: &mut Vec<Piece>, br: bool) {
    while let Some(Piece::Text(text)) = pieces.last_mut() {
        text.truncate(text.trim_end_matches(is_space).len());
        if !text.is_empty() {
            break;
        }
        pieces.pop();
    }
    match pieces.last_mut() {
        Some(Piece::Break { count, after_br }) => {
            if br || !*after_br {
                *count += 1;
            }
            *after_br = br;
        }
        _ => pieces.push(Piece::Break {
            count: 1,
            after_br: br,
        }),
    }
}

fn push_text(pieces: &mut Vec<Piece>, text: &str) {
    let text = match pieces.last() {
        Some(Piece::Break { .. }) => text.trim_start_matches(is_space),
        _ => text,
    };
    if text.is_empty() {
        return;
    }
    match pieces.last_mut() {
        Some(Piece::Text(before)) => before.push_str(text),
        _ => pieces.push(Piece::Text(text.to_owned())),
    }
}

/// Text on one line with what `htmd` leaves unescaped escaped: a character that would start a
/// heading, quote, list or rule, `~`, and an `&` that starts a character reference.
/// (`htmd` escapes `\ * _ ` [ ]` and a `<` that could start a tag.)
fn escape(text: &str) -> String {
    let text = text.replace('\u{a0}', " ");
    let start = text.len() - text.trim_start_matches(is_space).len();
    let digits = text[start..].bytes().take_while(u8::is_ascii_digit).count();
    let marker = start + digits;
    let ordered = (1..=9).contains(&digits)
        && text[marker..].starts_with(['.', ')'])
        && matches!(text.as_bytes().get(marker + 1), None | Some(b' '));
    let mut out = String::with_capacity(text.len() + 4);
    for (at, c) in text.char_indices() {
        let escaped = match c {
            '#' | '>' | '-' | '+' | '=' => at == start,
            '.' | ')' => ordered && at == marker,
            '~' => true,
            '&' => looks_like_entity(&text[at + 1..]),
            _ => false,
        };
        if escaped {
            out.push(ESCAPE);
        }
        out.push(c);
    }
    out
}

/// Whether Markdown would read `&` followed by `rest` as a character reference.
fn looks_like_entity(rest: &str) -> bool {
    let name = rest.strip_prefix('#').unwrap_or(rest);
    let length = name
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    length > 0 && name.as_bytes().get(length) == Some(&b';')
}

/// Whether `node` stands as a block: a line break at its edge is none.
fn is_block(node: &Node) -> bool {
    matches!(&node.data, NodeData::Element { name, .. } if BLOCKS.contains(&&*name.local))
}

/// A list item with no content.
fn is_blank(node: &Node) -> bool {
    node.children
        .borrow()
        .iter()
        .all(|child| match &child.data {
            NodeData::Text { contents } => contents.borrow().trim().is_empty(),
            _ => false,
        })
}

fn text_node(text: &str) -> Handle {
    Node::new(NodeData::Text {
        contents: RefCell::new(text.into()),
    })
}

/// A new empty `tag` element, in the namespace of `like` (`None` if it is no element).
fn element_like(like: &Node, tag: &str) -> Option<Handle> {
    let NodeData::Element { name, .. } = &like.data else {
        return None;
    };
    let mut name = name.clone();
    name.local = tag.into();
    Some(Node::new(NodeData::Element {
        name,
        attrs: RefCell::new(Vec::new()),
        template_contents: RefCell::new(None),
        mathml_annotation_xml_integration_point: false,
    }))
}

/// The text under `node` as it stands, `<br>` a newline, dropped elements left out.
fn text_of(node: &Node) -> String {
    let mut out = String::new();
    let mut stack: Vec<Handle> = node.children.borrow().iter().rev().cloned().collect();
    while let Some(next) = stack.pop() {
        match &next.data {
            NodeData::Text { contents } => out.push_str(&contents.borrow()),
            NodeData::Element { name, .. } if &*name.local == "br" => out.push('\n'),
            NodeData::Element { name, .. } if DROPPED.contains(&&*name.local) => {}
            NodeData::Element { .. } => stack.extend(next.children.borrow().iter().rev().cloned()),
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Handlers

fn link(
    handlers: &dyn Handlers,
    Element { node, attrs, .. }: Element<'_>,
) -> Option<HandlerResult> {
    let content = handlers.walk_children(node).content;
    let href = attrs
        .iter()
        .find(|attr| &*attr.name.local == "href")
        .and_then(|attr| safe_href(&attr.value));
    let Some(href) = href else {
        return Some(content.into());
    };
    if content.trim().is_empty() {
        let mut shown = String::new();
        escape_into(&href, &mut shown);
        return Some(format!("{content}[{shown}]({href})").into());
    }
    Some(wrap(&content, "[", &format!("]({href})")).into())
}

fn emphasis(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    marked(handlers, node, &["em", "i"], "*")
}

fn strong(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    marked(handlers, node, &["strong", "b"], "**")
}

fn strike(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    marked(handlers, node, &["del", "s", "strike"], "~~")
}

/// The content between `marker`s, unless an element of the same kind already marks it.
fn marked(
    handlers: &dyn Handlers,
    node: &Handle,
    kind: &[&str],
    marker: &str,
) -> Option<HandlerResult> {
    let content = handlers.walk_children(node).content;
    if inside(node, kind) {
        return Some(content.into());
    }
    Some(wrap(&content, marker, marker).into())
}

/// Whether an element around `node` is one of `tags`.
fn inside(node: &Node, tags: &[&str]) -> bool {
    let mut next = parent_of(node);
    while let Some(parent) = next {
        if matches!(&parent.data, NodeData::Element { name, .. } if tags.contains(&&*name.local)) {
            return true;
        }
        next = parent_of(&parent);
    }
    false
}

fn parent_of(node: &Node) -> Option<Handle> {
    let parent = node.parent.take();
    let strong = parent.as_ref().and_then(std::rc::Weak::upgrade);
    node.parent.set(parent);
    strong
}

/// `open` and `close` around each paragraph of `content` (markup cannot span a blank line),
/// spaces and newlines kept outside; blocks (lists, quotes, headings) stay as they are, and
/// content with a code block is left as it is.
fn wrap(content: &str, open: &str, close: &str) -> String {
    if content
        .lines()
        .any(|line| line.trim_start_matches([' ', '>', '-']).starts_with("```"))
    {
        return content.to_owned();
    }
    let mut out = String::with_capacity(content.len() + 8);
    for (n, part) in content.split("\n\n").enumerate() {
        if n > 0 {
            out.push_str("\n\n");
        }
        let core = part.trim_matches(|c: char| c.is_ascii_whitespace());
        if core.is_empty() || starts_block(core) {
            out.push_str(part);
            continue;
        }
        let lead = part.len()
            - part
                .trim_start_matches(|c: char| c.is_ascii_whitespace())
                .len();
        for piece in [&part[..lead], open, core, close, &part[lead + core.len()..]] {
            out.push_str(piece);
        }
    }
    out
}

/// Whether Markdown the converter made starts with a block (text never does: it is escaped).
fn starts_block(markdown: &str) -> bool {
    let digits = markdown.bytes().take_while(u8::is_ascii_digit).count();
    markdown.starts_with(['>', '#'])
        || markdown.starts_with("- ")
        || markdown.starts_with("```")
        || markdown == "* * *"
        || (digits > 0 && markdown[digits..].starts_with(". "))
}

/// `<code>` and the like: the text as it stands, in as many backticks as it needs.
fn code_span(_: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    let text = text_of(node).replace(ESCAPE, "\u{fffd}");
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    if words.is_empty() {
        return Some(text.into());
    }
    let core = words.join(" ");
    let space = |yes: bool| if yes { " " } else { "" };
    let lead = space(text.starts_with(|c: char| c.is_ascii_whitespace()));
    let trail = space(text.ends_with(|c: char| c.is_ascii_whitespace()));
    let pad = space(core.starts_with('`') || core.ends_with('`'));
    let fence = "`".repeat(longest_run(&core, '`') + 1);
    Some(format!("{lead}{fence}{pad}{core}{pad}{fence}{trail}").into())
}

/// `<pre>`: a fenced code block of its text as it stands.
fn code_block(_: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    let text = text_of(node).replace(ESCAPE, "\u{fffd}");
    let text = text.strip_prefix('\n').unwrap_or(&text).trim_end();
    if text.trim().is_empty() {
        return None;
    }
    let fence = "`".repeat(longest_run(text, '`').max(2) + 1);
    Some(format!("\n\n{fence}\n{text}\n{fence}\n\n").into())
}

fn quote(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    let content = handlers.walk_children(node).content;
    let content = content.trim_matches(|c: char| c.is_ascii_whitespace());
    if content.is_empty() {
        return None;
    }
    let lines: Vec<String> = content
        .lines()
        .map(|line| match line.trim_end() {
            "" => ">".to_owned(),
            _ => format!("> {line}"),
        })
        .collect();
    Some(format!("\n\n{}\n\n", lines.join("\n")).into())
}

/// Its content, no more (`htmd` makes some `<span>`s math).
fn inline(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    Some(handlers.walk_children(node))
}

/// A table cell: a space, then its text (Markdown tables are not read here).
fn cell(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    let content = handlers.walk_children(node).content;
    Some(format!(" {}", content.trim()).into())
}

/// A block of its own: a table row is a paragraph.
fn block(handlers: &dyn Handlers, Element { node, .. }: Element<'_>) -> Option<HandlerResult> {
    let content = handlers.walk_children(node).content;
    Some(format!("\n\n{}\n\n", content.trim()).into())
}

fn longest_run(text: &str, of: char) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == of { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// Plain text with Markdown's inline markup characters escaped.
fn escape_into(text: &str, out: &mut String) {
    for (at, c) in text.char_indices() {
        match c {
            '\\' | '*' | '_' | '`' | '[' | ']' | '<' | '~' => {
                out.push('\\');
                out.push(c);
            }
            '&' if looks_like_entity(&text[at + 1..]) => out.push_str("\\&"),
            _ => out.push(c),
        }
    }
}

/// The link's address when it may be kept (`http`, `https`, `mailto` or relative), with the
/// characters that would end a Markdown link destination percent-encoded.
fn safe_href(href: &str) -> Option<String> {
    let href = href.trim();
    if href.is_empty() {
        return None;
    }
    let probe: String = href
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect();
    let scheme_end = probe.find(':');
    let path_start = probe.find(['/', '?', '#']);
    if let Some(colon) = scheme_end {
        if path_start.is_none_or(|path| colon < path) {
            let scheme = probe[..colon].to_ascii_lowercase();
            if !matches!(scheme.as_str(), "http" | "https" | "mailto") {
                return None;
            }
        }
    }
    let mut out = String::with_capacity(href.len());
    for c in href.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            c if c.is_control() || c.is_whitespace() || c == ESCAPE => {}
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_are_separated_by_a_blank_line() {
        assert_eq!(to_markdown("<p>One</p><p>Two</p>"), "One\n\nTwo");
        assert_eq!(to_markdown("<P>One</P>\n\n\n<p>Two"), "One\n\nTwo");
        assert_eq!(to_markdown("<div>a</div>b<p>c</p>"), "a\n\nb\n\nc");
        assert_eq!(to_markdown("<p>a<p>b"), "a\n\nb");
    }

    #[test]
    fn line_breaks_and_bare_newlines() {
        // A line break is a hard one (two spaces): a bare newline would show as a space.
        assert_eq!(to_markdown("a<br>b<br/>c<BR />d"), "a  \nb  \nc  \nd");
        assert_eq!(to_markdown("one\ntwo\n\nthree"), "one  \ntwo\n\nthree");
        assert_eq!(
            to_markdown("one  \n  two\r\n\r\n\r\n\r\nthree"),
            "one  \ntwo\n\nthree"
        );
        assert_eq!(to_markdown("a<br><br><br><br>b"), "a\n\nb");
        // As WordPress reads it: a newline after a `<br />` adds nothing, one before it does.
        assert_eq!(to_markdown("a<br />\nb"), "a  \nb");
        assert_eq!(to_markdown("a\n<br>b"), "a\n\nb");
        // Breaks at a block's edge, and newlines between blocks, are none.
        assert_eq!(to_markdown("<p>a<br></p><br>\n<p>\nb\n</p>"), "a\n\nb");
        assert_eq!(to_markdown("<b>a\n\nb</b>"), "**a**\n\n**b**");
    }

    #[test]
    fn spaces_collapse_as_in_html() {
        assert_eq!(to_markdown("  a   \t b  "), "a b");
        assert_eq!(to_markdown("a <em> b </em> c"), "a *b* c");
        assert_eq!(to_markdown("<p>&nbsp;</p><p>x&nbsp;y</p>"), "x y");
    }

    #[test]
    fn links_keep_safe_addresses_only() {
        assert_eq!(
            to_markdown(r#"see <a href="https://example.com/a?x=1&amp;y=2">this</a>"#),
            "see [this](https://example.com/a?x=1&y=2)"
        );
        assert_eq!(
            to_markdown(r#"<a href="mailto:a@example.com">mail</a>"#),
            "[mail](mailto:a@example.com)"
        );
        assert_eq!(
            to_markdown(r#"<a href="/about">about</a> <a href='#top'>top</a>"#),
            "[about](/about) [top](#top)"
        );
        assert_eq!(
            to_markdown(r#"<a href="javascript:alert(1)">click</a>"#),
            "click"
        );
        assert_eq!(
            to_markdown(r#"<a href=" java&#x09;script:alert(1)">click</a>"#),
            "click"
        );
        assert_eq!(to_markdown(r#"<a href="data:text/html,x">d</a>"#), "d");
        assert_eq!(to_markdown("<a>no href</a>"), "no href");
        assert_eq!(
            to_markdown(r#"<a href="http://x.org/a b(c)">x</a>"#),
            "[x](http://x.org/a%20b%28c%29)"
        );
        assert_eq!(
            to_markdown(r#"<a href="http://x.org/"></a>"#),
            "[http://x.org/](http://x.org/)"
        );
        assert_eq!(
            to_markdown(r#"<a href="http://x.org/a_b" title="t">x</a>"#),
            "[x](http://x.org/a_b)"
        );
        assert_eq!(
            to_markdown(r#"<a href=http://x.org/ >  spaced  </a>!"#),
            "[spaced](http://x.org/) !"
        );
    }

    #[test]
    fn emphasis_and_strong() {
        assert_eq!(to_markdown("<em>a</em> <i>b</i>"), "*a* *b*");
        assert_eq!(to_markdown("<strong>a</strong> <b>b</b>"), "**a** **b**");
        assert_eq!(to_markdown("x<b>y</b>z"), "x**y**z");
        assert_eq!(to_markdown("<em> </em>x"), "x");
        assert_eq!(to_markdown("<del>gone</del>"), "~~gone~~");
        assert_eq!(to_markdown("<em>a<i>b</i></em>"), "*ab*");
        assert_eq!(
            to_markdown("<b>a<pre>x\n\ny</pre></b>"),
            "a\n\n```\nx\n\ny\n```"
        );
    }

    #[test]
    fn code_spans_and_blocks() {
        assert_eq!(to_markdown("use <code>a_b*c</code>"), "use `a_b*c`");
        assert_eq!(to_markdown("<code>a`b</code>"), "``a`b``");
        assert_eq!(to_markdown("<code>`</code>"), "`` ` ``");
        assert_eq!(
            to_markdown("<pre>\nfn main() {\n    x &lt; y;\n}\n</pre>after"),
            "```\nfn main() {\n    x < y;\n}\n```\n\nafter"
        );
        assert_eq!(
            to_markdown("<pre><code>a\n\n\nb *c*</code></pre>"),
            "```\na\n\n\nb *c*\n```"
        );
        assert_eq!(to_markdown("<pre>```</pre>"), "````\n```\n````");
        assert_eq!(
            to_markdown("<pre><b>x</b> <a href='http://a'>*y*</a><br>z</pre>"),
            "```\nx *y*\nz\n```"
        );
        assert_eq!(
            to_markdown("<kbd>Ctrl</kbd> <tt>a<i>b</i></tt>"),
            "`Ctrl` `ab`"
        );
    }

    #[test]
    fn block_quotes_prefix_each_line() {
        assert_eq!(
            to_markdown("<blockquote><p>a</p><p>b<br>c</p></blockquote>d"),
            "> a\n>\n> b  \n> c\n\nd"
        );
        assert_eq!(
            to_markdown("<blockquote>x<blockquote>y</blockquote></blockquote>"),
            "> x\n>\n> > y"
        );
    }

    #[test]
    fn lists() {
        assert_eq!(
            to_markdown("<ul>\n<li>one</li>\n<li>two</li>\n</ul>"),
            "- one\n- two"
        );
        assert_eq!(to_markdown("<ol><li>one<li>two</ol>"), "1. one\n2. two");
        assert_eq!(to_markdown(r#"<ol start="3"><li>c</li></ol>"#), "3. c");
        assert_eq!(
            to_markdown("<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>"),
            "- a\n  - b\n- c"
        );
        assert_eq!(to_markdown("<li>alone</li>"), "- alone");
        assert_eq!(to_markdown("<p>x</p><ul><li></li></ul>"), "x");
    }

    #[test]
    fn entities_are_decoded() {
        assert_eq!(
            to_markdown("&amp; &quot;q&quot; &apos;a&apos; caf&#233; &#x263A; &hellip;&mdash;&ndash;&rsquo;&lsquo;&ldquo;&rdquo; &eacute;"),
            "& \"q\" 'a' café ☺ …—–’‘“” é"
        );
        assert_eq!(to_markdown("&#146;&#0;&#x110000;"), "’\u{fffd}\u{fffd}");
        // `&amp` without its `;` is `&`, as browsers read it.
        assert_eq!(
            to_markdown("a &unknown; b & c &amp"),
            "a \\&unknown; b & c &"
        );
        assert_eq!(to_markdown("&#233"), "é");
        assert_eq!(to_markdown("a &amp;copy; b"), "a \\&copy; b");
    }

    #[test]
    fn entities_outside_html() {
        assert_eq!(
            decode_entities("Hello &amp; caf&eacute; &#8217;s <b>x</b> &bogus;"),
            "Hello & café ’s <b>x</b> &bogus;"
        );
        assert_eq!(decode_entities("  spaced "), "  spaced ");
        assert_eq!(named_entity("nbsp").as_deref(), Some("\u{a0}"));
        assert_eq!(named_entity("Tab").as_deref(), Some("\t"));
        assert_eq!(named_entity("NotEqualTilde").as_deref(), Some("≂\u{338}"));
        assert_eq!(named_entity("semi").as_deref(), Some(";"));
        assert_eq!(named_entity("ampx"), None);
        assert_eq!(named_entity("bogus"), None);
        assert_eq!(named_entity("a;b"), None);
    }

    #[test]
    fn markdown_characters_in_text_stay_plain() {
        assert_eq!(
            to_markdown("*a* _b_ `c` [d] &lt;e&gt; ~f~ \\"),
            "\\*a\\* \\_b\\_ \\`c\\` \\[d\\] \\<e> \\~f\\~ \\\\"
        );
        assert_eq!(to_markdown("# not a heading"), "\\# not a heading");
        assert_eq!(to_markdown("&gt; not a quote"), "\\> not a quote");
        assert_eq!(
            to_markdown("<p>- no</p><p>1. no</p><p>2024 yes</p>"),
            "\\- no\n\n1\\. no\n\n2024 yes"
        );
        assert_eq!(to_markdown("a # b > c"), "a # b > c");
        assert_eq!(
            to_markdown("<p>1) no</p><p>---</p><p>=== no</p><p>+ no</p>"),
            "1\\) no\n\n\\---\n\n\\=== no\n\n\\+ no"
        );
        assert_eq!(to_markdown("~~~ no fence"), "\\~\\~\\~ no fence");
        // A line that starts after a break is escaped like any other.
        assert_eq!(to_markdown("x<br> - no\n # no"), "x  \n\\- no  \n\\# no");
        assert_eq!(
            to_markdown("&lt;https://x.org&gt; [a]: b ![c](d)"),
            "\\<https://x.org> \\[a\\]: b !\\[c\\](d)"
        );
        // The converter's own escape mark cannot come from the input.
        assert_eq!(to_markdown("&#xFDD0;# x"), "\u{fffd}# x");
        // `<` that can start no markup needs no escape.
        assert_eq!(to_markdown("a < b, I <3 you"), "a < b, I <3 you");
        assert_eq!(
            to_markdown(r#"<span class="math math-inline">*x*</span>"#),
            "\\*x\\*"
        );
    }

    #[test]
    fn scripts_styles_frames_and_objects_are_dropped_with_their_content() {
        assert_eq!(to_markdown("Nice <script>alert(1)</script>try"), "Nice try");
        assert_eq!(
            to_markdown("a<SCRIPT type=x>if (a < b) { x('</p>') }</ScRiPt >b"),
            "ab"
        );
        assert_eq!(to_markdown("a<style>p { color: red }</style>b"), "ab");
        assert_eq!(to_markdown("a<iframe src=x>frame</iframe>b"), "ab");
        assert_eq!(to_markdown("a<object><param>x</object>b"), "ab");
        assert_eq!(to_markdown("a<script>never closed"), "a");
        assert_eq!(
            to_markdown("a<noscript>x</noscript><svg><script>y</script></svg>b"),
            "ab"
        );
    }

    #[test]
    fn other_tags_keep_their_text() {
        assert_eq!(
            to_markdown(r#"<span class="x">a</span> <font color=red>b</font><img src="x.png">"#),
            "a b"
        );
        assert_eq!(to_markdown("a<!-- hidden -->b<!DOCTYPE html>c"), "abc");
        assert_eq!(to_markdown("<h2>Title</h2>text"), "## Title\n\ntext");
        assert_eq!(
            to_markdown(
                "<table><tr><th>a</th><th>b</th></tr><tr><td>c</td><td>d</td></tr></table>"
            ),
            "a b\n\nc d"
        );
        assert_eq!(to_markdown("a<hr>b"), "a\n\n* * *\n\nb");
    }

    #[test]
    fn non_ascii_text() {
        assert_eq!(to_markdown("Grüße, 東京 — ok"), "Grüße, 東京 — ok");
        assert_eq!(
            to_markdown("<p>Grüße <b>東京</b> 🎉</p>"),
            "Grüße **東京** 🎉"
        );
    }

    #[test]
    fn malformed_html_does_not_panic() {
        assert_eq!(to_markdown("a < b and c > d"), "a < b and c > d");
        assert_eq!(to_markdown("I <3 you"), "I <3 you");
        assert_eq!(to_markdown("x <b>bold"), "x **bold**");
        assert_eq!(to_markdown("x </i> y"), "x y");
        assert_eq!(to_markdown("trailing <a href=\"x"), "trailing");
        assert_eq!(to_markdown("<em><p>x</p>y</em>"), "*x*\n\n*y*");
        for input in [
            "<",
            "&",
            "&#",
            "&#x",
            "<a",
            "</",
            "</a",
            "<!--",
            "<!",
            "<?",
            "<<<>>>",
            "&&&;;",
            "<a href='",
            "<a href=",
            "<b><i>x</b></i>",
            "é<",
            "<é>",
            "<p>東<京",
            "&#99999999999999999999;",
            "<ol start=99999999999999999999><li>x",
        ] {
            let _ = to_markdown(input);
        }
        let deep = "<b>".repeat(10_000) + "x";
        assert_eq!(to_markdown(&deep), "**x**");
        let deep = "<blockquote>".repeat(2_000) + "x";
        assert!(to_markdown(&deep).ends_with("> x"));
        let deep = "<div><span>".repeat(1_000) + "x<br>y";
        assert_eq!(to_markdown(&deep), "x  \ny");
    }
}
