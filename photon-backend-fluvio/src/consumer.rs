//! Subscriptions: one reader per shard topic, merged into one stream.
//!
//! - Order holds per shard topic, hence per key; a whole-topic subscription on a sharded
//!   topic interleaves shards (no order across keys of different shards). Unkeyed events
//!   all live in shard 0 and keep their order.
//! - Start positions are resolved in a background task started by `subscribe`, so a
//!   subscription is established even before it is polled. Until a tail position is read,
//!   appends to the topic from this process wait (see [`crate::tail`]): a tail
//!   subscription includes everything appended after `subscribe` returns.
//! - `StartAt::AfterSeq(s)` yields exactly the events with `seq > s`. With `n` shards
//!   (`seq = (offset + 1) × n + shard`), shard `i` starts at the first offset `o` with
//!   `(o + 1) × n + i > s`; each shard is filtered by the seq space of its own.
//! - A durable subscription (`request.durable`) resumes every shard from its own stored
//!   position: the larger of the Photon checkpoint of that shard (authoritative, written by
//!   `commit_checkpoint`) and the Fluvio consumer offset of
//!   [`durable_consumer_name`](crate::durable_consumer_name) (a mirror kept for Fluvio tools,
//!   never ahead of an acknowledged event). A shard without either starts at its beginning
//!   (or at the tail when the subscription has no checkpoint at all and asks for it).
//! - With [`ReplayCursor::TailOnly`](crate::ReplayCursor) every shard starts at the end.
//! - A reader that loses its stream reopens it at the next offset it needs; from the second
//!   failure in a row it first replaces the port's stream connection (a process that only
//!   consumes recovers from an SPU restart this way). A reader that receives nothing for
//!   two 5 s checks while its partition holds records it has not read treats its stream
//!   as broken.
//!   A reader failing for 10 s logs a warning; after 60 s its subscriber gets one
//!   `PhotonError::Unavailable` item per outage, and the reader keeps trying. Resolving
//!   the start positions is retried the same way for up to 60 s; then the subscriber gets
//!   the error and the stream ends.
//! - Retention removes whole segments. A reader whose next offset was removed (Fluvio
//!   answers `OffsetEvicted`) moves to the first offset kept; when it had a position
//!   (a durable checkpoint, `AfterSeq`, or records read) its subscriber first gets one
//!   [`PhotonError::Gap`] naming the removed seqs of that shard. A start from the
//!   beginning just starts at the first record kept.
//! - A record whose envelope id the reader saw within the last
//!   [`DEDUP_WINDOW`](crate::DEDUP_WINDOW) records (a retried append stored twice) is
//!   dropped; see [`crate::dedup`].
//! - Offsets must follow on without a hole: when Fluvio's stream skips records (a batch
//!   cut off at a fetch's byte limit), the reader reopens at the first one skipped; only
//!   records below the partition's first stored offset count as removed (see
//!   [`HoleGuard`](crate::query::HoleGuard)).
//! - A key filter is applied by the reader (Fluvio cannot filter by key server-side
//!   without a SmartModule); the reader only reads the key's shard.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use fluvio::consumer::{ConsumerConfigExtBuilder, ConsumerStream, OffsetManagementStrategy};
use fluvio::dataplane::link::ErrorCode;
use fluvio::Offset;
use futures::StreamExt;
use photon_core::{CheckpointKey, PhotonError, RecordStream, Result, StartAt, SubscribeRequest};
use tokio::sync::mpsc;

use crate::codec::{decode_value, event_id};
use crate::config::ReplayCursor;
use crate::dedup::RecentIds;
use crate::port::FluvioStoragePort;
use crate::query::{end_offset, open, Hole, HoleGuard};
use crate::retention::topic_config;
use crate::stream_shard::{first_offset_after, offset_of_seq, seq_of, shard_for_key};
use crate::tail::{gate_name, TailGate};
use crate::topic::{durable_consumer_name, ensure_topic, fluvio_topic_name};

/// Records buffered between the shard readers and the subscriber.
const BUFFER: usize = 1024;

