//! Helpers for your own tests (feature `testing`): a [`Photon`] on a fresh in-process
//! store with quick retries ([`photon`], [`builder`]), a handler that records what it
//! handled ([`Recorder`]), a wrapper that makes chosen events fail their first attempts
//! ([`FailFirst`]), [`settle`], which waits until handlers that publish to each other
//! have nothing left to do, and [`VirtualClock`], time a test moves by hand for delayed
//! delivery.
//!
//! With [`Executor::wait_idle`](crate::Executor::wait_idle) in between, a test publishes,
//! waits, and asserts on exact counts:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use photon_runtime::testing::{self, FailFirst, Recorder};
//! use photon_runtime::PhotonError;
//! use serde_json::json;
//!
//! let photon = testing::photon()?;
//! let billed = Recorder::new();
//! // The event with n = 1 fails twice, then succeeds on its third attempt.
//! let flaky = FailFirst::new(2).when(|event| event.payload["n"] == 1);
//! let executor = photon
//!     .executor()
//!     .handler("billing", "orders", flaky.wrap(billed.handler()))
//!     .start()?;
//! for n in 0..3 {
//!     photon.publish("orders", Some("o-1"), json!(null), json!({ "n": n })).await?;
//! }
//! executor.wait_idle().await?;
//! assert_eq!(billed.seqs(), vec![1, 2, 3]);
//! assert_eq!(flaky.injected(), 2);
//! executor.shutdown().await?;
//! # Ok::<_, PhotonError>(())
//! # }).unwrap();
//! ```

mod clock;
mod fail;
mod recorder;
mod settle;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use photon_core::mem::MemStoragePort;
use photon_core::{Event, Result, TransportCrypto};

pub use clock::VirtualClock;
pub use fail::FailFirst;
pub use recorder::Recorder;
pub use settle::{settle, settle_within, SETTLE_ROUNDS};

use crate::executor::{ExecutorConfig, HandlerFuture, IntoHandlerResult, RetryPolicy, TypedTopic};
use crate::{Photon, PhotonBuilder};

/// The settings [`builder`] gives: the executor's defaults, except retries, which are quick
/// and without jitter (3 attempts, 1 ms then 2 ms apart), so that a test of retries and
/// dead letters does not wait. No `PHOTON_*` variable is read.
pub fn executor_config() -> ExecutorConfig {
    ExecutorConfig {
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            jitter: 0.0,
        },
        ..ExecutorConfig::default()
    }
}

/// A builder for a test's `Photon`: a fresh in-process store of its own, no transport key
/// (whatever the environment holds), the topics declared with `#[topic]`, and
/// [`executor_config`]. Change anything before `build()`.
///
/// ```
/// use photon_runtime::testing;
/// let photon = testing::builder().transport_key("test", [1u8; 32]).build().unwrap();
/// assert_eq!(photon.executor_config().retry.max_attempts, 3);
/// ```
pub fn builder() -> PhotonBuilder {
    Photon::builder()
        .storage_port(MemStoragePort::new())
        .transport_crypto(TransportCrypto::plaintext())
        .executor_config(executor_config())
}

/// A `Photon` from [`builder`]: each call has a store of its own, so tests do not see each
/// other's events.
///
/// # Errors
/// [`photon_core::PhotonError::InvalidTopic`] for a bad `#[topic]` declaration in the
/// program.
pub fn photon() -> Result<Photon> {
    builder().build()
}

/// Turns a handler of a typed topic (a `#[subscribe]` function, or a closure taking `T`)
/// into a handler of events, so that [`FailFirst`] and [`Recorder`] can wrap it and the
/// executor builder's `handler` can run it. A payload that does not decode as `T` fails
/// with [`photon_core::PhotonError::Codec`] (dead-lettered, not retried).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::testing::{self, FailFirst};
/// use photon_runtime::{PhotonError, TypedTopic};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Order { id: String }
/// impl TypedTopic for Order {
///     const TOPIC: &'static str = "orders";
///     fn topic_key(&self) -> Option<String> { Some(self.id.clone()) }
/// }
/// async fn bill(order: Order) -> Result<(), PhotonError> { Ok(()) }
///
/// let photon = testing::photon()?;
/// let failing = FailFirst::always().permanent();
/// let executor = photon
///     .executor()
///     .handler("billing", Order::TOPIC, failing.wrap(testing::typed(bill)))
///     .start()?;
/// Order { id: "o-1".into() }.publish_on(&photon).await?;
/// executor.wait_idle().await?;
/// assert_eq!(photon.dead_letters("orders").await?.len(), 1);
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
pub fn typed<T, F, Fut, R>(handler: F) -> impl Fn(Event) -> HandlerFuture + Send + Sync + 'static
where
    T: TypedTopic,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoHandlerResult,
{
    let handler = Arc::new(handler);
    move |event: Event| {
        let decoded = T::from_event(&event).map(|value| handler(value));
        Box::pin(async move {
            match decoded {
                Ok(future) => future.await.into_handler_result(),
                Err(err) => Err(err),
            }
        })
    }
}
