//! Why a mailer cannot be made from its settings.

/// Why a [`super::Mailer`] cannot be made. The message names the setting and what is wrong
/// with it, and never holds the SMTP password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MailError {
    /// THREADQL_SMTP_URL is not a usable SMTP URL.
    #[error("THREADQL_SMTP_URL is not valid: {0}")]
    Url(String),
    /// THREADQL_MAIL_FROM is not a mail address.
    #[error("THREADQL_MAIL_FROM is not valid: {0}")]
    From(String),
    /// The TLS settings for the server cannot be made.
    #[error("the TLS settings for the SMTP server cannot be made: {0}")]
    Tls(String),
    /// [`super::Mailer::new`] was called outside a Tokio runtime, which its connection pool
    /// needs.
    #[error("a mailer must be made inside a Tokio runtime (its connection pool runs there)")]
    NoRuntime,
}
