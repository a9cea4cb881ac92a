//! # volume: block volumes on the cluster, laid out as RBD format 2 images
//!
//! Owns block volumes over any backend of the [`rados`] traits (the embedded cluster, a real
//! Ceph through `ceph-backend`, the in-memory model): the catalogue of one pool ([`Volumes`]:
//! create, list, info, resize, remove, open) and an open volume ([`Volume`]), which is a
//! [`device::Device`] of 512-byte blocks that the NBD server exports.
//!
//! ## Layout: RBD format 2 through plain RADOS operations
//! The objects are those `rbd create --image-feature layering` makes (Ceph 16.2), written
//! with plain RADOS operations, not cls methods, so `rbd ls/info/export/bench` open strata's
//! volumes on a Ceph cluster and strata opens volumes `rbd` made (encodings in [`format`]):
//! - `rbd_id.<name>`: the image id as a string (u32 length, bytes); ids are 12 hex digits
//!   from the injected random source;
//! - `rbd_header.<id>`: no data; omap `size` (u64 LE), `order` (u8, default 22: 4 MiB
//!   objects), `features` (u64, 1 = layering), `object_prefix` (string `rbd_data.<id>`),
//!   `snap_seq` (u64 0), `create_timestamp`/`access_timestamp`/`modify_timestamp` (u32 s,
//!   u32 ns); strata's lease in the `strata.lease` xattr ([`lease`]);
//! - `rbd_directory`: omap `name_<name>` -> id and `id_<id>` -> name (strings);
//! - data: `rbd_data.<id>.%016x`, object number = offset >> order; sparse: a missing object
//!   reads as zeros, and so does the part of an object past its end.
//! - data in another pool (a catalogue made with [`Volumes::with_data_pool`], as `rbd create
//!   --data-pool`; e.g. an erasure-coded pool, which refuses the omap the header and the
//!   directory need): the header also has the `data-pool` feature (128) and `data_pool_id`
//!   (i64), and the data objects are `rbd_data.<header pool id>.<id>.%016x` in that pool
//!   (the naming librbd uses, as far as known here: not checked against an rbd-made image).
//!
//! An image with a feature other than layering and data-pool (striping, exclusive-lock,
//! object-map, fast-diff, journaling...), with snapshots or with a parent is refused, naming
//! what it uses, and so is one whose data pool is not the catalogue's; a header with a
//! missing or short key is refused naming the key.
//!
//! ## Create and remove order (crash safety)
//! Create writes (1) the header under a fresh random id (exclusive), (2) `rbd_id.<name>`
//! (exclusive: the name's reservation), (3) both directory entries (guarded: neither may
//! exist). A crash after (1) leaves an unnamed header nobody reads; after (2) a name `rbd ls`
//! does not list (it reads the directory). A later create of that name finds the leftover
//! and removes it when its header is missing or older than [`STALE_CREATE_S`] (else it says
//! the volume is being created); `remove` removes it at once. Remove goes the other way:
//! lease, directory entries (`rbd ls` stops listing it), data objects, header, `rbd_id`.
//!
//! ## I/O
//! Reads and writes are split per object and issued concurrently, at most `in_flight_max`
//! at once. A write is acknowledged once RADOS acknowledged every object write, which it
//! does once every replica committed durably: so a volume's `flush` has nothing to wait for
//! and returns at once. Discard removes the objects it covers whole and zeroes (`Op::Zero`,
//! which never creates an object) the partial ranges. [`device::Device::allocation`] reports
//! missing objects (and the part of an object past its end) as holes.
//!
//! ## One writer at a time
//! A writer holds a lease ([`lease`]) on the header, renewed in the background every third
//! of its duration and before any write that finds it expired; a second writer is refused,
//! naming the holder, until the lease expires. Header updates (resize) are guarded by the
//! lease and the old size. **librbd does not honour this lease** (it uses `lock.rbd_lock`
//! through cls_lock): do not write a volume with rbd and strata at once. The lease does not
//! fence data writes at the OSDs: a writer stalled past its lease's expiry may still land a
//! write it had sent.

mod catalogue;
mod error;
pub mod format;
mod io;
pub mod lease;
mod volume;

use std::sync::Arc;

pub use catalogue::{OpenMode, VolumeInfo, Volumes};
pub use error::{Result, VolumeError};
pub use volume::Volume;

