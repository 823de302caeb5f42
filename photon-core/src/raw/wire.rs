//! The wire form of a record for ports that store bytes (brokers): everything but the id and
//! seq, which the broker assigns.
//!
//! Photon writes a compact binary header and then the JSON of the body, so that a stored
//! record costs little more than its payload (brokers spend per byte):
//!
//! | field | encoding |
//! |---|---|
//! | magic | one byte `0xB1` (a JSON record starts with `{`) |
//! | envelope id | u16 length, UTF-8; length `0xFFFF` for a UUID in its 16 bytes |
//! | created at | i64, nanoseconds since the Unix epoch |
//! | topic | u16 length, UTF-8 |
//! | key | u16 length, UTF-8; length `0xFFFF` for no key |
//! | body | one byte form: 0 plain, then u32 length and the actor JSON, then the payload JSON to the end; 2 plain with headers, then u32 length and the headers' JSON object, then as form 0; 3 sealed, then the key id (u16 length, UTF-8), u32 length and the nonce, then the ciphertext with its tag to the end (headers inside the seal); 1 sealed as JSON with base64 nonce and ciphertext (written before form 3, still read) |
//!
//! A plain record without headers is written in form 0, byte for byte as before headers
//! existed, and every record in form 0 reads as one without headers. Integers are
//! big-endian. Records in the JSON form (an object with `envelope_id`,
//! `topic_name`, `topic_key`, `created_at`, `body`) decode too, unknown fields kept.

use chrono::{DateTime, Utc};
use serde::de::Error as _;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{PhotonError, Result};
use crate::event::{Body, Record, RecordDraft, SealedBody};
use crate::headers::Headers;

const MAGIC: u8 = 0xB1;
const NO_KEY: u16 = u16::MAX;
/// The length field of an envelope id stored as the 16 bytes of a UUID.
const UUID_ID: u16 = u16::MAX;
const PLAIN: u8 = 0;
const SEALED: u8 = 1;
const PLAIN_WITH_HEADERS: u8 = 2;
const SEALED_BYTES: u8 = 3;

#[derive(Deserialize)]
struct JsonRecord {
    envelope_id: String,
    topic_name: String,
    topic_key: Option<String>,
    created_at: DateTime<Utc>,
    body: Body,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

fn codec_error(context: &str, message: &str) -> PhotonError {
    PhotonError::codec(context, serde_json::Error::custom(message))
}

fn put_text(out: &mut Vec<u8>, text: &str, what: &str) -> Result<()> {
    let len = u16::try_from(text.len())
        .ok()
        .filter(|len| *len != NO_KEY)
        .ok_or_else(|| codec_error("a record", &format!("{what} longer than 65534 bytes")))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn put_json(out: &mut Vec<u8>, value: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer(out, value).map_err(|err| PhotonError::codec("a record", err))
}

/// A u32 length, then the JSON of `value`.
fn put_sized_json(out: &mut Vec<u8>, value: &impl serde::Serialize, what: &str) -> Result<()> {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    put_json(out, value)?;
    let len = u32::try_from(out.len() - at - 4)
        .map_err(|_| codec_error("a record", &format!("{what} larger than 4 GiB")))?;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// A u32 length, then `bytes`.
fn put_sized(out: &mut Vec<u8>, bytes: &[u8], what: &str) -> Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| codec_error("a record", &format!("{what} larger than 4 GiB")))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// Envelope ids Photon makes are UUIDs in their hyphenated lower-case form: those are stored
/// in 16 bytes instead of 36; any other id (one that would not render back the same) as text.
fn put_envelope_id(out: &mut Vec<u8>, id: &str) -> Result<()> {
    // `try_parse` takes the hyphenated form only at 36 bytes; without upper-case letters it
    // renders back byte for byte, which is cheaper to check than rendering it again.
    let renders_back = id.len() == 36 && !id.bytes().any(|b| b.is_ascii_uppercase());
    match uuid::Uuid::try_parse(id) {
        Ok(uuid) if renders_back => {
            out.extend_from_slice(&UUID_ID.to_be_bytes());
            out.extend_from_slice(uuid.as_bytes());
            Ok(())
        }
        _ => put_text(out, id, "envelope id"),
    }
}

/// The bytes a broker stores for a draft.
///
/// # Errors
/// [`PhotonError::Codec`] for a name longer than the header holds or a time outside
/// 1677–2262 (neither passes Photon's validation).
pub fn encode_draft(draft: &RecordDraft) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + draft.topic_name.len());
    encode_draft_into(draft, &mut out)?;
    Ok(out)
}

