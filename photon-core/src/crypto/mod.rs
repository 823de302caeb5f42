//! Transport keys and the sealed envelope (XChaCha20-Poly1305).
//!
//! Actor, payload and headers are sealed together; the envelope id, topic and key are
//! associated data, so a ciphertext moved to another event, topic or key fails to open.

use std::sync::Arc;

mod xchacha;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{CryptoFailure, PhotonError, Result};
use crate::event::{Body, Record, SealedBody};
use crate::headers::Headers;

/// Environment variable with several keys: `id:base64key,id:base64key`, newest last.
pub const TRANSPORT_KEYS_ENV: &str = "PHOTON_TRANSPORT_KEYS";

/// Environment variable with one key: `base64key` (id `default`) or `id:base64key`.
pub const TRANSPORT_KEY_ENV: &str = "PHOTON_TRANSPORT_KEY";

use xchacha::{with_associated_data, XChaChaKey, KEY_LEN, NONCE_LEN, TAG_LEN};

const AAD_VERSION: &[u8] = b"photon.envelope.v1";

/// The sealed plaintext, `{"actor":..,"payload":..,"headers":{..}}`, written straight from
/// borrowed values: the same bytes as a JSON object with those keys, without building one.
/// Without headers the key is left out, so that such a plaintext is the one sealed before
/// headers existed.
#[derive(Serialize)]
struct Plaintext<'a> {
    actor: &'a Value,
    payload: &'a Value,
    #[serde(skip_serializing_if = "Headers::is_empty")]
    headers: &'a Headers,
}

/// What a record's body holds, opened: a missing part is `null` (no headers for
/// `headers`), unknown parts are ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Opened {
    /// The actor JSON.
    #[serde(default)]
    pub actor: Value,
    /// The payload JSON.
    #[serde(default)]
    pub payload: Value,
    /// The headers; empty for bodies sealed before headers existed.
    #[serde(default)]
    pub headers: Headers,
}

/// One named 256-bit key.
#[derive(Clone)]
struct TransportKey {
    id: String,
    cipher: XChaChaKey,
}

/// The transport key ring: the newest key seals, any known key opens.
///
/// `Debug` prints key ids only, never key material.
#[derive(Clone, Default)]
/// # Examples
/// A ring of two keys: the newest seals, both open, so events sealed before a rotation
/// still read.
/// ```
/// use photon_core::TransportCrypto;
///
/// let crypto = TransportCrypto::plaintext()
///     .with_key("2026-05", [1u8; 32])?
///     .with_key("2026-11", [2u8; 32])?;
/// assert_eq!(crypto.sealing_key_id(), Some("2026-11"));
/// assert_eq!(crypto.key_ids().collect::<Vec<_>>(), vec!["2026-05", "2026-11"]);
/// assert!(!format!("{crypto:?}").contains("[1"), "Debug shows key ids only");
/// // The same ring as `PHOTON_TRANSPORT_KEYS` holds it (base64 keys, newest last):
/// let ring = "2026-05:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=,2026-11:AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
/// let parsed = TransportCrypto::parse_key_list("PHOTON_TRANSPORT_KEYS", ring)?;
/// assert_eq!(parsed.sealing_key_id(), Some("2026-11"));
/// # Ok::<_, photon_core::PhotonError>(())
/// ```
pub struct TransportCrypto {
    keys: Arc<Vec<TransportKey>>,
}

impl std::fmt::Debug for TransportCrypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("TransportCrypto")
            .field("key_ids", &ids)
            .finish()
    }
}

impl TransportCrypto {
    /// No key: bodies are stored in plaintext.
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// Adds a key; the last added key seals new events.
    ///
    /// # Errors
    /// [`PhotonError::Config`] when the key is not 32 bytes or the id is empty or taken.
    ///
    /// ```
    /// use photon_core::TransportCrypto;
    /// let crypto = TransportCrypto::plaintext().with_key("2026-11", [7u8; 32]).unwrap();
    /// assert_eq!(crypto.sealing_key_id(), Some("2026-11"));
    /// ```
    pub fn with_key(self, id: impl Into<String>, key: impl AsRef<[u8]>) -> Result<Self> {
        let id = id.into();
        let key = key.as_ref();
        if id.is_empty() || id.contains([',', ':']) {
            return Err(PhotonError::config(
                "transport key id",
                id,
                "a non-empty id without ',' or ':'",
            ));
        }
        if key.len() != KEY_LEN {
            return Err(PhotonError::config(
                format!("transport key {id}"),
                format!("<{} bytes>", key.len()),
                "exactly 32 bytes",
            ));
        }
        if self.keys.iter().any(|k| k.id == id) {
            return Err(PhotonError::config(
                "transport key id",
                id,
                "ids unique in the key ring",
            ));
        }
        let cipher = XChaChaKey::new(key).ok_or_else(|| {
            PhotonError::config("transport key", "<redacted>", "exactly 32 bytes")
        })?;
        let mut keys = self.keys.as_ref().clone();
        keys.push(TransportKey { id, cipher });
        Ok(Self {
            keys: Arc::new(keys),
        })
    }

