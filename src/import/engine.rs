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

use std::collections::{HashMap, HashSet};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::source::{FormatError, Record, SkipReason, SourceComment, SourceDiscussion};
use super::threadql::{parse_time, CommentLine, DiscussionLine, Line, VoteLine};
use crate::domain::{
    Comment, CommentStatus, Discussion, DiscussionId, DiscussionKey, DiscussionTitle,
    DiscussionUrl, FullSlug, Held, Layout, Micros, ModerationMode, NewDiscussion, Revision, Slug,
    SlugPart, Standing, Vote, Votes,
};
use crate::store::{Step, Storage, StoreError};

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
        lines.push(format!("problems: {}", self.problems.len()));
        lines.extend(self.problems.iter().map(|p| format!("  problem: {p}")));
        lines
    }
}

/// A comment or vote set aside by the first pass.
#[derive(Serialize, Deserialize)]
enum Spilled {
    Source(SourceComment),
    Line(CommentLine),
    Vote(VoteLine),
}

/// A discussion as the file gives it.
enum Head {
    Source(SourceDiscussion),
    Line(DiscussionLine),
}

impl Head {
    fn source_id(&self) -> &str {
        match self {
            Head::Source(d) => &d.source_id,
            Head::Line(d) => &d.id,
        }
    }
}

/// A discussion after the first pass: its head, and where its entries are in the spill file.
struct Planned {
    head: Head,
    entries: Vec<(u64, u32)>,
}

/// The first pass's result.
struct Plan {
    discussions: Vec<Planned>,
    spill: std::fs::File,
}

