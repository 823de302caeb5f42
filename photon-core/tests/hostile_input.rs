//! Property tests: the wire decoder, the envelope opener and the key-ring parser meet
//! arbitrary, truncated and tampered input with a typed error, never a panic.

use chrono::{DateTime, Utc};
use photon_core::raw::wire::{decode_record, encode_draft, topic_of};
use photon_core::{
    Body, CryptoFailure, Headers, PhotonError, Record, RecordDraft, SealedBody, TransportCrypto,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// `cases` per property; failures are reported, not persisted to files beside the source.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Any strings: the wire form keeps what it is given, rules are checked at publish.
fn headers() -> impl Strategy<Value = Headers> {
    prop::collection::btree_map(".{0,8}", ".{0,16}", 0..3)
}

fn created_at() -> impl Strategy<Value = DateTime<Utc>> {
    // Whole nanoseconds within the range the header's i64 holds.
    (-9_000_000_000_000_000_000i64..9_000_000_000_000_000_000i64)
        .prop_map(DateTime::from_timestamp_nanos)
}

fn draft() -> impl Strategy<Value = RecordDraft> {
    let body = prop_oneof![
        (json_value(), json_value(), headers()).prop_map(|(actor, payload, headers)| Body::Plain {
            actor,
            payload,
            headers
        }),
        (
            ".{0,8}",
            prop::collection::vec(any::<u8>(), 0..30),
            prop::collection::vec(any::<u8>(), 0..60)
        )
            .prop_map(|(key_id, nonce, ciphertext)| {
                Body::Sealed(SealedBody {
                    key_id,
                    nonce,
                    ciphertext,
                })
            }),
    ];
    (
        prop_oneof![
            Just(uuid::Uuid::new_v4().to_string()),
            ".{0,40}".prop_map(String::from)
        ],
        "[a-z0-9._-]{1,40}",
        prop::option::of(".{1,30}"),
        created_at(),
        body,
    )
        .prop_map(
            |(envelope_id, topic_name, topic_key, created_at, body)| RecordDraft {
                envelope_id,
                topic_name,
                topic_key,
                created_at,
                body,
            },
        )
}

fn ring(id: &str, byte: u8) -> TransportCrypto {
    TransportCrypto::plaintext()
        .with_key(id, [byte; 32])
        .expect("a 32-byte key is accepted")
}

fn sealed_record(crypto: &TransportCrypto, actor: Value, payload: Value) -> Record {
    let body = crypto
        .seal(
            "env-1",
            "orders",
            Some("k1"),
            actor,
            payload,
            Headers::new(),
        )
        .expect("sealing a JSON value succeeds");
    Record {
        event_id: "e-1".into(),
        envelope_id: "env-1".into(),
        topic_name: "orders".into(),
        topic_key: Some("k1".into()),
        seq: 1,
        created_at: Utc::now(),
        body,
        extra: Map::new(),
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_are_a_record_or_a_codec_error(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        magic_first in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if magic_first && !bytes.is_empty() {
            bytes[0] = 0xB1;
        }
        match decode_record("test", &bytes, "e".into(), 7) {
            Ok(record) => prop_assert_eq!(record.seq, 7),
            Err(error) => prop_assert!(
                matches!(error, PhotonError::Codec { .. }),
                "unexpected error kind: {error}"
            ),
        }
        let _ = topic_of(&bytes);
    }

    #[test]
    fn drafts_round_trip_and_every_truncation_is_refused_or_a_prefix(draft in draft()) {
        let bytes = encode_draft(&draft).expect("a valid draft encodes");
        let record = decode_record("test", &bytes, "e".into(), 3).expect("its bytes decode");
        prop_assert_eq!(&record, &Record::from_draft(draft.clone(), "e".into(), 3));
        prop_assert_eq!(topic_of(&bytes), Some(draft.topic_name.clone()));
        for cut in 0..bytes.len() {
            // A cut inside the JSON at the end may still parse (`12` cut to `1`); every
            // other cut must be refused. Neither may panic.
            if let Err(error) = decode_record("test", &bytes[..cut], "e".into(), 3) {
                prop_assert!(matches!(error, PhotonError::Codec { .. }), "{error}");
            }
            let _ = topic_of(&bytes[..cut]);
        }
    }

    #[test]
    fn flipped_bytes_never_panic(draft in draft(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = encode_draft(&draft).expect("a valid draft encodes");
        let at = at.index(bytes.len());
        bytes[at] ^= 1 << bit;
        if let Err(error) = decode_record("test", &bytes, "e".into(), 1) {
            prop_assert!(matches!(error, PhotonError::Codec { .. }), "{error}");
        }
    }

    #[test]
    fn a_flipped_ciphertext_bit_is_tampered(
        payload in json_value(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let crypto = ring("k1", 7);
        let mut record = sealed_record(&crypto, Value::Null, payload.clone());
        let opened = crypto.open(&record).expect("opens untouched");
        prop_assert_eq!((opened.actor, opened.payload), (Value::Null, payload));
        let Body::Sealed(sealed) = &mut record.body else {
            unreachable!("a ring with a key seals");
        };
        let at = at.index(sealed.ciphertext.len());
        sealed.ciphertext[at] ^= 1 << bit;
        let error = crypto.open(&record).expect_err("a tampered body is refused");
        prop_assert!(
            matches!(&error, PhotonError::Crypto { reason: CryptoFailure::Tampered, event_id, .. } if event_id == "e-1"),
            "{error}"
        );
    }

    #[test]
    fn arbitrary_sealed_bodies_are_crypto_errors(
        key_id in prop_oneof![Just("k1".to_owned()), ".{0,8}".prop_map(String::from)],
        nonce in prop::collection::vec(any::<u8>(), 0..40),
        ciphertext in prop::collection::vec(any::<u8>(), 0..80),
        moved_topic in prop::option::of("[a-z]{1,8}"),
    ) {
        let crypto = ring("k1", 9);
        let mut record = sealed_record(&crypto, Value::Null, Value::Null);
        record.body = Body::Sealed(SealedBody { key_id, nonce, ciphertext });
        if let Some(topic) = moved_topic {
            record.topic_name = topic;
        }
        let error = crypto.open(&record).expect_err("random bytes never authenticate");
        prop_assert!(matches!(error, PhotonError::Crypto { .. }), "{error}");
    }

    #[test]
    fn key_ring_values_are_parsed_or_refused_naming_the_variable(value in ".{0,120}") {
        if let Err(error) = TransportCrypto::parse_key_list("PHOTON_TRANSPORT_KEYS", &value) {
            let text = error.to_string();
            prop_assert!(text.contains("PHOTON_TRANSPORT_KEYS"), "{text}");
        }
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn topic_names_follow_the_documented_rule(topic in prop_oneof![".{0,20}", "[a-z0-9._-]{0,140}"]) {
        let valid = (1..=photon_core::MAX_TOPIC_NAME_LEN).contains(&topic.len())
            && topic.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && topic.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
        match photon_core::validate_topic_name(&topic) {
            Ok(()) => prop_assert!(valid, "{topic:?} accepted"),
            Err(PhotonError::InvalidTopic { topic: named, .. }) => {
                prop_assert!(!valid, "{topic:?} refused");
                prop_assert_eq!(named, topic);
            }
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
    }

    #[test]
    fn keys_follow_the_documented_rule(key in prop_oneof![".{0,20}", "\\PC{250,260}", "[\\x00-\\x1f]{1,3}"]) {
        let valid = !key.is_empty()
            && key.len() <= photon_core::MAX_TOPIC_KEY_LEN
            && !key.chars().any(char::is_control);
        match photon_core::validate_topic_key("orders", &key) {
            Ok(()) => prop_assert!(valid, "{key:?} accepted"),
            Err(PhotonError::InvalidKey { topic, .. }) => {
                prop_assert!(!valid, "{key:?} refused");
                prop_assert_eq!(topic, "orders");
            }
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
    }
}
