//! The Rust examples of docs/observability.md, compiled as they are written there
//! (`photon/tests/docs_examples.rs` checks that each one is here word for word): an OpenTelemetry
//! layer for Photon's spans, and a publish with headers that a consumer reads back, on the
//! in-process store.
//!
//! Run with `cargo run -p photon --example docs_observability`; with `--features otel`
//! the event also carries the publish span's `traceparent`.

use std::error::Error;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use photon::{Photon, PhotonError};

/// Prints the name of each span that ended: the page's `exporter` (OTLP, stdout, ...).
#[derive(Debug)]
struct Printed;

impl SpanExporter for Printed {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        for span in batch {
            println!(
                "span {} in trace {}",
                span.name,
                span.span_context.trace_id()
            );
        }
        Ok(())
    }
}

// The snippets keep the page's layout (aligned comments, a long line), which rustfmt
// would rewrite.
#[rustfmt::skip]
fn install_tracing(exporter: Printed) -> Result<SdkTracerProvider, Box<dyn Error>> {
    // docs: observability/otel-layer
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;

    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter) // OTLP, stdout, ...
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("billing"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;
    // end docs
    Ok(provider)
}

#[rustfmt::skip]
async fn publish_with_headers(photon: &Photon) -> Result<(), PhotonError> {
    // docs: observability/headers
    use photon::prelude::*;
    use serde_json::json;

    let headers = Headers::from([("request-id".to_owned(), "r-7".to_owned())]);
    photon.publish_with_headers("orders", Some("o-1"), json!("shop"), json!({"total": 12}), headers).await?;
    // later, in any consumer: event.headers["request-id"] == "r-7"
    // end docs
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    use photon::prelude::*;

    let provider = install_tracing(Printed)?;
    let photon = Photon::builder().build()?;
    publish_with_headers(&photon).await?;
    let mut billing = photon.durable("billing", "orders", None);
    let event = billing.next().await.expect("the stream is endless")?;
    assert_eq!(event.headers["request-id"], "r-7");
    println!("headers of seq {}: {:?}", event.seq, event.headers);
    billing.ack(&event).await?;
    photon.shutdown().await?;
    // Exports the spans still batched.
    provider.shutdown()?;
    Ok(())
}
