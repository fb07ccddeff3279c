//! Which host pages a user who is not a moderator may create discussions for, by the origin of
//! the page's URL, so nobody claims a site's page key (with their own title and URL) before the
//! site's own embed does.

use crate::config::{origin_of, Origin};
use crate::domain::{DomainError, NewDiscussion};

/// The origins of the pages users who are not moderators may create discussions for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PageOrigins {
    /// Any page: nothing restricts them (the server warns at start).
    #[default]
    Any,
    /// Pages of these origins only (`THREADQL_PUBLIC_URL` and `THREADQL_PAGE_ORIGINS`, or the
    /// CORS origins).
    Only(Vec<Origin>),
}

impl PageOrigins {
    /// Checks a new discussion a user who is not a moderator asks for: under a restriction, one
    /// with a key or a URL needs a URL of an allowed origin (a keyed discussion without a URL
    /// would claim the key for no page). `FORBIDDEN`, naming the allowed origins, otherwise.
    pub(super) fn check(&self, new: &NewDiscussion) -> Result<(), DomainError> {
        let PageOrigins::Only(allowed) = self else {
            return Ok(());
        };
        if new.key.is_none() && new.url.is_none() {
            return Ok(());
        }
        let origin = new.url.as_ref().and_then(|url| origin_of(url.as_str()));
        if origin.is_some_and(|origin| allowed.contains(&origin)) {
            return Ok(());
        }
        let names: Vec<String> = allowed.iter().map(Origin::to_string).collect();
        let names = match names.is_empty() {
            true => "none is allowed".to_owned(),
            false => names.join(", "),
        };
        let what = match &new.url {
            Some(url) => format!(
                "the url {:?} is not a page of an allowed origin",
                url.as_str()
            ),
            None => "a discussion with a key needs the page's url".to_owned(),
        };
        Err(DomainError::Forbidden(format!(
            "only moderators may create a discussion for a page of another origin: {what} \
             (allowed origins: {names}; THREADQL_PAGE_ORIGINS and THREADQL_PUBLIC_URL set them)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DiscussionKey, DiscussionTitle, DiscussionUrl, Layout};

    fn new(key: Option<&str>, url: Option<&str>) -> NewDiscussion {
        NewDiscussion {
            key: key.map(|k| DiscussionKey::parse(k).unwrap()),
            url: url.map(|u| DiscussionUrl::parse(u).unwrap()),
            ..NewDiscussion::new(DiscussionTitle::parse("t").unwrap(), Layout::PerComment)
        }
    }

    #[test]
    fn only_pages_of_the_allowed_origins_get_a_discussion() {
        let only = PageOrigins::Only(vec!["https://blog.example".parse().unwrap()]);
        assert_eq!(
            only.check(&new(Some("k"), Some("https://blog.example/a"))),
            Ok(())
        );
        assert_eq!(
            only.check(&new(None, Some("https://BLOG.example:443/"))),
            Ok(())
        );
        assert_eq!(only.check(&new(None, None)), Ok(()));
        for (key, url) in [
            (Some("k"), Some("https://evil.example/a")),
            (Some("k"), Some("http://blog.example/a")),
            (Some("k"), Some("https://blog.example:8443/a")),
            (None, Some("https://evil.example/")),
            (Some("k"), None),
        ] {
            let err = only.check(&new(key, url)).expect_err("refused");
            assert!(
                matches!(&err, DomainError::Forbidden(m) if m.contains("https://blog.example")),
                "{err:?}"
            );
        }
        assert_eq!(PageOrigins::Any.check(&new(Some("k"), None)), Ok(()));
        let none = PageOrigins::Only(Vec::new());
        assert!(none
            .check(&new(Some("k"), Some("https://blog.example/")))
            .is_err());
    }
}
