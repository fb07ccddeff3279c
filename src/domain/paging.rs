//! Paging: client arguments, validated windows (offset or keyset, forward or backward), opaque
//! cursors, pages, where a window lies in a list of known length (the arithmetic every
//! layout's bounded reads share).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;

use super::{Comment, DomainError, SortKey};

/// Items in a page when a client gives neither `first` nor `last`.
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// The raw paging arguments of a connection field.
#[derive(Debug, Clone, Default)]
pub struct PageArgs {
    /// How many items to return, paging forward.
    pub first: Option<i32>,
    /// Return items after this cursor.
    pub after: Option<String>,
    /// How many items to return, paging backward (the ones just before `before`, or the final
    /// ones).
    pub last: Option<i32>,
    /// Return items before this cursor.
    pub before: Option<String>,
    /// Skip this many items (offset paging, forward).
    pub offset: Option<i32>,
}

/// The deepest `offset` a ranked list (TOP, BEST, CONTROVERSIAL) takes. No index holds a
/// comment's place in a ranked order, so an offset is read from the list's start: this bounds
/// what one page of it reads (and holds) to about a thousand comments, whatever the size of the
/// discussion. Cursors page on past it, each page a bounded read.
pub const MAX_RANKED_OFFSET: i32 = 1_000;

pub use super::cursors::{Cursor, CursorKind};

/// A validated window into a list, in the list's stored order (oldest first, threaded, or
/// creation order): forward from the start or a cursor, or backward from the end or a cursor.
/// A newest-first connection reads the stored order backwards through the same windows.
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
    /// Take the `limit` items that end `skip` items before the end of the list (backward).
    FromEnd {
        /// Items left out at the end.
        skip: u64,
        /// Items to take.
        limit: usize,
    },
    /// Take the `limit` items just before the cursor (backward).
    Before {
        /// Where to end.
        cursor: Cursor,
        /// Items to take.
        limit: usize,
    },
}

/// Where a window lies in a list whose items are numbered from 0 in stored order: it reads the
/// items `from .. from + count`, which hold its page and the one item that says whether more lie
/// beyond it (after the page for a forward window, before it for a backward one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The first item read.
    pub from: u64,
    /// How many items are read (fewer at either end of the list).
    pub count: u64,
}

impl Span {
    /// The first item after the span.
    pub fn end(self) -> u64 {
        self.from.saturating_add(self.count)
    }

    /// The forward offset window that reads just this span (`None` for an empty span).
    pub fn as_offset(self) -> Option<Window> {
        let limit = usize::try_from(self.count.checked_sub(1)?).unwrap_or(usize::MAX);
        Some(Window::Offset {
            skip: self.from,
            limit,
        })
    }

    /// The span of `more` items that ends just before item `end`, cut at the start of the list.
    fn ending(end: u64, more: u64) -> Span {
        let from = end.saturating_sub(more);
        Span {
            from,
            count: end - from,
        }
    }
}

impl Window {
    /// How many items the window takes.
    pub fn limit(&self) -> usize {
        match self {
            Window::Offset { limit, .. }
            | Window::After { limit, .. }
            | Window::FromEnd { limit, .. }
            | Window::Before { limit, .. } => *limit,
        }
    }

    /// Whether it reads backward (from the end, or before a cursor): its page's `has_next`
    /// then says whether more items precede the page.
    pub fn is_backward(&self) -> bool {
        matches!(self, Window::FromEnd { .. } | Window::Before { .. })
    }

    /// Its cursor, if it has one.
    pub fn cursor(&self) -> Option<&Cursor> {
        match self {
            Window::After { cursor, .. } => cursor.as_ref(),
            Window::Before { cursor, .. } => Some(cursor),
            Window::Offset { .. } | Window::FromEnd { .. } => None,
        }
    }

    /// The window over just the items on its side of its cursor (after it, forward; before it,
    /// backward), for a read that already keeps only those: the first items of them, or the
    /// last ones. Windows without a cursor stay as they are.
    pub fn without_cursor(&self) -> Window {
        match self {
            Window::After { limit, .. } => Window::After {
                cursor: None,
                limit: *limit,
            },
            Window::Before { limit, .. } => Window::FromEnd {
                skip: 0,
                limit: *limit,
            },
            other @ (Window::Offset { .. } | Window::FromEnd { .. }) => other.clone(),
        }
    }

