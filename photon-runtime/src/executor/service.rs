//! Handlers as `tower` services, so that middleware written as a [`tower::Layer`] (a
//! concurrency limit, a rate limit, a timeout, metrics of one's own) can wrap each attempt
//! of a handler: see [`ExecutorBuilder::handler_layered`](super::ExecutorBuilder::handler_layered).

use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use photon_core::{BoxError, Event, PhotonError, Result};
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceExt};

use super::arguments::sealed::Call;
use super::arguments::{BoxedHandler, Context, Resources};
use super::handler::HandlerFuture;

/// What a handler service is called with, once per attempt: the event and the attempt's
/// [`Context`].
#[derive(Debug, Clone)]
pub struct HandlerRequest {
    event: Event,
    context: Context,
}

impl HandlerRequest {
    /// A request for attempt `context.attempt()` on `event`. The executor builds its own;
    /// this is for calling a layered service in a unit test.
    ///
    /// ```
    /// use photon_runtime::executor::{Context, HandlerRequest};
    /// # let event: photon_runtime::Event = serde_json::from_value(serde_json::json!({
    /// #     "event_id": "e-1", "topic_name": "orders", "topic_key": "o-1", "seq": 3,
    /// #     "actor": null, "payload": 1, "created_at": "2026-01-01T00:00:00Z"
    /// # })).unwrap();
    /// let request = HandlerRequest::new(event.clone(), Context::new(&event, 1));
    /// assert_eq!((request.event().seq, request.context().attempt()), (3, 1));
    /// ```
    pub fn new(event: Event, context: Context) -> Self {
        Self { event, context }
    }

    /// The event.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// Where the event stands and which attempt this is.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The event and the context.
    pub fn into_parts(self) -> (Event, Context) {
        (self.event, self.context)
    }
}

/// The innermost service of a layered handler: it calls the handler function with the
/// arguments it takes, taken from the [`HandlerRequest`] and the executor (its `State`s
/// and `Photon`). Always ready; cheap to clone.
///
/// Its error is the handler's: a retryable [`PhotonError`] is retried by the executor.
#[derive(Clone)]
pub struct HandlerService {
    handler: BoxedHandler,
    resources: Arc<Resources>,
}

impl std::fmt::Debug for HandlerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerService")
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl Service<HandlerRequest> for HandlerService {
    type Response = ();
    type Error = PhotonError;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HandlerRequest) -> HandlerFuture {
        let call = Call {
            event: &request.event,
            attempt: request.context.attempt(),
            partition: request.context.partition(),
            resources: &self.resources,
        };
        self.handler.call(&call)
    }
}

/// A layered handler with its types erased.
type LayeredService = BoxCloneService<HandlerRequest, (), PhotonError>;

/// Wraps the [`HandlerService`] of a handler in its middleware, once the executor knows
/// its resources.
pub(crate) type LayerFn = Arc<dyn Fn(HandlerService) -> LayeredService + Send + Sync>;

/// Erases `layer`: the layered service's error becomes a [`PhotonError`] (kept as it is
/// when it is one, else a retryable handler failure with it as its source, as a tower
/// `Elapsed` or `Overloaded`).
pub(crate) fn layer_fn<L>(layer: L) -> LayerFn
where
    L: Layer<HandlerService> + Send + Sync + 'static,
    L::Service: Service<HandlerRequest, Response = ()> + Clone + Send + 'static,
    <L::Service as Service<HandlerRequest>>::Error: Into<BoxError>,
    <L::Service as Service<HandlerRequest>>::Future: Send + 'static,
{
    Arc::new(move |inner| {
        BoxCloneService::new(layer.layer(inner).map_err(PhotonError::handler_failed))
    })
}

/// A subscription's layered handler. Each attempt calls a clone, so that attempts of
/// different keys run at once: the clones share what the middleware shares (a
/// `ConcurrencyLimit`'s semaphore, say), as tower services do.
pub(crate) struct Layered {
    service: Mutex<LayeredService>,
}

impl Layered {
    /// The handler wrapped by `layer`.
    pub(crate) fn new(layer: &LayerFn, handler: BoxedHandler, resources: Arc<Resources>) -> Self {
        Self {
            service: Mutex::new(layer(HandlerService { handler, resources })),
        }
    }

    /// One attempt: waits until the middleware is ready, then calls it.
    pub(crate) async fn call(&self, call: &Call<'_>) -> Result<()> {
        let mut service = self
            .service
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let mut context = Context::new(call.event, call.attempt);
        context.set_partition(call.partition);
        let request = HandlerRequest::new(call.event.clone(), context);
        service.ready().await?.call(request).await
    }
}
