//! Server-side encryption of object data (SSE-C and SSE-S3): a layer around the payload
//! where it enters (PUT, UploadPart, copies) and leaves (GET, copies), so the store below
//! keeps only ciphertext and never sees a key.
//!
//! Construction (AES-256-GCM, RustCrypto's `aes-gcm`; no cryptography of our own):
//! - every write of data (an object, or one part of a multipart upload) draws a fresh random
//!   256-bit **data key** from the operating system;
//! - the plaintext is sealed in chunks of [`CHUNK_BYTES`] (the last one shorter), each with
//!   AES-256-GCM under the data key, nonce = 4 zero bytes then the chunk index (64-bit big
//!   endian), no associated data: as a data key seals one write only, a nonce is never used
//!   twice under one key; a chunk is its ciphertext then its 16-byte tag, so the stored size
//!   is [`sealed_len`] and a range of the plaintext is read and opened chunk by chunk;
//! - the data key is kept with the object **wrapped** ([`WrappedKey`]) by the key-encryption
//!   key: the customer's key (SSE-C) or the operator's master key (SSE-S3), AES-256-GCM
//!   with a random 96-bit nonce and the mode as associated data. The customer's key is never
//!   stored: opening the wrapped key is the keyed check that refuses a wrong one (403), as
//!   AWS does.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::error::{GatewayError, Result};

/// Plaintext bytes sealed in one chunk.
pub const CHUNK_BYTES: u64 = 64 * 1024;
/// Bytes of a GCM tag, appended to each sealed chunk.
pub const TAG_BYTES: u64 = 16;
/// Bytes of a key (AES-256).
pub const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;

/// Which key wraps an object's data keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SseMode {
    /// The customer's key, given with every request (SSE-C).
    Customer,
    /// The gateway's master key (SSE-S3, `x-amz-server-side-encryption: AES256`).
    Managed,
}

impl SseMode {
    fn label(self) -> &'static [u8] {
        match self {
            SseMode::Customer => b"strata sse-c v1",
            SseMode::Managed => b"strata sse-s3 v1",
        }
    }
}

/// A data key sealed by a key-encryption key: nonce and ciphertext with tag, in base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrappedKey {
    /// The wrap's nonce (12 bytes, base64).
    pub nonce: String,
    /// The data key sealed (32 bytes and a 16-byte tag, base64).
    pub sealed: String,
}

/// How an object's data is encrypted: the mode and one wrapped data key per segment (the
/// object's single write, or each part of a multipart upload in order, whose plaintext sizes
/// are the entry's `part_sizes`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEncryption {
    /// Which key wraps the data keys.
    pub mode: SseMode,
    /// The wrapped data key of each segment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<WrappedKey>,
}

/// A 256-bit key. Its `Debug` shows no key material.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; KEY_BYTES]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// The key of these bytes.
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Self {
        Self(bytes)
    }

    /// A fresh key from the operating system's random source.
    pub fn generate() -> Self {
        let mut bytes = [0u8; KEY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// Reads 64 hexadecimal digits (surrounding whitespace ignored): the form of a master
    /// key file (`openssl rand -hex 32`).
    pub fn from_hex(text: &str) -> Result<Self> {
        let bytes = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok());
        bytes.map(Self).ok_or_else(|| {
            GatewayError::InvalidArgument(format!(
                "an SSE master key is {} hexadecimal digits ({KEY_BYTES} bytes)",
                KEY_BYTES * 2
            ))
        })
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(&self.0))
    }

    /// A customer's key as SSE-C sends it: base64 of 32 bytes, with the base64 of its MD5,
    /// which must match. InvalidArgument otherwise.
    pub fn from_customer(key_base64: &str, key_md5_base64: &str) -> Result<Self> {
        let engine = base64::engine::general_purpose::STANDARD;
        let bytes = engine.decode(key_base64.trim()).map_err(|_| {
            GatewayError::InvalidArgument(
                "the SSE-C key is not base64 (it is the base64 of 32 bytes)".into(),
            )
        })?;
        let bytes: [u8; KEY_BYTES] = bytes.try_into().map_err(|_| {
            GatewayError::InvalidArgument(
                "the SSE-C key must be 256 bits (32 bytes) for AES256".into(),
            )
        })?;
        let digest = engine.encode(Md5::digest(bytes));
        if digest != key_md5_base64.trim() {
            return Err(GatewayError::InvalidArgument(
                "the SSE-C key's MD5 does not match x-amz-server-side-encryption-customer-key-MD5"
                    .into(),
            ));
        }
        Ok(Self(bytes))
    }

    /// `data_key` sealed by this key-encryption key for `mode`.
    pub fn wrap(&self, mode: SseMode, data_key: &SecretKey) -> WrappedKey {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = self
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &data_key.0,
                    aad: mode.label(),
                },
            )
            .expect("AES-GCM seals 32 bytes");
        let engine = base64::engine::general_purpose::STANDARD;
        WrappedKey {
            nonce: engine.encode(nonce),
            sealed: engine.encode(sealed),
        }
    }

    /// The data key `wrapped` seals, if this is the key that sealed it for `mode`.
    pub fn unwrap(&self, mode: SseMode, wrapped: &WrappedKey) -> Option<SecretKey> {
        let engine = base64::engine::general_purpose::STANDARD;
        let nonce = engine.decode(&wrapped.nonce).ok()?;
        let sealed = engine.decode(&wrapped.sealed).ok()?;
        if nonce.len() != NONCE_BYTES {
            return None;
        }
        let opened = self
            .cipher()
            .decrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &sealed,
                    aad: mode.label(),
                },
            )
            .ok()?;
        Some(SecretKey(opened.try_into().ok()?))
    }
}

