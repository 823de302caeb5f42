//! Retention of the Fluvio topics Photon creates.
//!
//! Fluvio has no compaction and no per-record deletion: old segments go once they are older
//! than the topic's retention (`RETENTION_ENV`, default 7 days, at least 10 s). The active
//! segment is never removed, so a small topic keeps everything. `truncate_before` is not
//! offered.

use std::time::Duration;

use fluvio::metadata::topic::{CleanupPolicy, SegmentBasedPolicy};
use photon_core::{PhotonError, Result};

/// Default retention: 7 days, Fluvio's own default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Shortest retention Fluvio accepts.
pub const MIN_RETENTION: Duration = Duration::from_secs(10);

const EXPECTED: &str =
    "a duration of at least 10s and at most 49710d: a number with unit s, m, h or d (e.g. 3600s, 12h, 7d)";

/// Parses a retention such as `7d`, `12h`, `30m` or `3600s`.
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` and the accepted forms.
pub fn parse_retention(variable: &str, value: &str) -> Result<Duration> {
    let refuse = || PhotonError::config(variable, value, EXPECTED);
    let text = value.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(refuse)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| refuse())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(refuse()),
    };
    let seconds = number.checked_mul(scale).ok_or_else(refuse)?;
    if seconds < MIN_RETENTION.as_secs() || seconds > u64::from(u32::MAX) {
        return Err(refuse());
    }
    Ok(Duration::from_secs(seconds))
}

/// The Fluvio cleanup policy for a retention (whole seconds, clamped to what Fluvio stores).
pub(crate) fn cleanup_policy(retention: Duration) -> CleanupPolicy {
    let seconds = u32::try_from(retention.as_secs()).unwrap_or(u32::MAX);
    CleanupPolicy::Segment(SegmentBasedPolicy {
        time_in_seconds: seconds.max(MIN_RETENTION.as_secs() as u32),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_units() {
        let parse = |v| parse_retention("PHOTON_FLUVIO_RETENTION", v);
        assert_eq!(parse("7d").unwrap(), DEFAULT_RETENTION);
        assert_eq!(parse("3600s").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("12h").unwrap(), Duration::from_secs(43_200));
        assert_eq!(parse("30m").unwrap(), Duration::from_secs(1800));
    }

    #[test]
    fn bad_retention_names_the_variable() {
        for bad in ["", "7", "d", "5s", "1w", "-1d", "99999999999d", "1.5h"] {
            let err = parse_retention("PHOTON_FLUVIO_RETENTION", bad).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("PHOTON_FLUVIO_RETENTION"), "{text}");
            assert!(text.contains("7d"), "{text}");
        }
    }

    #[test]
    fn policy_in_seconds() {
        assert_eq!(cleanup_policy(DEFAULT_RETENTION).retention_secs(), 604_800);
    }
}
