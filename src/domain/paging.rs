//! Paging: client arguments, validated windows (offset or keyset), opaque cursors and pages.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::{Comment, Discussion, DiscussionId, DomainError, FullSlug, Micros, Slug};

/// Items in a page when a client gives no `first`.
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// The raw paging arguments of a connection field.
#[derive(Debug, Clone, Default)]
pub struct PageArgs {
    /// How many items to return.
    pub first: Option<i32>,
    /// Return items after this cursor.
    pub after: Option<String>,
    /// Skip this many items (offset paging).
    pub offset: Option<i32>,
}

/// The order a cursor belongs to; a cursor from one order is refused by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorKind {
    /// `(posted, slug)`: chronological lists and replies.
    Chronological,
    /// `full_slug`: threaded lists and sub-discussions.
    Threaded,
    /// `(created, id)`: the discussion list.
    Discussion,
}

/// A decoded cursor: the sort key of the last item seen.
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

    /// The cursor of a discussion in the discussion list.
    pub fn of_discussion(discussion: &Discussion) -> Cursor {
        Cursor::Discussion {
            created: discussion.created,
            id: discussion.id.clone(),
        }
    }

    /// Opaque text for clients.
    pub fn encode(&self) -> String {
        let raw = match self {
            Cursor::Chronological { posted, slug } => format!("c|{}|{}", posted.0, slug),
            Cursor::Threaded(full) => format!("t|{full}"),
            Cursor::Discussion { created, id } => format!("d|{}|{}", created.0, id),
        };
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Decodes a client cursor, which must belong to `kind`.
    pub fn decode(text: &str, kind: CursorKind) -> Result<Cursor, DomainError> {
        let bad = || DomainError::bad_input(format!("malformed cursor {:?}", shorten(text)));
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
        let raw = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut fields = raw.splitn(3, '|');
        let cursor = match (fields.next(), fields.next(), fields.next(), kind) {
            (Some("c"), Some(posted), Some(slug), CursorKind::Chronological) => {
                Cursor::Chronological {
                    posted: Micros(posted.parse().map_err(|_| bad())?),
                    slug: Slug::parse(slug).map_err(|_| bad())?,
                }
            }
            (Some("t"), Some(full), None, CursorKind::Threaded) => {
                Cursor::Threaded(FullSlug::parse(full).map_err(|_| bad())?)
            }
            (Some("d"), Some(created), Some(id), CursorKind::Discussion) => Cursor::Discussion {
                created: Micros(created.parse().map_err(|_| bad())?),
                id: DiscussionId::parse(id).map_err(|_| bad())?,
            },
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
            Cursor::Discussion { .. } => false,
        }
    }
}

fn shorten(text: &str) -> String {
    text.chars().take(60).collect()
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

/// A validated window into an ordered list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Window {
    /// Skip `skip` items, take `limit`.
    Offset {
        /// Items to skip.
        skip: u64,
        /// Items to take.
        limit: usize,
    },
    /// Take `limit` items after the cursor (from the start without one).
    After {
        /// Where to start.
        cursor: Option<Cursor>,
        /// Items to take.
        limit: usize,
    },
}

impl Window {
    /// Validates paging arguments: `first` in `0..=max`, `offset >= 0`, `after` a cursor of
    /// `kind`, and not both `offset` and `after`.
    pub fn from_args(
        args: &PageArgs,
        kind: CursorKind,
        default_size: usize,
        max_size: usize,
    ) -> Result<Window, DomainError> {
        let limit = match args.first {
            None => default_size.min(max_size),
            Some(n) if n < 0 => {
                return Err(DomainError::bad_input(format!(
                    "`first` must not be negative (got {n})"
                )))
            }
            Some(n) if n as usize > max_size => {
                return Err(DomainError::bad_input(format!(
                    "`first` must be at most {max_size} (got {n})"
                )))
            }
            Some(n) => n as usize,
        };
        match (args.offset, &args.after) {
            (Some(_), Some(_)) => Err(DomainError::bad_input(
                "give either `offset` or `after`, not both",
            )),
            (Some(n), None) if n < 0 => Err(DomainError::bad_input(format!(
                "`offset` must not be negative (got {n})"
            ))),
            (Some(n), None) => Ok(Window::Offset {
                skip: n as u64,
                limit,
            }),
            (None, after) => Ok(Window::After {
                cursor: after
                    .as_deref()
                    .map(|c| Cursor::decode(c, kind))
                    .transpose()?,
                limit,
            }),
        }
    }

