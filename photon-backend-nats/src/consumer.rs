//! Subscriptions: one ordered consumer per shard stream, filtered by the server.
//!
//! - A key subscription reads one stream through a consumer whose `filter_subject` is the
//!   key's subject: the server sends only that key's events.
//! - A whole-topic subscription reads every shard stream and merges them; order holds per
//!   partition (a key lives in one shard), not across shards.
//! - `StartAt::Tail` means the events the server stamps at or after the moment `subscribe`
//!   is called (JetStream's start-by-time; this assumes the client's and the server's
//!   clocks agree, as they do on one machine or under NTP). The readers are opened in the
//!   background, so an append right after `subscribe` is not missed.
//! - `StartAt::AfterSeq(s)` yields exactly the events with `seq > s`. With several shards
//!   `seq = stream_seq × shards + shard`, so shard `i` starts at the first stream sequence
//!   `q` with `q × shards + i > s`.
//! - A durable subscription (`request.durable`) on a sharded topic resumes every shard from
//!   its own committed position; a shard without one (none of its events were acknowledged
//!   yet) starts at its beginning, so nothing is skipped. Without any stored position the
//!   request's `start` applies.
//! - Each shard's reader keeps the next stream sequence it needs; when the connection
//!   drops or the server restarts, it opens a new consumer from there: nothing lost,
//!   nothing repeated.
//! - When that next sequence is no longer stored (stream limits or `truncate_before`
//!   removed it: the stream's first sequence is above it although its last sequence
//!   reached it), the reader yields one [`PhotonError::Gap`] naming the removed range in
//!   Photon seqs, then continues at the stream's first sequence. This is checked each
//!   time a consumer is opened at a known position (`AfterSeq`, a stored checkpoint, or
//!   after a delivered record), not for a start at the beginning or the tail. The range is
//!   the shard stream's: a key subscription is told of it too, although the removed
//!   messages may have held none of its key's events.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::Message;
use futures::StreamExt;
use photon_core::{PhotonError, Record, RecordStream, Result, StartAt, SubscribeRequest};
use time::OffsetDateTime;
use tokio::sync::mpsc;

use crate::codec::{self, first_stream_seq_after, photon_seq};
use crate::config::ReplayCursor;
use crate::error::{storage, unavailable};
use crate::port::NatsStoragePort;

/// Records buffered between the shard readers and the subscriber.
const BUFFER: usize = 1024;
/// Wait before opening a consumer again after an error.
const RETRY_DELAY: Duration = Duration::from_millis(250);

type Sender = mpsc::Sender<Result<Record>>;

