//! The change feed: every post, edit and delete leaves a small mark (`last_change`) on its
//! discussion document, in a write the change already makes (posts) or right after it (edits on
//! the layouts that keep comments elsewhere). One change stream on the discussions collection,
//! projected on the server to those marks, tells every live subscriber of a process what
//! changed, and the read cache which discussions changed (every update of a discussion
//! document, marked or not); it resumes from its last resume token after the database comes
//! back. Each event read is counted, with how long after its time on the database it was read.

mod feed;
mod marks;

pub(crate) use feed::feed;
pub(crate) use marks::{change_mark, mark_all, rewritten_mark, FIELD};
