//! Where comments of bucketed discussions live, as this process learned it: a reply to a comment
//! it knows needs no read (see docs/ARCHITECTURE.md, "Replies to comments the process knows").
//!
//! A comment's page, its thread root's page and its full slug never change while its discussion
//! stays in the bucketed layout, so an entry is only ever learned from committed data (a post
//! this process committed, or the parent read of a post) and is keyed by the discussion's count
//! of moves between layouts. The pages command of a reply posted from what the process knows
//! checks that each of its counters found its comment, so a wrong entry costs a retry, never a
//! miscounted reply.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::{Discussion, DiscussionId, FullSlug, Slug};

/// Comments remembered in all, over every discussion (the map is emptied beyond this): about
/// 200 bytes each.
pub(super) const KNOWN: usize = 50_000;

/// Where one comment lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Location {
    /// The page that holds it.
    pub page: i64,
    /// The page that holds its thread's top-level comment (its own page for a top-level one).
    pub root_page: i64,
    /// Its full slug.
    pub full_slug: FullSlug,
    /// Whether it was voted on (then it may have a copy: see `copies`); a vote from another
    /// process is caught by the pages command of a reply, which checks it.
    pub voted: bool,
}

/// Remembered locations per discussion, with the discussion's count of moves they belong to.
#[derive(Default)]
pub(super) struct Locations(Mutex<Remembered>);

#[derive(Default)]
pub(super) struct Remembered {
    discussions: HashMap<DiscussionId, (u64, HashMap<Slug, Location>)>,
    total: usize,
}

impl Locations {
    /// Where `slug` of `discussion` lives, if this process knows.
    pub(super) fn get(&self, discussion: &Discussion, slug: &Slug) -> Option<Location> {
        let known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (moves, slugs) = known.discussions.get(&discussion.id)?;
        if *moves != discussion.moves {
            return None;
        }
        slugs.get(slug).cloned()
    }

    /// Remembers where comments of `discussion` live (committed data only).
    pub(super) fn remember(
        &self,
        discussion: &Discussion,
        found: impl IntoIterator<Item = (Slug, Location)>,
    ) {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let known = &mut *known;
        for (slug, location) in found {
            if known.total >= KNOWN {
                known.discussions.clear();
                known.total = 0;
            }
            let (moves, slugs) = known
                .discussions
                .entry(discussion.id.clone())
                .or_insert_with(|| (discussion.moves, HashMap::new()));
            if *moves != discussion.moves {
                known.total -= slugs.len();
                *moves = discussion.moves;
                slugs.clear();
            }
            if slugs.insert(slug, location).is_none() {
                known.total += 1;
            }
        }
    }

    /// Remembers that the comment `slug` of `discussion` was voted on, if it is remembered.
    pub(super) fn voted(&self, discussion: &Discussion, slug: &Slug) {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((moves, slugs)) = known.discussions.get_mut(&discussion.id) {
            if let (true, Some(location)) = (*moves == discussion.moves, slugs.get_mut(slug)) {
                location.voted = true;
            }
        }
    }

    /// Forgets all of `discussion` (what was remembered turned out wrong).
    pub(super) fn forget(&self, discussion: &DiscussionId) {
        let mut known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, slugs)) = known.discussions.remove(discussion) {
            known.total -= slugs.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Layout, LayoutHints, Micros, SlugPart};

    fn discussion(moves: u64) -> Discussion {
        Discussion {
            id: DiscussionId::generate(),
            title: "known".into(),
            key: None,
            url: None,
            layout: Layout::Bucketed,
            created: Micros(0),
            comment_count: 0,
            thread_count: 0,
            locked: false,
            moderation: None,
            guests: None,
            closing: None,
            pinned: Vec::new(),
            moves,
            hints: LayoutHints::default(),
        }
    }

    fn at(page: i64) -> (Slug, Location) {
        let part = SlugPart::generate();
        let slug = Slug::top_level(&part);
        let full_slug = FullSlug::top_level(Micros(page), &part);
        let location = Location {
            page,
            root_page: page,
            full_slug,
            voted: false,
        };
        (slug, location)
    }

    #[test]
    fn locations_belong_to_the_layout_stay_they_were_learned_in() {
        let known = Locations::default();
        let before = discussion(0);
        let (slug, location) = at(3);
        known.remember(&before, [(slug.clone(), location.clone())]);
        assert_eq!(known.get(&before, &slug), Some(location));
        let mut moved = before.clone();
        moved.moves = 2;
        assert_eq!(known.get(&moved, &slug), None, "moved away and back since");
        let (other, there) = at(0);
        known.remember(&moved, [(other.clone(), there.clone())]);
        assert_eq!(known.get(&before, &slug), None);
        assert_eq!(known.get(&moved, &other), Some(there));
        assert_eq!(
            known.0.lock().unwrap().total,
            1,
            "the old stay's entries are dropped"
        );
        known.forget(&moved.id);
        assert_eq!(known.get(&moved, &other), None);
        assert_eq!(known.0.lock().unwrap().total, 0);
    }

    #[test]
    fn the_process_remembers_a_bounded_number_of_comments() {
        let known = Locations::default();
        let d = discussion(0);
        let first = at(0);
        known.remember(&d, [first.clone()]);
        known.remember(&d, (1..KNOWN as i64).map(at));
        assert_eq!(known.0.lock().unwrap().total, KNOWN);
        assert_eq!(known.get(&d, &first.0), Some(first.1));
        let last = at(-1);
        known.remember(&d, [last.clone()]);
        assert_eq!(
            known.0.lock().unwrap().total,
            1,
            "emptied, then the new one"
        );
        assert_eq!(known.get(&d, &first.0), None);
        assert_eq!(known.get(&d, &last.0), Some(last.1));
    }
}
