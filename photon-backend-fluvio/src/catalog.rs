//! The catalog: topics and checkpoints as an operator lists them.
//!
//! - Topics come from the cluster's layout records ([`crate::layout`]): every Photon topic a
//!   port of this prefix ever used is recorded there with its shard count, including
//!   dead-letter topics. A topic's head is the highest seq over its shards, read from each
//!   shard's end offset (exact, like a subscription sees it); its size is the sum of the
//!   partitions' sizes as the cluster last reported them (Fluvio's controller refreshes
//!   that figure periodically, so it can trail the newest writes). Fluvio does not tell how
//!   many records retention has removed, so the event count is left unknown.
//! - Checkpoints are the checkpoint topic's state, each one as `load_checkpoint` reads it.

use std::collections::HashMap;

use fluvio::metadata::partition::PartitionSpec;
use fluvio::Fluvio;
use photon_core::{Result, StoredCheckpoint, TopicInfo};

use crate::error::unavailable;
use crate::port::FluvioStoragePort;
use crate::query::end_offset;
use crate::stream_shard::seq_of;
use crate::topic::fluvio_topic_name;

/// What the controller last reported of one partition.
struct PartitionReport {
    size: Option<u64>,
}

impl FluvioStoragePort {
    /// Every topic of this port's prefix, by name.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unavailable`] when the cluster cannot be read.
    pub(crate) async fn catalog_topics(&self) -> Result<Vec<TopicInfo>> {
        let fluvio = self.inner.fluvio();
        let recorded = self
            .inner
            .layouts
            .recorded(&fluvio, &self.inner.config)
            .await?;
        let reports = partition_reports(&fluvio).await?;
        let mut topics = Vec::with_capacity(recorded.len());
        for (topic, shards) in recorded {
            let mut head_seq = None;
            let mut bytes = Some(0u64);
            for shard in 0..shards {
                let name = fluvio_topic_name(&self.inner.config.prefix, &topic, shard, shards);
                // A topic is recorded before its first append creates the Fluvio topics.
                let Some(report) = reports.get(&name) else {
                    continue;
                };
                bytes = bytes.zip(report.size).map(|(sum, size)| sum + size);
                let end = end_offset(&fluvio, &name).await?;
                if end > 0 {
                    head_seq = head_seq.max(Some(seq_of(end - 1, shard, shards)));
                }
            }
            topics.push(TopicInfo {
                name: topic,
                head_seq,
                events: None,
                bytes,
                shards,
            });
        }
        Ok(topics)
    }

    /// Every checkpoint of this port's prefix, each as `load_checkpoint` reads it, ordered
    /// by subscription, topic and key.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unavailable`] when the checkpoint topics cannot be read.
    pub(crate) async fn catalog_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        let keys = self
            .inner
            .checkpoints
            .keys(&self.checkpoint_context())
            .await?;
        StoredCheckpoint::load_each(self, keys).await
    }
}

/// Partition 0 of every Fluvio topic, by topic name (Photon topics have one partition).
async fn partition_reports(fluvio: &Fluvio) -> Result<HashMap<String, PartitionReport>> {
    let partitions = fluvio
        .admin()
        .await
        .all::<PartitionSpec>()
        .await
        .map_err(|e| unavailable("cannot list the cluster's partitions".into(), e))?;
    Ok(partitions
        .into_iter()
        .filter_map(|partition| {
            let topic = partition.name.strip_suffix("-0")?.to_owned();
            let size = u64::try_from(partition.status.size).ok();
            Some((topic, PartitionReport { size }))
        })
        .collect())
}