impl NatsStoragePort {
    pub(crate) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        let names = &self.inner.names;
        let shards: Vec<u32> = match request.key.as_deref() {
            Some(key) => vec![names.shard_of(Some(key))],
            None => (0..names.shards()).collect(),
        };
        self.open_shards(request, shards)
    }

    /// A whole-topic subscription of one shard only (a consumer group's partition).
    pub(crate) fn open_shard_subscription(
        &self,
        topic: &str,
        shard: u32,
        start: StartAt,
    ) -> RecordStream {
        let request = SubscribeRequest {
            topic: topic.to_owned(),
            key: None,
            start,
            durable: None,
        };
        self.open_shards(request, vec![shard])
    }

    fn open_shards(&self, request: SubscribeRequest, shards: Vec<u32>) -> RecordStream {
        let (sender, receiver) = mpsc::channel(BUFFER);
        let subscribed_at = OffsetDateTime::from(SystemTime::now());
        tokio::spawn(
            self.clone()
                .run_subscription(request, shards, subscribed_at, sender),
        );
        Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move {
                let item = receiver.recv().await?;
                Some((item, receiver))
            },
        ))
    }

    async fn run_subscription(
        self,
        request: SubscribeRequest,
        shards: Vec<u32>,
        subscribed_at: OffsetDateTime,
        sender: Sender,
    ) {
        let starts = loop {
            match self.start_positions(&request, &shards, subscribed_at).await {
                Ok(starts) => break starts,
                Err(err) => {
                    if sender.send(Err(err)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(RETRY_DELAY * 4).await;
                }
            }
        };
        for (shard, (start, at_position)) in starts {
            let reader = ShardReader {
                port: self.clone(),
                topic: request.topic.clone(),
                key: request.key.clone(),
                shard,
                start,
                at_position,
                sender: sender.clone(),
            };
            tokio::spawn(reader.run());
        }
    }

    /// Where to start reading in each shard, and whether that is a known position (whose
    /// removal is a gap) rather than the beginning or the tail.
    async fn start_positions(
        &self,
        request: &SubscribeRequest,
        shards: &[u32],
        subscribed_at: OffsetDateTime,
    ) -> Result<BTreeMap<u32, (Start, bool)>> {
        let names = &self.inner.names;
        let count = names.shards();
        let stored = match &request.durable {
            Some(key) if count > 1 => self.checkpoint_positions(key).await?,
            _ => BTreeMap::new(),
        };
        let start = match self.inner.config.replay_cursor {
            ReplayCursor::TailOnly => StartAt::Tail,
            ReplayCursor::StreamSeq => request.start,
        };
        let mut starts = BTreeMap::new();
        for &shard in shards {
            let first = if let Some(seq) = stored.get(&shard) {
                (Start::Seq(first_stream_seq_after(*seq, shard, count)), true)
            } else if !stored.is_empty() {
                (Start::Seq(1), false)
            } else {
                match start {
                    StartAt::Beginning => (Start::Seq(1), false),
                    StartAt::AfterSeq(after) => (
                        Start::Seq(first_stream_seq_after(after, shard, count)),
                        after > 0,
                    ),
                    StartAt::Tail => (Start::Time(subscribed_at), false),
                }
            };
            starts.insert(shard, first);
        }
        Ok(starts)
    }
}

/// Where a shard reader (re)opens its consumer.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// The next stream sequence to deliver.
    Seq(u64),
    /// The first message stamped at or after this time (before any message was read).
    Time(OffsetDateTime),
}

/// Reads one shard stream in order and forwards its records.
struct ShardReader {
    port: NatsStoragePort,
    topic: String,
    key: Option<String>,
    shard: u32,
    /// Where to continue.
    start: Start,
    /// Whether `start` is a position the subscriber reached or asked for (its removal is a
    /// gap), rather than the beginning or the tail.
    at_position: bool,
    sender: Sender,
}

impl ShardReader {
    async fn run(mut self) {
        loop {
            match self.read().await {
                Ok(()) => return,
                Err(err) => {
                    tracing::debug!(port = "nats", topic = %self.topic, shard = self.shard, %err, "reopening subscription");
                    tokio::select! {
                        () = self.sender.closed() => return,
                        () = tokio::time::sleep(RETRY_DELAY) => {}
                    }
                }
            }
        }
    }

