//! Bounds on what an import reads before any format sees it: a gzip file expands to at most a
//! set number of bytes ([`Expansion`]), and an XML file's text runs are cut as they stream
//! ([`CutTexts`]), so no text longer than [`MAX_TEXT_BYTES`] is ever held whole.

use std::io::{self, BufRead, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The longest text (of one XML text run, CDATA section or comment, and of one field a reader
/// gathers) an import holds, in bytes: past it, the rest is dropped as it is read and the
/// comment is refused (no comment text near it is allowed: `THREADQL_MAX_TEXT_CHARS` counts
/// characters of Markdown, at most 4 bytes each).
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// The longest tag (`<…>`, attributes included) an XML import reads: a longer one is an error.
pub const MAX_TAG_BYTES: usize = 1 << 20;

/// The bytes a gzip file expands to, stopped with an error past `limit`.
pub struct Expansion<R> {
    inner: R,
    read: u64,
    limit: u64,
}

impl<R: Read> Expansion<R> {
    /// Reads `inner` (the gunzipped stream), refusing more than `limit` bytes.
    pub fn new(inner: R, limit: u64) -> Self {
        Self {
            inner,
            read: 0,
            limit,
        }
    }
}

impl<R: Read> Read for Expansion<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read = self.read.saturating_add(n as u64);
        if self.read > self.limit {
            return Err(io::Error::other(format!(
                "the gzip file expands past {} bytes (THREADQL_IMPORT_MAX_EXPANDED, or \
                 --max-expanded): the import stops; raise the bound if the file is genuine",
                self.limit
            )));
        }
        Ok(n)
    }
}

/// Where the scan of an XML stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Character data between tags.
    Text,
    /// Just after `<`: `matched` bytes of `![CDATA[` (`cdata`) or `!--` seen so far.
    Opening { matched: usize, cdata: bool },
    /// Inside a tag, declaration or instruction (`quote`: inside an attribute value).
    Tag { quote: Option<u8> },
    /// Inside `<![CDATA[ … ]]>` (`closing`: the `]` just seen, at most 2).
    CData { closing: usize },
    /// Inside `<!-- … -->` (`closing`: the `-` just seen, at most 2).
    Comment { closing: usize },
}

/// An XML stream with every text run, CDATA section and comment cut after
/// [`MAX_TEXT_BYTES`]: the rest is dropped as it is read, at a character boundary, and the
/// structure is kept (a cut CDATA section or comment still ends; a cut entity reference is
/// closed). Each cut is counted ([`CutTexts::cuts`]), so the reader of the stream knows which
/// text it got cut. A tag longer than [`MAX_TAG_BYTES`] is an error.
pub struct CutTexts<R> {
    inner: R,
    at: At,
    /// Bytes of the current run or tag so far.
    run: usize,
    /// Whether bytes of the current run were dropped.
    dropped: bool,
    /// Runs cut so far.
    cuts: Arc<AtomicU64>,
    /// Whether the current text run has an `&` not closed by `;` yet.
    open_reference: bool,
    /// What passes, waiting to be read.
    out: Vec<u8>,
    taken: usize,
}