/// How long a reader may receive nothing before it checks that its stream still works.
const PROBE_EVERY: Duration = Duration::from_secs(5);

/// How long that check may take.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// Pause before reopening a failed stream, times the failures in a row (at most 10).
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// How long a reader fails before it logs a warning.
pub(crate) const WARN_AFTER: Duration = Duration::from_secs(10);

/// How long a reader fails before its subscriber gets an error item.
pub(crate) const REPORT_AFTER: Duration = Duration::from_secs(60);

impl FluvioStoragePort {
    pub(crate) fn open_subscription(&self, request: SubscribeRequest) -> RecordStream {
        let shards = self.inner.config.shards;
        let wanted: Vec<u32> = match request.key.as_deref() {
            Some(key) => vec![shard_for_key(Some(key), shards)],
            None => (0..shards).collect(),
        };
        self.open_shards(request, wanted)
    }

    /// The records of one shard after `start`, in seq order: a consumer group's partition
    /// on a sharded topic.
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

    fn open_shards(&self, request: SubscribeRequest, wanted: Vec<u32>) -> RecordStream {
        let (sender, receiver) = mpsc::channel(BUFFER);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Box::pin(futures::stream::once(std::future::ready(Err(
                PhotonError::Closed("fluvio subscription (no tokio runtime)".into()),
            ))));
        };
        // Closed before `subscribe` returns: an append to the topic made after that waits
        // until the tail position is read, so the subscription sees it.
        let at_tail = request.start == StartAt::Tail
            || self.inner.config.replay_cursor == ReplayCursor::TailOnly;
        let gate = at_tail.then(|| {
            TailGate::close(gate_name(
                &self.inner.config.endpoint,
                &self.inner.config.prefix,
                &request.topic,
            ))
        });
        let port = self.clone();
        runtime.spawn(async move { port.start_readers(request, wanted, sender, gate).await });
        Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move {
                let item = receiver.recv().await?;
                Some((item, receiver))
            },
        ))
    }

    async fn start_readers(
        &self,
        request: SubscribeRequest,
        wanted: Vec<u32>,
        sender: mpsc::Sender<Result<photon_core::Record>>,
        gate: Option<TailGate>,
    ) {
        // A cluster that cannot be reached (an SPU restarting) is retried like a reader's
        // stream; a refused request (a layout mismatch) is reported at once.
        let since = Instant::now();
        let mut failures = 0u32;
        let starts = loop {
            let client = self.inner.fluvio();
            match self.start_offsets(&request, &wanted).await {
                Err(err @ PhotonError::Unavailable { .. })
                    if since.elapsed() < REPORT_AFTER && !sender.is_closed() =>
                {
                    failures += 1;
                    if failures >= 2 {
                        self.inner.reconnect(&client).await;
                    }
                    tracing::debug!(port = "fluvio", topic = %request.topic, %err, "subscription start retried");
                    tokio::time::sleep(RETRY_PAUSE * failures.min(10)).await;
                }
                other => break other,
            }
        };
        drop(gate);
        let starts = match starts {
            Ok(starts) => starts,
            Err(err) => {
                let _ = sender.send(Err(err)).await;
                return;
            }
        };
        for (shard, next) in starts {
            let reader = ShardReader {
                port: self.clone(),
                topic: request.topic.clone(),
                key: request.key.clone(),
                shard,
                next,
                sender: sender.clone(),
            };
            tokio::spawn(reader.run());
        }
    }

    /// The first offset to read in each shard.
    async fn start_offsets(
        &self,
        request: &SubscribeRequest,
        wanted: &[u32],
    ) -> Result<BTreeMap<u32, i64>> {
        self.check_layout(&request.topic).await?;
        let inner = &self.inner;
        let shards = inner.config.shards;
        let stored = match &request.durable {
            Some(key) if inner.config.replay_cursor == ReplayCursor::StreamSeq => {
                self.durable_positions(key).await?
            }
            _ => BTreeMap::new(),
        };
        // Shards are resolved together: creating a missing topic takes a few hundred
        // milliseconds on the SC, and a tail position must be fixed as soon as possible.
        let resolving = wanted.iter().map(|&shard| {
            let stored = stored.get(&shard).copied();
            async move {
                let name = fluvio_topic_name(&inner.config.prefix, &request.topic, shard, shards);
                let config = topic_config(&inner.config, &request.topic, false);
                let created = ensure_topic(&inner.fluvio(), &config, &name).await?;
                let first = match (inner.config.replay_cursor, stored, request.start) {
                    // A topic created just now holds only events appended after this
                    // subscription started: the tail is its beginning.
                    (ReplayCursor::TailOnly, _, _) | (_, None, StartAt::Tail) if created => 0,
                    (ReplayCursor::TailOnly, _, _) | (_, None, StartAt::Tail) => {
                        end_offset(&inner.fluvio(), &name).await?
                    }
                    (_, Some(seq), _) => first_offset_after(seq, shard, shards),
                    // A durable subscription's `AfterSeq` comes from another shard's
                    // checkpoint; a shard with no position of its own acknowledged nothing.
                    (_, None, StartAt::AfterSeq(_)) if request.durable.is_some() => 0,
                    (_, None, StartAt::AfterSeq(after)) => first_offset_after(after, shard, shards),
                    (_, None, StartAt::Beginning) => 0,
                };
                Ok::<_, photon_core::PhotonError>((shard, first))
            }
        });
        let starts: BTreeMap<u32, i64> = futures::future::try_join_all(resolving)
            .await?
            .into_iter()
            .collect();
        Ok(starts)
    }

    /// The seq of the last record of `shard` (`0` when it holds none): where a consumer
    /// group pins a partition that starts at the tail.
    ///
    /// # Errors
    /// The cluster's errors while resolving the shard's topic and its end.
    pub(crate) async fn shard_head(&self, topic: &str, shard: u32) -> Result<i64> {
        self.check_layout(topic).await?;
        let inner = &self.inner;
        let shards = inner.config.shards;
        let name = fluvio_topic_name(&inner.config.prefix, topic, shard, shards);
        let config = topic_config(&inner.config, topic, false);
        ensure_topic(&inner.fluvio(), &config, &name).await?;
        let end = end_offset(&inner.fluvio(), &name).await?;
        Ok(if end > 0 {
            seq_of(end - 1, shard, shards)
        } else {
            0
        })
    }

    /// Per shard: the larger of the Photon checkpoint and the Fluvio consumer offset.
    async fn durable_positions(&self, key: &CheckpointKey) -> Result<BTreeMap<u32, i64>> {
        let inner = &self.inner;
        let shards = inner.config.shards;
        let mut positions = inner
            .checkpoints
            .positions(&self.checkpoint_context(), key)
            .await?;
        let id = durable_consumer_name(&key.subscription, &key.topic, key.key.as_deref());
        match inner.fluvio().consumer_offsets().await {
            Ok(offsets) => {
                for shard in 0..shards {
                    let name = fluvio_topic_name(&inner.config.prefix, &key.topic, shard, shards);
                    let mirrored = offsets
                        .iter()
                        .filter(|o| {
                            o.consumer_id == id
                                && o.topic == name
                                && o.partition == 0
                                && o.offset >= 0
                        })
                        .map(|o| seq_of(o.offset, shard, shards))
                        .max();
                    if let Some(seq) = mirrored {
                        let position = positions.entry(shard).or_insert(seq);
                        *position = (*position).max(seq);
                    }
                }
            }
            Err(err) => {
                tracing::debug!(port = "fluvio", %err, "no consumer offsets; using checkpoints only")
            }
        }
        Ok(positions)
    }
}

