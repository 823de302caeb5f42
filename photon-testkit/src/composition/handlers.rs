//! Executor handlers in a schedule: one durable handler on the schedule's topic, started
//! with each instance of the port, whose behaviour each event's publishing operation
//! decides (so that a seed decides it too): fast, slow, failing once and then succeeding,
//! or failing for good (dead-lettered).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use photon_core::{Event, PhotonError, Result};
use photon_runtime::executor::Executor;
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

    async fn handle(&self, run: usize, event: Event) -> Result<()> {
        let started = Instant::now();
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
        let behaviour = Behaviour::of(op);
        let outcome = match behaviour {
            Behaviour::Fast => Ok(()),
            Behaviour::Slow => {
                tokio::time::sleep(SLOW).await;
                Ok(())
            }
            Behaviour::FailsOnce if attempt == 1 => Err(PhotonError::handler("fails once")),
            Behaviour::FailsOnce => Ok(()),
            Behaviour::Fails => Err(PhotonError::handler_permanent("fails for good")),
        };
        Self::lock(&self.handled).push(Handled {
            seq: event.seq,
            key: event.topic_key.clone(),
            run,
            behaviour,
            succeeded: outcome.is_ok(),
            started,
            finished: Instant::now(),
        });
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
    run: usize,
    log: &HandlerLog,
) -> Result<Executor> {
    let log = log.clone();
    photon
        .executor()
        .handler(durable, topic, move |event: Event| {
            let log = log.clone();
            async move { log.handle(run, event).await }
        })
        .start()
}

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
