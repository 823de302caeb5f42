//! A member's side of the group protocol: heartbeats, the deterministic assignment, lease
//! acquisition, renewal and release, fenced partition commits, and the stream of
//! deliveries of the partitions it owns.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::MissedTickBehavior;

use crate::error::{PhotonError, Result};
use crate::event::Record;
use crate::group::assignment::sticky;
use crate::group::coordination::{
    owner_name, Claim, GroupCoordination, GroupScope, Heartbeat, HeldLease, LiveMember,
};
use crate::group::layout::{self, current_leases, Layout};
use crate::group::options::GroupOptions;
use crate::group::partition::{
    GroupAck, Handout, Owned, Redelivery, UndecodableAck, UndecodableAcks,
};
use crate::group::reader::SharedReader;
use crate::metrics::{Consumer, ConsumerMetrics};
use crate::port::{Delivery, DeliveryStream, GroupRequest, StartAt, StoragePort};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only map inserts, removals and clones happen under these locks.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How a member leaves.
enum Leave {
    /// Wait (up to the lease) for handed-out events to be acknowledged, then release.
    Drain(oneshot::Sender<()>),
    /// Release at once (the stream was dropped).
    Now,
}

struct Member {
    scope: GroupScope,
    options: GroupOptions,
    /// Unique to this incarnation: the lease owner.
    owner: String,
    start: StartAt,
    port: Arc<dyn StoragePort>,
    coordination: Arc<dyn GroupCoordination>,
    owned: Mutex<BTreeMap<u32, Arc<Owned>>>,
    /// Reads the topic once for the owned partitions the store cannot read alone.
    shared: SharedReader,
    out: mpsc::UnboundedSender<Handout>,
    metrics: ConsumerMetrics,
    /// The store splits the topic itself (broker shards): the layout is the shard count.
    sharded: bool,
    /// Waiting for members of another partition count to leave (logged once).
    waiting: AtomicBool,
}

/// What one heartbeat should hold.
struct Plan {
    /// The layout to hold partitions of; `None`: hold nothing (waiting), or keep what is
    /// held when the assignment could not be read.
    layout: Option<Layout>,
    /// The partitions (indexes) this member should own.
    mine: Vec<u32>,
    /// Partitions whose live lease another owner holds.
    others: Vec<bool>,
    /// Keep every partition held (the assignment could not be read): nothing moves.
    keep: bool,
}

impl Plan {
    fn wait() -> Self {
        Self {
            layout: None,
            mine: Vec::new(),
            others: Vec::new(),
            keep: false,
        }
    }

    /// Keeps the partitions held (a transient read error): nothing moves.
    fn keep() -> Self {
        Self {
            keep: true,
            ..Self::wait()
        }
    }

    fn held_by_another(&self, partition: u32) -> bool {
        self.others
            .get(partition as usize)
            .copied()
            .unwrap_or(false)
    }
}

/// [`StoragePort::subscribe_group`] of a port whose groups run on its
/// [`StoragePort::group_coordination`]: [`join`] with default options, the member named by
/// the request. A port without the primitive answers with its `Unsupported` error.
///
/// Must be called within a tokio runtime (the member's protocol runs in a task).
pub fn subscribe_group<P: StoragePort + Clone>(port: &P, request: GroupRequest) -> DeliveryStream {
    let Some(coordination) = port.group_coordination() else {
        let unsupported = port.unsupported("subscribe_group");
        return Box::pin(futures::stream::once(std::future::ready(Err(unsupported))));
    };
    let options = GroupOptions::new(request.member.clone());
    Box::pin(join(Arc::new(port.clone()), coordination, request, options))
}

