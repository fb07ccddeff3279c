//! Comments, discussions, authors and the validated text a client may post.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use super::standing::{Closing, GuestPolicy};
use super::votes::Votes;
use super::{
    markdown, text, DiscussionId, DiscussionKey, DomainError, FullSlug, Layout, Micros,
    ModerationMode, Slug, SlugPart, Standing,
};

/// Who wrote a comment, from the poster's token.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Author {
    /// The token's `sub`.
    pub id: String,
    /// The token's `name`.
    pub name: String,
}

/// A comment as stored, whatever the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// The discussion it belongs to.
    pub discussion_id: DiscussionId,
    /// Its path of slug parts.
    pub slug: Slug,
    /// Its sortable path of `time:part` segments.
    pub full_slug: FullSlug,
    /// The parent's slug; `None` at the top level.
    pub parent: Option<Slug>,
    /// When it was posted.
    pub posted: Micros,
    /// Who posted it.
    pub author: Author,
    /// The text; `None` once deleted.
    pub text: Option<String>,
    /// The text as HTML (`markdown::render`), made when the text was written and stored with
    /// it; `None` once deleted, and for a comment stored before HTML was stored with comments.
    pub html: Option<String>,
    /// When it was last edited.
    pub edited: Option<Micros>,
    /// Who wrote the current text, when that is not the author (a moderator's edit).
    pub edited_by: Option<Author>,
    /// Whether it was deleted (a tombstone keeps its place and its replies).
    pub deleted: bool,
    /// Earlier versions of the text, oldest first (cleared when the comment is deleted).
    pub revisions: Vec<Revision>,
    /// How many direct replies it has.
    pub reply_count: u64,
    /// Where it stands with the moderators.
    pub standing: Standing,
    /// Its vote counters.
    pub votes: Votes,
    /// Its place among its author's comments, from 1, in the order they were posted
    /// (`AuthorNumber`); `None` for a comment stored before comments were numbered, until the
    /// numbering at start reaches it.
    pub number: Option<u64>,
}

/// An earlier version of a comment's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// The text of that version.
    pub text: String,
    /// When that version was written (the posting time for the original text).
    pub edited: Micros,
    /// Who wrote that version.
    pub editor: Author,
}

impl Comment {
    /// Whether the public sees it as it sees `other`: the same text, edit, editor, tombstone
    /// and moderation status (a report count or a moderator's reason is not theirs to see).
    pub fn shows_as(&self, other: &Comment) -> bool {
        self.text == other.text
            && self.edited == other.edited
            && self.edited_by == other.edited_by
            && self.deleted == other.deleted
            && self.standing.status == other.standing.status
    }

    /// What orders it in either listing.
    pub fn sort_key(&self) -> SortKey<'_> {
        SortKey {
            posted: self.posted,
            slug: self.slug.as_str(),
            full_slug: self.full_slug.as_str(),
        }
    }

    /// 0 for a top-level comment.
    pub fn depth(&self) -> usize {
        self.slug.depth()
    }
}

/// What orders a comment in either listing: its posting time and slug (chronological), and its
/// full slug (threaded). Read from a decoded comment, or from a stored one before decoding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey<'a> {
    /// When it was posted.
    pub posted: Micros,
    /// Its slug.
    pub slug: &'a str,
    /// Its full slug.
    pub full_slug: &'a str,
}

