//! Cursors: the opaque keys that page every list, each of one order (`CursorKind`), refused
//! by any other.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::moderation::UserId;
use super::votes::{Rank, RankKey};
use super::{Comment, Discussion, DiscussionId, DomainError, FullSlug, Micros, Slug, SortKey};

/// The order a cursor belongs to; a cursor from one order is refused by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CursorKind {
    /// `(posted, slug)`, oldest first: chronological lists, threads and replies.
    Chronological,
    /// `(posted, slug)`, newest first.
    Newest,
    /// `full_slug`: threaded lists and sub-discussions.
    Threaded,
    /// `(created, id)`: the discussion list.
    Discussion,
    /// An entry's number: the moderation log, newest first.
    ModerationLog,
    /// `(since, key)`: a moderator queue, oldest first.
    ModerationQueue,
    /// `(at, user)`: the current bans, newest first.
    Bans,
    /// `(posted, discussion, slug)`: one author's comments across discussions, newest first.
    ByAuthor,
    /// `(value, posted, slug)` in a ranked order, with the walk's vote number.
    Ranked(Rank),
}

impl CursorKind {
    /// The kind's tag in a cursor's text.
    fn tag(self) -> &'static str {
        match self {
            CursorKind::Chronological => "c",
            CursorKind::Newest => "n",
            CursorKind::Threaded => "t",
            CursorKind::Discussion => "d",
            CursorKind::ModerationLog => "l",
            CursorKind::ModerationQueue => "q",
            CursorKind::Bans => "b",
            CursorKind::ByAuthor => "a",
            CursorKind::Ranked(Rank::Top) => "T",
            CursorKind::Ranked(Rank::Best) => "B",
            CursorKind::Ranked(Rank::Controversial) => "V",
        }
    }

    fn of_tag(tag: &str) -> Option<CursorKind> {
        [
            CursorKind::Chronological,
            CursorKind::Newest,
            CursorKind::Threaded,
            CursorKind::Discussion,
            CursorKind::ModerationLog,
            CursorKind::ModerationQueue,
            CursorKind::Bans,
            CursorKind::ByAuthor,
            CursorKind::Ranked(Rank::Top),
            CursorKind::Ranked(Rank::Best),
            CursorKind::Ranked(Rank::Controversial),
        ]
        .into_iter()
        .find(|kind| kind.tag() == tag)
    }

    /// What a client calls it, for messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            CursorKind::Chronological => "a CHRONOLOGICAL list",
            CursorKind::Newest => "a NEWEST list",
            CursorKind::Threaded => "a THREADED list or a sub-discussion",
            CursorKind::Discussion => "the discussion list",
            CursorKind::ModerationLog => "the moderation log",
            CursorKind::ModerationQueue => "a moderation queue",
            CursorKind::Bans => "the list of bans",
            CursorKind::ByAuthor => "an author's comments",
            CursorKind::Ranked(Rank::Top) => "a TOP list",
            CursorKind::Ranked(Rank::Best) => "a BEST list",
            CursorKind::Ranked(Rank::Controversial) => "a CONTROVERSIAL list",
        }
    }

    /// Whether lists of this kind run backwards through the stored order (newest first).
    pub fn reversed(self) -> bool {
        matches!(self, CursorKind::Newest | CursorKind::ModerationLog)
    }
}

/// A decoded cursor: the sort key of an item, in the stored order of its list (a newest-first
/// list's cursors carry the same key as a chronological one's; their texts differ).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cursor {
    /// Chronological position.
    Chronological {
        /// Posting time.
        posted: Micros,
        /// Tie-break.
        slug: Slug,
    },
    /// Threaded position.
    Threaded(FullSlug),
    /// Discussion-list position.
    Discussion {
        /// Creation time.
        created: Micros,
        /// Tie-break.
        id: DiscussionId,
    },
    /// Moderation-log position: an entry's number (from 1).
    Log(u64),
    /// Moderation-queue position.
    Queue {
        /// When the comment entered the queue.
        since: Micros,
        /// `<discussion id>:<slug>`, the tie-break.
        key: String,
    },
    /// Position in the list of bans.
    Ban {
        /// When the ban was made.
        at: Micros,
        /// The banned user's id, the tie-break.
        user: String,
    },
    /// Position among one author's comments across discussions (newest first): the comment's
    /// number among the author's (`Comment::number`, from 1).
    ByAuthor(u64),
    /// Ranked position, and the walk it belongs to.
    Ranked {
        /// The item's value as it was read (`f64` bits).
        value: u64,
        /// Its posting time.
        posted: Micros,
        /// Its slug.
        slug: Slug,
        /// The discussion's vote number when the walk's first page was read: later pages leave
        /// out comments whose votes changed after it.
        walk: u64,
    },
}