    /// How many items the window takes.
    pub fn limit(&self) -> usize {
        match self {
            Window::Offset { limit, .. } | Window::After { limit, .. } => *limit,
        }
    }

    /// Applies the window to a list already in the window's order. The page holds at most
    /// `limit` items; `has_next` says whether more follow.
    pub fn apply<'a>(&self, sorted: impl IntoIterator<Item = &'a Comment>) -> Page<Comment> {
        let items = self.pick(sorted, |c| c.sort_key());
        Page::from_overfetch(items.into_iter().cloned().collect(), self.limit())
    }

    /// The items of a list already in the window's order that the window takes, with one more
    /// when more follow (up to `limit + 1`, for [`Page::from_overfetch`]), given each item's
    /// sort keys: what [`Window::apply`] does, for items that are not decoded comments yet.
    pub fn pick<T>(
        &self,
        sorted: impl IntoIterator<Item = T>,
        key: impl for<'k> Fn(&'k T) -> SortKey<'k>,
    ) -> Vec<T> {
        match self {
            Window::Offset { skip, limit } => sorted
                .into_iter()
                .skip(usize::try_from(*skip).unwrap_or(usize::MAX))
                .take(limit + 1)
                .collect(),
            Window::After { cursor, limit } => sorted
                .into_iter()
                .filter(|item| {
                    cursor
                        .as_ref()
                        .is_none_or(|cur| cur.precedes_key(key(item)))
                })
                .take(limit + 1)
                .collect(),
        }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items, in order.
    pub items: Vec<T>,
    /// Whether more items follow the page.
    pub has_next: bool,
}

impl<T> Page<T> {
    /// Builds a page from a fetch of up to `limit + 1` items (the extra one only says there is more).
    pub fn from_overfetch(mut items: Vec<T>, limit: usize) -> Page<T> {
        let has_next = items.len() > limit;
        items.truncate(limit);
        Page { items, has_next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(first: Option<i32>, after: Option<&str>, offset: Option<i32>) -> PageArgs {
        PageArgs {
            first,
            after: after.map(str::to_owned),
            offset,
        }
    }

    #[test]
    fn windows_are_validated() {
        let k = CursorKind::Chronological;
        assert!(Window::from_args(&args(Some(-1), None, None), k, 20, 100).is_err());
        assert!(Window::from_args(&args(Some(101), None, None), k, 20, 100).is_err());
        assert!(Window::from_args(&args(None, None, Some(-5)), k, 20, 100).is_err());
        assert!(Window::from_args(&args(None, Some("!!"), None), k, 20, 100).is_err());
        assert!(Window::from_args(&args(None, Some("eA"), Some(1)), k, 20, 100).is_err());
        assert_eq!(
            Window::from_args(&args(None, None, Some(3)), k, 20, 100),
            Ok(Window::Offset { skip: 3, limit: 20 })
        );
    }

    #[test]
    fn cursors_round_trip_and_keep_to_their_kind() {
        let c = Cursor::Chronological {
            posted: Micros(42),
            slug: Slug::parse("abcdefgh/01234567").unwrap_or_else(|e| panic!("{e}")),
        };
        let text = c.encode();
        assert_eq!(Cursor::decode(&text, CursorKind::Chronological), Ok(c));
        assert!(Cursor::decode(&text, CursorKind::Threaded).is_err());
        let forged = URL_SAFE_NO_PAD.encode("c|1|.*");
        assert!(Cursor::decode(&forged, CursorKind::Chronological).is_err());
    }
}
