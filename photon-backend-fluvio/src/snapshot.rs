//! Snapshots in parts on a one-partition snapshot topic, shared by the checkpoint store
//! ([`crate::checkpoint`]) and the group coordination log ([`crate::group`]).
//!
//! - A snapshot is a list of entries written as parts of at most [`PART_BYTES`] each (one
//!   record of everything would pass the 1 MiB produce limit), then a manifest naming the
//!   offsets of its parts and the offset of the log it covers (every log record below it
//!   is folded in).
//! - Loading searches the end of the snapshot topic for manifests ([`MANIFEST_SEARCH`]
//!   records first, doubled until one is found), takes the one covering the most, reads
//!   its parts and fails unless all of them are there: a snapshot is used whole or not at
//!   all. Parts of snapshots written at the same time by other ports can lie between a
//!   manifest and its parts; a manifest is only written once its parts are acknowledged.

use std::collections::HashSet;

use fluvio::{Fluvio, RecordKey, TopicProducerPool};
use photon_core::{PhotonError, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{answered, unavailable};
use crate::query::{end_offset, read_range};
use crate::topic::Topics;

/// Largest snapshot part (serialized entries), well below the produce limit.
pub(crate) const PART_BYTES: usize = 256 * 1024;

/// Records at the end of a snapshot topic searched for a manifest first (doubled until one
/// is found).
const MANIFEST_SEARCH: i64 = 64;

/// A record of a snapshot topic.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum SnapshotRecord<T> {
    /// Ends a snapshot: its parts, and the log offset below which it holds everything.
    Manifest {
        covers_through: i64,
        parts: Vec<i64>,
    },
    /// A whole snapshot in one record (written by earlier versions of the checkpoint store).
    Whole {
        covers_through: i64,
        entries: Vec<T>,
    },
    /// Some entries of a snapshot.
    Part { entries: Vec<T> },
}

/// A snapshot read back: its entries and the log offset it covers.
#[derive(Debug)]
pub(crate) struct Loaded<T> {
    pub(crate) covers_through: i64,
    pub(crate) entries: Vec<T>,
}

/// Serialized parts of at most [`PART_BYTES`] of entries each (one entry may exceed it
/// alone; callers keep entries far below the produce limit).
///
/// # Errors
/// [`PhotonError::Codec`] when an entry cannot be serialized.
pub(crate) fn parts_of<T: Serialize>(entries: &[T], what: &str) -> Result<Vec<Vec<u8>>> {
    const HEAD: &[u8] = br#"{"entries":["#;
    const TAIL: &[u8] = b"]}";
    let mut parts = Vec::new();
    let mut part = HEAD.to_vec();
    for entry in entries {
        let bytes = serde_json::to_vec(entry).map_err(|e| PhotonError::codec(what, e))?;
        if part.len() > HEAD.len() && part.len() + bytes.len() + 1 + TAIL.len() > PART_BYTES {
            part.extend_from_slice(TAIL);
            parts.push(std::mem::replace(&mut part, HEAD.to_vec()));
        }
        if part.len() > HEAD.len() {
            part.push(b',');
        }
        part.extend_from_slice(&bytes);
    }
    if part.len() > HEAD.len() {
        part.extend_from_slice(TAIL);
        parts.push(part);
    }
    Ok(parts)
}

/// Writes `parts` then their manifest to the snapshot topic `name`.
///
/// # Errors
/// [`PhotonError::Unavailable`] naming the topic when a record is not acknowledged (the
/// topic's producer is then dropped from `topics`); a snapshot without its manifest is
/// never loaded.
pub(crate) async fn write(
    producer: &TopicProducerPool,
    topics: &Topics,
    name: &str,
    covers_through: i64,
    parts: Vec<Vec<u8>>,
) -> Result<()> {
    let mut offsets = Vec::with_capacity(parts.len());
    for part in parts {
        match send(producer, name, b"snapshot-part".to_vec(), part).await {
            Ok(offset) => offsets.push(offset),
            Err(err) => {
                topics.forget(name);
                return Err(err);
            }
        }
    }
    let manifest = serde_json::to_vec(&SnapshotRecord::<()>::Manifest {
        covers_through,
        parts: offsets,
    })
    .map_err(|e| PhotonError::codec(format!("snapshot manifest of {name}"), e))?;
    if let Err(err) = send(producer, name, b"snapshot".to_vec(), manifest).await {
        topics.forget(name);
        return Err(err);
    }
    Ok(())
}

/// The manifest (or whole snapshot) covering the most among the newest ones of `name`,
/// `None` when the topic holds none.
async fn newest_manifest<T: DeserializeOwned>(
    fluvio: &Fluvio,
    name: &str,
) -> Result<Option<SnapshotRecord<T>>> {
    let end = end_offset(fluvio, name).await?;
    let mut window = MANIFEST_SEARCH;
    loop {
        let from = (end - window).max(0);
        let mut newest: Option<SnapshotRecord<T>> = None;
        let mut error = None;
        read_range(
            fluvio,
            name,
            from,
            end,
            |record| match serde_json::from_slice::<SnapshotRecord<T>>(record.value()) {
                Ok(SnapshotRecord::Part { .. }) => {}
                Ok(found) => {
                    if covers(newest.as_ref()) <= covers(Some(&found)) {
                        newest = Some(found);
                    }
                }
                Err(err) => error = Some(malformed(name, record.offset(), err)),
            },
        )
        .await?;
        if let Some(err) = error {
            return Err(err);
        }
        if newest.is_some() || from == 0 {
            return Ok(newest);
        }
        window *= 2;
    }
}

