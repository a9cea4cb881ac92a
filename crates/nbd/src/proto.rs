//! Wire constants and fixed-size records of the NBD protocol (fixed newstyle handshake,
//! simple and structured replies, the `base:allocation` meta context), from the NBD protocol
//! document (doc/proto.md in the nbd project).

/// "NBDMAGIC": first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": newstyle negotiation magic (server greeting and every client option).
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of a structured reply chunk.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// The client does not want the 124 zero bytes after NBD_OPT_EXPORT_NAME.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

/// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;

/// Information types in NBD_REP_INFO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flags.
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
pub const TFLAG_READ_ONLY: u16 = 1 << 1;
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
pub const TFLAG_ROTATIONAL: u16 = 1 << 4;
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
pub const TFLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TFLAG_SEND_DF: u16 = 1 << 7;
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;

/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// Don't fragment: a structured READ answers in one data chunk.
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// BLOCK_STATUS answers with one descriptor.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

/// Structured reply chunk flags and types.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) + 2;

/// The one meta context this server knows, and the id it gives it.
pub const CONTEXT_BASE_ALLOCATION: &str = "base:allocation";
pub const CONTEXT_BASE_ALLOCATION_ID: u32 = 1;
/// `base:allocation` status flags: not stored, and reads as zeros.
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

/// Errno values carried in replies (the protocol's own list, Linux numbering).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Size of a request header on the wire.
pub const REQUEST_BYTES: usize = 28;
/// Size of a simple reply header on the wire.
pub const REPLY_BYTES: usize = 16;
/// Size of a structured reply chunk header on the wire.
pub const CHUNK_BYTES: usize = 20;

/// One transmission request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Command flags (`CMD_FLAG_*`).
    pub flags: u16,
    /// Command (`CMD_*`).
    pub command: u16,
    /// The client's cookie, echoed in the reply.
    pub cookie: u64,
    /// First byte.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub length_bytes: u32,
}

impl Request {
    /// Decodes a header; `None` when the magic is wrong.
    pub fn decode(bytes: &[u8; REQUEST_BYTES]) -> Option<Request> {
        let magic = u32::from_be_bytes(take(bytes, 0));
        (magic == REQUEST_MAGIC).then(|| Request {
            flags: u16::from_be_bytes(take(bytes, 4)),
            command: u16::from_be_bytes(take(bytes, 6)),
            cookie: u64::from_be_bytes(take(bytes, 8)),
            offset_bytes: u64::from_be_bytes(take(bytes, 16)),
            length_bytes: u32::from_be_bytes(take(bytes, 24)),
        })
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; REQUEST_BYTES] {
        let mut out = [0u8; REQUEST_BYTES];
        out[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.command.to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..24].copy_from_slice(&self.offset_bytes.to_be_bytes());
        out[24..28].copy_from_slice(&self.length_bytes.to_be_bytes());
        out
    }
}

/// Encodes a simple reply header.
pub fn encode_reply(error: u32, cookie: u64) -> [u8; REPLY_BYTES] {
    let mut out = [0u8; REPLY_BYTES];
    out[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out[4..8].copy_from_slice(&error.to_be_bytes());
    out[8..16].copy_from_slice(&cookie.to_be_bytes());
    out
}

/// Encodes a structured reply chunk header: `payload_bytes` of payload follow it.
pub fn encode_chunk(flags: u16, kind: u16, cookie: u64, payload_bytes: u32) -> [u8; CHUNK_BYTES] {
    let mut out = [0u8; CHUNK_BYTES];
    out[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out[4..6].copy_from_slice(&flags.to_be_bytes());
    out[6..8].copy_from_slice(&kind.to_be_bytes());
    out[8..16].copy_from_slice(&cookie.to_be_bytes());
    out[16..20].copy_from_slice(&payload_bytes.to_be_bytes());
    out
}

/// A structured chunk header: (flags, type, cookie, payload bytes); `None` on a wrong magic.
pub fn decode_chunk(bytes: &[u8; CHUNK_BYTES]) -> Option<(u16, u16, u64, u32)> {
    let magic = u32::from_be_bytes(take(bytes, 0));
    (magic == STRUCTURED_REPLY_MAGIC).then(|| {
        (
            u16::from_be_bytes(take(bytes, 4)),
            u16::from_be_bytes(take(bytes, 6)),
            u64::from_be_bytes(take(bytes, 8)),
            u32::from_be_bytes(take(bytes, 16)),
        )
    })
}

/// Decodes a simple reply header into (error, cookie); `None` when the magic is wrong.
pub fn decode_reply(bytes: &[u8; REPLY_BYTES]) -> Option<(u32, u64)> {
    let magic = u32::from_be_bytes(take(bytes, 0));
    (magic == SIMPLE_REPLY_MAGIC).then(|| {
        (
            u32::from_be_bytes(take(bytes, 4)),
            u64::from_be_bytes(take(bytes, 8)),
        )
    })
}

/// `N` bytes of `bytes` from `at` (the callers' ranges are constant and in bounds).
fn take<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_and_rejects_bad_magic() {
        let request = Request {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            cookie: 0x0102_0304_0506_0708,
            offset_bytes: 1 << 40,
            length_bytes: 4096,
        };
        let mut bytes = request.encode();
        assert_eq!(Request::decode(&bytes), Some(request));
        bytes[0] ^= 1;
        assert_eq!(Request::decode(&bytes), None);
        assert_eq!(decode_reply(&encode_reply(EIO, 9)), Some((EIO, 9)));
        let chunk = encode_chunk(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, 7, 6);
        assert_eq!(
            decode_chunk(&chunk),
            Some((REPLY_FLAG_DONE, REPLY_TYPE_ERROR, 7, 6))
        );
        assert_eq!(decode_reply(&chunk[..16].try_into().unwrap()), None);
    }
}
