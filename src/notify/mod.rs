//! Notifications off the write path: the fan-out of the event log into people's inboxes, and
//! the mail that tells them.

pub mod fanout;
pub mod mail;
pub mod metrics;
