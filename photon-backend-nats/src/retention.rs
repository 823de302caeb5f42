//! Retention: the limits every event stream is created with, and `truncate_before`.

use std::time::Duration;

use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use photon_core::Result;

use crate::codec::first_stream_seq_after;
use crate::config::NatsConfig;
use crate::error::unavailable;
use crate::port::NatsStoragePort;

/// How long the server remembers a `Nats-Msg-Id` to drop a retried publish.
pub(crate) const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// Settings shared by every event stream (name and subjects are filled in per stream).
///
/// File storage, limits retention with the configured max age and bytes (oldest events
/// are discarded first), direct gets allowed (for `get_record`), a two-minute
/// deduplication window.
pub(crate) fn stream_template(config: &NatsConfig) -> stream::Config {
    stream::Config {
        storage: StorageType::File,
        num_replicas: config.replicas,
        retention: RetentionPolicy::Limits,
        discard: DiscardPolicy::Old,
        max_age: config.retention_max_age.unwrap_or_default(),
        // Zero, like unset, means no limit (JetStream's -1).
        max_bytes: config
            .retention_max_bytes
            .filter(|bytes| *bytes > 0)
            .and_then(|bytes| i64::try_from(bytes).ok())
            .unwrap_or(-1),
        max_messages: -1,
        max_messages_per_subject: -1,
        allow_direct: true,
        duplicate_window: DUPLICATE_WINDOW,
        ..stream::Config::default()
    }
}

/// Settings of dead-letter topic streams (`*.dlq`): the event template without age and
/// size limits, unless `retention_dead_letters` applies them.
pub(crate) fn dead_letter_template(config: &NatsConfig) -> stream::Config {
    let template = stream_template(config);
    if config.retention_dead_letters {
        template
    } else {
        stream::Config {
            max_age: Duration::ZERO,
            max_bytes: -1,
            ..template
        }
    }
}

impl NatsStoragePort {
    /// Purges, in every shard of `topic`, the messages whose seq is below `before_seq`.
    pub(crate) async fn purge_before(&self, topic: &str, before_seq: i64) -> Result<u64> {
        let names = &self.inner.names;
        let mut purged = 0;
        for (shard, stream) in self.topic_streams(topic).await? {
            let keep_from =
                first_stream_seq_after(before_seq.saturating_sub(1), shard, names.shards());
            // Nothing lies below the first position; and the server reads a purge up to
            // sequence 1 as a purge of the whole stream.
            if keep_from <= 1 {
                continue;
            }
            let response = stream
                .purge()
                .sequence(keep_from)
                .await
                .map_err(|err| unavailable(format!("cannot truncate topic {topic:?}"), err))?;
            purged += response.purged;
        }
        Ok(purged)
    }
}
