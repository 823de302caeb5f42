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
//!   most [`PART_BYTES`] each (one record of everything would pass the 1 MiB produce limit
//!   past about 10k checkpoints), then a manifest naming the offsets of its parts and the
//!   commit offset it covers. Loading finds the newest manifest near the end of the
//!   snapshot topic, reads its parts, then only the commits after it. So a load reads at
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use fluvio::{Fluvio, RecordKey, TopicProducerPool};
use photon_core::{CheckpointKey, PhotonError, Result};
use serde::{Deserialize, Serialize};

use crate::config::FluvioConfig;
use crate::error::unavailable;
use crate::query::{end_offset, read_range};
use crate::stream_shard::shard_of_seq;
use crate::topic::{checkpoints_topic_name, snapshot_topic_name, OpenProducer, Topics};

/// Fewest commits between two snapshots.
pub(crate) const SNAPSHOT_EVERY: usize = 256;

/// Largest snapshot part (serialized entries), well below the produce limit.
pub(crate) const PART_BYTES: usize = 256 * 1024;

/// Records at the end of the snapshot topic searched for a manifest first (doubled until
/// one is found): parts of snapshots written at the same time by other ports can lie
/// between a manifest and the end.
const MANIFEST_SEARCH: i64 = 64;

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

/// A record of the snapshot topic.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum SnapshotRecord {
    /// Ends a snapshot: its parts, and the commit offset below which it holds everything.
    Manifest {
        covers_through: i64,
        parts: Vec<i64>,
    },
    /// A whole snapshot in one record (written by earlier versions).
    Whole {
        covers_through: i64,
        entries: Vec<(Entry, i64)>,
    },
    /// Some entries of a snapshot.
    Part { entries: Vec<(Entry, i64)> },
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
        if let Err(err) = send(&open.producer, &name, record_key, value).await {
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
            if let Some(covers_through) = load_snapshot(cx, &mut found).await? {
                from = from.max(covers_through);
                covers = Some(covers_through);
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
        let mut parts = Vec::new();
        for chunk in parts_of(&entries)? {
            match send(&open.producer, &name, b"snapshot-part".to_vec(), chunk).await {
                Ok(offset) => parts.push(offset),
                Err(err) => {
                    cx.topics.forget(&name);
                    return Err(err);
                }
            }
        }
        let manifest = serde_json::to_vec(&SnapshotRecord::Manifest {
            covers_through,
            parts,
        })
        .map_err(|e| PhotonError::codec("checkpoint snapshot manifest", e))?;
        if let Err(err) = send(&open.producer, &name, b"snapshot".to_vec(), manifest).await {
            cx.topics.forget(&name);
            return Err(err);
        }
        let mut state = self.state();
        state.since_snapshot = 0;
        state.snapshot_covers = state.snapshot_covers.max(covers_through);
        Ok(())
    }
}

/// Serialized parts of at most [`PART_BYTES`] of entries each (one entry may exceed it
/// alone: names are bounded, so it stays far below the produce limit).
fn parts_of(entries: &[(Entry, i64)]) -> Result<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    let mut part: Vec<&(Entry, i64)> = Vec::new();
    let mut bytes = 0;
    let encode = |part: &[&(Entry, i64)]| {
        let entries: Vec<(Entry, i64)> = part.iter().map(|e| (*e).clone()).collect();
        serde_json::to_vec(&SnapshotRecord::Part { entries })
            .map_err(|e| PhotonError::codec("checkpoint snapshot part", e))
    };
    for entry in entries {
        // Bytes of the entry in JSON, near enough: names plus the fixed fields.
        let size = entry.0.subscription.len()
            + entry.0.topic.len()
            + entry.0.key.as_ref().map_or(4, String::len)
            + 80;
        if bytes + size > PART_BYTES && !part.is_empty() {
            parts.push(encode(&part)?);
            part.clear();
            bytes = 0;
        }
        part.push(entry);
        bytes += size;
    }
    if !part.is_empty() {
        parts.push(encode(&part)?);
    }
    Ok(parts)
}

