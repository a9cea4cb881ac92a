//! One writer at a time: a lease in the `strata.lease` xattr of the volume's header.
//!
//! The value is `holder=<id>;expires_ns=<n>` (ns since the Unix epoch of the injected
//! clock). It is taken, renewed and released with guarded writes: a `CompareXattr` that the
//! xattr still holds the value read (a missing xattr compares as empty) before the
//! `SetXattr`/`RemoveXattr`, so two writers racing for an expired lease cannot both win.
//! librbd does not look at this xattr (its exclusive lock is `lock.rbd_lock`, taken through
//! cls_lock): a librbd client writing a volume strata has open is not stopped.

use rados::{Comparison, IoCtx, RadosError, WriteOp};

use crate::error::{Result, VolumeError};

/// The xattr of the header holding the lease.
pub const LEASE_XATTR: &str = "strata.lease";

/// A lease as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Who holds it.
    pub holder: String,
    /// When it expires (ns since the epoch, injected clock).
    pub expires_ns: u64,
}

impl LeaseRecord {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        format!("holder={};expires_ns={}", self.holder, self.expires_ns).into_bytes()
    }

    /// Parses the stored form; `None` for an empty value (no lease).
    pub fn decode(object: &str, value: &[u8]) -> Result<Option<LeaseRecord>> {
        if value.is_empty() {
            return Ok(None);
        }
        let malformed = |reason: &str| VolumeError::Malformed {
            object: object.to_string(),
            key: format!("xattr {LEASE_XATTR}"),
            reason: reason.to_string(),
        };
        let text = std::str::from_utf8(value).map_err(|_| malformed("not UTF-8"))?;
        let rest = text
            .strip_prefix("holder=")
            .ok_or_else(|| malformed("no holder="))?;
        let (holder, expires) = rest
            .rsplit_once(";expires_ns=")
            .ok_or_else(|| malformed("no ;expires_ns="))?;
        let expires_ns = expires
            .parse()
            .map_err(|_| malformed("expires_ns is not a number"))?;
        Ok(Some(LeaseRecord {
            holder: holder.to_string(),
            expires_ns,
        }))
    }
}

/// Reads the header's lease value as stored (empty when there is none).
pub async fn read_raw(io_ctx: &dyn IoCtx, volume: &str, header: &str) -> Result<Vec<u8>> {
    match io_ctx.get_xattr(header, LEASE_XATTR).await {
        Ok(value) => Ok(value),
        Err(RadosError::NotFound(_)) => {
            // A missing xattr or a missing header: tell them apart.
            match io_ctx.stat(header).await {
                Ok(_) => Ok(Vec::new()),
                Err(RadosError::NotFound(_)) => Err(VolumeError::NotFound {
                    name: volume.to_string(),
                }),
                Err(error) => Err(VolumeError::rados(format!("stat {header}"), error)),
            }
        }
        Err(error) => Err(VolumeError::rados(format!("read lease of {header}"), error)),
    }
}

/// Takes the lease of `header` for `holder` until `now_ns + duration_ns`, unless another
/// holder's lease is still valid at `now_ns`. Returns the value written, which the holder
/// passes to [`renew`] and [`release`].
pub async fn acquire(
    io_ctx: &dyn IoCtx,
    volume: &str,
    header: &str,
    holder: &str,
    now_ns: u64,
    duration_ns: u64,
) -> Result<Vec<u8>> {
    let current = read_raw(io_ctx, volume, header).await?;
    if let Some(record) = LeaseRecord::decode(header, &current)? {
        if record.holder != holder && record.expires_ns > now_ns {
            return Err(VolumeError::Leased {
                name: volume.to_string(),
                holder: record.holder,
                expires_ns: record.expires_ns,
            });
        }
    }
    swap(
        io_ctx,
        volume,
        header,
        &current,
        holder,
        now_ns + duration_ns,
    )
    .await
}

/// Extends a lease this holder has (stored as `current`) to `now_ns + duration_ns`.
pub async fn renew(
    io_ctx: &dyn IoCtx,
    volume: &str,
    header: &str,
    current: &[u8],
    holder: &str,
    now_ns: u64,
    duration_ns: u64,
) -> Result<Vec<u8>> {
    swap(
        io_ctx,
        volume,
        header,
        current,
        holder,
        now_ns + duration_ns,
    )
    .await
}

async fn swap(
    io_ctx: &dyn IoCtx,
    volume: &str,
    header: &str,
    current: &[u8],
    holder: &str,
    expires_ns: u64,
) -> Result<Vec<u8>> {
    let next = LeaseRecord {
        holder: holder.to_string(),
        expires_ns,
    }
    .encode();
    let op = WriteOp::new()
        .compare_xattr(LEASE_XATTR, Comparison::Equal, current.to_vec())
        .set_xattr(LEASE_XATTR, next.clone());
    match io_ctx.operate(header, op).await {
        Ok(()) => Ok(next),
        Err(RadosError::CompareFailed(_)) => Err(VolumeError::Conflict {
            name: volume.to_string(),
            reason: "the lease changed while it was being taken or renewed".into(),
        }),
        Err(RadosError::NotFound(_)) => Err(VolumeError::NotFound {
            name: volume.to_string(),
        }),
        Err(error) => Err(VolumeError::rados(
            format!("write lease of {header}"),
            error,
        )),
    }
}

/// Drops a lease this holder has (stored as `current`); a lease someone else took meanwhile
/// (or a removed header) is left alone.
pub async fn release(io_ctx: &dyn IoCtx, header: &str, current: &[u8]) -> Result<()> {
    let op = WriteOp::new()
        .compare_xattr(LEASE_XATTR, Comparison::Equal, current.to_vec())
        .remove_xattr(LEASE_XATTR);
    match io_ctx.operate(header, op).await {
        Ok(()) | Err(RadosError::CompareFailed(_)) | Err(RadosError::NotFound(_)) => Ok(()),
        Err(error) => Err(VolumeError::rados(
            format!("release lease of {header}"),
            error,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_named() {
        let record = LeaseRecord {
            holder: "host-1.2".into(),
            expires_ns: 42,
        };
        assert_eq!(LeaseRecord::decode("h", &record.encode()), Ok(Some(record)));
        assert_eq!(LeaseRecord::decode("h", b""), Ok(None));
        let error = LeaseRecord::decode("h", b"junk").expect_err("malformed");
        assert!(error.to_string().contains(LEASE_XATTR), "{error}");
    }
}
