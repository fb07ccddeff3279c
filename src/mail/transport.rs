//! Sending: the [`Mailer`] holds the SMTP transport (lettre, over rustls) and the From mailbox,
//! and tells each send's outcome as try-again-later or drop.

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Tokio1Executor};

use super::error::MailError;
use super::headers::letter;
use super::server::{Security, Server};
use super::Outgoing;

/// How one send went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The server took the message.
    Sent,
    /// Try again later: a 4xx answer, or no answer at all (connection, TLS, time-out).
    Temporary(String),
    /// Drop the message: a 5xx answer, or a message that can never be sent (a bad address).
    Permanent(String),
}

/// Sends composed messages through one SMTP server, reusing connections.
#[derive(Clone)]
pub struct Mailer {
    /// The transport, with its pool of connections.
    transport: AsyncSmtpTransport<Tokio1Executor>,
    /// Who the messages are from.
    from: Mailbox,
    /// The longest a whole send may take.
    deadline: Duration,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer")
            .field("from", &self.from.to_string())
            .finish_non_exhaustive()
    }
}

impl Mailer {
    /// A mailer for the server `smtp_url` names (THREADQL_SMTP_URL) sending as `from`
    /// (THREADQL_MAIL_FROM, `address` or `Name <address>`). `timeout` bounds each whole send,
    /// connecting included (lettre's own time-out covers connecting only). Nothing is connected
    /// until the first send. It must be made, and dropped, inside a Tokio runtime: its pool of
    /// connections runs there.
    pub fn new(smtp_url: &str, from: &str, timeout: Duration) -> Result<Mailer, MailError> {
        let server = Server::parse(smtp_url)?;
        let from: Mailbox = from.trim().parse().map_err(|e| {
            MailError::From(format!("{:?} is not a mail address ({e})", from.trim()))
        })?;
        let tls = match server.security {
            Security::Plain => Tls::None,
            Security::StartTls => Tls::Required(tls_parameters(&server.host)?),
            Security::Implicit => Tls::Wrapper(tls_parameters(&server.host)?),
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(MailError::NoRuntime);
        }
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&server.host)
            .port(server.port)
            .tls(tls)
            .timeout(Some(timeout));
        if let Some((user, password)) = server.credentials {
            builder = builder.credentials(Credentials::new(user, password));
        }
        Ok(Mailer {
            transport: builder.build(),
            from,
            deadline: timeout,
        })
    }

    /// Sends one message and says how it went. Never panics: every failure is an outcome.
    pub async fn send(&self, message: &Outgoing) -> SendOutcome {
        let letter = match letter(message, &self.from) {
            Ok(letter) => letter,
            Err(reason) => return SendOutcome::Permanent(reason),
        };
        match tokio::time::timeout(self.deadline, self.transport.send(letter)).await {
            Ok(Ok(_)) => SendOutcome::Sent,
            Ok(Err(error)) => classify(&error),
            Err(_) => {
                SendOutcome::Temporary(format!("the send took longer than {:?}", self.deadline))
            }
        }
    }
}

/// The outcome a lettre error means: 5xx answers are permanent, everything else (4xx answers,
/// connection, TLS and time-outs) is temporary.
fn classify(error: &lettre::transport::smtp::Error) -> SendOutcome {
    let text = error_text(error);
    if error.is_permanent() {
        SendOutcome::Permanent(text)
    } else {
        SendOutcome::Temporary(text)
    }
}

/// An error with its causes, `: `-separated.
fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The TLS settings for `host`, checked against the web's root certificates.
fn tls_parameters(host: &str) -> Result<TlsParameters, MailError> {
    TlsParameters::new(host.to_owned()).map_err(|e| MailError::Tls(error_text(&e)))
}
