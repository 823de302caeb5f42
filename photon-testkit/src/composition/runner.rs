//! Playing a schedule on a port and recording what it observed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use photon_core::group::{GroupMembership, GroupOptions};
use photon_core::raw::group::join;
use photon_core::{
    BatchEvent, Event, FlushPolicy, GroupRequest, PhotonError, StartAt, StoragePort,
    TransportCrypto,
};
use photon_runtime::executor::{Executor, ExecutorConfig};
use photon_runtime::{DurableSubscription, Photon, SchedulerConfig};
use serde_json::json;

use super::generator::{Op, Schedule};
use super::handlers::{self, HandlerLog};
use super::history::{Appeared, Delivered, GroupDelivery, History};
use super::OP_BOUND;
use crate::context::{Context, PortFactory};

/// How long a read waits for one more event before it counts the stream as caught up.
const QUIET: Duration = Duration::from_millis(150);
/// How long the final drain of one consumer may wait for the events it misses.
const DRAIN_BOUND: Duration = Duration::from_secs(15);
/// The scheduler's lease: the longest a delayed event waits after a restart.
const SCHEDULER_LEASE: Duration = Duration::from_secs(2);

/// What the live subscriber of the topic saw of delayed events: the events, the gaps.
type Watched = Arc<std::sync::Mutex<(Vec<Appeared>, Vec<(i64, i64)>)>>;

struct Member {
    stream: GroupMembership,
    run: usize,
}

/// The instance under test and its open consumers.
struct World<'a> {
    factory: &'a Arc<dyn PortFactory>,
    schedule: &'a Schedule,
    topic: String,
    group: String,
    subscription_prefix: String,
    photon: Photon,
    port: Arc<dyn StoragePort>,
    subscriptions: BTreeMap<u8, (DurableSubscription, usize)>,
    members: BTreeMap<u8, Member>,
    joins: BTreeMap<u8, usize>,
    /// The executor running the schedule's handler on this instance, if the schedule has one.
    executor: Option<Executor>,
    handler_log: HandlerLog,
    /// Instances opened so far (the first is 0).
    instance_run: usize,
    scheduler: SchedulerConfig,
    /// A second instance reading the topic live from its start, and what it saw.
    watcher: Option<(Photon, tokio::task::JoinHandle<()>)>,
    watched: Watched,
    history: History,
}

fn crypto(sealed: bool) -> TransportCrypto {
    if sealed {
        TransportCrypto::plaintext()
            .with_key("composition", [7u8; 32])
            .expect("a 32-byte key")
    } else {
        TransportCrypto::plaintext()
    }
}

async fn instance(
    factory: &Arc<dyn PortFactory>,
    schedule: &Schedule,
    scheduler: &SchedulerConfig,
) -> Result<(Photon, Arc<dyn StoragePort>), PhotonError> {
    let port = factory.open().await?;
    let policy = if schedule.flush_each_ack {
        FlushPolicy {
            interval: Duration::from_millis(1),
            max_pending: 1,
        }
    } else {
        FlushPolicy::default()
    };
    // Quick retries: a handler that fails once succeeds on its next attempt soon after.
    let retries = ExecutorConfig::builder()
        .initial_backoff(Duration::from_millis(10))
        .build()?;
    let photon = Photon::builder()
        .shared_storage_port(port.clone())
        .transport_crypto(crypto(schedule.sealed))
        .flush_policy(policy)
        .executor_config(retries)
        .scheduler(scheduler.clone())
        .build()?;
    Ok((photon, port))
}

/// Plays `schedule` on ports opened by `factory`, then drains every consumer it used;
/// returns what it observed. An operation that does not finish within [`OP_BOUND`] is
/// recorded as a failure and ends the run.
pub async fn run(factory: &Arc<dyn PortFactory>, schedule: &Schedule) -> History {
    let context = Context::new(factory.clone());
    let history = play_schedule(factory, schedule, &context).await;
    // A broker keeps the topics a schedule created: a soak of a thousand schedules would
    // leave thousands behind and slow the broker down.
    if let Err(err) = factory.remove_namespace(context.namespace()).await {
        eprintln!(
            "composition: removing namespace {} failed: {err}",
            context.namespace()
        );
    }
    history
}

