//! Checkpoints in the topic `{prefix}-checkpoints`, with snapshots.
//!
//! - A commit appends `{subscription, topic, key, shard, seq}` (record key: the same
//!   identity). On sharded topics the shard comes from the seq, so every shard keeps its
//!   own position and a durable subscription resumes each shard from its own.
//! - Reading takes the maximum per entry: a stale lower write (a racing second writer, a
//!   retried commit) can never lower a checkpoint.
//! - Fluvio has no compaction. Once the commits since the last snapshot reach
//!   max([`SNAPSHOT_EVERY`], half the live checkpoints), a port reads the topic to its end
//!   and writes every live checkpoint to `{prefix}-checkpoints-snapshot`: as parts of at
//!   most [`snapshot::PART_BYTES`] each (one record of everything would pass the 1 MiB
//!   produce limit past about 10k checkpoints), then a manifest naming the offsets of its
//!   parts and the commit offset it covers (the format and its reading are shared with the
//!   group coordination log: [`crate::snapshot`]). Loading finds the newest manifest near
//!   the end of the snapshot topic, reads its parts, then only the commits after it. So a load reads at
//!   most about twice the live checkpoints (the snapshot, then up to half as many commits
//!   per writing port), whatever the number of commits ever made, and each record stays
//!   far below the produce limit.
//! - Network I/O never happens under the state lock: commits and loads by other tasks go
//!   on while one waits for the cluster. Loads are serialized among themselves, and one
//!   snapshot is written at a time (a commit that finds one in progress skips it).
//! - A load that cannot read up to the end offset it saw fails; it never returns a partial
//!   state.
//! - Durable consumers also store their position as a Fluvio consumer offset (id from
//!   [`crate::durable_consumer_name`]) so Fluvio tools show them; see [`crate::consumer`].
//!   The checkpoint topic is authoritative for `load_checkpoint`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use fluvio::Fluvio;
use photon_core::{CheckpointKey, PhotonError, Result};
use serde::{Deserialize, Serialize};

use crate::config::FluvioConfig;
use crate::query::{end_offset, read_range};
use crate::snapshot;
use crate::stream_shard::shard_of_seq;
use crate::topic::{checkpoints_topic_name, snapshot_topic_name, OpenProducer, Topics};

/// Fewest commits between two snapshots.
pub(crate) const SNAPSHOT_EVERY: usize = 256;

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

#[derive(Debug, Default)]
struct State {
    values: HashMap<Entry, i64>,
    /// Commits below this offset are folded into `values`.
    read_through: i64,
    snapshot_read: bool,
    /// The commit offset the newest known snapshot covers.
    snapshot_covers: i64,
    /// Commits this port made since it last wrote a snapshot.
    since_snapshot: usize,
}

impl State {
    fn raise(&mut self, entry: Entry, seq: i64) {
        raise(&mut self.values, entry, seq);
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

    /// Whether enough commits piled up since the newest snapshot to write another.
    fn wants_snapshot(&self) -> bool {
        let unsnapshotted = usize::try_from(self.read_through - self.snapshot_covers)
            .unwrap_or(0)
            .max(self.since_snapshot);
        unsnapshotted >= SNAPSHOT_EVERY.max(self.values.len() / 2)
    }
}

fn raise(values: &mut HashMap<Entry, i64>, entry: Entry, seq: i64) {
    let value = values.entry(entry).or_insert(seq);
    *value = (*value).max(seq);
}

/// The checkpoint store of one port.
#[derive(Debug, Default)]
pub(crate) struct Checkpoints {
    /// Only map operations happen under this lock, never I/O.
    state: Mutex<State>,
    /// Serializes loads (each reads from where the previous one stopped).
    loading: tokio::sync::Mutex<()>,
    /// Held while a snapshot is written.
    snapshotting: tokio::sync::Mutex<()>,
}

/// What the store needs from its port.
pub(crate) struct Context<'a> {
    pub(crate) fluvio: std::sync::Arc<Fluvio>,
    pub(crate) config: &'a FluvioConfig,
    pub(crate) topics: &'a Topics,
}

impl Checkpoints {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stored positions of a checkpoint by shard, read up to the current end.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the topics cannot be read to their end.
    pub(crate) async fn positions(
        &self,
        cx: &Context<'_>,
        key: &CheckpointKey,
    ) -> Result<BTreeMap<u32, i64>> {
        self.refresh(cx).await?;
        Ok(self.state().positions(key))
    }

    /// Every stored checkpoint, ordered by subscription, topic and key, read up to the
    /// current end.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the topics cannot be read to their end.
    pub(crate) async fn keys(&self, cx: &Context<'_>) -> Result<BTreeSet<CheckpointKey>> {
        self.refresh(cx).await?;
        Ok(self
            .state()
            .values
            .keys()
            .map(|entry| {
                CheckpointKey::new(&entry.subscription, &entry.topic, entry.key.as_deref())
            })
            .collect())
    }

