//! Votes, outside every layout: one document per voter and comment (`votes`), one tally per
//! comment that was ever voted on (`tallies`, indexed by each rank value so that ranked lists
//! read bounded ranges), and one ranking document per discussion (`rankings`: its vote number
//! and how many comments have each pair of counters). A vote writes all three, and the
//! comment's counters in its layout, in one transaction (see `cast`).

use std::collections::HashMap;

use futures::TryStreamExt as _;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::{ClientSession, Database};

use crate::domain::{Comment, DiscussionId, Micros, Rank, Slug, Vote, Votes};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};

/// One document per voter and comment.
pub(crate) const VOTES: &str = "votes";
/// One document per comment ever voted on (`discussion_id`, `slug`, `posted`, `up`, `down`,
/// `vseq`, and its value in each rank: `top`, `best`, `con`, and for a top-level comment
/// `t_top`, `t_best`, `t_con`).
pub(crate) const TALLIES: &str = "tallies";
/// One document per discussion with votes.
pub(crate) const RANKINGS: &str = "rankings";

/// The tally field a rank's value is stored in, for a list of every comment or of top-level
/// ones (set on top-level comments only). One scalar field per list: on an array field
/// (multikey) the development database no longer bounds the index range by the fields after it,
/// and a window of 75 tallies read the whole class (20 ms at 11 600).
fn value_field(rank: Rank, scope: Scope) -> &'static str {
    match (scope, rank) {
        (Scope::All, Rank::Top) => "top",
        (Scope::All, Rank::Best) => "best",
        (Scope::All, Rank::Controversial) => "con",
        (Scope::Threads, Rank::Top) => "t_top",
        (Scope::Threads, Rank::Best) => "t_best",
        (Scope::Threads, Rank::Controversial) => "t_con",
    }
}

/// The lists a ranking counts: every comment, or top-level ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every comment of the discussion.
    All,
    /// Its top-level comments.
    Threads,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::All => "a",
            Scope::Threads => "t",
        }
    }
}

/// A pair of counters as a field name of a ranking's counts.
fn pair_key(up: u64, down: u64) -> String {
    format!("{up}_{down}")
}

fn pair_of(key: &str) -> Option<(u64, u64)> {
    let (up, down) = key.split_once('_')?;
    Some((up.parse().ok()?, down.parse().ok()?))
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A discussion's ranking: its vote number and how many voted comments have each pair of
/// counters, in every comment and among top-level ones (pairs of 0 and 0 are not counted).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ranking {
    /// Votes cast in the discussion so far (each vote's number).
    pub seq: u64,
    /// `(up, down)` → comments, in every comment.
    pub all: HashMap<(u64, u64), u64>,
    /// `(up, down)` → comments, among top-level ones.
    pub threads: HashMap<(u64, u64), u64>,
}

impl Ranking {
    /// The counts of a scope.
    pub(crate) fn counts(&self, scope: Scope) -> &HashMap<(u64, u64), u64> {
        match scope {
            Scope::All => &self.all,
            Scope::Threads => &self.threads,
        }
    }
}

/// A comment's tally as ranked reads see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tally {
    /// The comment.
    pub slug: Slug,
    /// When it was posted.
    pub posted: Micros,
    /// Its counters.
    pub votes: Votes,
    /// Where its layout kept it when it was last voted on (see `CommentStore::home_of`).
    pub home: Option<Bson>,
}

/// The vote collections.
#[derive(Clone)]
pub(crate) struct VoteBook {
    db: Database,
    votes: Counted<Document>,
    tallies: Counted<Document>,
    rankings: Counted<Document>,
}

impl VoteBook {
    pub(crate) fn new(db: &Database, commands: &CommandCounter) -> Self {
        Self {
            db: db.clone(),
            votes: Counted::new(db, VOTES, commands),
            tallies: Counted::new(db, TALLIES, commands),
            rankings: Counted::new(db, RANKINGS, commands),
        }
    }

