//! Comments without an account: whether a discussion takes them ([`GuestPolicy`]), who a guest
//! says they are ([`GuestIdentity`]), the id a guest gets and the token that lets them edit
//! their comment ([`GuestKeys`]).

use super::names::{name_key, DisplayName};
use super::networks::GuestNetwork;
use super::secrets::{Purpose, ServerKey, SubKey};
pub use super::standing::GuestPolicy;
use super::tokens::SignedTokens;
use super::{DiscussionId, DomainError, Micros, Slug};

/// The prefix of every guest's id.
pub const GUEST_PREFIX: &str = "guest:";

/// The hex digits after [`GUEST_PREFIX`].
const ID_DIGITS: usize = 16;

/// Longest e-mail address accepted, in characters.
const MAX_EMAIL_CHARS: usize = 254;

/// Longest website address accepted, in characters.
const MAX_WEBSITE_CHARS: usize = 512;

/// Longest text a guest token names: a discussion id, a slug, a guest id and a name.
const MAX_TOKEN_BYTES: usize = 1_024;

/// Whether `id` is a guest's (`guest:` and 16 hex digits).
pub fn is_guest(id: &str) -> bool {
    id.strip_prefix(GUEST_PREFIX).is_some_and(|hex| {
        hex.len() == ID_DIGITS && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Who a guest says they are, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestIdentity {
    /// The name shown with their comments (the rules of display names).
    pub name: DisplayName,
    /// Their e-mail address, lower-cased: shown to moderators only.
    pub email: Option<String>,
    /// Their website (`http` or `https`): shown to moderators only.
    pub website: Option<String>,
}

impl GuestIdentity {
    /// Checks what a guest sent: a display name, an optional e-mail address (one `@` with text
    /// on both sides and a dot in the domain, at most 254 characters, no spaces or controls)
    /// and an optional `http(s)` website. Empty optional fields count as absent.
    pub fn parse(
        name: &str,
        email: Option<&str>,
        website: Option<&str>,
    ) -> Result<Self, DomainError> {
        let name = DisplayName::parse(name)
            .map_err(|e| DomainError::bad_input(format!("guest name refused: {e}")))?;
        let email = email
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(email_address)
            .transpose()?;
        let website = website
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(website_address)
            .transpose()?;
        Ok(Self {
            name,
            email,
            website,
        })
    }

    /// The name's key: how it is compared with signed-in users' names.
    pub fn name_key(&self) -> String {
        name_key(self.name.as_str())
    }
}

/// A checked, lower-cased e-mail address.
fn email_address(email: &str) -> Result<String, DomainError> {
    let bad = |why: &str| DomainError::bad_input(format!("guest email refused: {why}"));
    if email.chars().count() > MAX_EMAIL_CHARS {
        return Err(bad("it has more than 254 characters"));
    }
    if email
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';'))
    {
        return Err(bad("it has spaces, controls or separators"));
    }
    let Some((local, domain)) = email.split_once('@') else {
        return Err(bad("it has no @"));
    };
    if local.is_empty() || domain.contains('@') || !domain.contains('.') {
        return Err(bad(
            "expected one @ with a name before it and a domain after it",
        ));
    }
    if domain.starts_with('.') || domain.ends_with('.') || domain.contains("..") {
        return Err(bad("its domain is malformed"));
    }
    Ok(email.to_lowercase())
}

/// A checked website address: `http(s)://` and a host, no spaces or controls.
fn website_address(website: &str) -> Result<String, DomainError> {
    let bad = |why: &str| DomainError::bad_input(format!("guest website refused: {why}"));
    if website.chars().count() > MAX_WEBSITE_CHARS {
        return Err(bad("it has more than 512 characters"));
    }
    let url = url::Url::parse(website).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("it must start with http:// or https://"));
    }
    if url.host_str().is_none_or(str::is_empty) || !url.username().is_empty() {
        return Err(bad("it needs a host and no user name"));
    }
    Ok(url.to_string())
}

/// What moderators, and nobody else, see of a guest: what they gave beyond their name, and the
/// network they last posted from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestDetails {
    /// Their e-mail address.
    pub email: Option<String>,
    /// Their website.
    pub website: Option<String>,
    /// The network they last posted from.
    pub network: GuestNetwork,
    /// When they last posted.
    pub at: Micros,
}

/// What a guest token names: the comment it lets its guest change, and the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestTicket {
    /// The comment's discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
    /// The guest's id.
    pub guest: String,
    /// The guest's name, as they posted.
    pub name: String,
}

/// Makes guests' ids and the tokens of their comments, under sub-keys of the server key.
#[derive(Debug, Clone)]
pub struct GuestKeys {
    ids: SubKey,
    tokens: SignedTokens,
}

impl GuestKeys {
    /// Guest ids and tokens under `key`.
    pub fn new(key: &ServerKey) -> Self {
        Self {
            ids: key.derive(Purpose::GuestIds),
            tokens: SignedTokens::new(key, Purpose::GuestTokens, MAX_TOKEN_BYTES),
        }
    }

    /// A guest's id: `guest:` and the first 16 hex digits of HMAC-SHA256(the guest-id sub-key,
    /// the lower-cased e-mail address, or the name without one). Keyed, so nobody can check a
    /// public id against a guessed address.
    pub fn id(&self, identity: &GuestIdentity) -> String {
        let source = match &identity.email {
            Some(email) => format!("email:{email}"),
            None => format!("name:{}", identity.name.as_str()),
        };
        let digest = self.ids.mac(source.as_bytes());
        let hex: String = digest
            .iter()
            .take(ID_DIGITS / 2)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{GUEST_PREFIX}{hex}")
    }