    /// Reads [`TRANSPORT_KEYS_ENV`], else [`TRANSPORT_KEY_ENV`]; plaintext when neither is set.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming the variable when a value is malformed.
    ///
    /// # Examples
    /// ```
    /// let crypto = photon_core::TransportCrypto::from_env()?; // plaintext when neither is set
    /// # let _ = crypto;
    /// # Ok::<_, photon_core::PhotonError>(())
    /// ```
    pub fn from_env() -> Result<Self> {
        if let Ok(value) = std::env::var(TRANSPORT_KEYS_ENV) {
            return Self::parse_key_list(TRANSPORT_KEYS_ENV, &value);
        }
        if let Ok(value) = std::env::var(TRANSPORT_KEY_ENV) {
            return Self::parse_key_list(TRANSPORT_KEY_ENV, &value);
        }
        Ok(Self::plaintext())
    }

    /// Parses `id:base64,id:base64` (newest last); a lone `base64` gets the id `default`.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming `variable`.
    ///
    /// # Examples
    /// ```
    /// use photon_core::{PhotonError, TransportCrypto};
    /// let one = TransportCrypto::parse_key_list("PHOTON_TRANSPORT_KEY", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")?;
    /// assert_eq!(one.sealing_key_id(), Some("default"));
    /// let refused = TransportCrypto::parse_key_list("PHOTON_TRANSPORT_KEY", "too-short");
    /// assert!(matches!(refused, Err(PhotonError::Config { variable, .. }) if variable == "PHOTON_TRANSPORT_KEY"));
    /// # Ok::<_, PhotonError>(())
    /// ```
    pub fn parse_key_list(variable: &str, value: &str) -> Result<Self> {
        let expected = "comma-separated id:base64 entries, each key 32 bytes";
        let mut crypto = Self::plaintext();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (id, encoded) = entry.split_once(':').unwrap_or(("default", entry));
            let key = BASE64
                .decode(encoded.trim())
                .map_err(|_| PhotonError::config(variable, "<redacted>", expected))?;
            crypto = crypto
                .with_key(id.trim(), &key)
                .map_err(|_| PhotonError::config(variable, "<redacted>", expected))?;
        }
        if crypto.keys.is_empty() {
            return Err(PhotonError::config(variable, value, expected));
        }
        Ok(crypto)
    }

    /// Whether a key is configured (bodies are sealed).
    pub fn is_sealing(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Ids of the configured keys, oldest first (the last one seals).
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    /// Id of the key that seals new events.
    pub fn sealing_key_id(&self) -> Option<&str> {
        self.keys.last().map(|k| k.id.as_str())
    }

    /// Builds the body of a new record: actor, payload and headers sealed together with
    /// the newest key, or in clear when no key is configured.
    ///
    /// # Errors
    /// [`PhotonError::Codec`] if the values cannot be encoded.
    pub fn seal(
        &self,
        envelope_id: &str,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        headers: Headers,
    ) -> Result<Body> {
        let Some(sealing) = self.keys.last() else {
            return Ok(Body::Plain {
                actor,
                payload,
                headers,
            });
        };
        // One buffer holds the plaintext, is encrypted in place and takes the tag.
        let mut buffer = Vec::with_capacity(256);
        serde_json::to_writer(
            &mut buffer,
            &Plaintext {
                actor: &actor,
                payload: &payload,
                headers: &headers,
            },
        )
        .map_err(|e| PhotonError::codec("event body", e))?;
        buffer.reserve_exact(TAG_LEN);
        let mut nonce = [0u8; NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut nonce);
        with_associated_data(
            AAD_VERSION,
            [Some(&sealing.id), Some(envelope_id), Some(topic), key],
            |aad| sealing.cipher.seal(&nonce, aad, &mut buffer),
        )
        .map_err(|_| PhotonError::InvalidInput("event body too large to seal".into()))?;
        Ok(Body::Sealed(SealedBody {
            key_id: sealing.id.clone(),
            nonce: nonce.to_vec(),
            ciphertext: buffer,
        }))
    }

    /// Opens a record's body into its actor, payload and headers.
    ///
    /// # Errors
    /// [`PhotonError::Crypto`] naming the event: unknown key id, tampered or moved
    /// ciphertext, a plaintext record while a key is configured, or a sealed record
    /// without any key.
    pub fn open(&self, record: &Record) -> Result<Opened> {
        let fail = |reason| PhotonError::Crypto {
            event_id: record.event_id.clone(),
            topic: record.topic_name.clone(),
            seq: record.seq,
            reason,
        };
        match &record.body {
            Body::Plain { .. } if self.is_sealing() => Err(fail(CryptoFailure::UnsealedRecord)),
            Body::Plain {
                actor,
                payload,
                headers,
            } => Ok(Opened {
                actor: actor.clone(),
                payload: payload.clone(),
                headers: headers.clone(),
            }),
            Body::Sealed(_) if !self.is_sealing() => Err(fail(CryptoFailure::NoKeyConfigured)),
            Body::Sealed(sealed) => self.open_sealed(record, sealed).map_err(fail),
        }
    }

    fn open_sealed(
        &self,
        record: &Record,
        sealed: &SealedBody,
    ) -> std::result::Result<Opened, CryptoFailure> {
        let key = self
            .keys
            .iter()
            .find(|k| k.id == sealed.key_id)
            .ok_or_else(|| CryptoFailure::UnknownKey(sealed.key_id.clone()))?;
        let nonce: [u8; NONCE_LEN] = sealed.nonce.as_slice().try_into().map_err(|_| {
            CryptoFailure::Malformed(format!("nonce of {} bytes", sealed.nonce.len()))
        })?;
        // Decrypted and parsed in one buffer.
        let mut buffer = sealed.ciphertext.clone();
        let parts = [
            Some(key.id.as_str()),
            Some(record.envelope_id.as_str()),
            Some(record.topic_name.as_str()),
            record.topic_key.as_deref(),
        ];
        with_associated_data(AAD_VERSION, parts, |aad| {
            key.cipher.open(&nonce, aad, &mut buffer)
        })
        .map_err(|_| CryptoFailure::Tampered)?;
        serde_json::from_slice(&buffer)
            .map_err(|e| CryptoFailure::Malformed(format!("plaintext: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RecordDraft;
    use chrono::Utc;
    use serde_json::json;

    fn headers() -> Headers {
        Headers::from([("trace-marker".to_owned(), "h3-plaintext-header".to_owned())])
    }

    fn opened(actor: Value, payload: Value, headers: Headers) -> Opened {
        Opened {
            actor,
            payload,
            headers,
        }
    }

    fn record(crypto: &TransportCrypto, envelope: &str, topic: &str, key: Option<&str>) -> Record {
        let body = crypto
            .seal(
                envelope,
                topic,
                key,
                json!({"u": 1}),
                json!({"secret": "s3-plaintext-marker"}),
                headers(),
            )
            .unwrap();
        let draft = RecordDraft {
            envelope_id: envelope.into(),
            topic_name: topic.into(),
            topic_key: key.map(str::to_owned),
            created_at: Utc::now(),
            body,
        };
        Record::from_draft(draft, envelope.into(), 1)
    }

    fn reason(err: PhotonError) -> CryptoFailure {
        match err {
            PhotonError::Crypto { reason, .. } => reason,
            other => panic!("expected crypto error, got {other}"),
        }
    }

    #[test]
    fn seal_then_open() {
        let crypto = TransportCrypto::plaintext()
            .with_key("k1", [1u8; 32])
            .unwrap();
        let sealed = record(&crypto, "e1", "t", Some("k"));
        let text = serde_json::to_string(&sealed).unwrap();
        // A marker long enough that random base64 ciphertext cannot contain it by chance
        // (a two-letter one did, about one run in fifty).
        assert!(
            !text.contains("plaintext-marker"),
            "plaintext leaked: {text}"
        );
        assert!(!text.contains("secret"), "plaintext leaked: {text}");
        assert!(!text.contains("trace-marker"), "header leaked: {text}");
        assert!(!text.contains("plaintext-header"), "header leaked: {text}");
        assert_eq!(
            crypto.open(&sealed).unwrap(),
            opened(
                json!({"u": 1}),
                json!({"secret": "s3-plaintext-marker"}),
                headers()
            )
        );
        let plain = record(&TransportCrypto::plaintext(), "e1", "t", Some("k"));
        assert_eq!(plain.headers(), Some(&headers()));
        assert_eq!(sealed.headers(), None);
    }

    #[test]
    fn bodies_sealed_as_a_json_object_with_other_fields_open() {
        // Sealed as before this form was written from borrowed values: a JSON object with
        // the keys in another order and a field no version reads.
        let crypto = TransportCrypto::plaintext()
            .with_key("k1", [1u8; 32])
            .unwrap();
        let plaintext = br#"{"payload":{"n":[1,2]},"note":"x","actor":"u"}"#;
        let nonce = [5u8; NONCE_LEN];
        let mut buffer = plaintext.to_vec();
        with_associated_data(
            AAD_VERSION,
            [Some("k1"), Some("e1"), Some("t"), Some("k")],
            |aad| {
                use chacha20poly1305::aead::{AeadInPlace, KeyInit};
                chacha20poly1305::XChaCha20Poly1305::new_from_slice(&[1u8; 32])
                    .unwrap()
                    .encrypt_in_place(
                        chacha20poly1305::XNonce::from_slice(&nonce),
                        aad,
                        &mut buffer,
                    )
            },
        )
        .unwrap();
        let mut sealed = record(&crypto, "e1", "t", Some("k"));
        sealed.body = Body::Sealed(SealedBody {
            key_id: "k1".into(),
            nonce: nonce.to_vec(),
            ciphertext: buffer,
        });
        assert_eq!(
            crypto.open(&sealed).unwrap(),
            opened(json!("u"), json!({"n": [1, 2]}), Headers::new())
        );
    }

    #[test]
    fn moved_or_tampered_records_are_refused() {
        let crypto = TransportCrypto::plaintext()
            .with_key("k1", [1u8; 32])
            .unwrap();
        let original = record(&crypto, "e1", "t", Some("k"));
        let mut moved_topic = original.clone();
        moved_topic.topic_name = "u".into();
        assert_eq!(
            reason(crypto.open(&moved_topic).unwrap_err()),
            CryptoFailure::Tampered
        );
        let mut moved_event = original.clone();
        moved_event.envelope_id = "e2".into();
        assert_eq!(
            reason(crypto.open(&moved_event).unwrap_err()),
            CryptoFailure::Tampered
        );
        let mut moved_key = original.clone();
        moved_key.topic_key = None;
        assert_eq!(
            reason(crypto.open(&moved_key).unwrap_err()),
            CryptoFailure::Tampered
        );
        let mut flipped = original;
        if let Body::Sealed(s) = &mut flipped.body {
            s.ciphertext[0] ^= 1;
        }
        assert_eq!(
            reason(crypto.open(&flipped).unwrap_err()),
            CryptoFailure::Tampered
        );
    }

    #[test]
    fn rotation_and_wrong_keys() {
        let old = TransportCrypto::plaintext()
            .with_key("old", [1u8; 32])
            .unwrap();
        let rotated = old.clone().with_key("new", [2u8; 32]).unwrap();
        let before = record(&old, "e1", "t", None);
        let after = record(&rotated, "e2", "t", None);
        assert!(rotated.open(&before).is_ok());
        assert!(matches!(&after.body, Body::Sealed(s) if s.key_id == "new"));
        assert_eq!(
            reason(old.open(&after).unwrap_err()),
            CryptoFailure::UnknownKey("new".into())
        );
        let impostor = TransportCrypto::plaintext()
            .with_key("old", [9u8; 32])
            .unwrap();
        assert_eq!(
            reason(impostor.open(&before).unwrap_err()),
            CryptoFailure::Tampered
        );
        let plain = record(&TransportCrypto::plaintext(), "e3", "t", None);
        assert_eq!(
            reason(rotated.open(&plain).unwrap_err()),
            CryptoFailure::UnsealedRecord
        );
        assert_eq!(
            reason(TransportCrypto::plaintext().open(&before).unwrap_err()),
            CryptoFailure::NoKeyConfigured
        );
    }

    #[test]
    fn key_list_parsing_names_the_variable() {
        let k = BASE64.encode([3u8; 32]);
        let crypto = TransportCrypto::parse_key_list("V", &format!("a:{k}, b:{k}")).unwrap();
        assert_eq!(crypto.sealing_key_id(), Some("b"));
        let single = TransportCrypto::parse_key_list("V", &k).unwrap();
        assert_eq!(single.sealing_key_id(), Some("default"));
        let err = TransportCrypto::parse_key_list("PHOTON_TRANSPORT_KEY", "short").unwrap_err();
        assert!(err.to_string().contains("PHOTON_TRANSPORT_KEY"), "{err}");
        assert!(!format!("{crypto:?}").contains(&k));
    }
}
