//! User text made fit for a subject or a one-line mention: one line, no control characters,
//! shortened to a length.

use unicode_segmentation::UnicodeSegmentation;

/// `text` on one line: control characters (line breaks among them) become spaces, runs of
/// white space one space, and the ends are trimmed. User text is made safe for a header so.
pub(super) fn one_line(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A discussion's title on one line, or a stand-in for an empty one.
pub(super) fn title_line(title: &str) -> String {
    let line = one_line(title);
    if line.is_empty() {
        "Untitled discussion".to_owned()
    } else {
        line
    }
}

/// `text` cut to at most `max` characters, ending in `…` when cut: whole graphemes only, and
/// whole words when that keeps at least half of it.
pub(super) fn shortened(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut count = 0;
    let mut mid_word = false;
    for grapheme in text.graphemes(true) {
        let chars = grapheme.chars().count();
        if count + chars + 1 > max {
            mid_word = !grapheme.chars().all(char::is_whitespace);
            break;
        }
        out.push_str(grapheme);
        count += chars;
    }
    if mid_word {
        if let Some(space) = out.rfind(char::is_whitespace) {
            if out[..space].chars().count() >= max / 2 {
                out.truncate(space);
            }
        }
    }
    format!("{}…", out.trim_end())
}
