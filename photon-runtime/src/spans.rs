//! The `photon.deliver` span of one record handed to a consumer (see
//! [`photon_core::spans`] for every span Photon opens), and continuing an event's trace.

use photon_core::metrics::Consumer;
use photon_core::{Event, Headers, PhotonError, Record};
use tracing::field::Empty;
use tracing::Span;

/// Where a delivered record is: what the span of its delivery names.
pub(crate) struct Position<'a> {
    pub(crate) topic: &'a str,
    pub(crate) key: Option<&'a str>,
    pub(crate) seq: i64,
    pub(crate) event_id: &'a str,
}

impl<'a> From<&'a Record> for Position<'a> {
    fn from(record: &'a Record) -> Self {
        Self {
            topic: &record.topic_name,
            key: record.topic_key.as_deref(),
            seq: record.seq,
            event_id: &record.event_id,
        }
    }
}

impl<'a> From<&'a Event> for Position<'a> {
    fn from(event: &'a Event) -> Self {
        Self {
            topic: &event.topic_name,
            key: event.topic_key.as_deref(),
            seq: event.seq,
            event_id: &event.event_id,
        }
    }
}

impl<'a> Position<'a> {
    /// The position of a record its port could not decode, `None` for other errors.
    pub(crate) fn of_undecodable(error: &'a PhotonError) -> Option<Self> {
        match error {
            PhotonError::Undecodable {
                topic,
                key,
                seq,
                event_id,
                ..
            } => Some(Self {
                topic,
                key: key.as_deref(),
                seq: *seq,
                event_id,
            }),
            _ => None,
        }
    }
}

/// A `photon.deliver` span for a record handed to `consumer`.
pub(crate) fn deliver(backend: &'static str, consumer: Consumer<'_>, at: Position<'_>) -> Span {
    tracing::debug_span!(
        "photon.deliver",
        backend,
        topic = at.topic,
        key = at.key,
        seq = at.seq,
        event_id = at.event_id,
        subscription = consumer.subscription(),
        group = consumer.group(),
        error = Empty,
    )
}

/// Makes `span` (not entered yet) continue the trace whose context an event's headers
/// carry: with the `otel` feature, its OpenTelemetry parent becomes the span named by
/// `traceparent`; without it, nothing happens.
pub(crate) fn continue_trace(span: &Span, headers: &Headers) {
    #[cfg(feature = "otel")]
    crate::otel::continue_trace(span, headers);
    #[cfg(not(feature = "otel"))]
    let _ = (span, headers);
}
