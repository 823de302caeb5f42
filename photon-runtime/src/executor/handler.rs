//! Handlers: the functions the executor runs per event, declared with `#[subscribe]`
//! ([`HandlerDescriptor`], collected with `inventory`) or registered as closures
//! ([`HandlerOptions`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use photon_core::group::GroupOptions;
use photon_core::metrics::Consumer;
use photon_core::{Event, PhotonError, Result, StoragePort};

use super::arguments::BoxedHandler;
use super::batch::BatchPolicy;
use super::config::RetryPolicy;
use super::service::LayerFn;
use super::transactional::{BindTransactional, LetterCommit};
use super::typed::TypedTopic;

/// The future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<()>> + Send + 'static>>;

/// A function of the event alone: what a transactional handler is bound to.
pub type HandlerFn = Arc<dyn Fn(Event) -> HandlerFuture + Send + Sync + 'static>;

/// A handler declared with `#[subscribe]`, collected with `inventory` and started by
/// `Photon::start_executor`.
#[derive(Debug, Clone, Copy)]
pub struct HandlerDescriptor {
    /// Rust path of the handler function, for logs and the admin snapshot.
    pub name: &'static str,
    /// Topic the handler consumes; empty when taken from the typed argument.
    pub topic: &'static str,
    /// Topic of the handler's typed argument, `None` when it takes an [`Event`].
    pub input_topic: Option<&'static str>,
    /// Durable subscription name: the checkpoint the handler resumes from.
    pub durable: &'static str,
    /// Only this key's events, when set.
    pub key: Option<&'static str>,
    /// Consumer group the handler shares its topic with, when set.
    pub group: Option<&'static str>,
    /// Makes the function callable with its arguments (the event, and any `State`,
    /// `Photon`, `Context`); unused for a transactional handler, which runs through
    /// `transactional`.
    pub handler: fn() -> BoxedHandler,
    /// Set for `#[subscribe(transactional)]`: binds the function to the `Photon`'s port
    /// when the executor starts.
    pub transactional: Option<BindTransactional>,
    /// Retries, time limit and concurrency the attribute declares.
    pub policy: DeclaredPolicy,
}

inventory::collect!(HandlerDescriptor);

/// What `#[subscribe(max_attempts = .., initial_backoff = "..", max_backoff = "..",
/// timeout = "..", concurrency = .., batch_max = .., batch_wait = "..", requeue_retries)]`
/// declares; a field left `None` keeps the executor's setting. Written by the macro.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeclaredPolicy {
    /// [`RetryPolicy::max_attempts`] for this handler.
    pub max_attempts: Option<u32>,
    /// [`RetryPolicy::initial_backoff`] for this handler.
    pub initial_backoff: Option<Duration>,
    /// [`RetryPolicy::max_backoff`] for this handler.
    pub max_backoff: Option<Duration>,
    /// [`HandlerOptions::max_handler_time`]: the limit of one attempt.
    pub timeout: Option<Duration>,
    /// [`HandlerOptions::concurrency`].
    pub concurrency: Option<usize>,
    /// `batch_max` and `batch_wait`: the function is a batch handler
    /// ([`BatchPolicy`]); the macro sets both or neither.
    pub batch: Option<BatchPolicy>,
    /// [`HandlerOptions::requeue_retries`].
    pub requeue_retries: bool,
}

impl DeclaredPolicy {
    /// Applies the declared settings to `options`; the retry fields left unset are taken
    /// from `executor` (the executor's [`RetryPolicy`]).
    fn apply(&self, mut options: HandlerOptions, executor: &RetryPolicy) -> HandlerOptions {
        if self.max_attempts.is_some()
            || self.initial_backoff.is_some()
            || self.max_backoff.is_some()
        {
            let mut policy = *executor;
            policy.max_attempts = self.max_attempts.unwrap_or(policy.max_attempts);
            policy.initial_backoff = self.initial_backoff.unwrap_or(policy.initial_backoff);
            policy.max_backoff = self.max_backoff.unwrap_or(policy.max_backoff);
            options = options.retry(policy);
        }
        if let Some(limit) = self.timeout {
            options = options.max_handler_time(limit);
        }
        if let Some(concurrency) = self.concurrency {
            options = options.concurrency(concurrency);
        }
        if let Some(batch) = self.batch {
            options = options.batch(batch);
        }
        if self.requeue_retries {
            options = options.requeue_retries();
        }
        options
    }
}