/// Stored bytes of `plain_bytes` of plaintext sealed in chunks.
pub fn sealed_len(plain_bytes: u64) -> u64 {
    plain_bytes + TAG_BYTES * plain_bytes.div_ceil(CHUNK_BYTES)
}

fn chunk_nonce(index: u64) -> [u8; NONCE_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[4..].copy_from_slice(&index.to_be_bytes());
    nonce
}

/// What an encrypting stream saw of the plaintext: its MD5 (the object's ETag, Content-MD5)
/// and its size.
#[derive(Default)]
pub struct PlainTally {
    md5: Md5,
    size_bytes: u64,
}

impl PlainTally {
    /// The plaintext's MD5 and size so far (final once the stream ended).
    pub fn finish(&self) -> ([u8; 16], u64) {
        (self.md5.clone().finalize().into(), self.size_bytes)
    }
}

/// A boxed stream of byte chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>;

/// `plain` sealed under `data_key` chunk by chunk, and the tally of the plaintext it read.
pub fn encrypt_stream(
    plain: ByteStream,
    data_key: SecretKey,
) -> (ByteStream, Arc<Mutex<PlainTally>>) {
    let tally = Arc::new(Mutex::new(PlainTally::default()));
    struct State {
        plain: ByteStream,
        cipher: Aes256Gcm,
        buffer: BytesMut,
        index: u64,
        ended: bool,
        tally: Arc<Mutex<PlainTally>>,
    }
    let state = State {
        plain,
        cipher: data_key.cipher(),
        buffer: BytesMut::new(),
        index: 0,
        ended: false,
        tally: tally.clone(),
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            let full = state.buffer.len() as u64 >= CHUNK_BYTES;
            if full || (state.ended && !state.buffer.is_empty()) {
                let take = state.buffer.len().min(CHUNK_BYTES as usize);
                let chunk = state.buffer.split_to(take);
                let sealed = state
                    .cipher
                    .encrypt(Nonce::from_slice(&chunk_nonce(state.index)), &chunk[..])
                    .map_err(|_| GatewayError::Corrupt("AES-GCM sealing failed".into()));
                state.index += 1;
                return Some((sealed.map(Bytes::from), state));
            }
            if state.ended {
                return None;
            }
            match state.plain.next().await {
                Some(Ok(bytes)) => {
                    {
                        let mut tally = state.tally.lock().unwrap_or_else(|p| p.into_inner());
                        tally.md5.update(&bytes);
                        tally.size_bytes += bytes.len() as u64;
                    }
                    state.buffer.extend_from_slice(&bytes);
                }
                Some(Err(error)) => {
                    state.ended = true;
                    state.buffer.clear();
                    return Some((Err(error), state));
                }
                None => state.ended = true,
            }
        }
    });
    (stream.boxed(), tally)
}

/// One sealed segment of an object: its data key and its plaintext size.
#[derive(Clone, Debug)]
pub struct Segment {
    /// The segment's data key, unwrapped.
    pub key: SecretKey,
    /// Its plaintext bytes.
    pub plain_bytes: u64,
}