/// Joins a group through a port's [`GroupCoordination`]: the member heartbeats, owns the
/// partitions the deterministic assignment gives it (as soon as their leases are free),
/// and streams their events from each partition's checkpoint.
///
/// Must be called within a tokio runtime (the member's protocol runs in a task).
pub fn join(
    port: Arc<dyn StoragePort>,
    coordination: Arc<dyn GroupCoordination>,
    request: GroupRequest,
    options: GroupOptions,
) -> GroupMembership {
    let (out, receiver) = mpsc::unbounded_channel();
    let redeliver: Redelivery = Arc::default();
    let failed = |err: PhotonError, out: &mpsc::UnboundedSender<Handout>| {
        let _ = out.send(Handout::Error(err));
    };
    let mut membership = GroupMembership {
        receiver,
        undecodable: UndecodableAcks::default(),
        redeliver: Arc::clone(&redeliver),
        out: out.downgrade(),
        leave: None,
    };
    let mut options = options;
    let shards = coordination.topic_partitions(&request.topic);
    if let Some(partitions) = shards {
        options.partitions = partitions;
    }
    if let Err(err) = options.validate() {
        failed(err, &out);
        return membership;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        failed(
            PhotonError::Closed(format!("group {} (no tokio runtime)", request.group)),
            &out,
        );
        return membership;
    };
    let shared = SharedReader::new(
        request.topic.clone(),
        options.partitions,
        Arc::clone(&port),
        out.clone(),
    );
    let metrics = ConsumerMetrics::new(
        port.label(),
        &request.topic,
        Consumer::Group(&request.group),
    );
    let member = Arc::new(Member {
        metrics,
        scope: GroupScope::new(request.group, request.topic),
        owner: format!("{}#{}", options.member, uuid::Uuid::new_v4().simple()),
        options,
        start: request.start,
        port,
        coordination,
        owned: Mutex::new(BTreeMap::new()),
        shared,
        out,
        sharded: shards.is_some(),
        waiting: AtomicBool::new(false),
    });
    let (leave, leaving) = oneshot::channel();
    membership.leave = Some(leave);
    runtime.spawn(member.run(leaving));
    membership
}

