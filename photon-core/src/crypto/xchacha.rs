//! XChaCha20-Poly1305 (the envelope's AEAD) as HChaCha20 and the IETF ChaCha20-Poly1305 of
//! `ring`, and the associated data built on the stack.
//!
//! XChaCha20-Poly1305 is defined as exactly this composition: the subkey is HChaCha20 of
//! the key and the first 16 nonce bytes, and the message is sealed with ChaCha20-Poly1305
//! under that subkey and the nonce `[0; 4] ++ nonce[16..24]`. Sealed bytes are therefore
//! identical to those of the `chacha20poly1305` crate's `XChaCha20Poly1305`, which
//! sealed every record before (a test checks both ways). `ring`'s assembly is several
//! times faster on short messages than that crate's AVX2 Poly1305, which precomputes key
//! powers per message and dominated a 128-byte seal.

use chacha20::cipher::consts::U10;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};

/// Key length in bytes.
pub(super) const KEY_LEN: usize = 32;
/// Nonce length in bytes.
pub(super) const NONCE_LEN: usize = 24;
/// Tag length in bytes.
pub(super) const TAG_LEN: usize = 16;

/// One 256-bit key. XChaCha20 has no per-key schedule to cache: its subkey depends on the
/// nonce, so every message derives its own.
#[derive(Clone)]
pub(super) struct XChaChaKey([u8; KEY_LEN]);

/// The AEAD refused: a wrong key, or bytes that were changed or moved.
#[derive(Debug)]
pub(super) struct Refused;

impl XChaChaKey {
    /// The key, or `None` when it is not 32 bytes.
    pub(super) fn new(key: &[u8]) -> Option<Self> {
        key.try_into().ok().map(Self)
    }

    /// Runs `operation` (`ring`'s seal or open) under the message key and nonce that
    /// `nonce` selects, with `aad`; any refusal of `ring` is [`Refused`].
    fn in_place<T>(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        operation: impl FnOnce(LessSafeKey, Nonce, Aad<&[u8]>) -> Result<T, ring::error::Unspecified>,
    ) -> Result<T, Refused> {
        let (head, tail) = nonce.split_at(16);
        let subkey = chacha20::hchacha::<U10>((&self.0).into(), head.into());
        // A 32-byte key is what CHACHA20_POLY1305 takes, so this cannot fail.
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, subkey.as_slice())
            .unwrap_or_else(|_| unreachable!("a 32-byte ChaCha20-Poly1305 key"));
        let mut inner = [0u8; 12];
        inner[4..].copy_from_slice(tail);
        operation(
            LessSafeKey::new(unbound),
            Nonce::assume_unique_for_key(inner),
            Aad::from(aad),
        )
        .map_err(|_| Refused)
    }

    /// Encrypts `buffer` in place and appends the tag.
    pub(super) fn seal(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buffer: &mut Vec<u8>,
    ) -> Result<(), Refused> {
        self.in_place(nonce, aad, |key, nonce, aad| {
            key.seal_in_place_append_tag(nonce, aad, buffer)
        })
    }

    /// Checks the tag at the end of `buffer` and decrypts in place; `buffer` is left
    /// holding the plaintext.
    pub(super) fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buffer: &mut Vec<u8>,
    ) -> Result<(), Refused> {
        let plain_len = self.in_place(nonce, aad, |key, nonce, aad| {
            key.open_in_place(nonce, aad, buffer)
                .map(|plain| plain.len())
        })?;
        buffer.truncate(plain_len);
        Ok(())
    }
}

/// Bytes of associated data that fit on the stack: the version, four length-prefixed
/// parts, with a 128-byte topic, a 256-byte key and a 36-byte envelope id, and a key id of
/// up to 64 bytes.
const STACK_AAD: usize = 576;