impl Cursor {
    /// The cursor of a comment in the given order.
    pub fn of_comment(comment: &Comment, kind: CursorKind) -> Cursor {
        match kind {
            CursorKind::Threaded => Cursor::Threaded(comment.full_slug.clone()),
            _ => Cursor::Chronological {
                posted: comment.posted,
                slug: comment.slug.clone(),
            },
        }
    }

    /// The cursor of a comment in a ranked order, in a walk that began at vote number `walk`.
    pub fn ranked(rank: Rank, comment: &Comment, walk: u64) -> Cursor {
        Cursor::Ranked {
            value: rank.of(comment).to_bits(),
            posted: comment.posted,
            slug: comment.slug.clone(),
            walk,
        }
    }

    /// Where a ranked cursor stands, and its walk's vote number (`None` for other cursors).
    pub fn rank_key(&self) -> Option<(RankKey<'_>, u64)> {
        match self {
            Cursor::Ranked {
                value,
                posted,
                slug,
                walk,
            } => Some((
                RankKey {
                    value: f64::from_bits(*value),
                    posted: *posted,
                    slug: slug.as_str(),
                },
                *walk,
            )),
            _ => None,
        }
    }

    /// The cursor of a discussion in the discussion list.
    pub fn of_discussion(discussion: &Discussion) -> Cursor {
        Cursor::Discussion {
            created: discussion.created,
            id: discussion.id.clone(),
        }
    }

    /// Opaque text for clients, of the order the key belongs to (chronological for a posting
    /// time).
    pub fn encode(&self) -> String {
        self.encode_for(match self {
            Cursor::Chronological { .. } => CursorKind::Chronological,
            Cursor::Threaded(_) => CursorKind::Threaded,
            Cursor::Discussion { .. } => CursorKind::Discussion,
            Cursor::Log(_) => CursorKind::ModerationLog,
            Cursor::Queue { .. } => CursorKind::ModerationQueue,
            Cursor::Ban { .. } => CursorKind::Bans,
            Cursor::ByAuthor(..) => CursorKind::ByAuthor,
            // Its order is not in it: ranked cursors are written with `encode_for`.
            Cursor::Ranked { .. } => CursorKind::Ranked(Rank::Top),
        })
    }