async fn play_schedule(
    factory: &Arc<dyn PortFactory>,
    schedule: &Schedule,
    context: &Context,
) -> History {
    let mut history = History {
        seed: schedule.seed,
        ..History::default()
    };
    history.handler = schedule.handler;
    history.handler_batch = schedule.handler_batch;
    let scheduler = SchedulerConfig::default()
        .topic(context.topic("schedule"))
        .group(context.subscription("scheduler"))
        .lease(SCHEDULER_LEASE);
    let (photon, port) = match instance(factory, schedule, &scheduler).await {
        Ok(opened) => opened,
        Err(err) => {
            history
                .failures
                .push(format!("cannot open the port: {err}"));
            return history;
        }
    };
    let mut world = World {
        factory,
        schedule,
        topic: context.topic(&format!("composition{}", schedule.seed)),
        group: context.subscription("group"),
        subscription_prefix: context.subscription("durable"),
        photon,
        port,
        subscriptions: BTreeMap::new(),
        members: BTreeMap::new(),
        joins: BTreeMap::new(),
        executor: None,
        handler_log: HandlerLog::default(),
        instance_run: 0,
        scheduler,
        watcher: None,
        watched: Watched::default(),
        history,
    };
    world.start_watcher().await;
    world.start_handler(0);
    for (index, op) in schedule.ops.iter().enumerate() {
        let played = tokio::time::timeout(OP_BOUND, world.play(index, op)).await;
        if played.is_err() {
            world.history.failures.push(format!(
                "operation {index} ({op:?}) did not finish within {OP_BOUND:?}"
            ));
            return world.history;
        }
    }
    if tokio::time::timeout(OP_BOUND * 2, world.drain())
        .await
        .is_err()
    {
        world.history.failures.push(format!(
            "the final drain did not finish within {:?}",
            OP_BOUND * 2
        ));
    }
    world.close().await;
    world.history
}