/// Reads one shard topic in order and forwards its records.
struct ShardReader {
    port: FluvioStoragePort,
    topic: String,
    key: Option<String>,
    shard: u32,
    next: i64,
    sender: mpsc::Sender<Result<photon_core::Record>>,
}

/// A reader's run of failures, from the first one to the next record.
struct Outage {
    since: Instant,
    failures: u32,
    warned: bool,
    reported: bool,
}

impl ShardReader {
    async fn run(mut self) {
        let inner = self.port.inner.clone();
        let shards = inner.config.shards;
        let name = fluvio_topic_name(&inner.config.prefix, &self.topic, self.shard, shards);
        let mut outage: Option<Outage> = None;
        // Kept across reopened streams: a retried append's two copies can lie on both
        // sides of a reconnect.
        let mut recent = RecentIds::default();
        let mut holes = HoleGuard::default();
        loop {
            let start = match Offset::absolute(self.next) {
                Ok(start) => start,
                Err(_) => Offset::beginning(),
            };
            let client = inner.stream.current();
            let opened = tokio::select! {
                opened = open(&client, &name, start, true) => opened,
                () = self.sender.closed() => return,
            };
            let cause = match opened {
                Ok(stream) => match self
                    .forward(stream, &name, &mut outage, &mut recent, &mut holes)
                    .await
                {
                    Some(Ended::Failed(cause)) => cause,
                    // Retention removed what was next, or the fetch skipped records: reopen
                    // at once where records remain or at the first one skipped.
                    Some(Ended::Evicted | Ended::Skipped) => continue,
                    None => return,
                },
                Err(err) => err.to_string(),
            };
            if !self.trouble(&mut outage, &client, &name, cause).await {
                return;
            }
        }
    }

