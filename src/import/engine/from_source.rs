//! A Disqus or WordPress discussion made ready to import: its comments ordered, timed, placed
//! under their parents and given slugs derived from their source ids.

use std::collections::{HashMap, HashSet};

use super::spill::Spilled;
use super::{Options, Prepared, Report};
use crate::domain::{
    Comment, CommentStatus, DiscussionId, DiscussionKey, DiscussionTitle, DiscussionUrl, FullSlug,
    Micros, NewDiscussion, Slug, SlugPart, Standing, Votes,
};
use crate::import::source::{SourceComment, SourceDiscussion};

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
pub(super) fn prepare_source(
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
            html: None,
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
            number: None,
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
