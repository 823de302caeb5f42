//! The spans Photon opens, seen by a recording layer: their names, counts, parents and
//! fields for a publish, a delivery and a handler attempt that fails once, and errors
//! recorded on them.

mod executor_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_support::eventually;
use futures::StreamExt;
use photon_runtime::{Event, ExecutorConfig, FlushPolicy, Photon, PhotonError};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

type Fields = BTreeMap<String, String>;

/// A span as the layer saw it: name, parent (index into the recorded spans) and fields,
/// including those recorded after it was created.
#[derive(Debug, Clone, PartialEq)]
struct SeenSpan {
    name: &'static str,
    parent: Option<usize>,
    fields: Fields,
}

/// An event: level, the span it happened in (index) and fields.
#[derive(Debug, Clone, PartialEq)]
struct SeenEvent {
    level: Level,
    span: Option<usize>,
    fields: Fields,
}

#[derive(Clone, Default)]
struct Recording {
    spans: Arc<Mutex<Vec<SeenSpan>>>,
    events: Arc<Mutex<Vec<SeenEvent>>>,
}

/// Where a live span's record is kept (span ids are reused once spans close).
struct Index(usize);

struct FieldVisitor<'a>(&'a mut Fields);

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recording {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut FieldVisitor(&mut fields));
        let span = ctx.span(id).expect("a new span is registered");
        let parent = span
            .parent()
            .and_then(|parent| parent.extensions().get::<Index>().map(|i| i.0));
        let mut spans = self.spans.lock().unwrap();
        span.extensions_mut().insert(Index(spans.len()));
        spans.push(SeenSpan {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is registered");
        let extensions = span.extensions();
        let Index(index) = extensions.get::<Index>().expect("indexed at creation");
        let mut spans = self.spans.lock().unwrap();
        values.record(&mut FieldVisitor(&mut spans[*index].fields));
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut FieldVisitor(&mut fields));
        let span = ctx
            .event_span(event)
            .and_then(|span| span.extensions().get::<Index>().map(|i| i.0));
        self.events.lock().unwrap().push(SeenEvent {
            level: *event.metadata().level(),
            span,
            fields,
        });
    }
}

impl Recording {
    fn spans(&self) -> Vec<SeenSpan> {
        self.spans.lock().unwrap().clone()
    }

    fn errors(&self) -> Vec<SeenEvent> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|event| event.level == Level::ERROR)
            .cloned()
            .collect()
    }
}

fn fields(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn span(name: &'static str, parent: Option<usize>, pairs: &[(&str, &str)]) -> SeenSpan {
    SeenSpan {
        name,
        parent,
        fields: fields(pairs),
    }
}

// The test runtime has one thread, so the thread's default subscriber sees every task.
#[tokio::test]
async fn a_publish_its_delivery_and_two_handler_attempts_are_spans_with_their_fields() {
    let recording = Recording::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recording.clone()));
    let photon = Photon::builder()
        .flush_policy(FlushPolicy::immediate())
        .build()
        .unwrap();
    let appended = photon
        .publish("orders", Some("k1"), json!("alice"), json!({ "n": 1 }))
        .await
        .unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let config = ExecutorConfig::builder()
        .initial_backoff(Duration::from_millis(1))
        .max_backoff(Duration::from_millis(1))
        .jitter(0.0)
        .build()
        .unwrap();
    let executor = photon
        .executor()
        .config(config)
        .handler("billing", "orders", {
            let attempts = attempts.clone();
            move |_event: Event| {
                let attempts = attempts.clone();
                async move {
                    if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                        return Err(PhotonError::handler("not yet"));
                    }
                    Ok(())
                }
            }
        })
        .start()
        .unwrap();
    let committed = eventually(Duration::from_secs(10), || {
        let checkpoint = photon.checkpoint("billing", "orders", None);
        futures::executor::block_on(checkpoint).unwrap() == Some(appended.seq)
    })
    .await;
    assert!(committed, "the event is handled and committed within 10 s");
    executor.shutdown().await.unwrap();
    photon.shutdown().await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 2);

    let id = appended.event_id.as_str();
    let at = [
        ("topic", "orders"),
        ("key", "k1"),
        ("seq", "1"),
        ("event_id", id),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut all = at.to_vec();
        all.extend_from_slice(extra);
        all
    };
    let error = PhotonError::handler("not yet").to_string();
    assert_eq!(
        recording.spans(),
        vec![
            span("photon.publish", None, &with(&[("backend", "mem")])),
            span(
                "photon.deliver",
                None,
                &with(&[("backend", "mem"), ("subscription", "billing")])
            ),
            span(
                "photon.handle",
                Some(1),
                &[
                    with(&[("handler", "billing"), ("subscription", "billing")]),
                    vec![("attempt", "1"), ("error", &error)]
                ]
                .concat()
            ),
            span(
                "photon.handle",
                Some(1),
                &with(&[
                    ("handler", "billing"),
                    ("subscription", "billing"),
                    ("attempt", "2")
                ])
            ),
        ]
    );
    assert_eq!(
        recording.errors(),
        vec![SeenEvent {
            level: Level::ERROR,
            span: Some(2),
            fields: fields(&[("message", "handler attempt failed"), ("error", &error)]),
        }]
    );
}

#[tokio::test]
async fn a_refused_publish_records_its_error_and_a_durable_stream_opens_a_delivery_span() {
    let recording = Recording::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recording.clone()));
    let photon = Photon::builder().build().unwrap();
    let refused = photon
        .publish("orders", Some(""), json!(null), json!({}))
        .await
        .unwrap_err();
    let appended = photon
        .publish("orders", None, json!(null), json!({ "n": 1 }))
        .await
        .unwrap();
    let mut audit = photon.durable("audit", "orders", None);
    let event = audit.next().await.unwrap().unwrap();
    audit.ack(&event).await.unwrap();
    drop(audit);
    photon.shutdown().await.unwrap();

    let refusal = refused.to_string();
    let id = appended.event_id.as_str();
    let stored = [
        ("backend", "mem"),
        ("topic", "orders"),
        ("seq", "1"),
        ("event_id", id),
    ];
    assert_eq!(
        recording.spans(),
        vec![
            span(
                "photon.publish",
                None,
                &[
                    ("backend", "mem"),
                    ("topic", "orders"),
                    ("key", ""),
                    ("error", &refusal)
                ]
            ),
            span("photon.publish", None, &stored),
            span(
                "photon.deliver",
                None,
                &[&stored[..], &[("subscription", "audit")]].concat()
            ),
        ]
    );
    assert_eq!(
        recording.errors(),
        vec![SeenEvent {
            level: Level::ERROR,
            span: Some(0),
            fields: fields(&[("message", "publish failed"), ("error", &refusal)]),
        }]
    );
}
