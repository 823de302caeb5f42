//! Executor handlers in a schedule: one durable handler on the schedule's topic, started
//! with each instance of the port, whose behaviour each event's publishing operation
//! decides (so that a seed decides it too): fast, slow, failing once and then succeeding,
//! or failing for good (dead-lettered). In some schedules it is a batch handler: a batch
//! is slow when one of its events is, fails once when one of its events is on its first
//! attempt, and fails for good (every event dead-lettered) when one of its events does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use photon_core::{Event, PhotonError, Result};
use photon_runtime::executor::{BatchPolicy, Executor, HandlerOptions};
use photon_runtime::Photon;

use super::history::Handled;

/// What the handler does with the events of one publishing operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Succeeds at once.
    Fast,
    /// Succeeds after 30 ms.
    Slow,
    /// Fails with a retryable error on its first attempt, then succeeds.
    FailsOnce,
    /// Fails for good: the event goes to the dead-letter topic.
    Fails,
}

/// How long a slow handling takes.
pub(crate) const SLOW: Duration = Duration::from_millis(30);

impl Behaviour {
    /// The behaviour for the events published by operation `op`.
    pub fn of(op: u64) -> Self {
        match op % 11 {
            5 => Self::Fails,
            3 | 8 => Self::FailsOnce,
            1 | 6 | 9 => Self::Slow,
            _ => Self::Fast,
        }
    }
}

/// The handler's shared record of attempts and their outcomes.
#[derive(Debug, Clone, Default)]
pub(crate) struct HandlerLog {
    handled: Arc<Mutex<Vec<Handled>>>,
    attempts: Arc<Mutex<HashMap<i64, u32>>>,
    batches: Arc<AtomicU64>,
}

impl HandlerLog {
    fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every finished attempt so far.
    pub(crate) fn handled(&self) -> Vec<Handled> {
        Self::lock(&self.handled).clone()
    }

    /// Counts an attempt on `event`; its number and the behaviour its operation decided.
    fn attempt(&self, event: &Event) -> (u32, Behaviour) {
        let attempt = {
            let mut attempts = Self::lock(&self.attempts);
            let count = attempts.entry(event.seq).or_default();
            *count += 1;
            *count
        };
        let op = event
            .payload
            .get("op")
            .and_then(|op| op.as_u64())
            .unwrap_or(0);
        (attempt, Behaviour::of(op))
    }

    async fn handle(&self, run: usize, event: Event) -> Result<()> {
        self.handle_batch(run, vec![event], false).await
    }

    /// One attempt on `events` (one event, or a batch when `batch`): slow when one is
    /// slow, failing once when one is on its first attempt, failing for good when one does.
    async fn handle_batch(&self, run: usize, events: Vec<Event>, batch: bool) -> Result<()> {
        let started = Instant::now();
        let attempts: Vec<(u32, Behaviour)> = events.iter().map(|e| self.attempt(e)).collect();
        let has = |wanted: fn(&(u32, Behaviour)) -> bool| attempts.iter().any(wanted);
        let outcome = if has(|(_, b)| *b == Behaviour::Fails) {
            Err(PhotonError::handler_permanent("fails for good"))
        } else if has(|(attempt, b)| *b == Behaviour::FailsOnce && *attempt == 1) {
            Err(PhotonError::handler("fails once"))
        } else {
            if has(|(_, b)| *b == Behaviour::Slow) {
                tokio::time::sleep(SLOW).await;
            }
            Ok(())
        };
        let id = batch.then(|| self.batches.fetch_add(1, Ordering::Relaxed));
        let finished = Instant::now();
        let mut handled = Self::lock(&self.handled);
        for (position, (event, (_, behaviour))) in events.iter().zip(attempts).enumerate() {
            handled.push(Handled {
                seq: event.seq,
                key: event.topic_key.clone(),
                run,
                behaviour,
                succeeded: outcome.is_ok(),
                for_good: matches!(outcome, Err(ref err) if !err.is_retryable()),
                batch: id.map(|id| (id, position)),
                started,
                finished,
            });
        }
        outcome
    }
}

/// Starts the schedule's handler on `topic` for the instance `photon` (its `run`-th).
///
/// # Errors
/// The executor's start errors.
pub(crate) fn start(
    photon: &Photon,
    durable: &str,
    topic: &str,
    batch: Option<usize>,
    run: usize,
    log: &HandlerLog,
) -> Result<Executor> {
    let log = log.clone();
    let executor = photon.executor();
    let executor = match batch {
        None => executor.handler(durable, topic, move |event: Event| {
            let log = log.clone();
            async move { log.handle(run, event).await }
        }),
        Some(max_events) => executor.batch_handler(
            HandlerOptions::new(durable, topic),
            BatchPolicy::new(max_events, BATCH_WAIT),
            move |events: Vec<Event>| {
                let log = log.clone();
                async move { log.handle_batch(run, events, true).await }
            },
        ),
    };
    executor.start()
}

/// How long a batch waits for more events after its first.
const BATCH_WAIT: Duration = Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_behaviour_is_drawn() {
        let drawn: std::collections::HashSet<_> = (0..11)
            .map(|op| format!("{:?}", Behaviour::of(op)))
            .collect();
        assert_eq!(drawn.len(), 4);
    }
}
