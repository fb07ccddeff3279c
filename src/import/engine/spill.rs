//! The import's first pass: every item read once, comments and votes set aside in a spill file
//! from which each discussion's entries are read back.

use std::collections::HashMap;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::{Item, Report};
use crate::import::source::{FormatError, Record, SkipReason, SourceComment, SourceDiscussion};
use crate::import::threadql::{CommentLine, DiscussionLine, Line, VoteLine};

/// A comment or vote set aside by the first pass.
#[derive(Serialize, Deserialize)]
pub(super) enum Spilled {
    Source(SourceComment),
    Line(CommentLine),
    Vote(VoteLine),
}

/// A discussion as the file gives it.
pub(super) enum Head {
    Source(SourceDiscussion),
    Line(DiscussionLine),
}

impl Head {
    /// The file's id for the discussion.
    pub(super) fn source_id(&self) -> &str {
        match self {
            Head::Source(d) => &d.source_id,
            Head::Line(d) => &d.id,
        }
    }
}

/// A discussion after the first pass: its head, and where its entries are in the spill file.
pub(super) struct Planned {
    pub(super) head: Head,
    pub(super) entries: Vec<(u64, u32)>,
}

/// The first pass's result.
pub(super) struct Plan {
    pub(super) discussions: Vec<Planned>,
    pub(super) spill: std::fs::File,
}

/// Reads every item (an error ends the import before anything is written), setting comments
/// and votes aside.
pub(super) fn first_pass(
    items: impl Iterator<Item = Result<Item, FormatError>>,
    format: &str,
    report: &mut Report,
) -> anyhow::Result<Plan> {
    let spill = tempfile::tempfile().context("cannot create a temporary file for the import")?;
    let mut writer = std::io::BufWriter::new(spill);
    let mut offset = 0_u64;
    let mut discussions: Vec<Planned> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // Comments of a discussion the file has not given yet (Disqus lists threads first, but a
    // file may not): kept by discussion until it comes.
    let mut early: HashMap<String, Vec<(u64, u32)>> = HashMap::new();
    for item in items {
        let (discussion, spilled) = match item? {
            Item::Source(Record::Discussion(d)) => {
                add_head(
                    (&mut discussions, &mut index, &mut early),
                    Head::Source(d),
                    report,
                );
                continue;
            }
            Item::Line(Line::Discussion(d)) => {
                add_head(
                    (&mut discussions, &mut index, &mut early),
                    Head::Line(d),
                    report,
                );
                continue;
            }
            Item::Source(Record::Skipped {
                reason,
                discussion,
                source_id,
            }) => {
                match reason {
                    SkipReason::Spam => report.spam += 1,
                    SkipReason::Trash => report.trash += 1,
                    SkipReason::TooLong => report.refused.push(format!(
                        "{format} {source_id} in discussion {discussion}: {}",
                        reason.describe()
                    )),
                }
                continue;
            }
            Item::Source(Record::Comment(c)) => (c.discussion.clone(), Spilled::Source(c)),
            Item::Line(Line::Comment(c)) => (c.discussion.clone(), Spilled::Line(c)),
            Item::Line(Line::Vote(v)) => (v.discussion.clone(), Spilled::Vote(v)),
        };
        let mut bytes = serde_json::to_vec(&spilled).context("cannot set a comment aside")?;
        bytes.push(b'\n');
        writer
            .write_all(&bytes)
            .context("cannot write the import's temporary file")?;
        let entry = (offset, u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        offset += bytes.len() as u64;
        match index.get(&discussion) {
            Some(&i) => discussions[i].entries.push(entry),
            None => early.entry(discussion).or_default().push(entry),
        }
    }
    for (discussion, entries) in early {
        report.problems.push(format!(
            "{} comments or votes of discussion {discussion}, which the file does not have: not imported",
            entries.len()
        ));
    }
    let spill = writer
        .into_inner()
        .map_err(|e| anyhow::anyhow!("cannot write the import's temporary file: {e}"))?;
    report.discussions = discussions.len() as u64;
    Ok(Plan { discussions, spill })
}

/// The discussions so far, by position and by source id, and the entries of those to come.
type Heads<'a> = (
    &'a mut Vec<Planned>,
    &'a mut HashMap<String, usize>,
    &'a mut HashMap<String, Vec<(u64, u32)>>,
);

fn add_head((discussions, index, early): Heads<'_>, head: Head, report: &mut Report) {
    let id = head.source_id().to_owned();
    if index.contains_key(&id) {
        report.problems.push(format!(
            "discussion {id} is in the file twice: the second is left out"
        ));
        return;
    }
    let entries = early.remove(&id).unwrap_or_default();
    index.insert(id, discussions.len());
    discussions.push(Planned { head, entries });
}

/// The entries of one discussion, read back from the spill file.
pub(super) fn read_back(
    spill: &mut std::fs::File,
    entries: &[(u64, u32)],
) -> anyhow::Result<Vec<Spilled>> {
    let mut out = Vec::with_capacity(entries.len());
    let mut buffer = Vec::new();
    for &(offset, len) in entries {
        spill
            .seek(SeekFrom::Start(offset))
            .context("cannot read the import's temporary file")?;
        buffer.resize(len as usize, 0);
        spill
            .read_exact(&mut buffer)
            .context("cannot read the import's temporary file")?;
        out.push(serde_json::from_slice(&buffer).context("the import's temporary file")?);
    }
    Ok(out)
}
