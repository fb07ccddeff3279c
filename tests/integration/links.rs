//! The documentation links only files that exist: every relative link `[text](path)` or
//! `[text](path#anchor)` in every Markdown file of the repository names a file or folder that is
//! there. Links with a scheme (`https:`, `mailto:`) and links to an anchor of the same page are
//! left alone, and so is code (fenced blocks and `code spans`).

use crate::support::{files_with_extension, repository};

#[test]
fn every_relative_markdown_link_names_a_file_that_exists() {
    let root = repository();
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in files_with_extension(&root, "md") {
        let text = std::fs::read_to_string(&page).expect("a readable Markdown file");
        let dir = page.parent().unwrap_or(&root);
        for (line, target) in relative_links(&text) {
            checked += 1;
            let file = match target.strip_prefix('/') {
                Some(from_root) => root.join(from_root),
                None => dir.join(&target),
            };
            if !file.exists() {
                let shown = page.strip_prefix(&root).unwrap_or(&page).display();
                broken.push(format!("{shown}:{line}: {target}"));
            }
        }
    }
    assert!(
        checked > 0,
        "no relative link found: is the repository root right?"
    );
    assert!(
        broken.is_empty(),
        "links to files that do not exist:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_scan_finds_relative_links_outside_code() {
    let text = "\
# A [title](one.md)
See [two](docs/two.md#anchor \"a title\"), [three](<with space.md>), ![four](img/four.png)
and [five](a%20b.md?plain=1) [web](https://example.com) [mail](mailto:a@b.c) [here](#anchor)
`[code](not-a-link.md)`, [a `span`](six.md) and [nested (parens)](seven_(b).md).
```text
[fenced](not-a-link.md)
```
~~~
[tilde](not-a-link.md)
~~~
";
    assert_eq!(
        relative_links(text),
        [
            (1, "one.md".to_owned()),
            (2, "docs/two.md".to_owned()),
            (2, "with space.md".to_owned()),
            (2, "img/four.png".to_owned()),
            (3, "a b.md".to_owned()),
            (4, "six.md".to_owned()),
            (4, "seven_(b).md".to_owned()),
        ]
    );
}

/// The relative link targets of a Markdown text (without anchor or query, `%20` decoded), with
/// their lines; links in code are not links.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut fence: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let first = trimmed.chars().next().filter(|&c| c == '`' || c == '~');
        let marker: String = trimmed.chars().take_while(|&c| Some(c) == first).collect();
        let is_fence = marker.len() >= 3;
        match &fence {
            Some(open) => {
                if is_fence && marker.starts_with(open.as_str()) {
                    fence = None;
                }
                continue;
            }
            None if is_fence => {
                fence = Some(marker);
                continue;
            }
            None => {}
        }
        let prose = without_code_spans(line);
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let target = link_target(after);
            rest = &after[target.len().min(after.len())..];
            if let Some(path) = relative_path(target) {
                links.push((index + 1, path));
            }
        }
    }
    links
}

/// The line with its code spans (`` `...` ``) removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        out.push_str(&rest[..open]);
        let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(ticks);
        let inside = &rest[open + ticks..];
        match inside.find(&fence) {
            Some(close) => rest = &inside[close + ticks..],
            None => {
                rest = inside;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What is inside a link's parentheses, given the text after its `(`: up to the `)` that closes
/// it.
fn link_target(after: &str) -> &str {
    let mut depth = 0;
    for (i, c) in after.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return &after[..i],
            ')' => depth -= 1,
            _ => {}
        }
    }
    after
}

/// The file a link target names, if it is a relative link to a file: without its title, its
/// anchor and its query, `%20` decoded.
fn relative_path(target: &str) -> Option<String> {
    let target = target.trim();
    let path = match target.strip_prefix('<') {
        Some(inside) => inside.split('>').next().unwrap_or(""),
        None => target.split_whitespace().next().unwrap_or(""),
    };
    let path = path.split(['#', '?']).next().unwrap_or("");
    let scheme = path.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if path.is_empty() || scheme {
        return None;
    }
    Some(path.replace("%20", " "))
}
