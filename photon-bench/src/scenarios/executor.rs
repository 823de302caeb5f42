//! The handler executor beside a durable subscription doing the same work, and its batch
//! handler beside its single-event handler.
//!
//! Both read events published over [`EXECUTOR_KEYS`] keys while the publishers run: the
//! executor with a no-op handler (it runs a key's events in order and up to `parallelism`
//! keys at once, committing checkpoints as handlers finish), the subscription acknowledging
//! each event as it arrives. The window runs from the first publish to the last event
//! handled (executor) or committed (subscription). The batch handler takes batches of up to
//! [`EXECUTOR_BATCH_MAX`] events (or what arrived within [`EXECUTOR_BATCH_WAIT`]) of every
//! key, a no-op over the batch. The backlog rows time the two handlers draining events
//! published before the executor starts, so that publishing is out of the window. The
//! latency row times publish -> handler start, one event in flight at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use photon_core::{PhotonError, Result};
use photon_runtime::{BatchPolicy, Executor, HandlerOptions, Photon};
use serde_json::json;
use tokio::sync::{mpsc, Notify};

use super::photon_side::{durable_rate, publish_all, warm_up, PhotonSide, Publishing, Sealing};
use crate::latency::Latencies;
use crate::measure::{per_second, BenchOptions};

/// Keys the executor measurement spreads its events over.
pub const EXECUTOR_KEYS: usize = 16;

/// The most events of one batch of the batch handler row.
pub const EXECUTOR_BATCH_MAX: usize = 100;

/// How long a batch of the batch handler row waits for more events after its first.
pub const EXECUTOR_BATCH_WAIT: Duration = Duration::from_millis(5);

/// How long the handler may take to see every event.
const MEASUREMENT_DEADLINE: Duration = Duration::from_secs(300);

impl PhotonSide {
    /// Events per second through the executor with a no-op handler (plaintext).
    ///
    /// # Errors
    /// The port's errors; a handler that has not seen every event within 300 s.
    pub async fn executor_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let topic = self.topic(Sealing::Plain, "executor", round);
        let rate = executor_rate(self.photon(Sealing::Plain), options, &topic).await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// Events per second through the executor's batch handler with a no-op handler
    /// (plaintext): the single-event handler's ([`PhotonSide::executor_rate`]) work, in
    /// batches.
    ///
    /// # Errors
    /// The port's errors; a handler that has not seen every event within 300 s.
    pub async fn executor_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let topic = self.topic(Sealing::Plain, "executor-batch", round);
        let rate = executor_batch_rate(self.photon(Sealing::Plain), options, &topic).await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// Events per second of a no-op handler of `kind` draining a stored backlog
    /// (plaintext): the events are published first, the window runs from the executor's
    /// start to the last event handled.
    ///
    /// # Errors
    /// The port's errors; a handler that has not seen every event within 300 s.
    pub async fn executor_backlog_rate(
        &self,
        options: &BenchOptions,
        round: usize,
        kind: HandlerKind,
    ) -> Result<f64> {
        let name = format!("backlog-{}", kind.topic_part());
        let topic = self.topic(Sealing::Plain, &name, round);
        let rate = backlog_rate(self.photon(Sealing::Plain), options, &topic, kind).await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }

    /// Publish -> handler start through the executor (plaintext), one event in flight at a
    /// time as [`PhotonSide::latency`] times the subscription's: each sample runs from
    /// before the publish to the instant the handler starts on the event.
    ///
    /// # Errors
    /// The port's errors; a handler that does not start within 300 s.
    pub async fn executor_latency(
        &self,
        options: &BenchOptions,
        round: usize,
    ) -> Result<Latencies> {
        let photon = self.photon(Sealing::Plain);
        let topic = self.topic(Sealing::Plain, "executor-latency", round);
        let (started_tx, mut started) = mpsc::unbounded_channel::<Instant>();
        let executor = photon
            .executor()
            .handler_with(
                HandlerOptions::new("bench-latency", &topic),
                move |_event: photon_core::Event| {
                    let _ = started_tx.send(Instant::now());
                    async {}
                },
            )
            .start()?;
        let measured = async {
            // A first round trip sets the subscription up (brokers do it lazily).
            photon
                .publish(&topic, None, json!(null), options.payload(0))
                .await?;
            handler_start(&mut started).await?;
            let mut latencies = Latencies::default();
            for i in 0..options.latency_share(round) {
                let published = Instant::now();
                photon
                    .publish(&topic, None, json!(null), options.payload(i))
                    .await?;
                let handled = handler_start(&mut started).await?;
                latencies.record(handled.saturating_duration_since(published));
            }
            Ok(latencies)
        }
        .await;
        let stopped = executor.shutdown().await;
        let latencies = measured?;
        stopped?;
        self.done_with(&topic).await?;
        Ok(latencies)
    }

    /// The same events through a durable subscription, acknowledged one by one
    /// (plaintext): the executor's baseline.
    ///
    /// # Errors
    /// The port's errors.
    pub async fn durable_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let topic = self.topic(Sealing::Plain, "durable", round);
        let rate = durable_rate(
            self.photon(Sealing::Plain),
            options,
            &topic,
            EXECUTOR_KEYS,
            Publishing::Each,
        )
        .await?;
        self.done_with(&topic).await?;
        Ok(rate)
    }
}

