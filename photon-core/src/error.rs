//! The one error type every Photon call returns.

use std::error::Error as StdError;

use crate::headers::HeaderProblem;

/// Boxed error kept as the `source` of a [`PhotonError`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Result alias used across Photon.
pub type Result<T, E = PhotonError> = std::result::Result<T, E>;

/// Why an event could not be opened (decrypted and authenticated).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CryptoFailure {
    /// The record was sealed with a key id this process does not know.
    UnknownKey(String),
    /// The ciphertext, its associated data (envelope id, topic, key) or the nonce was altered,
    /// or the record was moved to another event or topic.
    Tampered,
    /// A transport key is configured but the record is in plaintext.
    UnsealedRecord,
    /// The record is sealed but this process has no transport key.
    NoKeyConfigured,
    /// The sealed body is not valid base64 or its plaintext is not valid JSON.
    Malformed(String),
}

impl std::fmt::Display for CryptoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownKey(id) => write!(f, "sealed with unknown key id {id:?}"),
            Self::Tampered => f.write_str("authentication failed (tampered or moved record)"),
            Self::UnsealedRecord => {
                f.write_str("plaintext record refused because a transport key is configured")
            }
            Self::NoKeyConfigured => {
                f.write_str("record is sealed but no transport key is configured")
            }
            Self::Malformed(why) => write!(f, "malformed sealed body: {why}"),
        }
    }
}

