//! Word lists: which listed word or phrase a text contains, on whole words, ignoring case, after
//! NFKC normalisation. No I/O: the files are read at start and handed here as bytes.

use std::collections::{HashMap, VecDeque};

use thiserror::Error;
use unicode_normalization::UnicodeNormalization as _;
use unicode_segmentation::UnicodeSegmentation as _;

use super::text::is_invisible;

/// What screening a text against the word lists found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screening {
    /// No listed word or phrase.
    Clean,
    /// A suspect word or phrase, and no banned one.
    Suspect {
        /// The list entry found first, as its file writes it.
        matched: String,
    },
    /// A banned word or phrase (whatever suspect ones there are too).
    Banned {
        /// The list entry found first, as its file writes it.
        matched: String,
    },
}

/// Why a word list was refused, and on which line (counted from 1).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ListError {
    /// The line is not UTF-8.
    #[error("line {line} is not valid UTF-8")]
    NotUtf8 {
        /// The line.
        line: usize,
    },
    /// The line has no word once normalised: only punctuation, symbols or invisible characters.
    #[error("line {line} ({entry:?}) has no word in it (letters or digits); write one word or phrase a line, and start comment lines with #")]
    NoWords {
        /// The line.
        line: usize,
        /// What it holds, trimmed.
        entry: String,
    },
}

/// One entry of a list: as written, and its normalised words.
#[derive(Debug, Clone)]
struct Entry {
    written: String,
    words: Vec<String>,
}

/// One word list: its words and phrases, in file order.
#[derive(Debug, Clone, Default)]
pub struct WordList {
    entries: Vec<Entry>,
}

impl WordList {
    /// Reads a list file: UTF-8 (a leading byte-order mark is skipped), one word or phrase a
    /// line, surrounding white space trimmed, blank lines and lines starting with `#` skipped.
    /// A line that is not UTF-8, or that holds no word once normalised, is refused with its
    /// number.
    pub fn parse(file: &[u8]) -> Result<Self, ListError> {
        let file = file.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(file);
        let mut list = WordList::default();
        for (at, line) in file.split(|&byte| byte == b'\n').enumerate() {
            let line_number = at + 1;
            let line =
                std::str::from_utf8(line).map_err(|_| ListError::NotUtf8 { line: line_number })?;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if !list.push(line) {
                return Err(ListError::NoWords {
                    line: line_number,
                    entry: line.to_owned(),
                });
            }
        }
        Ok(list)
    }

    /// A list of these entries (each a word or phrase; no comments or blank entries). An entry
    /// with no word once normalised is refused with its place in the list, counted from 1.
    pub fn from_entries<I, S>(entries: I) -> Result<Self, ListError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list = WordList::default();
        for (at, entry) in entries.into_iter().enumerate() {
            let entry = entry.as_ref().trim();
            if !list.push(entry) {
                return Err(ListError::NoWords {
                    line: at + 1,
                    entry: entry.to_owned(),
                });
            }
        }
        Ok(list)
    }

    /// Adds an entry; false when it has no word.
    fn push(&mut self, written: &str) -> bool {
        let words: Vec<String> = fold(written).unicode_words().map(str::to_owned).collect();
        if words.is_empty() {
            return false;
        }
        self.entries.push(Entry {
            written: written.to_owned(),
            words,
        });
        true
    }

    /// How many words and phrases it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Connector punctuation (general category Pc): Unicode's word rules keep it inside a word
/// ("snake_case"), but Markdown writes emphasis with it (`_word_`), so it separates words here.
const CONNECTORS: &[char] = &[
    '_', '\u{203F}', '\u{2040}', '\u{2054}', '\u{FE33}', '\u{FE34}', '\u{FE4D}', '\u{FE4E}',
    '\u{FE4F}', '\u{FF3F}',
];

