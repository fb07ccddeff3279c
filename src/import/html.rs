//! A comment's HTML (Disqus `<message>`, WordPress `wp:comment_content`) as Markdown text.
//!
//! A small forgiving tokenizer builds a shallow tree (HTML is not XML: tags may be left open,
//! a `<` may be plain text), which is then written out as CommonMark. Markup that has no
//! Markdown form is dropped and its text kept; `<script>`, `<style>`, `<iframe>`, `<object>`,
//! `<noscript>` and `<template>` are dropped with their content.

/// Elements dropped together with everything inside them.
const DROPPED: [&str; 6] = [
    "script", "style", "iframe", "object", "noscript", "template",
];

/// Elements that never have content.
const VOID: [&str; 14] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements that start a new block (their text becomes its own paragraph).
const BLOCKS: [&str; 30] = [
    "p",
    "div",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "address",
    "figure",
    "figcaption",
    "table",
    "thead",
    "tbody",
    "tfoot",
    "tr",
    "caption",
    "dl",
    "dt",
    "dd",
    "hr",
    "center",
    "details",
];

/// Deeper elements are read as text only, so a hostile nesting cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

/// `html` as Markdown: paragraphs, line breaks, links (`http`, `https`, `mailto` and relative
/// ones only), emphasis, code, block quotes and lists keep their meaning; entities are decoded;
/// characters Markdown would read as markup are escaped so plain text stays plain.
///
/// Bare newlines count as in WordPress content: one is a line break, two start a paragraph.
/// Never fails: malformed HTML is read the way a browser would, more or less.
pub fn to_markdown(html: &str) -> String {
    let html = html.replace("\r\n", "\n").replace('\r', "\n");
    let nodes = parse(&html);
    let mut writer = Writer::default();
    writer.walk_all(&nodes);
    let blocks = writer.finish();
    write_blocks(&blocks).trim().to_owned()
}

// ---------------------------------------------------------------------------------------------
// Tokenizer and tree

/// A node of the parsed HTML.
#[derive(Debug)]
enum Node {
    /// Text, entities decoded.
    Text(String),
    /// An element and what it holds.
    Element(Element),
}

/// An element: its lower-cased name, its attributes (values decoded) and its children.
#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Node>,
}

impl Element {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The open elements while parsing; the first is the document itself.
struct Tree {
    stack: Vec<Element>,
}

impl Tree {
    fn new() -> Self {
        Tree {
            stack: vec![Element::default()],
        }
    }

    fn top(&mut self) -> &mut Element {
        if self.stack.is_empty() {
            self.stack.push(Element::default());
        }
        let last = self.stack.len() - 1;
        &mut self.stack[last]
    }

    fn text(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        let top = self.top();
        if let Some(Node::Text(previous)) = top.children.last_mut() {
            previous.push_str(&text);
        } else {
            top.children.push(Node::Text(text));
        }
    }

    fn is_open(&self, name: &str) -> Option<usize> {
        self.stack
            .iter()
            .rposition(|element| element.name == name)
            .filter(|&at| at > 0)
    }

    fn start(&mut self, name: String, attrs: Vec<(String, String)>, self_closing: bool) {
        // What HTML closes implicitly: a paragraph ends where a block starts, an item where
        // the next item of the same list starts.
        let starts_block = BLOCKS.contains(&name.as_str())
            || matches!(name.as_str(), "ul" | "ol" | "pre" | "blockquote" | "li");
        if starts_block && self.stack.last().is_some_and(|top| top.name == "p") {
            self.close_to(self.stack.len() - 1);
        }
        if name == "li" {
            let list = self
                .stack
                .iter()
                .rposition(|e| e.name == "ul" || e.name == "ol");
            if let Some(item) = self.is_open("li") {
                if list.is_none_or(|list| item > list) {
                    self.close_to(item);
                }
            }
        }
        let element = Element {
            name,
            attrs,
            children: Vec::new(),
        };
        if self_closing || VOID.contains(&element.name.as_str()) {
            self.top().children.push(Node::Element(element));
        } else if self.stack.len() <= MAX_DEPTH {
            self.stack.push(element);
        }
    }

    fn end(&mut self, name: &str) {
        if name == "br" {
            self.start("br".to_owned(), Vec::new(), true);
            return;
        }
        if let Some(at) = self.is_open(name) {
            self.close_to(at);
        }
    }

