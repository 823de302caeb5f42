//! Reads outside subscriptions: `get_record` by event id (a direct get by stream
//! sequence), `head_seq`, and the listings (direct gets walking each shard stream; records
//! of several shards are merged by seq).

use std::sync::Arc;

use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{self, DirectGetErrorKind};
use photon_core::{Record, Result};

use crate::codec::{self, first_stream_seq_after, parse_event_id, photon_seq};
use crate::error::unavailable;
use crate::port::NatsStoragePort;

impl NatsStoragePort {
    /// The shard streams of `topic` that exist, with their shard numbers.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unavailable`] when a stream cannot be looked up.
    pub(crate) async fn topic_streams(
        &self,
        topic: &str,
    ) -> Result<Vec<(u32, Arc<stream::Stream>)>> {
        let names = &self.inner.names;
        let mut streams = Vec::new();
        for shard in 0..names.shards() {
            if let Some(stream) = self
                .inner
                .streams
                .existing(&names.stream_name(topic, shard))
                .await?
            {
                streams.push((shard, stream));
            }
        }
        Ok(streams)
    }

    /// The record of an event id; `None` for an unknown, foreign or malformed id.
    pub(crate) async fn find(&self, event_id: &str) -> Result<Option<Record>> {
        let names = &self.inner.names;
        let Some((stream_name, stream_seq)) = parse_event_id(event_id) else {
            return Ok(None);
        };
        let Some(shard) = names.shard_of_stream(stream_name) else {
            return Ok(None);
        };
        let Some(stream) = self.inner.streams.existing(stream_name).await? else {
            return Ok(None);
        };
        match stream.direct_get(stream_seq).await {
            Ok(message) => {
                let seq = photon_seq(stream_seq, shard, names.shards());
                codec::decode(&message.payload, event_id.to_owned(), seq).map(Some)
            }
            Err(err) if err.kind() == DirectGetErrorKind::NotFound => Ok(None),
            Err(err) => Err(unavailable(format!("cannot get event {event_id}"), err)),
        }
    }

    /// Highest seq stored for a topic, or for one key of it.
    pub(crate) async fn head(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        let names = &self.inner.names;
        if let Some(key) = key {
            let shard = names.shard_of(Some(key));
            let Some(stream) = self
                .inner
                .streams
                .existing(&names.stream_name(topic, shard))
                .await?
            else {
                return Ok(None);
            };
            return match stream
                .direct_get_last_for_subject(names.event_subject(topic, Some(key)))
                .await
            {
                Ok(message) => Ok(Some(photon_seq(message.sequence, shard, names.shards()))),
                Err(err) if err.kind() == DirectGetErrorKind::NotFound => Ok(None),
                Err(err) => Err(unavailable(
                    format!("cannot read the head of topic {topic:?}"),
                    err,
                )),
            };
        }
        let mut head = None;
        for (shard, stream) in self.topic_streams(topic).await? {
            let info = stream.get_info().await.map_err(|err| {
                unavailable(format!("cannot read the head of topic {topic:?}"), err)
            })?;
            if info.state.messages > 0 {
                let seq = photon_seq(info.state.last_sequence, shard, names.shards());
                head = head.max(Some(seq));
            }
        }
        Ok(head)
    }
}

impl NatsStoragePort {
    /// The seq of the last record stored in one shard of a topic (`0` before any): where
    /// a consumer group pins a partition (a shard) that starts at the tail.
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Unavailable`] when the shard's stream cannot be read.
    pub(crate) async fn shard_head(&self, topic: &str, shard: u32) -> Result<i64> {
        let names = &self.inner.names;
        let Some(stream) = self
            .inner
            .streams
            .existing(&names.stream_name(topic, shard))
            .await?
        else {
            return Ok(0);
        };
        let info = stream
            .get_info()
            .await
            .map_err(|err| unavailable(format!("cannot read the head of topic {topic:?}"), err))?;
        let last = info.state.last_sequence;
        Ok(if last > 0 {
            photon_seq(last, shard, names.shards())
        } else {
            0
        })
    }

    /// Up to `limit` records with `seq > after_seq`, by seq.
    pub(crate) async fn list_after(
        &self,
        topic: &str,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<Record>> {
        let names = &self.inner.names;
        let mut records = Vec::new();
        for (shard, stream) in self.topic_streams(topic).await? {
            let subjects = names.stream_subjects(topic, shard);
            let mut next = first_stream_seq_after(after_seq, shard, names.shards());
            for _ in 0..limit {
                match stream
                    .direct_get_next_for_subject(subjects.clone(), Some(next))
                    .await
                {
                    Ok(message) => {
                        next = message.sequence + 1;
                        records.push(self.stored_record(&stream, shard, &message)?);
                    }
                    Err(err) if err.kind() == DirectGetErrorKind::NotFound => break,
                    Err(err) => {
                        return Err(unavailable(format!("cannot list topic {topic:?}"), err))
                    }
                }
            }
        }
        records.sort_by_key(|record| record.seq);
        records.truncate(limit);
        Ok(records)
    }

    /// The `limit` records with the highest seqs, highest first.
    pub(crate) async fn list_newest(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        let mut records = Vec::new();
        for (shard, stream) in self.topic_streams(topic).await? {
            let info = stream
                .get_info()
                .await
                .map_err(|err| unavailable(format!("cannot list topic {topic:?}"), err))?;
            let (first, mut seq) = (info.state.first_sequence.max(1), info.state.last_sequence);
            let mut found = 0;
            while seq >= first && found < limit {
                match stream.direct_get(seq).await {
                    Ok(message) => {
                        records.push(self.stored_record(&stream, shard, &message)?);
                        found += 1;
                    }
                    // A deleted message leaves a gap.
                    Err(err) if err.kind() == DirectGetErrorKind::NotFound => {}
                    Err(err) => {
                        return Err(unavailable(format!("cannot list topic {topic:?}"), err))
                    }
                }
                seq -= 1;
            }
        }
        records.sort_by_key(|record| std::cmp::Reverse(record.seq));
        records.truncate(limit);
        Ok(records)
    }

    fn stored_record(
        &self,
        stream: &stream::Stream,
        shard: u32,
        message: &StreamMessage,
    ) -> Result<Record> {
        let name = &stream.cached_info().config.name;
        let seq = photon_seq(message.sequence, shard, self.inner.names.shards());
        codec::decode(
            &message.payload,
            codec::event_id(name, message.sequence),
            seq,
        )
    }
}
