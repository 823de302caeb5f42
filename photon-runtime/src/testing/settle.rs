//! [`settle`]: waits until handlers that publish to each other's topics are all done.

use std::time::Duration;

use photon_core::{PhotonError, Result};
use tokio::time::Instant;

use crate::executor::{Executor, WAIT_IDLE_TIMEOUT};

/// Rounds of [`Executor::wait_idle`] that [`settle`] makes at most.
pub const SETTLE_ROUNDS: usize = 32;

/// Waits until the executor's handlers are idle and stay idle: [`Executor::wait_idle`],
/// then again as long as the head of a handler's topic moved during the round (a handler
/// published to another handler's topic while it waited). Settled means that a whole
/// round ended with no head moved. At most [`SETTLE_ROUNDS`] rounds and
/// [`WAIT_IDLE_TIMEOUT`] in all.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::testing::{self, Recorder};
/// use photon_runtime::{Event, PhotonError};
/// use serde_json::json;
///
/// let photon = testing::photon()?;
/// let shipped = Recorder::new();
/// let publisher = photon.clone();
/// let executor = photon
///     .executor()
///     // Each paid order becomes a shipment: one handler publishes to the other's topic.
///     .handler("shipping", "payments", move |event: Event| {
///         let photon = publisher.clone();
///         async move {
///             photon.publish("shipments", event.topic_key.as_deref(), json!(null), event.payload).await?;
///             Ok::<(), PhotonError>(())
///         }
///     })
///     .handler("tracking", "shipments", shipped.handler())
///     .start()?;
/// photon.publish("payments", Some("o-1"), json!(null), json!({"paid": 12})).await?;
/// testing::settle(&executor).await?;
/// assert_eq!(shipped.payloads(), vec![json!({"paid": 12})]);
/// executor.shutdown().await?;
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// As [`Executor::wait_idle`]; [`PhotonError::Timeout`] when the handlers do not settle
/// within the rounds or the time.
pub async fn settle(executor: &Executor) -> Result<()> {
    settle_within(executor, WAIT_IDLE_TIMEOUT).await
}

/// [`settle`] within `timeout` in all.
///
/// # Errors
/// As [`settle`].
pub async fn settle_within(executor: &Executor, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut before = executor.handler_heads().await?;
    for _ in 0..SETTLE_ROUNDS {
        executor
            .wait_idle_for(deadline.saturating_duration_since(Instant::now()))
            .await?;
        let after = executor.handler_heads().await?;
        if after == before {
            return Ok(());
        }
        before = after;
    }
    Err(PhotonError::Timeout {
        operation: "testing::settle".into(),
        waited: timeout,
        missing: format!(
            "the handlers' topics still grew after {SETTLE_ROUNDS} rounds of waiting until idle"
        ),
    })
}
