//! Test helpers over the fixture files in `tests/fixtures/import`.

use std::collections::HashMap;

use serde_json::Value;

use super::source::{FormatError, Record, SourceComment};

/// A fixture's bytes.
pub(crate) fn bytes(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/import/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// Every record of a file that must read without error.
/// The comment `id` of `records` (fails the test when there is none).
pub(crate) fn comment<'a>(records: &'a [Record], id: &str) -> &'a SourceComment {
    records
        .iter()
        .find_map(|record| match record {
            Record::Comment(comment) if comment.source_id == id => Some(comment),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no comment {id}"))
}

pub(crate) fn records(read: impl Iterator<Item = Result<Record, FormatError>>) -> Vec<Record> {
    read.map(|record| record.unwrap_or_else(|error| panic!("{error}")))
        .collect()
}

/// Checks records against `<name>.expected.json`: each discussion's key, url and title, and
/// each comment's author, text, time, flags, and parent when that parent is in the file.
pub(crate) fn check_expected(records: &[Record], name: &str) {
    let expected: Value = serde_json::from_slice(&bytes(&format!("{name}.expected.json")))
        .unwrap_or_else(|error| panic!("{name}.expected.json: {error}"));
    let discussions: Vec<_> = records
        .iter()
        .filter_map(|record| match record {
            Record::Discussion(discussion) => Some(discussion),
            _ => None,
        })
        .collect();
    let comments: HashMap<&str, _> = records
        .iter()
        .filter_map(|record| match record {
            Record::Comment(comment) => Some((comment.source_id.as_str(), comment)),
            _ => None,
        })
        .collect();
    let listed = expected["discussions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed.len(), discussions.len(), "{name}: discussions");
    assert_eq!(expected["report"]["discussions"], discussions.len());
    assert_eq!(expected["report"]["comments"], comments.len());
    let skipped = records
        .iter()
        .filter(|record| matches!(record, Record::Skipped { .. }))
        .count();
    assert_eq!(expected["report"]["skipped"], skipped);
    let mut seen = 0;
    for (want, got) in listed.iter().zip(&discussions) {
        assert_eq!(want["key"].as_str(), got.key.as_deref(), "{name}: key");
        assert_eq!(want["url"].as_str(), got.url.as_deref(), "{name}: url");
        assert_eq!(want["title"].as_str(), Some(got.title.as_str()));
        for comment in want["comments"].as_array().cloned().unwrap_or_default() {
            seen += 1;
            let source = comment["source"].as_str().unwrap_or_default();
            let got_comment = comments
                .get(source)
                .unwrap_or_else(|| panic!("{name}: comment {source} not read"));
            assert_eq!(got_comment.discussion, got.source_id, "{name}: {source}");
            assert_eq!(comment["text"].as_str(), Some(got_comment.text.as_str()));
            assert_eq!(
                comment["author"]["id"].as_str(),
                Some(got_comment.author.id.as_str())
            );
            assert_eq!(
                comment["author"]["name"].as_str(),
                Some(got_comment.author.name.as_str())
            );
            assert_eq!(comment["deleted"].as_bool(), Some(got_comment.deleted));
            assert_eq!(
                comment["status"].as_str(),
                Some(got_comment.status.as_str())
            );
            let posted = got_comment
                .posted
                .to_datetime()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string();
            assert_eq!(
                comment["posted"].as_str(),
                Some(posted.as_str()),
                "{source}"
            );
            if let Some(parent) = comment["parent"].as_str() {
                assert_eq!(got_comment.parent.as_deref(), Some(parent), "{source}");
            }
        }
    }
    assert_eq!(seen, comments.len(), "{name}: every comment is expected");
}

/// Feeds `read` the fixture cut at every 97th byte and with bytes changed there: none may
/// panic, and every cut short of the end must end in an error.
pub(crate) fn mangle(
    name: &str,
    end_tag: &str,
    read: impl Fn(&[u8]) -> Vec<Result<Record, FormatError>>,
) {
    let file = bytes(name);
    let complete = file
        .windows(end_tag.len())
        .rposition(|window| window == end_tag.as_bytes())
        .map(|at| at + end_tag.len())
        .unwrap_or(file.len());
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for at in (0..file.len()).step_by(97) {
        let results = read(&file[..at]);
        if at < complete {
            assert!(
                matches!(results.last(), Some(Err(_))),
                "{name} cut at byte {at} must end in an error"
            );
        }
        for replacement in [b'<', b'>', b'&', b'"', b'/', 0u8, 0xff, 0xe6] {
            let mut changed = file.clone();
            changed[at] = replacement;
            let _ = read(&changed);
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut changed = file.clone();
        let length = (seed % 40) as usize;
        changed.drain(at..(at + length).min(file.len()));
        let _ = read(&changed);
    }
}