fn covers<T>(record: Option<&SnapshotRecord<T>>) -> i64 {
    match record {
        Some(SnapshotRecord::Manifest { covers_through, .. })
        | Some(SnapshotRecord::Whole { covers_through, .. }) => *covers_through,
        _ => -1,
    }
}

fn malformed(name: &str, offset: i64, err: serde_json::Error) -> PhotonError {
    PhotonError::codec(format!("snapshot {name}@{offset}"), err)
}

/// The log offset the newest snapshot of `name` covers, without reading its parts.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the topic cannot be read to its end.
pub(crate) async fn newest_covers(fluvio: &Fluvio, name: &str) -> Result<Option<i64>> {
    let newest = newest_manifest::<serde::de::IgnoredAny>(fluvio, name).await?;
    Ok(newest.map(|record| covers(Some(&record))))
}

/// Reads the newest complete snapshot of `name`.
///
/// # Errors
/// [`PhotonError::Unavailable`] naming the topic when it cannot be read or a part of the
/// snapshot is missing; [`PhotonError::Codec`] for a record that is not a snapshot's.
pub(crate) async fn load<T: DeserializeOwned>(
    fluvio: &Fluvio,
    name: &str,
) -> Result<Option<Loaded<T>>> {
    let (covers_through, parts) = match newest_manifest::<T>(fluvio, name).await? {
        None | Some(SnapshotRecord::Part { .. }) => return Ok(None),
        Some(SnapshotRecord::Whole {
            covers_through,
            entries,
        }) => {
            return Ok(Some(Loaded {
                covers_through,
                entries,
            }))
        }
        Some(SnapshotRecord::Manifest {
            covers_through,
            parts,
        }) => (covers_through, parts),
    };
    let mut entries = Vec::new();
    let wanted: HashSet<i64> = parts.iter().copied().collect();
    let (Some(first), Some(last)) = (parts.iter().min(), parts.iter().max()) else {
        return Ok(Some(Loaded {
            covers_through,
            entries,
        }));
    };
    let mut error = None;
    let mut read = 0;
    read_range(fluvio, name, *first, last + 1, |record| {
        if !wanted.contains(&record.offset()) {
            return;
        }
        match serde_json::from_slice::<SnapshotRecord<T>>(record.value()) {
            Ok(SnapshotRecord::Part { entries: part }) => {
                read += 1;
                entries.extend(part);
            }
            Ok(_) => {
                error = Some(PhotonError::Unavailable {
                    backend: crate::error::LABEL,
                    message: format!("snapshot part {name}@{} is not a part", record.offset()),
                    source: None,
                });
            }
            Err(err) => error = Some(malformed(name, record.offset(), err)),
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
    Ok(Some(Loaded {
        covers_through,
        entries,
    }))
}

/// Sends one record and waits for its ack; returns its offset.
///
/// # Errors
/// [`PhotonError::Unavailable`] naming the topic when the record is not acknowledged (the
/// producer's errors are cleared for the next send).
pub(crate) async fn send(
    producer: &TopicProducerPool,
    name: &str,
    key: Vec<u8>,
    value: Vec<u8>,
) -> Result<i64> {
    let sending = async {
        match producer.send(RecordKey::from(key), value).await {
            Ok(output) => output
                .wait()
                .await
                .map(|metadata| metadata.offset())
                .map_err(anyhow::Error::from),
            Err(err) => Err(err),
        }
    };
    let acked = match answered(|| format!("a write to {name}"), sending).await {
        Ok(acked) => acked,
        Err(unanswered) => {
            producer.clear_errors().await;
            return Err(unanswered);
        }
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
    fn parts_stay_below_the_limit_and_read_back_whole() {
        let entries: Vec<(String, i64)> = (0..30_000)
            .map(|i| (format!("subscription-{i}-{}", "x".repeat(40)), i64::from(i)))
            .collect();
        let parts = parts_of(&entries, "test entry").unwrap();
        assert!(parts.len() > 1, "{} parts", parts.len());
        let mut back = Vec::new();
        for part in &parts {
            assert!(part.len() <= PART_BYTES, "{} bytes", part.len());
            match serde_json::from_slice::<SnapshotRecord<(String, i64)>>(part).unwrap() {
                SnapshotRecord::Part { entries } => back.extend(entries),
                other => panic!("not a part: {other:?}"),
            }
        }
        assert_eq!(back, entries);
        assert!(parts_of::<(String, i64)>(&[], "none").unwrap().is_empty());
    }

    #[test]
    fn manifests_and_wholes_keep_their_kind_and_the_widest_wins() {
        let manifest = serde_json::to_vec(&SnapshotRecord::<()>::Manifest {
            covers_through: 7,
            parts: vec![1, 2],
        })
        .unwrap();
        let manifest: SnapshotRecord<i64> = serde_json::from_slice(&manifest).unwrap();
        assert!(matches!(
            manifest,
            SnapshotRecord::Manifest {
                covers_through: 7,
                ..
            }
        ));
        let whole: SnapshotRecord<i64> =
            serde_json::from_slice(br#"{"covers_through":3,"entries":[5]}"#).unwrap();
        assert!(matches!(
            whole,
            SnapshotRecord::Whole {
                covers_through: 3,
                ..
            }
        ));
        assert_eq!(covers(Some(&manifest)), 7);
        assert!(covers(Some(&whole)) < covers(Some(&manifest)));
        assert_eq!(covers::<i64>(None), -1);
    }
}
