//! Photon's attributes: `#[topic]` and `#[subscribe]`. Use them through the `photon` facade
//! (feature `macros`, on by default): the generated code names `::photon::...` paths
//! (`::photon::runtime`, `::photon::core::inventory`), so a crate that uses them depends on
//! `photon`, not on `photon-runtime` or `photon-core` directly.
//!
//! # `#[topic(name = "...", keyed_by = "field")]`
//! On a struct or enum that derives `Serialize` and `Deserialize` itself (the attribute
//! adds no derive). It implements `photon::runtime::TypedTopic` (the payload is the value's
//! JSON, the key is the `keyed_by` field formatted with `Display`), adds inherent
//! `publish_on(&photon)` and `subscribe_on(&photon, options)`, and declares the topic in
//! the registry (`TopicRegistry::from_inventory`). The name is checked at compile time.
//!
//! # `#[subscribe(topic = "...", durable = "...", key = "...")]`
//! On an `async fn` whose event argument is a `photon::Event`, or a `#[topic]` type decoded
//! from the payload (a payload that does not decode is dead-lettered); besides it, in any
//! order, it may take `State<T>` (a value registered with `ExecutorBuilder::state` or
//! `PhotonBuilder::state`), `Photon` and `Context`, four arguments at most (recognised by
//! the last segment of their type's path; see `docs/handlers.md`). It returns `()` or
//! `Result<(), E>` with `E: Into<PhotonError>`. `durable` names the checkpoint; `topic` may
//! be left out for a typed argument (it must match the type's topic when given); `key`
//! restricts the handler to one key. `Photon::start_executor` runs every such handler.
//! With the flag `transactional` (`#[subscribe(durable = "...", transactional)]`) it is a
//! plain `fn` of the port's transaction and an input instead (see [`macro@subscribe`]).
//!
//! ```
//! use photon::prelude::*;
//!
//! #[topic(name = "orders", keyed_by = "order_id")]
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { order_id: String, total: u32 }
//!
//! #[subscribe(durable = "billing")]
//! async fn bill(order: Order) -> Result<(), PhotonError> {
//!     println!("billing {} for {}", order.order_id, order.total);
//!     Ok(())
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let photon = Photon::builder().build()?;
//! Order { order_id: "o-1".into(), total: 12 }.publish_on(&photon).await?;
//! let executor = photon.start_executor()?; // runs `bill` from its checkpoint
//! executor.wait_idle().await?;
//! executor.shutdown().await?;
//! assert_eq!(photon.checkpoint("billing", "orders", None).await?, Some(1));
//! # Ok::<_, PhotonError>(())
//! # }).unwrap();
//! ```

mod args;
mod subscribe;
mod topic;
mod transactional;

/// The message of an expansion that must fail (for the macros' unit tests).
#[cfg(test)]
fn expansion_error(expanded: syn::Result<proc_macro2::TokenStream>) -> String {
    match expanded {
        Ok(_) => panic!("expected an error"),
        Err(err) => err.to_string(),
    }
}

use proc_macro::TokenStream;

