//! Erasing a person (`deleteMyAccount`, `eraseUser`): what each of their comments becomes, and
//! the ids that stand in for them where a record must name somebody.
//!
//! An erased comment is a tombstone with no text, no HTML and no revisions, whose author is
//! `[deleted]` with an opaque id of its own (`erased:` and 16 random hex digits): one erased
//! person's comments cannot be linked to each other. It keeps its place, its replies, its votes
//! and its moderation standing, so every count and rank stays as it was.

use rand::Rng;

use super::names::PLACEHOLDER_NAMES;
use super::{Author, Comment};

/// What an erased person's ids start with.
pub const ERASED_PREFIX: &str = "erased:";

/// The id that stands in for an erased person in the records that keep no comment (the event
/// log, the moderation log, other people's notifications): the same for everybody.
pub const ERASED: &str = "erased";

/// The name an erased comment shows.
pub const ERASED_NAME: &str = PLACEHOLDER_NAMES[0];

/// The author an erased record names.
pub fn erased_actor() -> Author {
    Author {
        id: ERASED.to_owned(),
        name: ERASED_NAME.to_owned(),
    }
}

/// A fresh opaque author for one erased comment.
pub fn opaque_author() -> Author {
    let digits: u64 = rand::thread_rng().gen();
    Author {
        id: format!("{ERASED_PREFIX}{digits:016x}"),
        name: ERASED_NAME.to_owned(),
    }
}

/// Whether the id is one that stands in for an erased person.
pub fn is_erased(id: &str) -> bool {
    id == ERASED || id.starts_with(ERASED_PREFIX)
}

/// What `current` becomes once its author is erased, under the opaque `author`: a tombstone
/// without its number among the author's comments (so no walk of the person finds it again)
/// nor anything they wrote. `None` when it is erased already.
pub fn erased(current: &Comment, author: Author) -> Option<Comment> {
    if is_erased(&current.author.id) {
        return None;
    }
    let mut next = current.clone();
    next.author = author;
    next.number = None;
    next.text = None;
    next.html = None;
    next.revisions.clear();
    next.edited = None;
    next.edited_by = None;
    next.deleted = true;
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DiscussionId, FullSlug, Micros, Revision, Slug, Standing, Votes};

    fn comment() -> Comment {
        let slug = Slug::parse("abcdefgh").expect("slug");
        Comment {
            discussion_id: DiscussionId::generate(),
            full_slug: FullSlug::parse("0000000000000001:abcdefgh").expect("full"),
            slug,
            parent: None,
            posted: Micros(1),
            author: Author {
                id: "u:ann".into(),
                name: "Ann".into(),
            },
            text: Some("mine".into()),
            html: Some("<p>mine</p>".into()),
            edited: Some(Micros(2)),
            edited_by: None,
            deleted: false,
            revisions: vec![Revision {
                text: "first".into(),
                edited: Micros(2),
                editor: Author {
                    id: "u:ann".into(),
                    name: "Ann".into(),
                },
            }],
            reply_count: 3,
            standing: Standing::default(),
            votes: Votes::default(),
            number: Some(7),
        }
    }

    #[test]
    fn an_erased_comment_keeps_its_place_and_counts_but_nothing_of_its_author() {
        let before = comment();
        let (one, two) = (opaque_author(), opaque_author());
        assert_ne!(one.id, two.id, "each comment gets its own id");
        assert!(is_erased(&one.id) && one.id.len() == ERASED_PREFIX.len() + 16);
        let after = erased(&before, one.clone()).expect("erased");
        assert_eq!(after.author, one);
        assert_eq!((after.text, after.html), (None, None));
        assert!(after.revisions.is_empty() && after.deleted && after.number.is_none());
        assert_eq!(after.reply_count, 3);
        assert_eq!(
            (after.slug, after.posted),
            (before.slug.clone(), before.posted)
        );
        let again = erased(&before, two).expect("erased");
        assert!(
            erased(&again, opaque_author()).is_none(),
            "erasing twice changes nothing"
        );
        assert!(!is_erased("u:ann"));
    }
}
