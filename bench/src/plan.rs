//! The shape of a generated discussion: a deterministic forest of threads with skewed fan-out.

use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Deepest reply generated (top-level comments have depth 0).
pub(crate) const MAX_REPLY_DEPTH: usize = 6;
/// Chance that a new comment starts a thread instead of replying.
const NEW_THREAD: f64 = 0.15;
/// How long a thread stays lively: after this many further comments in the discussion, its
/// chance to draw the next reply has fallen to 1/e.
const LIVELY_FOR: f64 = 2_000.0;
/// Shape of the threads' heat (Pareto): a few threads draw most replies.
const HEAT_ALPHA: f64 = 1.3;
/// How many distinct authors post.
const AUTHORS: usize = 1_000;

const WORDS: &[&str] = &[
    "the",
    "a",
    "comment",
    "thread",
    "reply",
    "think",
    "agree",
    "not",
    "really",
    "because",
    "database",
    "index",
    "page",
    "why",
    "would",
    "you",
    "store",
    "every",
    "document",
    "that",
    "is",
    "exactly",
    "what",
    "I",
    "said",
    "earlier",
    "link",
    "source",
    "benchmark",
    "numbers",
    "look",
    "fine",
    "to",
    "me",
    "but",
    "latency",
    "matters",
    "more",
    "than",
    "throughput",
    "here",
    "and",
    "there",
    "anyway",
    "thanks",
    "for",
    "sharing",
    "this",
    "great",
    "point",
];

/// One comment of the plan, in posting order.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// Index of the parent in the plan (always earlier).
    pub parent: Option<usize>,
    /// 0 for a top-level comment.
    pub depth: usize,
    /// Index of the top-level comment of its thread.
    pub root: usize,
    /// Who posts it (index into the generated authors).
    pub author: usize,
    /// Its text.
    pub text: String,
}

/// Summary numbers of a plan, for the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Shape {
    /// Comments in all.
    pub comments: usize,
    /// Top-level comments.
    pub threads: usize,
    /// Comments per depth, from 0.
    pub by_depth: Vec<usize>,
    /// Most direct replies of one comment.
    pub max_fan_out: usize,
    /// Comments in the largest thread (its root included).
    pub largest_thread: usize,
    /// Mean text length in bytes.
    pub mean_text_bytes: usize,
}

/// A whole generated discussion, in posting order.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The comments, parents before children.
    pub comments: Vec<Planned>,
}

