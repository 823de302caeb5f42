//! Trace propagation through event headers (feature `otel`): the W3C Trace Context of the
//! `photon.publish` span goes into the event's `traceparent` (and `tracestate`) headers,
//! and each `photon.handle` span of the event continues that trace.
//!
//! Both ends read OpenTelemetry contexts through the `tracing-opentelemetry` layer of the
//! process's subscriber, and always speak W3C Trace Context (whatever global propagator
//! the application set), so that publishers and handlers agree without configuration.
//! Without the layer (or with the spans filtered out) nothing is written or read, and the
//! headers pass through untouched.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use photon_core::Headers;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Writes the trace context of the current span into `headers`: the `photon.publish` span
/// when the subscriber enables it, else the span the publish was called in. A context
/// written before (by the caller) is replaced; with no sampled or unsampled span context
/// at hand, `headers` stay as they are.
pub(crate) fn inject(headers: &mut Headers) {
    let context = Span::current().context();
    if !context.span().span_context().is_valid() {
        return;
    }
    TraceContextPropagator::new().inject_context(&context, &mut HeaderWriter(headers));
}

/// Makes the trace context in `headers` the OpenTelemetry parent of `span`, which must not
/// have been entered yet. Headers without a valid `traceparent` leave `span` as it is.
pub(crate) fn continue_trace(span: &Span, headers: &Headers) {
    if span.is_disabled() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderReader(headers));
    if parent.span().span_context().is_valid() {
        // Fails only when no OpenTelemetry layer is installed: then there is no trace to
        // continue.
        let _ = span.set_parent(parent);
    }
}

struct HeaderWriter<'a>(&'a mut Headers);

impl Injector for HeaderWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        // The propagator writes an empty `tracestate` when there is none: leave no stale
        // one of another trace behind, and store no empty header.
        if value.is_empty() {
            self.0.remove(key);
        } else {
            self.0.insert(key.to_owned(), value);
        }
    }
}

struct HeaderReader<'a>(&'a Headers);

impl Extractor for HeaderReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_layer_headers_pass_through_untouched() {
        let mut headers = Headers::from([
            ("traceparent".to_owned(), "00-from-the-caller".to_owned()),
            ("x".to_owned(), "1".to_owned()),
        ]);
        let before = headers.clone();
        inject(&mut headers);
        assert_eq!(headers, before);
        let span = tracing::info_span!("photon.handle");
        continue_trace(&span, &headers);
    }

    #[test]
    fn an_empty_tracestate_removes_a_stale_one() {
        let mut headers = Headers::from([("tracestate".to_owned(), "old=1".to_owned())]);
        HeaderWriter(&mut headers).set("tracestate", String::new());
        HeaderWriter(&mut headers).set("traceparent", "00-a-b-01".into());
        assert_eq!(
            headers,
            Headers::from([("traceparent".to_owned(), "00-a-b-01".to_owned())])
        );
        let reader = HeaderReader(&headers);
        assert_eq!(reader.get("traceparent"), Some("00-a-b-01"));
        assert_eq!(reader.keys(), vec!["traceparent"]);
    }
}
