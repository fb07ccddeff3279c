//! Test helpers have one home: no module-level function name is defined in two files of this
//! binary. A helper two files need lives in `support/`; two that differ get names that say how.

use std::collections::BTreeMap;

use crate::support::{files_with_extension, repository};

#[test]
fn no_helper_name_is_defined_in_two_files() {
    let root = repository();
    let tests = root.join("tests/integration");
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in files_with_extension(&tests, "rs") {
        let source = std::fs::read_to_string(&path).expect("a readable test file");
        let file = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        for (name, line) in module_functions(&source) {
            defined
                .entry(name)
                .or_default()
                .push(format!("{file}:{line}"));
        }
    }
    let twice: Vec<String> = defined
        .iter()
        .filter(|(_, places)| distinct_files(places) > 1)
        .map(|(name, places)| format!("{name}: {}", places.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "helper names defined in more than one file (keep one in tests/integration/support/, \
         or give those that differ distinct names):\n{}",
        twice.join("\n")
    );
}

#[test]
fn the_scan_sees_module_functions_only() {
    let source = r####"
        //! fn in_a_comment() {}
        use x::y;
        /// fn in_a_doc() {}
        pub(crate) async fn helper(a: impl Fn(u8), b: [u8; 2]) -> Vec<u8> {
            fn nested() {}
            let s = "fn in_a_string() { {";
            let r = r#"fn in_a_raw_string() }"#;
            let c = '{';
            vec![]
        }
        #[tokio::test(flavor = "multi_thread")]
        async fn a_test() {}
        #[test]
        fn another_test() {}
        impl<'a> Thing<'a> {
            fn method(&self) {}
        }
        trait Shape {
            fn area(&self) -> f64;
        }
        macro_rules! suite {
            ($m:ident) => { mod $m { fn in_a_macro() {} } };
        }
        type Callback = fn(u8) -> u8;
        mod inner {
            /* fn in_a_block /* nested */ comment() {} */
            fn in_a_module() {}
        }
        const fn constant() -> u8 { 1 }
    "####;
    let names: Vec<String> = module_functions(source)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, ["helper", "in_a_module", "constant"]);
}

/// How many files the places (`file:line`) are in.
fn distinct_files(places: &[String]) -> usize {
    let mut files: Vec<&str> = places
        .iter()
        .map(|p| p.rsplit_once(':').map_or(p.as_str(), |(file, _)| file))
        .collect();
    files.dedup();
    files.len()
}

