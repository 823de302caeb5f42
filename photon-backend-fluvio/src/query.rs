//! Queries: an event by id, and the bounded reads of one partition they and the
//! checkpoint store use (its end offset, one record at an offset, a range).
//!
//! These reads stop at a known offset; a read that cannot get there within
//! [`READ_DEADLINE`] is an error, never a silently short result.

use std::time::Duration;

use fluvio::consumer::{ConsumerConfigExtBuilder, ConsumerStream, Record, RetryMode};
use fluvio::{Fluvio, Offset};
use futures::StreamExt;
use photon_core::Record as PhotonRecord;
use photon_core::{PhotonError, Result};

use crate::codec::{decode_value, parse_event_id};
use crate::error::unavailable;
use crate::port::FluvioStoragePort;
use crate::stream_shard::seq_of;
use crate::topic::{fluvio_topic_name, is_not_found, retry_not_found};

/// Largest fetch: covers the largest batch the port writes (2 MB), and no more. The client
/// reads each connection into a buffer that keeps the size of the largest response it
/// held, and zeroes all of it before every socket read: with 8 MiB fetches, every read on
/// a connection that once replayed a backlog cost about 1 ms of CPU (a live subscriber's
/// round trip measured 1.3 ms of CPU against the raw client's 0.2 ms).
pub(crate) const MAX_FETCH_BYTES: i32 = 2_560 * 1024;

/// How long a bounded read may take.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(30);

/// Reopens at one offset before the partition is asked whether it still holds it: a hole
/// a fetch left is nearly always gone after the first reopen.
const QUICK_REOPENS: u32 = 3;

/// Reopens at one offset, while the partition still holds it, before the reader gives up
/// (an error: it reopens later on its own terms, never skipping the records).
const REOPENS_PER_HOLE: u32 = 10;

/// Fluvio's consumer stream can leave out the records of a batch that a fetch's
/// `max_bytes` cut off: the next record then comes after a hole, although the partition
/// holds every offset (seen here as 8 to 45 records missing at each 8 MiB of a replay;
/// reopening the stream at the first missing offset reads them). Every reader of this
/// port checks that offsets follow on without a hole, and reopens at the first missing
/// one ([`Hole::Reopen`]); when the hole is still there after [`QUICK_REOPENS`], it asks
/// the partition for its first stored offset: records below it are really gone
/// (retention removed them: [`Hole::Removed`]), others are read again. A hole is never
/// taken as removed records because it persists.
#[derive(Debug, Default)]
pub(crate) struct HoleGuard {
    at: i64,
    reopened: u32,
}

/// What a reader expecting one offset does about a record that came at a later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hole {
    /// The partition still holds the expected offset: the fetch skipped it, reopen there.
    Reopen,
    /// Retention removed the records before `first`, the partition's first stored offset.
    Removed {
        /// The first offset the partition holds.
        first: i64,
    },
}

impl HoleGuard {
    /// Judges the hole between `next`, the offset the reader expects, and `offset`, the
    /// record that came instead (`offset > next`), by reading the partition's first stored
    /// offset.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the first offset cannot be read, or when the
    /// fetch kept skipping the held offset `next` through [`REOPENS_PER_HOLE`] reopens.
    pub(crate) async fn judge(
        &mut self,
        fluvio: &Fluvio,
        topic: &str,
        next: i64,
        offset: i64,
    ) -> Result<Hole> {
        if self.at != next {
            self.at = next;
            self.reopened = 0;
        }
        if self.reopened < QUICK_REOPENS {
            self.reopened += 1;
            return Ok(Hole::Reopen);
        }
        let first = first_offset(fluvio, topic).await?;
        self.verdict(topic, next, offset, first.unwrap_or(offset))
    }

    /// Whether the reader is still within the quick reopens of its current hole (the
    /// partition was not asked yet).
    pub(crate) fn quick(&self) -> bool {
        self.reopened <= QUICK_REOPENS
    }

    /// The verdict of [`HoleGuard::judge`] once the partition's `first` stored offset is known.
    fn verdict(&mut self, topic: &str, next: i64, offset: i64, first: i64) -> Result<Hole> {
        if first > next {
            self.reopened = 0;
            return Ok(Hole::Removed { first });
        }
        if self.at != next {
            self.at = next;
            self.reopened = 0;
        }
        self.reopened += 1;
        if self.reopened > REOPENS_PER_HOLE {
            return Err(PhotonError::Unavailable {
                backend: crate::error::LABEL,
                message: format!(
                    "reads of {topic} skip offsets {next} to {} although the partition holds \
                     them (first stored offset {first}), after {REOPENS_PER_HOLE} reopens",
                    offset - 1
                ),
                source: None,
            });
        }
        tracing::debug!(
            port = "fluvio",
            next,
            offset,
            "the fetch skipped records; reopening at the first missing offset"
        );
        Ok(Hole::Reopen)
    }
}

