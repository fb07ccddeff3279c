//! The SMTP server a [`super::Mailer`] sends through, read from THREADQL_SMTP_URL:
//! `smtp://host:port` (plain), `smtp://host:port?tls=starttls` or `smtp+starttls://host:port`
//! (STARTTLS required), `smtps://host:port` (TLS from the first byte), with optional
//! `user:password@` for AUTH. The password never appears in an error.

use std::fmt;

use url::{Host, Url};

use super::error::MailError;

/// How the connection to the server is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// No TLS at all (a relay on the same machine or network); STARTTLS is not tried.
    Plain,
    /// Plain at first, then STARTTLS, which the server must offer.
    StartTls,
    /// TLS from the first byte (port 465).
    Implicit,
}

impl Security {
    /// The port used when the URL names none: 25, 587 or 465.
    pub fn default_port(self) -> u16 {
        match self {
            Security::Plain => 25,
            Security::StartTls => 587,
            Security::Implicit => 465,
        }
    }
}

/// Where and how to send, as the URL says.
#[derive(Clone, PartialEq, Eq)]
pub struct Server {
    /// The host name or IP address (an IPv6 address without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// How the connection is protected.
    pub security: Security,
    /// The user name and password for AUTH, percent-decoded.
    pub credentials: Option<(String, String)>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field(
                "credentials",
                &self
                    .credentials
                    .as_ref()
                    .map(|(user, _)| (user, "<secret>")),
            )
            .finish()
    }
}

impl Server {
    /// Reads an SMTP URL. Errors say what is wrong without repeating the URL.
    pub fn parse(text: &str) -> Result<Server, MailError> {
        let bad = |what: String| MailError::Url(what);
        let url = Url::parse(text.trim())
            .map_err(|e| bad(format!("it is not a URL ({e}); expected {FORMS}")))?;
        let scheme_security = match url.scheme() {
            "smtp" => Security::Plain,
            "smtp+starttls" => Security::StartTls,
            "smtps" => Security::Implicit,
            other => {
                return Err(bad(format!(
                    "the scheme {other:?} is not smtp, smtp+starttls or smtps; expected {FORMS}"
                )))
            }
        };
        let security = match query_tls(&url)? {
            None => scheme_security,
            Some(Security::StartTls) if scheme_security == Security::Plain => Security::StartTls,
            Some(_) => {
                return Err(bad(
                    "`?tls=starttls` goes with smtp:// only (smtp+starttls:// and smtps:// \
                     say how already)"
                        .to_owned(),
                ))
            }
        };
        let host = match url.host() {
            Some(Host::Domain(name)) if !name.is_empty() => name.to_owned(),
            Some(Host::Ipv4(ip)) => ip.to_string(),
            Some(Host::Ipv6(ip)) => ip.to_string(),
            Some(Host::Domain(_)) | None => {
                return Err(bad(format!("it names no host; expected {FORMS}")));
            }
        };
        let port = match url.port() {
            Some(0) => return Err(bad("the port is 0".to_owned())),
            Some(port) => port,
            None => security.default_port(),
        };
        if !matches!(url.path(), "" | "/") {
            return Err(bad("it has a path; an SMTP URL has none".to_owned()));
        }
        if url.fragment().is_some() {
            return Err(bad(
                "it has a fragment (`#…`); an SMTP URL has none".to_owned()
            ));
        }
        Ok(Server {
            host,
            port,
            security,
            credentials: credentials(&url)?,
        })
    }
}

/// The accepted forms, for error messages.
const FORMS: &str = "smtp://host:port, smtp://host:port?tls=starttls, \
                     smtp+starttls://host:port or smtps://host:port, \
                     with user:password@ before the host for AUTH";

/// What the query says about TLS: `tls=starttls` (or `tls=required`), or nothing.
fn query_tls(url: &Url) -> Result<Option<Security>, MailError> {
    let mut tls = None;
    for (key, value) in url.query_pairs() {
        match (key.as_ref(), value.as_ref()) {
            ("tls", "starttls" | "required") => tls = Some(Security::StartTls),
            ("tls", other) => {
                return Err(MailError::Url(format!(
                    "tls={other:?} is not known; the one value is tls=starttls"
                )))
            }
            (other, _) => {
                return Err(MailError::Url(format!(
                    "the query parameter {other:?} is not known; the one parameter is tls"
                )))
            }
        }
    }
    Ok(tls)
}

