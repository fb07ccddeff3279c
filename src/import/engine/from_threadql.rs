//! A threadql discussion made ready to import: everything kept as the file has it.

use std::collections::HashMap;

use super::spill::Spilled;
use super::{Options, Prepared, Report};
use crate::domain::{
    Comment, CommentStatus, DiscussionId, DiscussionKey, DiscussionTitle, DiscussionUrl, FullSlug,
    ModerationMode, NewDiscussion, Revision, Slug, Standing, Vote, Votes,
};
use crate::import::threadql::{parse_time, DiscussionLine};

/// A threadql discussion: everything kept as the file has it.
pub(super) fn prepare_line(
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
            html: None,
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
            number: None,
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