    /// Items read to fill the window: its limit and the one that says whether more follow.
    pub fn more(&self) -> u64 {
        u64::try_from(self.limit())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// Where the window lies in its list (see [`Span`]), given the list's length `len` (which a
    /// window from the end needs) and the position `at` of its cursor's item (which a cursor
    /// window needs: for `Before`, the items before the cursor). `None` when it needs one that
    /// is not given.
    pub fn span(&self, len: Option<u64>, at: Option<u64>) -> Option<Span> {
        let more = self.more();
        match self {
            Window::Offset { skip, .. } => Some(Span {
                from: *skip,
                count: more,
            }),
            Window::After { cursor: None, .. } => Some(Span {
                from: 0,
                count: more,
            }),
            Window::After {
                cursor: Some(_), ..
            } => Some(Span {
                from: at?.saturating_add(1),
                count: more,
            }),
            Window::FromEnd { skip, .. } => Some(Span::ending(len?.saturating_sub(*skip), more)),
            Window::Before { .. } => Some(Span::ending(at?, more)),
        }
    }

    /// The page of the items a read of the window returned, in stored order: up to `limit + 1`
    /// of them, the extra one past the page in the window's direction (at the end for a forward
    /// window, at the start for a backward one).
    pub fn page<T>(&self, mut items: Vec<T>) -> Page<T> {
        let limit = self.limit();
        if !self.is_backward() {
            return Page::from_overfetch(items, limit);
        }
        let has_next = items.len() > limit;
        let extra = items.len().saturating_sub(limit);
        items.drain(..extra);
        Page { items, has_next }
    }

    /// Applies the window to a list already in stored order.
    pub fn apply<'a>(&self, sorted: impl IntoIterator<Item = &'a Comment>) -> Page<Comment> {
        let items = self.pick(sorted, |c| c.sort_key());
        self.page(items.into_iter().cloned().collect())
    }

    /// The items of a list already in stored order that the window reads, with the one that
    /// says whether more lie beyond it (up to `limit + 1`, in stored order, for
    /// [`Window::page`]), given each item's sort keys: what [`Window::apply`] does, for items
    /// that are not decoded comments yet.
    pub fn pick<T>(
        &self,
        sorted: impl IntoIterator<Item = T>,
        key: impl for<'k> Fn(&'k T) -> SortKey<'k>,
    ) -> Vec<T> {
        let more = usize::try_from(self.more()).unwrap_or(usize::MAX);
        match self {
            Window::Offset { skip, .. } => sorted
                .into_iter()
                .skip(usize::try_from(*skip).unwrap_or(usize::MAX))
                .take(more)
                .collect(),
            Window::After { cursor, .. } => sorted
                .into_iter()
                .filter(|item| {
                    cursor
                        .as_ref()
                        .is_none_or(|cur| cur.precedes_key(key(item)))
                })
                .take(more)
                .collect(),
            Window::FromEnd { skip, .. } => {
                let mut all: Vec<T> = sorted.into_iter().collect();
                let len = u64::try_from(all.len()).unwrap_or(u64::MAX);
                let span = Span::ending(len.saturating_sub(*skip), self.more());
                all.truncate(usize::try_from(span.end()).unwrap_or(usize::MAX));
                all.drain(..usize::try_from(span.from).unwrap_or(usize::MAX));
                all
            }
            Window::Before { cursor, .. } => {
                let mut last: VecDeque<T> = VecDeque::with_capacity(more.min(1_024));
                for item in sorted {
                    if !cursor.follows_key(key(&item)) {
                        break;
                    }
                    if last.len() == more {
                        last.pop_front();
                    }
                    last.push_back(item);
                }
                last.into()
            }
        }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items, in stored order.
    pub items: Vec<T>,
    /// Whether more items lie beyond the page in the direction its window reads: after it for a
    /// forward window, before it for a backward one ([`Window::is_backward`]).
    pub has_next: bool,
}

impl<T> Page<T> {
    /// Builds a page from a fetch of up to `limit + 1` items (the extra one only says there is more).
    pub fn from_overfetch(mut items: Vec<T>, limit: usize) -> Page<T> {
        let has_next = items.len() > limit;
        items.truncate(limit);
        Page { items, has_next }
    }