/// Every error Photon returns.
///
/// Variants say what went wrong for the caller; the adapter's own error, when there is one,
/// is kept as [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PhotonError {
    /// A topic name broke the naming rules (`[a-z0-9._-]`, bounded length).
    #[error("invalid topic name {topic:?}: {reason}")]
    InvalidTopic {
        /// The refused name.
        topic: String,
        /// Which rule it broke.
        reason: String,
    },
    /// A topic key (partition key) was refused.
    #[error("invalid topic key for topic {topic:?}: {reason}")]
    InvalidKey {
        /// Topic of the publish or subscription.
        topic: String,
        /// Which rule the key broke.
        reason: String,
    },
    /// A header was refused: its name or value breaks a rule, or the event's headers pass
    /// a limit (see [`crate::headers`]). Nothing was stored.
    #[error("header {header:?} of an event for topic {topic:?}: {problem}")]
    InvalidHeader {
        /// Topic of the publish.
        topic: String,
        /// The refused header's name (as given, even when the name is what was refused).
        header: String,
        /// The rule it broke, with the limit.
        problem: HeaderProblem,
    },
    /// The encoded actor, payload and headers are larger than the port accepts.
    #[error("event for topic {topic:?} is {size} bytes, over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Topic of the publish.
        topic: String,
        /// Encoded size in bytes (actor, payload and headers).
        size: usize,
        /// The port's limit in bytes.
        limit: usize,
    },
    /// The actor or payload nests arrays and objects deeper than every port can decode.
    #[error("event for topic {topic:?} nests {depth} levels deep, over the limit of {limit}")]
    PayloadTooDeep {
        /// Topic of the publish.
        topic: String,
        /// Nesting depth of the refused value.
        depth: usize,
        /// The limit, [`crate::store::MAX_JSON_DEPTH`].
        limit: usize,
    },
    /// An event of a batch was refused before anything of the batch was stored: `source`
    /// says why (an invalid topic, key or header, a payload over a limit).
    #[error("event {index} of the batch was refused, nothing of the batch was stored: {source}")]
    BatchEventRefused {
        /// Position of the refused event in the batch, from 0.
        index: usize,
        /// Why it was refused.
        #[source]
        source: Box<PhotonError>,
    },
    /// A batch held more events than one batch may (see
    /// [`crate::batch::MAX_BATCH_EVENTS`]). Nothing was stored.
    #[error("a batch of {events} events is over the limit of {limit} events per batch")]
    BatchTooLarge {
        /// Events in the refused batch.
        events: usize,
        /// The limit.
        limit: usize,
    },
    /// A batch failed part-way on a port without atomic batches (capability
    /// `atomic_batches`): its first `stored.len()` events were stored and are delivered,
    /// the event after them failed with `source`, and none after that is confirmed. The
    /// failed event may be stored as a failed single append may be (see `source`); on a
    /// port that pipelines a batch (NATS), events after it that were sent before the
    /// failure may be stored too.
    #[error("{} of {events} events of the batch were stored before it failed: {source}", .stored.len())]
    BatchIncomplete {
        /// The stored leading events, in batch order.
        stored: Vec<crate::event::Appended>,
        /// Events in the batch.
        events: usize,
        /// Why the event at index `stored.len()` failed.
        #[source]
        source: Box<PhotonError>,
    },
    /// Any other argument the caller passed was refused.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A configuration value (builder field or environment variable) was refused.
    #[error("invalid configuration {variable}={value:?}: expected {expected}")]
    Config {
        /// The environment variable or builder field.
        variable: String,
        /// The refused value (never a secret).
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// Something the caller named does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The storage port does not offer this operation (see `StorageCapabilities`).
    #[error("{operation} is not supported by the {backend} storage port")]
    Unsupported {
        /// Port label, e.g. `"mem"`.
        backend: &'static str,
        /// The refused operation.
        operation: &'static str,
    },
    /// The backend is unreachable or overloaded; retrying may succeed.
    #[error("{backend} is unavailable: {message}")]
    Unavailable {
        /// Port label.
        backend: &'static str,
        /// What failed.
        message: String,
        /// The adapter's error.
        #[source]
        source: Option<BoxError>,
    },
    /// The server refused the identity the port presented: a wrong password, an unknown
    /// user, a refused client certificate or token. The same credentials get the same
    /// answer, so this is never retryable. Names the server and the identity, never a
    /// secret.
    #[error("{backend} at {server} refused {identity}: {message}")]
    Unauthorized {
        /// Port label.
        backend: &'static str,
        /// The server as configured (its address; a URL without its password).
        server: String,
        /// Who the port presented itself as, e.g. `user "billing"`.
        identity: String,
        /// The server's reason.
        message: String,
        /// The adapter's error.
        #[source]
        source: Option<BoxError>,
    },
    /// An event could not be opened. The stream that returned it continues; the error keeps
    /// the record's position, so that a durable consumer can acknowledge or dead-letter it
    /// (see [`PhotonError::position`]).
    #[error("cannot open event {event_id} (seq {seq}) on topic {topic:?}: {reason}")]
    Crypto {
        /// Id of the refused event.
        event_id: String,
        /// Its topic.
        topic: String,
        /// Its position in its partition.
        seq: i64,
        /// Why.
        reason: CryptoFailure,
    },
    /// The backend refused or failed an operation in a way retrying will not fix.
    #[error("{backend} storage error: {message}")]
    Storage {
        /// Port label.
        backend: &'static str,
        /// What failed.
        message: String,
        /// The adapter's error.
        #[source]
        source: Option<BoxError>,
    },
    /// A stored record or a value could not be encoded or decoded.
    #[error("cannot encode or decode {context}: {source}")]
    Codec {
        /// What was being encoded or decoded.
        context: String,
        /// The codec's error (a `serde_json::Error` for Photon's own formats, downcast
        /// to it when the detail matters).
        #[source]
        source: BoxError,
    },
    /// A stored record could not be decoded. The stream that returned it continues; the
    /// error keeps the record's position and its stored bytes, so that a consumer can
    /// dead-letter it and move its checkpoint past it instead of losing it.
    #[error("cannot decode the record at seq {seq} of topic {topic:?} ({event_id}): {reason}")]
    Undecodable {
        /// Topic of the record.
        topic: String,
        /// Its stable event id, as the port names it.
        event_id: String,
        /// Its position in its partition.
        seq: i64,
        /// Its partition key when the port could still read it.
        key: Option<String>,
        /// The bytes as stored (boxed, with `reason`, to keep every `Result` small).
        stored: Box<[u8]>,
        /// Why decoding failed.
        reason: Box<str>,
    },
    /// Storage no longer holds events a subscription still needed (removed by retention or
    /// truncation): the seqs `from..to` of `topic` are gone. The stream continues at `to`.
    #[error("events {from}..{to} of topic {topic:?} are no longer stored (retention or truncation removed them)")]
    Gap {
        /// Topic of the subscription.
        topic: String,
        /// First missing seq.
        from: i64,
        /// First seq stored after the gap.
        to: i64,
    },
    /// A user handler failed.
    #[error("handler failed: {message}")]
    Handler {
        /// The handler's error text.
        message: String,
        /// Whether the executor should retry the event.
        retryable: bool,
        /// The handler's own error, when it returned one (see
        /// [`PhotonError::handler_failed`]).
        #[source]
        source: Option<BoxError>,
    },
    /// The object was shut down or dropped.
    #[error("{0} is closed")]
    Closed(String),
    /// A wait with a deadline (such as `Executor::wait_idle_for`) ended before what it
    /// waited for happened; the message says what was still missing.
    #[error("{operation} did not finish within {waited:?}: {missing}")]
    Timeout {
        /// What waited.
        operation: String,
        /// How long it waited.
        waited: std::time::Duration,
        /// What had not happened yet when the time was up.
        missing: String,
    },
    /// A consumer-group member acknowledged or committed for a partition it no longer owns
    /// at this epoch (its lease expired or another member took the partition over). The
    /// event will be (or was) handed to the partition's current owner.
    #[error("group {group:?} on topic {topic:?}: partition {partition} is no longer owned by this member at epoch {epoch}")]
    Fenced {
        /// Group name.
        group: String,
        /// Topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The ownership epoch the refused call came from.
        epoch: u64,
    },
}