impl World<'_> {
    fn fail(&mut self, what: String) {
        self.history.failures.push(what);
    }

    fn trace(&mut self, index: usize, line: String) {
        self.history.trace.push(format!("{index}: {line}"));
    }

    async fn play(&mut self, index: usize, op: &Op) {
        match op {
            Op::Publish { key } => {
                let key = key.map(|k| format!("k{k}"));
                match self
                    .photon
                    .publish(
                        &self.topic,
                        key.as_deref(),
                        json!(null),
                        json!({"op": index}),
                    )
                    .await
                {
                    Ok(appended) => {
                        self.history.published.insert(appended.seq, key.clone());
                        self.trace(index, format!("published {} {key:?}", appended.seq));
                    }
                    Err(err) => self.fail(format!("operation {index}: publish failed: {err}")),
                }
            }
            Op::PublishLater { key, delay_ms } => {
                let key = key.map(|k| format!("k{k}"));
                let delay = Duration::from_millis(u64::from(*delay_ms));
                let payload = json!({"op": index, "later": true});
                let published = self
                    .photon
                    .publish_after(&self.topic, key.as_deref(), json!(null), payload, delay)
                    .await;
                match published {
                    Ok(scheduled) => {
                        self.history
                            .scheduled
                            .insert(index, (key.clone(), scheduled.due_at));
                        self.trace(index, format!("published {key:?} for {delay:?} later"));
                    }
                    Err(err) => {
                        self.fail(format!("operation {index}: publish_after failed: {err}"))
                    }
                }
            }
            Op::PublishBatch { keys } => {
                let events: Vec<BatchEvent> = keys
                    .iter()
                    .map(|key| {
                        let mut event = BatchEvent::new(json!({"op": index}));
                        event.key = key.map(|k| format!("k{k}"));
                        event
                    })
                    .collect();
                match self.photon.publish_batch(&self.topic, events).await {
                    Ok(appended) => {
                        for (stored, key) in appended.iter().zip(keys) {
                            self.history
                                .published
                                .insert(stored.seq, key.map(|k| format!("k{k}")));
                        }
                        self.trace(index, format!("published a batch of {}", appended.len()));
                    }
                    Err(err) => self.fail(format!("operation {index}: batch failed: {err}")),
                }
            }
            Op::Read { sub, count, ack } => self.read(index, *sub, *count, *ack).await,
            Op::Flush { sub } => self.flush(index, *sub).await,
            Op::Drop { sub } => {
                self.subscriptions.remove(sub);
                self.trace(index, format!("dropped subscription {sub}"));
            }
            Op::Join { member } => self.join(index, *member),
            Op::Take { member, count } => self.take(index, *member, *count).await,
            Op::Leave { member } => {
                if let Some(left) = self.members.remove(member) {
                    left.stream.leave().await;
                    self.trace(index, format!("member {member} left"));
                }
            }
            Op::Abort { member } => {
                self.members.remove(member);
                self.trace(index, format!("member {member} aborted"));
            }
            Op::Truncate { keep } => self.truncate(index, *keep).await,
            Op::Restart => self.restart(index).await,
        }
    }

    fn subscription_name(&self, sub: u8) -> String {
        format!("{}{sub}", self.subscription_prefix)
    }

    fn open_subscription(&mut self, sub: u8) {
        if self.subscriptions.contains_key(&sub) {
            return;
        }
        let truncated = self.history.truncated_before;
        let log = self.history.durable.entry(sub).or_default();
        log.runs.push(Vec::new());
        log.truncated_by_run.push(truncated);
        let run = log.runs.len() - 1;
        let subscription = self
            .photon
            .durable(&self.subscription_name(sub), &self.topic, None);
        self.subscriptions.insert(sub, (subscription, run));
    }

    /// Takes up to `count` events of subscription `sub`, stopping once it is quiet.
    async fn read(&mut self, index: usize, sub: u8, count: u8, ack: bool) {
        self.open_subscription(sub);
        let mut taken = 0;
        let mut seqs = Vec::new();
        while taken < count {
            let Some((subscription, run)) = self.subscriptions.get_mut(&sub) else {
                return;
            };
            let run = *run;
            let item = match tokio::time::timeout(QUIET, subscription.next()).await {
                Err(_) => break,
                Ok(None) => {
                    self.fail(format!("operation {index}: subscription {sub} ended"));
                    return;
                }
                Ok(Some(item)) => item,
            };
            match item {
                Ok(event) => {
                    taken += 1;
                    seqs.push(event.seq);
                    let acked = ack && self.acknowledge(index, sub, &event).await;
                    let log = self.history.durable.entry(sub).or_default();
                    log.runs[run].push(Delivered {
                        seq: event.seq,
                        key: event.topic_key.clone(),
                        acked,
                    });
                }
                Err(PhotonError::Gap { from, to, .. }) => {
                    let log = self.history.durable.entry(sub).or_default();
                    log.gaps.push((from, to));
                    log.gap_runs.push(run);
                    self.trace(index, format!("subscription {sub}: gap {from}..{to}"));
                }
                Err(err) => {
                    self.fail(format!(
                        "operation {index}: subscription {sub} error: {err}"
                    ));
                    return;
                }
            }
        }
        self.trace(
            index,
            format!("subscription {sub} took {taken} (acknowledged: {ack}): {seqs:?}"),
        );
    }

    async fn acknowledge(&mut self, index: usize, sub: u8, event: &Event) -> bool {
        let Some((subscription, _)) = self.subscriptions.get(&sub) else {
            return false;
        };
        match subscription.ack(event).await {
            Ok(()) => true,
            Err(err) => {
                self.fail(format!(
                    "operation {index}: subscription {sub} refused the ack of {}: {err}",
                    event.seq
                ));
                false
            }
        }
    }

    async fn flush(&mut self, index: usize, sub: u8) {
        let Some((subscription, _)) = self.subscriptions.get(&sub) else {
            return;
        };
        if let Err(err) = subscription.flush().await {
            self.fail(format!("operation {index}: flush of {sub} failed: {err}"));
            return;
        }
        let name = self.subscription_name(sub);
        match self.photon.checkpoint(&name, &self.topic, None).await {
            Ok(checkpoint) => {
                self.history
                    .durable
                    .entry(sub)
                    .or_default()
                    .checkpoints
                    .push(checkpoint);
                self.trace(
                    index,
                    format!("subscription {sub} checkpoint {checkpoint:?}"),
                );
            }
            Err(err) => self.fail(format!("operation {index}: checkpoint of {sub}: {err}")),
        }
    }

    fn join(&mut self, index: usize, member: u8) {
        if self.members.contains_key(&member) || !self.port.capabilities().consumer_groups {
            return;
        }
        let Some(coordination) = self.port.group_coordination() else {
            return;
        };
        let run = *self
            .joins
            .entry(member)
            .and_modify(|run| *run += 1)
            .or_insert(0);
        let name = format!("member{member}");
        let options = GroupOptions::new(&name)
            .partitions(self.schedule.partitions)
            .heartbeat(Duration::from_millis(100))
            .lease(Duration::from_secs(2));
        let request = GroupRequest {
            group: self.group.clone(),
            member: name,
            topic: self.topic.clone(),
            start: StartAt::Beginning,
        };
        let stream = join(self.port.clone(), coordination, request, options);
        self.members.insert(member, Member { stream, run });
        self.trace(index, format!("member {member} joined"));
    }

    /// Member `member` takes up to `count` events, acknowledging each.
    async fn take(&mut self, index: usize, member: u8, count: u8) {
        let mut taken = 0;
        while taken < count {
            let Some(joined) = self.members.get_mut(&member) else {
                return;
            };
            let run = joined.run;
            let item = match tokio::time::timeout(QUIET, joined.stream.next()).await {
                Err(_) => break,
                Ok(None) => {
                    self.fail(format!("operation {index}: member {member}'s stream ended"));
                    self.members.remove(&member);
                    return;
                }
                Ok(Some(item)) => item,
            };
            match item {
                Ok(delivery) => {
                    taken += 1;
                    let delivered_at = Instant::now();
                    let Some(ownership) = delivery.ack.ownership() else {
                        self.fail(format!(
                            "operation {index}: a group delivery without a lease"
                        ));
                        return;
                    };
                    let acked_at = match delivery.ack.ack().await {
                        Ok(()) => Some(Instant::now()),
                        // The lease lapsed meanwhile: the next owner has the event.
                        Err(PhotonError::Fenced { .. }) => None,
                        Err(err) => {
                            self.fail(format!("operation {index}: group ack failed: {err}"));
                            None
                        }
                    };
                    self.history.group.push(GroupDelivery {
                        member,
                        run,
                        seq: delivery.record.seq,
                        key: delivery.record.topic_key.clone(),
                        lease: (ownership.partition, ownership.epoch),
                        delivered_at,
                        acked_at,
                    });
                }
                Err(PhotonError::Gap { from, to, .. }) => {
                    self.history.group_gaps.push((from, to));
                }
                Err(err) => {
                    self.fail(format!("operation {index}: member {member} error: {err}"));
                    return;
                }
            }
        }
        self.trace(index, format!("member {member} took {taken}"));
    }

    async fn truncate(&mut self, index: usize, keep: u8) {
        if !self.port.capabilities().truncate {
            return;
        }
        let Some(head) = self.history.published.keys().next_back().copied() else {
            return;
        };
        let before = head - i64::from(keep);
        if before <= self.history.truncated_before {
            return;
        }
        match self.port.truncate_before(&self.topic, before).await {
            Ok(removed) => {
                self.history.truncated_before = before;
                for sub in self.subscriptions.keys() {
                    if let Some(log) = self.history.durable.get_mut(sub) {
                        if let Some(last) = log.truncated_by_run.last_mut() {
                            *last = before;
                        }
                    }
                }
                self.trace(
                    index,
                    format!("truncated before {before}: {removed} removed"),
                );
            }
            Err(err) => self.fail(format!("operation {index}: truncate failed: {err}")),
        }
    }

    async fn restart(&mut self, index: usize) {
        self.subscriptions.clear();
        self.members.clear();
        // Shutting the instance down stops its executor too.
        self.executor = None;
        if let Err(err) = self.photon.shutdown().await {
            self.fail(format!("operation {index}: shutdown failed: {err}"));
        }
        match instance(self.factory, self.schedule, &self.scheduler).await {
            Ok((photon, port)) => {
                self.photon = photon;
                self.port = port;
                self.instance_run += 1;
                if !self.history.scheduled.is_empty() {
                    if let Err(err) = self.photon.start_scheduler() {
                        self.fail(format!(
                            "operation {index}: the scheduler did not start: {err}"
                        ));
                    }
                }
                self.start_handler(index);
                self.trace(index, "restarted".into());
            }
            Err(err) => self.fail(format!("operation {index}: reopening failed: {err}")),
        }
    }

    /// Starts the schedule's executor handler on the current instance, if it has one.
    fn start_handler(&mut self, index: usize) {
        if !self.schedule.handler {
            return;
        }
        let durable = format!("{}h", self.subscription_prefix);
        match handlers::start(
            &self.photon,
            &durable,
            &self.topic,
            self.schedule.handler_batch,
            self.instance_run,
            &self.handler_log,
        ) {
            Ok(executor) => self.executor = Some(executor),
            Err(err) => self.fail(format!(
                "operation {index}: the handler did not start: {err}"
            )),
        }
    }

    /// Waits until the handler is idle, then records its attempts and dead letters.
    async fn drain_handler(&mut self) {
        let Some(executor) = &self.executor else {
            return;
        };
        match executor.wait_idle_for(DRAIN_BOUND).await {
            Ok(()) => {}
            // Ports without `head_seq`: wait until the handler's own log shows every event
            // owed handled or failed for good.
            Err(PhotonError::Unsupported { .. }) => self.wait_handled().await,
            Err(err) => self.fail(format!("the handler did not become idle: {err}")),
        }
        self.history.handled = self.handler_log.handled();
        let origin = self.history.handled.iter().map(|h| h.started).min();
        for handled in self.history.handled.clone() {
            let at = origin.map_or(Duration::ZERO, |origin| handled.started - origin);
            self.trace(
                usize::MAX,
                format!(
                    "handler (instance {}) at {at:?}: seq {} {:?} {:?}{} {}",
                    handled.run,
                    handled.seq,
                    handled.key,
                    handled.behaviour,
                    handled
                        .batch
                        .map_or(String::new(), |(id, at)| format!(" in batch {id} at {at}")),
                    if handled.succeeded {
                        "succeeded"
                    } else {
                        "failed"
                    }
                ),
            );
        }
        match self.photon.dead_letters(&self.topic).await {
            Ok(letters) => {
                self.history.dead_letters = Some(letters.iter().map(|l| l.original.seq).collect());
            }
            // A port that cannot list a topic: the letters are not counted.
            Err(PhotonError::Unsupported { .. }) => {}
            Err(err) => self.fail(format!("cannot list the dead letters: {err}")),
        }
    }

    /// Waits (bounded by [`DRAIN_BOUND`]) until the handler's log shows every stored event
    /// that no retention removed handled successfully or failed for good.
    async fn wait_handled(&mut self) {
        let deadline = Instant::now() + DRAIN_BOUND;
        loop {
            let handled = self.handler_log.handled();
            let done: std::collections::HashSet<i64> = handled
                .iter()
                .filter(|h| h.succeeded || h.for_good)
                .map(|h| h.seq)
                .collect();
            let missing: Vec<i64> = self
                .history
                .published
                .keys()
                .filter(|seq| **seq >= self.history.truncated_before && !done.contains(seq))
                .copied()
                .collect();
            if missing.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                self.fail(format!(
                    "the handler did not handle {} events within {DRAIN_BOUND:?}: {:?}",
                    missing.len(),
                    &missing[..missing.len().min(10)]
                ));
                return;
            }
            // Polls the handler's log; the handler runs on its own tasks.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether `seq` is accounted for by `delivered` or one of `gaps`.
    fn covered(seq: i64, delivered: &std::collections::HashSet<i64>, gaps: &[(i64, i64)]) -> bool {
        delivered.contains(&seq) || gaps.iter().any(|(from, to)| (*from..*to).contains(&seq))
    }

    /// Reads every subscription used and the group until each accounted for every stored
    /// event (or went quiet for a while).
    async fn drain(&mut self) {
        self.await_delayed().await;
        self.drain_handler().await;
        let used: Vec<u8> = self.history.durable.keys().copied().collect();
        for sub in used {
            self.subscriptions.remove(&sub);
            self.open_subscription(sub);
            let deadline = Instant::now() + DRAIN_BOUND;
            loop {
                let log = &self.history.durable[&sub];
                let delivered: std::collections::HashSet<i64> =
                    log.runs.iter().flatten().map(|d| d.seq).collect();
                let missing = self
                    .history
                    .published
                    .keys()
                    .any(|seq| !Self::covered(*seq, &delivered, &log.gaps));
                if !missing || Instant::now() > deadline {
                    break;
                }
                // Each read waits up to `QUIET` for the next event: a slow port is waited
                // for, bounded by the deadline.
                self.read(usize::MAX, sub, 50, true).await;
            }
        }
        if self.history.group.is_empty() && self.joins.is_empty() {
            return;
        }
        // One member that stays until the group handed out everything not acknowledged.
        for member in self.members.keys().copied().collect::<Vec<_>>() {
            if let Some(left) = self.members.remove(&member) {
                left.stream.leave().await;
            }
        }
        self.join(usize::MAX, 0);
        let deadline = Instant::now() + DRAIN_BOUND;
        loop {
            let acked: std::collections::HashSet<i64> = self
                .history
                .group
                .iter()
                .filter(|d| d.acked_at.is_some())
                .map(|d| d.seq)
                .collect();
            let missing = self.history.published.keys().any(|seq| {
                *seq >= self.history.truncated_before
                    && !Self::covered(*seq, &acked, &self.history.group_gaps)
            });
            if !missing || Instant::now() > deadline {
                break;
            }
            self.take(usize::MAX, 0, 50).await;
        }
    }

    /// Starts a second instance reading the topic live from its start, recording the
    /// delayed events as they appear.
    async fn start_watcher(&mut self) {
        let (photon, _) = match instance(self.factory, self.schedule, &self.scheduler).await {
            Ok(opened) => opened,
            Err(err) => return self.fail(format!("cannot open the watcher's port: {err}")),
        };
        let mut stream = photon.subscribe(&self.topic, None, None);
        let watched = Arc::clone(&self.watched);
        let task = tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                let seen_at = chrono::Utc::now();
                let mut watched = watched.lock().unwrap_or_else(|p| p.into_inner());
                match item {
                    Ok(event) if event.payload["later"] == true => {
                        let op = event.payload["op"].as_u64().unwrap_or(u64::MAX);
                        watched.0.push(Appeared {
                            op: usize::try_from(op).unwrap_or(usize::MAX),
                            seq: event.seq,
                            key: event.topic_key,
                            seen_at,
                        });
                    }
                    Ok(_) => {}
                    Err(PhotonError::Gap { from, to, .. }) => watched.1.push((from, to)),
                    Err(_) => {}
                }
            }
        });
        self.watcher = Some((photon, task));
    }

    /// Waits until every event published for later appeared (or a retention sweep may
    /// have removed it), then counts those that appeared as stored.
    async fn await_delayed(&mut self) {
        let deadline = Instant::now() + DRAIN_BOUND;
        loop {
            let (appeared, gaps) = {
                let watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
                (watched.0.len(), watched.1.len())
            };
            let waiting = self.history.scheduled.len().saturating_sub(appeared);
            if waiting == 0 || (gaps > 0 && Instant::now() > deadline) {
                break;
            }
            if Instant::now() > deadline {
                self.fail(format!(
                    "{waiting} of {} events published for later did not appear within {DRAIN_BOUND:?}",
                    self.history.scheduled.len()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let appeared = self
            .watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone();
        for event in &appeared {
            self.history.published.insert(event.seq, event.key.clone());
        }
    }

    async fn close(&mut self) {
        if let Some((watcher, task)) = self.watcher.take() {
            task.abort();
            let _ = watcher.shutdown().await;
        }
        let (appeared, gaps) =
            std::mem::take(&mut *self.watched.lock().unwrap_or_else(|p| p.into_inner()));
        self.history.appeared = appeared;
        self.history.watcher_gaps = gaps;
        self.subscriptions.clear();
        for member in self.members.keys().copied().collect::<Vec<_>>() {
            if let Some(left) = self.members.remove(&member) {
                left.stream.leave().await;
            }
        }
        if let Err(err) = self.photon.shutdown().await {
            self.fail(format!("final shutdown failed: {err}"));
        }
    }
}