    /// Commits `seq` unless the position of its shard is already as high.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the commit is not acknowledged.
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
            shard: shard_of_seq(seq, cx.config.shards),
        };
        if self
            .state()
            .values
            .get(&entry)
            .is_some_and(|stored| *stored >= seq)
        {
            return Ok(false);
        }
        let name = checkpoints_topic_name(&cx.config.prefix);
        let open = producer(cx, &name).await?;
        let record_key =
            serde_json::to_vec(&entry).map_err(|e| PhotonError::codec("checkpoint key", e))?;
        let value = serde_json::to_vec(&Commit {
            entry: entry.clone(),
            seq,
        })
        .map_err(|e| PhotonError::codec("checkpoint", e))?;
        if let Err(err) = snapshot::send(&open.producer, &name, record_key, value).await {
            cx.topics.forget(&name);
            return Err(err);
        }
        let wants_snapshot = {
            let mut state = self.state();
            state.raise(entry, seq);
            state.since_snapshot += 1;
            state.wants_snapshot()
        };
        if wants_snapshot {
            if let Ok(_one_writer) = self.snapshotting.try_lock() {
                // The commit itself is stored: a failed snapshot only means a longer load
                // until the next one succeeds.
                if let Err(err) = self.write_snapshot(cx).await {
                    tracing::warn!(port = "fluvio", %err, "checkpoint snapshot not written");
                }
            }
        }
        Ok(true)
    }

    /// Folds the newest snapshot (once) and every commit up to the current end into the
    /// state.
    async fn refresh(&self, cx: &Context<'_>) -> Result<()> {
        let _one_load = self.loading.lock().await;
        let (snapshot_read, mut from) = {
            let state = self.state();
            (state.snapshot_read, state.read_through)
        };
        let mut found = HashMap::new();
        let mut covers = None;
        if !snapshot_read {
            let name = snapshot_topic_name(&cx.config.prefix);
            if let Some(loaded) = snapshot::load::<(Entry, i64)>(&cx.fluvio, &name).await? {
                for (entry, seq) in loaded.entries {
                    raise(&mut found, entry, seq);
                }
                from = from.max(loaded.covers_through);
                covers = Some(loaded.covers_through);
            }
        }
        let name = checkpoints_topic_name(&cx.config.prefix);
        let end = end_offset(&cx.fluvio, &name).await?;
        let mut malformed = None;
        read_range(
            &cx.fluvio,
            &name,
            from,
            end,
            |record| match serde_json::from_slice::<Commit>(record.value()) {
                Ok(commit) => raise(&mut found, commit.entry, commit.seq),
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
        let mut state = self.state();
        for (entry, seq) in found {
            state.raise(entry, seq);
        }
        state.read_through = state.read_through.max(end);
        state.snapshot_read = true;
        if let Some(covers) = covers {
            state.snapshot_covers = state.snapshot_covers.max(covers);
        }
        Ok(())
    }

    /// Reads to the end (so other writers' commits are included) and writes a snapshot in
    /// parts, then its manifest.
    async fn write_snapshot(&self, cx: &Context<'_>) -> Result<()> {
        self.refresh(cx).await?;
        let (covers_through, entries) = {
            let state = self.state();
            let entries: Vec<(Entry, i64)> =
                state.values.iter().map(|(e, s)| (e.clone(), *s)).collect();
            (state.read_through, entries)
        };
        let name = snapshot_topic_name(&cx.config.prefix);
        let open = producer(cx, &name).await?;
        let parts = snapshot::parts_of(&entries, "checkpoint snapshot part")?;
        snapshot::write(&open.producer, cx.topics, &name, covers_through, parts).await?;
        let mut state = self.state();
        state.since_snapshot = 0;
        state.snapshot_covers = state.snapshot_covers.max(covers_through);
        Ok(())
    }
}

/// The producer of `name` on the context's client: one opened on a client that was
/// replaced since (the stream connection after an SPU restart) is dropped and reopened.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the producer cannot be opened.
async fn producer(cx: &Context<'_>, name: &str) -> Result<std::sync::Arc<OpenProducer>> {
    let open = cx
        .topics
        .producer(|| cx.fluvio.clone(), cx.config, name)
        .await?;
    if std::sync::Arc::ptr_eq(&open.client, &cx.fluvio) {
        return Ok(open);
    }
    cx.topics.forget(name);
    cx.topics
        .producer(|| cx.fluvio.clone(), cx.config, name)
        .await
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
    fn snapshots_of_earlier_versions_still_read() {
        // A snapshot written by earlier versions: one record of everything.
        let whole = br#"{"covers_through":3,"entries":[[{"subscription":"s","topic":"t","key":null,"shard":0},5]]}"#;
        match serde_json::from_slice(whole).unwrap() {
            snapshot::SnapshotRecord::<(Entry, i64)>::Whole {
                covers_through,
                entries,
            } => {
                assert_eq!(covers_through, 3);
                assert_eq!(entries[0].1, 5);
            }
            other => panic!("not a whole snapshot: {other:?}"),
        }
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
