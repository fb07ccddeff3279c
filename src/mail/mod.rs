//! Notification mail: composing a message from notifications (item.rs, message.rs, body.rs,
//! clean.rs), the headers lettre sends it with (headers.rs), signing its one-click unsubscribe
//! link (unsubscribe.rs), and sending it over SMTP (server.rs, transport.rs, error.rs).

mod body;
mod clean;
mod error;
mod headers;
mod item;
mod message;
mod server;
mod transport;
mod unsubscribe;

pub use error::MailError;
pub use headers::{ListUnsubscribe, ListUnsubscribePost, ONE_CLICK};
pub use item::{Item, ItemKind};
pub use message::{compose, Outgoing, MAX_SUBJECT_CHARS};
pub use server::{Security, Server};
pub use transport::{Mailer, SendOutcome};
pub use unsubscribe::{UnsubscribeTokens, MAX_USER_BYTES};

#[cfg(test)]
mod tests;
