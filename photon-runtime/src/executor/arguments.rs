//! Handler arguments: besides its event, a handler may take [`State`] (a value registered
//! on the builder), [`Photon`] (to publish) and [`Context`] (where the event stands and
//! which attempt this is), in any order. [`Handler`] is what makes a function of such
//! arguments callable by the executor; [`HandlerArgument`] is what each argument implements.
//!
//! The executor checks every handler's arguments when it starts (exactly one event
//! argument, every [`State`] registered), so a missing value is an error of
//! `ExecutorBuilder::start`, never of a call.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use photon_core::{Event, Headers, PhotonError, Result};

use super::batch::BatchCall;
use super::handler::{HandlerFn, HandlerFuture, IntoHandlerResult};
use super::typed::TypedTopic;
use crate::photon::{Photon, WeakPhoton};

use sealed::{ArgumentKind, Call};

/// Crate-private types in the signatures of the public traits: they keep the traits
/// implementable only here, so that adding an argument kind later breaks nobody.
pub(crate) mod sealed {
    use std::any::TypeId;

    use photon_core::Event;

    use super::Resources;

    /// What one attempt of a handler is called with; every argument is taken from it.
    pub struct Call<'a> {
        pub(crate) event: &'a Event,
        /// 1-based, counted by the retry loop.
        pub(crate) attempt: u32,
        /// The group partition the attempt runs under, for a group handler.
        pub(crate) partition: Option<u32>,
        pub(crate) resources: &'a Resources,
    }

    /// What an argument is, for the checks at start.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ArgumentKind {
        /// The event: raw (`topic: None`) or a `#[topic]` type published on `topic`.
        Event { topic: Option<&'static str> },
        /// A registered value of this type.
        State {
            type_id: TypeId,
            type_name: &'static str,
        },
        /// The `Photon` the executor runs on.
        Photon,
        /// The attempt's [`super::Context`].
        Context,
    }

    /// Implemented for the argument types of this module only.
    pub trait Sealed {}
}

/// What every handler of one executor shares: the `Photon` and the registered states.
pub(crate) struct Resources {
    /// Weak: a strong handle kept by the executor's tasks would keep the `Photon`, and
    /// with it the executor, alive for ever once every user handle is dropped.
    pub(crate) photon: WeakPhoton,
    pub(crate) states: States,
}

/// Values registered with `ExecutorBuilder::state` / `PhotonBuilder::state`, one per type.
#[derive(Clone, Default)]
pub(crate) struct States {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl States {
    /// Registers `value`, replacing an earlier value of its type.
    pub(crate) fn insert<T: Clone + Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// Whether a value of the type `type_id` is registered.
    pub(crate) fn contains(&self, type_id: TypeId) -> bool {
        self.values.contains_key(&type_id)
    }

    /// A clone of the registered `T`.
    fn get<T: Clone + 'static>(&self) -> Option<T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
            .cloned()
    }

    /// The number of registered values.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

/// The error of a handler whose [`State`] type was never registered.
pub(crate) fn missing_state(handler: &str, type_name: &str) -> PhotonError {
    PhotonError::config(
        "ExecutorBuilder::state",
        type_name,
        format!(
            "a registered value of this type: handler {handler} takes State<{type_name}> \
             (register one with ExecutorBuilder::state or PhotonBuilder::state)"
        ),
    )
}

/// A value registered once on the executor builder ([`ExecutorBuilder::state`]) or the
/// `Photon` builder ([`PhotonBuilder::state`]), handed to each handler call that takes
/// `State<T>` as a clone: wrap what should be shared (a connection pool usually is a
/// cheap handle already; otherwise an `Arc`).
///
/// The executor checks at start that every `State<T>` its handlers take is registered:
/// [`ExecutorBuilder::start`] fails with [`PhotonError::Config`] naming the type and the
/// handler otherwise. A value registered on the executor builder replaces one of the same
/// type registered on the `Photon` builder.
///
/// [`ExecutorBuilder::state`]: super::ExecutorBuilder::state
/// [`ExecutorBuilder::start`]: super::ExecutorBuilder::start
/// [`PhotonBuilder::state`]: crate::PhotonBuilder::state
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use photon_runtime::executor::State;
/// use photon_runtime::{Event, Photon, PhotonError};
///
/// #[derive(Clone, Default)]
/// struct Totals(Arc<AtomicU64>);
///
/// let totals = Totals::default();
/// let photon = Photon::builder().build()?;
/// let executor = photon
///     .executor()
///     .state(totals.clone())
///     .handler("totals", "orders", |State(totals): State<Totals>, event: Event| async move {
///         totals.0.fetch_add(event.payload["total"].as_u64().unwrap_or(0), Ordering::SeqCst);
///     })
///     .start()?;
/// photon.publish("orders", None, serde_json::json!(null), serde_json::json!({"total": 12})).await?;
/// executor.wait_idle().await?;
/// assert_eq!(totals.0.load(Ordering::SeqCst), 12);
/// executor.shutdown().await?;
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State<T>(pub T);

impl<T> std::ops::Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for State<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// Where the event a handler runs on stands, and which attempt this is. Built per attempt
/// from the event and the retry loop's count; take it as an argument of any handler.
///
/// The attempt number counts the attempts of this delivery in this process: an event
/// delivered again (after a restart, or by a group partition's next owner) starts again
/// at 1.
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use photon_runtime::executor::Context;
/// use photon_runtime::{Event, Photon, PhotonError};
///
/// let photon = Photon::builder().build()?;
/// let executor = photon
///     .executor()
///     .handler("audit", "orders", |event: Event, context: Context| async move {
///         assert_eq!((context.topic(), context.seq()), ("orders", event.seq));
///         assert_eq!(context.attempt(), 1);
///         assert_eq!(context.partition(), None); // not a group handler
///     })
///     .start()?;
/// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(1)).await?;
/// executor.wait_idle().await?;
/// executor.shutdown().await?;
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    topic: String,
    key: Option<String>,
    seq: i64,
    event_id: String,
    attempt: u32,
    headers: Headers,
    partition: Option<u32>,
}

