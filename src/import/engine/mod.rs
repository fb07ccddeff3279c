//! The import itself, whatever the format: a first pass reads the whole file once, checking
//! it and setting each comment aside in a spill file (only the discussions and, per
//! discussion, where its comments are in that file stay in memory); a second pass imports one
//! discussion at a time from there. A file that cannot be read to its end writes nothing.
//!
//! Per discussion: its comments are ordered by time (and source id), placed under their
//! parents (a reply whose parent is missing becomes top level: an orphan), and given slugs
//! derived from their source ids; the store's import move adds those it does not hold yet to
//! the discussion, with their own times, in the layout asked for (see `ImportStore::import`).
//! Held comments, votes, pins, the lock and the moderation mode follow, then the entries that
//! say which source ids were imported: a run stopped at any point and made again ends with
//! the file's content, once.
//!
//! The steps have modules of their own: `spill` (the first pass), `screen` (the rules a post
//! follows), `from_source` and `from_threadql` (a discussion prepared), `write` (a discussion
//! written).

mod from_source;
mod from_threadql;
mod markdown;
mod screen;
mod spill;
mod write;

use std::time::Duration;

use super::source::{FormatError, Record};
use super::threadql::Line;
use crate::domain::{Comment, GuestIds, Layout, ModerationMode, NewDiscussion, Slug, Vote};
use crate::service::Services;
use from_source::prepare_source;
use from_threadql::prepare_line;
use spill::{first_pass, read_back, Head, Plan};
use write::{write, Refused};

/// One item of a file, from any reader.
pub enum Item {
    /// From a Disqus or WordPress file.
    Source(Record),
    /// From a threadql file.
    Line(Line),
}

/// What the import is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The format's name: the prefix of source ids (`disqus:1234`).
    pub format: &'static str,
    /// The layout of the discussions (`None`: a threadql file's own, else `default_layout`).
    pub layout: Option<Layout>,
    /// The server's default layout.
    pub default_layout: Layout,
    /// The depth cap replies are placed under.
    pub max_depth: usize,
    /// The longest comment text, in characters (`THREADQL_MAX_TEXT_CHARS`), as for a post.
    pub max_text_chars: usize,
    /// Deepest nesting of block quotes and lists in a text (deeper ones are flattened).
    pub max_markdown_depth: usize,
    /// Read and report, write nothing.
    pub dry_run: bool,
    /// How long a fence left by a stopped import or move may last (waited out, then taken).
    pub lease: Duration,
}

/// What an import did (or, in a dry run, would do).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Discussions in the file.
    pub discussions: u64,
    /// Of those, discussions this run added comments to.
    pub discussions_changed: u64,
    /// Comments in the file that were imported (held and deleted ones included).
    pub comments: u64,
    /// Of those, comments this run added (the others were there from an earlier run).
    pub added: u64,
    /// Votes in the file.
    pub votes: u64,
    /// Comments skipped as spam.
    pub spam: u64,
    /// Comments skipped as trash.
    pub trash: u64,
    /// Replies whose parent is not in the file: imported at the top level.
    pub orphans: Vec<String>,
    /// Comments left out and votes dropped by the rules a post follows (text, author, a
    /// self-vote, a text too long to read), and why.
    pub refused: Vec<String>,
    /// Texts whose Markdown nested too deep: imported flattened.
    pub flattened: Vec<String>,
    /// What could not be imported, and why.
    pub problems: Vec<String>,
}

impl Report {
    /// The report as printed at the end of an import.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "discussions: {} ({} with comments added)",
                self.discussions, self.discussions_changed
            ),
            format!("comments: {} ({} added)", self.comments, self.added),
            format!("votes: {}", self.votes),
            format!(
                "skipped: {} ({} spam, {} trash)",
                self.spam + self.trash,
                self.spam,
                self.trash
            ),
            format!("orphans: {}", self.orphans.len()),
        ];
        lines.extend(self.orphans.iter().map(|o| format!("  orphan {o}")));
        lines.push(format!("refused: {}", self.refused.len()));
        lines.extend(self.refused.iter().map(|r| format!("  refused {r}")));
        lines.push(format!("flattened: {}", self.flattened.len()));
        lines.extend(self.flattened.iter().map(|f| format!("  flattened {f}")));
        lines.push(format!("problems: {}", self.problems.len()));
        lines.extend(self.problems.iter().map(|p| format!("  problem: {p}")));
        lines
    }
}

/// A discussion ready to import: how to find or create it, its comments placed.
pub(super) struct Prepared {
    pub(super) new: NewDiscussion,
    /// Public comments, chronological, with their source ids.
    pub(super) comments: Vec<(String, Comment)>,
    pub(super) held: Vec<(String, Comment)>,
    pub(super) votes: Vec<(Slug, String, Vote)>,
    pub(super) pinned: Vec<Slug>,
    pub(super) locked: bool,
    pub(super) moderation: Option<ModerationMode>,
}

impl Prepared {
    /// The same, with every unkeyed imported guest id keyed (see [`GuestIds`]): the authors and
    /// editors of its comments and the voters of its votes. A file's keyed ids stay as they are.
    fn keyed(mut self, ids: &GuestIds) -> Self {
        for (_, comment) in self.comments.iter_mut().chain(self.held.iter_mut()) {
            ids.key_in_place(&mut comment.author.id);
            if let Some(editor) = &mut comment.edited_by {
                ids.key_in_place(&mut editor.id);
            }
            for revision in &mut comment.revisions {
                ids.key_in_place(&mut revision.editor.id);
            }
        }
        for (_, voter, _) in &mut self.votes {
            ids.key_in_place(voter);
        }
        self
    }
}

/// Runs an import of `items` through `services` (nothing is written in a dry run; `services`
/// may then be `None`), as the installation's operator. `progress` hears of each discussion
/// done (done, total).
pub async fn import(
    services: Option<&Services>,
    items: impl Iterator<Item = Result<Item, FormatError>>,
    options: &Options,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let Plan {
        discussions,
        mut spill,
    } = first_pass(items, options.format, &mut report)?;
    let screen = screen::Screen {
        max_text_chars: options.max_text_chars,
        services,
    };
    let total = discussions.len() as u64;
    let operator = services.map(|s| s.operator("import"));
    for (n, planned) in discussions.into_iter().enumerate() {
        let entries = read_back(&mut spill, &planned.entries)?;
        let entries = screen.entries(planned.head.source_id(), entries, options, &mut report);
        let prepared = match &planned.head {
            Head::Source(head) => prepare_source(head, entries, options, &mut report),
            Head::Line(head) => prepare_line(head, entries, options, &mut report),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(problem) => {
                report.problems.push(problem);
                continue;
            }
        };
        let prepared = match services {
            Some(services) => prepared.keyed(&services.rules().guest_ids),
            None => prepared,
        };
        let (prepared, flattened) =
            markdown::fit_texts(prepared, options, services.is_some() && !options.dry_run).await?;
        report.flattened.extend(flattened);
        report.comments += (prepared.comments.len() + prepared.held.len()) as u64;
        report.votes += prepared.votes.len() as u64;
        if let (Some(services), Some(operator), false) = (services, &operator, options.dry_run) {
            match write(services, operator, prepared, options).await {
                Ok(0) => {}
                Ok(added) => {
                    report.added += added;
                    report.discussions_changed += 1;
                }
                Err(Refused(problem)) => report.problems.push(problem),
            }
        } else {
            let adding = (prepared.comments.len() + prepared.held.len()) as u64;
            report.added += adding;
            report.discussions_changed += u64::from(adding > 0);
        }
        progress(n as u64 + 1, total);
    }
    Ok(report)
}