/// The percent-decoded user name and password, when the URL has them.
fn credentials(url: &Url) -> Result<Option<(String, String)>, MailError> {
    let decode = |text: &str, what: &str| {
        percent_decoded(text)
            .ok_or_else(|| MailError::Url(format!("the {what} is not UTF-8 once percent-decoded")))
    };
    match (url.username(), url.password()) {
        ("", None) => Ok(None),
        ("", Some(_)) => Err(MailError::Url(
            "it has a password but no user name".to_owned(),
        )),
        (_, None) => Err(MailError::Url(
            "it has a user name but no password (user:password@host)".to_owned(),
        )),
        (user, Some(password)) => Ok(Some((
            decode(user, "user name")?,
            decode(password, "password")?,
        ))),
    }
}

/// `text` with each `%XX` replaced by its byte; `None` when the result is not UTF-8 (a `%` not
/// followed by two hex digits stays as it is).
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .filter(|pair| pair.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server a URL names, failing the test when it names none.
    fn server(url: &str) -> Server {
        Server::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    /// The message of the error a URL gives, failing the test when it gives none.
    fn refusal(url: &str) -> String {
        match Server::parse(url) {
            Ok(server) => panic!("{url} was taken: {server:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn each_form_says_how_to_connect() {
        let plain = server("smtp://mail.example.com:2525");
        assert_eq!(
            (plain.host.as_str(), plain.port, plain.security),
            ("mail.example.com", 2525, Security::Plain)
        );
        assert_eq!(plain.credentials, None);
        assert_eq!(server("smtp://mail.example.com").port, 25);
        let starttls = server("smtp://mail.example.com?tls=starttls");
        assert_eq!(
            (starttls.port, starttls.security),
            (587, Security::StartTls)
        );
        assert_eq!(
            server("smtp://h:2587/?tls=required").security,
            Security::StartTls
        );
        let starttls = server("smtp+starttls://mail.example.com");
        assert_eq!(
            (starttls.port, starttls.security),
            (587, Security::StartTls)
        );
        assert_eq!(server("smtp+starttls://h:1587").port, 1587);
        let implicit = server("smtps://mail.example.com");
        assert_eq!(
            (implicit.port, implicit.security),
            (465, Security::Implicit)
        );
        assert_eq!(server("smtps://h:1465").port, 1465);
        assert_eq!(server("smtp://127.0.0.1:25").host, "127.0.0.1");
        assert_eq!(server("smtp://[::1]:25").host, "::1");
        assert_eq!(server("  smtp://h\n").host, "h");
    }

    #[test]
    fn credentials_are_percent_decoded() {
        let with = server("smtps://me%40example.com:p%3Ass%20w%2Fd%25@h");
        assert_eq!(
            with.credentials,
            Some(("me@example.com".to_owned(), "p:ss w/d%".to_owned()))
        );
        let odd = server("smtp://u:100%2@h");
        assert_eq!(odd.credentials, Some(("u".to_owned(), "100%2".to_owned())));
        assert!(!format!("{with:?}").contains("p:ss"), "{with:?}");
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        let cases = [
            ("http://x", "scheme \"http\""),
            ("smtp://", "no host"),
            ("smtp://:s3cret@", "empty host"),
            ("smtp://u:s3cret@h:99999", "invalid port"),
            ("smtp://u:s3cret@h:port", "invalid port"),
            ("smtp://u:s3cret@h:0", "port is 0"),
            ("not a url", "not a URL"),
            ("smtp://u:s3cret@h?tls=maybe", "tls=\"maybe\""),
            ("smtp://u:s3cret@h?mode=x", "\"mode\""),
            ("smtps://u:s3cret@h?tls=starttls", "smtp:// only"),
            ("smtp://u:s3cret@h/path", "path"),
            ("smtp://u:s3cret@h#x", "fragment"),
            ("smtp://u@h", "no password"),
            ("smtp://:s3cret@h", "no user name"),
            ("smtp://u:%FF%FEs3cret@h", "password is not UTF-8"),
        ];
        for (url, expected) in cases {
            let message = refusal(url);
            assert!(
                message.contains(expected),
                "{url}: {message:?} does not say {expected:?}"
            );
            assert!(message.starts_with("THREADQL_SMTP_URL"), "{message}");
            assert!(!message.contains("s3cret"), "{url}: {message}");
        }
    }
}
