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

/// Largest fetch: covers the largest batch the port writes (2 MB) with room to spare.
pub(crate) const MAX_FETCH_BYTES: i32 = 8 * 1024 * 1024;

/// How long a bounded read may take.
pub(crate) const READ_DEADLINE: Duration = Duration::from_secs(30);

/// Reopens at one offset before a hole there is taken as real.
const REOPENS_PER_HOLE: u32 = 3;

/// Fluvio's consumer stream can leave out the records of a batch that a fetch's
/// `max_bytes` cut off: the next record then comes after a hole, although the partition
/// holds every offset (seen here as 8 to 45 records missing at each 8 MiB of a replay;
/// reopening the stream at the first missing offset reads them). Every reader of this
/// port checks that offsets follow on without a hole and reopens at the first missing one
/// when they do not. A hole still there after [`REOPENS_PER_HOLE`] reopens at the same
/// offset is handed on as real; records removed by retention come as `OffsetEvicted`
/// instead.
#[derive(Debug, Default)]
pub(crate) struct HoleGuard {
    at: i64,
    reopened: u32,
}

impl HoleGuard {
    /// Whether the reader, expecting offset `next`, should reopen its stream there because
    /// the record at `offset` comes after a hole.
    pub(crate) fn reopen(&mut self, next: i64, offset: i64) -> bool {
        if offset <= next {
            return false;
        }
        if self.at != next {
            self.at = next;
            self.reopened = 0;
        }
        self.reopened += 1;
        if self.reopened > REOPENS_PER_HOLE {
            return false;
        }
        tracing::debug!(
            port = "fluvio",
            next,
            offset,
            "the fetch skipped records; reopening at the first missing offset"
        );
        true
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
                if holes.reopen(next, record.offset()) {
                    stream = open_at(fluvio, topic, next).await?;
                    continue;
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
        let Some(topic) = photon_core::wire::topic_of(record.value()) else {
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
    use super::HoleGuard;

    #[test]
    fn records_that_follow_on_never_reopen() {
        let mut holes = HoleGuard::default();
        assert!(!holes.reopen(0, 0));
        assert!(!holes.reopen(5, 5));
        assert!(!holes.reopen(5, 3));
    }

    #[test]
    fn a_hole_is_reopened_three_times_then_handed_on() {
        let mut holes = HoleGuard::default();
        assert_eq!(
            (0..4).map(|_| holes.reopen(100, 108)).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        // A hole at another offset gets its own reopens.
        assert!(holes.reopen(200, 230));
    }
}