/// Appends the bytes a broker stores for a draft to `out` (a buffer reused across
/// records saves growing a new one each time).
///
/// # Errors
/// As [`encode_draft`]; `out` may then hold part of a record.
pub fn encode_draft_into(draft: &RecordDraft, out: &mut Vec<u8>) -> Result<()> {
    out.push(MAGIC);
    put_envelope_id(out, &draft.envelope_id)?;
    let nanos = draft
        .created_at
        .timestamp_nanos_opt()
        .ok_or_else(|| codec_error("a record", "created_at outside 1677-2262"))?;
    out.extend_from_slice(&nanos.to_be_bytes());
    put_text(out, &draft.topic_name, "topic")?;
    match &draft.topic_key {
        Some(key) => put_text(out, key, "key")?,
        None => out.extend_from_slice(&NO_KEY.to_be_bytes()),
    }
    match &draft.body {
        Body::Plain {
            actor,
            payload,
            headers,
        } => {
            if headers.is_empty() {
                out.push(PLAIN);
            } else {
                out.push(PLAIN_WITH_HEADERS);
                put_sized_json(out, headers, "headers")?;
            }
            put_sized_json(out, actor, "actor")?;
            put_json(out, payload)?;
        }
        Body::Sealed(sealed) => {
            out.push(SEALED_BYTES);
            put_text(out, &sealed.key_id, "key id")?;
            put_sized(out, &sealed.nonce, "nonce")?;
            out.extend_from_slice(&sealed.ciphertext);
        }
    }
    Ok(())
}

/// Reads the binary form front to back.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// The bytes after a u32 length.
    fn sized(&mut self) -> Option<&'a [u8]> {
        let len = self.take(4)?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        self.take(usize::try_from(len).ok()?)
    }

    fn text(&mut self, len: u16) -> Option<String> {
        let bytes = self.take(usize::from(len))?;
        std::str::from_utf8(bytes).ok().map(str::to_owned)
    }
}

/// The header fields of a binary record, and the rest (the body).
struct Header<'a> {
    envelope_id: String,
    created_at: DateTime<Utc>,
    topic_name: String,
    topic_key: Option<String>,
    body: Reader<'a>,
}

fn read_header(bytes: &[u8]) -> Option<Header<'_>> {
    let mut reader = Reader { bytes };
    if reader.take(1)? != [MAGIC] {
        return None;
    }
    let envelope_id = match reader.u16()? {
        UUID_ID => uuid::Uuid::from_slice(reader.take(16)?)
            .ok()?
            .hyphenated()
            .encode_lower(&mut uuid::Uuid::encode_buffer())
            .to_owned(),
        len => reader.text(len)?,
    };
    let nanos = i64::from_be_bytes(reader.take(8)?.try_into().ok()?);
    let created_at = DateTime::from_timestamp_nanos(nanos);
    let len = reader.u16()?;
    let topic_name = reader.text(len)?;
    let topic_key = match reader.u16()? {
        NO_KEY => None,
        len => Some(reader.text(len)?),
    };
    Some(Header {
        envelope_id,
        created_at,
        topic_name,
        topic_key,
        body: reader,
    })
}