/// The event argument of a transactional handler: the raw [`Event`] or a `#[topic]` type
/// decoded from the payload. (Other handlers take theirs through
/// [`super::HandlerArgument`], which also covers `State`, `Photon` and `Context`.)
pub trait HandlerInput: Sized + Send + 'static {
    /// The topic of a typed input; `None` for [`Event`].
    const TOPIC: Option<&'static str>;

    /// Builds the input from a delivered event.
    ///
    /// # Errors
    /// [`PhotonError::Codec`] when the payload does not decode (not retried: the event
    /// goes to the dead-letter topic).
    fn from_event(event: Event) -> Result<Self>;
}

impl HandlerInput for Event {
    const TOPIC: Option<&'static str> = None;

    fn from_event(event: Event) -> Result<Self> {
        Ok(event)
    }
}

impl<T: TypedTopic> HandlerInput for T {
    const TOPIC: Option<&'static str> = Some(T::TOPIC);

    fn from_event(event: Event) -> Result<Self> {
        T::from_event(&event)
    }
}

/// What a handler function may return: `()` or `Result<(), E>` with `E` any error (a
/// [`PhotonError`], an `anyhow::Error`, any `std::error::Error + Send + Sync`, a `String`):
/// an error other than a [`PhotonError`] is a retryable [`PhotonError::Handler`] that keeps
/// it as its source ([`PhotonError::handler_failed`]).
pub trait IntoHandlerResult {
    /// The result the executor acts on.
    fn into_handler_result(self) -> Result<()>;
}

impl IntoHandlerResult for () {
    fn into_handler_result(self) -> Result<()> {
        Ok(())
    }
}

impl<E: Into<photon_core::BoxError>> IntoHandlerResult for std::result::Result<(), E> {
    fn into_handler_result(self) -> Result<()> {
        self.map_err(PhotonError::handler_failed)
    }
}

/// A handler registered on the executor builder: which subscription, and the function.
///
/// ```
/// use photon_runtime::HandlerOptions;
/// let options = HandlerOptions::new("billing", "orders").key("o-1");
/// assert_eq!(options.durable(), "billing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerOptions {
    durable: String,
    topic: String,
    key: Option<String>,
    name: Option<String>,
    group: Option<String>,
    member: Option<String>,
    max_handler_time: Option<Duration>,
    lease: Option<(Duration, Duration)>,
    partitions: Option<u32>,
    retry: Option<RetryOverride>,
    concurrency: Option<usize>,
    batch: Option<BatchPolicy>,
    requeue: bool,
    /// Set on the subscription reading a requeuing handler's retry topic: the handler's
    /// own topic.
    retried: Option<String>,
}

/// A handler's own [`RetryPolicy`], compared by the bits of its jitter so that
/// [`HandlerOptions`] stays `Eq`.
#[derive(Debug, Clone, Copy)]
struct RetryOverride(RetryPolicy);

impl PartialEq for RetryOverride {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0, &other.0);
        (
            a.max_attempts,
            a.initial_backoff,
            a.max_backoff,
            a.jitter.to_bits(),
        ) == (
            b.max_attempts,
            b.initial_backoff,
            b.max_backoff,
            b.jitter.to_bits(),
        )
    }
}

impl Eq for RetryOverride {}

/// How long one attempt of a group handler may run before the executor cancels it (unless
/// [`HandlerOptions::max_handler_time`] says otherwise): Kafka's `max.poll.interval.ms`
/// default.
pub const DEFAULT_MAX_HANDLER_TIME: Duration = Duration::from_secs(300);