impl PhotonError {
    /// Whether retrying the same call may succeed (the executor retries these).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unavailable { .. } => true,
            Self::Handler { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// A storage error with the adapter's error as source.
    pub fn storage(
        backend: &'static str,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Storage {
            backend,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// Refused credentials (see [`PhotonError::Unauthorized`]) with the adapter's error as
    /// source.
    pub fn unauthorized(
        backend: &'static str,
        server: impl Into<String>,
        identity: impl Into<String>,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Unauthorized {
            backend,
            server: server.into(),
            identity: identity.into(),
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A retryable unavailability with the adapter's error as source.
    pub fn unavailable(
        backend: &'static str,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Unavailable {
            backend,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A configuration error naming the variable, the refused value and what is accepted.
    pub fn config(
        variable: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        Self::Config {
            variable: variable.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    /// A codec error with context.
    pub fn codec(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Codec {
            context: context.into(),
            source: source.into(),
        }
    }

    /// The error item of a stored record that could not be decoded.
    pub fn undecodable(
        topic: impl Into<String>,
        event_id: impl Into<String>,
        seq: i64,
        key: Option<String>,
        stored: impl Into<Box<[u8]>>,
        reason: impl std::fmt::Display,
    ) -> Self {
        Self::Undecodable {
            topic: topic.into(),
            event_id: event_id.into(),
            seq,
            key,
            stored: stored.into(),
            reason: reason.to_string().into_boxed_str(),
        }
    }

    /// The topic and seq of the stored record an error item stands for, when it stands for
    /// one ([`PhotonError::Crypto`] and [`PhotonError::Undecodable`]): the stream holds a
    /// record there that a durable consumer must acknowledge or dead-letter to move past.
    pub fn position(&self) -> Option<(&str, i64)> {
        match self {
            Self::Crypto { topic, seq, .. } | Self::Undecodable { topic, seq, .. } => {
                Some((topic.as_str(), *seq))
            }
            _ => None,
        }
    }

    /// The error of a batch whose event at index `stored.len()` failed with `error`:
    /// `error` itself when nothing was stored, else [`PhotonError::BatchIncomplete`].
    pub fn batch_incomplete(
        stored: Vec<crate::event::Appended>,
        events: usize,
        error: PhotonError,
    ) -> Self {
        if stored.is_empty() {
            return error;
        }
        Self::BatchIncomplete {
            stored,
            events,
            source: Box::new(error),
        }
    }

    /// A retryable handler error.
    pub fn handler(message: impl Into<String>) -> Self {
        Self::Handler {
            message: message.into(),
            retryable: true,
            source: None,
        }
    }

    /// A handler error that must not be retried (goes straight to the dead-letter topic).
    pub fn handler_permanent(message: impl Into<String>) -> Self {
        Self::Handler {
            message: message.into(),
            retryable: false,
            source: None,
        }
    }

    /// What a handler's error means to the executor: a [`PhotonError`] stays itself; any
    /// other error (an `anyhow::Error`, an `std::io::Error`, a `String`, ...) becomes a
    /// retryable [`PhotonError::Handler`] that keeps it as its source.
    ///
    /// ```
    /// use photon_core::PhotonError;
    /// let io = std::io::Error::other("payment service unreachable");
    /// let failed = PhotonError::handler_failed(io);
    /// assert!(failed.is_retryable());
    /// assert!(std::error::Error::source(&failed).is_some());
    /// ```
    pub fn handler_failed(error: impl Into<BoxError>) -> Self {
        match error.into().downcast::<PhotonError>() {
            Ok(photon) => *photon,
            Err(other) => Self::Handler {
                message: other.to_string(),
                retryable: true,
                source: Some(other),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_variants() {
        assert!(PhotonError::Unavailable {
            backend: "mem",
            message: "x".into(),
            source: None
        }
        .is_retryable());
        assert!(PhotonError::handler("boom").is_retryable());
        assert!(!PhotonError::handler_permanent("boom").is_retryable());
        assert!(!PhotonError::NotFound("x".into()).is_retryable());
    }

    #[test]
    fn config_error_names_variable() {
        let err = PhotonError::config("PHOTON_X", "abc", "an integer");
        assert_eq!(
            err.to_string(),
            "invalid configuration PHOTON_X=\"abc\": expected an integer"
        );
    }
}
