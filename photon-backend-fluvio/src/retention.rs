//! Retention of the Fluvio topics Photon creates.
//!
//! Fluvio has no compaction and no per-record deletion: old segments go once they are older
//! than the topic's retention (`RETENTION_MAX_AGE_ENV` or `RETENTION_ENV`, default 7 days,
//! at least 10 s). The active segment is never removed, so a small topic keeps everything.
//! `truncate_before` is not offered. Dead-letter topics (`*.dlq`, and those marked by
//! `declare_dead_letter_topic` before they exist) are created with
//! [`DEAD_LETTER_RETENTION`], unless `retention_dead_letters` is on (then they age like
//! every topic); Fluvio cannot change an existing topic's retention.

use std::borrow::Cow;
use std::time::Duration;

use fluvio::metadata::topic::{CleanupPolicy, SegmentBasedPolicy};

use fluvio::metadata::topic::TopicSpec;
use photon_core::{PhotonError, Result};

use crate::config::FluvioConfig;
use crate::error::unavailable;
use crate::port::FluvioStoragePort;
use crate::topic::{ensure_topic, fluvio_topic_name};

/// Default retention: 7 days, Fluvio's own default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Shortest retention Fluvio accepts.
pub const MIN_RETENTION: Duration = Duration::from_secs(10);

/// Retention of dead-letter topics: the longest Fluvio stores (`u32::MAX` seconds, about
/// 136 years), so that a dead letter stays until someone deals with it.
pub const DEAD_LETTER_RETENTION: Duration = Duration::from_secs(u32::MAX as u64);

/// The configuration a Photon topic's Fluvio topics are created with: a dead-letter topic
/// (`*.dlq`, or any topic when `dead_letters` says so) gets [`DEAD_LETTER_RETENTION`]
/// unless the port's `retention_dead_letters` is on.
pub(crate) fn topic_config<'a>(
    config: &'a FluvioConfig,
    topic: &str,
    dead_letters: bool,
) -> Cow<'a, FluvioConfig> {
    let dead_letters = dead_letters || photon_core::is_dead_letter_topic(topic);
    if dead_letters && !config.retention_dead_letters {
        Cow::Owned(FluvioConfig {
            retention_max_age: DEAD_LETTER_RETENTION,
            ..config.clone()
        })
    } else {
        Cow::Borrowed(config)
    }
}

/// The Fluvio cleanup policy for a retention (whole seconds, clamped to what Fluvio stores).
pub(crate) fn cleanup_policy(retention: Duration) -> CleanupPolicy {
    let seconds = u32::try_from(retention.as_secs()).unwrap_or(u32::MAX);
    CleanupPolicy::Segment(SegmentBasedPolicy {
        time_in_seconds: seconds.max(MIN_RETENTION.as_secs() as u32),
    })
}

impl FluvioStoragePort {
    /// Creates the Fluvio topics of dead-letter topic `topic` with
    /// [`DEAD_LETTER_RETENTION`] where they are missing.
    ///
    /// # Errors
    /// [`PhotonError::Config`] when one exists with a shorter retention (Fluvio cannot
    /// change it: the topic must be deleted, or its letters go with its retention);
    /// [`PhotonError::Unavailable`] when the cluster cannot be reached.
    pub(crate) async fn keep_dead_letters(&self, topic: &str) -> Result<()> {
        let inner = &self.inner;
        if inner.config.retention_dead_letters {
            // The user lets dead letters age: nothing to keep.
            return Ok(());
        }
        let shards = inner.config.shards;
        let config = topic_config(&inner.config, topic, true);
        for shard in 0..shards {
            let name = fluvio_topic_name(&inner.config.prefix, topic, shard, shards);
            if ensure_topic(&inner.fluvio(), &config, &name).await? {
                continue;
            }
            let admin = inner.fluvio().admin().await;
            let listed = admin
                .list::<TopicSpec, String>(vec![name.clone()])
                .await
                .map_err(|e| unavailable(format!("cannot list topic {name}"), e))?;
            let retention = listed
                .iter()
                .find(|listed| listed.name == name)
                .map_or(u32::MAX, |listed| listed.spec.retention_secs());
            if u64::from(retention) < DEAD_LETTER_RETENTION.as_secs() {
                return Err(PhotonError::config(
                    "dead_letter_suffix",
                    topic,
                    format!(
                        "a dead-letter topic whose letters are kept, but Fluvio topic {name} \
                         exists with a retention of {retention} s and Fluvio cannot change it"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_in_seconds() {
        assert_eq!(cleanup_policy(DEFAULT_RETENTION).retention_secs(), 604_800);
    }

    #[test]
    fn dead_letters_are_kept_unless_the_user_lets_them_age() {
        let kept = FluvioConfig::default();
        assert_eq!(
            topic_config(&kept, "orders.dlq", false).retention_max_age,
            DEAD_LETTER_RETENTION
        );
        assert_eq!(
            topic_config(&kept, "orders.failed", true).retention_max_age,
            DEAD_LETTER_RETENTION
        );
        assert_eq!(
            topic_config(&kept, "orders", false).retention_max_age,
            DEFAULT_RETENTION
        );
        let aging = FluvioConfig {
            retention_dead_letters: true,
            ..FluvioConfig::default()
        };
        assert_eq!(
            topic_config(&aging, "orders.dlq", false).retention_max_age,
            DEFAULT_RETENTION
        );
        assert_eq!(
            topic_config(&aging, "orders.failed", true).retention_max_age,
            DEFAULT_RETENTION
        );
    }
}