impl Member {
    async fn run(self: Arc<Self>, mut leaving: oneshot::Receiver<Leave>) {
        let mut heartbeat = tokio::time::interval(self.options.heartbeat);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut commit = tokio::time::interval(self.options.commit_interval);
        commit.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                leave = &mut leaving => {
                    match leave {
                        Ok(Leave::Drain(done)) => {
                            self.leave(true).await;
                            let _ = done.send(());
                        }
                        Ok(Leave::Now) | Err(_) => self.leave(false).await,
                    }
                    return;
                }
                _ = heartbeat.tick() => self.rebalance().await,
                _ = commit.tick() => self.commit_all().await,
            }
        }
    }

    fn owned(&self) -> Vec<Arc<Owned>> {
        lock(&self.owned).values().cloned().collect()
    }

    fn forget(&self, owned: &Arc<Owned>) {
        owned.fence();
        self.shared.remove(owned);
        let mut map = lock(&self.owned);
        if map
            .get(&owned.partition)
            .is_some_and(|o| Arc::ptr_eq(o, owned))
        {
            map.remove(&owned.partition);
        }
    }

    fn local_deadline(&self, sent: Instant) -> Instant {
        sent + self.options.lease - self.options.safety_margin()
    }

    /// One heartbeat: renews what stays, drains and releases what moved, acquires what
    /// became ours.
    async fn rebalance(&self) {
        let options = &self.options;
        let members = match self
            .coordination
            .heartbeat(
                &self.scope,
                Heartbeat {
                    member: &options.member,
                    owner: &self.owner,
                    partitions: options.partitions,
                    ttl: options.presence(),
                },
            )
            .await
        {
            Ok(members) => members,
            Err(err) => {
                // Leases lapse on their own deadline; the next heartbeat tries again.
                tracing::warn!(scope = ?self.scope, %err, "group heartbeat failed");
                return;
            }
        };
        let plan = match self.plan(&members).await {
            Ok(plan) => plan,
            Err(err) => {
                tracing::warn!(scope = ?self.scope, %err, "group assignment unreadable; keeping the partitions held");
                Plan::keep()
            }
        };
        let mut renewing = Vec::new();
        for owned in self.owned() {
            let stays = plan.keep
                || plan
                    .layout
                    .is_some_and(|layout| layout.id(owned.partition) == owned.id)
                    && plan.mine.contains(&owned.partition);
            if !stays && !owned.draining() {
                owned.drain();
            }
            if owned.draining() {
                let since = owned.drain();
                if owned.in_flight() == 0 || since.elapsed() >= options.lease {
                    self.hand_back(&owned).await;
                    continue;
                }
            }
            if owned.lapsed() {
                // Events read after the deadline were passed over, not handed out: a renewal
                // now would keep a reader that skipped them. Giving the lease back makes the
                // next owner (this member again, when the assignment says so) read the
                // partition anew after its checkpoint.
                tracing::warn!(scope = ?self.scope, partition = owned.partition, "group lease renewals came too late; reading the partition again from its checkpoint");
                self.hand_back(&owned).await;
                continue;
            }
            renewing.push(owned);
        }
        self.renew(&renewing).await;
        let Some(layout) = plan.layout else {
            return;
        };
        let mut shared = Vec::new();
        for partition in plan.mine.iter().copied() {
            if lock(&self.owned).contains_key(&partition) || plan.held_by_another(partition) {
                continue;
            }
            let sent = Instant::now();
            let id = layout.id(partition);
            let claim = Claim {
                partition: id,
                owner: &self.owner,
                ttl: options.lease,
            };
            match self.coordination.acquire(&self.scope, claim).await {
                Ok(Some(epoch)) => {
                    shared.extend(self.take((partition, id), epoch, sent).await);
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(scope = ?self.scope, %err, "group lease acquisition failed")
                }
            }
        }
        if !shared.is_empty() {
            // Together, so that the partitions taken in one heartbeat restart the shared
            // reader at most once.
            self.shared.add(shared);
        }
    }

    /// Renews the leases of `renewing` in one call (a store may write them as one).
    async fn renew(&self, renewing: &[Arc<Owned>]) {
        if renewing.is_empty() {
            return;
        }
        let sent = Instant::now();
        let leases: Vec<(u32, u64)> = renewing.iter().map(|o| (o.id, o.epoch)).collect();
        let renewed = self
            .coordination
            .renew_many(&self.scope, &self.owner, &leases, self.options.lease)
            .await;
        for (owned, renewed) in renewing.iter().zip(renewed) {
            match renewed {
                Ok(true) => owned.extend(self.local_deadline(sent)),
                Ok(false) => {
                    tracing::warn!(scope = ?self.scope, partition = owned.partition, "group lease lost");
                    self.forget(owned);
                }
                Err(err) => {
                    tracing::warn!(scope = ?self.scope, %err, "group lease renewal failed")
                }
            }
        }
    }

    /// The layout this member runs under and the partitions it should own.
    async fn plan(&self, members: &[LiveMember]) -> Result<Plan> {
        let Some(layout) = self.layout(members).await? else {
            return Ok(Plan::wait());
        };
        let leases = self.coordination.leases(&self.scope).await?;
        let mut holders = vec![None; layout.count as usize];
        let mut others = vec![false; layout.count as usize];
        for (index, lease) in current_leases(&layout, &leases) {
            if lease.live {
                holders[index as usize] = Some(owner_name(&lease.owner).to_owned());
                others[index as usize] = lease.owner != self.owner;
            }
        }
        let names: Vec<String> = members
            .iter()
            .filter(|member| member.partitions == layout.count)
            .map(|member| member.name.clone())
            .collect();
        Ok(Plan {
            layout: Some(layout),
            mine: sticky(&names, &self.options.member, &holders),
            others,
            keep: false,
        })
    }

    /// The group's layout when it has this member's partition count; `None` while members
    /// of another stored count are alive (then this member waits, owning nothing). Stores
    /// this member's count when the group has none, or when nobody of the stored count is
    /// left.
    async fn layout(&self, members: &[LiveMember]) -> Result<Option<Layout>> {
        let count = self.options.partitions;
        if self.sharded {
            return Ok(Some(Layout::first(count)));
        }
        let stored = layout::load(self.coordination.as_ref(), &self.scope).await?;
        match stored {
            Some(stored) if stored.count == count => {
                self.waiting.store(false, Ordering::Relaxed);
                return Ok(Some(stored));
            }
            Some(stored) if members.iter().any(|m| m.partitions == stored.count) => {
                if !self.waiting.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        scope = ?self.scope, stored = stored.count, mine = count,
                        "group has another partition count; this member waits until no member of that count is left, then moves the group to its count"
                    );
                }
                return Ok(None);
            }
            _ => {}
        }
        let switched = layout::switch(
            self.coordination.as_ref(),
            &self.scope,
            &self.owner,
            stored,
            count,
        )
        .await?;
        Ok(switched)
    }

    /// Starts reading a newly acquired partition after its checkpoint: through its own
    /// reader where the store reads the partition alone; otherwise returns it with its
    /// start, for the member's shared reader.
    async fn take(
        &self,
        (partition, id): (u32, u32),
        epoch: u64,
        sent: Instant,
    ) -> Option<(Arc<Owned>, StartAt)> {
        let owned = Owned::new(
            self.scope.clone(),
            (partition, id),
            epoch,
            self.owner.clone(),
            self.local_deadline(sent),
            self.options.read_ahead,
        );
        lock(&self.owned).insert(partition, Arc::clone(&owned));
        let start = match self.start_of(&owned).await {
            Ok(start) => start,
            Err(err) => {
                tracing::warn!(scope = ?self.scope, partition, %err, "cannot load a group partition position");
                self.release(&owned).await;
                return None;
            }
        };
        match self
            .coordination
            .partition_records(&self.scope.topic, partition, start)
        {
            Some(records) => {
                owned.start_reader(records, self.out.clone());
                None
            }
            None => Some((owned, start)),
        }
    }

    /// Where a partition's reader starts: after its checkpoint; a partition without one
    /// starts where the request says, and a tail start is pinned (committed) at once so
    /// that a later owner does not start at a later tail.
    async fn start_of(&self, owned: &Owned) -> Result<StartAt> {
        let stored = self
            .coordination
            .load_checkpoint(&self.scope, owned.id)
            .await?;
        if let Some(seq) = stored {
            owned.committed(seq);
            return Ok(StartAt::AfterSeq(seq));
        }
        if self.start != StartAt::Tail {
            return Ok(self.start);
        }
        // Pinned at the partition's own head where the store tells it (a shard's head, not
        // the fastest shard's), else at the topic's.
        let head = match self
            .coordination
            .partition_head(&self.scope.topic, owned.partition)
            .await
        {
            Some(head) => head?,
            None if self.port.capabilities().head_seq => self
                .port
                .head_seq(&self.scope.topic, None)
                .await?
                .unwrap_or(0),
            None => return Ok(self.start),
        };
        let pinned = self
            .coordination
            .commit(&self.scope, self.lease(owned), head)
            .await;
        self.count_commit(&pinned);
        pinned?;
        owned.committed(head);
        self.metrics.partition_lag(owned.partition, head, head);
        Ok(StartAt::AfterSeq(head))
    }

    /// Commits the acknowledged run of every owned partition, then sets the lag of those
    /// committed.
    async fn commit_all(&self) {
        let mut committed = Vec::new();
        for owned in self.owned() {
            committed.extend(self.commit(&owned).await);
        }
        self.refresh_lag(&committed).await;
    }

    /// Commits a partition's acknowledged run; the partition and seq when stored.
    async fn commit(&self, owned: &Arc<Owned>) -> Option<(u32, i64)> {
        let seq = owned.to_commit()?;
        let result = self
            .coordination
            .commit(&self.scope, self.lease(owned), seq)
            .await;
        self.count_commit(&result);
        match result {
            Ok(()) => {
                owned.committed(seq);
                return Some((owned.partition, seq));
            }
            Err(err @ PhotonError::Fenced { .. }) => {
                tracing::warn!(scope = ?self.scope, %err, "group commit refused: partition lost");
                self.forget(owned);
            }
            Err(err) => {
                tracing::warn!(scope = ?self.scope, %err, "group commit failed; will retry")
            }
        }
        None
    }

    fn count_commit(&self, result: &Result<()>) {
        match result {
            Ok(()) => self.metrics.commit(),
            Err(_) => self.metrics.commit_error(),
        }
    }

    /// Sets the lag gauge of each committed `(partition, seq)`, reading the head once.
    async fn refresh_lag(&self, committed: &[(u32, i64)]) {
        if committed.is_empty() || !self.port.capabilities().head_seq {
            return;
        }
        match self.port.head_seq(&self.scope.topic, None).await {
            Ok(head) => {
                for (partition, seq) in committed {
                    self.metrics
                        .partition_lag(*partition, head.unwrap_or(0), *seq);
                }
            }
            Err(err) => {
                tracing::debug!(scope = ?self.scope, %err, "head seq unreadable; lag not updated")
            }
        }
    }

    /// The lease `owned` is held under, as the store knows it.
    fn lease(&self, owned: &Owned) -> HeldLease<'_> {
        HeldLease {
            partition: owned.id,
            owner: &self.owner,
            epoch: owned.epoch,
        }
    }

    /// Commits what was acknowledged, then gives the lease back.
    async fn hand_back(&self, owned: &Arc<Owned>) {
        let committed = self.commit(owned).await;
        self.release(owned).await;
        self.refresh_lag(committed.as_slice()).await;
    }

    async fn release(&self, owned: &Arc<Owned>) {
        self.forget(owned);
        if let Err(err) = self
            .coordination
            .release(&self.scope, self.lease(owned))
            .await
        {
            tracing::warn!(scope = ?self.scope, %err, "group lease release failed; it will expire");
        }
    }

    async fn leave(&self, drain: bool) {
        let owned = self.owned();
        for partition in &owned {
            partition.drain();
        }
        if drain {
            let deadline = Instant::now() + self.options.lease - self.options.safety_margin();
            while owned.iter().any(|o| o.in_flight() > 0 && o.accepts_acks())
                && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        for partition in &owned {
            self.hand_back(partition).await;
        }
        if let Err(err) = self.coordination.leave(&self.scope, &self.owner).await {
            tracing::warn!(scope = ?self.scope, %err, "group leave failed; the heartbeat will expire");
        }
    }
}

