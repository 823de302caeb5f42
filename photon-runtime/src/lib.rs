//! Photon's runtime: [`Photon`] handles, the object-safe [`PhotonBackend`], durable
//! subscriptions, typed topics ([`TypedTopic`]) and the handler [`executor`].
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use futures::StreamExt;
//! use photon_runtime::Photon;
//! use serde_json::json;
//!
//! let photon = Photon::builder().build().unwrap();
//! photon.publish("orders", Some("o-1"), json!("alice"), json!({"total": 12})).await.unwrap();
//! let mut orders = photon.durable("billing", "orders", None);
//! let event = orders.next().await.unwrap().unwrap();
//! assert_eq!(event.payload["total"], 12);
//! orders.ack(&event).await.unwrap();
//! photon.shutdown().await.unwrap();
//! assert_eq!(photon.checkpoint("billing", "orders", None).await.unwrap(), Some(event.seq));
//! # });
//! ```

mod admin;
mod backend;
mod builder;
mod dead_letter;
pub mod executor;
mod group;
#[cfg(feature = "otel")]
mod otel;
mod photon;
pub mod schedule;
mod shutdown;
mod spans;
mod subscription;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::{GenericPhotonBackend, PhotonBackend};
pub use builder::PhotonBuilder;
pub use executor::current_ownership;
pub use executor::{
    AdminSnapshot, BatchHandler, BatchItem, BatchPolicy, BoxedHandler, Context, DeadEvent,
    DeadLetter, DeadLetterCount, DeclaredPolicy, Executor, ExecutorBuilder, ExecutorConfig,
    ExecutorConfigBuilder, Handler, HandlerArgument, HandlerDescriptor, HandlerFuture,
    HandlerInput, HandlerOptions, HandlerRequest, HandlerService, HandlerSnapshot,
    IntoHandlerResult, Retry, RetryPolicy, RetryPolicyBuilder, State, StoredBody, SubscribeOptions,
    TopicSnapshot, TransactionalBinding, TypedEvent, TypedStream, TypedTopic, UndecodableRecord,
    DEFAULT_MAX_HANDLER_TIME, WAIT_IDLE_TIMEOUT,
};
pub use group::{GroupStatus, GroupSubscription, PartitionStatus, TypedGroupSubscription};
pub use photon::Photon;
pub use schedule::{Clock, Scheduled, SchedulerConfig};
pub use subscription::DurableSubscription;

pub use photon_core::{
    Appended, BatchEvent, CheckpointKey, Event, EventStream, FlushPolicy, Headers, PhotonError,
    StartAt, StartPolicy, StorageCapabilities, StoragePort, TopicDescriptor, TopicRegistry,
    TransactionOutcome, TransactionalPort, TransportCrypto,
};
