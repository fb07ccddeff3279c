//! What may happen to a comment after it is posted (edit, delete) and who may do it.

use super::guest_posts::is_guest;
use super::{Author, Comment, CommentText, DomainError, Micros, Revision};

/// Who asks for a change.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The caller, as an author.
    pub author: &'a Author,
    /// Whether the caller may moderate.
    pub moderator: bool,
}

/// How long authors may edit what they posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditRules {
    /// Seconds after posting during which the author may edit; 0: authors never edit.
    pub window_secs: u64,
}

/// A change to a posted comment.
#[derive(Debug, Clone)]
pub enum Change {
    /// Replace the text, keeping the current one as a revision.
    Edit {
        /// The new text.
        text: CommentText,
        /// The new text as HTML (`markdown::render`).
        html: String,
    },
    /// Turn the comment into a tombstone: it keeps its place and replies, loses text and history.
    Delete,
}

impl Change {
    /// The comment after the change, `Ok(None)` when the change alters nothing (deleting a
    /// tombstone, an edit to the same text), or why the actor may not make it.
    ///
    /// `now` is the edit time (strictly after every earlier version); `locked` says whether the
    /// discussion is locked (authors may not edit there; deleting stays possible).
    pub fn apply(
        &self,
        current: &Comment,
        actor: Actor<'_>,
        rules: EditRules,
        locked: bool,
        now: Micros,
    ) -> Result<Option<Comment>, DomainError> {
        let own = actor.author.id == current.author.id;
        match self {
            Change::Delete => {
                if !own && !actor.moderator {
                    return Err(DomainError::Forbidden(format!(
                        "only its author or a moderator may delete comment {}",
                        current.slug
                    )));
                }
                if current.deleted {
                    return Ok(None);
                }
                // A guest's token is their only key to the comment: it opens it for as long
                // as an edit.
                if own && !actor.moderator && is_guest(&actor.author.id) {
                    within_window(current, rules, now, "deleted")?;
                }
                Ok(Some(Comment {
                    text: None,
                    html: None,
                    deleted: true,
                    revisions: Vec::new(),
                    ..current.clone()
                }))
            }
            Change::Edit { text, html } => {
                if current.deleted {
                    return Err(DomainError::CommentDeleted(format!(
                        "comment {} was deleted and cannot be edited",
                        current.slug
                    )));
                }
                if !actor.moderator {
                    author_may_edit(current, own, rules, locked, now)?;
                }
                if current.text.as_deref() == Some(text.as_str()) {
                    return Ok(None);
                }
                let mut revisions = current.revisions.clone();
                revisions.push(Revision {
                    text: current.text.clone().unwrap_or_default(),
                    edited: current.edited.unwrap_or(current.posted),
                    editor: current
                        .edited_by
                        .clone()
                        .unwrap_or_else(|| current.author.clone()),
                });
                Ok(Some(Comment {
                    text: Some(text.as_str().to_owned()),
                    html: Some(html.clone()),
                    edited: Some(now),
                    edited_by: (!own).then(|| actor.author.clone()),
                    revisions,
                    ..current.clone()
                }))
            }
        }
    }
}

fn author_may_edit(
    current: &Comment,
    own: bool,
    rules: EditRules,
    locked: bool,
    now: Micros,
) -> Result<(), DomainError> {
    if !own {
        return Err(DomainError::Forbidden(format!(
            "only its author or a moderator may edit comment {}",
            current.slug
        )));
    }
    if locked {
        return Err(DomainError::Forbidden(
            "the discussion is locked: only moderators may edit its comments".into(),
        ));
    }
    within_window(current, rules, now, "edited")
}