    /// The token that lets `ticket`'s guest change that comment.
    pub fn token(&self, ticket: &GuestTicket) -> String {
        let text = [
            ticket.discussion.as_str(),
            ticket.slug.as_str(),
            &ticket.guest,
            &ticket.name,
        ]
        .join("\n");
        self.tokens.sign(&text)
    }

    /// What `token` names, when it is one of ours for the comment `slug` of `discussion`
    /// (`FORBIDDEN` otherwise: altered, another key's, or another comment's).
    pub fn check(
        &self,
        token: &str,
        discussion: &DiscussionId,
        slug: &Slug,
    ) -> Result<GuestTicket, DomainError> {
        let refused = || {
            DomainError::Forbidden(format!(
                "this guest token is not the one of comment {slug} in discussion {discussion}"
            ))
        };
        let text = self.tokens.verify(token).ok_or_else(refused)?;
        let mut parts = text.split('\n');
        let (Some(d), Some(s), Some(guest), Some(name), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(refused());
        };
        if d != discussion.as_str() || s != slug.as_str() || !is_guest(guest) {
            return Err(refused());
        }
        Ok(GuestTicket {
            discussion: discussion.clone(),
            slug: slug.clone(),
            guest: guest.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// How many links rendered comment HTML holds (its `<a href` elements).
pub fn links_in(html: &str) -> usize {
    html.matches("<a href=").count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> GuestKeys {
        GuestKeys::new(&ServerKey::from_bytes((1..=32).collect()).expect("a key"))
    }

    fn identity(name: &str, email: Option<&str>) -> GuestIdentity {
        GuestIdentity::parse(name, email, None).expect("an identity")
    }

    #[test]
    fn guest_ids_are_keyed_and_follow_the_address_or_else_the_name() {
        let keys = keys();
        let ann = keys.id(&identity("Ann", Some("Ann@Example.org")));
        assert!(is_guest(&ann), "{ann}");
        assert_eq!(ann, keys.id(&identity("Anne", Some("ann@example.org"))));
        assert_ne!(ann, keys.id(&identity("Ann", None)));
        assert_eq!(
            keys.id(&identity("Ann", None)),
            keys.id(&identity("Ann", None))
        );
        let other = GuestKeys::new(&ServerKey::generate());
        assert_ne!(ann, other.id(&identity("Ann", Some("ann@example.org"))));
        assert!(!is_guest("guest:ABCDEF0123456789"));
        assert!(!is_guest("guest:abc"));
        assert!(!is_guest("disqus-guest:0123456789abcdef"));
    }

    #[test]
    fn identities_follow_the_rules() {
        let full = GuestIdentity::parse(
            "Ann",
            Some(" ann@example.org "),
            Some("https://ann.example/blog"),
        )
        .expect("fine");
        assert_eq!(full.email.as_deref(), Some("ann@example.org"));
        assert_eq!(full.website.as_deref(), Some("https://ann.example/blog"));
        let bare = GuestIdentity::parse("Ann", Some(""), Some(" ")).expect("fine");
        assert_eq!((bare.email, bare.website), (None, None));
        for (name, email, website) in [
            ("", None, None),
            (" ", None, None),
            ("\u{202E}evil", None, None),
            (&"x".repeat(65) as &str, None, None),
            ("Ann", Some("ann"), None),
            ("Ann", Some("ann@localhost"), None),
            ("Ann", Some("a b@example.org"), None),
            ("Ann", Some("@example.org"), None),
            ("Ann", Some("ann@@example.org"), None),
            ("Ann", Some("ann@example..org"), None),
            ("Ann", None, Some("javascript:alert(1)")),
            ("Ann", None, Some("ftp://ann.example")),
            ("Ann", None, Some("ann.example")),
            ("Ann", None, Some("https://user@ann.example")),
        ] {
            let err = GuestIdentity::parse(name, email, website).expect_err(name);
            assert_eq!(err.code(), "BAD_USER_INPUT", "{name} {email:?} {website:?}");
        }
    }

    #[test]
    fn a_token_lets_its_guest_change_that_comment_only() {
        let keys = keys();
        let discussion = DiscussionId::parse(&"d1".repeat(12)).expect("an id");
        let slug = Slug::parse("a1b2c3d4").expect("a slug");
        let ticket = GuestTicket {
            discussion: discussion.clone(),
            slug: slug.clone(),
            guest: keys.id(&identity("Ann", None)),
            name: "Ann".into(),
        };
        let token = keys.token(&ticket);
        assert_eq!(keys.check(&token, &discussion, &slug), Ok(ticket));
        let other_slug = Slug::parse("a1b2c3d5").expect("a slug");
        let other_discussion = DiscussionId::parse(&"d2".repeat(12)).expect("an id");
        for (token, d, s) in [
            (token.as_str(), &discussion, &other_slug),
            (token.as_str(), &other_discussion, &slug),
            ("garbage", &discussion, &slug),
            (&token[1..], &discussion, &slug),
        ] {
            let err = keys.check(token, d, s).expect_err("refused");
            assert_eq!(err.code(), "FORBIDDEN");
        }
        let elsewhere = GuestKeys::new(&ServerKey::generate());
        assert!(elsewhere.check(&token, &discussion, &slug).is_err());
    }

    #[test]
    fn links_are_counted_in_rendered_html() {
        assert_eq!(links_in("<p>no links</p>"), 0);
        assert_eq!(
            links_in("<p><a href=\"https://a.example\" rel=\"nofollow\">a</a> <a href=\"https://b.example\">b</a></p>"),
            2
        );
    }

    #[test]
    fn policies_read_back() {
        for policy in [GuestPolicy::Off, GuestPolicy::Pre, GuestPolicy::Post] {
            assert_eq!(policy.as_str().parse::<GuestPolicy>(), Ok(policy));
        }
        assert!("open".parse::<GuestPolicy>().is_err());
    }
}