/// The stored byte range `[start, end)` to read for plaintext `[start, end)` of an object of
/// these segments: whole chunks.
pub fn sealed_range(segments: &[Segment], start: u64, end: u64) -> (u64, u64) {
    let (mut plain_offset, mut sealed_offset) = (0u64, 0u64);
    let (mut sealed_start, mut sealed_end) = (None, 0u64);
    for segment in segments {
        let plain_end = plain_offset + segment.plain_bytes;
        // An empty segment (a part of no bytes) has no chunk.
        if segment.plain_bytes > 0 && start < plain_end && end > plain_offset {
            let first = (start.max(plain_offset) - plain_offset) / CHUNK_BYTES;
            let last = (end.min(plain_end) - plain_offset - 1) / CHUNK_BYTES;
            sealed_start.get_or_insert(sealed_offset + first * (CHUNK_BYTES + TAG_BYTES));
            sealed_end = sealed_offset
                + ((last + 1) * (CHUNK_BYTES + TAG_BYTES)).min(sealed_len(segment.plain_bytes));
        }
        plain_offset = plain_end;
        sealed_offset += sealed_len(segment.plain_bytes);
    }
    match sealed_start {
        Some(sealed_start) => (sealed_start, sealed_end),
        None => (0, 0),
    }
}

/// One chunk to open: its segment, its index there, its stored size.
struct Frame {
    segment: usize,
    index: u64,
    sealed_bytes: usize,
}

/// The chunks covering plaintext `[start, end)`, in order, and the plaintext bytes to skip
/// at the front of the first one.
fn frames(segments: &[Segment], start: u64, end: u64) -> (VecDeque<Frame>, u64) {
    let mut out = VecDeque::new();
    let mut skip = 0;
    let mut plain_offset = 0u64;
    for (number, segment) in segments.iter().enumerate() {
        let plain_end = plain_offset + segment.plain_bytes;
        // An empty segment (a part of no bytes) has no chunk.
        if segment.plain_bytes > 0 && start < plain_end && end > plain_offset {
            let first = (start.max(plain_offset) - plain_offset) / CHUNK_BYTES;
            let last = (end.min(plain_end) - plain_offset - 1) / CHUNK_BYTES;
            if out.is_empty() {
                skip = start.max(plain_offset) - plain_offset - first * CHUNK_BYTES;
            }
            for index in first..=last {
                let plain_bytes = (segment.plain_bytes - index * CHUNK_BYTES).min(CHUNK_BYTES);
                out.push_back(Frame {
                    segment: number,
                    index,
                    sealed_bytes: (plain_bytes + TAG_BYTES) as usize,
                });
            }
        }
        plain_offset = plain_end;
    }
    (out, skip)
}

