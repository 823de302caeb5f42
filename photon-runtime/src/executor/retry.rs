//! Running one event (or one batch) through its handler: attempts, exponential backoff
//! with jitter, and panics turned into failures.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use futures::FutureExt;
use photon_core::group::Ownership;
use photon_core::{Event, PhotonError};
use rand::Rng;
use tokio::sync::OwnedSemaphorePermit;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::arguments::sealed::Call;
use super::arguments::BoxedHandler;
use super::config::RetryPolicy;
use super::dispatch::Subscription;
use super::handler::{HandlerFuture, HandlerOptions};
use super::service::Layered;
use crate::shutdown::StopSignal;

/// How one event ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The handler succeeded.
    Handled,
    /// The last attempt failed, or the error was not retryable: dead-letter it.
    Failed { error: PhotonError, attempts: u32 },
    /// Shutdown came while waiting to retry: the event stays unacknowledged.
    Abandoned,
    /// A group handler's member lost the event's partition before an attempt could start:
    /// the event is the partition's next owner's.
    Revoked,
    /// The handler asked for the event later (`Retry::after`) and it was published for
    /// later to the handler's retry topic: acknowledge it here.
    Requeued,
}

/// The delay after failed attempt `attempt` (1-based), before jitter.
pub(crate) fn base_delay(policy: &RetryPolicy, attempt: u32) -> Duration {
    let exponent = attempt.saturating_sub(1).min(30);
    let factor = 1u32 << exponent;
    policy
        .initial_backoff
        .saturating_mul(factor)
        .min(policy.max_backoff)
}

/// The delay after failed attempt `attempt`, with jitter applied.
pub(crate) fn delay(policy: &RetryPolicy, attempt: u32) -> Duration {
    let base = base_delay(policy, attempt);
    if policy.jitter <= 0.0 {
        return base;
    }
    let scale = rand::thread_rng().gen_range((1.0 - policy.jitter)..=(1.0 + policy.jitter));
    base.mul_f64(scale)
        .min(policy.max_backoff.mul_f64(1.0 + policy.jitter))
}

/// One call of the handler, through its middleware when it has any; a panic becomes a
/// non-retryable handler error.
async fn attempt(
    handler: &BoxedHandler,
    layered: Option<&Layered>,
    call: Call<'_>,
) -> Result<(), PhotonError> {
    if let Some(layered) = layered {
        // The middleware may panic while polled for readiness as well as in its call.
        return match AssertUnwindSafe(layered.call(&call)).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => Err(panicked(&*panic)),
        };
    }
    guarded(|| handler.call(&call)).await
}

/// Makes and runs a handler's future; a panic in either becomes a non-retryable handler
/// error.
pub(crate) async fn guarded(make: impl FnOnce() -> HandlerFuture) -> Result<(), PhotonError> {
    let future = match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(future) => future,
        Err(panic) => return Err(panicked(&*panic)),
    };
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(panicked(&*panic)),
    }
}

/// Runs an attempt, cancelling it past `limit` with a retryable error that names the limit
/// and what was attempted (`what`, built only on a timeout).
async fn bounded(
    attempt: impl std::future::Future<Output = Result<(), PhotonError>>,
    limit: Option<Duration>,
    what: impl FnOnce() -> String,
) -> Result<(), PhotonError> {
    let Some(limit) = limit else {
        return attempt.await;
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(result) => result,
        Err(_) => Err(PhotonError::handler(format!(
            "timed out: the handler of {} ran longer than its time limit (max_handler_time, {limit:?}) and was cancelled",
            what()
        ))),
    }
}

fn panicked(panic: &(dyn std::any::Any + Send)) -> PhotonError {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text panic".to_owned());
    PhotonError::handler_permanent(format!("handler panicked: {text}"))
}

/// The `photon.handle` span of one attempt (see [`photon_core::spans`]), continuing the
/// trace the event was published in.
fn attempt_span(options: &HandlerOptions, event: &Event, attempt: u32) -> Span {
    let span = tracing::info_span!(
        "photon.handle",
        handler = options.handler_name(),
        topic = event.topic_name.as_str(),
        key = event.topic_key.as_deref(),
        seq = event.seq,
        event_id = event.event_id.as_str(),
        subscription = options.consumer().subscription(),
        group = options.consumer().group(),
        attempt,
        error = Empty,
    );
    crate::spans::continue_trace(&span, &event.headers);
    span
}

/// What the retry loop runs: one event, or a batch of events (`super::batch`).
pub(crate) trait Attempts {
    /// Whether the next attempt may start: a group handler's member still hands out the
    /// partitions it was read under.
    fn may_start(&self, subscription: &Subscription) -> bool;

    /// The lease the attempt runs under, for [`super::current_ownership`].
    fn ownership(&self, subscription: &Subscription) -> Option<Ownership>;

    /// The span of attempt `attempt`.
    fn span(&self, options: &HandlerOptions, attempt: u32) -> Span;