/// The block size a volume advertises (bytes): sizes and I/O are multiples of it.
pub const BLOCK_SIZE_BYTES: u64 = 512;
/// The default object order (4 MiB objects), as rbd's.
pub const ORDER_DEFAULT: u8 = 22;
/// The smallest object order (4 KiB objects), as rbd's.
pub const ORDER_MIN: u8 = 12;
/// The largest object order (32 MiB objects), as rbd's.
pub const ORDER_MAX: u8 = 25;
/// The largest volume: 1 PiB (object numbers stay far inside `%016x` at every order, and the
/// largest offset fits an NBD request's u64 comfortably).
pub const VOLUME_SIZE_BYTES_MAX: u64 = 1 << 50;
/// The longest volume name in bytes: rbd's `RBD_MAX_IMAGE_NAME_SIZE` (96) less its NUL.
pub const NAME_BYTES_MAX: usize = 95;
/// How old a half-created volume's header must be before a create of the same name removes
/// it as the leftover of a crash (younger: someone may be creating it right now).
pub const STALE_CREATE_S: u64 = 60;

/// Clock in ns since the Unix epoch, injected so tests control lease expiry and timestamps.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock as a [`Clock`].
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    })
}

/// How a catalogue opens and serves its volumes.
#[derive(Clone, Debug)]
pub struct VolumesConfig {
    /// The writer id recorded in leases. A catalogue with the holder of a lease takes it
    /// over at once (a restarted server reopening its volumes after a crash), so give a
    /// process an id that is its own across restarts (`strata serve` uses its host and data
    /// directory) and no other's; within one catalogue a volume has at most one writer.
    /// Default: `strata-<pid>` followed by 8 hex digits from the random source.
    pub holder: Option<String>,
    /// How long a lease lasts without renewal, in ms. Default 30 000.
    pub lease_duration_ms: u64,
    /// Object requests one volume call keeps in flight at most. Default 16.
    pub in_flight_max: usize,
}

impl Default for VolumesConfig {
    fn default() -> Self {
        Self {
            holder: None,
            lease_duration_ms: 30_000,
            in_flight_max: 16,
        }
    }
}

/// Checks a volume name: 1..=[`NAME_BYTES_MAX`] bytes, no `/` (rbd reads `pool/name`), no
/// `@` (rbd reads `name@snapshot`), no NUL or other control characters.
pub fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > NAME_BYTES_MAX {
        Some(format!("{} bytes, at most {NAME_BYTES_MAX}", name.len()))
    } else if name.contains('/') || name.contains('@') {
        Some("it contains '/' or '@'".to_string())
    } else if name.chars().any(char::is_control) {
        Some("it contains NUL or a control character".to_string())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(VolumeError::InvalidName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a volume size: above 0, a multiple of [`BLOCK_SIZE_BYTES`], at most
/// [`VOLUME_SIZE_BYTES_MAX`].
pub fn validate_size(size_bytes: u64) -> Result<()> {
    let reason = if size_bytes == 0 {
        Some("it must be above 0".to_string())
    } else if !size_bytes.is_multiple_of(BLOCK_SIZE_BYTES) {
        Some(format!("it must be a multiple of {BLOCK_SIZE_BYTES}"))
    } else if size_bytes > VOLUME_SIZE_BYTES_MAX {
        Some(format!(
            "it must be at most {VOLUME_SIZE_BYTES_MAX} (1 PiB)"
        ))
    } else {
        None
    };
    match reason {
        Some(reason) => Err(VolumeError::InvalidSize { size_bytes, reason }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes_are_checked() {
        assert!(validate_name("vm-disk.1").is_ok());
        assert!(validate_name(&"x".repeat(NAME_BYTES_MAX)).is_ok());
        for bad in ["", "a/b", "a@s", "a\0b", &"x".repeat(NAME_BYTES_MAX + 1)] {
            assert!(
                matches!(validate_name(bad), Err(VolumeError::InvalidName { .. })),
                "{bad:?}"
            );
        }
        assert!(validate_size(512).is_ok());
        assert!(validate_size(VOLUME_SIZE_BYTES_MAX).is_ok());
        for bad in [0, 511, 513, VOLUME_SIZE_BYTES_MAX + 512] {
            assert!(
                matches!(validate_size(bad), Err(VolumeError::InvalidSize { .. })),
                "{bad}"
            );
        }
    }
}