impl Context {
    /// The context of attempt `attempt` (1-based) on `event`, outside a group. The
    /// executor builds it itself; this is for calling a handler function in a unit test.
    ///
    /// ```
    /// use photon_runtime::executor::Context;
    /// # let event: photon_runtime::Event = serde_json::from_value(serde_json::json!({
    /// #     "event_id": "e-1", "topic_name": "orders", "topic_key": "o-1", "seq": 3,
    /// #     "actor": null, "payload": 1, "created_at": "2026-01-01T00:00:00Z"
    /// # })).unwrap();
    /// let context = Context::new(&event, 2);
    /// assert_eq!((context.topic(), context.key(), context.seq(), context.attempt()), ("orders", Some("o-1"), 3, 2));
    /// ```
    pub fn new(event: &Event, attempt: u32) -> Self {
        Self {
            topic: event.topic_name.clone(),
            key: event.topic_key.clone(),
            seq: event.seq,
            event_id: event.event_id.clone(),
            attempt,
            headers: event.headers.clone(),
            partition: None,
        }
    }

    /// Sets the group partition the attempt runs under.
    pub(crate) fn set_partition(&mut self, partition: Option<u32>) {
        self.partition = partition;
    }

    /// The topic the event was published to.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The event's key, if it has one.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The event's position in its partition.
    pub fn seq(&self) -> i64 {
        self.seq
    }

    /// The event's id.
    pub fn event_id(&self) -> &str {
        &self.event_id
    }

    /// This attempt's number: 1 for the first call, 2 for the first retry, ...
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The headers the event was published with.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// For a group handler, the partition (its id in the store, see
    /// [`photon_core::group::Ownership::partition`]) whose lease this attempt runs under;
    /// `None` for a durable handler, and for a group whose port hands events out without
    /// partition leases.
    pub fn partition(&self) -> Option<u32> {
        self.partition
    }
}

/// What a handler function may take as an argument: its event (an [`Event`] or any
/// [`TypedTopic`] type, exactly one of them), [`State<T>`], [`Photon`] and [`Context`],
/// in any order.
///
/// Implemented by Photon for those types only (the trait is sealed).
pub trait HandlerArgument: sealed::Sealed + Sized + Send + 'static {
    /// What the argument is, for the checks at start.
    #[doc(hidden)]
    fn kind() -> ArgumentKind;

    /// Takes the argument from one attempt's call.
    ///
    /// # Errors
    /// [`PhotonError::Codec`] for a payload that does not decode as a typed argument;
    /// [`PhotonError::Closed`] for a [`Photon`] argument once every handle of that
    /// `Photon` was dropped.
    #[doc(hidden)]
    fn extract(call: &Call<'_>) -> Result<Self>;
}

impl sealed::Sealed for Event {}

impl HandlerArgument for Event {
    fn kind() -> ArgumentKind {
        ArgumentKind::Event { topic: None }
    }

    fn extract(call: &Call<'_>) -> Result<Self> {
        Ok(call.event.clone())
    }
}

impl<T: TypedTopic> sealed::Sealed for T {}

impl<T: TypedTopic> HandlerArgument for T {
    fn kind() -> ArgumentKind {
        ArgumentKind::Event {
            topic: Some(T::TOPIC),
        }
    }

    fn extract(call: &Call<'_>) -> Result<Self> {
        T::from_event(call.event)
    }
}

impl<T> sealed::Sealed for State<T> {}

