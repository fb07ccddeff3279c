//! Threads in memory: orders, listings, replies and sub-discussions computed from a flat list of
//! comments. Shared by every layout that reads comments in bulk (embedded, bucketed).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::{Comment, FullSlug, Page, Slug, Window};

/// Which comments a list covers, and in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Listing {
    /// Every comment, by posting time.
    Chronological,
    /// Every comment, each thread right after its parent.
    Threaded,
    /// Top-level comments only, oldest first.
    Threads,
}

/// Chronological order: posting time, ties broken by slug.
pub fn chronological(a: &Comment, b: &Comment) -> Ordering {
    (a.posted, &a.slug).cmp(&(b.posted, &b.slug))
}

/// Threaded order: each comment right after its parent, siblings oldest first.
pub fn threaded(a: &Comment, b: &Comment) -> Ordering {
    a.full_slug.cmp(&b.full_slug)
}

/// A set of comments of one discussion, indexed for every read the API makes. Built from any
/// subset that holds the comments a read needs (a whole embedded document, or the buckets that
/// hold a subtree).
#[derive(Debug, Clone, Default)]
pub struct Thread {
    /// Every comment, in threaded order.
    threaded: Vec<Comment>,
    /// Indexes into `threaded`, in chronological order.
    chronological: Vec<usize>,
    /// Index into `threaded` by slug.
    by_slug: HashMap<Slug, usize>,
    /// Indexes into `threaded` of each parent's children, oldest first.
    children: HashMap<Option<Slug>, Vec<usize>>,
}

impl Thread {
    /// Indexes a flat list of comments (any order).
    pub fn new(mut comments: Vec<Comment>) -> Self {
        comments.sort_by(threaded);
        let mut chronological: Vec<usize> = (0..comments.len()).collect();
        chronological.sort_by(|&a, &b| self::chronological(&comments[a], &comments[b]));
        let by_slug = comments
            .iter()
            .enumerate()
            .map(|(i, c)| (c.slug.clone(), i))
            .collect();
        let mut children: HashMap<Option<Slug>, Vec<usize>> = HashMap::new();
        for &i in &chronological {
            children
                .entry(comments[i].parent.clone())
                .or_default()
                .push(i);
        }
        Self {
            threaded: comments,
            chronological,
            by_slug,
            children,
        }
    }

    /// How many comments it holds.
    pub fn len(&self) -> usize {
        self.threaded.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.threaded.is_empty()
    }

    /// Every comment, in threaded order.
    pub fn comments(&self) -> &[Comment] {
        &self.threaded
    }

    /// One page of a listing.
    pub fn list(&self, listing: Listing, window: &Window) -> Page<Comment> {
        match listing {
            Listing::Threaded => window.apply(self.threaded.iter()),
            Listing::Chronological => {
                window.apply(self.chronological.iter().map(|&i| &self.threaded[i]))
            }
            Listing::Threads => window.apply(self.children_of(None)),
        }
    }

    /// The comment with this slug.
    pub fn get(&self, slug: &Slug) -> Option<&Comment> {
        self.by_slug.get(slug).map(|&i| &self.threaded[i])
    }

    /// The comments with these slugs (missing ones are left out).
    pub fn by_slugs(&self, slugs: &[Slug]) -> Vec<Comment> {
        slugs.iter().filter_map(|s| self.get(s)).cloned().collect()
    }

    fn children_of(&self, parent: Option<&Slug>) -> impl Iterator<Item = &Comment> {
        self.children
            .get(&parent.cloned())
            .into_iter()
            .flatten()
            .map(|&i| &self.threaded[i])
    }

    /// The direct replies of `parent`, oldest first.
    pub fn replies_of<'a>(&'a self, parent: &Slug) -> impl Iterator<Item = &'a Comment> + 'a {
        self.children_of(Some(parent))
    }

    /// One page of direct replies for each parent.
    pub fn replies(&self, parents: &[Slug], window: &Window) -> HashMap<Slug, Page<Comment>> {
        parents
            .iter()
            .map(|p| (p.clone(), window.apply(self.children_of(Some(p)))))
            .collect()
    }

    /// Every descendant of `root`, in threaded order (a contiguous run of the threaded list).
    pub fn descendants(&self, root: &FullSlug) -> &[Comment] {
        let (lo, hi) = root.descendant_range();
        let start = self
            .threaded
            .partition_point(|c| c.full_slug.as_str() < lo.as_str());
        let end = self
            .threaded
            .partition_point(|c| c.full_slug.as_str() < hi.as_str());
        &self.threaded[start..end.max(start)]
    }

    /// One page of the sub-discussion of each root.
    pub fn sub_discussions(
        &self,
        roots: &[FullSlug],
        window: &Window,
    ) -> HashMap<FullSlug, Page<Comment>> {
        roots
            .iter()
            .map(|r| (r.clone(), window.apply(self.descendants(r))))
            .collect()
    }

    /// The size of the sub-discussion of each root.
    pub fn sub_discussion_counts(&self, roots: &[FullSlug]) -> HashMap<FullSlug, u64> {
        roots
            .iter()
            .map(|r| (r.clone(), self.descendants(r).len() as u64))
            .collect()
    }
}
