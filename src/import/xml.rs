//! The streaming XML layer the Disqus and WordPress readers share: owned events with entity
//! references resolved, and a truncated file, a wrong root element or nesting deeper than
//! [`MAX_DEPTH`] reported as a [`FormatError`]. Texts are cut as they are read (see
//! `bounded::CutTexts`): a field longer than [`MAX_TEXT_BYTES`] is only known to be too long.

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_xml::events::{BytesRef, Event};
use quick_xml::{Reader, XmlVersion};

use super::bounded::{CutTexts, MAX_TEXT_BYTES};
use super::html::named_entity;
use super::source::FormatError;

/// The deepest elements may nest (an export nests about 5 levels): a deeper file is refused,
/// before its nesting costs anything.
pub(crate) const MAX_DEPTH: usize = 256;

/// One event of the file, owned.
#[derive(Debug)]
pub(crate) enum XmlEvent {
    /// An element starts (an empty one is a start and an end); names as written (`wp:comment`).
    Start {
        /// Its qualified name.
        name: String,
        /// Its attributes, qualified names and decoded values.
        attrs: Vec<(String, String)>,
    },
    /// The innermost open element ends.
    End,
    /// Text or CDATA, references resolved.
    Text(String),
}

/// A file read event by event, holding no more than the current event.
pub(crate) struct XmlStream<R> {
    reader: Reader<CutTexts<R>>,
    /// Texts cut so far by the reader's input.
    cuts: Arc<AtomicU64>,
    /// Whether the last text event was cut.
    last_cut: bool,
    buf: Vec<u8>,
    format: &'static str,
    root: &'static str,
    depth: usize,
    root_closed: bool,
}

impl<R: BufRead> XmlStream<R> {
    /// Reads `reader` as a `format` file whose root element must be `root`.
    pub(crate) fn new(reader: R, format: &'static str, root: &'static str) -> Self {
        let cut = CutTexts::new(reader);
        let cuts = cut.cuts();
        let mut reader = Reader::from_reader(cut);
        let config = reader.config_mut();
        config.expand_empty_elements = true;
        config.check_end_names = true;
        XmlStream {
            reader,
            cuts,
            last_cut: false,
            buf: Vec::new(),
            format,
            root,
            depth: 0,
            root_closed: false,
        }
    }

    /// How many elements are open (1 inside the root element).
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// An error at the current position.
    pub(crate) fn error(&self, message: impl Into<String>) -> FormatError {
        FormatError {
            format: self.format,
            position: self.reader.buffer_position(),
            message: message.into(),
        }
    }

    /// The next event; `None` once the root element has ended. A file that ends before that,
    /// or is not well-formed, is an error.
    pub(crate) fn next(&mut self) -> Result<Option<XmlEvent>, FormatError> {
        loop {
            self.buf.clear();
            let cuts = self.cuts.load(Ordering::SeqCst);
            let read = self.reader.read_event_into(&mut self.buf);
            self.last_cut = self.cuts.load(Ordering::SeqCst) != cuts;
            let event = match read {
                Ok(event) => event,
                Err(error) => {
                    return Err(FormatError {
                        format: self.format,
                        position: self.reader.error_position(),
                        message: format!("not well-formed XML: {error}"),
                    })
                }
            };
            let event = match event {
                Event::Start(start) => {
                    let name = start.name().as_ref().to_owned();
                    if self.depth == 0 {
                        if self.root_closed {
                            return Err(self.error(format!(
                                "an element <{name}> after the end of <{}>",
                                self.root
                            )));
                        }
                        if name != self.root {
                            return Err(self.error(format!(
                                "the root element is <{name}>, not <{}>: not a {} export",
                                self.root, self.format
                            )));
                        }
                    }
                    if self.depth >= MAX_DEPTH {
                        return Err(self.error(format!(
                            "<{name}> nests deeper than {MAX_DEPTH} elements: the file is refused \
                             (an export nests about 5)"
                        )));
                    }
                    let mut attrs = Vec::new();
                    for attr in start.attributes() {
                        let attr = attr.map_err(|error| FormatError {
                            format: self.format,
                            position: self.reader.buffer_position(),
                            message: format!("a bad attribute in <{name}>: {error}"),
                        })?;
                        let value = attr
                            .normalized_value(XmlVersion::Implicit1_0)
                            .map(|value| value.into_owned())
                            .unwrap_or_else(|_| attr.value.clone().into_owned());
                        attrs.push((attr.key.as_ref().to_owned(), value));
                    }
                    self.depth += 1;
                    XmlEvent::Start { name, attrs }
                }
                Event::End(_) => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        self.root_closed = true;
                    }
                    XmlEvent::End
                }
                Event::Text(text) => {
                    if self.depth == 0 {
                        continue;
                    }
                    XmlEvent::Text(text.xml10_content().into_owned())
                }
                Event::CData(text) => {
                    if self.depth == 0 {
                        continue;
                    }
                    XmlEvent::Text(text.xml10_content().into_owned())
                }
                Event::GeneralRef(reference) => {
                    if self.depth == 0 {
                        continue;
                    }
                    XmlEvent::Text(resolve(&reference))
                }
                Event::Eof => {
                    if self.root_closed {
                        return Ok(None);
                    }
                    let message = if self.depth == 0 {
                        format!("no <{}> element: not a {} export", self.root, self.format)
                    } else {
                        format!(
                            "the file ends before </{}>, inside an element: is it truncated?",
                            self.root
                        )
                    };
                    return Err(self.error(message));
                }
                Event::Empty(_)
                | Event::Comment(_)
                | Event::Decl(_)
                | Event::PI(_)
                | Event::DocType(_) => continue,
            };
            return Ok(Some(event));
        }
    }

    /// The next event, inside an element: the end of the file is an error.
    fn next_inside(&mut self) -> Result<XmlEvent, FormatError> {
        match self.next()? {
            Some(event) => Ok(event),
            None => Err(self.error("the file ends inside an element")),
        }
    }

    /// The text of the element just started, up to its end (the text of its descendants too),
    /// cut after [`MAX_TEXT_BYTES`].
    pub(crate) fn read_text(&mut self) -> Result<String, FormatError> {
        let mut text = String::new();
        let mut open = 1usize;
        while open > 0 {
            match self.next_inside()? {
                XmlEvent::Start { .. } => open += 1,
                XmlEvent::End => open -= 1,
                XmlEvent::Text(more) => {
                    append_capped(&mut text, &more);
                }
            }
        }
        Ok(text)
    }

    /// Skips the element just started, up to its end.
    pub(crate) fn skip(&mut self) -> Result<(), FormatError> {
        let mut open = 1usize;
        while open > 0 {
            match self.next_inside()? {
                XmlEvent::Start { .. } => open += 1,
                XmlEvent::End => open -= 1,
                XmlEvent::Text(_) => {}
            }
        }
        Ok(())
    }

    /// The descendants of the element just started, up to its end, by their path below it.
    pub(crate) fn collect(&mut self) -> Result<Fields, FormatError> {
        let mut fields = Fields::default();
        let mut open: Vec<usize> = Vec::new();
        loop {
            match self.next_inside()? {
                XmlEvent::Start { name, attrs } => {
                    let path = match open.last().and_then(|&at| fields.entries.get(at)) {
                        Some(parent) => format!("{}/{name}", parent.path),
                        None => name,
                    };
                    open.push(fields.entries.len());
                    fields.entries.push(Field {
                        path,
                        attrs,
                        text: String::new(),
                        overlong: false,
                    });
                }
                XmlEvent::End => {
                    if open.pop().is_none() {
                        return Ok(fields);
                    }
                }
                XmlEvent::Text(text) => {
                    let cut = self.last_cut;
                    if let Some(field) = open.last().and_then(|&at| fields.entries.get_mut(at)) {
                        let whole = append_capped(&mut field.text, &text);
                        field.overlong |= cut || !whole;
                    }
                }
            }
        }
    }
}

