//! Edits and deletes cost a bounded number of database commands, whatever the size.

use crate::model::build_tree;

use super::*;

// ---------------------------------------------------------------------------------------------
// 8. Round trips

/// Most database commands an edit or a delete may send, whatever the discussion's size: the
/// discussion, the comment, the change-feed mark on the discussion, the write and its event in
/// the event log, in one transaction with its commit (6 on `PER_COMMENT` and `BUCKETED`: the
/// mark in the transaction is what keeps a move of the discussion from overlapping the write);
/// on `EMBEDDED` the read that finds the comment's position, the write (which carries the
/// mark), the event and the commit (6).
const WRITE_COMMANDS: u64 = 6;

/// What a moderator's edit or delete of someone else's comment adds: its moderation log entry
/// (the entry's number, then the entry).
const LOG_COMMANDS: u64 = 2;

/// What a moderator's edit of someone else's comment adds when it answers with the text: the
/// moderator's ignore list (one read of their `people` document; an author's own comment and
/// a deleted one need none).
const IGNORE_LIST_COMMANDS: u64 = 1;

pub(crate) async fn edits_and_deletes_have_bounded_round_trips_case(settings: Settings) {
    let app = TestApp::with("lc_round_trips", settings).await;
    let api = Calls::new(&app);
    let edit = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text editedAt } }";
    let delete = "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
    // A moderator's first mutation in a process records them as a moderator, and the log's
    // first entry makes its counter (writes made once): made here, they are not part of what
    // an edit costs.
    let warm = "mutation { banUser(userId: \"someone\") { userId } }";
    data(
        api.exec(Who::Moderator, warm, json!({})).await,
        "a moderator acts",
    );
    let mut costs: Vec<Vec<(String, u64)>> = Vec::new();
    for size in [10, 60] {
        let d = app.discussion(&format!("{size} comments")).await;
        let model = build_tree(&app, &d, size, 4, size as u64).await;
        let first = &model.slugs[0];
        let deepest = &model.slugs[3];
        let last = model.slugs.last().expect("comments");
        // Ada wrote every comment: the moderator's changes are logged.
        let steps: [(&str, Who, &str, &String); 5] = [
            ("author edits a thread", Who::Ada, edit, first),
            ("author edits a deep reply", Who::Ada, edit, deepest),
            ("moderator edits", Who::Moderator, edit, last),
            ("author deletes", Who::Ada, delete, last),
            ("moderator deletes", Who::Moderator, delete, deepest),
        ];
        let mut row = Vec::new();
        for (what, who, query, slug) in steps {
            let before = app.commands();
            let response = api
                .exec(
                    who,
                    query,
                    json!({ "d": d, "s": slug, "t": format!("{what}, edited") }),
                )
                .await;
            let cost = app.commands() - before;
            data(response, what);
            row.push((what.to_owned(), cost));
        }
        eprintln!("edit/delete costs at {size} comments: {row:?}");
        costs.push(row);
    }
    for row in &costs {
        for (what, cost) in row {
            let bound = match what.as_str() {
                "moderator edits" => WRITE_COMMANDS + LOG_COMMANDS + IGNORE_LIST_COMMANDS,
                "moderator deletes" => WRITE_COMMANDS + LOG_COMMANDS,
                _ => WRITE_COMMANDS,
            };
            assert!(
                *cost <= bound,
                "{what} cost {cost} commands (bound {bound}); costs {costs:?}"
            );
        }
    }
    // The same at both sizes, but the moderator's ignore list (the answer shows a text): read
    // once per IGNORING_KEPT_FOR in a process, so one of the two edits may find it kept.
    for ((what, small), (_, large)) in costs[0].iter().zip(&costs[1]) {
        let slack = match what.as_str() {
            "moderator edits" => IGNORE_LIST_COMMANDS,
            _ => 0,
        };
        assert!(
            small.abs_diff(*large) <= slack,
            "{what}: edits and deletes cost the same at 10 and at 60 comments: {costs:?}"
        );
    }
}
