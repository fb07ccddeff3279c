//! Settings parsed from text of their own: rate limits, the web origins CORS allows, and the
//! names of layouts, moderation modes and log formats on the command line.

use std::fmt;

use clap::ValueEnum;

use crate::domain::{Layout, ModerationMode};

/// A rate limit: `count` per `per`, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimit {
    /// No limit.
    Off,
    /// At most `count` in any `per`.
    Every {
        /// How many.
        count: u32,
        /// In how long.
        per: std::time::Duration,
    },
}

impl std::str::FromStr for RateLimit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "{s:?} is not a rate limit: expected `<count>/<seconds>s` (e.g. 10/10s) or `off`"
            )
        };
        if s.trim().eq_ignore_ascii_case("off") {
            return Ok(RateLimit::Off);
        }
        let (count, per) = s.trim().split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let secs: u64 = per
            .trim()
            .strip_suffix('s')
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        if count == 0 || secs == 0 {
            return Err(bad());
        }
        Ok(RateLimit::Every {
            count,
            per: std::time::Duration::from_secs(secs),
        })
    }
}

/// How long after its creation a discussion closes to new comments
/// (`THREADQL_AUTO_CLOSE_AFTER`): a whole number and a unit, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AutoClose(pub Option<std::time::Duration>);

impl AutoClose {
    /// The longest it may be: 100 years.
    pub const MAX_SECS: u64 = 100 * 365 * 86_400;
}

impl std::str::FromStr for AutoClose {
    type Err = String;

    /// Reads `off`, or a whole number above 0 and a unit: `s`, `m`, `h` or `d` (`30d`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        if text.eq_ignore_ascii_case("off") {
            return Ok(AutoClose(None));
        }
        let bad = |why: &str| {
            format!(
                "THREADQL_AUTO_CLOSE_AFTER (--auto-close-after) {s:?}: {why}; write a whole \
                 number and a unit, s, m, h or d (e.g. 30d, 12h, 90m, 45s), or `off`"
            )
        };
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| bad("the unit is missing"))?;
        let (number, unit) = text.split_at(split);
        let unit_secs = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            _ => return Err(bad(&format!("{unit:?} is not a unit"))),
        };
        let number: u64 = number
            .parse()
            .map_err(|_| bad("it does not start with a whole number"))?;
        let secs = number
            .checked_mul(unit_secs)
            .filter(|secs| *secs <= Self::MAX_SECS)
            .ok_or_else(|| bad("it is longer than 100 years"))?;
        if secs == 0 {
            return Err(bad("it is 0 (`off` never closes them)"));
        }
        Ok(AutoClose(Some(std::time::Duration::from_secs(secs))))
    }
}

/// The origins allowed to call the API from a browser (`THREADQL_CORS_ORIGINS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    /// Any origin (`*`).
    Any,
    /// These origins.
    List(Vec<Origin>),
}

impl CorsOrigins {
    /// Whether a page of `origin` may call the API.
    pub fn allows(&self, origin: &Origin) -> bool {
        match self {
            CorsOrigins::Any => true,
            CorsOrigins::List(origins) => origins.contains(origin),
        }
    }
}

impl std::str::FromStr for CorsOrigins {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_setting(s, "THREADQL_CORS_ORIGINS (--cors-origins)")
    }
}