/// Appends `more` to `text` as far as [`MAX_TEXT_BYTES`] allows (at a character boundary);
/// false when some was left out.
fn append_capped(text: &mut String, more: &str) -> bool {
    let room = MAX_TEXT_BYTES.saturating_sub(text.len());
    if more.len() <= room {
        text.push_str(more);
        return true;
    }
    let mut end = room;
    while !more.is_char_boundary(end) {
        end -= 1;
    }
    text.push_str(&more[..end]);
    false
}

/// An entity or character reference as text (an unknown one stays as written).
fn resolve(reference: &BytesRef<'_>) -> String {
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return c.to_string();
    }
    let name: &str = reference.as_ref();
    named_entity(name).unwrap_or_else(|| format!("&{name};"))
}

/// The descendants of one element, each by its path below it (`author/name`).
#[derive(Debug, Default)]
pub(crate) struct Fields {
    entries: Vec<Field>,
}

/// One descendant element: its path, attributes and own text.
#[derive(Debug)]
struct Field {
    path: String,
    attrs: Vec<(String, String)>,
    text: String,
    /// Its text was longer than [`MAX_TEXT_BYTES`]: `text` holds only its start.
    overlong: bool,
}

impl Fields {
    /// The text of the first element at `path`, trimmed (`None` when there is none).
    pub(crate) fn text(&self, path: &str) -> Option<&str> {
        self.raw(path).map(str::trim)
    }

    /// The text of the first element at `path` as it stands.
    pub(crate) fn raw(&self, path: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|field| field.path == path)
            .map(|field| field.text.as_str())
    }

    /// Whether the text of the first element at `path` was longer than [`MAX_TEXT_BYTES`]
    /// (only its start was kept).
    pub(crate) fn overlong(&self, path: &str) -> bool {
        self.entries
            .iter()
            .find(|field| field.path == path)
            .is_some_and(|field| field.overlong)
    }

    /// The trimmed text at `path`, `None` when absent or empty.
    pub(crate) fn non_empty(&self, path: &str) -> Option<&str> {
        self.text(path).filter(|text| !text.is_empty())
    }

    /// An attribute of the first element at `path`, trimmed, `None` when absent or empty.
    pub(crate) fn attr(&self, path: &str, name: &str) -> Option<&str> {
        let field = self.entries.iter().find(|field| field.path == path)?;
        attr(&field.attrs, name)
    }
}

/// An attribute by its qualified name, trimmed, `None` when absent or empty.
pub(crate) fn attr<'a>(attrs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// Whether an element's text says yes (`true` or `1`).
pub(crate) fn is_true(text: Option<&str>) -> bool {
    text.is_some_and(|text| text.eq_ignore_ascii_case("true") || text == "1")
}