    /// An empty page with nothing beyond it.
    pub fn empty() -> Page<T> {
        Page {
            items: Vec::new(),
            has_next: false,
        }
    }

    /// The page with each item shared: what the store's reads hand out, so that a page the
    /// read cache holds is handed to each request without copying its items.
    pub fn shared(self) -> Page<Arc<T>> {
        Page {
            items: self.items.into_iter().map(Arc::new).collect(),
            has_next: self.has_next,
        }
    }
}

/// `items`, each shared (see [`Page::shared`]).
pub fn share_all<T>(items: Vec<T>) -> Vec<Arc<T>> {
    items.into_iter().map(Arc::new).collect()
}

/// Each page of `pages` with its items shared (see [`Page::shared`]).
pub fn shared_pages<K: Eq + Hash, T>(pages: HashMap<K, Page<T>>) -> HashMap<K, Page<Arc<T>>> {
    pages
        .into_iter()
        .map(|(k, page)| (k, page.shared()))
        .collect()
}

/// A connection's paging arguments, validated: the window a store reads (in the list's stored
/// order), and how its page reads in the connection's order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Paging {
    /// What the store reads.
    pub window: Window,
    /// Whether the connection lists the stored order backwards (newest first).
    pub reversed: bool,
    /// Whether the client paged backward (`last`/`before`).
    pub backward: bool,
    /// Whether the arguments start the page inside the list, so items lie on the side they
    /// start from: an `offset` above 0 or an `after` for a forward page, a `before` for a
    /// backward one.
    anchored: bool,
}

/// A page in a connection's order, with its page info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paged<T> {
    /// The items, in the connection's order.
    pub items: Vec<T>,
    /// Whether more items follow the page: exact on a forward page; on a backward page,
    /// whether a `before` cursor was given (its item follows).
    pub has_next_page: bool,
    /// Whether items precede the page: exact on a backward page; on a forward page, whether an
    /// `offset` above 0 or an `after` cursor was given.
    pub has_previous_page: bool,
}

impl Paging {
    /// Validates paging arguments of a list of `kind`: `first` or `last` (not both) in
    /// `0..=max`, with `after` and `offset` (not both) forward or `before` backward, `offset >= 0`,
    /// and cursors of `kind`.
    pub fn from_args(
        args: &PageArgs,
        kind: CursorKind,
        default_size: usize,
        max_size: usize,
    ) -> Result<Paging, DomainError> {
        let refuse = |message: &str| Err(DomainError::bad_input(message));
        if args.first.is_some() && args.last.is_some() {
            return refuse("give either `first` or `last`, not both");
        }
        if args.offset.is_some() && (args.last.is_some() || args.before.is_some()) {
            return refuse(
                "`offset` counts from the start and pages forward: give it with `first`, not with \
                 `last` or `before`",
            );
        }
        if args.after.is_some() && args.before.is_some() {
            return refuse("give either `after` or `before`, not both");
        }
        if args.first.is_some() && args.before.is_some() {
            return refuse("`before` pages backward: give it with `last`, not `first`");
        }
        if args.last.is_some() && args.after.is_some() {
            return refuse("`after` pages forward: give it with `first`, not `last`");
        }
        if args.offset.is_some() && args.after.is_some() {
            return refuse("give either `offset` or `after`, not both");
        }
        let backward = args.last.is_some() || args.before.is_some();
        let (name, size) = match backward {
            true => ("last", args.last),
            false => ("first", args.first),
        };
        let limit = match size {
            None => default_size.min(max_size),
            Some(n) if n < 0 => {
                return Err(DomainError::bad_input(format!(
                    "`{name}` must not be negative (got {n})"
                )))
            }
            Some(n) if n as usize > max_size => {
                return Err(DomainError::bad_input(format!(
                    "`{name}` must be at most {max_size} (got {n})"
                )))
            }
            Some(n) => n as usize,
        };
        let decode =
            |text: &Option<String>| text.as_deref().map(|c| Cursor::decode(c, kind)).transpose();
        let reversed = kind.reversed();
        let (window, anchored) = if backward {
            let before = decode(&args.before)?;
            let anchored = before.is_some();
            let window = match (before, reversed) {
                (Some(cursor), false) => Window::Before { cursor, limit },
                (None, false) => Window::FromEnd { skip: 0, limit },
                (cursor, true) => Window::After { cursor, limit },
            };
            (window, anchored)
        } else {
            let after = decode(&args.after)?;
            match args.offset {
                Some(n) if n < 0 => {
                    return Err(DomainError::bad_input(format!(
                        "`offset` must not be negative (got {n})"
                    )))
                }
                Some(n) if matches!(kind, CursorKind::Ranked(_)) && n > MAX_RANKED_OFFSET => {
                    return Err(DomainError::bad_input(format!(
                        "`offset` on {} is at most {MAX_RANKED_OFFSET} (got {n}): a ranked \
                         list is read from its start, so page on with `after` and the last \
                         cursor instead",
                        kind.name()
                    )))
                }
                Some(n) => {
                    let skip = n as u64;
                    let window = match reversed {
                        true => Window::FromEnd { skip, limit },
                        false => Window::Offset { skip, limit },
                    };
                    (window, skip > 0)
                }
                None => {
                    let anchored = after.is_some();
                    let window = match (after, reversed) {
                        (Some(cursor), true) => Window::Before { cursor, limit },
                        (None, true) => Window::FromEnd { skip: 0, limit },
                        (cursor, false) => Window::After { cursor, limit },
                    };
                    (window, anchored)
                }
            }
        };
        Ok(Paging {
            window,
            reversed,
            backward,
            anchored,
        })
    }

