//! [`ExecutorBuilder`]: chooses the handlers (closures and `#[subscribe]` functions) and
//! starts them.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use photon_core::{
    validate_topic_key, validate_topic_name, BoxError, CheckpointKey, PhotonError, Result,
    TransactionalPort,
};
use tower::{Layer, Service};

use super::arguments::{BoxedHandler, Handler, Resources, States};
use super::batch::{BatchHandler, BatchItem, BatchPolicy};
use super::dispatch::{self, Subscription};
use super::handler::{HandlerDescriptor, HandlerOptions, Registration};
use super::service::{self, HandlerRequest, HandlerService, LayerFn};
use super::transactional;
use super::{Executor, ExecutorConfig, ExecutorShared, RunningHandler};
use crate::photon::Photon;
use crate::shutdown::StopSwitch;

/// Builds an [`Executor`] on a `Photon`: `photon.executor()`.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::{Event, Photon};
///
/// let photon = Photon::builder().build().unwrap();
/// let executor = photon
///     .executor()
///     .handler("billing", "orders", |event: Event| async move {
///         println!("order {}", event.payload);
///         Ok::<(), photon_runtime::PhotonError>(())
///     })
///     .start()
///     .unwrap();
/// executor.shutdown().await.unwrap();
/// # });
/// ```
pub struct ExecutorBuilder {
    photon: Photon,
    config: ExecutorConfig,
    registrations: Vec<Registration>,
    declared: bool,
    /// Middleware for `#[subscribe]` handlers, by durable name.
    declared_layers: Vec<(String, LayerFn)>,
    states: States,
}

impl std::fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let handlers: Vec<_> = self.registrations.iter().map(|r| &r.options).collect();
        f.debug_struct("ExecutorBuilder")
            .field("config", &self.config)
            .field("handlers", &handlers)
            .field("declared", &self.declared)
            .field("states", &self.states.len())
            .finish()
    }
}

impl ExecutorBuilder {
    pub(crate) fn new(photon: Photon) -> Self {
        Self {
            config: photon.executor_config().clone(),
            states: photon.states().clone(),
            photon,
            registrations: Vec::new(),
            declared: false,
            declared_layers: Vec::new(),
        }
    }

    /// Uses these settings instead of the `Photon`'s (`PhotonBuilder::executor_config`).
    /// `Photon::dead_letters` keeps reading the `Photon`'s dead-letter suffix.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::{ExecutorConfig, Photon};
    /// let photon = Photon::builder().build().unwrap();
    /// let config = ExecutorConfig::builder().parallelism(2).build().unwrap();
    /// let executor = photon.executor().config(config).start().unwrap();
    /// # executor.shutdown().await.unwrap();
    /// # });
    /// ```
    pub fn config(mut self, config: ExecutorConfig) -> Self {
        self.config = config;
        self
    }

