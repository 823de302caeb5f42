//! Photon's tracing spans: their names, levels and fields, and how errors are recorded on
//! them.
//!
//! | span | level | fields | covers |
//! |---|---|---|---|
//! | `photon.publish` | debug | backend, topic, key, seq, event_id, error | one `EventStore::publish` (`Photon::publish`, dead letters too): validation, sealing and the append; `seq` and `event_id` are recorded once stored |
//! | `photon.publish_batch` | debug | backend, events, error | one `EventStore::publish_batch` (`Photon::publish_batch`): validation and sealing of every event and the one `append_batch` |
//! | `photon.deliver` | debug | backend, topic, key, seq, event_id, subscription or group, error | one record handed out: on a durable or group subscription stream, opening it; in the executor, from reading it until it is finished (handled or dead-lettered), with its attempts as children |
//! | `photon.handle` | info | handler, topic, key, seq, event_id, batch_size, subscription or group, attempt, error | one executor handler attempt (`attempt` counts from 1); the handler's future runs inside it; a batch handler's attempt has `batch_size`, no `key`, and the `seq`, `event_id` and trace of the batch's first event |
//!
//! A field without a value (no key, `subscription` on a group consumer) is left out. An
//! error is recorded as the span's `error` field and an ERROR event inside the span.
//!
//! With the `otel` feature of `photon-runtime` and a `tracing-opentelemetry` layer, the
//! trace context of `photon.publish` is written to the event's `traceparent` header, and
//! every `photon.handle` span of the event takes the span it names as its OpenTelemetry
//! parent: one trace from publish to handler, across processes.
//!
//! Fields are evaluated only when a subscriber enables the span, so an application that
//! does not trace Photon pays one check per span and allocates nothing. Select the spans
//! with a target filter such as `photon_core=debug,photon_runtime=debug`.

use tracing::Span;

use crate::error::PhotonError;

/// Name of the span of one publish.
pub const PUBLISH: &str = "photon.publish";
/// Name of the span of one batch publish.
pub const PUBLISH_BATCH: &str = "photon.publish_batch";
/// Name of the span of one delivery.
pub const DELIVER: &str = "photon.deliver";
/// Name of the span of one handler attempt.
pub const HANDLE: &str = "photon.handle";

/// Records `error` on `span` (an `error` field the span declared empty, and an ERROR event
/// inside it) saying that `what` failed. Nothing happens when the span is disabled, so an
/// application that does not trace Photon gets no log line for an error it is handed
/// anyway.
pub fn record_error(span: &Span, what: &str, error: &PhotonError) {
    if span.is_disabled() {
        return;
    }
    span.record("error", tracing::field::display(error));
    tracing::error!(parent: span, error = %error, "{what} failed");
}