/// A discussion: the container of one comment thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discussion {
    /// Its id.
    pub id: DiscussionId,
    /// Its title.
    pub title: String,
    /// The host page's own identifier for it, when it has one (unique).
    pub key: Option<DiscussionKey>,
    /// The address of the page it belongs to, when known.
    pub url: Option<String>,
    /// How its comments are stored.
    pub layout: Layout,
    /// When it was created.
    pub created: Micros,
    /// How many comments it holds (deleted ones included: they keep their place).
    pub comment_count: u64,
    /// How many of them are top-level.
    pub thread_count: u64,
    /// Whether posting is closed (a moderator locked it).
    pub locked: bool,
    /// How it moderates new comments, when a moderator set it; `None` follows the server's
    /// default (`THREADQL_MODERATION`).
    pub moderation: Option<ModerationMode>,
    /// Whether it takes guests' comments, when a moderator set it; `None` follows the
    /// server's default (`THREADQL_GUESTS`).
    pub guests: Option<GuestPolicy>,
    /// When it closes to new comments, votes and edits, when a moderator set it; `None`
    /// follows the server's default (`THREADQL_AUTO_CLOSE_AFTER`).
    pub closing: Option<Closing>,
    /// The slugs of its pinned comments, in the order they were pinned (at most
    /// [`Discussion::MAX_PINNED`]).
    pub pinned: Vec<Slug>,
    /// How many times it moved from one layout to another (what a process remembers about its
    /// storage is valid only for the same count).
    pub moves: u64,
    /// What its layout keeps on the discussion for its own reads, opaque to everything else.
    pub hints: LayoutHints,
}

/// A value a storage layout keeps with a discussion for its own use (counts that bound its
/// reads, say). Only that layout reads it; to everyone else it is opaque.
#[derive(Clone, Default)]
pub struct LayoutHints(Option<Arc<dyn Hint>>);

