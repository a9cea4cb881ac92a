//! # nbd: block devices over the Network Block Device protocol
//!
//! Owns the NBD server that exports any [`device::Device`] to real clients (qemu, libnbd's
//! nbdinfo/nbdcopy, fio's nbd engine, the kernel's nbd-client) over a unix socket or TCP, and a
//! small client for tests.
//!
//! - [`proto`]: wire constants and records.
//! - [`ExportSource`]: where a server finds its exports: a fixed list ([`StaticExports`]) or a
//!   catalogue that changes while it runs (a cluster's volumes).
//! - [`NbdServer`]: fixed newstyle handshake (EXPORT_NAME, INFO, GO, LIST, ABORT,
//!   STRUCTURED_REPLY, LIST/SET_META_CONTEXT for `base:allocation`; STARTTLS and extended
//!   headers refused), then READ, WRITE, FLUSH, TRIM, WRITE_ZEROES, BLOCK_STATUS, DISC with
//!   FUA, pipelined requests. Simple replies, or for a client that asks, structured ones:
//!   READ as data chunks with the device's holes as hole chunks (DF: one data chunk),
//!   BLOCK_STATUS from [`device::Device::allocation`] (REQ_ONE honoured), errors as
//!   ERROR/ERROR_OFFSET chunks.
//! - [`hosting`]: listening on a unix socket and/or TCP from one config, serving until a
//!   shutdown future resolves, removing the socket file on the way out.
//! - [`NbdClient`]: one request at a time, for tests and tools; BLOCK_STATUS when connected
//!   with structured replies.
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
//! - A client that did not ask for structured replies gets simple replies only, as before
//!   they existed; with them, READ and BLOCK_STATUS are answered in structured chunks (the
//!   last flagged DONE) and the other commands in simple replies, as the protocol allows.
//! - WRITE_ZEROES discards instead of writing only where the device promises a discard reads
//!   back as zeros ([`device::Device::discard_zeroes`]) and the client did not set NO_HOLE.
//! - A BLOCK_STATUS answer starts at the request's offset, never runs past its end, and is
//!   bounded (1 GiB asked of the device, 4096 descriptors, one with REQ_ONE).

mod client;
mod error;
mod exports;
mod handshake;
pub mod hosting;
mod options;
pub mod proto;
mod requests;
mod server;
mod transmission;

pub use client::{ExportInfo, NbdClient, StatusExtent};
pub use error::{errno_of, Direction, NbdError};
pub use exports::{Export, ExportSource, StaticExports};
pub use hosting::{Hosting, HostingConfig};
pub use server::{ExportConfig, NbdServer};
