//! An independent in-test model of a comment tree, and a generator of realistic trees.

use std::collections::HashMap;

use crate::support::TestApp;

/// A tree as the test posted it: comments in posting order, each with its parent's index.
#[derive(Debug, Default, Clone)]
pub(crate) struct Model {
    /// Slugs in posting order.
    pub slugs: Vec<String>,
    /// Texts in posting order.
    pub texts: Vec<String>,
    /// Parent index of each comment.
    pub parents: Vec<Option<usize>>,
}

impl Model {
    /// Records a posted comment.
    pub(crate) fn push(&mut self, slug: String, text: String, parent: Option<usize>) -> usize {
        self.slugs.push(slug);
        self.texts.push(text);
        self.parents.push(parent);
        self.slugs.len() - 1
    }

    /// Depth of comment `i` (0 at the top).
    pub(crate) fn depth(&self, i: usize) -> usize {
        let mut depth = 0;
        let mut at = i;
        while let Some(p) = self.parents[at] {
            depth += 1;
            at = p;
        }
        depth
    }

    /// Children of each comment (and of the root, key `None`), in posting order.
    pub(crate) fn children(&self) -> HashMap<Option<usize>, Vec<usize>> {
        let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
        for (i, p) in self.parents.iter().enumerate() {
            children.entry(*p).or_default().push(i);
        }
        children
    }

    /// Slugs in posting (chronological) order.
    pub(crate) fn chronological(&self) -> Vec<String> {
        self.slugs.clone()
    }

    /// Slugs of the top-level comments, oldest first.
    pub(crate) fn threads(&self) -> Vec<String> {
        self.children()
            .get(&None)
            .map(|c| c.iter().map(|&i| self.slugs[i].clone()).collect())
            .unwrap_or_default()
    }

    /// Slugs in threaded order: depth-first, siblings oldest first.
    pub(crate) fn threaded(&self) -> Vec<String> {
        let children = self.children();
        let mut out = Vec::new();
        self.walk(&children, None, &mut out);
        out
    }

    fn walk(
        &self,
        children: &HashMap<Option<usize>, Vec<usize>>,
        at: Option<usize>,
        out: &mut Vec<String>,
    ) {
        for &c in children.get(&at).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(self.slugs[c].clone());
            self.walk(children, Some(c), out);
        }
    }

    /// Slugs of every descendant of `i`, in threaded order.
    pub(crate) fn descendants(&self, i: usize) -> Vec<String> {
        let children = self.children();
        let mut out = Vec::new();
        self.walk(&children, Some(i), &mut out);
        out
    }

    /// Slugs of the direct replies of `i`, oldest first.
    pub(crate) fn replies(&self, i: usize) -> Vec<String> {
        self.children()
            .get(&Some(i))
            .map(|c| c.iter().map(|&j| self.slugs[j].clone()).collect())
            .unwrap_or_default()
    }

    /// Index of a slug.
    pub(crate) fn index(&self, slug: &str) -> usize {
        self.slugs
            .iter()
            .position(|s| s == slug)
            .expect("known slug")
    }
}

/// A small deterministic pseudo-random generator (xorshift), so failures reproduce.
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// Next value in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Posts a realistic tree of `n` comments: a chain `levels` deep first (so the tree surely has
/// that many levels), then a mix of new threads and replies with skewed fan-out (recent and
/// popular comments get more replies).
pub(crate) async fn build_tree(
    app: &TestApp,
    discussion: &str,
    n: usize,
    levels: usize,
    seed: u64,
) -> Model {
    let mut model = Model::default();
    let mut rng = Rng::new(seed);
    let mut parent = None;
    for level in 0..levels.min(n) {
        let text = format!("chain {level}");
        let slug = app
            .post(
                discussion,
                parent.map(|p: usize| model.slugs[p].as_str()),
                &text,
            )
            .await;
        parent = Some(model.push(slug, text, parent));
    }
    while model.slugs.len() < n {
        let len = model.slugs.len();
        let parent = match rng.below(10) {
            0..=2 => None,
            3..=5 => Some(len - 1 - rng.below(len.min(5))),
            6..=7 => Some(rng.below(len.min(8))),
            _ => Some(rng.below(len)),
        };
        let parent = parent.filter(|&p| model.depth(p) < levels + 1);
        let text = format!("comment {len}");
        let slug = app
            .post(discussion, parent.map(|p| model.slugs[p].as_str()), &text)
            .await;
        model.push(slug, text, parent);
    }
    model
}