    /// Closes the element at `at` of the stack and every one above it.
    fn close_to(&mut self, at: usize) {
        let at = at.max(1);
        while self.stack.len() > at {
            if let Some(element) = self.stack.pop() {
                self.top().children.push(Node::Element(element));
            }
        }
    }

    fn finish(mut self) -> Vec<Node> {
        self.close_to(1);
        self.stack
            .pop()
            .map(|root| root.children)
            .unwrap_or_default()
    }
}

/// The first index at or after `from` where `needle` starts (ASCII case-insensitive).
fn find_ci(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || from >= bytes.len() {
        return None;
    }
    bytes[from..]
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
        .map(|at| at + from)
}

fn find_byte(bytes: &[u8], from: usize, byte: u8) -> Option<usize> {
    bytes
        .get(from..)?
        .iter()
        .position(|&b| b == byte)
        .map(|at| at + from)
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b':' || byte == b'_'
}

/// `s[from..to]` (every index given here is next to an ASCII byte, so on a char boundary).
fn slice(s: &str, from: usize, to: usize) -> &str {
    s.get(from..to).unwrap_or("")
}

/// A start tag read from just after its name: attributes, whether it ends in `/>`, and the
/// index after its `>` (`None` when the input ends inside the tag).
fn read_attributes(html: &str, mut at: usize) -> (Vec<(String, String)>, bool, Option<usize>) {
    let bytes = html.as_bytes();
    let mut attrs = Vec::new();
    let mut self_closing = false;
    loop {
        while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'/') {
            self_closing = bytes[at] == b'/';
            at += 1;
        }
        match bytes.get(at) {
            None => return (attrs, false, None),
            Some(b'>') => return (attrs, self_closing, Some(at + 1)),
            Some(_) => {}
        }
        self_closing = false;
        let name_start = at;
        at += 1; // a name has at least one byte, even an odd one like `=`
        while at < bytes.len()
            && !bytes[at].is_ascii_whitespace()
            && !matches!(bytes[at], b'=' | b'>' | b'/')
        {
            at += 1;
        }
        let name = slice(html, name_start, at).to_ascii_lowercase();
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let mut value = String::new();
        if bytes.get(at) == Some(&b'=') {
            at += 1;
            while at < bytes.len() && bytes[at].is_ascii_whitespace() {
                at += 1;
            }
            match bytes.get(at) {
                Some(&quote @ (b'"' | b'\'')) => match find_byte(bytes, at + 1, quote) {
                    Some(end) => {
                        value = decode_entities(slice(html, at + 1, end));
                        at = end + 1;
                    }
                    None => return (attrs, false, None),
                },
                _ => {
                    let start = at;
                    while at < bytes.len() && !bytes[at].is_ascii_whitespace() && bytes[at] != b'>'
                    {
                        at += 1;
                    }
                    value = decode_entities(slice(html, start, at));
                }
            }
        }
        if !attrs.iter().any(|(key, _)| *key == name) {
            attrs.push((name, value));
        }
    }
}

