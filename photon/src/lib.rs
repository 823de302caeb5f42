//! Photon: an embeddable pub/sub runtime.
//!
//! Publish typed events to topics; consume them with durable subscriptions that resume
//! after a restart; keep per-key order; choose the storage with a feature:
//!
//! | feature | storage |
//! |---|---|
//! | `mem` (default) | in-process, for development and tests |
//! | `sqlite` | one durable process (`SqliteStoragePort`) |
//! | `nats` | NATS JetStream (`NatsStoragePort`) |
//! | `fluvio` | Fluvio (`FluvioStoragePort`); with `fluvio-tls` (default) over TLS when configured |
//! | `postgres` | PostgreSQL, shared by many processes (`PostgresStoragePort`) |
//!
//! The feature `testing` (off by default) adds `photon::testing`, helpers for your own tests.
//! The feature `otel` (off by default) carries the W3C trace context of each publish in the
//! event's headers and continues it in the handler's span (see "Trace propagation" in
//! `docs/observability.md`).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use photon::prelude::*;
//! use serde_json::json;
//!
//! let photon = Photon::builder().build()?;
//! photon.publish("orders", Some("o-1"), json!("alice"), json!({"total": 12})).await?;
//! let mut billing = photon.durable("billing", "orders", None);
//! let event = billing.next().await.expect("stream is endless")?;
//! billing.ack(&event).await?;
//! # Ok::<_, PhotonError>(())
//! # }).unwrap();
//! ```
//!
//! # Typed topics and handlers
//! `#[topic]` turns a serde type into a topic; `#[subscribe]` registers a handler that
//! [`Photon::start_executor`](runtime::Photon::start_executor) runs with per-key order,
//! retries and dead letters:
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
//! let executor = photon.start_executor()?;
//! executor.wait_idle().await?; // `bill` handled every order stored so far
//! executor.shutdown().await?;  // drains in-flight handlers, commits checkpoints
//! # Ok::<_, PhotonError>(())
//! # }).unwrap();
//! ```
//!
//! # Choosing the store
//! Build a port and hand it to [`PhotonBuilder::storage_port`](runtime::PhotonBuilder::storage_port):
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use photon::prelude::*;
//! use photon::sqlite::SqliteStoragePort;
//!
//! let directory = tempfile::tempdir().unwrap();
//! let port = SqliteStoragePort::builder().path(directory.path().join("events.db")).build().await?;
//! let photon = Photon::builder().storage_port(port).build()?;
//! photon.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
//! photon.shutdown().await?;
//! # Ok::<_, PhotonError>(())
//! # }).unwrap();
//! ```
//!
//! ```no_run
//! # async fn run() -> photon::Result<()> {
//! use photon::prelude::*;
//! use photon::fluvio::FluvioStoragePortBuilder;
//! use photon::nats::NatsStoragePort;
//!
//! let on_nats = Photon::builder()
//!     .storage_port(NatsStoragePort::builder().url("nats://127.0.0.1:4222").build().await?)
//!     .build()?;
//! let on_fluvio = Photon::builder()
//!     .storage_port(FluvioStoragePortBuilder::new().endpoint("127.0.0.1:9003").build().await?)
//!     .build()?;
//! # let _ = (on_nats, on_fluvio); Ok(()) }
//! ```
//!
//! # Testing your handlers
//! The `testing` feature adds `photon::testing`: a `Photon` on a fresh in-process store with
//! quick retries, a `Recorder` of handled events, a `FailFirst` wrapper that makes chosen
//! events fail, and `settle`. Enable it for tests only:
//!
//! ```toml
//! [dev-dependencies]
//! photon = { version = "0.1", features = ["testing"] }
//! ```
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use photon::prelude::*;
//! use photon::testing::{self, FailFirst, Recorder};
//!
//! let photon = testing::photon()?;
//! let billed = Recorder::new();
//! let flaky = FailFirst::new(1); // every event fails once, then succeeds
//! let executor = photon
//!     .executor()
//!     .handler("billing", "orders", flaky.wrap(billed.handler()))
//!     .start()?;
//! photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(12)).await?;
//! executor.wait_idle().await?;
//! assert_eq!(billed.payloads(), vec![serde_json::json!(12)]);
//! assert_eq!(photon.admin_snapshot().await?.handlers[0].retries, 1);
//! # Ok::<_, PhotonError>(())
//! # }).unwrap();
//! ```
//!
//! # Examples
//! `photon/examples/` holds runnable services, one per backend (`sqlite_service`,
//! `nats_service`, `fluvio_service`, `postgres_service`), and `orders` on the in-process
//! store; `docs/testing.md` says how to run them.

pub use futures;
pub use photon_core as core;
pub use photon_core::{
    mem, Appended, CheckpointKey, Event, EventStore, EventStream, FlushPolicy, GroupOptions,
    Headers, PhotonError, Result, StartAt, StartPolicy, StorageCapabilities, StoragePort,
    TopicDescriptor, TopicRegistry, TransportCrypto,
};

#[cfg(feature = "runtime")]
pub use photon_runtime as runtime;

#[cfg(feature = "runtime")]
pub use photon_runtime::{
    executor, AdminSnapshot, BatchPolicy, Context, DeadLetter, DurableSubscription, Executor,
    ExecutorConfig, GenericPhotonBackend, GroupSubscription, HandlerOptions, Photon, PhotonBackend,
    PhotonBuilder, Retry, Scheduled, SchedulerConfig, State, SubscribeOptions, TypedEvent,
    TypedGroupSubscription, TypedStream, TypedTopic,
};

#[cfg(feature = "macros")]
pub use photon_macros::{subscribe, topic};

#[cfg(feature = "testing")]
pub use photon_runtime::testing;

#[cfg(feature = "sqlite")]
pub use photon_backend_sqlite as sqlite;

#[cfg(feature = "nats")]
pub use photon_backend_nats as nats;

#[cfg(feature = "fluvio")]
pub use photon_backend_fluvio as fluvio;

#[cfg(feature = "postgres")]
pub use photon_backend_postgres as postgres;

/// The names most programs need.
pub mod prelude {
    pub use futures::StreamExt;

    pub use crate::{Event, GroupOptions, Headers, PhotonError, StartAt, StartPolicy};

    #[cfg(feature = "runtime")]
    pub use crate::{
        BatchPolicy, Context, DurableSubscription, Executor, GroupSubscription, Photon,
        PhotonBuilder, Retry, State, SubscribeOptions, TypedEvent, TypedTopic,
    };

    #[cfg(feature = "macros")]
    pub use crate::{subscribe, topic};
}
