//! Stable ranked walks: walking TOP, BEST or CONTROVERSIAL by cursor (forward, or backward from
//! the end) while votes change between pages shows no comment twice and misses no comment whose
//! votes did not change during the walk; without votes meanwhile, a walk equals the model.

use std::collections::HashSet;

use futures::future::join_all;
use serde_json::json;
use threadql::domain::{Layout, Rank, Vote};

use crate::contract::{at, slugs_of, CONN};
use crate::model::{build_tree, Rng};
use crate::support::{Settings, TestApp};
use crate::votes::{
    cast_patterns, listed, members, rank_name, ranked, vote_ok, COMMENTS, COMMENTS_PATH,
};

/// Comments in the walked discussion.
const COMMENTS_IN_WALK: usize = 150;
/// Page size of the walks.
const PAGE: usize = 10;
/// Votes cast between two pages.
const VOTES_BETWEEN_PAGES: usize = 5;
/// Users who vote during the walks.
const WALK_VOTERS: usize = 8;

/// Casts, switches and removes votes between pages, remembering which comments it touched.
struct Voter {
    rng: Rng,
    /// The comments it may vote on (every public one that is not deleted).
    targets: Vec<String>,
    /// Comments whose votes it changed (or may have) since the walk began.
    touched: HashSet<String>,
}

impl Voter {
    /// A few votes at once, on comments anywhere in the list (shown and not yet shown).
    async fn step(&mut self, app: &TestApp, d: &str) {
        let mut votes = Vec::new();
        for _ in 0..VOTES_BETWEEN_PAGES {
            let slug = self.targets[self.rng.below(self.targets.len())].clone();
            let user = format!("w{}", self.rng.below(WALK_VOTERS));
            let vote = match self.rng.below(3) {
                0 => Some(Vote::Up),
                1 => Some(Vote::Down),
                _ => None,
            };
            self.touched.insert(slug.clone());
            votes.push((slug, user, vote));
        }
        join_all(
            votes
                .iter()
                .map(|(slug, user, vote)| vote_ok(app, user, d, slug, *vote)),
        )
        .await;
    }
}

/// Walks a ranked list of the discussion's comments by cursor, pages of [`PAGE`], forward
/// from the start or backward from the end, letting `voter` vote between every two pages;
/// returns the slugs in the order the list shows them.
async fn walk(
    app: &TestApp,
    d: &str,
    rank: Rank,
    forward: bool,
    mut voter: Option<&mut Voter>,
) -> Vec<String> {
    let query = format!("{COMMENTS} {CONN}");
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1_000 {
        let vars = if forward {
            json!({ "d": d, "order": rank_name(rank), "first": PAGE, "after": cursor })
        } else {
            json!({ "d": d, "order": rank_name(rank), "last": PAGE, "before": cursor })
        };
        let data = app.ok(&query, vars).await;
        let conn = at(&data, &COMMENTS_PATH);
        let info = &conn["pageInfo"];
        let page = slugs_of(conn);
        let more = if forward {
            info["hasNextPage"].as_bool().expect("hasNextPage")
        } else {
            info["hasPreviousPage"].as_bool().expect("hasPreviousPage")
        };
        assert!(page.len() <= PAGE);
        pages.push(page);
        if !more {
            if !forward {
                pages.reverse();
            }
            return pages.into_iter().flatten().collect();
        }
        cursor = info[if forward { "endCursor" } else { "startCursor" }]
            .as_str()
            .map(str::to_owned);
        assert!(cursor.is_some(), "a page with more has a cursor: {info}");
        if let Some(voter) = voter.as_mut() {
            voter.step(app, d).await;
        }
    }
    panic!("the walk never ended");
}

/// The case: walks under votes, then walks without, on one layout.
async fn ranked_walks_are_stable_case(settings: Settings, seed: u64) {
    eprintln!("ranked walks: seed {seed}");
    let app = TestApp::with("votes_walk", settings).await;
    let d = app.discussion("walks").await;
    let model = build_tree(&app, &d, COMMENTS_IN_WALK, 3, seed).await;
    cast_patterns(&app, &d, &model.slugs, seed + 1).await;
    let deleted: Vec<String> = [5, 77, 140].map(|i| model.slugs[i].clone()).to_vec();
    for slug in &deleted {
        app.ok(
            "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
            json!({ "d": d, "s": slug }),
        )
        .await;
    }
    let everyone: HashSet<String> = model.slugs.iter().cloned().collect();
    let mut voter = Voter {
        rng: Rng::new(seed + 2),
        targets: model
            .slugs
            .iter()
            .filter(|s| !deleted.contains(s))
            .cloned()
            .collect(),
        touched: HashSet::new(),
    };
    for rank in Rank::ALL {
        for forward in [true, false] {
            let what = format!(
                "{} {} (seed {seed})",
                rank_name(rank),
                if forward { "forward" } else { "backward" }
            );
            voter.touched.clear();
            let seen = walk(&app, &d, rank, forward, Some(&mut voter)).await;
            let unique: HashSet<&String> = seen.iter().collect();
            assert_eq!(unique.len(), seen.len(), "{what}: a comment shown twice");
            assert!(
                seen.iter().all(|s| everyone.contains(s)),
                "{what}: a comment not in the discussion"
            );
            let missed: Vec<&String> = model
                .slugs
                .iter()
                .filter(|s| !voter.touched.contains(*s) && !unique.contains(s))
                .collect();
            assert!(
                missed.is_empty(),
                "{what}: missed {} comments whose votes did not change ({} touched): {missed:?}",
                missed.len(),
                voter.touched.len()
            );
            assert!(
                !voter.touched.is_empty(),
                "{what}: votes were cast during the walk"
            );
        }
    }
    // With no votes meanwhile, each walk is the model exactly.
    let all = listed(&app, &d).await;
    let public = members(&all, |_| true);
    assert_eq!(public.len(), COMMENTS_IN_WALK, "tombstones stay in");
    for rank in Rank::ALL {
        let expected = ranked(&public, rank);
        for forward in [true, false] {
            let seen = walk(&app, &d, rank, forward, None).await;
            assert_eq!(
                seen,
                expected,
                "{} {} without votes (seed {seed})",
                rank_name(rank),
                if forward { "forward" } else { "backward" }
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_walks_are_stable_per_comment() {
    ranked_walks_are_stable_case(Settings::new(Layout::PerComment), 41).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_walks_are_stable_embedded() {
    ranked_walks_are_stable_case(Settings::new(Layout::Embedded), 43).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_walks_are_stable_bucketed() {
    ranked_walks_are_stable_case(Settings::new(Layout::Bucketed), 47).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranked_walks_are_stable_bucketed_small_pages() {
    let settings = Settings {
        bucket_size: 3,
        ..Settings::new(Layout::Bucketed)
    };
    ranked_walks_are_stable_case(settings, 53).await;
}
