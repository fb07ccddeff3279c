//! The message as lettre sends it: multipart/alternative (text, then html) with the threading
//! headers (Message-ID, References, In-Reply-To) and the one-click unsubscribe headers of
//! RFC 2369 and RFC 8058, which lettre has no types for.

use std::error::Error as StdError;

use lettre::message::header::{Header, HeaderName, HeaderValue, InReplyTo, References};
use lettre::message::{Mailbox, MultiPart};
use lettre::Message;

use super::message::Outgoing;

/// What a header's `parse` fails with (lettre's boxed error).
type ParseError = Box<dyn StdError + Send + Sync>;

/// The value of `List-Unsubscribe-Post` that asks for one-click unsubscribing (RFC 8058).
pub const ONE_CLICK: &str = "List-Unsubscribe=One-Click";

/// `List-Unsubscribe: <url>` (RFC 2369): where to unsubscribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListUnsubscribe(String);

impl Header for ListUnsubscribe {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("List-Unsubscribe")
    }

    fn parse(s: &str) -> Result<Self, ParseError> {
        s.trim()
            .strip_prefix('<')
            .and_then(|rest| rest.strip_suffix('>'))
            .map(|url| Self(url.to_owned()))
            .ok_or_else(|| "List-Unsubscribe is not `<url>`".into())
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), format!("<{}>", self.0))
    }
}

/// `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058): a POST to the
/// List-Unsubscribe URL unsubscribes at once, with no page to confirm on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListUnsubscribePost;

impl Header for ListUnsubscribePost {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("List-Unsubscribe-Post")
    }

    fn parse(s: &str) -> Result<Self, ParseError> {
        if s.trim() == ONE_CLICK {
            Ok(Self)
        } else {
            Err(format!("List-Unsubscribe-Post is not {ONE_CLICK}").into())
        }
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), ONE_CLICK.to_owned())
    }
}

/// The lettre message for `outgoing` from `from`, or why there can be none (an address that
/// is not one). The unsubscribe headers are left out when the URL could not stand in a header
/// as it is (not http or https, not printable ASCII, or holding `<`, `>` or spaces).
pub(super) fn letter(outgoing: &Outgoing, from: &Mailbox) -> Result<Message, String> {
    let to: Mailbox = outgoing
        .to
        .parse()
        .map_err(|e| format!("the recipient address is not valid: {e}"))?;
    let mut builder = Message::builder()
        .from(from.clone())
        .to(to)
        .subject(outgoing.subject.clone())
        .message_id(Some(outgoing.message_id.clone()));
    if !outgoing.references.is_empty() {
        builder = builder.header(References::from(outgoing.references.join(" ")));
    }
    if let [only] = outgoing.references.as_slice() {
        builder = builder.header(InReplyTo::from(only.clone()));
    }
    if header_safe_url(&outgoing.unsubscribe_url) {
        builder = builder
            .header(ListUnsubscribe(outgoing.unsubscribe_url.clone()))
            .header(ListUnsubscribePost);
    }
    builder
        .multipart(MultiPart::alternative_plain_html(
            outgoing.text.clone(),
            outgoing.html.clone(),
        ))
        .map_err(|e| format!("the message cannot be built: {e}"))
}

/// Whether `url` can stand between `<` and `>` in a header as it is.
fn header_safe_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && url
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'<' && b != b'>')
}
