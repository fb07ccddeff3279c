//! The retry schedule of a delivery: how long to wait before each attempt, and the jitter.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng as _;

/// The most waits (and so attempts) a schedule may have.
const MAX_ATTEMPTS: usize = 20;

/// The longest single wait a schedule may have: 7 days.
const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The waits before each attempt of a delivery: entry `i` is the wait before attempt `i + 1`
/// (entry 0 the wait before the first attempt). Always 1 to 20 entries of at most 7 days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

impl RetrySchedule {
    /// How many attempts a delivery gets before it has failed.
    pub fn attempts(&self) -> u32 {
        u32::try_from(self.0.len()).unwrap_or(u32::MAX)
    }

    /// The wait before `attempt` (1-based), or `None` past the last attempt (or for 0): the
    /// delivery has failed.
    pub fn wait_before(&self, attempt: u32) -> Option<Duration> {
        let index = usize::try_from(attempt.checked_sub(1)?).ok()?;
        self.0.get(index).copied()
    }

    /// The waits, the first before the first attempt.
    pub fn waits(&self) -> &[Duration] {
        &self.0
    }
}

impl Default for RetrySchedule {
    /// The schedule the Standard Webhooks specification suggests: at once, then 5 s, 5 min,
    /// 30 min, 2 h, 5 h, 10 h and 10 h (8 attempts over about 27.6 hours).
    fn default() -> Self {
        const MINUTE: u64 = 60;
        const HOUR: u64 = 60 * MINUTE;
        RetrySchedule(
            [
                0,
                5,
                5 * MINUTE,
                30 * MINUTE,
                2 * HOUR,
                5 * HOUR,
                10 * HOUR,
                10 * HOUR,
            ]
            .into_iter()
            .map(Duration::from_secs)
            .collect(),
        )
    }
}

impl FromStr for RetrySchedule {
    type Err = String;

    /// Reads comma-separated waits, each a whole number and a unit (`ms`, `s`, `m` or `h`),
    /// spaces around items allowed: `0s, 5s, 5m, 30m`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().is_empty() {
            return Err("a retry schedule needs at least one wait, such as `0s,5s,5m`".to_owned());
        }
        let waits = text
            .split(',')
            .map(str::trim)
            .map(parse_wait)
            .collect::<Result<Vec<_>, _>>()?;
        if waits.len() > MAX_ATTEMPTS {
            return Err(format!(
                "a retry schedule has at most {MAX_ATTEMPTS} waits, this one has {}",
                waits.len()
            ));
        }
        Ok(RetrySchedule(waits))
    }
}

impl fmt::Display for RetrySchedule {
    /// The schedule in the form `FromStr` reads, each wait in its largest whole unit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self.0.iter().copied().map(format_wait).collect();
        f.write_str(&items.join(","))
    }
}

/// One item of a schedule: a whole number and a unit, at most 7 days.
fn parse_wait(item: &str) -> Result<Duration, String> {
    if item.is_empty() {
        return Err(
            "retry schedule: an empty item (two commas in a row, or one at an end)".to_owned(),
        );
    }
    let digits_end = item
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(item.len());
    let (number, unit) = item.split_at(digits_end);
    if number.is_empty() {
        return Err(format!(
            "retry schedule item `{item}`: expected a whole number and a unit (ms, s, m or h)"
        ));
    }
    let unit_millis: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "retry schedule item `{item}`: the unit must be ms, s, m or h"
            ))
        }
    };
    let too_long = || format!("retry schedule item `{item}`: a wait is at most 7 days");
    let count: u64 = number.parse().map_err(|_| too_long())?;
    let millis = count.checked_mul(unit_millis).ok_or_else(too_long)?;
    let wait = Duration::from_millis(millis);
    if wait > MAX_WAIT {
        return Err(too_long());
    }
    Ok(wait)
}

