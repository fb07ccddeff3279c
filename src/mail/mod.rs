//! Notification mail: signing the one-click unsubscribe link of a message (unsubscribe.rs).

mod unsubscribe;

pub use unsubscribe::{UnsubscribeTokens, MAX_USER_BYTES};