impl Plan {
    /// Generates `size` comments. Each new comment starts a thread with a fixed chance;
    /// otherwise it replies in a thread picked by the thread's heat (heavy-tailed, drawn when the
    /// thread starts) fading with the thread's age, and, within the thread, to a comment picked
    /// with probability proportional to (its replies + 1), so a few comments draw most replies
    /// (skewed fan-out). Replies that would be deeper than [`MAX_REPLY_DEPTH`] go to the parent of
    /// the picked comment. The same size and seed always give the same plan.
    pub(crate) fn generate(size: usize, seed: u64) -> Plan {
        struct Lively {
            root: usize,
            born: usize,
            heat: f64,
            // Each comment of the thread once, plus once per reply it received.
            targets: Vec<usize>,
        }
        let mut rng =
            StdRng::seed_from_u64(seed ^ (size as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut comments: Vec<Planned> = Vec::with_capacity(size);
        let mut threads: Vec<Lively> = Vec::new();
        // Threads before this one have faded out for good.
        let mut first_lively = 0;
        let mut weights: Vec<f64> = Vec::new();
        for index in 0..size {
            if threads.is_empty() || rng.gen_bool(NEW_THREAD) {
                let heat = (1.0 - rng.gen::<f64>()).powf(-1.0 / HEAT_ALPHA);
                threads.push(Lively {
                    root: index,
                    born: index,
                    heat,
                    targets: vec![index],
                });
                comments.push(Planned {
                    parent: None,
                    depth: 0,
                    root: index,
                    author: author(&mut rng),
                    text: text(&mut rng),
                });
                continue;
            }
            while first_lively + 1 < threads.len()
                && 8.0f64.mul_add(LIVELY_FOR, threads[first_lively].born as f64) < index as f64
            {
                first_lively += 1;
            }
            weights.clear();
            weights.extend(
                threads[first_lively..]
                    .iter()
                    .map(|t| t.heat * (-((index - t.born) as f64) / LIVELY_FOR).exp()),
            );
            let mut draw = rng.gen::<f64>() * weights.iter().sum::<f64>();
            let mut chosen = threads.len() - 1;
            for (offset, weight) in weights.iter().enumerate() {
                draw -= weight;
                if draw <= 0.0 {
                    chosen = first_lively + offset;
                    break;
                }
            }
            let thread = &mut threads[chosen];
            let mut pick = thread.targets[rng.gen_range(0..thread.targets.len())];
            while comments[pick].depth >= MAX_REPLY_DEPTH {
                match comments[pick].parent {
                    Some(up) => pick = up,
                    None => break,
                }
            }
            thread.targets.push(pick);
            thread.targets.push(index);
            let root = thread.root;
            comments.push(Planned {
                parent: Some(pick),
                depth: comments[pick].depth + 1,
                root,
                author: author(&mut rng),
                text: text(&mut rng),
            });
        }
        Plan { comments }
    }

    /// Which comments a moderator holds back (`percent` % of them in all): `rejected_share` %
    /// of those rejected in place once they are public, the rest held before they are. The held ones are leaves (nothing is
    /// posted under a held comment); none of them is in `keep` (the reads' fixtures). Both lists
    /// are in plan order; the same plan, percentage and seed always give the same choice.
    pub(crate) fn moderated(
        &self,
        percent: u32,
        rejected_share: u32,
        seed: u64,
        keep: &[usize],
    ) -> (Vec<usize>, Vec<usize>) {
        let n = self.comments.len();
        let total = n * percent.min(100) as usize / 100;
        let want_rejected = total * rejected_share.min(100) as usize / 100;
        let want_held = total - want_rejected;
        let mut has_replies = vec![false; n];
        for c in &self.comments {
            if let Some(parent) = c.parent {
                has_replies[parent] = true;
            }
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5EED_4E1D_0000_0031);
        let mut order: Vec<usize> = (0..n).filter(|i| !keep.contains(i)).collect();
        order.shuffle(&mut rng);
        let mut held: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| !has_replies[i])
            .take(want_held)
            .collect();
        held.sort_unstable();
        let mut rejected: Vec<usize> = order
            .iter()
            .copied()
            .filter(|i| held.binary_search(i).is_err())
            .take(want_rejected)
            .collect();
        rejected.sort_unstable();
        (held, rejected)
    }

    /// The first `len` comments (a plan that was loaded only in part).
    pub(crate) fn prefix(&self, len: usize) -> Plan {
        Plan {
            comments: self.comments[..len.min(self.comments.len())].to_vec(),
        }
    }

    /// Summary numbers.
    pub(crate) fn shape(&self) -> Shape {
        let n = self.comments.len();
        let mut by_depth = vec![0; MAX_REPLY_DEPTH + 1];
        let mut fan_out = vec![0usize; n];
        let mut thread_size = vec![0usize; n];
        let mut text_bytes = 0;
        for c in &self.comments {
            by_depth[c.depth] += 1;
            if let Some(p) = c.parent {
                fan_out[p] += 1;
            }
            thread_size[c.root] += 1;
            text_bytes += c.text.len();
        }
        Shape {
            comments: n,
            threads: by_depth[0],
            by_depth,
            max_fan_out: fan_out.iter().copied().max().unwrap_or(0),
            largest_thread: thread_size.iter().copied().max().unwrap_or(0),
            mean_text_bytes: text_bytes.checked_div(n).unwrap_or(0),
        }
    }

    /// The top-level comment of the largest thread.
    pub(crate) fn largest_thread_root(&self) -> Option<usize> {
        let mut size = vec![0usize; self.comments.len()];
        for c in &self.comments {
            size[c.root] += 1;
        }
        (0..size.len()).max_by_key(|&i| (size[i], std::cmp::Reverse(i)))
    }

    /// The comment with the most direct replies (the earliest of them on a tie).
    pub(crate) fn busiest(&self) -> Option<usize> {
        let mut replies = vec![0usize; self.comments.len()];
        for c in &self.comments {
            if let Some(parent) = c.parent {
                replies[parent] += 1;
            }
        }
        (0..replies.len()).max_by_key(|&i| (replies[i], std::cmp::Reverse(i)))
    }

    /// A comment at `depth` (or the deepest there is below it) near the middle of the plan: the
    /// target of the direct-link read.
    pub(crate) fn link_target(&self, depth: usize) -> Option<usize> {
        let middle = self.comments.len() / 2;
        (0..=depth).rev().find_map(|d| {
            (middle..self.comments.len())
                .chain(0..middle)
                .find(|&i| self.comments[i].depth == d)
        })
    }
}

/// An author index: few authors write most comments.
fn author(rng: &mut impl Rng) -> usize {
    ((rng.gen::<f64>().powi(3) * AUTHORS as f64) as usize).min(AUTHORS - 1)
}

/// Comment text: mostly short, sometimes a few paragraphs' worth (40 to 600 bytes before its
/// Markdown), with the Markdown people write: paragraphs, emphasis, code and links.
pub(crate) fn text(rng: &mut impl Rng) -> String {
    let len = 40 + (rng.gen::<f64>().powi(2) * 560.0) as usize;
    let mut out = String::with_capacity(len + 64);
    let mut words = 0;
    while words < len {
        if !out.is_empty() {
            out.push_str(if rng.gen_bool(0.03) { ".\n\n" } else { " " });
        }
        let word = WORDS[rng.gen_range(0..WORDS.len())];
        words += word.len() + 1;
        match rng.gen_range(0..100) {
            0..=3 => out.push_str(&format!("*{word}*")),
            4..=5 => out.push_str(&format!("**{word}**")),
            6 => out.push_str(&format!("`{word}`")),
            7 => out.push_str(&format!("[{word}](https://example.com/{word})")),
            _ => out.push_str(word),
        }
    }
    out.push('.');
    out
}

/// The display name of an author index.
pub(crate) fn author_name(author: usize) -> (String, String) {
    (
        format!("bench-user-{author}"),
        format!("Bench User {author}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_deterministic_and_well_formed() {
        let a = Plan::generate(5_000, 7);
        let b = Plan::generate(5_000, 7);
        assert_eq!(a.comments.len(), 5_000);
        for (i, (x, y)) in a.comments.iter().zip(&b.comments).enumerate() {
            assert_eq!((x.parent, &x.text), (y.parent, &y.text));
            if let Some(p) = x.parent {
                assert!(p < i);
                assert_eq!(x.depth, a.comments[p].depth + 1);
            }
            assert!(x.depth <= MAX_REPLY_DEPTH);
        }
        let shape = a.shape();
        assert!(shape.threads > 500, "{shape:?}");
        assert!(shape.by_depth[MAX_REPLY_DEPTH] > 0, "{shape:?}");
        assert!(shape.max_fan_out > 10, "{shape:?}");
        assert!(shape.largest_thread < 5_000 / 2, "{shape:?}");
    }
}