/// A wait in its largest whole unit (`0s`, `500ms`, `5m`, `2h`).
fn format_wait(wait: Duration) -> String {
    let millis = wait.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// `wait` multiplied by a uniform random factor in [0.9, 1.1], so that deliveries that failed
/// together do not all retry at the same instant. Zero stays zero.
pub fn jittered(wait: Duration) -> Duration {
    let factor = rand::thread_rng().gen_range(0.9..=1.1);
    Duration::try_from_secs_f64(wait.as_secs_f64() * factor).unwrap_or(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn the_default_is_the_specification_schedule() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.attempts(), 8);
        let expected = [0, 5, 300, 1800, 7200, 18000, 36000, 36000].map(secs);
        assert_eq!(schedule.waits(), expected);
        assert_eq!(schedule.to_string(), "0s,5s,5m,30m,2h,5h,10h,10h");
    }

    #[test]
    fn wait_before_counts_attempts_from_one_and_ends_after_the_last() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.wait_before(1), Some(secs(0)));
        assert_eq!(schedule.wait_before(2), Some(secs(5)));
        assert_eq!(schedule.wait_before(8), Some(secs(36000)));
        assert_eq!(schedule.wait_before(9), None);
        assert_eq!(schedule.wait_before(0), None);
        assert_eq!(schedule.wait_before(u32::MAX), None);
    }

    #[test]
    fn parses_units_and_spaces() {
        let cases: [(&str, Vec<Duration>); 5] = [
            ("0s,1s,3s", vec![secs(0), secs(1), secs(3)]),
            ("500ms,2m", vec![Duration::from_millis(500), secs(120)]),
            (" 1h , 0ms ,10s ", vec![secs(3600), secs(0), secs(10)]),
            ("168h", vec![secs(7 * 24 * 3600)]),
            ("0s", vec![secs(0)]),
        ];
        for (text, waits) in cases {
            let schedule: RetrySchedule = text.parse().unwrap();
            assert_eq!(schedule.waits(), waits, "{text}");
            assert_eq!(schedule.attempts() as usize, waits.len());
        }
    }

    #[test]
    fn display_reads_back() {
        for text in ["0s,5s,5m,30m,2h,5h,10h,10h", "500ms,1500ms,90s,61m"] {
            let schedule: RetrySchedule = text.parse().unwrap();
            assert_eq!(schedule.to_string(), text);
        }
    }

    #[test]
    fn refuses_bad_items_naming_them() {
        let cases = [
            ("1s,2x,3s", "`2x`"),
            ("1s,,3s", "empty item"),
            ("1s,", "empty item"),
            ("5", "`5`"),
            ("s", "`s`"),
            ("1.5s", "`1.5s`"),
            ("-1s", "`-1s`"),
            ("1 s", "`1 s`"),
            ("169h", "`169h`"),
            ("10081m", "`10081m`"),
            ("99999999999999999999999h", "`99999999999999999999999h`"),
            ("18446744073709551615h", "7 days"),
        ];
        for (text, named) in cases {
            let error = text.parse::<RetrySchedule>().unwrap_err();
            assert!(error.contains(named), "{text}: {error}");
        }
    }

    #[test]
    fn refuses_empty_and_overlong_schedules() {
        for text in ["", "  "] {
            let error = text.parse::<RetrySchedule>().unwrap_err();
            assert!(error.contains("at least one"), "{error}");
        }
        let twenty = vec!["1s"; 20].join(",");
        assert_eq!(twenty.parse::<RetrySchedule>().unwrap().attempts(), 20);
        let error = format!("{twenty},1s").parse::<RetrySchedule>().unwrap_err();
        assert!(error.contains("at most 20"), "{error}");
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        assert_eq!(jittered(Duration::ZERO), Duration::ZERO);
        let wait = secs(100);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            let jittered = jittered(wait);
            assert!(
                jittered >= secs(90) && jittered <= secs(110),
                "{jittered:?}"
            );
            seen.insert(jittered.as_millis() / 1000);
        }
        // Spread over the range, not a constant.
        assert!(seen.len() > 10, "{seen:?}");
        assert!(jittered(Duration::MAX) >= Duration::MAX / 2);
    }
}
