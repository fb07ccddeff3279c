//! The rules a post follows, applied to what a file gives before it is placed: each comment's
//! text passes `CommentText::parse` (the configured length, controls, bidirectional controls
//! closed) and its author the identity rules (`domain::check_identity`, and the names
//! moderators reserved); a comment that does not is left out and reported. Votes by a comment's
//! own author, by an id no ban could name, or on a comment left out are dropped and reported.

use std::collections::HashMap;

use super::spill::Spilled;
use super::{Options, Report};
use crate::domain::{check_identity, Author, CommentText, UserId};
use crate::service::Services;

/// What a discussion's entries are checked against.
pub(super) struct Screen<'a> {
    /// The longest text, in characters.
    pub(super) max_text_chars: usize,
    /// The services of a real import: their copy of the reserved names.
    pub(super) services: Option<&'a Services>,
}

impl Screen<'_> {
    /// Why this author may not post, if it may not.
    fn author(&self, author: &Author) -> Option<String> {
        if let Err(why) = check_identity(&author.id, &author.name) {
            return Some(format!("its author is refused: {why}"));
        }
        let reserved = self.services.and_then(|s| s.name_refusal(&author.name));
        reserved.map(|_| format!("its author's name {:?} is reserved", author.name))
    }

    /// The text as a post would store it, or why it may not be posted.
    fn text(&self, text: &str) -> Result<String, String> {
        CommentText::parse(text, self.max_text_chars)
            .map(|t| t.as_str().to_owned())
            .map_err(|why| format!("its text is refused: {why}"))
    }

    /// Keeps the entries of discussion `discussion` that follow the rules; reports the others.
    pub(super) fn entries(
        &self,
        discussion: &str,
        entries: Vec<Spilled>,
        options: &Options,
        report: &mut Report,
    ) -> Vec<Spilled> {
        let format = options.format;
        let mut kept = Vec::with_capacity(entries.len());
        // Authors of the threadql comments kept, by slug, for their votes.
        let mut authors: HashMap<String, String> = HashMap::new();
        let mut votes = Vec::new();
        for entry in entries {
            match entry {
                Spilled::Source(mut comment) => {
                    let checked = match self.author(&comment.author) {
                        Some(why) => Err(why),
                        None if comment.deleted => Ok(()),
                        None => self.text(&comment.text).map(|text| comment.text = text),
                    };
                    match checked {
                        Ok(()) => kept.push(Spilled::Source(comment)),
                        Err(why) => report.refused.push(format!(
                            "{format} {} in discussion {discussion}: {why}: left out",
                            comment.source_id
                        )),
                    }
                }
                Spilled::Line(mut line) => {
                    let mut checked = match self.author(&line.author) {
                        Some(why) => Err(why),
                        None => Ok(()),
                    };
                    if let (Ok(()), Some(text)) = (&checked, line.text.as_mut()) {
                        checked = self.text(text).map(|t| *text = t);
                    }
                    for revision in &mut line.revisions {
                        if checked.is_ok() {
                            checked = self.text(&revision.text).map(|t| revision.text = t);
                        }
                    }
                    match checked {
                        Ok(()) => {
                            authors.insert(line.slug.clone(), line.author.id.clone());
                            kept.push(Spilled::Line(line));
                        }
                        Err(why) => report.refused.push(format!(
                            "comment {} of discussion {discussion}: {why}: left out",
                            line.slug
                        )),
                    }
                }
                Spilled::Vote(vote) => votes.push(vote),
            }
        }
        for vote in votes {
            let what = format!(
                "a vote by {:?} on comment {} of discussion {discussion}",
                vote.voter, vote.slug
            );
            let dropped = match authors.get(&vote.slug) {
                None => Some("the comment is not imported"),
                Some(author) if *author == vote.voter => Some("a vote on one's own comment"),
                Some(_) if UserId::parse(&vote.voter).is_err() => Some("the voter's id is refused"),
                Some(_) => None,
            };
            match dropped {
                Some(why) => report.refused.push(format!("{what}: {why}: dropped")),
                None => kept.push(Spilled::Vote(vote)),
            }
        }
        kept
    }
}