/// `FORBIDDEN` unless `current` is within the edit window at `now` (for what a comment's
/// author may do to it: be `what`).
fn within_window(
    current: &Comment,
    rules: EditRules,
    now: Micros,
    what: &str,
) -> Result<(), DomainError> {
    if rules.window_secs == 0 {
        return Err(DomainError::Forbidden(format!(
            "authors' comments may not be {what} by them on this server; ask a moderator"
        )));
    }
    let window = i64::try_from(rules.window_secs)
        .unwrap_or(i64::MAX)
        .saturating_mul(1_000_000);
    if now.0 > current.posted.0.saturating_add(window) {
        return Err(DomainError::Forbidden(format!(
            "comments can be {what} for {} seconds after posting; that time has passed",
            rules.window_secs
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DiscussionId, FullSlug, Slug, SlugPart};

    fn comment(author: &str) -> Comment {
        let part = SlugPart::generate();
        Comment {
            discussion_id: DiscussionId::generate(),
            slug: Slug::top_level(&part),
            full_slug: FullSlug::top_level(Micros(1_000_000), &part),
            parent: None,
            posted: Micros(1_000_000),
            author: person(author),
            text: Some("first".into()),
            html: Some("<p>first</p>\n".into()),
            edited: None,
            edited_by: None,
            deleted: false,
            revisions: Vec::new(),
            reply_count: 0,
            standing: Default::default(),
            votes: Default::default(),
            number: None,
        }
    }

    fn text(t: &str) -> Change {
        Change::Edit {
            text: CommentText::parse(t, 100).unwrap_or_else(|e| panic!("{e}")),
            html: crate::domain::markdown::render(t, 16),
        }
    }

    const RULES: EditRules = EditRules { window_secs: 10 };

    fn person(id: &str) -> Author {
        Author {
            id: id.into(),
            name: id.to_uppercase(),
        }
    }

    #[test]
    fn authors_edit_within_the_window_and_moderators_always() {
        let c = comment("ann");
        let (ann, bob) = (person("ann"), person("bob"));
        let as_ann = Actor {
            author: &ann,
            moderator: false,
        };
        let as_bob = Actor {
            author: &bob,
            moderator: false,
        };
        let as_mod = Actor {
            author: &bob,
            moderator: true,
        };
        let soon = Micros(2_000_000);
        let late = Micros(12_000_001);
        let edited = text("second").apply(&c, as_ann, RULES, false, soon);
        let edited = edited.ok().flatten().unwrap_or_else(|| panic!("edit"));
        assert_eq!(edited.text.as_deref(), Some("second"));
        assert_eq!(edited.html.as_deref(), Some("<p>second</p>\n"));
        assert_eq!(edited.revisions[0].text, "first");
        assert_eq!(edited.revisions[0].edited, c.posted);
        assert!(edited.edited_by.is_none());
        let code = |r: Result<Option<Comment>, DomainError>| r.err().map(|e| e.code());
        assert_eq!(
            code(text("x").apply(&c, as_ann, RULES, false, late)),
            Some("FORBIDDEN")
        );
        assert_eq!(
            code(text("x").apply(&c, as_bob, RULES, false, soon)),
            Some("FORBIDDEN")
        );
        assert_eq!(
            code(text("x").apply(&c, as_ann, RULES, true, soon)),
            Some("FORBIDDEN")
        );
        let closed = EditRules { window_secs: 0 };
        assert_eq!(
            code(text("x").apply(&c, as_ann, closed, false, soon)),
            Some("FORBIDDEN")
        );
        let by_mod = text("third").apply(&edited, as_mod, closed, true, late);
        let by_mod = by_mod.ok().flatten().unwrap_or_else(|| panic!("edit"));
        assert_eq!(by_mod.edited_by.as_ref(), Some(&bob));
        assert_eq!(by_mod.revisions[1].editor, ann);
        assert_eq!(by_mod.revisions[1].edited, soon);
        assert!(matches!(
            text("third").apply(&by_mod, as_mod, RULES, false, late),
            Ok(None)
        ));
    }

    #[test]
    fn deleting_leaves_a_tombstone_once() {
        let c = comment("ann");
        let (ann, bob) = (person("ann"), person("bob"));
        let as_ann = Actor {
            author: &ann,
            moderator: false,
        };
        let gone = Change::Delete.apply(&c, as_ann, RULES, true, Micros(99_000_000));
        let gone = gone.ok().flatten().unwrap_or_else(|| panic!("delete"));
        assert!(gone.deleted && gone.text.is_none() && gone.revisions.is_empty());
        assert!(gone.html.is_none());
        assert_eq!((gone.slug.clone(), gone.posted), (c.slug.clone(), c.posted));
        assert!(matches!(
            Change::Delete.apply(&gone, as_ann, RULES, false, Micros(0)),
            Ok(None)
        ));
        let as_bob = Actor {
            author: &bob,
            moderator: false,
        };
        assert!(Change::Delete
            .apply(&c, as_bob, RULES, false, Micros(0))
            .is_err());
        assert_eq!(
            text("x")
                .apply(&gone, as_ann, RULES, false, Micros(0))
                .err()
                .map(|e| e.code()),
            Some("COMMENT_DELETED")
        );
    }
}