/// When the latency handler started on the next event.
async fn handler_start(started: &mut mpsc::UnboundedReceiver<Instant>) -> Result<Instant> {
    match tokio::time::timeout(MEASUREMENT_DEADLINE, started.recv()).await {
        Ok(Some(instant)) => Ok(instant),
        Ok(None) => Err(PhotonError::InvalidInput(
            "the bench latency handler stopped".into(),
        )),
        Err(_) => Err(PhotonError::Timeout {
            operation: "bench executor latency".into(),
            waited: MEASUREMENT_DEADLINE,
            missing: "the handler's start on a published event".into(),
        }),
    }
}

/// How many events the handler saw, and a wake-up for the first one and the last.
struct Handled {
    count: AtomicUsize,
    goal: usize,
    changed: Notify,
}

impl Handled {
    async fn reach(&self, count: usize) -> Result<()> {
        let waiting = async {
            while self.count.load(Ordering::SeqCst) < count {
                self.changed.notified().await;
            }
        };
        tokio::time::timeout(MEASUREMENT_DEADLINE, waiting)
            .await
            .map_err(|_| PhotonError::Timeout {
                operation: "bench executor".into(),
                waited: MEASUREMENT_DEADLINE,
                missing: format!(
                    "{} of {count} events handled",
                    self.count.load(Ordering::SeqCst)
                ),
            })
    }
}

impl Handled {
    /// Counts `events` more handled events, waking the measurement at the first and the
    /// last.
    fn add(&self, events: usize) {
        let before = self.count.fetch_add(events, Ordering::SeqCst);
        let after = before + events;
        if before == 0 || (before < self.goal && after >= self.goal) {
            // notify_one keeps a permit when nobody waits yet, so no wake-up is lost.
            self.changed.notify_one();
        }
    }
}

/// Which handler a measurement runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// One event per call.
    Single,
    /// Batches of up to [`EXECUTOR_BATCH_MAX`] events.
    Batch,
}

impl HandlerKind {
    fn topic_part(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Batch => "batch",
        }
    }
}

/// Starts a no-op handler of `kind` on `topic` that counts what it sees in `handled`.
fn start_counting(
    photon: &Photon,
    topic: &str,
    kind: HandlerKind,
    handled: &Arc<Handled>,
) -> Result<Executor> {
    let handled = handled.clone();
    let options = HandlerOptions::new("bench", topic);
    let builder = photon.executor();
    let builder = match kind {
        HandlerKind::Single => builder.handler_with(options, move |_event: photon_core::Event| {
            handled.add(1);
            async {}
        }),
        HandlerKind::Batch => builder.batch_handler(
            options,
            BatchPolicy::new(EXECUTOR_BATCH_MAX, EXECUTOR_BATCH_WAIT),
            move |events: Vec<photon_core::Event>| {
                handled.add(events.len());
                async {}
            },
        ),
    };
    builder.start()
}

fn counter(goal: usize) -> Arc<Handled> {
    Arc::new(Handled {
        count: AtomicUsize::new(0),
        goal,
        changed: Notify::new(),
    })
}

async fn executor_rate(photon: &Photon, options: &BenchOptions, topic: &str) -> Result<f64> {
    warm_up(photon, options, topic).await?;
    let handled = counter(options.events + 1);
    let executor = start_counting(photon, topic, HandlerKind::Single, &handled)?;
    measure(photon, options, topic, executor, &handled).await
}

async fn executor_batch_rate(photon: &Photon, options: &BenchOptions, topic: &str) -> Result<f64> {
    warm_up(photon, options, topic).await?;
    let handled = counter(options.events + 1);
    let executor = start_counting(photon, topic, HandlerKind::Batch, &handled)?;
    measure(photon, options, topic, executor, &handled).await
}

/// Events per second of a handler draining a stored backlog: the window runs from the
/// executor's start to the last event handled, so publishing is not in it.
async fn backlog_rate(
    photon: &Photon,
    options: &BenchOptions,
    topic: &str,
    kind: HandlerKind,
) -> Result<f64> {
    publish_all(photon, options, topic, EXECUTOR_KEYS).await?;
    let handled = counter(options.events);
    let started = Instant::now();
    let executor = start_counting(photon, topic, kind, &handled)?;
    let reached = handled.reach(handled.goal).await;
    let elapsed = started.elapsed();
    let stopped = executor.shutdown().await;
    reached?;
    stopped?;
    Ok(per_second(options.events, elapsed))
}

/// Times the events published from now on through `executor`, whose handler counts in
/// `handled`; stops it.
async fn measure(
    photon: &Photon,
    options: &BenchOptions,
    topic: &str,
    executor: Executor,
    handled: &Handled,
) -> Result<f64> {
    // The warm-up event comes first, before the timed window.
    let measured = async {
        handled.reach(1).await?;
        let started = Instant::now();
        publish_all(photon, options, topic, EXECUTOR_KEYS).await?;
        handled.reach(handled.goal).await?;
        Ok(per_second(options.events, started.elapsed()))
    }
    .await;
    let stopped = executor.shutdown().await;
    let rate = measured?;
    stopped?;
    let count = handled.count.load(Ordering::SeqCst);
    if count != handled.goal {
        return Err(PhotonError::InvalidInput(format!(
            "the bench handler saw {count} events, expected {}",
            handled.goal
        )));
    }
    Ok(rate)
}