    /// One vote per voter and comment; the tallies by each rank value, in every comment and
    /// among top-level ones (`scope` holds `a`, and `t` for a top-level comment).
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        // `rankings` has no index of its own: made here, so that the first votes (transactions,
        // at once) do not race to create it, which a database refuses as a write conflict.
        match self.db.create_collection(RANKINGS).await {
            Err(err) if !matches!(err.kind.as_ref(), mongodb::error::ErrorKind::Command(e) if e.code == 48) => {
                return Err(err.into())
            }
            _ => {}
        }
        self.votes
            .create_index(index_model(
                "discussion_slug_voter",
                doc! { "discussion_id": 1, "slug": 1, "voter": 1 },
                true,
            ))
            .await?;
        self.tallies
            .create_index(index_model(
                "discussion_slug",
                doc! { "discussion_id": 1, "slug": 1 },
                true,
            ))
            .await?;
        // Each rank's index leads with its value, and so does the filter of a read by it: the
        // development database picks its index by a filter's first fields, and with
        // `discussion_id` first it read every tally of the discussion through another index.
        let ranked = [Scope::All, Scope::Threads].into_iter().flat_map(|scope| {
            Rank::ALL.map(|rank| {
                let field = value_field(rank, scope);
                index_model(
                    &format!("{field}_by_time"),
                    doc! { field: 1, "discussion_id": 1, "posted": 1, "slug": 1 },
                    false,
                )
            })
        });
        self.tallies.create_indexes(ranked).await?;
        Ok(())
    }

    /// The voter's vote on the comment, read in `session`.
    pub(crate) async fn vote_of(
        &self,
        session: &mut ClientSession,
        id: &DiscussionId,
        slug: &Slug,
        voter: &str,
    ) -> StoreResult<Option<Vote>> {
        let found = self
            .votes
            .find_one(vote_filter(id, slug, voter))
            .session(session)
            .await?;
        Ok(found.and_then(|d| d.get_str("value").ok().and_then(Vote::parse)))
    }

    /// Stores the voter's vote on the comment (`None` removes it), in `session`.
    pub(crate) async fn set_vote(
        &self,
        session: &mut ClientSession,
        (id, slug, voter): (&DiscussionId, &Slug, &str),
        vote: Option<Vote>,
        at: Micros,
    ) -> StoreResult<()> {
        let filter = vote_filter(id, slug, voter);
        match vote {
            Some(vote) => {
                self.votes
                    .update_one(
                        filter,
                        doc! { "$set": { "value": vote.as_str(), "at": at.0 } },
                    )
                    .upsert(true)
                    .session(session)
                    .await?;
            }
            None => {
                self.votes.delete_many(filter).session(session).await?;
            }
        }
        Ok(())
    }

    /// Takes the discussion's next vote number and moves the comment from the counts of its
    /// pair `from` to those of `to`, in `session`; returns the number.
    pub(crate) async fn next_number(
        &self,
        session: &mut ClientSession,
        id: &DiscussionId,
        (from, to): (Votes, Votes),
        top_level: bool,
    ) -> StoreResult<u64> {
        let mut inc = doc! { "seq": 1_i64 };
        let scopes: &[Scope] = match top_level {
            true => &[Scope::All, Scope::Threads],
            false => &[Scope::All],
        };
        for scope in scopes {
            if !from.is_zero() {
                inc.insert(
                    format!("{}.{}", scope.name(), pair_key(from.up, from.down)),
                    -1_i64,
                );
            }
            if !to.is_zero() {
                inc.insert(
                    format!("{}.{}", scope.name(), pair_key(to.up, to.down)),
                    1_i64,
                );
            }
        }
        let after = self
            .rankings
            .find_one_and_update(doc! { "_id": id.as_str() }, doc! { "$inc": inc })
            .upsert(true)
            .return_document(ReturnDocument::After)
            .projection(doc! { "seq": 1 })
            .session(session)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("no ranking for discussion {id}")))?;
        number(after.get("seq"))
            .ok_or_else(|| StoreError::Corrupt(format!("the ranking of {id} has no vote number")))
    }

    /// Stores a comment's tally (its counters as `next` has them), in `session`.
    pub(crate) async fn set_tally(
        &self,
        session: &mut ClientSession,
        next: &Comment,
        home: Option<Bson>,
    ) -> StoreResult<()> {
        let v = next.votes;
        let scopes: &[Scope] = match next.parent {
            None => &[Scope::All, Scope::Threads],
            Some(_) => &[Scope::All],
        };
        let mut set = doc! {
            "posted": next.posted.0,
            "up": i64_of(v.up),
            "down": i64_of(v.down),
            "vseq": i64_of(v.seq),
        };
        for scope in scopes {
            for rank in Rank::ALL {
                set.insert(value_field(rank, *scope), rank_value(rank, v));
            }
        }
        let update = match home {
            Some(home) => {
                set.insert(HOME, home);
                doc! { "$set": set }
            }
            None => doc! { "$set": set, "$unset": { HOME: "" } },
        };
        self.tallies
            .update_one(
                doc! {
                    "discussion_id": next.discussion_id.as_str(),
                    "slug": next.slug.as_str(),
                },
                update,
            )
            .upsert(true)
            .session(session)
            .await?;
        Ok(())
    }

    /// The votes of `voter` on these comments, in one command.
    /// Up to `limit` votes of the discussion, by comment slug and then voter, after `after`
    /// (a slug and a voter): at most two ranges of the unique index.
    pub(crate) async fn votes_in(
        &self,
        discussion: &DiscussionId,
        after: Option<(&Slug, &str)>,
        limit: usize,
    ) -> StoreResult<Vec<(Slug, String, Vote)>> {
        let id = discussion.as_str();
        let ranges = match after {
            None => vec![doc! { "discussion_id": id }],
            Some((slug, voter)) => vec![
                doc! { "discussion_id": id, "slug": slug.as_str(), "voter": { "$gt": voter } },
                doc! { "discussion_id": id, "slug": { "$gt": slug.as_str() } },
            ],
        };
        let mut out = Vec::new();
        for filter in ranges {
            let left = limit.saturating_sub(out.len());
            if left == 0 {
                break;
            }
            let found: Vec<Document> = self
                .votes
                .find(filter)
                .sort(doc! { "discussion_id": 1, "slug": 1, "voter": 1 })
                .limit(i64::try_from(left).unwrap_or(i64::MAX))
                .projection(doc! { "slug": 1, "voter": 1, "value": 1 })
                .await?
                .try_collect()
                .await?;
            for doc in found {
                let (Ok(slug), Ok(voter), Some(vote)) = (
                    doc.get_str("slug"),
                    doc.get_str("voter"),
                    doc.get_str("value").ok().and_then(Vote::parse),
                ) else {
                    return Err(StoreError::Corrupt(format!(
                        "a vote in discussion {id} without a slug, voter or value"
                    )));
                };
                out.push((Slug::from_stored(slug.to_owned()), voter.to_owned(), vote));
            }
        }
        Ok(out)
    }

    pub(crate) async fn votes_of(
        &self,
        voter: &str,
        comments: &[(DiscussionId, Slug)],
    ) -> StoreResult<HashMap<(DiscussionId, Slug), Vote>> {
        let mut by_discussion: HashMap<&DiscussionId, Vec<&str>> = HashMap::new();
        for (id, slug) in comments {
            by_discussion.entry(id).or_default().push(slug.as_str());
        }
        let mut clauses: Vec<Document> = by_discussion
            .into_iter()
            .map(|(id, slugs)| {
                doc! { "discussion_id": id.as_str(), "slug": { "$in": slugs }, "voter": voter }
            })
            .collect();
        let filter = match clauses.len() {
            0 => return Ok(HashMap::new()),
            1 => clauses.remove(0),
            _ => doc! { "$or": clauses },
        };
        let found: Vec<Document> = self
            .votes
            .find(filter)
            .projection(doc! { "discussion_id": 1, "slug": 1, "value": 1 })
            .await?
            .try_collect()
            .await?;
        let mut out = HashMap::new();
        for doc in found {
            let (Some(id), Ok(slug), Some(vote)) = (
                doc.get_str("discussion_id")
                    .ok()
                    .and_then(|id| DiscussionId::parse(id).ok()),
                doc.get_str("slug"),
                doc.get_str("value").ok().and_then(Vote::parse),
            ) else {
                continue;
            };
            out.insert((id, Slug::from_stored(slug.to_owned())), vote);
        }
        Ok(out)
    }

    /// The discussion's ranking (empty before its first vote).
    pub(crate) async fn ranking(&self, id: &DiscussionId) -> StoreResult<Ranking> {
        let Some(doc) = self.rankings.find_one(doc! { "_id": id.as_str() }).await? else {
            return Ok(Ranking::default());
        };
        let counts = |name: &str| -> HashMap<(u64, u64), u64> {
            doc.get_document(name)
                .map(|counts| {
                    counts
                        .iter()
                        .filter_map(|(key, n)| {
                            let n = number(Some(n))?;
                            (n > 0).then_some((pair_of(key)?, n))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Ranking {
            seq: number(doc.get("seq")).unwrap_or(0),
            all: counts(Scope::All.name()),
            threads: counts(Scope::Threads.name()),
        })
    }

    /// The tallies of `scope` with rank value `value` posted in `[from, to)` (`to` open when
    /// `None`), in posting order: one bounded index range.
    pub(crate) async fn probe(
        &self,
        id: &DiscussionId,
        (scope, rank, value): (Scope, Rank, f64),
        from: Micros,
        to: Option<Micros>,
    ) -> StoreResult<Vec<Tally>> {
        let mut posted = doc! { "$gte": from.0 };
        if let Some(to) = to {
            posted.insert("$lt", to.0);
        }
        let filter = doc! {
            value_field(rank, scope): rank_bson(rank, value),
            "discussion_id": id.as_str(),
            "posted": posted,
        };
        let found: Vec<Document> = self
            .tallies
            .find(filter)
            .sort(doc! { "posted": 1, "slug": 1 })
            .projection(doc! { "slug": 1, "posted": 1, "up": 1, "down": 1, "vseq": 1, HOME: 1 })
            .await?
            .try_collect()
            .await?;
        found.iter().map(tally_of).collect()
    }
}

/// The stored value of a rank (scores as integers, the others as doubles).
fn rank_value(rank: Rank, v: Votes) -> Bson {
    rank_bson(rank, rank.value(v.up, v.down))
}

fn rank_bson(rank: Rank, value: f64) -> Bson {
    match rank {
        Rank::Top => Bson::Int64(value as i64),
        Rank::Best | Rank::Controversial => Bson::Double(value),
    }
}

fn vote_filter(id: &DiscussionId, slug: &Slug, voter: &str) -> Document {
    doc! { "discussion_id": id.as_str(), "slug": slug.as_str(), "voter": voter }
}

/// A stored count (any integer type; negative and other values are `None`).
fn number(value: Option<&Bson>) -> Option<u64> {
    match value? {
        Bson::Int64(n) => u64::try_from(*n).ok(),
        Bson::Int32(n) => u64::try_from(*n).ok(),
        Bson::Double(n) if *n >= 0.0 && n.fract() == 0.0 => Some(*n as u64),
        _ => None,
    }
}

fn tally_of(doc: &Document) -> StoreResult<Tally> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("a tally without {what}"));
    Ok(Tally {
        slug: Slug::from_stored(doc.get_str("slug").map_err(|_| corrupt("slug"))?.to_owned()),
        posted: Micros(doc.get_i64("posted").map_err(|_| corrupt("posted"))?),
        votes: Votes {
            up: number(doc.get("up")).ok_or_else(|| corrupt("up"))?,
            down: number(doc.get("down")).ok_or_else(|| corrupt("down"))?,
            seq: number(doc.get("vseq")).ok_or_else(|| corrupt("vseq"))?,
        },
        home: doc.get(HOME).cloned(),
    })
}

/// A tally's field that says where the comment's layout keeps it (its document, or its page),
/// so that a ranked page reads its comments by `_id`.
const HOME: &str = "home";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_as_field_names() {
        assert_eq!(pair_of(&pair_key(12, 0)), Some((12, 0)));
        assert_eq!(pair_of("x_1"), None);
        assert_eq!(pair_of("3"), None);
    }
}