/// Plaintext `[start, end)` of an object of `segments`, from `sealed`: the stored bytes of
/// [`sealed_range`] for the same range. A chunk that does not open (wrong key, altered or
/// missing data) ends the stream with an error.
pub fn decrypt_range(
    sealed: ByteStream,
    segments: Vec<Segment>,
    start: u64,
    end: u64,
) -> ByteStream {
    let (frames, skip) = frames(&segments, start, end);
    struct State {
        sealed: ByteStream,
        ciphers: Vec<Aes256Gcm>,
        frames: VecDeque<Frame>,
        buffer: BytesMut,
        skip: u64,
        remaining: u64,
        failed: bool,
    }
    let state = State {
        sealed,
        ciphers: segments.iter().map(|s| s.key.cipher()).collect(),
        frames,
        buffer: BytesMut::new(),
        skip,
        remaining: end.saturating_sub(start),
        failed: false,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        if state.failed || state.remaining == 0 {
            return None;
        }
        loop {
            let frame = state.frames.front()?;
            if state.buffer.len() >= frame.sealed_bytes {
                let chunk = state.buffer.split_to(frame.sealed_bytes);
                let opened = state.ciphers[frame.segment]
                    .decrypt(Nonce::from_slice(&chunk_nonce(frame.index)), &chunk[..]);
                state.frames.pop_front();
                let Ok(plain) = opened else {
                    state.failed = true;
                    return Some((
                        Err(GatewayError::Corrupt(
                            "an encrypted chunk does not open: the stored data was altered".into(),
                        )),
                        state,
                    ));
                };
                let mut plain = Bytes::from(plain);
                let skip = (state.skip as usize).min(plain.len());
                plain = plain.slice(skip..);
                state.skip = 0;
                let take = (plain.len() as u64).min(state.remaining) as usize;
                plain.truncate(take);
                state.remaining -= take as u64;
                return Some((Ok(plain), state));
            }
            match state.sealed.next().await {
                Some(Ok(bytes)) => state.buffer.extend_from_slice(&bytes),
                Some(Err(error)) => {
                    state.failed = true;
                    return Some((Err(error), state));
                }
                None => {
                    state.failed = true;
                    return Some((
                        Err(GatewayError::Corrupt(
                            "encrypted data ends before its last chunk".into(),
                        )),
                        state,
                    ));
                }
            }
        }
    });
    stream.boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(length: usize) -> Vec<u8> {
        (0..length).map(|i| (i * 7 % 251) as u8).collect()
    }

    async fn collect(stream: ByteStream) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut stream = stream;
        while let Some(item) = stream.next().await {
            out.extend_from_slice(&item?);
        }
        Ok(out)
    }

    fn pieces(data: &[u8], size: usize) -> ByteStream {
        let items: Vec<Result<Bytes>> = data
            .chunks(size.max(1))
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures::stream::iter(items).boxed()
    }

    async fn seal(data: &[u8], key: &SecretKey) -> Vec<u8> {
        let (stream, tally) = encrypt_stream(pieces(data, 10_000), key.clone());
        let sealed = collect(stream).await.unwrap();
        let (md5, size) = tally.lock().unwrap().finish();
        assert_eq!(size, data.len() as u64);
        assert_eq!(md5, <[u8; 16]>::from(Md5::digest(data)));
        assert_eq!(sealed.len() as u64, sealed_len(data.len() as u64));
        sealed
    }

    #[tokio::test]
    async fn ranges_of_segments_open_to_the_plaintext() {
        let parts = [
            pattern(3 * CHUNK_BYTES as usize + 5),
            pattern(17),
            pattern(0),
            pattern(CHUNK_BYTES as usize),
        ];
        let mut stored = Vec::new();
        let mut segments = Vec::new();
        for part in &parts {
            let key = SecretKey::generate();
            stored.extend(seal(part, &key).await);
            segments.push(Segment {
                key,
                plain_bytes: part.len() as u64,
            });
        }
        let whole: Vec<u8> = parts.concat();
        assert!(stored.len() > whole.len());
        assert_ne!(&stored[..100], &whole[..100]);
        let length = whole.len() as u64;
        for (start, end) in [
            (0, length),
            (1, 2),
            (CHUNK_BYTES - 1, CHUNK_BYTES + 1),
            (3 * CHUNK_BYTES, 3 * CHUNK_BYTES + 20),
            (3 * CHUNK_BYTES + 4, length - 3),
            (length - 1, length),
        ] {
            let (sealed_start, sealed_end) = sealed_range(&segments, start, end);
            let read = pieces(&stored[sealed_start as usize..sealed_end as usize], 999);
            let plain = collect(decrypt_range(read, segments.clone(), start, end))
                .await
                .unwrap();
            assert_eq!(
                plain,
                &whole[start as usize..end as usize],
                "{start}..{end}"
            );
        }
    }

    #[tokio::test]
    async fn altered_data_or_another_key_does_not_open() {
        let data = pattern(100_000);
        let key = SecretKey::generate();
        let mut stored = seal(&data, &key).await;
        let segment = |key: SecretKey| {
            vec![Segment {
                key,
                plain_bytes: data.len() as u64,
            }]
        };
        let other = collect(decrypt_range(
            pieces(&stored, 4096),
            segment(SecretKey::generate()),
            0,
            10,
        ));
        assert!(other.await.is_err());
        stored[70_000] ^= 1;
        let altered = decrypt_range(pieces(&stored, 4096), segment(key.clone()), 0, 100_000);
        assert!(collect(altered).await.is_err());
        // The first chunk alone still opens.
        let first = decrypt_range(pieces(&stored, 4096), segment(key), 0, 10);
        assert_eq!(collect(first).await.unwrap(), &data[..10]);
    }

    #[test]
    fn wrapped_keys_open_only_with_their_key_and_mode() {
        let master = SecretKey::generate();
        let data_key = SecretKey::generate();
        let wrapped = master.wrap(SseMode::Managed, &data_key);
        assert_eq!(master.unwrap(SseMode::Managed, &wrapped), Some(data_key));
        assert_eq!(master.unwrap(SseMode::Customer, &wrapped), None);
        assert_eq!(
            SecretKey::generate().unwrap(SseMode::Managed, &wrapped),
            None
        );
    }

    #[test]
    fn customer_keys_are_checked_against_their_md5() {
        let engine = base64::engine::general_purpose::STANDARD;
        let key = [7u8; 32];
        let md5 = engine.encode(Md5::digest(key));
        assert!(SecretKey::from_customer(&engine.encode(key), &md5).is_ok());
        assert!(SecretKey::from_customer(&engine.encode([8u8; 32]), &md5).is_err());
        assert!(SecretKey::from_customer(&engine.encode([7u8; 16]), &md5).is_err());
        assert!(SecretKey::from_customer("not base64!", &md5).is_err());
    }
}