impl<T: Clone + Send + Sync + 'static> HandlerArgument for State<T> {
    fn kind() -> ArgumentKind {
        ArgumentKind::State {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }

    fn extract(call: &Call<'_>) -> Result<Self> {
        // Checked at start; kept as an error rather than a panic all the same.
        call.resources
            .states
            .get::<T>()
            .map(State)
            .ok_or_else(|| missing_state("(unknown)", std::any::type_name::<T>()))
    }
}

impl sealed::Sealed for Photon {}

impl HandlerArgument for Photon {
    fn kind() -> ArgumentKind {
        ArgumentKind::Photon
    }

    fn extract(call: &Call<'_>) -> Result<Self> {
        call.resources.photon.upgrade().ok_or_else(|| {
            PhotonError::Closed(
                "the Photon this executor runs on: every handle of it was dropped".into(),
            )
        })
    }
}

impl sealed::Sealed for Context {}

impl HandlerArgument for Context {
    fn kind() -> ArgumentKind {
        ArgumentKind::Context
    }

    fn extract(call: &Call<'_>) -> Result<Self> {
        let mut context = Context::new(call.event, call.attempt);
        context.set_partition(call.partition);
        Ok(context)
    }
}

/// A function the executor can run as a handler: `Fn(A) -> Fut` up to `Fn(A, B, C, D) ->
/// Fut`, each argument a [`HandlerArgument`] (exactly one of them the event), `Fut` a
/// `Send` future of `()` or `Result<(), E>` ([`IntoHandlerResult`]). `Args` is the tuple
/// of argument types; it is inferred.
///
/// A closure's event argument needs its type written (`|event: Event|`): the closure
/// could take any argument type, so nothing else tells which.
///
/// Implemented by Photon only (the trait is sealed).
pub trait Handler<Args>: Send + Sync + 'static {
    /// The kinds of the arguments, in order.
    #[doc(hidden)]
    fn arguments() -> Vec<ArgumentKind>;

    /// Takes the arguments from `call` and calls the function.
    #[doc(hidden)]
    fn call(&self, call: &Call<'_>) -> HandlerFuture;
}

macro_rules! impl_handler {
    ($($argument:ident $value:ident),+) => {
        impl<F, Fut, R, $($argument,)+> Handler<($($argument,)+)> for F
        where
            F: Fn($($argument),+) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = R> + Send + 'static,
            R: IntoHandlerResult,
            $($argument: HandlerArgument,)+
        {
            fn arguments() -> Vec<ArgumentKind> {
                vec![$($argument::kind()),+]
            }

            fn call(&self, call: &Call<'_>) -> HandlerFuture {
                $(
                    let $value = match $argument::extract(call) {
                        Ok(value) => value,
                        Err(error) => return Box::pin(std::future::ready(Err(error))),
                    };
                )+
                let future = self($($value),+);
                Box::pin(async move { future.await.into_handler_result() })
            }
        }
    };
}

impl_handler!(A a);
impl_handler!(A a, B b);
impl_handler!(A a, B b, C c);
impl_handler!(A a, B b, C c, D d);

/// A handler with its argument types erased, as the executor stores it. `#[subscribe]`
/// descriptors make theirs with [`BoxedHandler::new`].
#[derive(Clone)]
pub struct BoxedHandler {
    call: Arc<dyn Fn(&Call<'_>) -> HandlerFuture + Send + Sync>,
    arguments: Arc<[ArgumentKind]>,
    /// Set for a batch handler, which the executor calls with batches only (`call` then
    /// refuses: a batch handler is never called per event).
    batch: Option<BatchCall>,
}

impl std::fmt::Debug for BoxedHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxedHandler")
            .field("arguments", &self.arguments)
            .field("batch", &self.batch.is_some())
            .finish_non_exhaustive()
    }
}

impl BoxedHandler {
    /// Erases `handler`'s argument types.
    ///
    /// ```
    /// use photon_runtime::executor::{BoxedHandler, Context};
    /// use photon_runtime::Event;
    /// let handler = BoxedHandler::new(|event: Event, context: Context| async move {
    ///     println!("{} attempt {}", event.seq, context.attempt());
    /// });
    /// # let _ = handler;
    /// ```
    pub fn new<H: Handler<Args>, Args>(handler: H) -> Self {
        Self {
            call: Arc::new(move |call: &Call<'_>| handler.call(call)),
            arguments: H::arguments().into(),
            batch: None,
        }
    }

    /// A batch handler: `batch` takes the batches; `arguments` are the kinds of its
    /// arguments, the batch counted as the event argument, for the checks at start.
    pub(crate) fn of_batch(batch: BatchCall, arguments: Vec<ArgumentKind>) -> Self {
        Self {
            call: Arc::new(|_: &Call<'_>| {
                Box::pin(std::future::ready(Err(PhotonError::handler_permanent(
                    "a batch handler takes batches, not single events",
                ))))
            }),
            arguments: arguments.into(),
            batch: Some(batch),
        }
    }