impl HandlerOptions {
    /// The durable subscription `durable` on `topic`.
    pub fn new(durable: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            durable: durable.into(),
            topic: topic.into(),
            key: None,
            name: None,
            group: None,
            member: None,
            max_handler_time: None,
            lease: None,
            partitions: None,
            retry: None,
            concurrency: None,
            batch: None,
            requeue: false,
            retried: None,
        }
    }

    /// Makes [`Retry::after`](super::Retry::after) requeue the event instead of waiting in
    /// place: it is published for later to the handler's retry topic
    /// (`<topic>.retries.<durable>`, which the executor also reads for this handler, with
    /// the same options) and acknowledged, so that the key's later events go on at once.
    /// The requeued event carries the attempts made (header `photon-attempts`) and where it
    /// came from (`photon-requeued-from`: topic, seq, event id); it arrives with the retry
    /// topic's name and seq, and goes to the handler's own topic's dead-letter topic when
    /// its attempts run out. Per-key order is not kept for a requeued event. Needs a
    /// scheduler ([`crate::schedule`]; the executor's process runs one once it requeues).
    ///
    /// ```
    /// let options = photon_runtime::HandlerOptions::new("mailer", "emails").requeue_retries();
    /// assert!(options.requeues());
    /// ```
    ///
    /// # Errors
    /// None here; `ExecutorBuilder::start` refuses it on a batch or transactional handler,
    /// and a retry topic name over the topic name limit, naming the handler.
    pub fn requeue_retries(mut self) -> Self {
        self.requeue = true;
        self
    }

    /// Whether [`Retry::after`](super::Retry::after) requeues (see
    /// [`Self::requeue_retries`]).
    pub fn requeues(&self) -> bool {
        self.requeue
    }

    /// The handler's own topic when these options read its retry topic.
    pub(crate) fn retried_topic(&self) -> Option<&str> {
        self.retried.as_deref()
    }

    /// These options reading `retry_topic` for the handler's requeued events.
    pub(crate) fn reading_retries_of(mut self, retry_topic: String) -> Self {
        self.retried = Some(std::mem::replace(&mut self.topic, retry_topic));
        self
    }

    /// Retries this handler's failed attempts with `policy` instead of the executor's
    /// [`ExecutorConfig::retry`](super::ExecutorConfig::retry): attempt count, backoff and
    /// jitter. Storing a dead letter keeps retrying with the executor's policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// use photon_runtime::{HandlerOptions, RetryPolicy};
    ///
    /// let policy = RetryPolicy::default().max_attempts(2).initial_backoff(Duration::from_millis(20));
    /// let options = HandlerOptions::new("billing", "orders").retry(policy);
    /// assert_eq!(options.retry_policy().map(|p| p.max_attempts), Some(2));
    /// ```
    ///
    /// # Errors
    /// None here; `ExecutorBuilder::start` refuses a policy whose `max_attempts` is 0 or
    /// whose `jitter` is outside 0 to 1 ([`PhotonError::Config`] naming the handler).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(RetryOverride(policy));
        self
    }

    /// The handler's own retry policy, when [`Self::retry`] set one.
    pub fn retry_policy(&self) -> Option<RetryPolicy> {
        self.retry.map(|policy| policy.0)
    }

    /// At most `attempts` of this handler run at the same time, whatever
    /// [`ExecutorConfig::parallelism`](super::ExecutorConfig::parallelism) says (this
    /// setting replaces it for the handler). Events of one key still run one at a time, in
    /// order; an event waiting for its retry holds no place. Independent of
    /// [`ExecutorConfig::max_in_flight`](super::ExecutorConfig::max_in_flight), which bounds
    /// the events read ahead. A transactional handler runs one event at a time whatever
    /// this says.
    ///
    /// ```
    /// let options = photon_runtime::HandlerOptions::new("billing", "orders").concurrency(4);
    /// assert_eq!(options.concurrency_limit(), Some(4));
    /// ```
    ///
    /// # Errors
    /// None here; `ExecutorBuilder::start` refuses 0 ([`PhotonError::Config`]).
    pub fn concurrency(mut self, attempts: usize) -> Self {
        self.concurrency = Some(attempts);
        self
    }

    /// The handler's own concurrency, when [`Self::concurrency`] set one.
    pub fn concurrency_limit(&self) -> Option<usize> {
        self.concurrency
    }

    /// Makes the handler a batch handler's (`ExecutorBuilder::batch_handler` sets it).
    pub(crate) fn batch(mut self, policy: BatchPolicy) -> Self {
        self.batch = Some(policy);
        self
    }

    /// How a batch handler's batches are made; `None` for a handler of single events.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use photon_runtime::executor::BatchPolicy;
    /// use photon_runtime::{Event, HandlerOptions, Photon};
    ///
    /// let photon = Photon::builder().build()?;
    /// let policy = BatchPolicy::new(100, Duration::from_millis(50));
    /// let executor = photon
    ///     .executor()
    ///     .batch_handler(HandlerOptions::new("audit", "orders"), policy, |events: Vec<Event>| async move {
    ///         println!("{} events", events.len());
    ///     })
    ///     .start()?;
    /// assert_eq!(executor.handlers()[0].batch_policy(), Some(policy));
    /// # executor.shutdown().await?;
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn batch_policy(&self) -> Option<BatchPolicy> {
        self.batch
    }

    /// Checks the handler's own retry policy and concurrency.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the handler and the setting.
    pub(crate) fn validate_policy(&self) -> Result<()> {
        let name = self.handler_name();
        if let Some(policy) = self.retry {
            policy.0.validate().map_err(|err| match err {
                PhotonError::Config {
                    variable,
                    value,
                    expected,
                } => PhotonError::config(format!("handler {name}: {variable}"), value, expected),
                other => other,
            })?;
        }
        if let Some(concurrency) = self.concurrency {
            photon_core::config::check_count(
                &format!("handler {name}: concurrency"),
                concurrency as u64,
                1..=u64::MAX,
            )?;
        }
        if self.max_handler_time == Some(Duration::ZERO) {
            return Err(PhotonError::config(
                format!("handler {name}: max_handler_time"),
                "0s",
                "a duration above zero",
            ));
        }
        Ok(())
    }

    /// Shares the topic with the other members of consumer group `group` (in this and other
    /// processes) instead of reading every event: each event is handled by one member,
    /// each key by one member at a time, in order. Retries and dead letters work as for a
    /// durable handler; the position is the group's. Not combinable with [`Self::key`].
    ///
    /// ```
    /// let options = photon_runtime::HandlerOptions::new("billing", "orders").group("billing");
    /// assert_eq!(options.group_name(), Some("billing"));
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The consumer group, when the handler is a group member.
    pub fn group_name(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// This process's member name in the handler's group. Default:
    /// [`photon_core::group::nth_member`] (`PHOTON_GROUP_MEMBER`, else `<hostname>-<pid>`,
    /// with `-2`, `-3`, ... for a process's further members of one group). A member that
    /// restarts under its name gets its partitions back once its previous incarnation's
    /// leases expired.
    ///
    /// ```
    /// let options = photon_runtime::HandlerOptions::new("billing", "orders")
    ///     .group("billing")
    ///     .member("billing-0");
    /// assert_eq!(options.member_override(), Some("billing-0"));
    /// ```
    pub fn member(mut self, member: impl Into<String>) -> Self {
        self.member = Some(member.into());
        self
    }

    /// The member name set with [`Self::member`].
    pub fn member_override(&self) -> Option<&str> {
        self.member.as_deref()
    }

    /// The member name this handler joins its group with: [`Self::member`], else the next
    /// [`photon_core::group::nth_member`] of the group (call once per subscription).
    pub(crate) fn member_name(&self) -> String {
        match (&self.member, &self.group) {
            (Some(member), _) => member.clone(),
            (None, Some(group)) => photon_core::group::nth_member(group, &self.topic),
            (None, None) => String::new(),
        }
    }

    /// Cancels a handler attempt that runs longer than `limit`: the attempt fails with a
    /// retryable handler error (its text starts with "timed out") and is retried (a group
    /// handler's retry starts only while its member still holds the partition); after the
    /// last attempt the event is dead-lettered with that error. The limit covers the whole
    /// attempt, the handler's middleware ([`ExecutorBuilder::handler_layered`]) included.
    /// `#[subscribe(timeout = "30s")]` sets it. Default: [`DEFAULT_MAX_HANDLER_TIME`] for a
    /// group handler, no limit for a durable one.
    ///
    /// [`ExecutorBuilder::handler_layered`]: super::ExecutorBuilder::handler_layered
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = photon_runtime::HandlerOptions::new("billing", "orders")
    ///     .max_handler_time(Duration::from_secs(30));
    /// assert_eq!(options.handler_time_limit(), Some(Duration::from_secs(30)));
    /// ```
    pub fn max_handler_time(mut self, limit: Duration) -> Self {
        self.max_handler_time = Some(limit);
        self
    }

    /// The time limit of one attempt (see [`Self::max_handler_time`]).
    pub fn handler_time_limit(&self) -> Option<Duration> {
        match (self.max_handler_time, &self.group) {
            (Some(limit), _) => Some(limit),
            (None, Some(_)) => Some(DEFAULT_MAX_HANDLER_TIME),
            (None, None) => None,
        }
    }

    /// A group handler's lease and heartbeat periods (default
    /// [`photon_core::group::DEFAULT_LEASE`], [`photon_core::group::DEFAULT_HEARTBEAT`]):
    /// a member that stops heartbeating loses its partitions after `lease`.
    pub fn lease(mut self, lease: Duration, heartbeat: Duration) -> Self {
        self.lease = Some((lease, heartbeat));
        self
    }

    /// A group handler's partition count on stores without shards (default
    /// [`photon_core::group::DEFAULT_PARTITIONS`]); see
    /// [`photon_core::group::GroupOptions::partitions`] for what a change of count does.
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// The membership options of a group handler joining as `member`.
    pub(crate) fn group_options(&self, member: String) -> GroupOptions {
        let mut options = GroupOptions::new(member);
        if let Some((lease, heartbeat)) = self.lease {
            options = options.lease(lease).heartbeat(heartbeat);
        }
        if let Some(partitions) = self.partitions {
            options = options.partitions(partitions);
        }
        options
    }

    /// Only this key's events (the checkpoint is then kept per key).
    ///
    /// ```
    /// let options = photon_runtime::HandlerOptions::new("billing", "orders").key("o-1");
    /// assert_eq!(options.topic_key(), Some("o-1"));
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// A name for logs and the admin snapshot (default: the durable name).
    ///
    /// ```
    /// let options = photon_runtime::HandlerOptions::new("billing", "orders").name("bill");
    /// assert_eq!(options.handler_name(), "bill");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The durable subscription name.
    pub fn durable(&self) -> &str {
        &self.durable
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The key filter.
    pub fn topic_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The handler's name.
    pub fn handler_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.durable)
    }

    /// Whom metrics and spans name: the group, else the durable subscription.
    pub(crate) fn consumer(&self) -> Consumer<'_> {
        self.group
            .as_deref()
            .map_or(Consumer::Subscription(&self.durable), Consumer::Group)
    }
}

