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
//! | `fluvio` | Fluvio (`FluvioStoragePort`) |
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

pub use futures;
pub use photon_core as core;
pub use photon_core::{
    mem, Appended, CheckpointKey, Event, EventStore, EventStream, FlushPolicy, GroupOptions,
    PhotonError, Result, StartAt, StartPolicy, StorageCapabilities, StoragePort, TopicDescriptor,
    TopicRegistry, TransportCrypto,
};

#[cfg(feature = "runtime")]
pub use photon_runtime as runtime;

#[cfg(feature = "runtime")]
pub use photon_runtime::{
    executor, AdminSnapshot, DeadLetter, DurableSubscription, Executor, ExecutorConfig,
    GenericPhotonBackend, GroupSubscription, HandlerOptions, Photon, PhotonBackend, PhotonBuilder,
    SubscribeOptions, TypedEvent, TypedGroupSubscription, TypedStream, TypedTopic,
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

/// The names most programs need.
pub mod prelude {
    pub use futures::StreamExt;

    pub use crate::{Event, GroupOptions, PhotonError, StartAt, StartPolicy};

    #[cfg(feature = "runtime")]
    pub use crate::{
        DurableSubscription, Executor, GroupSubscription, Photon, PhotonBuilder, SubscribeOptions,
        TypedEvent, TypedTopic,
    };

    #[cfg(feature = "macros")]
    pub use crate::{subscribe, topic};
}
