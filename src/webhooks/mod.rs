//! Standard Webhooks: the mechanics of one delivery (signing a message, the retry schedule,
//! the rules on which addresses an endpoint may have, the HTTP attempt), the body of a
//! delivery, and the dispatcher every replica runs.

pub mod address;
pub mod client;
pub mod dispatch;
pub mod metrics;
mod payload;
pub mod schedule;
pub mod signature;

pub use address::{check_url, is_public, CheckedResolver};
pub use client::{Attempt, Outcome, Sender};
pub use schedule::{jittered, RetrySchedule};
pub use signature::{sign, signature_header, Secret};