/// The first offset `topic`'s partition still holds, `None` when it holds none.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the partition cannot be read.
pub(crate) async fn first_offset(fluvio: &Fluvio, topic: &str) -> Result<Option<i64>> {
    let mut stream = open(fluvio, topic, Offset::beginning(), false).await?;
    match tokio::time::timeout(READ_DEADLINE, stream.next()).await {
        Ok(Some(Ok(record))) => Ok(Some(record.offset())),
        Ok(None) => Ok(None),
        Ok(Some(Err(code))) => Err(unavailable(
            format!("cannot read the first offset of {topic}"),
            code,
        )),
        Err(_) => Err(timeout(topic)),
    }
}

/// Opens a consumer on partition 0 of `topic` from `start`.
///
/// `continuous = false` ends the stream at the end offset seen when it opens. Errors are
/// items (the client's own retries are off): callers reconnect on their own terms.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the topic does not show up or the cluster fails.
pub(crate) async fn open(
    fluvio: &Fluvio,
    topic: &str,
    start: Offset,
    continuous: bool,
) -> Result<
    impl ConsumerStream<Item = std::result::Result<Record, fluvio::dataplane::link::ErrorCode>>
        + Send
        + 'static,
> {
    let mut builder = ConsumerConfigExtBuilder::default();
    builder
        .topic(topic.to_owned())
        .partition(0)
        .offset_start(start)
        .max_bytes(MAX_FETCH_BYTES)
        .disable_continuous(!continuous)
        .retry_mode(RetryMode::Disabled);
    let config = builder
        .build()
        .map_err(|e| unavailable(format!("consumer config for {topic}"), e))?;
    retry_not_found(topic, || fluvio.consumer_with_config(config.clone())).await
}

/// The offset the next record of `topic` will get (0 when empty).
///
/// # Errors
/// [`PhotonError::Unavailable`] when the partition cannot be read.
pub(crate) async fn end_offset(fluvio: &Fluvio, topic: &str) -> Result<i64> {
    let mut stream = open(fluvio, topic, Offset::from_end(1), false).await?;
    match tokio::time::timeout(READ_DEADLINE, stream.next()).await {
        Ok(Some(Ok(record))) => Ok(record.offset() + 1),
        Ok(None) => Ok(0),
        Ok(Some(Err(code))) => Err(unavailable(format!("cannot read the end of {topic}"), code)),
        Err(_) => Err(timeout(topic)),
    }
}

/// The record at `offset`, `None` when the topic or the offset does not exist.
///
/// # Errors
/// [`PhotonError::Unavailable`] when the cluster fails.
pub(crate) async fn record_at(fluvio: &Fluvio, topic: &str, offset: i64) -> Result<Option<Record>> {
    let start = Offset::absolute(offset).map_err(|e| unavailable("bad offset".into(), e))?;
    let mut builder = ConsumerConfigExtBuilder::default();
    builder
        .topic(topic.to_owned())
        .partition(0)
        .offset_start(start)
        .max_bytes(MAX_FETCH_BYTES)
        .disable_continuous(true)
        .retry_mode(RetryMode::Disabled);
    let config = builder
        .build()
        .map_err(|e| unavailable(format!("consumer config for {topic}"), e))?;
    let mut stream = match fluvio.consumer_with_config(config).await {
        Ok(stream) => stream,
        Err(err) if is_not_found(&err) || err.to_string().contains("ffset") => return Ok(None),
        Err(err) => return Err(unavailable(format!("cannot read {topic}"), err)),
    };
    match tokio::time::timeout(READ_DEADLINE, stream.next()).await {
        Ok(Some(Ok(record))) if record.offset() == offset => Ok(Some(record)),
        Ok(Some(Ok(_)) | None) => Ok(None),
        Ok(Some(Err(code))) => Err(unavailable(format!("cannot read {topic}@{offset}"), code)),
        Err(_) => Err(timeout(topic)),
    }
}

