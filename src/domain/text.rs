//! The character rules every client text follows (comment text and titles): what is invisible
//! (text made only of it is blank), which controls are refused, and how bidirectional controls
//! are kept inside the text.

use super::DomainError;

/// Characters that show nothing by themselves: Unicode's format characters (general category
/// Cf, Unicode 16.0), the other default-ignorable code points (combining grapheme joiner,
/// variation selectors, the Hangul fillers, the reserved ignorable ranges) and the Braille blank.
/// White space is told by `char::is_whitespace`. Sorted, not overlapping.
const INVISIBLE: &[(char, char)] = &[
    ('\u{AD}', '\u{AD}'),
    ('\u{34F}', '\u{34F}'),
    ('\u{600}', '\u{605}'),
    ('\u{61C}', '\u{61C}'),
    ('\u{6DD}', '\u{6DD}'),
    ('\u{70F}', '\u{70F}'),
    ('\u{890}', '\u{891}'),
    ('\u{8E2}', '\u{8E2}'),
    ('\u{115F}', '\u{1160}'),
    ('\u{17B4}', '\u{17B5}'),
    ('\u{180B}', '\u{180F}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{206F}'),
    ('\u{2800}', '\u{2800}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{FE00}', '\u{FE0F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFA0}', '\u{FFA0}'),
    ('\u{FFF0}', '\u{FFFB}'),
    ('\u{110BD}', '\u{110BD}'),
    ('\u{110CD}', '\u{110CD}'),
    ('\u{13430}', '\u{1343F}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0000}', '\u{E0FFF}'),
];

/// Whether a character shows nothing by itself: white space, a format character, another
/// default-ignorable code point, or the Braille blank.
pub fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || INVISIBLE
            .binary_search_by(|&(low, high)| {
                if high < c {
                    std::cmp::Ordering::Less
                } else if low > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
}

/// Whether text is blank: empty, or made only of invisible characters.
pub fn is_blank(text: &str) -> bool {
    text.chars().all(is_invisible)
}

/// Checks the characters of a client text named `what`: no control character other than those
/// in `allowed`.
pub fn check_characters(text: &str, what: &str, allowed: &[char]) -> Result<(), DomainError> {
    if let Some(c) = text
        .chars()
        .find(|c| c.is_control() && !allowed.contains(c))
    {
        let fine = match allowed {
            [] => String::new(),
            _ => "; newlines and tabs are fine".to_owned(),
        };
        return Err(DomainError::bad_input(format!(
            "{what} must not contain control characters (found U+{:04X}){fine}",
            u32::from(c)
        )));
    }
    Ok(())
}

/// An open bidirectional embedding or override (closed by U+202C), or isolate (by U+2069).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Embedding,
    Isolate,
}

/// Keeps the bidirectional controls of a text inside it: closes the embeddings and overrides
/// (U+202A, U+202B, U+202D, U+202E) and the isolates (U+2066–U+2068) its last paragraph leaves
/// open, by appending U+202C and U+2069, so none reorders what is displayed after the text. It
/// matches them as Unicode's bidirectional algorithm does (UAX #9): U+202C closes the latest
/// embedding opened since the latest isolate, U+2069 closes the latest isolate and whatever
/// opened after it, a paragraph separator closes everything, and a closer with nothing to close
/// does nothing. A balanced text is unchanged.
pub fn close_bidi(text: &mut String) {
    let mut open: Vec<Open> = Vec::new();
    for c in text.chars() {
        match c {
            '\u{202A}' | '\u{202B}' | '\u{202D}' | '\u{202E}' => open.push(Open::Embedding),
            '\u{2066}'..='\u{2068}' => open.push(Open::Isolate),
            '\u{202C}' if open.last() == Some(&Open::Embedding) => {
                open.pop();
            }
            '\u{2069}' => {
                if let Some(at) = open.iter().rposition(|o| *o == Open::Isolate) {
                    open.truncate(at);
                }
            }
            '\n' | '\r' | '\u{1C}'..='\u{1E}' | '\u{85}' | '\u{2029}' => open.clear(),
            _ => {}
        }
    }
    text.extend(open.iter().rev().map(|o| match o {
        Open::Embedding => '\u{202C}',
        Open::Isolate => '\u{2069}',
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_apart() {
        for pair in INVISIBLE.windows(2) {
            assert!(pair[0].0 <= pair[0].1 && pair[0].1 < pair[1].0, "{pair:?}");
        }
    }

    #[test]
    fn invisible_characters_make_blank_text() {
        for blank in [
            "",
            " \n\t",
            "\u{200B}",
            "\u{200B}\u{200C}\u{200D}\u{200E}\u{200F}",
            "\u{2060}\u{2061}\u{2062}\u{2063}\u{2064}",
            "\u{FEFF}",
            "\u{202A}\u{202E}\u{2066}\u{2069}",
            "\u{115F}\u{1160}\u{3164}\u{FFA0}",
            "\u{2800}",
            "\u{AD}\u{34F}\u{FE0F}\u{E0001}\u{E0041}\u{E0100}",
            "\u{3000}\u{A0}\u{2028}",
            " \u{200B} \u{FEFF} ",
        ] {
            assert!(is_blank(blank), "{blank:?}");
        }
        for visible in ["a", "\u{200B}a", ".", "👍", "\u{2801}", "ㅎ", "\u{300}"] {
            assert!(!is_blank(visible), "{visible:?}");
        }
    }

    #[test]
    fn open_bidirectional_controls_are_closed_at_the_end() {
        let closed = |text: &str| {
            let mut text = text.to_owned();
            close_bidi(&mut text);
            text
        };
        for balanced in [
            "plain",
            "\u{202E}txet\u{202C} \u{200F}שלום\u{200E} and \u{2067}isolate\u{2069}",
            "\u{2068}\u{202B}a\u{2069}",
            "open\u{202E} then\nclosed by the paragraph",
            "stray closers\u{202C}\u{2069}",
        ] {
            assert_eq!(closed(balanced), balanced);
        }
        assert_eq!(closed("evil\u{202E}exe.txt"), "evil\u{202E}exe.txt\u{202C}");
        assert_eq!(
            closed("\u{2067}a\u{202D}b"),
            "\u{2067}a\u{202D}b\u{202C}\u{2069}"
        );
        assert_eq!(
            closed("\u{202A}\u{2066}x"),
            "\u{202A}\u{2066}x\u{2069}\u{202C}"
        );
        // A PDF does not close an embedding across a later isolate; a PDI does not need one.
        assert_eq!(
            closed("\u{202B}\u{2066}\u{202C}"),
            "\u{202B}\u{2066}\u{202C}\u{2069}\u{202C}"
        );
        assert_eq!(closed("\u{202E}a\u{2069}"), "\u{202E}a\u{2069}\u{202C}");
        assert_eq!(closed("a\n\u{2067}b"), "a\n\u{2067}b\u{2069}");
    }

    #[test]
    fn control_characters_are_refused_but_those_allowed() {
        assert!(check_characters("a\nb\tc", "text", &['\n', '\t']).is_ok());
        assert!(check_characters("a\nb", "title", &[]).is_err());
        for bad in ["\0", "\u{1b}[31m", "\u{7}", "\u{7F}", "\u{85}", "\r"] {
            let err = check_characters(bad, "text", &['\n', '\t']);
            assert!(matches!(err, Err(DomainError::BadInput(_))), "{bad:?}");
        }
    }
}