/// The functions of a source file defined at module level (in the file or in a `mod` block), with
/// their lines: not methods, not functions inside functions or macro definitions, not tests.
fn module_functions(source: &str) -> Vec<(String, usize)> {
    let tokens = tokens(&blank_comments_and_literals(source));
    let mut found = Vec::new();
    // What each open brace opened: a module or anything else.
    let mut blocks: Vec<bool> = Vec::new();
    // What the next brace at depth 0 of `(`/`[` opens, once an item's keyword is seen.
    let mut opening: Option<&str> = None;
    let mut test_attribute = false;
    let mut nesting = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let (token, line) = (tokens[i].0.as_str(), tokens[i].1);
        match token {
            "#" => {
                // An attribute: `#[...]` or `#![...]`.
                let mut j = i + 1;
                if tokens.get(j).is_some_and(|t| t.0 == "!") {
                    j += 1;
                }
                if tokens.get(j).is_some_and(|t| t.0 == "[") {
                    let mut depth = 0;
                    while j < tokens.len() {
                        match tokens[j].0.as_str() {
                            "[" => depth += 1,
                            "]" => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            "test" => test_attribute = true,
                            _ => {}
                        }
                        j += 1;
                    }
                    i = j;
                }
            }
            "(" | "[" => nesting += 1,
            ")" | "]" => nesting = nesting.saturating_sub(1),
            ";" if nesting == 0 => {
                opening = None;
                test_attribute = false;
            }
            "{" => {
                blocks.push(opening == Some("mod"));
                opening = None;
                test_attribute = false;
            }
            "}" => {
                blocks.pop();
            }
            "mod" | "impl" | "trait" | "macro_rules" if opening.is_none() => opening = Some(token),
            "fn" if opening.is_none() => {
                let name = tokens.get(i + 1).map_or("", |t| t.0.as_str());
                if is_identifier(name) {
                    opening = Some("fn");
                    if !test_attribute && blocks.iter().all(|&module| module) {
                        found.push((name.to_owned(), line));
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// Whether a token is a name (rather than punctuation).
fn is_identifier(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The source's names and punctuation with their lines; literals and comments must be blank.
fn tokens(source: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_string();
            while let Some(&next) = chars.peek() {
                if !(next.is_alphanumeric() || next == '_') {
                    break;
                }
                word.push(next);
                chars.next();
            }
            out.push((word, line));
        } else if !c.is_whitespace() {
            out.push((c.to_string(), line));
        }
    }
    out
}

/// The source with comments, strings and character literals replaced by spaces (lines kept), so
/// that no brace or keyword inside them counts.
fn blank_comments_and_literals(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |out: &mut String, text: &[char]| {
        out.extend(text.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        let previous_is_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let end = if rest.starts_with(&['/', '/']) {
            Some(rest.iter().position(|&c| c == '\n').unwrap_or(rest.len()))
        } else if rest.starts_with(&['/', '*']) {
            Some(block_comment_len(rest))
        } else if !previous_is_word && raw_string_start(rest).is_some() {
            raw_string_start(rest).map(|(open, hashes)| raw_string_len(rest, open, hashes))
        } else if rest[0] == '"' || (!previous_is_word && rest.starts_with(&['b', '"'])) {
            Some(string_len(rest))
        } else if rest[0] == '\'' {
            char_literal_len(rest)
        } else {
            None
        };
        match end {
            Some(len) => {
                blank(&mut out, &rest[..len]);
                i += len;
            }
            None => {
                out.push(rest[0]);
                i += 1;
            }
        }
    }
    out
}

/// The length of a (possibly nested) block comment at the start of `rest`.
fn block_comment_len(rest: &[char]) -> usize {
    let (mut depth, mut i) = (0, 0);
    while i < rest.len() {
        if rest[i..].starts_with(&['/', '*']) {
            depth += 1;
            i += 2;
        } else if rest[i..].starts_with(&['*', '/']) {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    rest.len()
}

/// For a raw string at the start of `rest` (`r"`, `r#"`, `br##"`, ...): the length of its
/// opening and its number of `#`.
fn raw_string_start(rest: &[char]) -> Option<(usize, usize)> {
    let mut i = usize::from(rest.first() == Some(&'b'));
    if rest.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = rest[i..].iter().take_while(|&&c| c == '#').count();
    (rest.get(i + hashes) == Some(&'"')).then_some((i + hashes + 1, hashes))
}

/// The length of a raw string whose opening is `open` characters long.
fn raw_string_len(rest: &[char], open: usize, hashes: usize) -> usize {
    let mut i = open;
    while i < rest.len() {
        if rest[i] == '"'
            && rest[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    rest.len()
}

/// The length of a string (`"..."` or `b"..."`) at the start of `rest`.
fn string_len(rest: &[char]) -> usize {
    let mut i = rest.iter().position(|&c| c == '"').unwrap_or(0) + 1;
    while i < rest.len() {
        match rest[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    rest.len()
}

/// The length of a character literal at the start of `rest`, or `None` for a lifetime.
fn char_literal_len(rest: &[char]) -> Option<usize> {
    match rest.get(1) {
        Some('\\') => rest[2..].iter().position(|&c| c == '\'').map(|p| p + 3),
        Some(_) => (rest.get(2) == Some(&'\'')).then_some(3),
        None => None,
    }
}