    /// Registers `value` for the handlers that take [`State<T>`](super::State) (with `T`
    /// its type): each call gets a clone. A second value of one type replaces the first;
    /// a value registered here replaces one of its type registered with
    /// [`PhotonBuilder::state`](crate::PhotonBuilder::state).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::executor::State;
    /// use photon_runtime::{Event, Photon, PhotonError};
    ///
    /// #[derive(Clone)]
    /// struct Config { currency: &'static str }
    ///
    /// let photon = Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .state(Config { currency: "EUR" })
    ///     .handler("billing", "orders", |event: Event, config: State<Config>| async move {
    ///         println!("billing {} in {}", event.payload, config.currency);
    ///     })
    ///     .start()?;
    /// # executor.shutdown().await?;
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] fails when a handler takes a `State<T>` no
    /// value was registered for.
    pub fn state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// Runs `handler` on the durable subscription `durable` of `topic` (every key).
    ///
    /// `handler` takes its event (an [`Event`](photon_core::Event), or a `#[topic]` type
    /// decoded from the payload) and, in any order, any of [`State<T>`](super::State),
    /// [`Photon`] and [`Context`](super::Context): up to four arguments (see
    /// [`Handler`]). It returns a future of `()` or `Result<(), E>`. A closure's event
    /// argument needs its type written: `|event: Event|`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::executor::Context;
    /// use photon_runtime::{Event, Photon, PhotonError};
    ///
    /// let photon = Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("audit", "orders", |_event: Event| async { Ok::<(), PhotonError>(()) })
    ///     // Publishes a follow-up through the `Photon` the executor runs on.
    ///     .handler("notify", "orders", |event: Event, photon: Photon, context: Context| async move {
    ///         let note = serde_json::json!({ "order_seq": context.seq() });
    ///         photon.publish("notifications", context.key(), event.actor, note).await?;
    ///         Ok::<(), PhotonError>(())
    ///     })
    ///     .start()?;
    /// assert_eq!(executor.handlers().len(), 2);
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(1)).await?;
    /// executor.wait_idle().await?;
    /// assert_eq!(photon.store().port().head_seq("notifications", None).await?, Some(1));
    /// # executor.shutdown().await?;
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] checks the arguments.
    pub fn handler<H, Args>(self, durable: &str, topic: &str, handler: H) -> Self
    where
        H: Handler<Args>,
    {
        self.handler_with(HandlerOptions::new(durable, topic), handler)
    }

    /// Runs `handler` (as for [`ExecutorBuilder::handler`]) on the subscription `options`
    /// describes (name, topic, key, group).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let photon = photon_runtime::Photon::builder().build().unwrap();
    /// use photon_runtime::{Event, HandlerOptions};
    /// let executor = photon
    ///     .executor()
    ///     .handler_with(HandlerOptions::new("vip", "orders").key("o-1"), |_event: Event| async {})
    ///     .start()
    ///     .unwrap();
    /// # executor.shutdown().await.unwrap();
    /// # });
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] checks the arguments.
    pub fn handler_with<H, Args>(mut self, options: HandlerOptions, handler: H) -> Self
    where
        H: Handler<Args>,
    {
        self.registrations.push(Registration {
            options,
            handler: BoxedHandler::new(handler),
            layer: None,
            transactional: None,
        });
        self
    }

    /// Runs `handler` (as for [`ExecutorBuilder::handler_with`]) wrapped in the `tower`
    /// middleware `layer`: each attempt goes through the service `layer` makes of the
    /// handler's [`HandlerService`], driven with `ready()` then `call()`.
    ///
    /// - `layer` wraps **each attempt**, inside the retry loop: a retry goes through it
    ///   again, so a counting layer sees every attempt and a rate limit limits attempts.
    /// - [`HandlerOptions::max_handler_time`] bounds the whole attempt, time spent waiting
    ///   in the middleware (for a concurrency or rate limit) included; a `tower` timeout
    ///   layer bounds what is inside it.
    /// - Each attempt calls a clone of the layered service, so the service must be
    ///   `Clone`; clones share what the middleware shares (a `ConcurrencyLimit`'s
    ///   semaphore), so the limit holds across the keys of the subscription.
    /// - The service's error becomes a [`PhotonError`]: kept as it is when it is one (a
    ///   non-retryable one is dead-lettered at once), else a retryable handler failure
    ///   with the error as its source (a `tower` timeout's `Elapsed`, say). A panic in the
    ///   middleware is a non-retryable failure, as in a handler.
    ///
    /// ```text
    /// dead letter <- retry loop <- max_handler_time <- layer <- handler
    /// ```
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use photon_runtime::executor::HandlerRequest;
    /// use photon_runtime::{Event, HandlerOptions, Photon, PhotonError};
    /// use tower::ServiceExt;
    ///
    /// let seen = Arc::new(AtomicU32::new(0));
    /// let counter = seen.clone();
    /// // A hand-written middleware: counts the attempts it lets through.
    /// let counting = tower::layer::layer_fn(move |inner: photon_runtime::executor::HandlerService| {
    ///     let counter = counter.clone();
    ///     inner.map_request(move |request: HandlerRequest| {
    ///         counter.fetch_add(1, Ordering::SeqCst);
    ///         request
    ///     })
    /// });
    /// let photon = Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler_layered(HandlerOptions::new("billing", "orders"), counting, |_event: Event| async {})
    ///     .start()?;
    /// photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
    /// executor.wait_idle().await?;
    /// assert_eq!(seen.load(Ordering::SeqCst), 1);
    /// # executor.shutdown().await?;
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] checks the arguments, as for
    /// [`ExecutorBuilder::handler`].
    pub fn handler_layered<H, Args, L>(
        mut self,
        options: HandlerOptions,
        layer: L,
        handler: H,
    ) -> Self
    where
        H: Handler<Args>,
        L: Layer<HandlerService> + Send + Sync + 'static,
        L::Service: Service<HandlerRequest, Response = ()> + Clone + Send + 'static,
        <L::Service as Service<HandlerRequest>>::Error: Into<BoxError>,
        <L::Service as Service<HandlerRequest>>::Future: Send + 'static,
    {
        self.registrations.push(Registration {
            options,
            handler: BoxedHandler::new(handler),
            layer: Some(service::layer_fn(layer)),
            transactional: None,
        });
        self
    }

    /// Runs the batch handler `handler` on the subscription `options` describes: it is
    /// called with batches of up to `batch.max_events()` events, or with what arrived within
    /// `batch.max_wait()` after a batch's first event, and the batch is acknowledged
    /// together once the handler returns `Ok`.
    ///
    /// - The batch is the first argument: `Vec<Event>`, or `Vec<TypedEvent<T>>` of a
    ///   `#[topic]` type `T` (whose topic must be `options`' topic). Up to three of
    ///   [`State<T>`](super::State) and `Photon` may follow; a batch handler takes no
    ///   `Context` (each item carries its event).
    /// - Batches hold events of every key, in read order: the events of a key are in seq
    ///   order inside a batch, and the batches run one at a time, so a key's batches run
    ///   in order. [`HandlerOptions::concurrency`] does not apply (and is refused).
    /// - A failed attempt retries the whole batch with the handler's retry policy;
    ///   [`HandlerOptions::max_handler_time`] bounds each attempt of the batch. When the
    ///   handler gives up, each event of the batch is dead-lettered with the last error.
    ///   An event whose payload does not decode as `T`, or whose record cannot be opened,
    ///   is dead-lettered at once and left out of the batch.
    /// - A group handler's batch holds its member's share; before each attempt, the events
    ///   of partitions that moved to another member are given back and the rest is
    ///   attempted. [`current_ownership`](super::current_ownership) is the lease of the
    ///   batch when all its events are under one, else `None`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use photon_runtime::executor::BatchPolicy;
    /// use photon_runtime::{Event, HandlerOptions, Photon, PhotonError};
    ///
    /// let photon = Photon::builder().build()?;
    /// let sizes = Arc::new(Mutex::new(Vec::new()));
    /// let seen = sizes.clone();
    /// let executor = photon
    ///     .executor()
    ///     .batch_handler(
    ///         HandlerOptions::new("audit", "orders"),
    ///         BatchPolicy::new(100, Duration::from_millis(20)),
    ///         move |events: Vec<Event>| {
    ///             seen.lock().unwrap().push(events.len());
    ///             async { Ok::<(), PhotonError>(()) }
    ///         },
    ///     )
    ///     .start()?;
    /// for n in 0..3 {
    ///     photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(n)).await?;
    /// }
    /// executor.wait_idle().await?;
    /// assert_eq!(sizes.lock().unwrap().iter().sum::<usize>(), 3);
    /// executor.shutdown().await?;
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] refuses a `batch` outside its limits (see
    /// [`BatchPolicy::new`]) or with a `concurrency` ([`PhotonError::Config`] naming the
    /// handler and topic), and checks the arguments as for [`ExecutorBuilder::handler`].
    pub fn batch_handler<H, I, Args>(
        mut self,
        options: HandlerOptions,
        batch: BatchPolicy,
        handler: H,
    ) -> Self
    where
        H: BatchHandler<I, Args>,
        I: BatchItem,
    {
        self.registrations.push(Registration {
            options: options.batch(batch),
            handler: BoxedHandler::batch(handler),
            layer: None,
            transactional: None,
        });
        self
    }

    /// Runs a transactional `handler` on the subscription `options` describes: each call
    /// gets the event and `port`'s transaction, and what it writes through that
    /// transaction commits together with the checkpoint advance (see
    /// [`TransactionalPort`]). `port` must be the port this `Photon` runs on (a clone of
    /// it).
    ///
    /// - **Exactly-once, in that database**: a crash, a retry or a second consumer of the
    ///   same subscription never applies an event's writes twice, nor skips them. Effects
    ///   outside the transaction (calls to other systems) stay at-least-once.
    /// - A failed attempt (error or panic) rolls its writes back; retries follow the
    ///   retry policy, and a dead letter is stored with the checkpoint advance in one
    ///   transaction.
    /// - The subscription's events run one at a time, in seq order, whatever their keys
    ///   ([`ExecutorConfig::parallelism`] does not apply): each transaction moves the
    ///   checkpoint to its own event.
    /// - Not available for group handlers.
    /// - The checkpoint is written by these transactions only, never by the executor's
    ///   ordinary checkpoint commits.
    /// - Publishing from the handler: through its transaction, exactly once with the
    ///   checkpoint advance; with `Photon::publish`, an independent append that is kept
    ///   when the handler's transaction rolls back (at-least-once). On PostgreSQL the second
    ///   does not wait for the handler's transaction, except on a topic that transaction
    ///   already published to (see `photon_backend_postgres::PostgresTransaction`).
    ///
    /// On SQLite, `P::Handler` is `photon_backend_sqlite::TransactionalHandler`, a closure
    /// over a `&SqliteTransaction` run on the port's writer thread. On PostgreSQL it is
    /// `photon_backend_postgres::TransactionalHandler`, an async closure over a
    /// `&PostgresTransaction` on one of the port's pooled connections.
    ///
    /// # Errors
    /// [`ExecutorBuilder::start`] refuses a transactional handler with a group
    /// ([`PhotonError::InvalidInput`]).
    pub fn transactional_handler<P: TransactionalPort>(
        mut self,
        options: HandlerOptions,
        port: Arc<P>,
        handler: Arc<P::Handler>,
    ) -> Self {
        let (handler, letters) = transactional::wrap(&options, port, handler);
        self.registrations.push(Registration {
            options,
            handler: BoxedHandler::of_event(handler),
            layer: None,
            transactional: Some(letters),
        });
        self
    }

    /// Runs `handler` on the durable subscription `durable` of its event argument's topic:
    /// that argument is a `#[topic]` type `T`, each payload decoded as `T` (a payload that
    /// does not decode is dead-lettered). The other arguments are as for
    /// [`ExecutorBuilder::handler`].
    ///
    /// ```no_run
    /// # async fn demo(photon: photon_runtime::Photon) {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Order { id: String }
    /// # impl photon_runtime::TypedTopic for Order {
    /// #     const TOPIC: &'static str = "orders";
    /// #     fn topic_key(&self) -> Option<String> { Some(self.id.clone()) }
    /// # }
    /// use photon_runtime::executor::Context;
    /// let executor = photon
    ///     .executor()
    ///     .typed_handler("billing", |order: Order, context: Context| async move {
    ///         println!("{} (attempt {})", order.id, context.attempt())
    ///     })
    ///     .start()
    ///     .unwrap();
    /// # }
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] refuses a handler whose event argument is a
    /// raw `Event` (it names no topic: use [`ExecutorBuilder::handler`]).
    pub fn typed_handler<H, Args>(mut self, durable: &str, handler: H) -> Self
    where
        H: Handler<Args>,
    {
        let handler = BoxedHandler::new(handler);
        // An empty topic is refused at start, naming the handler.
        let topic = handler.input_topic().unwrap_or_default();
        self.registrations.push(Registration {
            options: HandlerOptions::new(durable, topic),
            handler,
            layer: None,
            transactional: None,
        });
        self
    }

    /// Also runs every handler declared with `#[subscribe]` in the linked program.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let photon = photon_runtime::Photon::builder().build().unwrap();
    /// let executor = photon.executor().declared_handlers().start().unwrap();
    /// # executor.shutdown().await.unwrap();
    /// # });
    /// ```
    pub fn declared_handlers(mut self) -> Self {
        self.declared = true;
        self
    }

    /// Wraps the `#[subscribe]` handler whose durable name is `durable` in tower
    /// middleware, as [`ExecutorBuilder::handler_layered`] does for a closure (each attempt
    /// goes through it, inside the retry loop and the time limit). Turns on
    /// [`ExecutorBuilder::declared_handlers`].
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let photon = photon_runtime::Photon::builder().build().unwrap();
    /// use std::time::Duration;
    /// let executor = photon
    ///     .executor()
    ///     .layer_declared("mailer", tower::timeout::TimeoutLayer::new(Duration::from_secs(5)));
    /// // `start` refuses it here: this program declares no handler named "mailer".
    /// assert!(executor.start().is_err());
    /// # });
    /// ```
    ///
    /// # Errors
    /// None here; [`ExecutorBuilder::start`] refuses a name no `#[subscribe]` handler has,
    /// a name given twice, and middleware on a batch handler
    /// ([`PhotonError::InvalidInput`] naming it).
    pub fn layer_declared<L>(mut self, durable: impl Into<String>, layer: L) -> Self
    where
        L: Layer<HandlerService> + Send + Sync + 'static,
        L::Service: Service<HandlerRequest, Response = ()> + Clone + Send + 'static,
        <L::Service as Service<HandlerRequest>>::Error: Into<BoxError>,
        <L::Service as Service<HandlerRequest>>::Future: Send + 'static,
    {
        self.declared = true;
        self.declared_layers
            .push((durable.into(), service::layer_fn(layer)));
        self
    }

    /// Puts each middleware of [`ExecutorBuilder::layer_declared`] on its declared handler.
    fn attach_declared_layers(&mut self, declared: &mut [Registration]) -> Result<()> {
        for (durable, layer) in std::mem::take(&mut self.declared_layers) {
            let named =
                |registration: &&mut Registration| registration.options.durable() == durable;
            let Some(registration) = declared.iter_mut().find(named) else {
                return Err(PhotonError::InvalidInput(format!(
                    "layer_declared: no #[subscribe] handler has the durable name {durable:?}"
                )));
            };
            if registration.layer.is_some() {
                return Err(PhotonError::InvalidInput(format!(
                    "layer_declared: handler {durable:?} was given middleware twice: compose the layers into one (tower::ServiceBuilder)"
                )));
            }
            if registration.handler.batch_call().is_some() {
                return Err(PhotonError::InvalidInput(format!(
                    "layer_declared: handler {durable:?} takes batches; middleware wraps single-event attempts"
                )));
            }
            registration.layer = Some(layer);
        }
        Ok(())
    }

    /// Starts every handler on the current tokio runtime.
    ///
    /// # Errors
    /// - [`PhotonError::InvalidInput`] outside a tokio runtime, for two handlers on one
    ///   subscription (same name, topic and key), a `#[subscribe]` or `typed_handler`
    ///   without topic, a handler that does not take exactly one event argument, or whose
    ///   `#[topic]` argument is published on another topic than the one it is registered
    ///   on.
    /// - [`PhotonError::InvalidTopic`] / `InvalidKey` for a bad topic, key, or a topic
    ///   whose dead-letter topic name would be invalid.
    /// - [`PhotonError::Config`] for invalid settings (a handler's own retry policy with
    ///   no attempt or a jitter outside 0 to 1, a concurrency or `max_handler_time` of 0,
    ///   naming the handler), and for a handler that takes a
    ///   [`State<T>`](super::State) whose `T` was never registered
    ///   ([`ExecutorBuilder::state`]): the message names the handler and
    ///   `std::any::type_name::<T>()`.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::executor::State;
    /// use photon_runtime::{Event, Photon, PhotonError};
    ///
    /// #[derive(Clone)]
    /// struct Pool;
    ///
    /// let photon = Photon::builder().build()?;
    /// let refused = photon
    ///     .executor()
    ///     .handler("billing", "orders", |_event: Event, _pool: State<Pool>| async {})
    ///     .start()
    ///     .unwrap_err();
    /// assert!(matches!(refused, PhotonError::Config { .. }));
    /// let text = refused.to_string();
    /// assert!(text.contains("handler billing takes State<") && text.contains("::Pool>"), "{text}");
    /// # Ok::<_, PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn start(mut self) -> Result<Executor> {
        self.config.validate()?;
        if self.declared {
            let mut declared = Vec::new();
            for descriptor in inventory::iter::<HandlerDescriptor> {
                declared.push(Registration::from_descriptor(
                    descriptor,
                    self.photon.store().port(),
                    &self.config.retry,
                )?);
            }
            self.attach_declared_layers(&mut declared)?;
            self.registrations.extend(declared);
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            PhotonError::InvalidInput("the executor must be started inside a tokio runtime".into())
        })?;
        self.check_subscriptions()?;
        let twins: Vec<Registration> = self
            .registrations
            .iter()
            .filter(|registration| registration.options.requeues())
            .map(super::requeue::retry_twin)
            .collect();
        if !twins.is_empty() {
            // Requeued events come back through the scheduler: this process runs one.
            self.photon.start_scheduler()?;
        }
        self.registrations.extend(twins);
        let config = Arc::new(self.config);
        let resources = Arc::new(Resources {
            photon: self.photon.downgrade(),
            states: self.states,
        });
        let switch = StopSwitch::new();
        let mut running = Vec::new();
        let mut tasks = Vec::new();
        for registration in self.registrations {
            let options = registration.options.clone();
            let checkpoint =
                CheckpointKey::new(options.durable(), options.topic(), options.topic_key());
            let subscription = Arc::new(Subscription::new(
                self.photon.store().clone(),
                registration,
                checkpoint.clone(),
                self.photon.committer(checkpoint),
                config.clone(),
                resources.clone(),
                switch.signal(),
            ));
            running.push(RunningHandler {
                options,
                stats: subscription.stats.clone(),
                progress: subscription.progress.clone(),
                position: subscription.position.clone(),
            });
            tasks.push(runtime.spawn(dispatch::run(subscription)));
        }
        let shared = Arc::new(ExecutorShared {
            port: self.photon.store().port().clone(),
            start_policy: config.start_policy,
            switch,
            running,
            tasks: Mutex::new(tasks),
        });
        self.photon.attach_executor(shared.clone());
        Ok(Executor { shared })
    }

    fn check_subscriptions(&self) -> Result<()> {
        let mut seen = BTreeSet::new();
        for registration in &self.registrations {
            let options = &registration.options;
            self.check_arguments(registration)?;
            options.validate_policy()?;
            self.check_batch(registration)?;
            validate_topic_name(options.topic())?;
            if let Some(key) = options.topic_key() {
                validate_topic_key(options.topic(), key)?;
            }
            validate_topic_name(&self.config.dead_letter_topic(options.topic()))?;
            self.check_requeue(registration)?;
            if options.durable().is_empty() {
                return Err(PhotonError::InvalidInput(format!(
                    "handler {} on topic {:?} has an empty durable name",
                    options.handler_name(),
                    options.topic()
                )));
            }
            if let (Some(group), Some(_)) = (options.group_name(), &registration.transactional) {
                return Err(PhotonError::InvalidInput(format!(
                    "handler {}: a transactional handler cannot join group {group:?} (a group's positions are per partition, not one checkpoint)",
                    options.handler_name()
                )));
            }
            if let Some(group) = options.group_name() {
                if group.is_empty() || options.topic_key().is_some() {
                    return Err(PhotonError::InvalidInput(format!(
                        "handler {}: a group handler needs a group name and takes every key of its topic",
                        options.handler_name()
                    )));
                }
                let port = self.photon.store().port();
                if !port.capabilities().consumer_groups {
                    return Err(port.unsupported("consumer groups across processes"));
                }
            }
            let identity = (options.durable(), options.topic(), options.topic_key());
            if !seen.insert(identity) {
                return Err(PhotonError::InvalidInput(format!(
                    "two handlers share the durable subscription {:?} on topic {:?} (key {:?}): give each its own name",
                    options.durable(),
                    options.topic(),
                    options.topic_key()
                )));
            }
        }
        Ok(())
    }

    /// Checks that a handler that requeues retries takes single events outside a
    /// transaction, and that its retry topic is a valid topic name.
    fn check_requeue(&self, registration: &Registration) -> Result<()> {
        let options = &registration.options;
        if !options.requeues() {
            return Ok(());
        }
        let name = options.handler_name();
        if registration.handler.batch_call().is_some() || registration.transactional.is_some() {
            return Err(PhotonError::InvalidInput(format!(
                "handler {name}: requeue_retries is for handlers of single events outside a transaction (a batch or a transaction has no one event to requeue)"
            )));
        }
        let retries = super::requeue::retry_topic(options);
        validate_topic_name(&retries).map_err(|err| {
            PhotonError::InvalidInput(format!(
                "handler {name}: its retry topic {retries:?} (requeue_retries) is no valid topic name: {err}"
            ))
        })
    }

    /// Checks that a batch handler has a batch policy within its limits, and a handler of
    /// single events none.
    fn check_batch(&self, registration: &Registration) -> Result<()> {
        let options = &registration.options;
        let name = options.handler_name();
        let batch_handler = registration.handler.batch_call().is_some();
        match (options.batch_policy(), batch_handler) {
            (None, false) => Ok(()),
            (Some(policy), true) => {
                policy.validate(name, options.topic(), self.config.max_in_flight)?;
                match options.concurrency_limit() {
                    Some(concurrency) => Err(PhotonError::config(
                        format!("handler {name} on topic {:?}: concurrency", options.topic()),
                        concurrency.to_string(),
                        "no concurrency for a batch handler: its batches run one at a time, in order",
                    )),
                    None => Ok(()),
                }
            }
            (Some(_), false) => Err(PhotonError::InvalidInput(format!(
                "handler {name} has a batch policy but takes single events: its first argument must be a Vec<Event> or Vec<TypedEvent<T>>"
            ))),
            (None, true) => Err(PhotonError::InvalidInput(format!(
                "handler {name} takes batches but has no batch policy: register it with ExecutorBuilder::batch_handler"
            ))),
        }
    }

    /// Checks a handler's arguments: one event, of the registered topic when typed, and
    /// every state registered.
    fn check_arguments(&self, registration: &Registration) -> Result<()> {
        let options = &registration.options;
        let name = options.handler_name();
        let handler = &registration.handler;
        handler.check(name, &self.states)?;
        match (options.topic(), handler.input_topic()) {
            ("", None) => Err(PhotonError::InvalidInput(format!(
                "handler {name} names no topic and takes an Event: register it with ExecutorBuilder::handler and a topic"
            ))),
            (registered, Some(typed)) if registered != typed => Err(PhotonError::InvalidInput(format!(
                "handler {name} is registered on topic {registered:?} but its argument is published on {typed:?}"
            ))),
            _ => Ok(()),
        }
    }
}