/// A text as the lists compare it: invisible characters (format characters such as U+200B or
/// the soft hyphen, other default-ignorable code points) dropped, NFKC-normalised, its case
/// folded, normalised again, and connector punctuation made a space. Case is folded by
/// lower-casing, upper-casing and lower-casing again, with final sigma written as sigma: "ß",
/// "ẞ", "SS" and "ss" agree, as do "ς", "σ" and "Σ", and "ı", "I" and "i".
fn fold(text: &str) -> String {
    let visible = text
        .chars()
        .filter(|&c| c.is_whitespace() || !is_invisible(c));
    let compatible: String = visible.nfkc().collect();
    compatible
        .to_lowercase()
        .to_uppercase()
        .to_lowercase()
        .chars()
        .map(|c| if c == 'ς' { 'σ' } else { c })
        .nfkc()
        .map(|c| if CONNECTORS.contains(&c) { ' ' } else { c })
        .collect()
}

/// Which list an entry is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Banned,
    Suspect,
}

/// The banned and suspect lists, indexed together: one pass over a text's words finds the
/// listed words and phrases in it, whatever the lists' sizes.
///
/// The index is an Aho–Corasick automaton over words: a trie of the entries' word sequences
/// (each distinct word numbered once), with failure links, so a text of `n` words costs at most
/// `2n` steps plus one lookup per word.
#[derive(Debug, Default)]
pub struct WordLists {
    /// Each distinct word of the entries, numbered.
    vocabulary: HashMap<String, u32>,
    /// The trie's edges: (state, word) → state. State 0 is the root.
    next: HashMap<(u32, u32), u32>,
    /// Each state's failure link: the state of its longest proper suffix in the trie.
    fail: Vec<u32>,
    /// The first banned entry that ends at each state, or at a suffix of it.
    banned: Vec<Option<u32>>,
    /// The first suspect entry that ends at each state, or at a suffix of it.
    suspect: Vec<Option<u32>>,
    /// The entries as written, by number.
    written: Vec<String>,
    banned_entries: usize,
    suspect_entries: usize,
}

impl WordLists {
    /// Indexes the two lists. An entry on both counts as banned; an entry twice on one list
    /// reports its first spelling.
    pub fn new(banned: WordList, suspect: WordList) -> Self {
        let mut lists = WordLists {
            fail: vec![0],
            banned: vec![None],
            suspect: vec![None],
            banned_entries: banned.len(),
            suspect_entries: suspect.len(),
            ..WordLists::default()
        };
        let mut children: Vec<Vec<(u32, u32)>> = vec![Vec::new()];
        let entries = banned
            .entries
            .into_iter()
            .map(|entry| (Kind::Banned, entry))
            .chain(suspect.entries.into_iter().map(|e| (Kind::Suspect, e)));
        for (kind, entry) in entries {
            let mut state = 0_u32;
            for word in entry.words {
                let next_word = lists.vocabulary.len() as u32;
                let word = *lists.vocabulary.entry(word).or_insert(next_word);
                state = match lists.next.get(&(state, word)) {
                    Some(&to) => to,
                    None => {
                        let to = lists.fail.len() as u32;
                        lists.fail.push(0);
                        lists.banned.push(None);
                        lists.suspect.push(None);
                        children.push(Vec::new());
                        lists.next.insert((state, word), to);
                        children[state as usize].push((word, to));
                        to
                    }
                };
            }
            let number = lists.written.len() as u32;
            let slot = match kind {
                Kind::Banned => &mut lists.banned[state as usize],
                Kind::Suspect => &mut lists.suspect[state as usize],
            };
            if slot.is_none() {
                *slot = Some(number);
                lists.written.push(entry.written);
            }
        }
        // Failure links, breadth first: a state's link is found from its parent's, and its
        // matches include those of its link, which is shallower and so already complete.
        let mut queue: VecDeque<u32> = children[0].iter().map(|&(_, child)| child).collect();
        while let Some(state) = queue.pop_front() {
            for &(word, child) in &children[state as usize] {
                let mut link = lists.fail[state as usize];
                let target = loop {
                    if let Some(&to) = lists.next.get(&(link, word)) {
                        break to;
                    }
                    if link == 0 {
                        break 0;
                    }
                    link = lists.fail[link as usize];
                };
                let child_at = child as usize;
                lists.fail[child_at] = target;
                let target = target as usize;
                lists.banned[child_at] = lists.banned[child_at].or(lists.banned[target]);
                lists.suspect[child_at] = lists.suspect[child_at].or(lists.suspect[target]);
                queue.push_back(child);
            }
        }
        lists
    }