    /// Forwards records until the stream fails (returns why) or the subscriber is gone
    /// (`None`).
    async fn forward(
        &mut self,
        mut stream: impl ConsumerStream<
            Item = std::result::Result<
                fluvio::consumer::Record,
                fluvio::dataplane::link::ErrorCode,
            >,
        >,
        name: &str,
        outage: &mut Option<Outage>,
        recent: &mut RecentIds,
        holes: &mut HoleGuard,
    ) -> Option<Ended> {
        let inner = self.port.inner.clone();
        let shards = inner.config.shards;
        // One timer for the whole stream, reset only when it fires: a timer per record
        // would cost every record a shared timer-wheel lock.
        let probe = tokio::time::sleep(PROBE_EVERY);
        tokio::pin!(probe);
        let mut received = false;
        let mut behind = 0u32;
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                () = self.sender.closed() => return None,
                () = &mut probe => {
                    probe.as_mut().reset(tokio::time::Instant::now() + PROBE_EVERY);
                    if std::mem::take(&mut received) {
                        behind = 0;
                        continue;
                    }
                    // Quiet: either nothing was appended, or the stream silently stopped
                    // (a socket to a restarted SPU). The end offset, read on the publish
                    // connection, tells the two apart.
                    let publish = inner.fluvio();
                    let end = tokio::time::timeout(PROBE_DEADLINE, end_offset(&publish, name)).await;
                    if !matches!(end, Ok(Ok(_))) {
                        // A consume-only process has no failed send to notice a broken
                        // publish connection by: this is where it is noticed.
                        inner.reconnect(&publish).await;
                    }
                    match end {
                        Ok(Ok(end)) if end <= self.next => {
                            behind = 0;
                            continue;
                        }
                        Ok(Ok(end)) => {
                            behind += 1;
                            if behind < 2 {
                                continue;
                            }
                            return Some(Ended::Failed(format!(
                                "no record for {:?} although the partition ends at {end} and the next to read is {}",
                                PROBE_EVERY * 2, self.next
                            )));
                        }
                        Ok(Err(err)) => return Some(Ended::Failed(format!("cannot read the end offset: {err}"))),
                        Err(_) => return Some(Ended::Failed(format!("no end offset within {PROBE_DEADLINE:?}"))),
                    }
                }
            };
            match item {
                Some(Ok(record)) => {
                    received = true;
                    if let Some(past) = outage.take() {
                        if past.warned {
                            tracing::warn!(port = "fluvio", topic = %name, "subscription recovered after {:?}", past.since.elapsed());
                        }
                    }
                    if record.offset() < self.next {
                        continue;
                    }
                    if record.offset() > self.next {
                        match holes
                            .judge(&inner.fluvio(), name, self.next, record.offset())
                            .await
                        {
                            Ok(Hole::Reopen) => return Some(Ended::Skipped),
                            Ok(Hole::Removed { first }) => {
                                if !self.skip_to(first, shards).await {
                                    return None;
                                }
                                if record.offset() > first {
                                    return Some(Ended::Skipped);
                                }
                            }
                            Err(err) => return Some(Ended::Failed(err.to_string())),
                        }
                    }
                    if !self.skip_to(record.offset(), shards).await {
                        return None;
                    }
                    self.next = record.offset() + 1;
                    if let Some(key) = &self.key {
                        if record.key() != Some(key.as_bytes()) {
                            continue;
                        }
                    }
                    let id = event_id(name, 0, record.offset());
                    let seq = seq_of(record.offset(), self.shard, shards);
                    let decoded = decode_value(record.value(), &self.topic, id, seq);
                    if let Ok(decoded) = &decoded {
                        if !recent.first_time(&decoded.envelope_id) {
                            tracing::debug!(port = "fluvio", topic = %name, offset = record.offset(), "second copy of a retried append dropped");
                            continue;
                        }
                    }
                    if self.sender.send(decoded).await.is_err() {
                        return None;
                    }
                }
                Some(Err(ErrorCode::OffsetEvicted { next_available, .. }))
                    if next_available > self.next =>
                {
                    if !self.skip_to(next_available, shards).await {
                        return None;
                    }
                    return Some(Ended::Evicted);
                }
                Some(Err(code)) => return Some(Ended::Failed(format!("stream error: {code}"))),
                None => return Some(Ended::Failed("stream ended".to_owned())),
            }
        }
    }

    /// Moves the reader to `offset`, the first record the partition still holds. When
    /// records between the reader's position and `offset` are gone (retention removed
    /// them), the subscriber gets one [`PhotonError::Gap`] naming their seqs first; a
    /// reader at the very beginning (nothing read, no position) just starts there.
    /// Returns `false` when the subscriber is gone.
    async fn skip_to(&mut self, offset: i64, shards: u32) -> bool {
        if offset > self.next && self.next > 0 {
            let gap = PhotonError::Gap {
                topic: self.topic.clone(),
                from: seq_of(self.next, self.shard, shards),
                to: seq_of(offset, self.shard, shards),
            };
            tracing::warn!(port = "fluvio", topic = %self.topic, %gap, "retention removed events this subscription had not read");
            if self.sender.send(Err(gap)).await.is_err() {
                return false;
            }
        }
        self.next = self.next.max(offset);
        true
    }

    /// Counts a failure: from the second one in a row the stream connection is replaced;
    /// after [`WARN_AFTER`] it is logged as a warning, after [`REPORT_AFTER`] the subscriber
    /// gets an [`PhotonError::Unavailable`] item (once per outage; the reader keeps
    /// trying). Returns `false` when the subscriber is gone.
    async fn trouble(
        &self,
        outage: &mut Option<Outage>,
        client: &std::sync::Arc<fluvio::Fluvio>,
        name: &str,
        cause: String,
    ) -> bool {
        let inner = &self.port.inner;
        let state = outage.get_or_insert_with(|| Outage {
            since: Instant::now(),
            failures: 0,
            warned: false,
            reported: false,
        });
        state.failures += 1;
        tracing::debug!(port = "fluvio", topic = %name, %cause, failures = state.failures, "reopening subscription");
        if state.failures >= 2 {
            // A failed reconnect is logged by `replace`; the next round tries again.
            let _ = inner.stream.replace(client).await;
        }
        let down_for = state.since.elapsed();
        if !state.warned && down_for >= WARN_AFTER {
            state.warned = true;
            tracing::warn!(port = "fluvio", topic = %name, %cause, "subscription cannot read for {down_for:?}; still retrying");
        }
        if !state.reported && down_for >= REPORT_AFTER {
            state.reported = true;
            let err = PhotonError::Unavailable {
                backend: crate::error::LABEL,
                message: format!(
                    "subscription to {name} cannot read from offset {} for {down_for:?} ({cause}); still retrying",
                    self.next
                ),
                source: None,
            };
            if self.sender.send(Err(err)).await.is_err() {
                return false;
            }
        }
        let pause = RETRY_PAUSE * state.failures.min(10);
        tokio::select! {
            () = tokio::time::sleep(pause) => true,
            () = self.sender.closed() => false,
        }
    }
}

