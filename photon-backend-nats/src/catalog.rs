//! The listing of this prefix's topics (from its stream names) and durable checkpoints
//! (from the checkpoint stream's subjects); both names map back without loss.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};
use photon_core::{CheckpointKey, Result, StoragePort, StoredCheckpoint, TopicInfo};

use crate::error::unavailable;
use crate::port::NatsStoragePort;

impl NatsStoragePort {
    /// Every topic with a stream of this prefix, sorted by name: head, events and bytes
    /// summed over its shards.
    pub(crate) async fn topics(&self) -> Result<Vec<TopicInfo>> {
        let mut streams = self.jetstream().streams();
        let mut topics: BTreeMap<String, TopicInfo> = BTreeMap::new();
        while let Some(info) = streams.next().await {
            let info = info.map_err(|err| unavailable("cannot list streams", err))?;
            let Some((name, _shard)) = self.inner.names.topic_of_stream(&info.config.name) else {
                continue;
            };
            let topic = topics.entry(name.clone()).or_insert_with(|| TopicInfo {
                name,
                head_seq: None,
                events: Some(0),
                bytes: Some(0),
                shards: 0,
            });
            topic.shards += 1;
            topic.events = topic.events.map(|n| n + info.state.messages);
            topic.bytes = topic.bytes.map(|n| n + info.state.bytes);
        }
        let mut listed = Vec::with_capacity(topics.len());
        for (name, mut topic) in topics {
            topic.head_seq = self.head_seq(&name, None).await?;
            listed.push(topic);
        }
        Ok(listed)
    }

    /// Every durable checkpoint of this prefix, as `load_checkpoint` reads it (the lowest
    /// shard position), sorted by subscription, topic and key.
    pub(crate) async fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        let names = &self.inner.names;
        let stream = self.checkpoint_stream().await?;
        let subjects: Vec<(String, usize)> = stream
            .info_with_subjects(names.checkpoint_subjects())
            .await
            .map_err(|err| unavailable("cannot list checkpoint subjects", err))?
            .try_collect()
            .await
            .map_err(|err| unavailable("cannot list checkpoint subjects", err))?;
        let keys: BTreeSet<CheckpointKey> = subjects
            .iter()
            .filter_map(|(subject, _)| names.checkpoint_of_subject(subject))
            .map(|(key, _shard)| key)
            .collect();
        StoredCheckpoint::load_each(self, keys).await
    }
}