    /// Banned words and phrases.
    pub fn banned_len(&self) -> usize {
        self.banned_entries
    }

    /// Suspect words and phrases.
    pub fn suspect_len(&self) -> usize {
        self.suspect_entries
    }

    /// Whether both lists are empty (every text is clean).
    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// Screens a text: `Banned` when it holds a banned word or phrase, else `Suspect` when it
    /// holds a suspect one, else `Clean`. Words are told apart by Unicode word boundaries
    /// (UAX #29), after the text is normalised as the lists are (invisible characters dropped,
    /// NFKC, case folded); a phrase matches its words in a row, whatever white space or
    /// punctuation lies between them. Accents are kept: "cafe" does not match "café".
    pub fn screen(&self, text: &str) -> Screening {
        self.scan(text).0
    }

    /// [`WordLists::screen`], and the steps it took through the index.
    fn scan(&self, text: &str) -> (Screening, usize) {
        let mut steps = 0;
        if self.is_empty() {
            return (Screening::Clean, steps);
        }
        let folded = fold(text);
        let mut state = 0_u32;
        let mut suspect = None;
        for word in folded.unicode_words() {
            state = match self.vocabulary.get(word) {
                None => 0,
                Some(&id) => loop {
                    steps += 1;
                    if let Some(&to) = self.next.get(&(state, id)) {
                        break to;
                    }
                    if state == 0 {
                        break 0;
                    }
                    state = self.fail[state as usize];
                },
            };
            if let Some(entry) = self.banned[state as usize] {
                let matched = self.written[entry as usize].clone();
                return (Screening::Banned { matched }, steps);
            }
            suspect = suspect.or(self.suspect[state as usize]);
        }
        let screening = match suspect {
            Some(entry) => Screening::Suspect {
                matched: self.written[entry as usize].clone(),
            },
            None => Screening::Clean,
        };
        (screening, steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(entries: &[&str]) -> WordList {
        WordList::from_entries(entries).unwrap()
    }

    fn banning(entries: &[&str]) -> WordLists {
        WordLists::new(list(entries), WordList::default())
    }

    fn banned(matched: &str) -> Screening {
        Screening::Banned {
            matched: matched.to_owned(),
        }
    }

    fn suspect(matched: &str) -> Screening {
        Screening::Suspect {
            matched: matched.to_owned(),
        }
    }

    #[test]
    fn whole_words_only() {
        let lists = banning(&["ass", "spam"]);
        assert_eq!(lists.screen("what an ass."), banned("ass"));
        assert_eq!(lists.screen("ASS"), banned("ass"));
        assert_eq!(lists.screen("(ass)"), banned("ass"));
        assert_eq!(lists.screen("spam-spam"), banned("spam"));
        assert_eq!(lists.screen("\"spam\", she said"), banned("spam"));
        // Markdown emphasis: connector punctuation separates words.
        assert_eq!(lists.screen("_spam_ and *more*"), banned("spam"));
        assert_eq!(lists.screen("what_an_ass"), banned("ass"));
        assert_eq!(lists.screen("[spam](https://example.com)"), banned("spam"));
        for clean in [
            "a first-class pass",
            "assassin",
            "classes",
            "spammer",
            "antispam",
            "spam123",
            "",
            "   ",
        ] {
            assert_eq!(lists.screen(clean), Screening::Clean, "{clean:?}");
        }
    }

    #[test]
    fn phrases_match_their_words_in_a_row() {
        let lists = banning(&["buy now"]);
        for hit in [
            "BUY   now!",
            "buy now",
            "Buy\nNow",
            "please buy now.",
            "buy, now",
            "buy-now",
            "**buy** _now_",
        ] {
            assert_eq!(lists.screen(hit), banned("buy now"), "{hit:?}");
        }
        for clean in [
            "buy nowhere",
            "rebuy now",
            "buy it now",
            "now buy",
            "buy",
            "now",
        ] {
            assert_eq!(lists.screen(clean), Screening::Clean, "{clean:?}");
        }
        // A phrase is found after a false start that shares its first word.
        assert_eq!(lists.screen("buy buy now"), banned("buy now"));
        let lists = banning(&["a b c", "b d"]);
        assert_eq!(lists.screen("a b d"), banned("b d"));
        assert_eq!(lists.screen("a b a b c"), banned("a b c"));
        assert_eq!(lists.screen("a b"), Screening::Clean);
    }

    #[test]
    fn case_and_compatibility_forms_are_ignored() {
        let lists = banning(&["spam", "office", "straße", "σας", "Ärger", "ss"]);
        for (text, matched) in [
            ("ＳＰＡＭ", "spam"),
            ("ｓｐａｍ！", "spam"),
            ("Spam", "spam"),
            ("the o\u{FB03}ce", "office"),
            ("STRAẞE", "straße"),
            ("ẞ", "ss"),
            ("STRASSE", "straße"),
            ("Strasse", "straße"),
            ("ΣΑΣ", "σας"),
            ("σασ", "σας"),
            ("ärger", "Ärger"),
            ("A\u{308}RGER", "Ärger"),
            ("sp\u{200B}am", "spam"),
            ("sp\u{AD}am", "spam"),
            ("s\u{2060}p\u{FEFF}am", "spam"),
            ("\u{1D42C}\u{1D429}\u{1D41A}\u{1D426}", "spam"),
        ] {
            assert_eq!(lists.screen(text), banned(matched), "{text:?}");
        }
    }

    #[test]
    fn accents_are_kept() {
        let lists = banning(&["cafe"]);
        assert_eq!(lists.screen("un café"), Screening::Clean);
        assert_eq!(lists.screen("un cafe\u{301}"), Screening::Clean);
        assert_eq!(lists.screen("un CAFE"), banned("cafe"));
        let lists = banning(&["café"]);
        assert_eq!(lists.screen("CAFE\u{301}"), banned("café"));
        assert_eq!(lists.screen("cafe"), Screening::Clean);
    }

    #[test]
    fn other_scripts_have_words_too() {
        let lists = banning(&["дурак", "馬鹿", "كلب", "ばか"]);
        assert_eq!(lists.screen("ты ДУРАК!"), banned("дурак"));
        assert_eq!(lists.screen("дураки"), Screening::Clean);
        // Han characters are words of their own (no dictionary), so a two-character entry is
        // a phrase of two.
        assert_eq!(lists.screen("お前は馬鹿だ"), banned("馬鹿"));
        assert_eq!(lists.screen("馬と鹿"), Screening::Clean);
        assert_eq!(lists.screen("هذا كلب."), banned("كلب"));
        assert_eq!(lists.screen("ばか。"), banned("ばか"));
    }

    #[test]
    fn banned_wins_over_suspect() {
        let lists = WordLists::new(
            list(&["scam", "free money now"]),
            list(&["free money", "crypto", "scam"]),
        );
        assert_eq!(lists.screen("crypto scam"), banned("scam"));
        assert_eq!(lists.screen("scam crypto"), banned("scam"));
        assert_eq!(lists.screen("SCAM"), banned("scam"));
        assert_eq!(lists.screen("free money now!"), banned("free money now"));
        assert_eq!(lists.screen("free money later"), suspect("free money"));
        assert_eq!(lists.screen("Crypto, then free money"), suspect("crypto"));
        assert_eq!(lists.screen("cryptography"), Screening::Clean);
        assert_eq!(lists.banned_len(), 2);
        assert_eq!(lists.suspect_len(), 3);
    }

    #[test]
    fn the_first_spelling_of_a_repeated_entry_is_reported() {
        let lists = banning(&["Spam", "SPAM", "spam"]);
        assert_eq!(lists.screen("spam"), banned("Spam"));
        assert_eq!(banning(&["ﬁne"]).screen("FINE"), banned("ﬁne"));
    }

    #[test]
    fn empty_lists_pass_everything() {
        let lists = WordLists::default();
        assert!(lists.is_empty());
        assert_eq!(lists.screen("anything at all"), Screening::Clean);
        let lists = WordLists::new(WordList::default(), WordList::default());
        assert!(lists.is_empty());
        assert_eq!(lists.screen("spam"), Screening::Clean);
    }

    #[test]
    fn files_have_comments_blank_lines_and_trimmed_entries() {
        let file = "\u{FEFF}# banned words\n\n  spam  \r\n\tbuy now\n# the end\n   \nfree  money\n";
        let parsed = WordList::parse(file.as_bytes()).unwrap();
        let written: Vec<&str> = parsed.entries.iter().map(|e| e.written.as_str()).collect();
        assert_eq!(written, ["spam", "buy now", "free  money"]);
        assert_eq!(parsed.entries[2].words, ["free", "money"]);
        assert!(WordList::parse(b"").unwrap().is_empty());
        assert!(WordList::parse(b"# nothing\n\n").unwrap().is_empty());
        let lists = WordLists::new(parsed, WordList::default());
        assert_eq!(lists.screen("FREE money!"), banned("free  money"));
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let not_utf8 = WordList::parse(b"spam\n# ok\n\xff\xfeham\n").unwrap_err();
        assert_eq!(not_utf8, ListError::NotUtf8 { line: 3 });
        assert_eq!(not_utf8.to_string(), "line 3 is not valid UTF-8");
        for (file, line, entry) in [
            ("spam\n!!!\n", 2, "!!!"),
            ("\n\n  ---  \n", 3, "---"),
            ("\u{200B}", 1, "\u{200B}"),
            ("ok\n🍆\n", 2, "🍆"),
            ("ok\r\n\u{2800}\r\n", 2, "\u{2800}"),
        ] {
            let err = WordList::parse(file.as_bytes()).unwrap_err();
            assert_eq!(
                err,
                ListError::NoWords {
                    line,
                    entry: entry.to_owned()
                },
                "{file:?}"
            );
            assert!(
                err.to_string().starts_with(&format!("line {line} ")),
                "{err}"
            );
        }
        let err = WordList::from_entries(["ok", " ", "fine"]).unwrap_err();
        assert!(matches!(err, ListError::NoWords { line: 2, .. }), "{err}");
    }

    /// Ten thousand entries against ten thousand characters: the right verdict, with index
    /// steps bounded by the text's words, not by the list.
    #[test]
    fn long_lists_and_long_texts() {
        let entries: Vec<String> = (0..10_000).map(|i| format!("word{i} w{}", i % 7)).collect();
        let mut listed = entries.clone();
        listed.push("needle".to_owned());
        let lists = WordLists::new(
            WordList::from_entries(&listed).unwrap(),
            WordList::from_entries(["haystack"]).unwrap(),
        );
        let mut text = String::new();
        let mut i = 0;
        while text.chars().count() < 9_990 {
            // Every word starts a listed phrase, none ends one.
            text.push_str(&format!("word{i} w{} ", (i + 1) % 7));
            i += 1;
        }
        let words = text.unicode_words().count();
        let (screening, steps) = lists.scan(&text);
        assert_eq!(screening, Screening::Clean);
        assert!(steps <= 2 * words, "{steps} steps for {words} words");
        let (screening, _) = lists.scan(&format!("{text}haystack"));
        assert_eq!(screening, suspect("haystack"));
        let (screening, steps) = lists.scan(&format!("{text}needle"));
        assert_eq!(screening, banned("needle"));
        assert!(steps <= 2 * (words + 1), "{steps}");
        let last = format!("word9999 w{}", 9999 % 7);
        let (screening, _) = lists.scan(&format!("{text}{last}"));
        assert_eq!(screening, banned(&last));
    }

    /// Long phrases that repeat a word: the failure links keep a text of that word linear.
    #[test]
    fn repeated_words_stay_linear() {
        let entries: Vec<String> = (1..=200)
            .map(|n| format!("{} end{n}", "a ".repeat(n)))
            .collect();
        let lists = banning(&entries.iter().map(String::as_str).collect::<Vec<_>>());
        let text = "a ".repeat(5_000);
        let (screening, steps) = lists.scan(&text);
        assert_eq!(screening, Screening::Clean);
        assert!(steps <= 2 * 5_000, "{steps}");
        let (screening, _) = lists.scan(&format!("{text} end17"));
        assert_eq!(screening, banned(&entries[16]));
    }

    /// Every character folds as its upper-case, lower-case and decomposed forms do.
    #[test]
    fn folding_is_invariant_for_every_character() {
        let mut differ = Vec::new();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let alone = c.to_string();
            let forms = [
                alone.to_uppercase(),
                alone.to_lowercase(),
                alone.nfd().collect(),
            ];
            if forms.iter().all(|form| *form == alone) {
                continue;
            }
            let folded = fold(&alone);
            if forms.iter().any(|form| fold(form) != folded) {
                differ.push(c);
            }
        }
        assert!(differ.is_empty(), "{differ:?}");
    }

    /// Letters that stay inside one word whatever is glued to them (UAX #29 ALetter, with
    /// case pairs that round-trip), and characters that always end a word.
    const LETTERS: &[char] = &[
        'a', 'b', 'e', 'i', 'k', 'o', 's', 'z', 'A', 'K', 'S', 'Z', 'é', 'É', 'ß', 'ẞ', 'σ', 'ς',
        'Σ', 'ω', 'д', 'Ж', 'ж', 'ı', 'İ', 'ǅ', 'ﬁ', 'ａ', 'Ｚ', 'µ', 'Å', 'K',
    ];
    const SEPARATORS: &[char] = &[
        ' ', '\n', '\t', '!', '?', ',', ';', '(', ')', '"', '-', '—', '«', '»', '/', '*', '、',
        '。', '\u{3000}', '\u{A0}',
    ];

    fn word() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(LETTERS), 1..6)
            .prop_map(|chars| chars.into_iter().collect())
    }

    fn separators() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(SEPARATORS), 1..4)
            .prop_map(|chars| chars.into_iter().collect())
    }

    /// A text of words from a small vocabulary, so listed phrases turn up often.
    fn text(vocabulary: Vec<String>) -> impl Strategy<Value = String> {
        prop::collection::vec((prop::sample::select(vocabulary), separators()), 0..12)
            .prop_map(|parts| parts.into_iter().map(|(w, s)| w + &s).collect())
    }

    /// Rewrites a text into a compatibility-equivalent one: each character decomposed,
    /// composed, or swapped for a compatibility form, at random.
    fn equivalent(text: &str, choices: &[u8]) -> String {
        let mut out = String::new();
        for (at, c) in text.chars().enumerate() {
            let pick = choices.get(at % choices.len().max(1)).copied().unwrap_or(0);
            let one = c.to_string();
            match pick % 5 {
                0 => out.extend(one.nfd()),
                1 => out.extend(one.nfkd()),
                2 if c.is_ascii_alphabetic() => {
                    out.push(char::from_u32(u32::from(c) - 0x21 + 0xFF01).unwrap_or(c));
                }
                3 if c == 'f' || c == 'k' || c == 'K' => out.push(match c {
                    'f' => '\u{1D41F}',
                    _ => '\u{212A}',
                }),
                4 if c == ' ' => out.push('\u{3000}'),
                _ => out.push(c),
            }
        }
        out
    }

    /// Changes the case of each character, at random.
    fn recased(text: &str, choices: &[u8]) -> String {
        let mut out = String::new();
        for (at, c) in text.chars().enumerate() {
            match choices.get(at % choices.len().max(1)).copied().unwrap_or(0) % 3 {
                0 => out.extend(c.to_uppercase()),
                1 => out.extend(c.to_lowercase()),
                _ => out.push(c),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn screening_ignores_case_and_compatibility_forms(
            (vocabulary, banned, suspect, text) in prop::collection::vec(word(), 1..8)
                .prop_flat_map(|vocabulary| {
                    let phrase = prop::collection::vec(prop::sample::select(vocabulary.clone()), 1..3)
                        .prop_map(|words| words.join(" "));
                    (
                        Just(vocabulary.clone()),
                        prop::collection::vec(phrase.clone(), 0..3),
                        prop::collection::vec(phrase, 0..3),
                        text(vocabulary),
                    )
                }),
            choices in prop::collection::vec(any::<u8>(), 1..32),
            more in prop::collection::vec(any::<u8>(), 1..32),
        ) {
            let _ = vocabulary;
            let lists = WordLists::new(
                WordList::from_entries(&banned).unwrap(),
                WordList::from_entries(&suspect).unwrap(),
            );
            let verdict = lists.screen(&text);
            let kind = |s: &Screening| std::mem::discriminant(s);
            for rewritten in [
                text.to_uppercase(),
                text.to_lowercase(),
                recased(&text, &choices),
                equivalent(&text, &choices),
                recased(&equivalent(&text, &more), &choices),
                text.nfd().collect(),
                text.nfkc().collect(),
            ] {
                prop_assert_eq!(fold(&rewritten), fold(&text), "{:?} -> {:?}", text, rewritten);
                prop_assert_eq!(kind(&lists.screen(&rewritten)), kind(&verdict));
            }
            // The lists' own spelling does not matter either.
            let banned_upper: Vec<String> = banned.iter().map(|e| recased(e, &more)).collect();
            let suspect_nfkd: Vec<String> = suspect.iter().map(|e| e.nfkd().collect()).collect();
            let respelled = WordLists::new(
                WordList::from_entries(&banned_upper).unwrap(),
                WordList::from_entries(&suspect_nfkd).unwrap(),
            );
            prop_assert_eq!(kind(&respelled.screen(&text)), kind(&verdict));
        }

        #[test]
        fn folding_ignores_case_and_compatibility_forms_of_any_text(
            text in any::<String>(),
            choices in prop::collection::vec(any::<u8>(), 1..32),
        ) {
            let folded = fold(&text);
            for rewritten in [
                text.to_uppercase(),
                text.to_lowercase(),
                recased(&text, &choices),
                text.nfd().collect(),
                text.nfkd().collect(),
                equivalent(&text, &choices),
            ] {
                prop_assert_eq!(&fold(&rewritten), &folded, "{:?} -> {:?}", text, rewritten);
            }
        }

        #[test]
        fn a_listed_word_matches_alone_and_never_glued(
            listed in word(),
            other in prop::collection::vec(word(), 0..4),
            before in separators(),
            after in separators(),
            glue_before in "[a-z0-9]{1,3}",
            glue_after in "[a-z0-9]{1,3}",
            choices in prop::collection::vec(any::<u8>(), 1..16),
        ) {
            let lists = banning(&[listed.as_str()]);
            // Words around it, none of them the listed one.
            let around = other
                .into_iter()
                .filter(|word| fold(word) != fold(&listed))
                .collect::<Vec<_>>()
                .join(" ");
            let alone = format!("{around}{before}{}{after}{around}", recased(&listed, &choices));
            prop_assert_eq!(lists.screen(&alone), banned(&listed), "{:?}", alone);
            prop_assert_eq!(lists.screen(&format!("{before}{listed}")), banned(&listed));
            prop_assert_eq!(lists.screen(&format!("{listed}{after}")), banned(&listed));
            for glued in [
                format!("{glue_before}{listed}"),
                format!("{listed}{glue_after}"),
                format!("{glue_before}{listed}{glue_after}"),
            ] {
                prop_assert_eq!(lists.screen(&glued), Screening::Clean, "{:?}", glued);
                let in_text = format!("{around}{before}{glued}{after}{around}");
                prop_assert_eq!(lists.screen(&in_text), Screening::Clean, "{:?}", in_text);
            }
        }
    }
}