/// The HTML as a tree of nodes; never fails.
fn parse(html: &str) -> Vec<Node> {
    let bytes = html.as_bytes();
    let mut tree = Tree::new();
    let mut at = 0;
    let mut text_start = 0;
    while at < bytes.len() {
        if bytes[at] != b'<' {
            at += 1;
            continue;
        }
        let next = bytes.get(at + 1).copied();
        let after_slash = bytes.get(at + 2).copied();
        match next {
            Some(b'!' | b'?') => {
                tree.text(decode_entities(slice(html, text_start, at)));
                at = if bytes[at..].starts_with(b"<!--") {
                    find_ci(bytes, at + 4, b"-->").map_or(bytes.len(), |end| end + 3)
                } else {
                    find_byte(bytes, at + 2, b'>').map_or(bytes.len(), |end| end + 1)
                };
                text_start = at;
            }
            Some(b'/') if after_slash.is_some_and(|b| b.is_ascii_alphabetic()) => {
                tree.text(decode_entities(slice(html, text_start, at)));
                let name_start = at + 2;
                let mut name_end = name_start;
                while name_end < bytes.len() && is_name_byte(bytes[name_end]) {
                    name_end += 1;
                }
                let name = slice(html, name_start, name_end).to_ascii_lowercase();
                at = find_byte(bytes, name_end, b'>').map_or(bytes.len(), |end| end + 1);
                text_start = at;
                tree.end(&name);
            }
            Some(first) if first.is_ascii_alphabetic() => {
                tree.text(decode_entities(slice(html, text_start, at)));
                let name_start = at + 1;
                let mut name_end = name_start;
                while name_end < bytes.len() && is_name_byte(bytes[name_end]) {
                    name_end += 1;
                }
                let name = slice(html, name_start, name_end).to_ascii_lowercase();
                let (attrs, self_closing, after) = read_attributes(html, name_end);
                let Some(after) = after else {
                    // The input ends inside the tag: a browser drops it.
                    at = bytes.len();
                    text_start = at;
                    break;
                };
                at = after;
                if DROPPED.contains(&name.as_str()) {
                    if !self_closing {
                        let close = format!("</{name}");
                        at = match find_ci(bytes, at, close.as_bytes()) {
                            Some(end) => {
                                find_byte(bytes, end, b'>').map_or(bytes.len(), |gt| gt + 1)
                            }
                            None => bytes.len(),
                        };
                    }
                } else {
                    tree.start(name, attrs, self_closing);
                }
                text_start = at;
            }
            _ => at += 1, // a `<` that starts no tag is text
        }
    }
    tree.text(decode_entities(slice(html, text_start, bytes.len())));
    tree.finish()
}

// ---------------------------------------------------------------------------------------------
// Entities

/// Named character references: the common ones, Latin-1 letters and typography.
const ENTITIES: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("nbsp", '\u{a0}'),
    ("hellip", '…'),
    ("mdash", '—'),
    ("ndash", '–'),
    ("rsquo", '’'),
    ("lsquo", '‘'),
    ("rdquo", '”'),
    ("ldquo", '“'),
    ("sbquo", '‚'),
    ("bdquo", '„'),
    ("laquo", '«'),
    ("raquo", '»'),
    ("lsaquo", '‹'),
    ("rsaquo", '›'),
    ("bull", '•'),
    ("middot", '·'),
    ("prime", '′'),
    ("Prime", '″'),
    ("dagger", '†'),
    ("Dagger", '‡'),
    ("permil", '‰'),
    ("copy", '©'),
    ("reg", '®'),
    ("trade", '™'),
    ("deg", '°'),
    ("plusmn", '±'),
    ("times", '×'),
    ("divide", '÷'),
    ("minus", '−'),
    ("frac12", '½'),
    ("frac14", '¼'),
    ("frac34", '¾'),
    ("sup1", '¹'),
    ("sup2", '²'),
    ("sup3", '³'),
    ("micro", 'µ'),
    ("para", '¶'),
    ("sect", '§'),
    ("euro", '€'),
    ("pound", '£'),
    ("yen", '¥'),
    ("cent", '¢'),
    ("curren", '¤'),
    ("iexcl", '¡'),
    ("iquest", '¿'),
    ("ordf", 'ª'),
    ("ordm", 'º'),
    ("not", '¬'),
    ("macr", '¯'),
    ("acute", '´'),
    ("cedil", '¸'),
    ("uml", '¨'),
    ("brvbar", '¦'),
    ("shy", '\u{ad}'),
    ("ensp", '\u{2002}'),
    ("emsp", '\u{2003}'),
    ("thinsp", '\u{2009}'),
    ("zwnj", '\u{200c}'),
    ("zwj", '\u{200d}'),
    ("lrm", '\u{200e}'),
    ("rlm", '\u{200f}'),
    ("larr", '←'),
    ("rarr", '→'),
    ("uarr", '↑'),
    ("darr", '↓'),
    ("harr", '↔'),
    ("rArr", '⇒'),
    ("hearts", '♥'),
    ("spades", '♠'),
    ("clubs", '♣'),
    ("diams", '♦'),
    ("infin", '∞'),
    ("ne", '≠'),
    ("le", '≤'),
    ("ge", '≥'),
    ("asymp", '≈'),
    ("circ", 'ˆ'),
    ("tilde", '˜'),
    ("fnof", 'ƒ'),
    ("alpha", 'α'),
    ("beta", 'β'),
    ("gamma", 'γ'),
    ("delta", 'δ'),
    ("pi", 'π'),
    ("mu", 'μ'),
    ("sigma", 'σ'),
    ("omega", 'ω'),
    ("Agrave", 'À'),
    ("Aacute", 'Á'),
    ("Acirc", 'Â'),
    ("Atilde", 'Ã'),
    ("Auml", 'Ä'),
    ("Aring", 'Å'),
    ("AElig", 'Æ'),
    ("Ccedil", 'Ç'),
    ("Egrave", 'È'),
    ("Eacute", 'É'),
    ("Ecirc", 'Ê'),
    ("Euml", 'Ë'),
    ("Igrave", 'Ì'),
    ("Iacute", 'Í'),
    ("Icirc", 'Î'),
    ("Iuml", 'Ï'),
    ("ETH", 'Ð'),
    ("Ntilde", 'Ñ'),
    ("Ograve", 'Ò'),
    ("Oacute", 'Ó'),
    ("Ocirc", 'Ô'),
    ("Otilde", 'Õ'),
    ("Ouml", 'Ö'),
    ("Oslash", 'Ø'),
    ("Ugrave", 'Ù'),
    ("Uacute", 'Ú'),
    ("Ucirc", 'Û'),
    ("Uuml", 'Ü'),
    ("Yacute", 'Ý'),
    ("THORN", 'Þ'),
    ("szlig", 'ß'),
    ("agrave", 'à'),
    ("aacute", 'á'),
    ("acirc", 'â'),
    ("atilde", 'ã'),
    ("auml", 'ä'),
    ("aring", 'å'),
    ("aelig", 'æ'),
    ("ccedil", 'ç'),
    ("egrave", 'è'),
    ("eacute", 'é'),
    ("ecirc", 'ê'),
    ("euml", 'ë'),
    ("igrave", 'ì'),
    ("iacute", 'í'),
    ("icirc", 'î'),
    ("iuml", 'ï'),
    ("eth", 'ð'),
    ("ntilde", 'ñ'),
    ("ograve", 'ò'),
    ("oacute", 'ó'),
    ("ocirc", 'ô'),
    ("otilde", 'õ'),
    ("ouml", 'ö'),
    ("oslash", 'ø'),
    ("ugrave", 'ù'),
    ("uacute", 'ú'),
    ("ucirc", 'û'),
    ("uuml", 'ü'),
    ("yacute", 'ý'),
    ("thorn", 'þ'),
    ("yuml", 'ÿ'),
    ("Yuml", 'Ÿ'),
    ("OElig", 'Œ'),
    ("oelig", 'œ'),
    ("Scaron", 'Š'),
    ("scaron", 'š'),
];

