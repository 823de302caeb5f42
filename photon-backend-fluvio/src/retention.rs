//! Retention of the Fluvio topics Photon creates.
//!
//! Fluvio has no compaction and no per-record deletion: old segments go once they are older
//! than the topic's retention (`RETENTION_MAX_AGE_ENV` or `RETENTION_ENV`, default 7 days,
//! at least 10 s). The active segment is never removed, so a small topic keeps everything.
//! `truncate_before` is not offered.

use std::time::Duration;

use fluvio::metadata::topic::{CleanupPolicy, SegmentBasedPolicy};

/// Default retention: 7 days, Fluvio's own default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Shortest retention Fluvio accepts.
pub const MIN_RETENTION: Duration = Duration::from_secs(10);

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
    fn policy_in_seconds() {
        assert_eq!(cleanup_policy(DEFAULT_RETENTION).retention_secs(), 604_800);
    }
}