/// Calls `with` on the associated data binding a ciphertext to its key id, envelope,
/// topic and key. Each part is length-prefixed so that no two different tuples encode
/// alike. Built on the stack; only parts longer than Photon's limits spill to the heap.
pub(super) fn with_associated_data<T>(
    version: &[u8],
    parts: [Option<&str>; 4],
    with: impl FnOnce(&[u8]) -> T,
) -> T {
    let len = version.len()
        + parts
            .iter()
            .map(|part| part.map_or(1, |text| 9 + text.len()))
            .sum::<usize>();
    let mut stack = [0u8; STACK_AAD];
    let mut heap = Vec::new();
    let out: &mut [u8] = if len <= STACK_AAD {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    out[..version.len()].copy_from_slice(version);
    let mut at = version.len();
    for part in parts {
        match part {
            Some(text) => {
                out[at] = 1;
                out[at + 1..at + 9].copy_from_slice(&(text.len() as u64).to_be_bytes());
                out[at + 9..at + 9 + text.len()].copy_from_slice(text.as_bytes());
                at += 9 + text.len();
            }
            None => {
                out[at] = 0;
                at += 1;
            }
        }
    }
    with(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chacha20poly1305::aead::{AeadInPlace, KeyInit};
    use chacha20poly1305::{XChaCha20Poly1305, XNonce};

    #[test]
    fn seals_the_bytes_of_the_reference_xchacha20poly1305_and_opens_them() {
        let reference = XChaCha20Poly1305::new_from_slice(&[3u8; 32]).unwrap();
        let key = XChaChaKey::new(&[3u8; 32]).unwrap();
        for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 170, 1000, 4099] {
            let nonce: [u8; NONCE_LEN] = std::array::from_fn(|i| (i * 7 + len) as u8);
            let aad: Vec<u8> = (0..len % 50).map(|i| i as u8).collect();
            let plain: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
            let mut ours = plain.clone();
            key.seal(&nonce, &aad, &mut ours).unwrap();
            let mut theirs = plain.clone();
            reference
                .encrypt_in_place(XNonce::from_slice(&nonce), &aad, &mut theirs)
                .unwrap();
            assert_eq!(ours, theirs, "length {len}");
            assert_eq!(ours.len(), len + TAG_LEN);
            key.open(&nonce, &aad, &mut theirs).unwrap();
            assert_eq!(theirs, plain, "length {len}");
            let mut back = ours.clone();
            reference
                .decrypt_in_place(XNonce::from_slice(&nonce), &aad, &mut back)
                .unwrap();
            assert_eq!(back, plain, "length {len}");
            let mut tampered = ours.clone();
            tampered[0] ^= 1;
            assert!(key.open(&nonce, &aad, &mut tampered).is_err());
            let mut moved = ours;
            let mut other = aad.clone();
            other.push(9);
            assert!(key.open(&nonce, &other, &mut moved).is_err());
        }
        assert!(XChaChaKey::new(&[1u8; 31]).is_none());
    }

    #[test]
    fn associated_data_is_length_prefixed_on_the_stack_and_beyond() {
        let encoded = with_associated_data(
            b"v1",
            [Some("k"), Some("e"), Some("t"), None],
            <[u8]>::to_vec,
        );
        let mut expected = b"v1".to_vec();
        for part in ["k", "e", "t"] {
            expected.push(1);
            expected.extend_from_slice(&1u64.to_be_bytes());
            expected.extend_from_slice(part.as_bytes());
        }
        expected.push(0);
        assert_eq!(encoded, expected);
        let long = "x".repeat(STACK_AAD);
        let spilled = with_associated_data(
            b"v1",
            [Some("k"), Some(&long), Some("t"), Some("y")],
            <[u8]>::to_vec,
        );
        assert_eq!(spilled.len(), 2 + 4 * 9 + 1 + STACK_AAD + 1 + 1);
        assert_eq!(
            &spilled[2 + 10 + 9..2 + 10 + 9 + STACK_AAD],
            long.as_bytes()
        );
    }
}
