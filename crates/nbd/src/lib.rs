//! # nbd: block devices over the Network Block Device protocol
//!
//! Owns the NBD server that exports any [`device::Device`] to real clients (qemu, libnbd's
//! nbdinfo/nbdcopy, fio's nbd engine, the kernel's nbd-client) over a unix socket or TCP, and a
//! small client for tests.
//!
//! - [`proto`]: wire constants and records.
//! - [`ExportSource`]: where a server finds its exports: a fixed list ([`StaticExports`]) or a
//!   catalogue that changes while it runs (a cluster's volumes).
//! - [`NbdServer`]: fixed newstyle handshake (EXPORT_NAME, INFO, GO, LIST, ABORT; STARTTLS,
//!   STRUCTURED_REPLY and meta contexts refused), then READ, WRITE, FLUSH, TRIM,
//!   WRITE_ZEROES, DISC with FUA, simple replies, pipelined requests.
//! - [`NbdClient`]: one request at a time, for tests and tools.
//! - [`errno_of`]: the one place a [`device::DeviceError`] becomes an NBD errno.
//!
//! ## Invariants
//! - Offsets and lengths must be multiples of the device's block size, which the server
//!   advertises as the minimum block size; other requests fail with EINVAL (no
//!   read-modify-write on a client's behalf: two writes to different blocks never interfere).
//! - Every request gets exactly one reply, even when the client disconnects: the connection
//!   closes only after the requests in flight are answered.
//! - At most `in_flight_max` requests per connection run at once; the reader waits for a slot.
//! - A WRITE with FUA is answered only after a device flush that follows the write succeeded.
//! - A read-only export answers every modifying command with EPERM and touches nothing.

mod client;
mod error;
mod exports;
pub mod proto;
mod requests;
mod server;

pub use client::{ExportInfo, NbdClient};
pub use error::{errno_of, Direction, NbdError};
pub use exports::{Export, ExportSource, StaticExports};
pub use server::{ExportConfig, NbdServer};
