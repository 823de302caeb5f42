//! [`Recorder`]: a handler that keeps every event it handled, in the order it handled them.

use std::sync::{Arc, Mutex, MutexGuard};

use photon_core::{Event, PhotonError, Result};
use serde::de::DeserializeOwned;

/// Records the events a handler handled. Clones share the record.
///
/// [`Recorder::handler`] is a handler that records and succeeds; [`Recorder::wrap`] records
/// the events another handler handled successfully.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::testing::{self, Recorder};
/// use serde_json::json;
///
/// let photon = testing::photon()?;
/// let audit = Recorder::new();
/// let executor = photon.executor().handler("audit", "orders", audit.handler()).start()?;
/// photon.publish("orders", Some("o-1"), json!(null), json!({"total": 12})).await?;
/// photon.publish("orders", Some("o-1"), json!(null), json!({"total": 30})).await?;
/// executor.wait_idle().await?;
/// // One key's events run in publish order; different keys may interleave.
/// assert_eq!(audit.seqs_of_key("o-1"), vec![1, 2]);
/// assert_eq!(audit.payloads(), vec![json!({"total": 12}), json!({"total": 30})]);
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    events: Arc<Mutex<Vec<Event>>>,
}

impl Recorder {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// A handler that records each event and succeeds.
    pub fn handler(
        &self,
    ) -> impl Fn(Event) -> std::future::Ready<Result<()>> + Send + Sync + Clone + 'static {
        let recorder = self.clone();
        move |event: Event| {
            recorder.record(event);
            std::future::ready(Ok(()))
        }
    }

    /// Runs `handler` and records each event it handled successfully (not the attempts
    /// that failed).
    ///
    /// ```
    /// use photon_runtime::testing::Recorder;
    /// use photon_runtime::PhotonError;
    /// let recorder = Recorder::new();
    /// let handler = recorder.wrap(|_event| async { Ok::<(), PhotonError>(()) });
    /// # let _ = handler;
    /// ```
    pub fn wrap<F, Fut, R>(
        &self,
        handler: F,
    ) -> impl Fn(Event) -> crate::executor::HandlerFuture + Send + Sync + 'static
    where
        F: Fn(Event) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = R> + Send + 'static,
        R: crate::executor::IntoHandlerResult,
    {
        let recorder = self.clone();
        move |event: Event| {
            let recorder = recorder.clone();
            let kept = event.clone();
            let future = handler(event);
            Box::pin(async move {
                let result = future.await.into_handler_result();
                if result.is_ok() {
                    recorder.record(kept);
                }
                result
            })
        }
    }

    /// Adds an event to the record.
    pub fn record(&self, event: Event) {
        self.lock().push(event);
    }

    /// Every recorded event, in the order recorded.
    pub fn events(&self) -> Vec<Event> {
        self.lock().clone()
    }

    /// How many events were recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The seqs of the recorded events, in the order recorded.
    pub fn seqs(&self) -> Vec<i64> {
        self.lock().iter().map(|event| event.seq).collect()
    }

    /// The keys of the recorded events, in the order recorded.
    pub fn keys(&self) -> Vec<Option<String>> {
        self.lock()
            .iter()
            .map(|event| event.topic_key.clone())
            .collect()
    }

    /// The payloads of the recorded events, in the order recorded.
    pub fn payloads(&self) -> Vec<serde_json::Value> {
        self.lock()
            .iter()
            .map(|event| event.payload.clone())
            .collect()
    }

    /// The seqs of one key's recorded events, in the order recorded.
    pub fn seqs_of_key(&self, key: &str) -> Vec<i64> {
        self.lock()
            .iter()
            .filter(|event| event.topic_key.as_deref() == Some(key))
            .map(|event| event.seq)
            .collect()
    }

    /// The payloads decoded as `T` (a `#[topic]` type, or any serde type), in the order
    /// recorded.
    ///
    /// # Errors
    /// [`PhotonError::Codec`] naming the first event whose payload does not decode.
    pub fn values<T: DeserializeOwned>(&self) -> Result<Vec<T>> {
        self.lock()
            .iter()
            .map(|event| {
                T::deserialize(&event.payload).map_err(|err| {
                    PhotonError::codec(
                        format!(
                            "recorded event {} as {}",
                            event.event_id,
                            std::any::type_name::<T>()
                        ),
                        err,
                    )
                })
            })
            .collect()
    }

    /// Forgets every recorded event.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Event>> {
        // Only pushes, clones and clears happen under this lock.
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
