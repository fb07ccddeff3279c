//! docs/ARCHITECTURE.md's module map stays true: every entry names a path that exists, every
//! folder of src/ and every file at its top has an entry, and every module a folder's entry
//! names is a file of that folder.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The map: the code block under "## Module map", one entry per line that starts with a path
/// (continuation lines start with spaces), as (path, description).
fn entries(doc: &str) -> Vec<(String, String)> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Module map"))
        .expect("docs/ARCHITECTURE.md has a '## Module map' section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the module map is a code block");
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with(' ') {
            let last = entries.last_mut().expect("a continuation follows an entry");
            last.1.push(' ');
            last.1.push_str(line.trim());
            continue;
        }
        let (path, text) = line.split_once(' ').unwrap_or((line, ""));
        entries.push((path.to_owned(), text.trim().to_owned()));
    }
    entries
}

/// Every folder under `dir`, relative to the repository, with a trailing `/`.
fn folders(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read a folder of src/") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            let rel = path.strip_prefix(root).expect("under the repository");
            out.insert(format!("{}/", rel.display()));
            folders(root, &path, out);
        }
    }
}

#[test]
fn the_module_map_names_every_folder_and_nothing_that_is_gone() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("read the doc");
    let entries = entries(&doc);
    let listed: BTreeSet<String> = entries.iter().map(|(p, _)| p.clone()).collect();
    let mut problems = Vec::new();
    for (path, text) in &entries {
        let full = root.join(path);
        if !full.exists() {
            problems.push(format!("{path}: listed, but there is no such path"));
            continue;
        }
        if !full.is_dir() {
            continue;
        }
        // Each `name.rs` or `name/` a folder's entry mentions is in that folder.
        for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
            if let Some(stem) = word.strip_suffix(".rs") {
                if !stem.is_empty() && !full.join(word).exists() && !full.join(stem).is_dir() {
                    problems.push(format!("{path}: names {word}, which is not in it"));
                }
            }
        }
    }
    let mut wanted = BTreeSet::new();
    folders(&root, &root.join("src"), &mut wanted);
    for entry in std::fs::read_dir(root.join("src")).expect("read src/") {
        let entry = entry.expect("an entry of src/");
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_file() && name.ends_with(".rs") {
            wanted.insert(format!("src/{name}"));
        }
    }
    for path in wanted.difference(&listed) {
        problems.push(format!("{path}: in src/, but not in the module map"));
    }
    assert!(
        problems.is_empty(),
        "docs/ARCHITECTURE.md's module map is out of date:\n{}",
        problems.join("\n")
    );
}
