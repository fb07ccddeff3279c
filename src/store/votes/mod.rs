//! Votes, outside every layout: the vote collections (`book`), casting a vote (`cast`), and the
//! ranked lists they give (`ranked`).

mod book;
mod cast;
mod ranked;

pub(crate) use book::{VoteBook, RANKINGS, TALLIES, VOTES};
pub(crate) use cast::cast;
pub(crate) use ranked::page as ranked_page;