/// `context` names the record in an error; it is only called for one, since formatting it
/// for every record cost more than decoding the header.
fn read_body(mut body: Reader<'_>, context: &dyn Fn() -> String) -> Result<Body> {
    let truncated = || codec_error(&context(), "truncated record body");
    fn json<T: serde::de::DeserializeOwned>(
        bytes: &[u8],
        context: &dyn Fn() -> String,
    ) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|err| PhotonError::codec(context(), err))
    }
    match body.take(1).ok_or_else(truncated)? {
        [form @ (PLAIN | PLAIN_WITH_HEADERS)] => {
            let headers = match *form {
                PLAIN => Headers::new(),
                _ => json(body.sized().ok_or_else(truncated)?, context)?,
            };
            let actor = body.sized().ok_or_else(truncated)?;
            Ok(Body::Plain {
                actor: json(actor, context)?,
                payload: json(body.bytes, context)?,
                headers,
            })
        }
        [SEALED] => serde_json::from_slice::<SealedBody>(body.bytes)
            .map(Body::Sealed)
            .map_err(|err| PhotonError::codec(context(), err)),
        [SEALED_BYTES] => {
            let key_len = body.u16().ok_or_else(truncated)?;
            let key_id = body
                .text(key_len)
                .ok_or_else(|| codec_error(&context(), "key id not UTF-8 or cut short"))?;
            let nonce = body.sized().ok_or_else(truncated)?.to_vec();
            Ok(Body::Sealed(SealedBody {
                key_id,
                nonce,
                ciphertext: body.bytes.to_vec(),
            }))
        }
        _ => Err(codec_error(&context(), "unknown body form")),
    }
}

/// Decodes stored bytes into the record with the id and seq its broker gave it.
///
/// Photon refuses payloads nested deeper than [`crate::store::MAX_JSON_DEPTH`] at publish,
/// so every record it wrote decodes within serde_json's default recursion limit; anything
/// deeper is refused here rather than risking the stack.
///
/// # Errors
/// [`PhotonError::Codec`] naming `backend` and the event when the bytes are not a record.
pub fn decode_record(backend: &str, bytes: &[u8], event_id: String, seq: i64) -> Result<Record> {
    let context = || format!("{backend} record {event_id}");
    if bytes.first() == Some(&MAGIC) {
        let header =
            read_header(bytes).ok_or_else(|| codec_error(&context(), "truncated record header"))?;
        let body = read_body(header.body, &context)?;
        return Ok(Record {
            event_id,
            envelope_id: header.envelope_id,
            topic_name: header.topic_name,
            topic_key: header.topic_key,
            seq,
            created_at: header.created_at,
            body,
            extra: Map::new(),
        });
    }
    let json: JsonRecord =
        serde_json::from_slice(bytes).map_err(|err| PhotonError::codec(context(), err))?;
    Ok(Record {
        event_id,
        envelope_id: json.envelope_id,
        topic_name: json.topic_name,
        topic_key: json.topic_key,
        seq,
        created_at: json.created_at,
        body: json.body,
        extra: json.extra,
    })
}

