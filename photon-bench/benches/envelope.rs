//! Seal and open cost of the transport envelope, per event, beside the bare AEAD of the
//! `chacha20poly1305` crate (`raw_seal`, `raw_open`: XChaCha20-Poly1305 over the same
//! plaintext bytes, with no JSON, base64 or allocation around it), measured in the same
//! run. Photon sealed with that crate until issue 13's second pass; it now seals the same
//! bytes with `ring` (see `photon-core/src/crypto/xchacha.rs`), so these rows are the
//! reference it replaced, no longer a floor.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use photon_core::{Headers, Record, RecordDraft, TransportCrypto};
use serde_json::json;

// The allocator photon-bench runs with, so that these figures compare with its own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn envelope(c: &mut Criterion) {
    let crypto = TransportCrypto::plaintext()
        .with_key("bench", [7u8; 32])
        .expect("32-byte key");
    // The event every row seals: the measured `seal` and the one `open` reads.
    let seal = |payload: &serde_json::Value| {
        crypto.seal(
            "envelope-id",
            "orders",
            Some("k1"),
            json!("actor"),
            payload.clone(),
            Headers::new(),
        )
    };
    let mut group = c.benchmark_group("envelope");
    for size in [128usize, 4096] {
        let payload = json!({ "i": 1, "data": "x".repeat(size) });
        group.throughput(Throughput::Elements(1));
        group.bench_with_input(BenchmarkId::new("seal", size), &payload, |b, payload| {
            b.iter(|| seal(payload))
        });
        let body = seal(&payload).expect("seal");
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
        let cipher = XChaCha20Poly1305::new_from_slice(&[7u8; 32]).expect("32-byte key");
        let nonce = XNonce::from([9u8; 24]);
        let aad = [0u8; 64];
        let plaintext =
            serde_json::to_vec(&json!({ "actor": "actor", "payload": payload })).expect("json");
        let mut buffer = Vec::with_capacity(plaintext.len() + 16);
        group.bench_with_input(
            BenchmarkId::new("raw_seal", size),
            &plaintext,
            |b, plain| {
                b.iter(|| {
                    buffer.clear();
                    buffer.extend_from_slice(plain);
                    cipher
                        .encrypt_in_place(&nonce, &aad, &mut buffer)
                        .expect("seal");
                })
            },
        );
        let mut sealed = plaintext.clone();
        cipher
            .encrypt_in_place(&nonce, &aad, &mut sealed)
            .expect("seal");
        group.bench_with_input(BenchmarkId::new("raw_open", size), &sealed, |b, sealed| {
            b.iter(|| {
                buffer.clear();
                buffer.extend_from_slice(sealed);
                cipher
                    .decrypt_in_place(&nonce, &aad, &mut buffer)
                    .expect("open");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, envelope);
criterion_main!(benches);