    /// One call of the handler, through its middleware when it has any.
    fn attempt<'a>(
        &'a self,
        subscription: &'a Subscription,
        attempt: u32,
        partition: Option<u32>,
    ) -> impl Future<Output = Result<(), PhotonError>> + Send + 'a;

    /// What was attempted, for messages: `orders seq 3`.
    fn describe(&self) -> String;

    /// Attempts made before this delivery (a requeued event's count).
    fn prior_attempts(&self, options: &HandlerOptions) -> u32 {
        let _ = options;
        0
    }

    /// Publishes the work for later to the handler's retry topic, when it can be
    /// (`HandlerOptions::requeue_retries`; single events only).
    ///
    /// # Errors
    /// The publish's error; the caller waits in place instead.
    fn requeue<'a>(
        &'a self,
        subscription: &'a Subscription,
        attempts: u32,
        after: Duration,
    ) -> impl Future<Output = Option<Result<(), PhotonError>>> + Send + 'a {
        let _ = (subscription, attempts, after);
        std::future::ready(None)
    }
}

impl Attempts for Event {
    fn may_start(&self, subscription: &Subscription) -> bool {
        subscription.may_start(self.seq)
    }

    fn ownership(&self, subscription: &Subscription) -> Option<Ownership> {
        subscription.ownership(self.seq)
    }

    fn span(&self, options: &HandlerOptions, attempt: u32) -> Span {
        attempt_span(options, self, attempt)
    }

    fn attempt<'a>(
        &'a self,
        subscription: &'a Subscription,
        attempt_number: u32,
        partition: Option<u32>,
    ) -> impl Future<Output = Result<(), PhotonError>> + Send + 'a {
        let call = Call {
            event: self,
            attempt: attempt_number,
            partition,
            resources: &subscription.resources,
        };
        // Not boxed: this is every event's path.
        attempt(
            &subscription.registration.handler,
            subscription.layered.as_ref(),
            call,
        )
    }

    fn describe(&self) -> String {
        format!("{} seq {}", self.topic_name, self.seq)
    }

    fn prior_attempts(&self, options: &HandlerOptions) -> u32 {
        super::requeue::prior_attempts(options, self)
    }

    async fn requeue<'a>(
        &'a self,
        subscription: &'a Subscription,
        attempts: u32,
        after: Duration,
    ) -> Option<Result<(), PhotonError>> {
        let options = &subscription.registration.options;
        if !options.requeues() {
            return None;
        }
        let photon = subscription.resources.photon.upgrade();
        Some(super::requeue::requeue(photon, options, self, attempts, after).await)
    }
}

/// Runs `work` (an event or a batch) until it succeeds, fails for good or shutdown
/// interrupts a backoff; each attempt in its own span, timed.
///
/// `permit` is a parallelism slot held while the handler runs; it is given back during
/// backoff so that a retrying key never keeps other keys waiting.
pub(crate) async fn run_with_retries(
    subscription: &Subscription,
    work: &impl Attempts,
    mut permit: OwnedSemaphorePermit,
    stop: &mut StopSignal,
) -> Outcome {
    let registration = &subscription.registration;
    let (policy, stats) = (&subscription.retry, &subscription.stats);
    let mut attempts = work.prior_attempts(&registration.options);
    let limit = registration.options.handler_time_limit();
    loop {
        if !work.may_start(subscription) {
            return Outcome::Revoked;
        }
        attempts += 1;
        let span = work.span(&registration.options, attempts);
        let started = Instant::now();
        let ownership = work.ownership(subscription);
        let partition = ownership.as_ref().map(|owned| owned.partition);
        let attempt = bounded(
            work.attempt(subscription, attempts, partition),
            limit,
            || work.describe(),
        );
        let result = super::fencing::under(ownership, attempt)
            .instrument(span.clone())
            .await;
        stats.record_attempt(started.elapsed());
        drop(permit);
        let error = match result {
            Ok(()) => return Outcome::Handled,
            Err(error) => error,
        };
        photon_core::spans::record_error(&span, "handler attempt", &error);
        if !error.is_retryable() || attempts >= policy.max_attempts {
            return Outcome::Failed { error, attempts };
        }
        if stop.is_stopped() {
            return Outcome::Abandoned;
        }
        stats.record_retry();
        let asked = super::requeue::requested_delay(&error);
        if let Some(after) = asked {
            match work.requeue(subscription, attempts, after).await {
                Some(Ok(())) => return Outcome::Requeued,
                Some(Err(err)) => tracing::warn!(
                    attempted = %work.describe(), %err,
                    "requeueing failed; retrying in place after the delay asked for"
                ),
                None => {}
            }
        }
        tracing::debug!(attempted = %work.describe(), attempts, %error, "handler failed; retrying");
        let wait = asked.unwrap_or_else(|| delay(policy, attempts));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.stopped() => return Outcome::Abandoned,
        }
        permit = tokio::select! {
            acquired = subscription.slots.clone().acquire_owned() => match acquired {
                Ok(permit) => permit,
                Err(_) => return Outcome::Abandoned,
            },
            () = stop.stopped() => return Outcome::Abandoned,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(jitter: f64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            jitter,
        }
    }

    #[test]
    fn backoff_doubles_then_caps() {
        let policy = policy(0.0);
        let delays: Vec<u128> = (1..=6).map(|a| delay(&policy, a).as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn jitter_stays_within_its_band() {
        let policy = policy(0.5);
        for _ in 0..1000 {
            let ms = delay(&policy, 2).as_millis();
            assert!((100..=300).contains(&ms), "{ms}");
        }
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        assert_eq!(
            base_delay(&policy(0.0), u32::MAX),
            Duration::from_millis(1000)
        );
    }
}
