//! What tests read back from Photon's telemetry: a tracing layer keeping every span (with
//! its parent and fields) and ERROR event, and the metrics a `DebuggingRecorder` saw.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

pub type Fields = BTreeMap<String, String>;

/// A span as the layer saw it: name, parent (index into the recorded spans) and fields,
/// including those recorded after it was created.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenSpan {
    pub name: &'static str,
    pub parent: Option<usize>,
    pub fields: Fields,
}

/// An event: level, the span it happened in (index) and fields.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenEvent {
    pub level: Level,
    pub span: Option<usize>,
    pub fields: Fields,
}

#[derive(Clone, Default)]
pub struct Recording {
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
    pub fn spans(&self) -> Vec<SeenSpan> {
        self.spans.lock().unwrap().clone()
    }

    pub fn errors(&self) -> Vec<SeenEvent> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|event| event.level == Level::ERROR)
            .cloned()
            .collect()
    }
}

pub fn fields(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub fn span(name: &'static str, parent: Option<usize>, pairs: &[(&str, &str)]) -> SeenSpan {
    SeenSpan {
        name,
        parent,
        fields: fields(pairs),
    }
}

pub type Series = (String, Vec<(String, String)>);

/// Runs `test` on a current-thread runtime with `recorder` as the thread's recorder, so
/// that every task it spawns records there.
pub fn recorded<F: Future<Output = ()>>(test: impl FnOnce() -> F) -> BTreeMap<Series, DebugValue> {
    let recorder = DebuggingRecorder::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || runtime.block_on(test()));
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            ((key.name().to_owned(), labels), value)
        })
        .collect()
}

pub fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    (name.to_owned(), labels)
}