/// A layout's hints: any value that can be compared and printed.
pub trait Hint: Any + Debug + Send + Sync {
    /// The value, to downcast.
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` is the same type with the same value.
    fn same_as(&self, other: &dyn Hint) -> bool;
}

impl<T: Any + Debug + PartialEq + Send + Sync> Hint for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same_as(&self, other: &dyn Hint) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

impl LayoutHints {
    /// Hints holding `value`.
    pub fn new(value: impl Hint) -> Self {
        Self(Some(Arc::new(value)))
    }

    /// The hints, when they are a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.as_any().downcast_ref()
    }

    /// The hints when they are a `T`, else `none` (a discussion from before its layout kept
    /// them, or in another layout).
    pub fn get_or<'a, T: Any>(&'a self, none: &'a T) -> &'a T {
        self.get().unwrap_or(none)
    }
}

impl PartialEq for LayoutHints {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_as(b.as_ref()),
            _ => false,
        }
    }
}

impl Eq for LayoutHints {}

impl Debug for LayoutHints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(hint) => hint.fmt(f),
            None => f.write_str("LayoutHints(none)"),
        }
    }
}

impl Discussion {
    /// The most comments a discussion may have pinned at once.
    pub const MAX_PINNED: usize = 5;

    /// Whether the comment `slug` is pinned.
    pub fn is_pinned(&self, slug: &Slug) -> bool {
        self.pinned.contains(slug)
    }
}

/// Validated comment text: not blank, at most the configured number of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentText(String);

impl CommentText {
    /// Validates client-supplied text. The text is kept as written (CRLF line ends become LF and
    /// trailing white space is dropped); blank text (only white space or invisible characters:
    /// format characters such as U+200B, the Hangul fillers, the Braille blank), text over
    /// `max_chars` characters and control characters other than newline and tab are refused.
    /// Bidirectional embeddings, overrides and isolates are kept, and those the text leaves
    /// open are closed at its end (U+202C, U+2069), so none reorders what is shown after it.
    pub fn parse(raw: &str, max_chars: usize) -> Result<Self, DomainError> {
        let normalized = raw.replace("\r\n", "\n");
        let text = normalized.trim_end();
        if text::is_blank(text) {
            return Err(DomainError::bad_input(
                "comment text must not be empty (white space and invisible characters alone are empty)",
            ));
        }
        let chars = text.chars().count();
        if chars > max_chars {
            return Err(DomainError::bad_input(format!(
                "comment text has {chars} characters; the limit is {max_chars}"
            )));
        }
        text::check_characters(text, "comment text", &['\n', '\t'])?;
        let mut text = text.to_owned();
        text::close_bidi(&mut text);
        Ok(Self(text))
    }

    /// Validates client-supplied text as [`CommentText::parse`] does, and its Markdown: block
    /// quotes and lists may nest at most `max_depth` levels deep, together (see
    /// [`markdown::depth`]); a deeper text costs its readers too much to render.
    pub fn parse_nested(
        raw: &str,
        max_chars: usize,
        max_depth: usize,
    ) -> Result<Self, DomainError> {
        let text = Self::parse(raw, max_chars)?;
        let depth = markdown::depth(text.as_str());
        if depth > max_depth {
            return Err(DomainError::bad_input(format!(
                "comment text nests block quotes and lists {depth} levels deep; the limit is \
                 {max_depth} levels"
            )));
        }
        Ok(text)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A comment to be posted.
#[derive(Debug, Clone)]
pub struct NewComment {
    /// The parent's slug, for a reply.
    pub parent: Option<Slug>,
    /// The poster.
    pub author: Author,
    /// The text.
    pub text: CommentText,
    /// The text as HTML (`markdown::render`), stored with it.
    pub html: String,
    /// The slug part to give it, when it has one already (a held comment being published);
    /// a fresh one is drawn when it is taken, and when this is `None`.
    pub part: Option<SlugPart>,
    /// The event the write announces with the comment, in its transaction (`None`: none, as
    /// for an import's comments).
    pub announce: Option<super::Announce>,
    /// Its place among its author's comments, when it has one already (a held comment being
    /// published); the store draws one when it is stored, and when this is `None`.
    pub number: Option<u64>,
}

/// Where a new comment goes: its paths and depth, after the depth cap is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The new comment's slug.
    pub slug: Slug,
    /// The new comment's full slug.
    pub full_slug: FullSlug,
    /// The parent it is actually attached to.
    pub parent: Option<Slug>,
    /// True when the requested parent was deeper than the cap allows and the comment was attached
    /// to the deepest allowed ancestor instead.
    pub reattached: bool,
}

impl Placement {
    /// Places a comment under `parent` (its slug and full slug), at most `max_depth` levels deep
    /// (depth 0 is top-level, so the deepest allowed depth is `max_depth - 1`).
    pub fn new(
        parent: Option<(&Slug, &FullSlug)>,
        max_depth: usize,
        posted: Micros,
        part: &SlugPart,
    ) -> Self {
        let deepest_parent = max_depth.saturating_sub(2);
        match parent {
            None => Self {
                slug: Slug::top_level(part),
                full_slug: FullSlug::top_level(posted, part),
                parent: None,
                reattached: false,
            },
            Some(_) if max_depth <= 1 => Self {
                slug: Slug::top_level(part),
                full_slug: FullSlug::top_level(posted, part),
                parent: None,
                reattached: true,
            },
            Some((slug, full_slug)) => {
                let reattached = slug.depth() > deepest_parent;
                let (slug, full_slug) = if reattached {
                    (
                        slug.ancestor_at(deepest_parent),
                        full_slug.ancestor_at(deepest_parent),
                    )
                } else {
                    (slug.clone(), full_slug.clone())
                };
                Self {
                    slug: slug.child(part),
                    full_slug: full_slug.child(posted, part),
                    parent: Some(slug),
                    reattached,
                }
            }
        }
    }

    /// The parent a comment placed under `parent` is attached to, and its slug: what
    /// [`Placement::new`] gives, known before the parent's full slug is.
    pub fn slug_under(
        parent: Option<&Slug>,
        max_depth: usize,
        part: &SlugPart,
    ) -> (Option<Slug>, Slug) {
        match parent {
            Some(slug) if max_depth > 1 => {
                let attached = slug.ancestor_at(slug.depth().min(max_depth - 2));
                let child = attached.child(part);
                (Some(attached), child)
            }
            _ => (None, Slug::top_level(part)),
        }
    }

    /// Builds the stored comment for this placement.
    pub fn into_comment(
        self,
        discussion_id: DiscussionId,
        posted: Micros,
        new: &NewComment,
    ) -> Comment {
        Comment {
            discussion_id,
            slug: self.slug,
            full_slug: self.full_slug,
            parent: self.parent,
            posted,
            author: new.author.clone(),
            text: Some(new.text.as_str().to_owned()),
            html: Some(new.html.clone()),
            edited: None,
            edited_by: None,
            deleted: false,
            revisions: Vec::new(),
            reply_count: 0,
            standing: Standing::default(),
            votes: Votes::default(),
            number: new.number,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_validated() {
        assert!(CommentText::parse("", 10).is_err());
        assert!(CommentText::parse(" \n\t ", 10).is_err());
        assert!(CommentText::parse("12345678901", 10).is_err());
        assert!(CommentText::parse("ünïcödé!!!", 10).is_ok());
        assert!(CommentText::parse("a\0b", 10).is_err());
        assert!(CommentText::parse("bell\u{7}", 10).is_err());
        assert!(CommentText::parse("a\nb\tc", 10).is_ok());
        assert_eq!(
            CommentText::parse("a\r\nb", 10).map(|t| t.0),
            Ok("a\nb".into())
        );
        assert!(CommentText::parse("a\rb", 10).is_err());
        assert_eq!(
            CommentText::parse("  hi  ", 10).map(|t| t.0),
            Ok("  hi".into())
        );
        for invisible in [
            "\u{200B}",
            "\u{FEFF}",
            "\u{3164}",
            "\u{2800}",
            "\u{200B} \n\u{2060}",
        ] {
            assert!(CommentText::parse(invisible, 10).is_err(), "{invisible:?}");
        }
        assert_eq!(
            CommentText::parse("a\u{202E}b", 10).map(|t| t.0),
            Ok("a\u{202E}b\u{202C}".into())
        );
        assert_eq!(
            CommentText::parse("a\u{2066}b\u{2069}", 10).map(|t| t.0),
            Ok("a\u{2066}b\u{2069}".into())
        );
        assert_eq!(
            CommentText::parse("a\u{200B}b\u{200F}", 10).map(|t| t.0),
            Ok("a\u{200B}b\u{200F}".into())
        );
    }

    #[test]
    fn markdown_nesting_is_bounded() {
        let at_limit = "> ".repeat(16) + "x";
        assert!(CommentText::parse_nested(&at_limit, 100, 16).is_ok());
        let err = CommentText::parse_nested(&format!("> {at_limit}"), 100, 16);
        let Err(DomainError::BadInput(message)) = err else {
            panic!("{err:?}");
        };
        assert!(
            message.contains("17 levels") && message.contains("limit is 16"),
            "{message}"
        );
        // The character rules come first.
        assert!(CommentText::parse_nested("", 100, 16).is_err());
    }

    #[test]
    fn slugs_under_a_parent_are_those_placement_gives() {
        for max_depth in [0, 1, 2, 3, 32] {
            let mut parent: Option<(Slug, FullSlug)> = None;
            for i in 0..6 {
                let part = SlugPart::generate();
                let p = Placement::new(
                    parent.as_ref().map(|(s, f)| (s, f)),
                    max_depth,
                    Micros(i + 1),
                    &part,
                );
                let (attached, slug) =
                    Placement::slug_under(parent.as_ref().map(|(s, _)| s), max_depth, &part);
                assert_eq!(
                    (&attached, &slug),
                    (&p.parent, &p.slug),
                    "depth cap {max_depth}"
                );
                parent = Some((p.slug, p.full_slug));
            }
        }
    }

    #[test]
    fn deep_replies_attach_to_the_deepest_allowed_ancestor() {
        let max_depth = 3;
        let mut slug = Slug::top_level(&SlugPart::generate());
        let mut full = FullSlug::top_level(Micros(1), &SlugPart::generate());
        for i in 0..5 {
            let p = Placement::new(
                Some((&slug, &full)),
                max_depth,
                Micros(i + 2),
                &SlugPart::generate(),
            );
            assert!(p.slug.depth() < max_depth);
            slug = p.slug;
            full = p.full_slug;
        }
        assert_eq!(slug.depth(), 2);
        let p = Placement::new(
            Some((&slug, &full)),
            max_depth,
            Micros(99),
            &SlugPart::generate(),
        );
        assert!(p.reattached);
        assert_eq!(p.parent, Some(slug.ancestor_at(1)));
    }
}