/// Reads every item (an error ends the import before anything is written), setting comments
/// and votes aside.
fn first_pass(
    items: impl Iterator<Item = Result<Item, FormatError>>,
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
            Item::Source(Record::Skipped { reason, .. }) => {
                match reason {
                    SkipReason::Spam => report.spam += 1,
                    SkipReason::Trash => report.trash += 1,
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
fn read_back(spill: &mut std::fs::File, entries: &[(u64, u32)]) -> anyhow::Result<Vec<Spilled>> {
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

/// A discussion ready to import: how to find or create it, its comments placed.
struct Prepared {
    new: NewDiscussion,
    /// Public comments, chronological, with their source ids.
    comments: Vec<(String, Comment)>,
    held: Vec<(String, Comment)>,
    votes: Vec<(Slug, String, Vote)>,
    pinned: Vec<Slug>,
    locked: bool,
    moderation: Option<ModerationMode>,
}

/// Runs an import of `items` into `store` (nothing is written in a dry run; `store` may then
/// be `None`). `progress` hears of each discussion done (done, total).
pub async fn import(
    store: Option<&dyn Storage>,
    items: impl Iterator<Item = Result<Item, FormatError>>,
    options: &Options,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let Plan {
        discussions,
        mut spill,
    } = first_pass(items, &mut report)?;
    let total = discussions.len() as u64;
    for (n, planned) in discussions.into_iter().enumerate() {
        let entries = read_back(&mut spill, &planned.entries)?;
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
        report.comments += (prepared.comments.len() + prepared.held.len()) as u64;
        report.votes += prepared.votes.len() as u64;
        if let (Some(store), false) = (store, options.dry_run) {
            match write(store, prepared, options).await {
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

/// Orders comments by time, then by source id (numerically when both are numbers).
fn source_order(a: (Micros, &str), b: (Micros, &str)) -> std::cmp::Ordering {
    let id = |s: &str| s.parse::<u128>().ok();
    a.0.cmp(&b.0).then_with(|| match (id(a.1), id(b.1)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.1.cmp(b.1),
    })
}

/// A title the discussion can have: the file's, else its address or key, cut to the longest
/// title allowed.
fn title_of(candidates: &[Option<&str>]) -> Result<DiscussionTitle, String> {
    for candidate in candidates.iter().flatten() {
        let one_line: String = candidate
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(DiscussionTitle::MAX_CHARS)
            .collect();
        if let Ok(title) = DiscussionTitle::parse(&one_line) {
            return Ok(title);
        }
    }
    DiscussionTitle::parse("Imported discussion").map_err(|e| e.to_string())
}

/// A Disqus or WordPress discussion: comments in time order (equal times by source id), each
/// strictly after its parent and the one before it, placed under its parent.
fn prepare_source(
    head: &SourceDiscussion,
    entries: Vec<Spilled>,
    options: &Options,
    report: &mut Report,
) -> Result<Prepared, String> {
    let mut comments: Vec<SourceComment> = entries
        .into_iter()
        .filter_map(|e| match e {
            Spilled::Source(c) => Some(c),
            _ => None,
        })
        .collect();
    let key = head
        .key
        .as_deref()
        .map(DiscussionKey::parse)
        .transpose()
        .map_err(|e| format!("discussion {}: its key is refused: {e}", head.source_id))?
        .ok_or_else(|| {
            format!(
                "discussion {} has neither an identifier nor a link to key it by: not imported",
                head.source_id
            )
        })?;
    let url = head
        .url
        .as_deref()
        .and_then(|u| DiscussionUrl::parse(u).ok());
    let layout = options.layout.unwrap_or(options.default_layout);
    let title = title_of(&[Some(&head.title), head.url.as_deref(), head.key.as_deref()])?;
    // Effective times: never before the parent's.
    comments.sort_by(|a, b| source_order((a.posted, &a.source_id), (b.posted, &b.source_id)));
    let position: HashMap<String, usize> = comments
        .iter()
        .enumerate()
        .map(|(i, c)| (c.source_id.clone(), i))
        .collect();
    let mut times: Vec<Option<Micros>> = vec![None; comments.len()];
    for i in 0..comments.len() {
        effective_time(&comments, &position, &mut times, i);
    }
    let mut order: Vec<usize> = (0..comments.len()).collect();
    order.sort_by(|&a, &b| {
        source_order(
            (
                times[a].unwrap_or(comments[a].posted),
                &comments[a].source_id,
            ),
            (
                times[b].unwrap_or(comments[b].posted),
                &comments[b].source_id,
            ),
        )
    });
    let id_placeholder = DiscussionId::generate();
    let mut placed: HashMap<String, (Slug, FullSlug, bool)> = HashMap::new();
    let mut last = Micros(i64::MIN);
    let mut public = Vec::new();
    let mut held = Vec::new();
    for i in order {
        let c = &mut comments[i];
        let mut posted = times[i].unwrap_or(c.posted);
        if posted <= last {
            posted = Micros(last.0 + 1);
        }
        last = posted;
        let is_held = c.status != CommentStatus::Approved;
        let parent = match &c.parent {
            None => None,
            Some(p) => match placed.get(p) {
                // A public reply cannot hang under a held comment: it goes to the top level.
                Some((slug, full, parent_held)) if is_held || !parent_held => {
                    Some((slug.clone(), full.clone()))
                }
                _ => {
                    report.orphans.push(format!(
                        "{} {} in discussion {}: its parent {p} is not in the file{}",
                        options.format,
                        c.source_id,
                        head.source_id,
                        if placed.contains_key(p) {
                            " as a public comment"
                        } else {
                            ""
                        }
                    ));
                    None
                }
            },
        };
        let part = SlugPart::derived(&format!(
            "{}:{}:{}",
            options.format, head.source_id, c.source_id
        ));
        let placement = crate::domain::Placement::new(
            parent.as_ref().map(|(s, f)| (s, f)),
            options.max_depth,
            posted,
            &part,
        );
        let comment = Comment {
            discussion_id: id_placeholder.clone(),
            slug: placement.slug.clone(),
            full_slug: placement.full_slug.clone(),
            parent: placement.parent,
            posted,
            author: std::mem::replace(
                &mut c.author,
                crate::domain::Author {
                    id: String::new(),
                    name: String::new(),
                },
            ),
            text: (!c.deleted).then(|| std::mem::take(&mut c.text)),
            edited: None,
            edited_by: None,
            deleted: c.deleted,
            revisions: Vec::new(),
            reply_count: 0,
            standing: Standing {
                status: c.status,
                reason: None,
                reports: 0,
            },
            votes: Votes::default(),
        };
        placed.insert(
            c.source_id.clone(),
            (placement.slug, placement.full_slug, is_held),
        );
        let source = format!("{}:{}", options.format, c.source_id);
        match is_held {
            true => held.push((source, comment)),
            false => public.push((source, comment)),
        }
    }
    Ok(Prepared {
        new: NewDiscussion {
            title,
            layout,
            key: Some(key),
            url,
            id: None,
            created: head.created,
        },
        comments: public,
        held,
        votes: Vec::new(),
        pinned: Vec::new(),
        locked: false,
        moderation: None,
    })
}

/// The time comment `i` takes: its own, or just after its parent's when that is later (a
/// parent chain that loops is cut where it loops).
fn effective_time(
    comments: &[SourceComment],
    position: &HashMap<String, usize>,
    times: &mut [Option<Micros>],
    i: usize,
) -> Micros {
    // Walk up to the first ancestor with a time (or the top), then come back down.
    let mut chain = vec![i];
    let mut seen = HashSet::from([i]);
    while let Some(&top) = chain.last() {
        if times[top].is_some() {
            break;
        }
        match comments[top]
            .parent
            .as_ref()
            .and_then(|p| position.get(p))
            .copied()
        {
            Some(parent) if seen.insert(parent) => chain.push(parent),
            _ => break,
        }
    }
    let mut floor: Option<Micros> = None;
    for &at in chain.iter().rev() {
        let time = match times[at] {
            Some(time) => time,
            None => {
                let own = comments[at].posted;
                let time = match floor {
                    Some(f) if f.0 >= own.0 => Micros(f.0 + 1),
                    _ => own,
                };
                times[at] = Some(time);
                time
            }
        };
        floor = Some(time);
    }
    times[i].unwrap_or(comments[i].posted)
}

/// A threadql discussion: everything kept as the file has it.
fn prepare_line(
    head: &DiscussionLine,
    entries: Vec<Spilled>,
    options: &Options,
    report: &mut Report,
) -> Result<Prepared, String> {
    let name = &head.id;
    let id = DiscussionId::parse(&head.id)
        .map_err(|e| format!("discussion {name}: its id is refused: {e}"))?;
    let key = head
        .key
        .as_deref()
        .map(DiscussionKey::parse)
        .transpose()
        .map_err(|e| format!("discussion {name}: its key is refused: {e}"))?;
    let url = head
        .url
        .as_deref()
        .map(DiscussionUrl::parse)
        .transpose()
        .map_err(|e| format!("discussion {name}: its url is refused: {e}"))?;
    let title = DiscussionTitle::parse(&head.title)
        .map_err(|e| format!("discussion {name}: its title is refused: {e}"))?;
    let layout = match options.layout {
        Some(layout) => layout,
        None => head
            .layout
            .parse()
            .map_err(|e| format!("discussion {name}: {e}"))?,
    };
    let created = parse_time(&head.created_at).ok_or_else(|| {
        format!(
            "discussion {name}: createdAt {:?} is not a time",
            head.created_at
        )
    })?;
    let moderation = head
        .moderation
        .as_deref()
        .map(str::parse::<ModerationMode>)
        .transpose()
        .map_err(|e| format!("discussion {name}: {e}"))?;
    let pinned = head
        .pinned
        .iter()
        .map(|s| Slug::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("discussion {name}: a pinned slug is refused: {e}"))?;
    let mut lines = Vec::new();
    let mut votes = Vec::new();
    for entry in entries {
        match entry {
            Spilled::Line(line) => {
                let posted = parse_time(&line.posted).ok_or_else(|| {
                    format!(
                        "comment {} of discussion {name}: posted {:?} is not a time",
                        line.slug, line.posted
                    )
                })?;
                lines.push((posted, line));
            }
            Spilled::Vote(vote) => {
                let slug = Slug::parse(&vote.slug)
                    .map_err(|e| format!("a vote in discussion {name}: {e}"))?;
                let value = match vote.value.as_str() {
                    "UP" => Vote::Up,
                    "DOWN" => Vote::Down,
                    other => {
                        return Err(format!(
                            "a vote in discussion {name} has the value {other:?} (UP or DOWN)"
                        ))
                    }
                };
                votes.push((slug, vote.voter, value));
            }
            Spilled::Source(_) => {}
        }
    }
    lines.sort_by(|(a, x), (b, y)| (a, &x.slug).cmp(&(b, &y.slug)));
    let mut full: HashMap<String, FullSlug> = HashMap::new();
    let mut public = Vec::new();
    let mut held = Vec::new();
    for (posted, mut line) in lines {
        let what = format!("comment {} of discussion {name}", line.slug);
        let slug = Slug::parse(&line.slug).map_err(|e| format!("{what}: {e}"))?;
        let part = slug.own_part();
        let full_slug = match &line.parent_slug {
            None if slug.depth() == 0 => FullSlug::top_level(posted, &part),
            Some(parent) if slug.parent().is_some_and(|p| p.as_str() == parent) => {
                match full.get(parent) {
                    Some(parent_full) => parent_full.child(posted, &part),
                    None => {
                        report.problems.push(format!(
                            "{what}: its parent {parent} is not before it in the file: left out"
                        ));
                        continue;
                    }
                }
            }
            _ => return Err(format!("{what}: its slug does not match its parentSlug")),
        };
        full.insert(line.slug.clone(), full_slug.clone());
        let status = CommentStatus::from_stored(&line.status)
            .ok_or_else(|| format!("{what}: status {:?} is unknown", line.status))?;
        let time =
            |text: &str| parse_time(text).ok_or_else(|| format!("{what}: {text:?} is not a time"));
        let revisions = line
            .revisions
            .iter()
            .map(|r| {
                Ok(Revision {
                    text: r.text.clone(),
                    edited: time(&r.edited_at)?,
                    editor: r.editor.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let comment = Comment {
            discussion_id: id.clone(),
            slug: slug.clone(),
            full_slug,
            parent: slug.parent(),
            posted,
            author: line.author.clone(),
            text: line.text.take(),
            edited: line.edited_at.as_deref().map(time).transpose()?,
            edited_by: line.edited_by.clone(),
            deleted: line.deleted,
            revisions,
            reply_count: 0,
            standing: Standing {
                status,
                reason: line.reason.clone(),
                reports: 0,
            },
            votes: Votes::default(),
        };
        let source = format!("{}:{}", options.format, line.slug);
        match line.held {
            true => held.push((source, comment)),
            false => public.push((source, comment)),
        }
    }
    Ok(Prepared {
        new: NewDiscussion {
            title,
            layout,
            key,
            url,
            id: Some(id),
            created: Some(created),
        },
        comments: public,
        held,
        votes,
        pinned,
        locked: head.locked,
        moderation,
    })
}

/// A discussion the import leaves out, and why.
struct Refused(String);

impl From<anyhow::Error> for Refused {
    fn from(err: anyhow::Error) -> Self {
        Refused(format!("{err:#}"))
    }
}

impl From<StoreError> for Refused {
    fn from(err: StoreError) -> Self {
        Refused(err.to_string())
    }
}

/// Writes one discussion; returns how many comments it added.
async fn write(
    store: &dyn Storage,
    mut prepared: Prepared,
    options: &Options,
) -> Result<u64, Refused> {
    let discussion = find_or_create(store, &prepared).await?;
    let id = discussion.id.clone();
    for (_, comment) in prepared.comments.iter_mut().chain(prepared.held.iter_mut()) {
        comment.discussion_id = id.clone();
    }
    let known = store.imports().imported(&id).await?;
    let entries: Vec<(String, Slug)> = prepared
        .comments
        .iter()
        .chain(&prepared.held)
        .map(|(source, c)| (source.clone(), c.slug.clone()))
        .collect();
    let adding: Vec<Comment> = std::mem::take(&mut prepared.comments)
        .into_iter()
        .filter(|(source, _)| !known.contains(source))
        .map(|(_, c)| c)
        .collect();
    let new_held = prepared
        .held
        .iter()
        .filter(|(source, _)| !known.contains(source))
        .count();
    let mut added = 0;
    if !adding.is_empty() {
        added = bring_in(store, &discussion, prepared.new.layout, &adding, options).await?;
        drop(adding);
    } else if discussion.layout != prepared.new.layout && known.is_empty() {
        // A discussion created by a run that stopped before its move, with nothing to add.
        settle(store, &id, prepared.new.layout, &[], options).await?;
    }
    for (_, comment) in &prepared.held {
        store
            .held()
            .restore(&Held {
                comment: comment.clone(),
            })
            .await?;
    }
    added += new_held as u64;
    // Votes and the discussion's settings go on the discussion as the moves left it (read
    // only when the file gives some).
    let settings = prepared.locked || prepared.moderation.is_some() || !prepared.pinned.is_empty();
    if settings || !prepared.votes.is_empty() {
        let discussion = by_id(store, &id).await?;
        for (slug, voter, vote) in &prepared.votes {
            store
                .votes()
                .restore_vote(&discussion, slug, voter, *vote)
                .await
                .map_err(|e| Refused(format!("a vote on {slug} in discussion {id}: {e}")))?;
        }
        for slug in &prepared.pinned {
            if !discussion.pinned.contains(slug) {
                store.discussions().set_pinned(&id, slug, true).await?;
            }
        }
        if let Some(mode) = prepared.moderation {
            if discussion.moderation != Some(mode) {
                store.discussions().set_moderation(&id, mode).await?;
            }
        }
        if prepared.locked && !discussion.locked {
            store.discussions().set_locked(&id, true).await?;
        }
    }
    store.imports().record_imported(&id, &entries).await?;
    Ok(added)
}

async fn by_id(store: &dyn Storage, id: &DiscussionId) -> Result<Discussion, Refused> {
    store
        .discussions()
        .by_ids(std::slice::from_ref(id))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| Refused(format!("discussion {id} is gone")))
}

/// The discussion the file's discussion goes to: found by its key (or kept id), or created in
/// another layout than its own, so that the import's move brings the comments into its own.
async fn find_or_create(store: &dyn Storage, prepared: &Prepared) -> Result<Discussion, Refused> {
    let mut new = prepared.new.clone();
    new.layout = store.imports().import_scratch(prepared.new.layout);
    // A threadql discussion keeps the id the file gives it.
    let Some(id) = &prepared.new.id else {
        return Ok(store.discussions().ensure(new).await?);
    };
    // A threadql discussion keeps its id; another discussion with its id or its key is not it.
    let by_id = store
        .discussions()
        .by_ids(std::slice::from_ref(id))
        .await?
        .into_iter()
        .next();
    if let Some(found) = by_id {
        if found.key != new.key {
            return Err(Refused(format!(
                "discussion {id} exists with the key {:?}, the file gives it {:?}: not imported",
                found.key.as_ref().map(DiscussionKey::as_str),
                new.key.as_ref().map(DiscussionKey::as_str)
            )));
        }
        return Ok(found);
    }
    match store.discussions().add(new).await {
        Ok(created) => Ok(created),
        Err(StoreError::KeyTaken(key)) => Err(Refused(format!(
            "discussion {id}: another discussion has its key {key}: not imported"
        ))),
        Err(err) => Err(err.into()),
    }
}

/// Adds `adding` to the discussion, which ends in `layout`: one move when it is in another
/// layout, else two (out, adding, and back).
async fn bring_in(
    store: &dyn Storage,
    discussion: &Discussion,
    layout: Layout,
    adding: &[Comment],
    options: &Options,
) -> Result<u64, Refused> {
    if discussion.layout != layout {
        return settle(store, &discussion.id, layout, adding, options).await;
    }
    let scratch = store.imports().import_scratch(layout);
    let added = settle(store, &discussion.id, scratch, adding, options).await?;
    settle(store, &discussion.id, layout, &[], options).await?;
    Ok(added)
}

/// One import move, waiting out a fence left by a run that stopped.
async fn settle(
    store: &dyn Storage,
    id: &DiscussionId,
    to: Layout,
    adding: &[Comment],
    options: &Options,
) -> Result<u64, Refused> {
    let started = tokio::time::Instant::now();
    loop {
        let quiet = |_: Step| {};
        match store.imports().import(id, to, adding, &quiet).await {
            Ok(moved) => return Ok(moved.added),
            Err(StoreError::Busy(_)) if started.elapsed() < options.lease * 2 => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_times_go_by_source_id_numerically() {
        let t = Micros(5);
        assert!(source_order((t, "9"), (t, "10")).is_lt());
        assert!(source_order((t, "b"), (t, "a")).is_gt());
        assert!(source_order((Micros(4), "10"), (t, "9")).is_lt());
    }
}