/// Reads the newest complete snapshot into `values`; returns the commit offset it covers.
async fn load_snapshot(cx: &Context<'_>, values: &mut HashMap<Entry, i64>) -> Result<Option<i64>> {
    let name = snapshot_topic_name(&cx.config.prefix);
    let end = end_offset(&cx.fluvio, &name).await?;
    if end == 0 {
        return Ok(None);
    }
    let malformed = |offset: i64, err: serde_json::Error| {
        PhotonError::codec(format!("checkpoint snapshot {name}@{offset}"), err)
    };
    // The newest manifest (or whole snapshot), searching back from the end.
    let mut window = MANIFEST_SEARCH;
    let newest = loop {
        let from = (end - window).max(0);
        let mut newest = None;
        let mut error = None;
        read_range(
            &cx.fluvio,
            &name,
            from,
            end,
            |record| match serde_json::from_slice::<SnapshotRecord>(record.value()) {
                Ok(SnapshotRecord::Part { .. }) => {}
                Ok(whole_or_manifest) => newest = Some((record.offset(), whole_or_manifest)),
                Err(err) => error = Some(malformed(record.offset(), err)),
            },
        )
        .await?;
        if let Some(err) = error {
            return Err(err);
        }
        if newest.is_some() || from == 0 {
            break newest;
        }
        window *= 2;
    };
    match newest {
        None => Ok(None),
        Some((
            _,
            SnapshotRecord::Whole {
                covers_through,
                entries,
            },
        )) => {
            for (entry, seq) in entries {
                raise(values, entry, seq);
            }
            Ok(Some(covers_through))
        }
        Some((
            _,
            SnapshotRecord::Manifest {
                covers_through,
                parts,
            },
        )) => {
            let wanted: HashSet<i64> = parts.iter().copied().collect();
            let (Some(first), Some(last)) = (parts.iter().min(), parts.iter().max()) else {
                return Ok(Some(covers_through));
            };
            let mut error = None;
            let mut read = 0;
            read_range(&cx.fluvio, &name, *first, last + 1, |record| {
                if !wanted.contains(&record.offset()) {
                    return;
                }
                match serde_json::from_slice::<SnapshotRecord>(record.value()) {
                    Ok(SnapshotRecord::Part { entries }) => {
                        read += 1;
                        for (entry, seq) in entries {
                            raise(values, entry, seq);
                        }
                    }
                    Ok(_) => {
                        error = Some(PhotonError::Unavailable {
                            backend: crate::error::LABEL,
                            message: format!(
                                "snapshot part {name}@{} is not a part",
                                record.offset()
                            ),
                            source: None,
                        })
                    }
                    Err(err) => error = Some(malformed(record.offset(), err)),
                }
            })
            .await?;
            if let Some(err) = error {
                return Err(err);
            }
            if read != wanted.len() {
                return Err(PhotonError::Unavailable {
                    backend: crate::error::LABEL,
                    message: format!(
                        "snapshot {name}: {read} of {} parts readable (retention removed some?)",
                        wanted.len()
                    ),
                    source: None,
                });
            }
            Ok(Some(covers_through))
        }
        Some((_, SnapshotRecord::Part { .. })) => Ok(None),
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

/// Sends one record and waits for its ack; returns its offset.
async fn send(
    producer: &TopicProducerPool,
    name: &str,
    key: Vec<u8>,
    value: Vec<u8>,
) -> Result<i64> {
    let acked = match producer.send(RecordKey::from(key), value).await {
        Ok(output) => output
            .wait()
            .await
            .map(|metadata| metadata.offset())
            .map_err(anyhow::Error::from),
        Err(err) => Err(err),
    };
    match acked {
        Ok(offset) => Ok(offset),
        Err(err) => {
            producer.clear_errors().await;
            Err(unavailable(format!("cannot write to {name}"), err))
        }
    }
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
    fn snapshots_split_into_parts_below_the_limit() {
        let entries: Vec<(Entry, i64)> = (0..30_000)
            .map(|i| {
                (
                    Entry {
                        subscription: format!("subscription-{i}"),
                        topic: "orders.created".into(),
                        key: Some(format!("customer-{i}")),
                        shard: 0,
                    },
                    i64::from(i),
                )
            })
            .collect();
        let parts = parts_of(&entries).unwrap();
        assert!(parts.len() > 1, "{} parts", parts.len());
        let mut back = HashMap::new();
        for part in &parts {
            assert!(part.len() <= PART_BYTES, "{} bytes", part.len());
            match serde_json::from_slice::<SnapshotRecord>(part).unwrap() {
                SnapshotRecord::Part { entries } => {
                    for (entry, seq) in entries {
                        raise(&mut back, entry, seq);
                    }
                }
                other => panic!("not a part: {other:?}"),
            }
        }
        assert_eq!(back.len(), 30_000);
        assert_eq!(back, entries.into_iter().collect::<HashMap<_, _>>());
    }

    #[test]
    fn snapshot_records_keep_their_kind() {
        let manifest = serde_json::to_vec(&SnapshotRecord::Manifest {
            covers_through: 7,
            parts: vec![1, 2],
        })
        .unwrap();
        assert!(matches!(
            serde_json::from_slice(&manifest).unwrap(),
            SnapshotRecord::Manifest {
                covers_through: 7,
                ..
            }
        ));
        // A snapshot written by earlier versions: one record of everything.
        let whole = br#"{"covers_through":3,"entries":[[{"subscription":"s","topic":"t","key":null,"shard":0},5]]}"#;
        assert!(matches!(
            serde_json::from_slice(whole).unwrap(),
            SnapshotRecord::Whole {
                covers_through: 3,
                ..
            }
        ));
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