/// A member's stream of deliveries: events of the partitions it owns, each partition in
/// seq order. An event is handed out only while its partition's lease is held (checked
/// against the local deadline at the moment it is handed out).
///
/// Dropping the stream leaves the group at once (acknowledged events are committed and
/// the leases released); [`GroupMembership::leave`] first waits for handed-out events.
pub struct GroupMembership {
    receiver: mpsc::UnboundedReceiver<Handout>,
    undecodable: UndecodableAcks,
    redeliver: Redelivery,
    /// Weak, so that the stream ends once the member's task and readers are gone.
    out: mpsc::WeakUnboundedSender<Handout>,
    leave: Option<oneshot::Sender<Leave>>,
}

impl std::fmt::Debug for GroupMembership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMembership").finish_non_exhaustive()
    }
}

impl GroupMembership {
    /// Leaves the group gracefully: stops handing out events, waits (up to the lease) for
    /// those handed out to be acknowledged or given back, commits, and releases the leases
    /// so that the other members take over at once.
    pub async fn leave(mut self) {
        if let Some(leave) = self.leave.take() {
            let (done, finished) = oneshot::channel();
            if leave.send(Leave::Drain(done)).is_ok() {
                let _ = finished.await;
            }
        }
    }

    /// Where the acknowledgements of the undecodable records this member hands out as
    /// error items wait to be taken: the partition's position stays before such a record
    /// until it is acknowledged.
    pub fn undecodable_acks(&self) -> UndecodableAcks {
        self.undecodable.clone()
    }