/// Why a reader's stream ended while its subscriber was still there.
enum Ended {
    /// The stream failed: reopen it, counting the failure.
    Failed(String),
    /// Retention removed the records the reader was at; it moved past them.
    Evicted,
    /// The fetch left out records (see [`HoleGuard`]): reopen at the first one.
    Skipped,
}

/// Least time between two rounds of the consumer-offset mirror. Storing one consumer
/// offset opens a consumer and takes several round trips on the stream connection, the
/// one subscriptions stream on; a durable subscription at full speed commits a checkpoint
/// every few milliseconds, so mirroring every commit cost the subscriptions themselves.
const MIRROR_EVERY: Duration = Duration::from_secs(1);

/// Keeps the Fluvio consumer offsets of durable subscriptions in step with their
/// checkpoints, in the background (newest value per consumer and topic wins), at most one
/// round per [`MIRROR_EVERY`].
pub(crate) async fn mirror_consumer_offsets(
    port: std::sync::Weak<crate::port::Inner>,
    mut updates: mpsc::UnboundedReceiver<(CheckpointKey, i64)>,
) {
    while let Some(first) = updates.recv().await {
        let mut latest: HashMap<(String, String), i64> = HashMap::new();
        let Some(inner) = port.upgrade() else { return };
        let shards = inner.config.shards;
        let mut add = |(key, seq): (CheckpointKey, i64)| {
            let shard = crate::stream_shard::shard_of_seq(seq, shards);
            let id = durable_consumer_name(&key.subscription, &key.topic, key.key.as_deref());
            let name = fluvio_topic_name(&inner.config.prefix, &key.topic, shard, shards);
            let offset = latest.entry((id, name)).or_insert(i64::MIN);
            *offset = (*offset).max(offset_of_seq(seq, shards));
        };
        add(first);
        while let Ok(update) = updates.try_recv() {
            add(update);
        }
        for ((id, name), offset) in latest {
            let stored = tokio::time::timeout(
                Duration::from_secs(10),
                store_consumer_offset(&inner.stream.current(), &id, &name, offset),
            )
            .await;
            if !matches!(stored, Ok(Ok(()))) {
                tracing::debug!(port = "fluvio", consumer = %id, topic = %name, "consumer offset not stored");
            }
        }
        drop(inner);
        // Updates arriving meanwhile are coalesced into the next round.
        tokio::time::sleep(MIRROR_EVERY).await;
    }
}

/// Stores `offset` (the last handled record) as the consumer offset of `id` on `topic`.
async fn store_consumer_offset(
    fluvio: &fluvio::Fluvio,
    id: &str,
    topic: &str,
    offset: i64,
) -> anyhow::Result<()> {
    let config = ConsumerConfigExtBuilder::default()
        .topic(topic.to_owned())
        .partition(0)
        .offset_consumer(id.to_owned())
        .offset_strategy(OffsetManagementStrategy::Manual)
        .offset_start(Offset::absolute(offset)?)
        .disable_continuous(true)
        .max_bytes(crate::query::MAX_FETCH_BYTES)
        .build()?;
    let mut stream = fluvio.consumer_with_config(config).await?;
    match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
        Ok(Some(Ok(record))) if record.offset() == offset => {
            stream.offset_commit().await?;
            stream.offset_flush().await?;
            Ok(())
        }
        _ => anyhow::bail!("record {topic}@{offset} not readable"),
    }
}
