//! [`FailFirst`]: makes chosen events fail their first attempts, to test retries and dead
//! letters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use photon_core::{Event, PhotonError};

use crate::executor::{HandlerFuture, IntoHandlerResult};

type Predicate = Arc<dyn Fn(&Event) -> bool + Send + Sync>;

/// Wraps a handler so that the first `n` attempts of each chosen event fail before the
/// handler runs; later attempts run the handler. Clones share the counts.
///
/// Failures are retryable by default ([`PhotonError::handler`]): with the executor's retry
/// policy of `max_attempts` attempts, an event failing its first `n < max_attempts` is
/// handled on attempt `n + 1`, and one failing `n >= max_attempts` goes to the dead-letter
/// topic after `max_attempts` attempts. [`FailFirst::permanent`] fails with an error that
/// is not retried (dead-lettered after one attempt).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::testing::{self, FailFirst, Recorder};
/// use serde_json::json;
///
/// let photon = testing::photon()?; // 3 attempts per event
/// let handled = Recorder::new();
/// let broken = FailFirst::always().when(|event| event.topic_key.as_deref() == Some("bad"));
/// let executor = photon
///     .executor()
///     .handler("billing", "orders", broken.wrap(handled.handler()))
///     .start()?;
/// photon.publish("orders", Some("bad"), json!(null), json!(1)).await?;
/// photon.publish("orders", Some("good"), json!(null), json!(2)).await?;
/// executor.wait_idle().await?;
/// assert_eq!(handled.keys(), vec![Some("good".to_owned())]);
/// let letters = photon.dead_letters("orders").await?;
/// assert_eq!(letters.len(), 1);
/// assert_eq!(letters[0].attempts, 3);
/// assert_eq!(broken.injected(), 3);
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct FailFirst {
    failures: u32,
    permanent: bool,
    chosen: Predicate,
    attempts: Arc<Mutex<HashMap<String, u32>>>,
    injected: Arc<AtomicU64>,
}

impl std::fmt::Debug for FailFirst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailFirst")
            .field("failures", &self.failures)
            .field("permanent", &self.permanent)
            .field("injected", &self.injected())
            .finish_non_exhaustive()
    }
}

impl FailFirst {
    /// Fails the first `failures` attempts of every event (narrow with [`FailFirst::when`]).
    pub fn new(failures: u32) -> Self {
        Self {
            failures,
            permanent: false,
            chosen: Arc::new(|_| true),
            attempts: Arc::default(),
            injected: Arc::default(),
        }
    }

    /// Fails every attempt of every chosen event.
    pub fn always() -> Self {
        Self::new(u32::MAX)
    }

    /// Only events for which `chosen` holds fail; the others run the handler at once.
    ///
    /// ```
    /// let flaky = photon_runtime::testing::FailFirst::new(1).when(|event| event.seq % 2 == 0);
    /// # let _ = flaky;
    /// ```
    pub fn when(mut self, chosen: impl Fn(&Event) -> bool + Send + Sync + 'static) -> Self {
        self.chosen = Arc::new(chosen);
        self
    }

    /// Fails with [`PhotonError::handler_permanent`], which the executor does not retry.
    pub fn permanent(mut self) -> Self {
        self.permanent = true;
        self
    }

    /// The handler: fails the chosen events' first attempts, runs `handler` otherwise.
    pub fn wrap<F, Fut, R>(
        &self,
        handler: F,
    ) -> impl Fn(Event) -> HandlerFuture + Send + Sync + 'static
    where
        F: Fn(Event) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = R> + Send + 'static,
        R: IntoHandlerResult,
    {
        let injector = self.clone();
        move |event: Event| {
            if let Some(error) = injector.inject(&event) {
                return Box::pin(std::future::ready(Err(error)));
            }
            let future = handler(event);
            Box::pin(async move { future.await.into_handler_result() })
        }
    }

    /// Attempts made on the event with id `event_id` so far (failed or not); 0 for an event
    /// that was not chosen or not seen.
    pub fn attempts(&self, event_id: &str) -> u32 {
        self.lock().get(event_id).copied().unwrap_or(0)
    }

    /// Failures injected so far, over every event.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Counts the attempt; the error to fail it with, when it is one of the first.
    fn inject(&self, event: &Event) -> Option<PhotonError> {
        if !(self.chosen)(event) {
            return None;
        }
        let attempt = {
            let mut attempts = self.lock();
            let count = attempts.entry(event.event_id.clone()).or_default();
            *count = count.saturating_add(1);
            *count
        };
        if attempt > self.failures {
            return None;
        }
        self.injected.fetch_add(1, Ordering::SeqCst);
        let message = format!(
            "injected failure {attempt} of event {} (seq {} of topic {:?})",
            event.event_id, event.seq, event.topic_name
        );
        Some(if self.permanent {
            PhotonError::handler_permanent(message)
        } else {
            PhotonError::handler(message)
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        // Only counter updates happen under this lock.
        self.attempts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
