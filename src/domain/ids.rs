//! Discussion ids and the storage layout names.

use std::fmt;
use std::str::FromStr;

use rand::Rng;

use super::DomainError;

/// Length of a discussion id: 24 lowercase hex characters (the shape of a MongoDB ObjectId).
const ID_LEN: usize = 24;

/// The id of a discussion, validated: 24 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiscussionId(String);

impl DiscussionId {
    /// Parses a client-supplied id.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let ok = raw.len() == ID_LEN
            && raw
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(DomainError::bad_input(format!(
                "malformed discussion id {raw:?}: expected {ID_LEN} lowercase hex characters"
            )))
        }
    }

    /// A fresh random id.
    pub fn generate() -> Self {
        let mut rng = rand::thread_rng();
        let id = (0..ID_LEN)
            .map(|_| char::from_digit(rng.gen_range(0..16), 16).unwrap_or('0'))
            .collect();
        Self(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DiscussionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a discussion's comments are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// One document per comment (`comments` collection).
    PerComment,
    /// Every comment nested inside the discussion document.
    Embedded,
    /// Buckets ("pages") of about a hundred comments (`comment_pages` collection).
    Bucketed,
}

impl Layout {
    /// Every layout, in a fixed order.
    pub const ALL: [Layout; 3] = [Layout::PerComment, Layout::Embedded, Layout::Bucketed];

    /// The name stored in the database and used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::PerComment => "per_comment",
            Layout::Embedded => "embedded",
            Layout::Bucketed => "bucketed",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Layout {
    type Err = DomainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "per_comment" => Ok(Layout::PerComment),
            "embedded" => Ok(Layout::Embedded),
            "bucketed" => Ok(Layout::Bucketed),
            other => Err(DomainError::bad_input(format!(
                "unknown storage layout {other:?}: expected per_comment, embedded or bucketed"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_garbage() {
        let id = DiscussionId::generate();
        assert_eq!(DiscussionId::parse(id.as_str()), Ok(id));
        for bad in [
            "",
            "abc",
            "zzzzzzzzzzzzzzzzzzzzzzzz",
            "ABCDEFABCDEFABCDEFABCDEF",
            ".*",
        ] {
            assert!(DiscussionId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn layouts_parse_by_name() {
        for layout in Layout::ALL {
            assert_eq!(layout.as_str().parse::<Layout>(), Ok(layout));
        }
        assert!("sharded".parse::<Layout>().is_err());
    }
}