/// The Photon topic a stored record names, without decoding its body; `None` when the
/// bytes are not a record.
pub fn topic_of(bytes: &[u8]) -> Option<String> {
    if bytes.first() == Some(&MAGIC) {
        return read_header(bytes).map(|header| header.topic_name);
    }
    #[derive(Deserialize)]
    struct TopicOnly {
        topic_name: String,
    }
    serde_json::from_slice::<TopicOnly>(bytes)
        .ok()
        .map(|t| t.topic_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn draft(payload: Value) -> RecordDraft {
        RecordDraft {
            envelope_id: "env".into(),
            topic_name: "a.b".into(),
            topic_key: Some("k.*>".into()),
            created_at: Utc::now(),
            body: Body::Plain {
                actor: json!({"u": 1}),
                payload,
                headers: Headers::new(),
            },
        }
    }

    fn with_headers(payload: Value, headers: &[(&str, &str)]) -> RecordDraft {
        let mut draft = draft(payload);
        if let Body::Plain { headers: h, .. } = &mut draft.body {
            *h = headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
        }
        draft
    }

    /// A record exactly as Photon wrote it before headers existed: envelope id `env`,
    /// 2026-01-01T00:00:00Z, topic `a.b`, key `k`, form 0, actor `"u"`, payload `{"n":1}`.
    const STORED_BEFORE_HEADERS: &[u8] = &[
        0xB1, // magic
        0x00, 0x03, b'e', b'n', b'v', // envelope id
        0x18, 0x86, 0x72, 0x51, 0xED, 0xFA, 0x00, 0x00, // nanoseconds since the epoch
        0x00, 0x03, b'a', b'.', b'b', // topic
        0x00, 0x01, b'k', // key
        0x00, // form: plain
        0x00, 0x00, 0x00, 0x03, b'"', b'u', b'"', // actor
        b'{', b'"', b'n', b'"', b':', b'1', b'}', // payload
    ];

    #[test]
    fn records_stored_before_headers_read_as_without_headers() {
        let record = decode_record("test", STORED_BEFORE_HEADERS, "s:9".into(), 9).unwrap();
        let expected = RecordDraft {
            envelope_id: "env".into(),
            topic_name: "a.b".into(),
            topic_key: Some("k".into()),
            created_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            body: Body::Plain {
                actor: json!("u"),
                payload: json!({"n": 1}),
                headers: Headers::new(),
            },
        };
        assert_eq!(
            record,
            Record::from_draft(expected.clone(), "s:9".into(), 9)
        );
        assert_eq!(record.headers(), Some(&Headers::new()));
        // And a record without headers is still written byte for byte as before, so that
        // a reader from before headers reads it.
        assert_eq!(encode_draft(&expected).unwrap(), STORED_BEFORE_HEADERS);
    }

    #[test]
    fn headers_round_trip_in_their_own_form() {
        let draft = with_headers(
            json!({"i": 7}),
            &[
                (
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                ),
                ("x", "ü \"q\""),
            ],
        );
        let bytes = encode_draft(&draft).unwrap();
        let Body::Plain { headers, .. } = &draft.body else {
            unreachable!("a plain draft")
        };
        let headers_json = serde_json::to_vec(headers).unwrap();
        assert_eq!(bytes[1 + 2 + 3 + 8 + 2 + 3 + 2 + 4], PLAIN_WITH_HEADERS);
        let plain_len = encode_draft(&self::draft(json!({"i": 7}))).unwrap().len();
        assert_eq!(bytes.len(), plain_len + 4 + headers_json.len());
        let record = decode_record("test", &bytes, "s:1".into(), 1).unwrap();
        assert_eq!(record, Record::from_draft(draft, "s:1".into(), 1));
        for cut in [plain_len - 10, bytes.len() - 12, 24, 26] {
            assert!(
                matches!(
                    decode_record("test", &bytes[..cut], "e".into(), 1),
                    Err(PhotonError::Codec { .. })
                ),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn a_sealed_body_is_bytes_and_its_earlier_json_form_still_reads() {
        let sealed = SealedBody {
            key_id: "k1".into(),
            nonce: vec![7; 24],
            ciphertext: vec![0, 255, 1, 254],
        };
        let draft = RecordDraft {
            body: Body::Sealed(sealed.clone()),
            ..draft(json!(null))
        };
        let bytes = encode_draft(&draft).unwrap();
        let body_len = 1 + 2 + 2 + 4 + 24 + 4;
        let (header, body) = bytes.split_at(bytes.len() - body_len);
        let mut expected = vec![SEALED_BYTES, 0, 2, b'k', b'1', 0, 0, 0, 24];
        expected.extend([7; 24]);
        expected.extend([0, 255, 1, 254]);
        assert_eq!(body, expected.as_slice());
        let mut earlier = header.to_vec();
        earlier.push(SEALED);
        earlier.extend(
            br#"{"key_id":"k1","nonce":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcH","ciphertext":"AP8B/g=="}"#,
        );
        for form in [bytes.as_slice(), earlier.as_slice()] {
            let record = decode_record("test", form, "s:1".into(), 1).unwrap();
            assert_eq!(record.body, Body::Sealed(sealed.clone()));
        }
    }

    #[test]
    fn plain_and_sealed_records_round_trip() {
        let plain = draft(json!({"x": [1, 2], "s": "é\"\n"}));
        let sealed = RecordDraft {
            topic_key: None,
            body: Body::Sealed(SealedBody {
                key_id: "k1".into(),
                nonce: b"nonce".to_vec(),
                ciphertext: b"cipher".to_vec(),
            }),
            ..plain.clone()
        };
        for draft in [plain, sealed] {
            let bytes = encode_draft(&draft).unwrap();
            assert_eq!(bytes[0], MAGIC);
            let record = decode_record("test", &bytes, "s:1".into(), 1).unwrap();
            assert_eq!(record, Record::from_draft(draft.clone(), "s:1".into(), 1));
            assert_eq!(topic_of(&bytes).as_deref(), Some("a.b"));
        }
    }

    #[test]
    fn the_header_costs_a_few_bytes_beyond_the_json() {
        let draft = draft(json!({"i": 7}));
        let bytes = encode_draft(&draft).unwrap();
        // magic, 3 length fields, time, form, actor length; then names and JSON.
        let fixed = 1 + 2 + 8 + 2 + 2 + 1 + 4;
        let names = "env".len() + "a.b".len() + "k.*>".len();
        let json = r#"{"u":1}"#.len() + r#"{"i":7}"#.len();
        assert_eq!(bytes.len(), fixed + names + json);
    }

    #[test]
    fn uuid_envelope_ids_take_16_bytes_and_other_ids_stay_text() {
        let uuid = "0193a4f2-7c1e-7d3a-9b2c-5e8f1a2b3c4d";
        let text_form = encode_draft(&draft(json!(1))).unwrap().len() - "env".len();
        for (id, id_bytes) in [
            (uuid, 16),
            // Not the form Photon renders: kept as given, byte for byte.
            ("0193A4F2-7C1E-7D3A-9B2C-5E8F1A2B3C4D", 36),
            ("0193a4f2-7c1e-7d3a-9b2c-5e8f1a2b3C4D", 36),
            ("0193a4f27c1e7d3a9b2c5e8f1a2b3c4d", 32),
            ("{0193a4f2-7c1e-7d3a-9b2c-5e8f1a2b3c4d}", 38),
        ] {
            let draft = RecordDraft {
                envelope_id: id.into(),
                ..draft(json!(1))
            };
            let bytes = encode_draft(&draft).unwrap();
            assert_eq!(bytes.len(), text_form + id_bytes, "{id}");
            let record = decode_record("test", &bytes, "s:1".into(), 1).unwrap();
            assert_eq!(record.envelope_id, id);
            for cut in [2, 3, 10] {
                assert!(decode_record("test", &bytes[..cut], "e".into(), 1).is_err());
            }
        }
    }

    #[test]
    fn json_records_decode_with_unknown_fields_kept() {
        let draft = draft(json!({"x": 1}));
        let value = json!({
            "envelope_id": draft.envelope_id,
            "topic_name": draft.topic_name,
            "topic_key": draft.topic_key,
            "created_at": draft.created_at,
            "body": draft.body,
            "trace_id": "t",
        });
        let bytes = serde_json::to_vec(&value).unwrap();
        let record = decode_record("test", &bytes, "s:1".into(), 1).unwrap();
        assert_eq!(record.extra.get("trace_id"), Some(&json!("t")));
        assert_eq!(record.body, draft.body);
        assert_eq!(record.created_at, draft.created_at);
        assert_eq!(topic_of(&bytes).as_deref(), Some("a.b"));
    }

    #[test]
    fn garbage_truncated_and_too_deep_records_are_codec_errors() {
        assert!(matches!(
            decode_record("test", b"not json", "e".into(), 1),
            Err(PhotonError::Codec { .. })
        ));
        let bytes = encode_draft(&draft(json!({"x": 1}))).unwrap();
        for cut in [1, 5, 12, bytes.len() - 3] {
            let error = decode_record("test", &bytes[..cut], "e".into(), 1).unwrap_err();
            assert!(
                matches!(error, PhotonError::Codec { .. }),
                "cut {cut}: {error}"
            );
        }
        assert_eq!(topic_of(&bytes[..5]), None);
        let limit = crate::store::MAX_JSON_DEPTH;
        let deepest = (0..limit).fold(json!(0), |inner, _| json!([inner]));
        let bytes = encode_draft(&draft(deepest.clone())).unwrap();
        assert_eq!(
            decode_record("test", &bytes, "e".into(), 1).unwrap().body,
            draft(deepest).body
        );
        let hostile = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(decode_record("test", hostile.as_bytes(), "e".into(), 1).is_err());
        let mut hostile_body = encode_draft(&draft(json!(0))).unwrap();
        hostile_body.truncate(hostile_body.len() - 1);
        hostile_body.extend_from_slice(hostile.as_bytes());
        assert!(decode_record("test", &hostile_body, "e".into(), 1).is_err());
    }
}