    /// Reads until the subscriber is gone (`Ok`) or the consumer fails (`Err`, reopen).
    async fn read(&mut self) -> Result<()> {
        let port = self.port.clone();
        let inner = &port.inner;
        let stream = inner
            .streams
            .topic_stream(&inner.names, &self.topic, self.shard)
            .await?;
        if let Some(gap) = self.find_gap(&stream).await? {
            if self.sender.send(Err(gap)).await.is_err() {
                return Ok(());
            }
        }
        let filter_subject = match self.key.as_deref() {
            Some(key) => inner.names.event_subject(&self.topic, Some(key)),
            None => String::new(),
        };
        let config = pull::OrderedConfig {
            filter_subject,
            deliver_policy: match self.start {
                Start::Seq(start_sequence) => DeliverPolicy::ByStartSequence { start_sequence },
                Start::Time(start_time) => DeliverPolicy::ByStartTime { start_time },
            },
            ..pull::OrderedConfig::default()
        };
        let consumer = stream.create_consumer(config).await.map_err(|err| {
            unavailable(
                format!("cannot open a consumer on topic {:?}", self.topic),
                err,
            )
        })?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|err| unavailable(format!("cannot read topic {:?}", self.topic), err))?;
        loop {
            let item = tokio::select! {
                () = self.sender.closed() => return Ok(()),
                item = messages.next() => item,
            };
            let message = match item {
                Some(Ok(message)) => message,
                Some(Err(err)) => {
                    return Err(unavailable(
                        format!("reading topic {:?} failed", self.topic),
                        err,
                    ))
                }
                None => {
                    return Err(unavailable(
                        format!("reading topic {:?} ended", self.topic),
                        "consumer closed",
                    ))
                }
            };
            let info = match message.info() {
                Ok(info) => info,
                Err(err) => {
                    let err = storage("message without JetStream metadata", err);
                    if self.sender.send(Err(err)).await.is_err() {
                        return Ok(());
                    }
                    continue;
                }
            };
            if let Some(gap) = self.skipped(info.stream_sequence) {
                if self.sender.send(Err(gap)).await.is_err() {
                    return Ok(());
                }
            }
            let Some(record) = self.record(&message, info.stream, info.stream_sequence) else {
                continue;
            };
            if self.sender.send(record).await.is_err() {
                return Ok(());
            }
        }
    }

    /// The gap in front of the next sequence, if the stream no longer holds it; moves the
    /// cursor to the stream's first sequence.
    async fn find_gap(
        &mut self,
        stream: &async_nats::jetstream::stream::Stream,
    ) -> Result<Option<PhotonError>> {
        let Start::Seq(next) = self.start else {
            return Ok(None);
        };
        if !self.at_position {
            return Ok(None);
        }
        let mut stream = stream.clone();
        let state = stream
            .info()
            .await
            .map_err(|err| {
                unavailable(
                    format!("cannot read the state of topic {:?}", self.topic),
                    err,
                )
            })?
            .state
            .clone();
        if state.last_sequence < next || state.first_sequence <= next {
            return Ok(None);
        }
        let shards = self.port.inner.names.shards();
        self.start = Start::Seq(state.first_sequence);
        Ok(Some(PhotonError::Gap {
            topic: self.topic.clone(),
            from: photon_seq(next, self.shard, shards),
            to: photon_seq(state.first_sequence, self.shard, shards),
        }))
    }

    /// The gap in front of the message at `stream_sequence` when the reader expected an earlier sequence: a
    /// whole-topic reader sees every sequence of its shard's stream, so a jump means
    /// retention (or `truncate_before`) removed the messages in between while it read.
    /// (A keyed reader's sequences jump over other keys; its gaps are found on reopen.)
    fn skipped(&self, stream_sequence: u64) -> Option<PhotonError> {
        let Start::Seq(next) = self.start else {
            return None;
        };
        if !self.at_position || self.key.is_some() || stream_sequence <= next {
            return None;
        }
        let shards = self.port.inner.names.shards();
        Some(PhotonError::Gap {
            topic: self.topic.clone(),
            from: photon_seq(next, self.shard, shards),
            to: photon_seq(stream_sequence, self.shard, shards),
        })
    }

    /// The record of a message (at `stream_sequence` of `stream`), advancing the cursor;
    /// `None` for a message already passed.
    fn record(
        &mut self,
        message: &Message,
        stream: &str,
        stream_sequence: u64,
    ) -> Option<Result<Record>> {
        if matches!(self.start, Start::Seq(next) if stream_sequence < next) {
            return None;
        }
        self.start = Start::Seq(stream_sequence + 1);
        self.at_position = true;
        let names = &self.port.inner.names;
        let event_id = codec::event_id(stream, stream_sequence);
        let seq = photon_seq(stream_sequence, self.shard, names.shards());
        Some(codec::decode_in(
            &self.topic,
            &message.payload,
            event_id,
            seq,
        ))
    }
}