/// Declares a typed topic: `#[topic(name = "orders", keyed_by = "order_id")]`.
///
/// `name` is checked at compile time (`[a-z0-9._-]`, bounded length); `keyed_by` names a
/// field whose `Display` form is each value's key (leave it out for an unkeyed topic). See
/// the crate documentation.
///
/// # Examples
/// ```
/// use photon::prelude::*;
/// use photon::runtime::SubscribeOptions;
///
/// #[topic(name = "payments.received", keyed_by = "account")]
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Payment { account: u64, cents: i64 }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let photon = Photon::builder().build()?;
/// assert_eq!(photon.registry().get("payments.received").unwrap().keyed_by, Some("account"));
/// let appended = Payment { account: 7, cents: 1250 }.publish_on(&photon).await?;
/// let mut payments = Payment::subscribe_on(&photon, SubscribeOptions::from_beginning());
/// let first = payments.next().await.unwrap()?;
/// assert_eq!(first.value, Payment { account: 7, cents: 1250 });
/// assert_eq!((first.event.seq, first.event.topic_key.as_deref()), (appended.seq, Some("7")));
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
#[proc_macro_attribute]
pub fn topic(attr: TokenStream, item: TokenStream) -> TokenStream {
    topic::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Registers an async fn as a durable handler: `#[subscribe(durable = "billing")]`.
///
/// Arguments: `durable` (the checkpoint name), `topic` (optional for a typed argument),
/// `key` (only this key's events), `group` (share the topic with the other members of this
/// consumer group; alone, it is also the durable name). See the crate documentation.
///
/// Policy arguments, each replacing the executor's setting for this handler:
/// `max_attempts = 5` (attempts per event, the first included), `initial_backoff = "100ms"`
/// and `max_backoff = "10s"` (the other retry settings stay the executor's), `timeout =
/// "30s"` (the limit of one attempt, `HandlerOptions::max_handler_time`: an attempt past
/// it is cancelled and retried, then dead-lettered), `concurrency = 4` (attempts running
/// at once, `HandlerOptions::concurrency`). Durations are in Photon's configuration
/// dialect (`250ms`, `30s`, `5m`, `1h 30m`); a bad one, a unitless number, a zero
/// `timeout` or a zero count is a compile error naming it.
///
/// ```
/// use photon::prelude::*;
///
/// #[subscribe(topic = "emails", durable = "mailer", max_attempts = 8, initial_backoff = "1s",
///             max_backoff = "5m", timeout = "30s", concurrency = 4)]
/// async fn send(email: Event) -> Result<(), PhotonError> {
///     println!("sending {}", email.payload);
///     Ok(())
/// }
/// ```
///
/// With `batch_max = 100, batch_wait = "50ms"` the function is a batch handler: it takes
/// a batch first (`Vec<Event>`, or `Vec<TypedEvent<T>>` of a `#[topic]` type), then any of
/// `State<T>` and `Photon` (no `Context`), and is called with up to `batch_max` events, or
/// with what arrived within `batch_wait` after a batch's first event; the batch is
/// acknowledged together (see `ExecutorBuilder::batch_handler`). Both are needed; a zero
/// count or wait, a `concurrency`, or another first argument is a compile error.
///
/// ```
/// use photon::prelude::*;
///
/// #[subscribe(topic = "clicks", durable = "click-counter", batch_max = 100, batch_wait = "50ms")]
/// async fn count(clicks: Vec<Event>) -> Result<(), PhotonError> {
///     println!("{} clicks, from seq {}", clicks.len(), clicks[0].seq);
///     Ok(())
/// }
/// ```
///
/// The function takes its event (an `Event` or a `#[topic]` type) and, in any order, any
/// of `State<T>`, `Photon` and `Context` (`photon::runtime::{State, Context}`, also in
/// the prelude): up to four arguments. `Photon::start_executor` fails with
/// `PhotonError::Config` when a `State<T>` it takes has no registered value.
///
/// ```
/// use photon::prelude::*;
///
/// #[derive(Clone)]
/// struct Prices { vat_percent: u32 }
///
/// #[subscribe(topic = "carts", durable = "pricing")]
/// async fn price(context: Context, cart: Event, prices: State<Prices>, photon: Photon)
///     -> Result<(), PhotonError>
/// {
///     let total = cart.payload["net"].as_u64().unwrap_or(0) * (100 + u64::from(prices.vat_percent)) / 100;
///     let priced = serde_json::json!({ "cart_seq": context.seq(), "total": total });
///     photon.publish("priced", context.key(), cart.actor, priced).await?;
///     Ok(())
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let photon = Photon::builder().state(Prices { vat_percent: 20 }).build()?;
/// photon.publish("carts", Some("c-1"), serde_json::json!(null), serde_json::json!({ "net": 100 })).await?;
/// let executor = photon.start_executor()?;
/// executor.wait_idle().await?;
/// let priced = photon.subscribe("priced", None, None).next().await.unwrap()?;
/// assert_eq!(priced.payload, serde_json::json!({ "cart_seq": 1, "total": 120 }));
/// executor.shutdown().await?;
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
///
/// With the flag `transactional`, the handler is a plain `fn` of the port's transaction
/// and an input (`fn book(tx: &SqliteTransaction<'_>, payment: Payment) -> Result<(),
/// PhotonError>`): what it writes through the transaction commits together with the
/// checkpoint advance (`photon_core::TransactionalPort`), so its effects in that database
/// are exactly-once. It runs on the port's writer thread, one event at a time in seq
/// order; it cannot join a group. The executor binds it to the `Photon`'s port at start
/// and refuses another kind of port with `PhotonError::InvalidInput`. A transactional
/// handler takes the transaction and its event only (no `State`, `Photon` or `Context`).
///
/// # Examples
/// A handler of raw events, one of a single key, and a group member:
/// ```
/// use photon::prelude::*;
///
/// #[subscribe(topic = "audit", durable = "audit-log")]
/// async fn audit(event: Event) {
///     println!("{} #{}: {}", event.topic_name, event.seq, event.payload);
/// }
///
/// #[subscribe(topic = "orders", durable = "vip", key = "customer-7")]
/// async fn vip(event: Event) -> Result<(), PhotonError> {
///     Ok(())
/// }
///
/// #[subscribe(topic = "orders", group = "shipping")]
/// async fn ship(event: Event) -> Result<(), PhotonError> {
///     Ok(())
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let photon = Photon::builder().build()?;
/// let executor = photon.start_executor()?;
/// let mut names: Vec<String> = executor.handlers().iter().map(|h| h.durable().to_owned()).collect();
/// names.sort();
/// assert_eq!(names, vec!["audit-log", "shipping", "vip"]);
/// executor.shutdown().await?;
/// # Ok::<_, PhotonError>(())
/// # }).unwrap();
/// ```
#[proc_macro_attribute]
pub fn subscribe(attr: TokenStream, item: TokenStream) -> TokenStream {
    subscribe::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
