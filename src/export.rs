//! `threadql export`: every discussion (or one), its comments, held comments and votes, as a
//! threadql file (docs/formats.md). Each discussion is read in bounded pages: memory does not
//! grow with its size.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context as _;

use crate::app;
use crate::config::{Config, ExportArgs};
use crate::domain::paging::Cursor;
use crate::domain::{Comment, Discussion, DiscussionId, DiscussionKey, Slug, Window};
use crate::import::threadql::{
    time_text, CommentLine, DiscussionLine, Header, Line, VoteLine, FORMAT, VERSION,
};
use crate::store::Storage;

/// Comments, held comments or votes read per command.
const PAGE: usize = 500;
/// Discussions listed per command.
const DISCUSSIONS: usize = 100;

/// Runs `threadql export`.
pub async fn run(config: &Config, args: &ExportArgs) -> anyhow::Result<()> {
    let (store, embedded) = app::connect(config).await?;
    let result = async {
        let mut out = open(args.out.as_deref())?;
        let written = export(store.as_ref(), args, &mut out).await?;
        out.flush().context("cannot write the export")?;
        drop(out);
        eprintln!(
            "exported {} discussions, {} comments, {} votes",
            written.discussions, written.comments, written.votes
        );
        Ok(())
    }
    .await;
    if let Some(db) = embedded {
        db.stop().await;
    }
    result
}

/// What an export wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Discussions.
    pub discussions: u64,
    /// Comments (held ones included).
    pub comments: u64,
    /// Votes.
    pub votes: u64,
}

/// Where the export goes: standard output for `-` or nothing, else a new file, gzipped when
/// its name ends in `.gz`.
fn open(out: Option<&str>) -> anyhow::Result<Box<dyn Write>> {
    match out {
        None | Some("-") => Ok(Box::new(std::io::BufWriter::new(std::io::stdout().lock()))),
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create the export file {path}"))?;
            let file = std::io::BufWriter::new(file);
            if path.ends_with(".gz") {
                Ok(Box::new(flate2::write::GzEncoder::new(
                    file,
                    flate2::Compression::default(),
                )))
            } else {
                Ok(Box::new(file))
            }
        }
    }
}

/// Writes the export of what `args` names to `out`.
pub async fn export(
    store: &dyn Storage,
    args: &ExportArgs,
    out: &mut dyn Write,
) -> anyhow::Result<Written> {
    let header = Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        exported: time_text(crate::domain::Micros::now()),
        person: None,
    };
    write_json(out, &header)?;
    let mut written = Written::default();
    let named = match (&args.discussion, &args.key) {
        (Some(id), _) => {
            let id = DiscussionId::parse(id)?;
            let found = store
                .discussions()
                .by_ids(std::slice::from_ref(&id))
                .await?;
            Some((found, format!("no discussion {id}")))
        }
        (None, Some(key)) => {
            let key = DiscussionKey::parse(key)?;
            let found = store
                .discussions()
                .by_keys(std::slice::from_ref(&key))
                .await?;
            Some((found, format!("no discussion has the key {key}")))
        }
        (None, None) => None,
    };
    match named {
        Some((found, missing)) => {
            let discussion = found.into_iter().next().context(missing)?;
            one(store, &discussion, out, &mut written).await?;
        }
        None => {
            let mut cursor = None;
            loop {
                let window = Window::After {
                    cursor: cursor.take(),
                    limit: DISCUSSIONS,
                };
                let page = store.discussions().list(&window).await?;
                for discussion in &page.items {
                    one(store, discussion, out, &mut written).await?;
                }
                match page.items.last() {
                    Some(last) if page.has_next => cursor = Some(Cursor::of_discussion(last)),
                    _ => break,
                }
            }
        }
    }
    Ok(written)
}

fn write_json<T: serde::Serialize>(out: &mut dyn Write, value: &T) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value).context("cannot write the export")?;
    out.write_all(b"\n").context("cannot write the export")
}

/// One discussion: its line, its comments in posting order, its held comments, its votes.
async fn one(
    store: &dyn Storage,
    discussion: &Discussion,
    out: &mut dyn Write,
    written: &mut Written,
) -> anyhow::Result<()> {
    let pinned: Vec<String> = discussion
        .pinned
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    let line = Line::Discussion(DiscussionLine {
        id: discussion.id.to_string(),
        key: discussion.key.as_ref().map(|k| k.as_str().to_owned()),
        url: discussion.url.clone(),
        title: discussion.title.clone(),
        layout: discussion.layout.as_str().to_owned(),
        locked: discussion.locked,
        moderation: discussion.moderation.map(|m| m.as_str().to_owned()),
        created_at: time_text(discussion.created),
        pinned: pinned.clone(),
    });
    write_json(out, &line)?;
    written.discussions += 1;
    let layout = store.layout(discussion.layout)?;
    let mut last: Option<Arc<Comment>> = None;
    loop {
        let page = layout
            .posted_after(discussion, last.as_deref(), PAGE)
            .await?;
        for comment in &page.items {
            let line = CommentLine::of(comment, false, &pinned);
            write_json(out, &Line::Comment(line))?;
            written.comments += 1;
        }
        if !page.has_next {
            break;
        }
        last = page.items.into_iter().last();
    }
    let mut after: Option<Slug> = None;
    loop {
        let held = store
            .held()
            .held_in(&discussion.id, after.as_ref(), PAGE)
            .await?;
        for one in &held {
            write_json(
                out,
                &Line::Comment(CommentLine::of(&one.comment, true, &pinned)),
            )?;
            written.comments += 1;
        }
        match held.last() {
            Some(last) if held.len() == PAGE => after = Some(last.comment.slug.clone()),
            _ => break,
        }
    }
    let mut after: Option<(Slug, String)> = None;
    loop {
        let votes = store
            .votes()
            .votes_in(
                &discussion.id,
                after.as_ref().map(|(s, v)| (s, v.as_str())),
                PAGE,
            )
            .await?;
        for (slug, voter, vote) in &votes {
            let line = Line::Vote(VoteLine {
                discussion: discussion.id.to_string(),
                slug: slug.as_str().to_owned(),
                voter: voter.clone(),
                value: vote.as_str().to_uppercase(),
            });
            write_json(out, &line)?;
            written.votes += 1;
        }
        match votes.last() {
            Some((slug, voter, _)) if votes.len() == PAGE => {
                after = Some((slug.clone(), voter.clone()))
            }
            _ => break,
        }
    }
    Ok(())
}