/// What HTML makes of the character references `&#128;` to `&#159;` (Windows-1252).
const WINDOWS_1252: [char; 32] = [
    '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}',
    '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
];

/// A named entity, if the table knows it.
pub(crate) fn named_entity(name: &str) -> Option<char> {
    ENTITIES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|&(_, c)| c)
}

/// The character of a numeric reference's code (invalid codes give U+FFFD, as in HTML).
fn numeric_char(code: u32) -> char {
    match code {
        0x80..=0x9f => WINDOWS_1252[(code - 0x80) as usize],
        0 => '\u{fffd}',
        _ => char::from_u32(code).unwrap_or('\u{fffd}'),
    }
}

/// `text` with its character references decoded; an `&` that starts none stays as it is.
pub(crate) fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        match decode_one(after) {
            Some((c, used)) => {
                out.push(c);
                rest = after.get(used..).unwrap_or("");
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The reference at the start of `s` (just after its `&`): its character and the bytes it used.
fn decode_one(s: &str) -> Option<(char, usize)> {
    let bytes = s.as_bytes();
    if let Some(number) = s.strip_prefix('#') {
        let (hex, digits_at) = match number.as_bytes().first() {
            Some(b'x' | b'X') => (true, 2),
            _ => (false, 1),
        };
        let digits = bytes[digits_at.min(bytes.len())..]
            .iter()
            .take_while(|b| {
                if hex {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            })
            .count();
        if digits == 0 {
            return None;
        }
        let text = s.get(digits_at..digits_at + digits)?;
        let code = u32::from_str_radix(text, if hex { 16 } else { 10 }).unwrap_or(u32::MAX);
        let mut used = digits_at + digits;
        if bytes.get(used) == Some(&b';') {
            used += 1;
        }
        return Some((numeric_char(code), used));
    }
    let length = bytes
        .iter()
        .take(32)
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if length == 0 || bytes.get(length) != Some(&b';') {
        return None;
    }
    named_entity(s.get(..length)?).map(|c| (c, length + 1))
}

// ---------------------------------------------------------------------------------------------
// Markdown

/// A block of the output.
#[derive(Debug)]
enum Block {
    /// Lines of inline Markdown.
    Paragraph(String),
    /// Preformatted text, as a fenced code block.
    Code(String),
    /// A block quote.
    Quote(Vec<Block>),
    /// A list: its first number when ordered, and its items.
    List(Option<u64>, Vec<Vec<Block>>),
}

/// Walks the tree and gathers blocks; inline text waits in `inline` until a block ends it.
#[derive(Default)]
struct Writer {
    blocks: Vec<Block>,
    inline: String,
    /// How many `<code>` the walk is in (their text is not escaped).
    code: usize,
    /// How many times `inline` was emptied (an inline element that holds a block sees it).
    flushes: usize,
}

impl Writer {
    fn walk_all(&mut self, nodes: &[Node]) {
        for node in nodes {
            self.walk(node);
        }
    }

    fn walk(&mut self, node: &Node) {
        let element = match node {
            Node::Text(text) => {
                let text = text.replace(['\t', '\u{c}', '\u{a0}'], " ");
                if self.code > 0 {
                    self.inline.push_str(&text);
                } else {
                    escape_into(&text, &mut self.inline);
                }
                return;
            }
            Node::Element(element) => element,
        };
        match element.name.as_str() {
            "br" => self.inline.push('\n'),
            "em" | "i" => self.wrap(element, "*"),
            "strong" | "b" => self.wrap(element, "**"),
            "del" | "s" | "strike" => self.wrap(element, "~~"),
            "code" | "kbd" | "samp" | "tt" => self.code_span(element),
            "a" => self.link(element),
            "pre" => {
                self.flush();
                let mut text = String::new();
                raw_text(&element.children, &mut text);
                let text = text.strip_prefix('\n').unwrap_or(&text);
                let text = text.trim_end();
                if !text.trim().is_empty() {
                    self.blocks.push(Block::Code(text.to_owned()));
                }
            }
            "blockquote" => {
                self.flush();
                let blocks = Writer::nested(&element.children);
                if !blocks.is_empty() {
                    self.blocks.push(Block::Quote(blocks));
                }
            }
            "ul" | "ol" => {
                self.flush();
                let start = (element.name == "ol").then(|| {
                    element
                        .attr("start")
                        .and_then(|start| start.trim().parse::<u64>().ok())
                        .filter(|&start| start < 1_000_000_000)
                        .unwrap_or(1)
                });
                let mut items = Vec::new();
                for child in &element.children {
                    let item = match child {
                        Node::Element(li) if li.name == "li" => Writer::nested(&li.children),
                        Node::Text(text) if text.trim().is_empty() => continue,
                        other => Writer::nested(std::slice::from_ref(other)),
                    };
                    if !item.is_empty() {
                        items.push(item);
                    }
                }
                if !items.is_empty() {
                    self.blocks.push(Block::List(start, items));
                }
            }
            "li" => {
                self.flush();
                let item = Writer::nested(&element.children);
                if !item.is_empty() {
                    self.blocks.push(Block::List(None, vec![item]));
                }
            }
            "td" | "th" => {
                self.walk_all(&element.children);
                self.inline.push(' ');
            }
            name if BLOCKS.contains(&name) => {
                self.flush();
                self.walk_all(&element.children);
                self.flush();
            }
            _ => self.walk_all(&element.children),
        }
    }

    /// The blocks `nodes` make on their own.
    fn nested(nodes: &[Node]) -> Vec<Block> {
        let mut writer = Writer::default();
        writer.walk_all(nodes);
        writer.finish()
    }

    /// Walks the children and returns where their inline text starts, and that text.
    fn inline_of(&mut self, element: &Element) -> String {
        let start = self.inline.len();
        let flushes = self.flushes;
        self.walk_all(&element.children);
        let start = if flushes == self.flushes { start } else { 0 };
        if self.inline.is_char_boundary(start) && start <= self.inline.len() {
            self.inline.split_off(start)
        } else {
            std::mem::take(&mut self.inline)
        }
    }

    /// Emphasis and the like: `marker` around the text, its outer spaces kept outside.
    fn wrap(&mut self, element: &Element, marker: &str) {
        let text = self.inline_of(element);
        if text.trim().is_empty() || self.code > 0 {
            self.inline.push_str(&text);
            return;
        }
        let (lead, core, trail) = split_spaces(&text);
        self.inline.push_str(lead);
        self.inline.push_str(marker);
        self.inline.push_str(core);
        self.inline.push_str(marker);
        self.inline.push_str(trail);
    }

    fn code_span(&mut self, element: &Element) {
        self.code += 1;
        let text = self.inline_of(element);
        self.code -= 1;
        if self.code > 0 || text.trim().is_empty() {
            self.inline.push_str(&text);
            return;
        }
        let text = text.replace('\n', " ");
        let (lead, core, trail) = split_spaces(&text);
        let fence = "`".repeat(longest_run(core, '`') + 1);
        let pad = if core.starts_with('`') || core.ends_with('`') {
            " "
        } else {
            ""
        };
        self.inline.push_str(lead);
        for part in [fence.as_str(), pad, core, pad, fence.as_str()] {
            self.inline.push_str(part);
        }
        self.inline.push_str(trail);
    }

    fn link(&mut self, element: &Element) {
        let text = self.inline_of(element);
        let href = element.attr("href").and_then(safe_href);
        match href {
            Some(href) if self.code == 0 => {
                let (lead, core, trail) = split_spaces(&text);
                let core = if core.is_empty() {
                    let mut shown = String::new();
                    escape_into(&href, &mut shown);
                    shown
                } else {
                    core.to_owned()
                };
                self.inline.push_str(lead);
                self.inline.push('[');
                self.inline.push_str(&core);
                self.inline.push_str("](");
                self.inline.push_str(&href);
                self.inline.push(')');
                self.inline.push_str(trail);
            }
            _ => self.inline.push_str(&text),
        }
    }

    /// Ends the pending inline text: its paragraphs become blocks.
    fn flush(&mut self) {
        self.flushes += 1;
        let inline = std::mem::take(&mut self.inline);
        let mut lines: Vec<String> = Vec::new();
        for line in inline.split('\n') {
            let line = collapse_spaces(line);
            if line.is_empty() {
                if !lines.is_empty() {
                    self.blocks.push(Block::Paragraph(lines.join("\n")));
                    lines.clear();
                }
            } else {
                lines.push(escape_line_start(&line));
            }
        }
        if !lines.is_empty() {
            self.blocks.push(Block::Paragraph(lines.join("\n")));
        }
    }

    fn finish(mut self) -> Vec<Block> {
        self.flush();
        self.blocks
    }
}

/// The text of `nodes` as it stands, for `<pre>`: nothing escaped, `<br>` a newline.
fn raw_text(nodes: &[Node], out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Element(element) if element.name == "br" => out.push('\n'),
            Node::Element(element) => raw_text(&element.children, out),
        }
    }
}

/// `(leading spaces, the rest trimmed, trailing spaces)`.
fn split_spaces(text: &str) -> (&str, &str, &str) {
    let core = text.trim_matches(|c: char| c == ' ' || c == '\n');
    let lead_len = text.len() - text.trim_start_matches([' ', '\n']).len();
    let lead = &text[..lead_len];
    let trail = &text[lead_len + core.len()..];
    (lead, core, trail)
}

fn longest_run(text: &str, of: char) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == of {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// One line with its runs of spaces made single and its ends trimmed, as HTML shows it.
fn collapse_spaces(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for word in line.split(' ').filter(|word| !word.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
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

/// Whether Markdown would read `&` followed by `rest` as a character reference.
fn looks_like_entity(rest: &str) -> bool {
    let name = rest.strip_prefix('#').unwrap_or(rest);
    let length = name
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    length > 0 && name.as_bytes().get(length) == Some(&b';')
}

/// A line with the character escaped that would make it a heading, quote, list item or rule.
fn escape_line_start(line: &str) -> String {
    if line.starts_with(['#', '>', '-', '+', '=']) {
        return format!("\\{line}");
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let rest = &line[digits..];
        if rest.starts_with(['.', ')']) && (rest.len() == 1 || rest[1..].starts_with(' ')) {
            return format!("{}\\{}", &line[..digits], rest);
        }
    }
    line.to_owned()
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
            c if c.is_control() || c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// Blocks as Markdown, separated by blank lines.
fn write_blocks(blocks: &[Block]) -> String {
    let mut out = String::new();
    for block in blocks {
        let text = write_block(block);
        if text.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&text);
    }
    out
}

fn write_block(block: &Block) -> String {
    match block {
        Block::Paragraph(text) => text.clone(),
        Block::Code(text) => {
            let fence = "`".repeat(longest_run(text, '`').max(2) + 1);
            format!("{fence}\n{text}\n{fence}")
        }
        Block::Quote(blocks) => write_blocks(blocks)
            .lines()
            .map(|line| {
                if line.is_empty() {
                    ">".to_owned()
                } else {
                    format!("> {line}")
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Block::List(start, items) => {
            let mut out = String::new();
            for (index, item) in items.iter().enumerate() {
                let marker = match start {
                    Some(start) => format!("{}. ", start.saturating_add(index as u64)),
                    None => "- ".to_owned(),
                };
                let indent = " ".repeat(marker.len());
                if !out.is_empty() {
                    out.push('\n');
                }
                let body = write_blocks(item);
                for (number, line) in body.lines().enumerate() {
                    if number == 0 {
                        out.push_str(&marker);
                    } else {
                        out.push('\n');
                        if !line.is_empty() {
                            out.push_str(&indent);
                        }
                    }
                    out.push_str(line);
                }
            }
            out
        }
    }
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
        assert_eq!(to_markdown("a<br>b<br/>c<BR />d"), "a\nb\nc\nd");
        assert_eq!(to_markdown("one\ntwo\n\nthree"), "one\ntwo\n\nthree");
        assert_eq!(
            to_markdown("one  \n  two\r\n\r\n\r\n\r\nthree"),
            "one\ntwo\n\nthree"
        );
        assert_eq!(to_markdown("a<br><br><br><br>b"), "a\n\nb");
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
    }

    #[test]
    fn block_quotes_prefix_each_line() {
        assert_eq!(
            to_markdown("<blockquote><p>a</p><p>b<br>c</p></blockquote>d"),
            "> a\n>\n> b\n> c\n\nd"
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
            "- a\n\n  - b\n- c"
        );
        assert_eq!(to_markdown("<p>x</p><ul><li></li></ul>"), "x");
    }

    #[test]
    fn entities_are_decoded() {
        assert_eq!(
            to_markdown("&amp; &quot;q&quot; &apos;a&apos; caf&#233; &#x263A; &hellip;&mdash;&ndash;&rsquo;&lsquo;&ldquo;&rdquo; &eacute;"),
            "& \"q\" 'a' café ☺ …—–’‘“” é"
        );
        assert_eq!(to_markdown("&#146;&#0;&#x110000;"), "’\u{fffd}\u{fffd}");
        assert_eq!(
            to_markdown("a &unknown; b & c &amp"),
            "a \\&unknown; b & c &amp"
        );
        assert_eq!(to_markdown("&#233"), "é");
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
    }

    #[test]
    fn other_tags_keep_their_text() {
        assert_eq!(
            to_markdown(r#"<span class="x">a</span> <font color=red>b</font><img src="x.png">"#),
            "a b"
        );
        assert_eq!(to_markdown("a<!-- hidden -->b<!DOCTYPE html>c"), "abc");
        assert_eq!(to_markdown("<h2>Title</h2>text"), "Title\n\ntext");
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
        assert_eq!(to_markdown("a < b and c > d"), "a \\< b and c > d");
        assert_eq!(to_markdown("I <3 you"), "I \\<3 you");
        assert_eq!(to_markdown("x <b>bold"), "x **bold**");
        assert_eq!(to_markdown("x </i> y"), "x y");
        assert_eq!(to_markdown("trailing <a href=\"x"), "trailing");
        assert_eq!(to_markdown("<em><p>x</p>y</em>"), "x\n\n*y*");
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
        assert_eq!(to_markdown(&deep).trim_matches('*'), "x");
        let deep = "<blockquote>".repeat(10_000) + "x";
        assert!(to_markdown(&deep).ends_with("> x"));
    }
}