/// Feeds every record of `topic` from `from` up to (excluding) `end` to `fold`.
///
/// # Errors
/// [`PhotonError::Unavailable`] when `end` is not reached within [`READ_DEADLINE`]: the
/// caller never sees a partial read as complete.
pub(crate) async fn read_range(
    fluvio: &Fluvio,
    topic: &str,
    from: i64,
    end: i64,
    mut fold: impl FnMut(&Record),
) -> Result<()> {
    if from >= end {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    let mut next = from;
    let mut holes = HoleGuard::default();
    let mut stream = open_at(fluvio, topic, next).await?;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(record))) => {
                if record.offset() < next {
                    continue;
                }
                if record.offset() > next {
                    match holes.judge(fluvio, topic, next, record.offset()).await? {
                        Hole::Reopen => {
                            stream = open_at(fluvio, topic, next).await?;
                            continue;
                        }
                        Hole::Removed { first } => {
                            return Err(PhotonError::Unavailable {
                                backend: crate::error::LABEL,
                                message: format!(
                                    "{topic} no longer holds offsets {next} to {}: retention \
                                     removed them",
                                    first - 1
                                ),
                                source: None,
                            })
                        }
                    }
                }
                fold(&record);
                next = record.offset() + 1;
                if next >= end {
                    return Ok(());
                }
            }
            Ok(Some(Err(code))) => {
                return Err(unavailable(
                    format!("cannot read {topic} up to {end}"),
                    code,
                ))
            }
            Ok(None) => {
                return Err(PhotonError::Unavailable {
                    backend: crate::error::LABEL,
                    message: format!("{topic} ended before offset {end}"),
                    source: None,
                })
            }
            Err(_) => return Err(timeout(topic)),
        }
    }
}

/// A continuous stream of `topic` from `offset`.
async fn open_at(
    fluvio: &Fluvio,
    topic: &str,
    offset: i64,
) -> Result<
    impl ConsumerStream<Item = std::result::Result<Record, fluvio::dataplane::link::ErrorCode>>,
> {
    let start = Offset::absolute(offset).map_err(|e| unavailable("bad offset".into(), e))?;
    open(fluvio, topic, start, true).await
}

impl FluvioStoragePort {
    /// The event `event_id` names, `None` when it names no record of this port's layout.
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the cluster fails.
    pub(crate) async fn find(&self, event_id: &str) -> Result<Option<PhotonRecord>> {
        let Some((name, partition, offset)) = parse_event_id(event_id) else {
            return Ok(None);
        };
        if partition != 0 {
            return Ok(None);
        }
        let Some(record) = record_at(&self.inner.fluvio(), &name, offset).await? else {
            return Ok(None);
        };
        let Some(topic) = photon_core::raw::wire::topic_of(record.value()) else {
            return Ok(None);
        };
        // Only ids of this port's topic layout: the Fluvio topic must be a shard of `topic`.
        let shards = self.inner.config.shards;
        let Some(shard) = (0..shards).find(|shard| {
            fluvio_topic_name(&self.inner.config.prefix, &topic, *shard, shards) == name
        }) else {
            return Ok(None);
        };
        decode_value(
            record.value(),
            &topic,
            event_id.to_owned(),
            seq_of(offset, shard, shards),
        )
        .map(Some)
    }
}

fn timeout(topic: &str) -> PhotonError {
    PhotonError::Unavailable {
        backend: crate::error::LABEL,
        message: format!("reading {topic} took longer than {READ_DEADLINE:?}"),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_offset_is_reopened_never_taken_as_removed() {
        let mut holes = HoleGuard::default();
        for _ in 0..REOPENS_PER_HOLE {
            assert_eq!(holes.verdict("t", 10, 20, 0).unwrap(), Hole::Reopen);
        }
        // A hole that persists while the partition holds its records is an error (the
        // reader reopens later), never a gap.
        let stuck = holes.verdict("t", 10, 20, 0).unwrap_err();
        assert!(matches!(stuck, PhotonError::Unavailable { .. }), "{stuck}");
        assert!(
            stuck.to_string().contains("skip offsets 10 to 19"),
            "{stuck}"
        );
        // A hole at another offset gets its own reopens.
        assert_eq!(holes.verdict("t", 11, 20, 0).unwrap(), Hole::Reopen);
    }

    #[test]
    fn a_reader_at_the_beginning_is_checked_too() {
        let mut holes = HoleGuard::default();
        // Expecting offset 0 while offset 0 is held: the fetch skipped it.
        assert_eq!(holes.verdict("t", 0, 7, 0).unwrap(), Hole::Reopen);
        // Expecting 0 while the partition starts at 5: removed up to 5.
        assert_eq!(
            holes.verdict("t", 0, 7, 5).unwrap(),
            Hole::Removed { first: 5 }
        );
    }

    #[test]
    fn records_below_the_first_stored_offset_are_removed() {
        let mut holes = HoleGuard::default();
        assert_eq!(
            holes.verdict("t", 10, 20, 20).unwrap(),
            Hole::Removed { first: 20 }
        );
        assert_eq!(
            holes.verdict("t", 10, 30, 20).unwrap(),
            Hole::Removed { first: 20 }
        );
    }
}
