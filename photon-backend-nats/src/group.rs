//! Consumer groups: members share a durable pull consumer per shard stream.
//!
//! Why `max_ack_pending = 1` per shard consumer: competing pull consumers on one durable
//! consumer get events in stream order, but with several unacknowledged events two members
//! could handle two events of one key at the same time, or a redelivered event after a later
//! one. With at most one unacknowledged event per shard, the next event of a shard is only
//! handed out once the previous one is acknowledged (or given back), so every key (which
//! lives in one shard) is handled in order, by one member at a time, and each event goes to
//! one member. Parallelism within a group is therefore the number of stream shards
//! (`PHOTON_NATS_STREAM_SHARDS`); throughput per shard is one acknowledgement round trip
//! per event.
//!
//! - `ack` returns once the server confirmed it (a double ack): an acknowledged event is
//!   never handed out again, also to a member joining right after.
//! - A delivery dropped without `ack` (its member left or failed) is given back at once
//!   (`NAK`) and goes to another member, first in line.
//! - A delivery held longer than the ack wait is kept alive with progress signals, so a slow
//!   handler does not see its event sent to another member.
//! - The consumer is durable: a group resumes where it stopped, also after a server
//!   restart; `GroupRequest::start` only applies when the group is first created.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::message::{AckKind, Acker};
use async_trait::async_trait;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use futures::StreamExt;
use photon_core::{Acknowledge, Delivery, DeliveryStream, GroupRequest, Result, StartAt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::codec::{self, first_stream_seq_after, photon_seq};
use crate::error::unavailable;
use crate::port::NatsStoragePort;

/// How long a delivery may stay unacknowledged before the server hands it to another member
/// (a live delivery is kept alive well before that).
const ACK_WAIT: Duration = Duration::from_secs(10);
/// Interval of the progress signal for a delivery still being handled.
const KEEP_ALIVE: Duration = Duration::from_secs(3);
/// Lifetime of one pull request: a member that left stops holding one within this time.
const PULL_EXPIRES: Duration = Duration::from_secs(2);
const RETRY_DELAY: Duration = Duration::from_millis(250);

type Sender = mpsc::Sender<Result<Delivery>>;

impl NatsStoragePort {
    pub(crate) fn join_group(&self, request: GroupRequest) -> DeliveryStream {
        let (sender, receiver) = mpsc::channel(16);
        for shard in 0..self.inner.names.shards() {
            let member = GroupReader {
                port: self.clone(),
                request: request.clone(),
                shard,
                sender: sender.clone(),
            };
            tokio::spawn(member.run());
        }
        Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move {
                let item = receiver.recv().await?;
                Some((item, receiver))
            },
        ))
    }
}

/// One member's reader of one shard's group consumer.
struct GroupReader {
    port: NatsStoragePort,
    request: GroupRequest,
    shard: u32,
    sender: Sender,
}

impl GroupReader {
    async fn run(self) {
        loop {
            match self.read().await {
                Ok(()) => return,
                Err(err) => {
                    tracing::debug!(port = "nats", group = %self.request.group, shard = self.shard, %err, "reopening group consumer");
                    tokio::select! {
                        () = self.sender.closed() => return,
                        () = tokio::time::sleep(RETRY_DELAY) => {}
                    }
                }
            }
        }
    }

    fn consumer_config(&self) -> pull::Config {
        let names = &self.port.inner.names;
        let deliver_policy = match self.request.start {
            StartAt::Beginning => DeliverPolicy::All,
            StartAt::Tail => DeliverPolicy::New,
            StartAt::AfterSeq(after) => DeliverPolicy::ByStartSequence {
                start_sequence: first_stream_seq_after(after, self.shard, names.shards()),
            },
        };
        pull::Config {
            durable_name: Some(consumer_name(&self.request.group)),
            ack_policy: AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_ack_pending: 1,
            deliver_policy,
            ..pull::Config::default()
        }
    }

    async fn read(&self) -> Result<()> {
        let inner = &self.port.inner;
        let topic = &self.request.topic;
        let stream = inner
            .streams
            .topic_stream(&inner.names, topic, self.shard)
            .await?;
        let name = consumer_name(&self.request.group);
        let consumer = stream
            .get_or_create_consumer(&name, self.consumer_config())
            .await
            .map_err(|err| {
                unavailable(
                    format!(
                        "cannot open group {:?} on topic {topic:?}",
                        self.request.group
                    ),
                    err,
                )
            })?;
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(1)
            .expires(PULL_EXPIRES)
            .heartbeat(PULL_EXPIRES / 4)
            .messages()
            .await
            .map_err(|err| {
                unavailable(format!("cannot read group {:?}", self.request.group), err)
            })?;
        loop {
            let item = tokio::select! {
                () = self.sender.closed() => return Ok(()),
                item = messages.next() => item,
            };
            let message = match item {
                Some(Ok(message)) => message,
                Some(Err(err)) => {
                    return Err(unavailable(
                        format!("reading group {:?} failed", self.request.group),
                        err,
                    ))
                }
                None => return Err(unavailable("group consumer ended", "consumer closed")),
            };
            let info = message
                .info()
                .map(|info| (info.stream.to_owned(), info.stream_sequence))
                .map_err(|err| unavailable("group message without JetStream metadata", err));
            let (message, acker) = message.split();
            let ack = GroupAck::new(acker);
            let item = info.and_then(|(stream, stream_seq)| {
                let seq = photon_seq(stream_seq, self.shard, inner.names.shards());
                codec::decode(&message.payload, codec::event_id(&stream, stream_seq), seq)
            });
            let delivery = match item {
                Ok(record) => Ok(Delivery {
                    record,
                    ack: Box::new(ack),
                }),
                Err(err) => {
                    // An undecodable event would block its shard forever: acknowledge it
                    // and report it to the member.
                    let _ = ack.ack().await;
                    Err(err)
                }
            };
            if self.sender.send(delivery).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// The durable consumer name of a group: a reversible, name-safe token.
fn consumer_name(group: &str) -> String {
    format!("g{}", URL_SAFE_NO_PAD.encode(group.as_bytes()))
}

/// Acknowledges one group delivery; gives it back when dropped unacknowledged.
struct GroupAck {
    acker: Arc<Acker>,
    done: AtomicBool,
    keep_alive: JoinHandle<()>,
}

impl GroupAck {
    fn new(acker: Acker) -> Self {
        let acker = Arc::new(acker);
        let signal = acker.clone();
        let keep_alive = tokio::spawn(async move {
            let mut ticker =
                tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
            loop {
                ticker.tick().await;
                if signal.ack_with(AckKind::Progress).await.is_err() {
                    return;
                }
            }
        });
        Self {
            acker,
            done: AtomicBool::new(false),
            keep_alive,
        }
    }
}

#[async_trait]
impl Acknowledge for GroupAck {
    async fn ack(&self) -> Result<()> {
        self.keep_alive.abort();
        // Confirmed by the server: once `ack` returns, the event is never handed out again.
        self.acker
            .double_ack()
            .await
            .map_err(|err| unavailable("cannot acknowledge a group delivery", err))?;
        self.done.store(true, Ordering::Release);
        Ok(())
    }
}

impl Drop for GroupAck {
    fn drop(&mut self) {
        self.keep_alive.abort();
        if self.done.load(Ordering::Acquire) {
            return;
        }
        let acker = self.acker.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = acker.ack_with(AckKind::Nak(None)).await;
            });
        }
    }
}
