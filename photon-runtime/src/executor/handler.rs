//! Handlers: the functions the executor runs per event, declared with `#[subscribe]`
//! ([`HandlerDescriptor`], collected with `inventory`) or registered as closures
//! ([`HandlerOptions`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use photon_core::metrics::Consumer;
use photon_core::{Event, PhotonError, Result, StoragePort};

use super::transactional::{BindTransactional, LetterCommit};
use super::typed::TypedTopic;

/// The future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<()>> + Send + 'static>>;

/// A handler as the executor stores it.
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
    /// Calls the function with one event (unused for a transactional handler, which
    /// runs through `transactional`).
    pub handler: fn(Event) -> HandlerFuture,
    /// Set for `#[subscribe(transactional)]`: binds the function to the `Photon`'s port
    /// when the executor starts.
    pub transactional: Option<BindTransactional>,
}

inventory::collect!(HandlerDescriptor);

/// What a handler function may take: the raw [`Event`] or a `#[topic]` type decoded from
/// the payload.
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

/// What a handler function may return: `()` or `Result<(), E>` with `E` into
/// [`PhotonError`].
pub trait IntoHandlerResult {
    /// The result the executor acts on.
    fn into_handler_result(self) -> Result<()>;
}

impl IntoHandlerResult for () {
    fn into_handler_result(self) -> Result<()> {
        Ok(())
    }
}

impl<E: Into<PhotonError>> IntoHandlerResult for std::result::Result<(), E> {
    fn into_handler_result(self) -> Result<()> {
        self.map_err(Into::into)
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
}

impl HandlerOptions {
    /// The durable subscription `durable` on `topic`.
    pub fn new(durable: impl Into<String>, topic: impl Into<String>) -> Self {
        Self {
            durable: durable.into(),
            topic: topic.into(),
            key: None,
            name: None,
            group: None,
        }
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
    pub(crate) handler: HandlerFn,
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
        if let Some(bind) = descriptor.transactional {
            let binding = bind(port, &options)?;
            return Ok(Self {
                options,
                handler: binding.handler,
                transactional: Some(binding.letters),
            });
        }
        let function = descriptor.handler;
        Ok(Self {
            options,
            handler: Arc::new(function),
            transactional: None,
        })
    }
}
