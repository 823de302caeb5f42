//! Seal and open cost of the transport envelope, per event.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use photon_core::{Record, RecordDraft, TransportCrypto};
use serde_json::json;

fn envelope(c: &mut Criterion) {
    let crypto = TransportCrypto::plaintext()
        .with_key("bench", [7u8; 32])
        .expect("32-byte key");
    let mut group = c.benchmark_group("envelope");
    for size in [128usize, 4096] {
        let payload = json!({ "i": 1, "data": "x".repeat(size) });
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::new("seal", size), &payload, |b, payload| {
            b.iter(|| {
                crypto.seal(
                    "envelope-id",
                    "orders",
                    Some("k1"),
                    json!("actor"),
                    payload.clone(),
                )
            })
        });
        let body = crypto
            .seal(
                "envelope-id",
                "orders",
                Some("k1"),
                json!("actor"),
                payload.clone(),
            )
            .expect("seal");
        let record = Record::from_draft(
            RecordDraft {
                envelope_id: "envelope-id".into(),
                topic_name: "orders".into(),
                topic_key: Some("k1".into()),
                created_at: chrono::Utc::now(),
                body,
            },
            "envelope-id".into(),
            1,
        );
        group.bench_with_input(BenchmarkId::new("open", size), &record, |b, record| {
            b.iter(|| crypto.open(record))
        });
    }
    group.finish();
}

criterion_group!(benches, envelope);
criterion_main!(benches);