    /// Opaque text for clients of a list of `kind` (which says whether a posting time is a
    /// chronological or a newest-first position).
    pub fn encode_for(&self, kind: CursorKind) -> String {
        let raw = match self {
            Cursor::Chronological { posted, slug } => {
                let tag = match kind {
                    CursorKind::Newest => CursorKind::Newest.tag(),
                    _ => CursorKind::Chronological.tag(),
                };
                format!("{tag}|{}|{}", posted.0, slug)
            }
            Cursor::Threaded(full) => format!("t|{full}"),
            Cursor::Discussion { created, id } => format!("d|{}|{}", created.0, id),
            Cursor::Log(seq) => format!("l|{seq}"),
            Cursor::Queue { since, key } => format!("q|{}|{key}", since.0),
            Cursor::Ban { at, user } => format!("b|{}|{user}", at.0),
            Cursor::ByAuthor(number) => format!("a|{number}"),
            Cursor::Ranked {
                value,
                posted,
                slug,
                walk,
            } => format!("{}|{value:x}.{}.{walk}|{slug}", kind.tag(), posted.0),
        };
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Decodes a client cursor, which must belong to `kind`.
    pub fn decode(text: &str, kind: CursorKind) -> Result<Cursor, DomainError> {
        let bad = || DomainError::bad_input(format!("malformed cursor {:?}", shorten(text)));
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
        let raw = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut fields = raw.splitn(3, '|');
        let (tag, first, rest) = (fields.next(), fields.next(), fields.next());
        let found = tag.and_then(CursorKind::of_tag).ok_or_else(bad)?;
        if found != kind {
            return Err(DomainError::bad_input(format!(
                "cursor {:?} belongs to {}, not to {}: a cursor pages only the list and order \
                 that gave it",
                shorten(text),
                found.name(),
                kind.name()
            )));
        }
        let cursor = match (kind, first, rest) {
            (CursorKind::Chronological | CursorKind::Newest, Some(posted), Some(slug)) => {
                Cursor::Chronological {
                    posted: Micros(posted.parse().map_err(|_| bad())?),
                    slug: Slug::parse(slug).map_err(|_| bad())?,
                }
            }
            (CursorKind::Threaded, Some(full), None) => {
                Cursor::Threaded(FullSlug::parse(full).map_err(|_| bad())?)
            }
            (CursorKind::Discussion, Some(created), Some(id)) => Cursor::Discussion {
                created: Micros(created.parse().map_err(|_| bad())?),
                id: DiscussionId::parse(id).map_err(|_| bad())?,
            },
            (CursorKind::ModerationLog, Some(seq), None) => match seq.parse::<u64>() {
                Ok(seq) if (1..=i64::MAX as u64).contains(&seq) => Cursor::Log(seq),
                _ => return Err(bad()),
            },
            (CursorKind::ModerationQueue, Some(since), Some(key)) => {
                let (id, slug) = key.split_once(':').ok_or_else(bad)?;
                DiscussionId::parse(id).map_err(|_| bad())?;
                Slug::parse(slug).map_err(|_| bad())?;
                Cursor::Queue {
                    since: Micros(since.parse().map_err(|_| bad())?),
                    key: key.to_owned(),
                }
            }
            (CursorKind::Bans, Some(at), Some(user)) => Cursor::Ban {
                at: Micros(at.parse().map_err(|_| bad())?),
                user: UserId::parse(user).map_err(|_| bad())?.as_str().to_owned(),
            },
            (CursorKind::ByAuthor, Some(number), None) => match number.parse::<u64>() {
                Ok(n) if (1..=i64::MAX as u64).contains(&n) => Cursor::ByAuthor(n),
                _ => return Err(bad()),
            },
            (CursorKind::Ranked(_), Some(numbers), Some(slug)) => {
                let mut parts = numbers.split('.');
                let (Some(value), Some(posted), Some(walk), None) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    return Err(bad());
                };
                let value = u64::from_str_radix(value, 16).map_err(|_| bad())?;
                if !f64::from_bits(value).is_finite() {
                    return Err(bad());
                }
                Cursor::Ranked {
                    value,
                    posted: Micros(posted.parse().map_err(|_| bad())?),
                    slug: Slug::parse(slug).map_err(|_| bad())?,
                    walk: walk.parse().map_err(|_| bad())?,
                }
            }
            _ => return Err(bad()),
        };
        Ok(cursor)
    }

    /// Whether a comment sorts strictly after this cursor.
    pub fn precedes(&self, comment: &Comment) -> bool {
        self.precedes_key(comment.sort_key())
    }

    /// Whether a comment with these sort keys sorts strictly after this cursor.
    pub fn precedes_key(&self, key: SortKey<'_>) -> bool {
        match self {
            Cursor::Chronological { posted, slug } => {
                (key.posted, key.slug) > (*posted, slug.as_str())
            }
            Cursor::Threaded(full) => key.full_slug > full.as_str(),
            Cursor::Discussion { .. }
            | Cursor::Log(_)
            | Cursor::Queue { .. }
            | Cursor::Ban { .. }
            | Cursor::ByAuthor(..)
            | Cursor::Ranked { .. } => false,
        }
    }

    /// Whether a comment with these sort keys sorts strictly before this cursor.
    pub fn follows_key(&self, key: SortKey<'_>) -> bool {
        match self {
            Cursor::Chronological { posted, slug } => {
                (key.posted, key.slug) < (*posted, slug.as_str())
            }
            Cursor::Threaded(full) => key.full_slug < full.as_str(),
            Cursor::Discussion { .. }
            | Cursor::Log(_)
            | Cursor::Queue { .. }
            | Cursor::Ban { .. }
            | Cursor::ByAuthor(..)
            | Cursor::Ranked { .. } => false,
        }
    }
}

fn shorten(text: &str) -> String {
    text.chars().take(60).collect()
}
