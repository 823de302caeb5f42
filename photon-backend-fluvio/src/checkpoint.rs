//! Checkpoints in the topic `{prefix}-checkpoints`, with snapshots.
//!
//! - A commit appends `{subscription, topic, key, shard, seq}` (record key: the same
//!   identity). On sharded topics the shard comes from the seq, so every shard keeps its
//!   own position and a durable subscription resumes each shard from its own.
//! - Reading takes the maximum per entry: a stale lower write (a racing second writer, a
//!   retried commit) can never lower a checkpoint.
//! - Fluvio has no compaction. Every [`SNAPSHOT_EVERY`] commits a port reads the topic to
//!   its end and writes every live checkpoint, with the offset it read through, to
//!   `{prefix}-checkpoints-snapshot`. Loading reads the newest snapshot (`Offset::from_end(1)`)
//!   and then only the commits after it: load time follows the number of live checkpoints
//!   and of recent commits, not of all commits ever made. Segment retention removes old
//!   commits; the active segment of each topic always stays.
//! - A load that cannot read up to the end offset it saw fails; it never returns a partial
//!   state.
//! - Durable consumers also store their position as a Fluvio consumer offset (id from
//!   [`crate::durable_consumer_name`]) so Fluvio tools show them; see [`crate::consumer`].
//!   The checkpoint topic is authoritative for `load_checkpoint`.

use std::collections::{BTreeMap, HashMap};

use fluvio::{Fluvio, RecordKey, TopicProducerPool};
use photon_core::{CheckpointKey, PhotonError, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::config::FluvioConfig;
use crate::fetch::{end_offset, read_range, record_at};
use crate::stream_shard::shard_of_seq;
use crate::topic::{checkpoints_topic_name, snapshot_topic_name, unavailable, Topics};

/// Commits between two snapshots.
pub(crate) const SNAPSHOT_EVERY: u32 = 256;

/// One stored position: a checkpoint and a shard.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Entry {
    subscription: String,
    topic: String,
    key: Option<String>,
    shard: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Commit {
    #[serde(flatten)]
    entry: Entry,
    seq: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    /// Every commit below this offset of the checkpoints topic is included.
    covers_through: i64,
    entries: Vec<(Entry, i64)>,
}

#[derive(Debug, Default)]
struct State {
    values: HashMap<Entry, i64>,
    /// Commits below this offset are folded into `values`.
    read_through: i64,
    snapshot_read: bool,
    since_snapshot: u32,
}

impl State {
    fn raise(&mut self, entry: Entry, seq: i64) {
        let value = self.values.entry(entry).or_insert(seq);
        *value = (*value).max(seq);
    }

    fn positions(&self, key: &CheckpointKey) -> BTreeMap<u32, i64> {
        self.values
            .iter()
            .filter(|(e, _)| {
                e.subscription == key.subscription && e.topic == key.topic && e.key == key.key
            })
            .map(|(e, seq)| (e.shard, *seq))
            .collect()
    }
}

/// The checkpoint store of one port.
#[derive(Debug, Default)]
pub(crate) struct Checkpoints {
    state: Mutex<State>,
}

/// What the store needs from its port.
pub(crate) struct Context<'a> {
    pub(crate) fluvio: std::sync::Arc<Fluvio>,
    pub(crate) config: &'a FluvioConfig,
    pub(crate) topics: &'a Topics,
}

impl Checkpoints {
    /// Stored positions of a checkpoint by shard, read up to the current end.
    pub(crate) async fn positions(
        &self,
        cx: &Context<'_>,
        key: &CheckpointKey,
    ) -> Result<BTreeMap<u32, i64>> {
        let mut state = self.state.lock().await;
        refresh(cx, &mut state).await?;
        Ok(state.positions(key))
    }

    /// Commits `seq` unless the position of its shard is already as high.
    pub(crate) async fn commit(
        &self,
        cx: &Context<'_>,
        key: &CheckpointKey,
        seq: i64,
    ) -> Result<bool> {
        let entry = Entry {
            subscription: key.subscription.clone(),
            topic: key.topic.clone(),
            key: key.key.clone(),
            shard: shard_of_seq(seq, cx.config.topic_shards),
        };
        let mut state = self.state.lock().await;
        if state
            .values
            .get(&entry)
            .is_some_and(|stored| *stored >= seq)
        {
            return Ok(false);
        }
        let name = checkpoints_topic_name(&cx.config.prefix);
        let open = cx
            .topics
            .producer(|| cx.fluvio.clone(), cx.config, &name)
            .await?;
        let record_key =
            serde_json::to_vec(&entry).map_err(|e| PhotonError::codec("checkpoint key", e))?;
        let value = serde_json::to_vec(&Commit {
            entry: entry.clone(),
            seq,
        })
        .map_err(|e| PhotonError::codec("checkpoint", e))?;
        if let Err(err) = send(&open.producer, &name, record_key, value).await {
            cx.topics.forget(&name);
            return Err(err);
        }
        state.raise(entry, seq);
        state.since_snapshot += 1;
        if state.since_snapshot >= SNAPSHOT_EVERY {
            write_snapshot(cx, &mut state).await?;
        }
        Ok(true)
    }
}

