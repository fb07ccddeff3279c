//! How a discussion moderates what is posted to it.

use std::fmt;
use std::str::FromStr;

use super::DomainError;

/// How a discussion moderates new comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ModerationMode {
    /// Comments are published at once; moderators act afterwards.
    #[default]
    Post,
    /// Every comment waits for a moderator's approval.
    Pre,
    /// A comment waits for approval until its author has had one comment approved anywhere in
    /// the service.
    PreFirst,
}

impl ModerationMode {
    /// Every mode, in a fixed order.
    pub const ALL: [ModerationMode; 3] = [
        ModerationMode::Post,
        ModerationMode::Pre,
        ModerationMode::PreFirst,
    ];

    /// The name stored in the database and used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            ModerationMode::Post => "post",
            ModerationMode::Pre => "pre",
            ModerationMode::PreFirst => "pre_first",
        }
    }
}

impl fmt::Display for ModerationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ModerationMode {
    type Err = DomainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "post" => Ok(ModerationMode::Post),
            "pre" => Ok(ModerationMode::Pre),
            "pre_first" => Ok(ModerationMode::PreFirst),
            other => Err(DomainError::bad_input(format!(
                "unknown moderation mode {other:?}: expected post, pre or pre_first"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for mode in ModerationMode::ALL {
            assert_eq!(mode.as_str().parse::<ModerationMode>().ok(), Some(mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(
            "PRE-FIRST".parse::<ModerationMode>().ok(),
            Some(ModerationMode::PreFirst)
        );
        for bad in ["", "pre first", "premoderation", "posts"] {
            assert!(bad.parse::<ModerationMode>().is_err(), "{bad:?}");
        }
        assert_eq!(ModerationMode::default(), ModerationMode::Post);
    }
}