impl<R: BufRead> CutTexts<R> {
    /// Cuts the texts of `inner`.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            at: At::Text,
            run: 0,
            dropped: false,
            cuts: Arc::default(),
            open_reference: false,
            out: Vec::with_capacity(8 * 1024),
            taken: 0,
        }
    }

    /// The count of runs cut so far, shared: it grows while the read that meets the cut text
    /// runs (a run is cut only past [`MAX_TEXT_BYTES`] of it, more than one read ahead).
    pub fn cuts(&self) -> Arc<AtomicU64> {
        self.cuts.clone()
    }

    /// Whether `byte`, the next of a run, is dropped: past the cap, and not inside a UTF-8
    /// sequence (a run is cut at a character boundary and stays dropped once cut).
    fn drops(&mut self, byte: u8) -> bool {
        if !self.dropped && self.run > MAX_TEXT_BYTES && (byte & 0xC0) != 0x80 {
            self.dropped = true;
            self.cuts.fetch_add(1, Ordering::SeqCst);
        }
        self.dropped
    }

    /// Scans one byte of the input: passes it to `out` or drops it.
    fn scan(&mut self, byte: u8) -> io::Result<()> {
        const CDATA: &[u8] = b"![CDATA[";
        const COMMENT: &[u8] = b"!--";
        match self.at {
            At::Text => {
                if byte == b'<' {
                    if self.open_reference && self.dropped {
                        self.out.push(b';');
                    }
                    self.at = At::Opening {
                        matched: 0,
                        cdata: false,
                    };
                    self.run = 1;
                    self.dropped = false;
                    self.open_reference = false;
                    self.out.push(byte);
                    return Ok(());
                }
                self.run += 1;
                if self.drops(byte) {
                    return Ok(());
                }
                match byte {
                    b'&' => self.open_reference = true,
                    b';' => self.open_reference = false,
                    _ => {}
                }
                self.out.push(byte);
            }
            At::Opening { matched, cdata } => {
                self.out.push(byte);
                self.run += 1;
                // `<![CDATA[` and `<!--` part at their second byte.
                let cdata = if matched == 1 { byte == b'[' } else { cdata };
                let target = if cdata { CDATA } else { COMMENT };
                self.at = match target.get(matched) == Some(&byte) {
                    true if matched + 1 == target.len() => {
                        self.run = 0;
                        match cdata {
                            true => At::CData { closing: 0 },
                            false => At::Comment { closing: 0 },
                        }
                    }
                    true => At::Opening {
                        matched: matched + 1,
                        cdata,
                    },
                    false => self.in_tag(byte, None),
                };
            }
            At::Tag { quote } => {
                self.run += 1;
                if self.run > MAX_TAG_BYTES {
                    return Err(io::Error::other(format!(
                        "a tag longer than {MAX_TAG_BYTES} bytes"
                    )));
                }
                self.out.push(byte);
                self.at = self.in_tag(byte, quote);
            }
            At::CData { closing } => {
                self.run += 1;
                let ends = byte == b'>' && closing >= 2;
                if ends && self.dropped {
                    self.out.extend_from_slice(b"]]>");
                } else if !self.drops(byte) {
                    self.out.push(byte);
                }
                self.at = match (ends, byte) {
                    (true, _) => self.back_to_text(),
                    (false, b']') => At::CData {
                        closing: (closing + 1).min(2),
                    },
                    _ => At::CData { closing: 0 },
                };
            }
            At::Comment { closing } => {
                self.run += 1;
                let ends = byte == b'>' && closing >= 2;
                if ends && self.dropped {
                    self.out.extend_from_slice(b"-->");
                } else if !self.drops(byte) {
                    self.out.push(byte);
                }
                self.at = match (ends, byte) {
                    (true, _) => self.back_to_text(),
                    (false, b'-') => At::Comment {
                        closing: (closing + 1).min(2),
                    },
                    _ => At::Comment { closing: 0 },
                };
            }
        }
        Ok(())
    }

    /// The state after `byte` inside a tag whose attribute value is quoted by `quote`.
    fn in_tag(&mut self, byte: u8, quote: Option<u8>) -> At {
        match (quote, byte) {
            (None, b'>') => self.back_to_text(),
            (None, b'"' | b'\'') => At::Tag { quote: Some(byte) },
            (Some(q), b) if q == b => At::Tag { quote: None },
            _ => At::Tag { quote },
        }
    }

    fn back_to_text(&mut self) -> At {
        self.run = 0;
        self.dropped = false;
        self.open_reference = false;
        At::Text
    }
}

impl<R: BufRead> Read for CutTexts<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for CutTexts<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.taken >= self.out.len() {
            self.out.clear();
            self.taken = 0;
            let chunk = self.inner.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            let chunk = chunk.to_vec();
            self.inner.consume(chunk.len());
            for byte in chunk {
                self.scan(byte)?;
            }
        }
        Ok(&self.out[self.taken..])
    }

    fn consume(&mut self, amount: usize) {
        self.taken = (self.taken + amount).min(self.out.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        CutTexts::new(input)
            .read_to_end(&mut out)
            .map(|_| out)
            .unwrap_or_default()
    }

    #[test]
    fn ordinary_files_pass_unchanged() {
        let xml = br#"<?xml version="1.0"?><!DOCTYPE x><disqus a="x>y" b='<'><post><!-- c -> --><message><![CDATA[<p>a]b]]c</p>]]></message>&amp;&#233; t</post></disqus>"#;
        assert_eq!(cut(xml), xml.to_vec());
    }

    #[test]
    fn long_texts_are_cut_and_keep_their_structure() {
        let long = "é".repeat(MAX_TEXT_BYTES);
        let twice = format!("<a>{long}</a><b>{long}</b>");
        let mut counted = CutTexts::new(twice.as_bytes());
        let cuts = counted.cuts();
        let mut out = Vec::new();
        assert!(counted.read_to_end(&mut out).is_ok());
        assert_eq!(cuts.load(Ordering::SeqCst), 2);
        for (open, close) in [("", ""), ("<![CDATA[", "]]>"), ("<!--", "-->")] {
            let xml = format!("<a>{open}{long}{close}</a><b>x</b>");
            let out = cut(xml.as_bytes());
            let text = String::from_utf8(out).expect("cut at a character boundary");
            assert!(text.len() < MAX_TEXT_BYTES + 64, "{open}: {}", text.len());
            assert!(text.len() >= MAX_TEXT_BYTES, "{open}");
            assert!(text.ends_with(&format!("{close}</a><b>x</b>")), "{open}");
        }
        let references = format!("<a>{}</a>", "&amp;".repeat(MAX_TEXT_BYTES));
        let out = String::from_utf8(cut(references.as_bytes())).expect("utf-8");
        assert!(out.ends_with(";</a>"), "a cut reference is closed");
    }

    #[test]
    fn endless_tags_are_errors() {
        let xml = format!("<a b=\"{}\"/>", "x".repeat(MAX_TAG_BYTES));
        let mut out = Vec::new();
        assert!(CutTexts::new(xml.as_bytes()).read_to_end(&mut out).is_err());
    }

    #[test]
    fn expansion_stops_past_its_limit() {
        let mut out = Vec::new();
        let read = Expansion::new(&[0_u8; 100][..], 99).read_to_end(&mut out);
        assert!(read.is_err_and(|e| e.to_string().contains("THREADQL_IMPORT_MAX_EXPANDED")));
        let read = Expansion::new(&[0_u8; 100][..], 100).read_to_end(&mut out);
        assert!(read.is_ok());
    }
}
