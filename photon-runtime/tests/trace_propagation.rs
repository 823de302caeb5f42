//! One trace from a publish in one process to its handler in another (feature `otel`).
//!
//! The test binary starts itself as a child (`PHOTON_TRACE_TEST_ROLE=publisher`) that
//! publishes one sealed event on a shared SQLite file, in an application span, with its own
//! in-memory OpenTelemetry exporter, and writes the trace id and span id of its
//! `photon.publish` span to a file. The parent runs an executor handler on the same file
//! with an exporter of its own, and checks that the `photon.handle` span is in that trace,
//! with the publish span as its (remote) parent, and that a span the handler opens is in
//! it too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use photon_backend_sqlite::SqliteStoragePort;
use photon_runtime::{Event, Headers, Photon, PhotonError};
use serde_json::json;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

const ROLE: &str = "PHOTON_TRACE_TEST_ROLE";
const DATABASE: &str = "PHOTON_TRACE_TEST_DATABASE";
const IDS: &str = "PHOTON_TRACE_TEST_IDS";
const TOPIC: &str = "orders";
const KEY: [u8; 32] = [42; 32];
const TEST: &str = "publish_and_handler_share_one_trace_across_processes";

/// Keeps every span that ends, in memory.
#[derive(Debug, Clone, Default)]
struct Exported(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Exported {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

impl Exported {
    fn named(&self, name: &str) -> Vec<SpanData> {
        let spans = self.0.lock().unwrap();
        spans.iter().filter(|s| s.name == name).cloned().collect()
    }
}

/// A subscriber that sends every span (all levels) to an in-memory exporter, installed for
/// this thread; the runtimes below are single-threaded, so every span Photon opens is seen.
fn trace_into(exported: &Exported) -> (SdkTracerProvider, tracing::subscriber::DefaultGuard) {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exported.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("photon-test"));
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    (provider, guard)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn photon_on(database: &Path) -> Photon {
    let port = SqliteStoragePort::builder()
        .path(database)
        .poll_interval(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    Photon::builder()
        .storage_port(port)
        .transport_key("trace-test", KEY)
        .build()
        .unwrap()
}

#[test]
fn publish_and_handler_share_one_trace_across_processes() {
    if std::env::var(ROLE).as_deref() == Ok("publisher") {
        publish_in_child();
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("events.db");
    let ids = directory.path().join("publish-span.txt");
    run_publisher(&database, &ids);
    let written = std::fs::read_to_string(&ids).unwrap();
    let (trace_id, publish_span_id) = written.trim().split_once(' ').unwrap();

    let exported = Exported::default();
    let (provider, _guard) = trace_into(&exported);
    let seen = Arc::new(Mutex::new(Vec::<Event>::new()));
    runtime().block_on(async {
        let photon = photon_on(&database).await;
        let handled = seen.clone();
        let executor = photon
            .executor()
            .handler("billing", TOPIC, move |event: Event| {
                let handled = handled.clone();
                async move {
                    tracing::info_span!("charge").in_scope(|| {
                        handled.lock().unwrap().push(event);
                    });
                    Ok::<(), PhotonError>(())
                }
            })
            .start()
            .unwrap();
        executor.wait_idle().await.unwrap();
        executor.shutdown().await.unwrap();
        photon.shutdown().await.unwrap();
    });
    provider.force_flush().unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].payload, json!({"total": 12}));
    let traceparent = format!("00-{trace_id}-{publish_span_id}-01");
    assert_eq!(
        seen[0].headers,
        Headers::from([
            ("request-id".to_owned(), "r-1".to_owned()),
            ("traceparent".to_owned(), traceparent),
        ])
    );
    let handle = exported.named("photon.handle");
    assert_eq!(handle.len(), 1, "one attempt");
    let handle = &handle[0];
    assert_eq!(handle.span_context.trace_id().to_string(), trace_id);
    assert_eq!(handle.parent_span_id.to_string(), publish_span_id);
    assert!(handle.parent_span_is_remote);
    let charge = exported.named("charge");
    assert_eq!(charge.len(), 1);
    assert_eq!(charge[0].span_context.trace_id().to_string(), trace_id);
    assert_eq!(charge[0].parent_span_id, handle.span_context.span_id());
}

/// Starts this test binary as the publisher and waits (at most a minute) for it to succeed.
fn run_publisher(database: &Path, ids: &Path) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(ROLE, "publisher")
        .env(DATABASE, database)
        .env(IDS, ids)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "publisher process failed: {status}");
            return;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("publisher process did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child's part: publish in an application span, then write the publish span's ids.
fn publish_in_child() {
    let database = PathBuf::from(std::env::var(DATABASE).unwrap());
    let ids = PathBuf::from(std::env::var(IDS).unwrap());
    let exported = Exported::default();
    let (provider, _guard) = trace_into(&exported);
    runtime().block_on(async {
        let photon = photon_on(&database).await;
        let headers = Headers::from([("request-id".to_owned(), "r-1".to_owned())]);
        photon
            .publish_with_headers(
                TOPIC,
                Some("o-1"),
                json!("shop"),
                json!({"total": 12}),
                headers,
            )
            .instrument(tracing::info_span!("checkout"))
            .await
            .unwrap();
        photon.shutdown().await.unwrap();
    });
    provider.force_flush().unwrap();
    let publish = exported.named("photon.publish");
    assert_eq!(publish.len(), 1);
    let context = &publish[0].span_context;
    assert!(context.is_sampled());
    std::fs::write(
        ids,
        format!("{} {}\n", context.trace_id(), context.span_id()),
    )
    .unwrap();
}