    /// The page a store read for [`Paging::window`], in the connection's order, with its page
    /// info.
    pub fn finish<T>(&self, page: Page<T>) -> Paged<T> {
        let Page {
            mut items,
            has_next,
        } = page;
        if self.reversed {
            items.reverse();
        }
        // A store's `has_next` looks the way the window reads, which in the connection's order
        // is the way the client pages.
        let (has_next_page, has_previous_page) = match self.backward {
            true => (self.anchored, has_next),
            false => (has_next, self.anchored),
        };
        Paged {
            items,
            has_next_page,
            has_previous_page,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::votes::Rank;
    use crate::domain::{Micros, Slug};
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    fn args(first: Option<i32>, after: Option<&str>, offset: Option<i32>) -> PageArgs {
        PageArgs {
            first,
            after: after.map(str::to_owned),
            offset,
            ..PageArgs::default()
        }
    }

    fn back(last: Option<i32>, before: Option<&str>) -> PageArgs {
        PageArgs {
            last,
            before: before.map(str::to_owned),
            ..PageArgs::default()
        }
    }

    fn paging(args: &PageArgs, kind: CursorKind) -> Result<Paging, DomainError> {
        Paging::from_args(args, kind, 20, 100)
    }

    fn chrono(posted: i64, slug: &str) -> Cursor {
        Cursor::Chronological {
            posted: Micros(posted),
            slug: Slug::from_stored(slug.to_owned()),
        }
    }

    #[test]
    fn ranked_offsets_are_capped_and_the_cap_is_named() {
        let top = CursorKind::Ranked(Rank::Top);
        let at_cap = paging(&args(Some(10), None, Some(MAX_RANKED_OFFSET)), top);
        assert_eq!(
            at_cap.map(|p| p.window),
            Ok(Window::Offset {
                skip: MAX_RANKED_OFFSET as u64,
                limit: 10
            })
        );
        let over = paging(&args(Some(1), None, Some(MAX_RANKED_OFFSET + 1)), top);
        let Err(DomainError::BadInput(message)) = over else {
            panic!("an offset past the cap was taken: {over:?}");
        };
        assert!(
            message.contains("at most 1000") && message.contains("TOP"),
            "{message}"
        );
        // Orders an index serves take any offset.
        let deep = paging(
            &args(Some(1), None, Some(19_990)),
            CursorKind::Chronological,
        );
        assert!(deep.is_ok());
    }

    #[test]
    fn windows_are_validated() {
        let k = CursorKind::Chronological;
        let cursor = chrono(5, "abcdefgh").encode();
        assert!(paging(&args(Some(-1), None, None), k).is_err());
        assert!(paging(&args(Some(101), None, None), k).is_err());
        assert!(paging(&args(None, None, Some(-5)), k).is_err());
        assert!(paging(&args(None, Some("!!"), None), k).is_err());
        assert!(paging(&args(None, Some(&cursor), Some(1)), k).is_err());
        assert!(paging(&back(Some(-1), None), k).is_err());
        assert!(paging(&back(Some(101), None), k).is_err());
        assert!(paging(&back(None, Some("!!")), k).is_err());
        let mixed = [
            PageArgs {
                first: Some(1),
                last: Some(1),
                ..PageArgs::default()
            },
            PageArgs {
                offset: Some(1),
                last: Some(1),
                ..PageArgs::default()
            },
            PageArgs {
                offset: Some(0),
                before: Some(cursor.clone()),
                ..PageArgs::default()
            },
            PageArgs {
                after: Some(cursor.clone()),
                before: Some(cursor.clone()),
                ..PageArgs::default()
            },
            PageArgs {
                first: Some(2),
                before: Some(cursor.clone()),
                ..PageArgs::default()
            },
            PageArgs {
                last: Some(2),
                after: Some(cursor.clone()),
                ..PageArgs::default()
            },
        ];
        for args in &mixed {
            let err = paging(args, k).expect_err("mixed directions");
            assert!(matches!(err, DomainError::BadInput(_)), "{args:?}");
        }
        assert_eq!(
            paging(&args(None, None, Some(3)), k).map(|p| p.window),
            Ok(Window::Offset { skip: 3, limit: 20 })
        );
        assert_eq!(
            paging(&back(Some(4), None), k).map(|p| p.window),
            Ok(Window::FromEnd { skip: 0, limit: 4 })
        );
        assert_eq!(
            paging(&back(None, Some(&cursor)), k).map(|p| p.window),
            Ok(Window::Before {
                cursor: chrono(5, "abcdefgh"),
                limit: 20
            })
        );
    }

    #[test]
    fn newest_first_reads_the_stored_order_backwards() {
        let k = CursorKind::Newest;
        let cursor = chrono(5, "abcdefgh").encode_for(k);
        let window = |args: &PageArgs| paging(args, k).map(|p| p.window);
        assert_eq!(
            window(&args(Some(3), None, None)),
            Ok(Window::FromEnd { skip: 0, limit: 3 })
        );
        assert_eq!(
            window(&args(Some(3), None, Some(7))),
            Ok(Window::FromEnd { skip: 7, limit: 3 })
        );
        assert_eq!(
            window(&args(Some(3), Some(&cursor), None)),
            Ok(Window::Before {
                cursor: chrono(5, "abcdefgh"),
                limit: 3
            })
        );
        assert_eq!(
            window(&back(Some(3), Some(&cursor))),
            Ok(Window::After {
                cursor: Some(chrono(5, "abcdefgh")),
                limit: 3
            })
        );
        assert_eq!(
            window(&back(Some(3), None)),
            Ok(Window::After {
                cursor: None,
                limit: 3
            })
        );
    }

    #[test]
    fn cursors_round_trip_and_keep_to_their_kind() {
        let c = Cursor::Chronological {
            posted: Micros(42),
            slug: Slug::parse("abcdefgh/01234567").unwrap_or_else(|e| panic!("{e}")),
        };
        let text = c.encode();
        assert_eq!(
            Cursor::decode(&text, CursorKind::Chronological),
            Ok(c.clone())
        );
        assert!(Cursor::decode(&text, CursorKind::Threaded).is_err());
        assert!(Cursor::decode(&text, CursorKind::Newest).is_err());
        let newest = c.encode_for(CursorKind::Newest);
        assert_ne!(newest, text);
        assert_eq!(Cursor::decode(&newest, CursorKind::Newest), Ok(c));
        let Err(DomainError::BadInput(message)) =
            Cursor::decode(&newest, CursorKind::Chronological)
        else {
            panic!("a NEWEST cursor in a CHRONOLOGICAL list")
        };
        assert!(message.contains("NEWEST"), "{message}");
        let forged = URL_SAFE_NO_PAD.encode("c|1|.*");
        assert!(Cursor::decode(&forged, CursorKind::Chronological).is_err());
        let unknown = URL_SAFE_NO_PAD.encode("x|1|abcdefgh");
        assert!(Cursor::decode(&unknown, CursorKind::Chronological).is_err());
    }

    #[test]
    fn author_cursors_round_trip_and_forgeries_are_refused() {
        let kind = CursorKind::ByAuthor;
        let cursor = Cursor::ByAuthor(1_234);
        let text = cursor.encode();
        assert_eq!(Cursor::decode(&text, kind), Ok(cursor));
        assert!(Cursor::decode(&text, CursorKind::ModerationQueue).is_err());
        for raw in [
            "a|0",
            "a|x",
            "a|-3",
            "a|1|0123456789abcdef01234567:abcd1234",
            "a|99999999999999999999",
            "q|1|0123456789abcdef01234567:abcd1234",
        ] {
            let forged = URL_SAFE_NO_PAD.encode(raw);
            assert!(Cursor::decode(&forged, kind).is_err(), "{raw}");
        }
    }

    #[test]
    fn queue_cursors_round_trip_and_forgeries_are_refused() {
        let kind = CursorKind::ModerationQueue;
        let cursor = Cursor::Queue {
            since: Micros(1_700_000_000_000_000),
            key: "0123456789abcdef01234567:abcd1234/efgh5678".into(),
        };
        let text = cursor.encode();
        assert_eq!(Cursor::decode(&text, kind), Ok(cursor));
        assert!(Cursor::decode(&text, CursorKind::ModerationLog).is_err());
        for raw in [
            "q|1",
            "q|x|0123456789abcdef01234567:abcd1234",
            "q|1|0123456789abcdef01234567",
            "q|1|nope:abcd1234",
            "q|1|0123456789abcdef01234567:not a slug",
        ] {
            let forged = URL_SAFE_NO_PAD.encode(raw);
            assert!(Cursor::decode(&forged, kind).is_err(), "{raw}");
        }
    }

    #[test]
    fn log_cursors_page_newest_first() {
        let kind = CursorKind::ModerationLog;
        let text = Cursor::Log(7).encode();
        assert_eq!(Cursor::decode(&text, kind), Ok(Cursor::Log(7)));
        assert!(Cursor::decode(&text, CursorKind::Discussion).is_err());
        for raw in ["l|0", "l|-1", "l|x", "l|", "l|1|2", "l|9223372036854775808"] {
            let forged = URL_SAFE_NO_PAD.encode(raw);
            assert!(Cursor::decode(&forged, kind).is_err(), "{raw}");
        }
        let max = URL_SAFE_NO_PAD.encode("l|9223372036854775807");
        assert_eq!(Cursor::decode(&max, kind), Ok(Cursor::Log(i64::MAX as u64)));
        // Newest first: `first`/`after` read the stored order backward from the end or the
        // cursor, `last`/`before` forward.
        let page = |args: &PageArgs| paging(args, kind).map(|p| p.window);
        assert_eq!(
            page(&args(Some(3), None, None)),
            Ok(Window::FromEnd { skip: 0, limit: 3 })
        );
        assert_eq!(
            page(&args(Some(3), Some(&text), None)),
            Ok(Window::Before {
                cursor: Cursor::Log(7),
                limit: 3
            })
        );
        assert_eq!(
            page(&back(Some(3), Some(&text))),
            Ok(Window::After {
                cursor: Some(Cursor::Log(7)),
                limit: 3
            })
        );
        // Entry 7 is at position 6: the three before it are entries 4 to 6 (and 3 says more).
        let before = Window::Before {
            cursor: Cursor::Log(7),
            limit: 3,
        };
        assert_eq!(before.span(None, Some(6)), Some(Span { from: 2, count: 4 }));
    }

    /// A list of `n` comments-like keys `0..n`, as `(posted, slug)` pairs sorting in that order.
    fn keys(n: i64) -> Vec<(i64, String)> {
        (0..n).map(|i| (i, format!("s{i:04}"))).collect()
    }

    fn sort_key(item: &(i64, String)) -> SortKey<'_> {
        SortKey {
            posted: Micros(item.0),
            slug: &item.1,
            full_slug: &item.1,
        }
    }

    /// The page a window takes from `0..n`, as numbers, with its `has_next`.
    fn picked(window: &Window, n: i64) -> (Vec<i64>, bool) {
        let page = window.page(window.pick(keys(n), sort_key));
        (page.items.iter().map(|k| k.0).collect(), page.has_next)
    }

    #[test]
    fn backward_windows_take_the_items_before_their_end() {
        let before = |at: i64, limit| Window::Before {
            cursor: chrono(at, &format!("s{at:04}")),
            limit,
        };
        assert_eq!(picked(&before(5, 2), 10), (vec![3, 4], true));
        assert_eq!(picked(&before(2, 2), 10), (vec![0, 1], false));
        assert_eq!(picked(&before(2, 5), 10), (vec![0, 1], false));
        assert_eq!(picked(&before(0, 5), 10), (vec![], false));
        assert_eq!(picked(&before(5, 0), 10), (vec![], true));
        let from_end = |skip, limit| Window::FromEnd { skip, limit };
        assert_eq!(picked(&from_end(0, 3), 10), (vec![7, 8, 9], true));
        assert_eq!(picked(&from_end(2, 3), 10), (vec![5, 6, 7], true));
        assert_eq!(picked(&from_end(7, 3), 10), (vec![0, 1, 2], false));
        assert_eq!(picked(&from_end(8, 3), 10), (vec![0, 1], false));
        assert_eq!(picked(&from_end(12, 3), 10), (vec![], false));
        assert_eq!(picked(&from_end(0, 3), 0), (vec![], false));
        assert_eq!(picked(&from_end(0, 0), 4), (vec![], true));
    }

    #[test]
    fn spans_are_the_positions_a_window_reads() {
        let after = Window::After {
            cursor: Some(chrono(1, "a")),
            limit: 3,
        };
        assert_eq!(after.span(None, Some(4)), Some(Span { from: 5, count: 4 }));
        assert_eq!(after.span(Some(9), None), None);
        let before = Window::Before {
            cursor: chrono(1, "a"),
            limit: 3,
        };
        assert_eq!(
            before.span(None, Some(10)),
            Some(Span { from: 6, count: 4 })
        );
        assert_eq!(before.span(None, Some(2)), Some(Span { from: 0, count: 2 }));
        let from_end = Window::FromEnd { skip: 4, limit: 3 };
        assert_eq!(
            from_end.span(Some(10), None),
            Some(Span { from: 2, count: 4 })
        );
        assert_eq!(
            from_end.span(Some(3), None),
            Some(Span { from: 0, count: 0 })
        );
        assert_eq!(from_end.span(None, None), None);
        // Every window's span holds exactly what `pick` takes from a list of that length.
        for n in 0..12_i64 {
            for limit in 0..5 {
                for skip in 0..14 {
                    for window in [
                        Window::Offset { skip, limit },
                        Window::FromEnd { skip, limit },
                    ] {
                        let span = window
                            .span(Some(n as u64), None)
                            .unwrap_or_else(|| panic!("{window:?}"));
                        let read: Vec<i64> = (span.from..span.end().min(n as u64))
                            .map(|i| i as i64)
                            .collect();
                        let want: Vec<i64> =
                            window.pick(keys(n), sort_key).iter().map(|k| k.0).collect();
                        assert_eq!(read, want, "{window:?} of {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_page_reads_in_the_connections_order() {
        let newest = paging(&args(Some(2), None, None), CursorKind::Newest).expect("valid");
        let page = Page {
            items: vec![1, 2],
            has_next: true,
        };
        let paged = newest.finish(page.clone());
        assert_eq!(paged.items, vec![2, 1]);
        assert!(paged.has_next_page && !paged.has_previous_page);
        let cursor = chrono(5, "abcdefgh").encode();
        let backward =
            paging(&back(Some(2), Some(&cursor)), CursorKind::Chronological).expect("valid");
        let paged = backward.finish(page.clone());
        assert_eq!(paged.items, vec![1, 2]);
        assert!(paged.has_previous_page && paged.has_next_page);
        let last = paging(&back(Some(2), None), CursorKind::Chronological).expect("valid");
        let paged = last.finish(Page {
            items: vec![1, 2],
            has_next: false,
        });
        assert!(!paged.has_previous_page && !paged.has_next_page);
    }
}
