//! S3 secret keys sealed at rest: the users table keeps each secret key encrypted with
//! ChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`) under a 256-bit master key the
//! operator controls, never in plaintext.
//!
//! A sealed secret is `base64(nonce (12 bytes) || ciphertext || tag (16 bytes))`, the nonce
//! random per seal, the access key as associated data (a sealed secret copied onto another
//! user's record does not open). A [`SecretKeyring`] seals with its `current` key and opens
//! with it or any `previous` one, so a master key is rotated by starting with the new key as
//! current and the old as previous: the gateway reseals every user's secret at start
//! ([`crate::Users::reseal`]), after which the old key may go. A secret no key of the ring
//! opens is an error naming the user and the remedy, never a wrong key handed to SigV4.

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;

use crate::error::{GatewayError, Result};

/// Bytes of a master key.
pub const MASTER_KEY_BYTES: usize = 32;
/// Bytes of a nonce.
const NONCE_BYTES: usize = 12;

/// A 256-bit key sealing S3 secret keys. Its `Debug` shows no key material.
#[derive(Clone, PartialEq, Eq)]
pub struct MasterKey([u8; MASTER_KEY_BYTES]);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

impl MasterKey {
    /// The key of these bytes.
    pub fn from_bytes(bytes: [u8; MASTER_KEY_BYTES]) -> Self {
        Self(bytes)
    }

    /// A fresh key from the operating system's random source.
    pub fn generate() -> Self {
        let mut bytes = [0u8; MASTER_KEY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// Reads 64 hexadecimal digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Self> {
        let invalid = || {
            GatewayError::InvalidArgument(format!(
                "a master key is {} hexadecimal digits ({MASTER_KEY_BYTES} bytes)",
                MASTER_KEY_BYTES * 2
            ))
        };
        let bytes = hex::decode(text.trim()).map_err(|_| invalid())?;
        let bytes: [u8; MASTER_KEY_BYTES] = bytes.try_into().map_err(|_| invalid())?;
        Ok(Self(bytes))
    }

    /// The key as 64 hexadecimal digits (what [`MasterKey::from_hex`] reads).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    fn cipher(&self) -> ChaCha20Poly1305 {
        ChaCha20Poly1305::new(Key::from_slice(&self.0))
    }
}

/// The master keys a gateway knows: `current` seals, `current` and `previous` open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyring {
    /// Seals every secret written, and opens.
    pub current: MasterKey,
    /// Open secrets sealed before a rotation (resealed with `current` at start).
    pub previous: Vec<MasterKey>,
}

impl SecretKeyring {
    /// A ring of one key.
    pub fn new(current: MasterKey) -> Self {
        Self {
            current,
            previous: Vec::new(),
        }
    }

    /// `secret` sealed for `access_key` with the current key and a fresh random nonce.
    pub fn seal(&self, access_key: &str, secret: &str) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        self.seal_with_nonce(access_key, secret, nonce)
    }

    fn seal_with_nonce(&self, access_key: &str, secret: &str, nonce: [u8; NONCE_BYTES]) -> String {
        let payload = Payload {
            msg: secret.as_bytes(),
            aad: access_key.as_bytes(),
        };
        let sealed = self
            .current
            .cipher()
            .encrypt(Nonce::from_slice(&nonce), payload)
            .expect("ChaCha20-Poly1305 seals any message of a secret key's size");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// Opens a sealed secret of `access_key`: the secret, and whether the current key opened
    /// it (`false`: a previous key did, and the record wants resealing).
    pub fn open(&self, access_key: &str, sealed: &str) -> Result<(String, bool)> {
        let refused = |why: &str| {
            GatewayError::SecretKeySealed(format!(
                "the secret key of access key {access_key} {why}: the gateway's master key \
                 is not the one it was sealed with (restore that key, or give it as a \
                 previous key so the gateway reseals the secret with the new one)"
            ))
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|_| refused("is not a sealed secret"))?;
        if bytes.len() < NONCE_BYTES {
            return Err(refused("is not a sealed secret"));
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let keys = std::iter::once(&self.current).chain(&self.previous);
        for (index, key) in keys.enumerate() {
            let payload = Payload {
                msg: ciphertext,
                aad: access_key.as_bytes(),
            };
            if let Ok(secret) = key.cipher().decrypt(Nonce::from_slice(nonce), payload) {
                let secret = String::from_utf8(secret)
                    .map_err(|_| GatewayError::Corrupt("a sealed secret is not UTF-8".into()))?;
                return Ok((secret, index == 0));
            }
        }
        Err(refused("does not open"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_opens_and_refuses_other_keys() {
        let ring = SecretKeyring::new(MasterKey::from_bytes([7; 32]));
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let sealed = ring.seal_with_nonce("AKIA0", secret, [1; 12]);
        assert!(!sealed.contains(secret));
        assert_eq!(
            ring.open("AKIA0", &sealed).unwrap(),
            (secret.to_string(), true)
        );
        assert_ne!(
            ring.seal("AKIA0", secret),
            ring.seal("AKIA0", secret),
            "fresh nonces"
        );

        let other = SecretKeyring::new(MasterKey::from_bytes([8; 32]));
        let error = other.open("AKIA0", &sealed).unwrap_err().to_string();
        assert!(
            error.contains("AKIA0") && error.contains("master key"),
            "{error}"
        );
        // Another user's record: the access key is bound in.
        assert!(ring.open("AKIA1", &sealed).is_err());
        // Rotation: the old key as previous still opens, and says so.
        let rotated = SecretKeyring {
            current: MasterKey::from_bytes([8; 32]),
            previous: vec![MasterKey::from_bytes([7; 32])],
        };
        assert_eq!(
            rotated.open("AKIA0", &sealed).unwrap(),
            (secret.to_string(), false)
        );
        assert!(ring.open("AKIA0", "not base64!").is_err());
        assert!(ring.open("AKIA0", "AAAA").is_err());
    }

    #[test]
    fn hex_round_trip() {
        let key = MasterKey::generate();
        assert_eq!(
            MasterKey::from_hex(&format!(" {}\n", key.to_hex())).unwrap(),
            key
        );
        assert!(MasterKey::from_hex("abcd").is_err());
        assert!(MasterKey::from_hex(&"zz".repeat(32)).is_err());
        assert_eq!(format!("{key:?}"), "MasterKey(..)");
    }
}