    /// The batch call of a batch handler.
    pub(crate) fn batch_call(&self) -> Option<&BatchCall> {
        self.batch.as_ref()
    }

    /// A handler of the event alone (transactional handlers).
    pub(crate) fn of_event(handler: HandlerFn) -> Self {
        Self {
            call: Arc::new(move |call: &Call<'_>| handler(call.event.clone())),
            arguments: Arc::new([ArgumentKind::Event { topic: None }]),
            batch: None,
        }
    }

    /// Calls the handler for one attempt.
    pub(crate) fn call(&self, call: &Call<'_>) -> HandlerFuture {
        (self.call)(call)
    }

    /// The topic of the event argument, when it is a `#[topic]` type (the first one, when
    /// the handler wrongly takes several).
    pub(crate) fn input_topic(&self) -> Option<&'static str> {
        self.arguments.iter().find_map(|kind| match kind {
            ArgumentKind::Event { topic } => *topic,
            _ => None,
        })
    }

    /// Checks the arguments against the registered `states`.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] unless exactly one argument is the event, or for a
    /// batch handler taking a [`Context`];
    /// [`PhotonError::Config`] naming the first `State<T>` whose `T` is not registered.
    pub(crate) fn check(&self, handler: &str, states: &States) -> Result<()> {
        let events = self
            .arguments
            .iter()
            .filter(|kind| matches!(kind, ArgumentKind::Event { .. }))
            .count();
        if events != 1 {
            return Err(PhotonError::InvalidInput(format!(
                "handler {handler} takes {events} event arguments: it takes exactly one, an Event or a #[topic] type (besides any State, Photon and Context)"
            )));
        }
        if self.batch.is_some() && self.arguments.contains(&ArgumentKind::Context) {
            return Err(PhotonError::InvalidInput(format!(
                "batch handler {handler} takes a Context: a batch has no single event position nor attempt to describe (each TypedEvent carries its event); take the batch and any State and Photon"
            )));
        }
        for kind in self.arguments.iter() {
            if let ArgumentKind::State { type_id, type_name } = kind {
                if !states.contains(*type_id) {
                    return Err(missing_state(handler, type_name));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        serde_json::from_value(serde_json::json!({
            "event_id": "e-7", "topic_name": "orders", "topic_key": "o-1", "seq": 7,
            "actor": null, "payload": {"total": 12}, "created_at": "2026-01-01T00:00:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn arguments_are_described_in_order() {
        let handler = BoxedHandler::new(|_: Context, _: State<u8>, _: Event, _: Photon| async {});
        assert_eq!(
            &*handler.arguments,
            &[
                ArgumentKind::Context,
                ArgumentKind::State {
                    type_id: TypeId::of::<u8>(),
                    type_name: "u8"
                },
                ArgumentKind::Event { topic: None },
                ArgumentKind::Photon,
            ]
        );
        assert_eq!(handler.input_topic(), None);
    }

    #[test]
    fn the_check_counts_events_and_finds_missing_states() {
        let mut states = States::default();
        let two_events = BoxedHandler::new(|_: Event, _: Event| async {});
        let refused = two_events.check("twice", &states).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "invalid input: handler twice takes 2 event arguments: it takes exactly one, an Event or a #[topic] type (besides any State, Photon and Context)"
        );
        let no_event = BoxedHandler::new(|_: Context| async {});
        assert!(no_event.check("none", &states).is_err());
        let stateful = BoxedHandler::new(|_: Event, _: State<String>| async {});
        let missing = stateful.check("stateful", &states).unwrap_err();
        assert!(
            matches!(&missing, PhotonError::Config { value, .. } if value == "alloc::string::String"),
            "{missing:?}"
        );
        assert!(
            missing
                .to_string()
                .contains("handler stateful takes State<alloc::string::String>"),
            "{missing}"
        );
        states.insert(String::from("ready"));
        stateful.check("stateful", &states).unwrap();
    }

    #[test]
    fn a_context_describes_its_event() {
        let context = Context::new(&event(), 3);
        assert_eq!(
            (
                context.topic(),
                context.key(),
                context.seq(),
                context.event_id()
            ),
            ("orders", Some("o-1"), 7, "e-7")
        );
        assert_eq!((context.attempt(), context.partition()), (3, None));
        assert!(context.headers().is_empty());
    }

    #[test]
    fn a_state_is_a_clone_of_the_registered_value() {
        let mut states = States::default();
        states.insert(vec![1, 2]);
        states.insert(vec![3]);
        assert_eq!(states.len(), 1);
        assert_eq!(states.get::<Vec<i32>>(), Some(vec![3]));
        assert_eq!(states.get::<String>(), None);
    }
}