/// A handler ready to run: options and function.
#[derive(Clone)]
pub(crate) struct Registration {
    pub(crate) options: HandlerOptions,
    pub(crate) handler: BoxedHandler,
    /// The middleware around each attempt, applied when the executor starts.
    pub(crate) layer: Option<LayerFn>,
    /// Set for a transactional handler: stores its dead letters with the checkpoint
    /// advance in one transaction.
    pub(crate) transactional: Option<Arc<dyn LetterCommit>>,
}

impl Registration {
    /// A registration from a `#[subscribe]` descriptor.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] when the descriptor names no topic or a topic other
    /// than its typed argument's, or is transactional on another kind of port than
    /// `port`.
    pub(crate) fn from_descriptor(
        descriptor: &HandlerDescriptor,
        port: &Arc<dyn StoragePort>,
        retry: &RetryPolicy,
    ) -> Result<Self> {
        let topic = match (descriptor.topic, descriptor.input_topic) {
            ("", Some(typed)) => typed,
            ("", None) => {
                return Err(PhotonError::InvalidInput(format!(
                    "#[subscribe] handler {} names no topic and takes an Event: add topic = \"...\"",
                    descriptor.name
                )))
            }
            (named, Some(typed)) if named != typed => {
                return Err(PhotonError::InvalidInput(format!(
                    "#[subscribe] handler {} names topic {named:?} but its argument is published on {typed:?}",
                    descriptor.name
                )))
            }
            (named, _) => named,
        };
        let mut options = HandlerOptions::new(descriptor.durable, topic).name(descriptor.name);
        if let Some(key) = descriptor.key {
            options = options.key(key);
        }
        if let Some(group) = descriptor.group {
            options = options.group(group);
        }
        options = descriptor.policy.apply(options, retry);
        if let Some(bind) = descriptor.transactional {
            let binding = bind(port, &options)?;
            return Ok(Self {
                options,
                handler: BoxedHandler::of_event(binding.handler),
                layer: None,
                transactional: Some(binding.letters),
            });
        }
        Ok(Self {
            options,
            handler: (descriptor.handler)(),
            layer: None,
            transactional: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handlers_own_error_is_kept_as_the_source() {
        let io = Err::<(), _>(std::io::Error::other("payment service unreachable"));
        let failed = io.into_handler_result().unwrap_err();
        assert!(failed.is_retryable());
        assert_eq!(
            failed.to_string(),
            "handler failed: payment service unreachable"
        );
        let source = std::error::Error::source(&failed).expect("the io error as source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
    }

    #[test]
    fn a_photon_error_stays_itself() {
        let refused = Err::<(), _>(PhotonError::handler_permanent("order 7 is refused"));
        let failed = refused.into_handler_result().unwrap_err();
        assert!(!failed.is_retryable());
        assert!(
            matches!(&failed, PhotonError::Handler { message, source: None, .. } if message == "order 7 is refused"),
            "{failed:?}"
        );
        let text = Err::<(), _>("bad input").into_handler_result().unwrap_err();
        assert_eq!(text.to_string(), "handler failed: bad input");
    }
}
