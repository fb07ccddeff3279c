//! The mechanics of one Standard Webhooks delivery: signing a message, the retry schedule, the
//! rules on which addresses an endpoint may have, and the HTTP attempt itself.

pub mod address;
pub mod client;
pub mod schedule;
pub mod signature;

pub use address::{check_url, is_public, CheckedResolver};
pub use client::{Attempt, Outcome, Sender};
pub use schedule::{jittered, RetrySchedule};
pub use signature::{sign, signature_header, Secret};