async fn send(
    producer: &TopicProducerPool,
    name: &str,
    key: Vec<u8>,
    value: Vec<u8>,
) -> Result<()> {
    let acked = match producer.send(RecordKey::from(key), value).await {
        Ok(output) => output.wait().await.map(|_| ()).map_err(anyhow::Error::from),
        Err(err) => Err(err),
    };
    if let Err(err) = acked {
        producer.clear_errors().await;
        return Err(unavailable(format!("cannot write to {name}"), err));
    }
    Ok(())
}

/// Folds the newest snapshot (once) and every commit up to the current end into `state`.
async fn refresh(cx: &Context<'_>, state: &mut State) -> Result<()> {
    if !state.snapshot_read {
        let name = snapshot_topic_name(&cx.config.prefix);
        let end = end_offset(&cx.fluvio, &name).await?;
        if end > 0 {
            let record = record_at(&cx.fluvio, &name, end - 1)
                .await?
                .ok_or_else(|| PhotonError::Unavailable {
                    backend: "fluvio",
                    message: format!("snapshot {name}@{} vanished while loading", end - 1),
                    source: None,
                })?;
            let snapshot: Snapshot = serde_json::from_slice(record.value()).map_err(|e| {
                PhotonError::codec(format!("checkpoint snapshot {name}@{}", end - 1), e)
            })?;
            for (entry, seq) in snapshot.entries {
                state.raise(entry, seq);
            }
            state.read_through = state.read_through.max(snapshot.covers_through);
        }
        state.snapshot_read = true;
    }
    let name = checkpoints_topic_name(&cx.config.prefix);
    let end = end_offset(&cx.fluvio, &name).await?;
    let mut malformed = None;
    read_range(
        &cx.fluvio,
        &name,
        state.read_through,
        end,
        |record| match serde_json::from_slice::<Commit>(record.value()) {
            Ok(commit) => state.raise(commit.entry, commit.seq),
            Err(err) => malformed = Some((record.offset(), err)),
        },
    )
    .await?;
    if let Some((offset, err)) = malformed {
        return Err(PhotonError::codec(
            format!("checkpoint {name}@{offset}"),
            err,
        ));
    }
    state.read_through = state.read_through.max(end);
    Ok(())
}

/// Reads to the end (so other writers' commits are included) and writes a snapshot.
async fn write_snapshot(cx: &Context<'_>, state: &mut State) -> Result<()> {
    refresh(cx, state).await?;
    let snapshot = Snapshot {
        covers_through: state.read_through,
        entries: state.values.iter().map(|(e, s)| (e.clone(), *s)).collect(),
    };
    let name = snapshot_topic_name(&cx.config.prefix);
    let value =
        serde_json::to_vec(&snapshot).map_err(|e| PhotonError::codec("checkpoint snapshot", e))?;
    let open = cx
        .topics
        .producer(|| cx.fluvio.clone(), cx.config, &name)
        .await?;
    if let Err(err) = send(&open.producer, &name, b"snapshot".to_vec(), value).await {
        cx.topics.forget(&name);
        return Err(err);
    }
    state.since_snapshot = 0;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_per_entry_never_regresses() {
        let mut state = State::default();
        let entry = |shard| Entry {
            subscription: "s".into(),
            topic: "t".into(),
            key: None,
            shard,
        };
        state.raise(entry(0), 10);
        state.raise(entry(0), 7);
        state.raise(entry(1), 3);
        let key = CheckpointKey::new("s", "t", None);
        assert_eq!(state.positions(&key), BTreeMap::from([(0, 10), (1, 3)]));
        assert!(state
            .positions(&CheckpointKey::new("s", "t", Some("k")))
            .is_empty());
    }

    #[test]
    fn commit_records_round_trip() {
        let commit = Commit {
            entry: Entry {
                subscription: "s".into(),
                topic: "a.b".into(),
                key: Some("k".into()),
                shard: 2,
            },
            seq: 42,
        };
        let back: Commit = serde_json::from_slice(&serde_json::to_vec(&commit).unwrap()).unwrap();
        assert_eq!(back.entry, commit.entry);
        assert_eq!(back.seq, 42);
    }
}