impl CorsOrigins {
    /// Reads a list of origins, or `*`, given as the setting `setting` (named in errors).
    pub(super) fn parse_setting(s: &str, setting: &str) -> Result<Self, String> {
        let entries: Vec<&str> = s
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.contains(&"*") {
            return match entries.len() {
                1 => Ok(CorsOrigins::Any),
                _ => Err(format!(
                    "{setting} {s:?}: `*` allows every origin, so it stands alone"
                )),
            };
        }
        entries
            .into_iter()
            .map(|entry| {
                entry.parse::<Origin>().map_err(|why| {
                    format!(
                        "{setting}: {entry:?} is not an origin ({why}); \
                         write scheme://host[:port] (e.g. https://blog.example.com), separate \
                         origins with commas, or write * for any origin"
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(CorsOrigins::List)
    }
}

/// A web origin, `scheme://host[:port]`, as browsers write it in the `Origin` header: scheme
/// and host in lowercase, no port when it is the scheme's default (80 for http, 443 for https).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

/// The port of a scheme when none is written (`None` when it has none).
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl Origin {
    /// Its scheme (`http`, `https`…), in lowercase.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }
}

/// `host[:port]` split at the port (an IPv6 host keeps its brackets).
fn split_port(authority: &str) -> (&str, Option<&str>) {
    let after_host = match authority.strip_prefix('[') {
        Some(rest) => rest.find(']').map_or(authority.len(), |end| end + 2),
        None => authority.find(':').unwrap_or(authority.len()),
    };
    let (host, rest) = authority.split_at(after_host.min(authority.len()));
    (host, rest.strip_prefix(':'))
}

impl std::str::FromStr for Origin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (scheme, authority) = s.split_once("://").ok_or("it has no scheme:// in front")?;
        let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !scheme_ok {
            return Err(format!("{scheme:?} is not a scheme"));
        }
        if let Some(c) = authority.chars().find(|c| matches!(c, '/' | '?' | '#')) {
            return Err(format!(
                "an origin has no path, query or fragment (found {c:?}; not even a final /)"
            ));
        }
        if authority.contains('@') {
            return Err("an origin has no user name or password".into());
        }
        let (host, port) = split_port(authority);
        let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(ipv6) => ipv6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => {
                !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
            }
        };
        if !host_ok {
            return Err(format!(
                "{host:?} is not a host name or address (names outside ASCII are written in punycode)"
            ));
        }
        let port = match port {
            None => None,
            Some(port) => match port.parse::<u16>() {
                Ok(0) | Err(_) => return Err(format!("{port:?} is not a port (1 to 65535)")),
                Ok(port) => Some(port),
            },
        };
        let scheme = scheme.to_ascii_lowercase();
        let port = port.filter(|port| Some(*port) != default_port(&scheme));
        Ok(Origin {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// A storage layout as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum LayoutArg {
    /// One document per comment.
    PerComment,
    /// All comments in the discussion document.
    Embedded,
    /// Buckets of comments.
    Bucketed,
}

impl From<LayoutArg> for Layout {
    fn from(arg: LayoutArg) -> Self {
        match arg {
            LayoutArg::PerComment => Layout::PerComment,
            LayoutArg::Embedded => Layout::Embedded,
            LayoutArg::Bucketed => Layout::Bucketed,
        }
    }
}

/// A moderation mode as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum ModerationArg {
    /// Publish at once.
    Post,
    /// Hold every comment for review.
    Pre,
    /// Hold a comment until its author has had one approved.
    PreFirst,
}

impl From<ModerationArg> for ModerationMode {
    fn from(arg: ModerationArg) -> Self {
        match arg {
            ModerationArg::Post => ModerationMode::Post,
            ModerationArg::Pre => ModerationMode::Pre,
            ModerationArg::PreFirst => ModerationMode::PreFirst,
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_close_reads_a_number_and_a_unit_or_off() {
        let after = |text: &str| text.parse::<AutoClose>().map(|a| a.0.map(|d| d.as_secs()));
        assert_eq!(after("off"), Ok(None));
        assert_eq!(after(" OFF "), Ok(None));
        assert_eq!(after("30d"), Ok(Some(30 * 86_400)));
        assert_eq!(after("12h"), Ok(Some(12 * 3_600)));
        assert_eq!(after("90m"), Ok(Some(90 * 60)));
        assert_eq!(after("45s"), Ok(Some(45)));
        for bad in [
            "",
            "0d",
            "30",
            "d",
            "30 d",
            "30D",
            "-1d",
            "1.5d",
            "30w",
            "1y",
            "thirty days",
            "36501d",
            "99999999999999999999s",
        ] {
            let refused = after(bad).err().unwrap_or_default();
            assert!(refused.contains("e.g. 30d"), "{bad:?}: {refused}");
        }
        assert_eq!(after("36500d"), Ok(Some(AutoClose::MAX_SECS)));
    }
    use crate::config::Cli;
    use clap::Parser;

    #[test]
    fn cors_origins_are_origins_or_a_lone_star() {
        let parse = |s: &str| s.parse::<CorsOrigins>();
        let list = |s: &str| -> Vec<String> {
            match parse(s) {
                Ok(CorsOrigins::List(origins)) => origins.iter().map(Origin::to_string).collect(),
                other => panic!("{s:?}: {other:?}"),
            }
        };
        assert_eq!(parse("*"), Ok(CorsOrigins::Any));
        assert_eq!(parse(" * "), Ok(CorsOrigins::Any));
        assert_eq!(
            list("https://Blog.Example.com, http://localhost:3000,,HTTP://[::1]:8080"),
            vec![
                "https://blog.example.com",
                "http://localhost:3000",
                "http://[::1]:8080"
            ]
        );
        // Default ports are dropped, as browsers drop them.
        assert_eq!(
            list("https://a.example:443,http://a.example:80,https://a.example:80"),
            vec![
                "https://a.example",
                "http://a.example",
                "https://a.example:80"
            ]
        );
        assert_eq!(
            list("app://local,capacitor://localhost"),
            vec!["app://local", "capacitor://localhost"]
        );
        assert_eq!(list(""), Vec::<String>::new());
        for bad in [
            "example.com",
            "https://example.com/",
            "https://example.com/path",
            "https://example.com?x",
            "https://example.com#x",
            "https://user@example.com",
            "https://",
            "https://:8080",
            "https://example.com:0",
            "https://example.com:65536",
            "https://example.com:http",
            "https://exa mple.com",
            "https://bücher.example",
            "https://[::1",
            "https://[nothost]",
            "1http://example.com",
            "null",
            "*, https://example.com",
            "https://a.example,nope",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains("THREADQL_CORS_ORIGINS"), "{bad}: {err}");
        }
        let cli = Cli::try_parse_from(["threadql", "--cors-origins", "https://ok.example,bad"]);
        let err = cli
            .map(|_| ())
            .expect_err("a bad origin stops start-up")
            .to_string();
        assert!(
            err.contains("THREADQL_CORS_ORIGINS") && err.contains("\"bad\""),
            "{err}"
        );
    }

    #[test]
    fn rate_limits_parse() {
        use std::time::Duration;
        assert_eq!("off".parse(), Ok(RateLimit::Off));
        assert_eq!(
            "10/10s".parse(),
            Ok(RateLimit::Every {
                count: 10,
                per: Duration::from_secs(10)
            })
        );
        for bad in ["", "10", "10/10", "0/10s", "10/0s", "x/1s", "-1/1s"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }
}
