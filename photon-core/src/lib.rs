//! Photon's vocabulary and contract.
//!
//! - [`Event`], [`PhotonError`], [`StorageCapabilities`], topic names and the
//!   [`TopicRegistry`]; [`headers`]: what an event may carry beside its payload.
//! - [`StoragePort`]: the contract every backend implements, with its behaviour written as
//!   bullets that the `photon-testkit` conformance suite checks.
//! - [`EventStore`]: validation, limits and the sealed envelope ([`TransportCrypto`]) in
//!   front of any port.
//! - [`CheckpointCommitter`]: checkpoint coalescing; [`TransactionalPort`]: a handler's
//!   writes and the checkpoint advance in one transaction (exactly-once in that database).
//! - [`mem::MemStoragePort`]: the in-process port.
//! - [`metrics`] and [`spans`]: the metrics Photon records and the tracing spans it opens.

// `settings!` names this crate by its name in attributes (serde paths), also here.
extern crate self as photon_core;
pub mod batch;
pub mod capabilities;
pub mod checkpoint;
pub mod config;
pub mod crypto;
pub mod error;
pub mod event;
pub mod group;
pub mod headers;
pub mod mem;
pub mod metrics;
pub mod port;
pub mod progress;
pub mod raw;
pub mod spans;
pub mod store;
pub mod topic;
pub mod transaction;

pub use batch::{BatchEvent, MAX_BATCH_EVENTS};
pub use capabilities::{ReplayWindow, StorageCapabilities, DEFAULT_MAX_PAYLOAD_BYTES};
pub use checkpoint::{CheckpointCommitter, FlushPolicy};
pub use crypto::{Opened, TransportCrypto, TRANSPORT_KEYS_ENV, TRANSPORT_KEY_ENV};
pub use error::{BoxError, CryptoFailure, PhotonError, Result};
pub use event::{Appended, Body, Event, Record, RecordDraft, SealedBody};
pub use group::{GroupCoordination, GroupMembership, GroupOptions, GroupScope};
pub use headers::{HeaderProblem, Headers, TRACEPARENT};
pub use port::{
    Acknowledge, CheckpointKey, Delivery, DeliveryStream, GroupRequest, RecordStream, StartAt,
    StoragePort, StoredCheckpoint, SubscribeRequest, TopicInfo,
};
pub use progress::Progress;
pub use store::{new_envelope_id, EventStore, EventStream, StartPolicy, Unopened};
pub use topic::{
    is_dead_letter_topic, validate_topic_key, validate_topic_name, TopicDescriptor, TopicRegistry,
    DEAD_LETTER_SUFFIX, MAX_TOPIC_KEY_LEN, MAX_TOPIC_NAME_LEN,
};
pub use transaction::{TransactionHandle, TransactionOutcome, TransactionalPort};

// Re-exported so that `#[topic]` expansions and ports name one version of these crates.
#[doc(hidden)]
pub use inventory;
