//! Stopping the executor: a stop signal that fires on `shutdown` or when the last handle
//! is dropped, and the bounded wait for in-flight handlers.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// Fires the stop signal when told to, or when dropped (the last handle went away).
#[derive(Debug)]
pub(crate) struct StopSwitch {
    sender: watch::Sender<bool>,
}

impl StopSwitch {
    pub(crate) fn new() -> Self {
        Self {
            sender: watch::channel(false).0,
        }
    }

    /// A signal observing this switch.
    pub(crate) fn signal(&self) -> StopSignal {
        StopSignal(self.sender.subscribe())
    }

    /// Whether stop was requested.
    pub(crate) fn is_stopped(&self) -> bool {
        *self.sender.borrow()
    }

    /// Stops every task observing this switch.
    pub(crate) fn stop(&self) {
        self.sender.send_replace(true);
    }
}

/// Observes a [`StopSwitch`]; tasks hold this and never the switch, so that dropping every
/// handle stops them.
#[derive(Debug, Clone)]
pub(crate) struct StopSignal(watch::Receiver<bool>);

impl StopSignal {
    /// Whether stop was requested or every handle is gone.
    pub(crate) fn is_stopped(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }

    /// Resolves once stop is requested or every handle is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes the signal.
    pub(crate) async fn stopped(&mut self) {
        // An error means the switch was dropped, which also means stop.
        let _ = self.0.wait_for(|stopped| *stopped).await;
    }

    /// `work`'s output, or `None` when stop comes first (stop wins when both are ready).
    ///
    /// Work that is ready at once is taken without waiting on the signal: a waiter on the
    /// signal is registered only when the work would wait, which keeps the executor's
    /// per-event path (a read-ahead permit, the next record, a parallelism slot) free of
    /// the signal's lock.
    ///
    /// # Cancel safety
    /// As cancel safe as `work`.
    pub(crate) async fn unless_stopped<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        if self.is_stopped() {
            return None;
        }
        let mut work = std::pin::pin!(work);
        if let Poll::Ready(output) = futures::poll!(work.as_mut()) {
            return Some(output);
        }
        tokio::select! {
            biased;
            () = self.stopped() => None,
            output = work => Some(output),
        }
    }
}

/// Waits up to `timeout` for the workers to finish their current event, then aborts the
/// rest. Returns how many were aborted.
pub(crate) async fn drain_workers(workers: &mut JoinSet<()>, timeout: Duration) -> usize {
    let drained = tokio::time::timeout(timeout, async {
        while let Some(joined) = workers.join_next().await {
            log_join_error(joined);
        }
    })
    .await;
    if drained.is_ok() {
        return 0;
    }
    let abandoned = workers.len();
    workers.abort_all();
    while workers.join_next().await.is_some() {}
    abandoned
}

/// Logs a worker task that panicked outside the handler (handler panics are caught).
pub(crate) fn log_join_error(joined: Result<(), tokio::task::JoinError>) {
    if let Err(err) = joined {
        if err.is_panic() {
            tracing::error!(%err, "executor worker panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dropping_the_switch_stops() {
        let switch = StopSwitch::new();
        let mut signal = switch.signal();
        assert!(!signal.is_stopped());
        drop(switch);
        assert!(signal.is_stopped());
        signal.stopped().await;
    }

    #[tokio::test]
    async fn drain_aborts_after_the_timeout() {
        let mut workers = JoinSet::new();
        workers.spawn(async {});
        workers.spawn(std::future::pending::<()>());
        let aborted = drain_workers(&mut workers, Duration::from_millis(50)).await;
        assert_eq!(aborted, 1);
        assert!(workers.is_empty());
    }
}