    fn delivery(&self, owned: Arc<Owned>, record: Record) -> Delivery {
        owned.handed_out();
        Delivery {
            record: record.clone(),
            ack: Box::new(GroupAck {
                owned,
                record,
                redeliver: Arc::clone(&self.redeliver),
                out: self.out.clone(),
                done: AtomicBool::new(false),
            }),
        }
    }
}

impl Drop for GroupMembership {
    fn drop(&mut self) {
        if let Some(leave) = self.leave.take() {
            let _ = leave.send(Leave::Now);
        }
    }
}

impl Stream for GroupMembership {
    type Item = Result<Delivery>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let given_back = lock(&self.redeliver).pop_front();
            if let Some((owned, record)) = given_back {
                if owned.hands_out() {
                    return Poll::Ready(Some(Ok(self.delivery(owned, record))));
                }
                owned.pass_over();
                continue;
            }
            match self.receiver.poll_recv(cx) {
                Poll::Ready(Some(Handout::Record(owned, record))) => {
                    if owned.hands_out() {
                        return Poll::Ready(Some(Ok(self.delivery(owned, record))));
                    }
                    owned.pass_over();
                }
                Poll::Ready(Some(Handout::Undecodable(owned, seq, err))) => {
                    if owned.hands_out() {
                        owned.handed_out();
                        let ack = UndecodableAck {
                            owned,
                            seq,
                            done: AtomicBool::new(false),
                        };
                        self.undecodable.insert(seq, Box::new(ack));
                        return Poll::Ready(Some(Err(err)));
                    }
                    owned.pass_over();
                }
                Poll::Ready(Some(Handout::Error(err))) => return Poll::Ready(Some(Err(err))),
                Poll::Ready(Some(Handout::Wake)) => {}
                // The member holds a sender while the stream lives.
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
