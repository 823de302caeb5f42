//! Typed topics: [`TypedTopic`], implemented by `#[topic]`, publishes and subscribes a
//! serde type instead of raw JSON.

use std::future::Future;

use futures::StreamExt;
use photon_core::{Appended, Event, EventStream, PhotonError, Result, StartAt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::photon::Photon;

/// A serde type published on one topic. `#[topic(name = "...", keyed_by = "field")]`
/// implements it; the type keeps its own `Serialize`/`Deserialize` derives.
///
/// The payload of an event is the JSON of the value; the key is the `keyed_by` field
/// (formatted with `Display`).
///
/// # Examples
/// `#[topic]` implements it; by hand it reads:
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use futures::StreamExt;
/// use photon_runtime::{SubscribeOptions, TypedTopic};
///
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Order { order_id: String, total: u32 }
///
/// impl TypedTopic for Order {
///     const TOPIC: &'static str = "orders";
///     const KEYED_BY: Option<&'static str> = Some("order_id");
///     fn topic_key(&self) -> Option<String> { Some(self.order_id.clone()) }
/// }
///
/// let photon = photon_runtime::Photon::builder().build()?;
/// Order { order_id: "o-1".into(), total: 12 }.publish_on(&photon).await?;
/// let mut orders = Order::subscribe_on(&photon, SubscribeOptions::from_beginning());
/// let first = orders.next().await.unwrap()?;
/// assert_eq!(first.value, Order { order_id: "o-1".into(), total: 12 });
/// assert_eq!(first.event.topic_key.as_deref(), Some("o-1"));
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
pub trait TypedTopic: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The topic name.
    const TOPIC: &'static str;

    /// The field whose value is the partition key, if keyed.
    const KEYED_BY: Option<&'static str> = None;

    /// The partition key of this value.
    fn topic_key(&self) -> Option<String>;

    /// Publishes this value (actor `null`).
    ///
    /// # Errors
    /// [`PhotonError::Codec`] when the value does not serialize; then as `Photon::publish`.
    fn publish_on(&self, photon: &Photon) -> impl Future<Output = Result<Appended>> + Send {
        self.publish_as(photon, Value::Null)
    }

    /// Publishes this value on behalf of `actor`.
    ///
    /// # Errors
    /// As [`TypedTopic::publish_on`].
    fn publish_as(
        &self,
        photon: &Photon,
        actor: Value,
    ) -> impl Future<Output = Result<Appended>> + Send {
        let payload = serde_json::to_value(self)
            .map_err(|err| PhotonError::codec(format!("payload of topic {:?}", Self::TOPIC), err));
        let key = self.topic_key();
        let photon = photon.clone();
        async move {
            photon
                .publish(Self::TOPIC, key.as_deref(), actor, payload?)
                .await
        }
    }

    /// Streams this topic's values from where `options` says (non-durable: nothing is
    /// checkpointed). `SubscribeOptions::live()` sees only values published from now on.
    fn subscribe_on(photon: &Photon, options: SubscribeOptions) -> TypedStream<Self> {
        let events = photon.subscribe_at(Self::TOPIC, options.key.as_deref(), options.start);
        TypedStream::new(events)
    }

    /// Decodes an event of this topic.
    ///
    /// # Errors
    /// [`PhotonError::Codec`] naming the topic and event when the payload does not decode.
    fn from_event(event: &Event) -> Result<Self> {
        Self::deserialize(&event.payload).map_err(|err| {
            PhotonError::codec(
                format!(
                    "payload of event {} on topic {:?}",
                    event.event_id, event.topic_name
                ),
                err,
            )
        })
    }
}

/// Where a typed, non-durable subscription starts and which key it follows.
///
/// ```
/// use photon_runtime::{StartAt, SubscribeOptions};
/// assert_eq!(SubscribeOptions::live().start(), StartAt::Tail);
/// assert_eq!(SubscribeOptions::from_beginning().key("o-1").start(), StartAt::Beginning);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeOptions {
    start: StartAt,
    key: Option<String>,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        Self::from_beginning()
    }
}

impl SubscribeOptions {
    /// Live only: values published after the subscription is made (`StartAt::Tail`).
    pub fn live() -> Self {
        Self {
            start: StartAt::Tail,
            key: None,
        }
    }

    /// The whole retained history, then live values.
    pub fn from_beginning() -> Self {
        Self {
            start: StartAt::Beginning,
            key: None,
        }
    }

    /// Values with `seq > seq`, then live ones.
    ///
    /// ```
    /// use photon_runtime::{StartAt, SubscribeOptions};
    /// assert_eq!(SubscribeOptions::after_seq(7).start(), StartAt::AfterSeq(7));
    /// ```
    pub fn after_seq(seq: i64) -> Self {
        Self {
            start: StartAt::AfterSeq(seq),
            key: None,
        }
    }

    /// Only this key's values.
    ///
    /// ```
    /// let options = photon_runtime::SubscribeOptions::live().key("o-1");
    /// assert_eq!(options.topic_key(), Some("o-1"));
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Where the subscription starts.
    pub fn start(&self) -> StartAt {
        self.start
    }

    /// The key filter.
    pub fn topic_key(&self) -> Option<&str> {
        self.key.as_deref()
    }
}

/// A decoded value with the event that carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedEvent<T> {
    /// The decoded payload.
    pub value: T,
    /// The event (id, key, seq, actor, raw payload, time).
    pub event: Event,
}

/// A stream of decoded values. An event that cannot be opened or decoded is an error item;
/// the stream continues.
pub struct TypedStream<T> {
    inner: futures::stream::BoxStream<'static, Result<TypedEvent<T>>>,
}

impl<T> std::fmt::Debug for TypedStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedStream").finish_non_exhaustive()
    }
}

impl<T: TypedTopic> TypedStream<T> {
    fn new(events: EventStream) -> Self {
        let inner = events
            .map(|item| {
                let event = item?;
                let value = T::from_event(&event)?;
                Ok(TypedEvent { value, event })
            })
            .boxed();
        Self { inner }
    }
}

impl<T> futures::Stream for TypedStream<T> {
    type Item = Result<TypedEvent<T>>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
