//! [`Volume`]: an open volume: its geometry, its writer's lease and resize. The block I/O
//! (the [`device::Device`] implementation) is in `io.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use device::{DeviceKind, StatsRecorder};
use rados::{Comparison, IoCtx, RadosError, WriteOp};
use tokio::sync::RwLock;

use crate::catalogue::{remove_objects, OpenMode, Resolved, Shared, WriterClaim};
use crate::error::{Result, VolumeError};
use crate::format::{self, keys};
use crate::lease;
use crate::validate_size;

/// Object numbers past which a shrink lists the pool instead of trying every number.
const SHRINK_PROBE_OBJECTS_MAX: u64 = 4096;

/// An open volume: a [`device::Device`] of [`crate::BLOCK_SIZE_BYTES`]-byte blocks.
///
/// Close it with [`Volume::close`] to release its lease at once; dropped, it stops renewing
/// and releases the lease in the background when a runtime is there to do it.
pub struct Volume {
    pub(crate) inner: Arc<Inner>,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

pub(crate) struct Inner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) volume: String,
    pub(crate) device_name: String,
    pub(crate) id: String,
    pub(crate) header_object: String,
    /// The pool of the data objects: the catalogue's, or its data pool (RBD's `data-pool`).
    pub(crate) data: Arc<dyn IoCtx>,
    pub(crate) object_prefix: String,
    pub(crate) order: u8,
    pub(crate) size_bytes: AtomicU64,
    pub(crate) mode: OpenMode,
    pub(crate) holder: String,
    /// This catalogue's claim on the volume's one writer (writers only).
    _claim: Option<WriterClaim>,
    /// The lease as stored (writers only), `None` once lost or released.
    lease: Mutex<Option<Vec<u8>>>,
    lease_expires_ns: AtomicU64,
    lost: Mutex<Option<String>>,
    /// Held while the lease is renewed: renewals by the background task and by writes that
    /// found it expired never race each other (the loser's guard would fail, and look like
    /// a lost lease).
    renewing: tokio::sync::Mutex<()>,
    /// I/O holds it shared; resize holds it exclusively (no write lands past a new end).
    pub(crate) resizing: RwLock<()>,
    pub(crate) recorder: StatsRecorder,
}

impl Volume {
    pub(crate) async fn open(
        shared: Arc<Shared>,
        name: &str,
        resolved: Resolved,
        claim: Option<WriterClaim>,
    ) -> Result<Volume> {
        let mode = match claim {
            Some(_) => OpenMode::ReadWrite,
            None => OpenMode::ReadOnly,
        };
        let holder = shared.holder().to_string();
        let data = shared.data_pool_of(name, &resolved.header).await?;
        let Resolved {
            id,
            header_object,
            header,
        } = resolved;
        let mut lease_value = None;
        let mut expires_ns = 0;
        if mode == OpenMode::ReadWrite {
            let now_ns = shared.now_ns();
            let value = lease::acquire(
                shared.io_ctx.as_ref(),
                name,
                &header_object,
                &holder,
                now_ns,
                shared.lease_duration_ns(),
            )
            .await?;
            expires_ns = now_ns + shared.lease_duration_ns();
            lease_value = Some(value);
        }
        let device_name = format!("{}/{name}", shared.io_ctx.pool().name);
        let inner = Arc::new(Inner {
            recorder: StatsRecorder::new(device_name.clone(), DeviceKind::Other("volume")),
            device_name,
            shared,
            volume: name.to_string(),
            id,
            header_object,
            data,
            object_prefix: header.object_prefix,
            order: header.order,
            size_bytes: AtomicU64::new(header.size_bytes),
            mode,
            holder,
            _claim: claim,
            lease: Mutex::new(lease_value),
            lease_expires_ns: AtomicU64::new(expires_ns),
            lost: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
            resizing: RwLock::new(()),
        });
        let renewer = (mode == OpenMode::ReadWrite).then(|| {
            let inner = Arc::downgrade(&inner);
            let period = std::time::Duration::from_millis(
                (inner
                    .upgrade()
                    .map_or(30_000, |inner| inner.shared.config.lease_duration_ms)
                    / 3)
                .max(1),
            );
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(period).await;
                    let Some(inner) = inner.upgrade() else { return };
                    if inner.renew().await.is_err() {
                        return;
                    }
                }
            })
        });
        Ok(Volume { inner, renewer })
    }

    /// The volume's name (without its pool).
    pub fn volume_name(&self) -> &str {
        &self.inner.volume
    }

    /// Its image id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Bytes per data object.
    pub fn object_size_bytes(&self) -> u64 {
        1 << self.inner.order
    }

    /// How it was opened.
    pub fn mode(&self) -> OpenMode {
        self.inner.mode
    }

    /// The lease holder id this handle writes as.
    pub fn holder(&self) -> &str {
        &self.inner.holder
    }

    /// Renews the lease now (the background task does it every third of its duration).
    pub async fn renew_lease(&self) -> Result<()> {
        self.inner.renew().await
    }

    /// Sets the size (see [`crate::Volumes::resize`]); waits for the I/O in flight and holds
    /// new I/O until it is done.
    pub async fn resize(&self, size_bytes: u64) -> Result<()> {
        validate_size(size_bytes)?;
        self.inner.check_writable().await?;
        let _exclusive = self.inner.resizing.write().await;
        let inner = &self.inner;
        let io_ctx = inner.shared.io_ctx.as_ref();
        let data = inner.data.as_ref();
        let old_bytes = inner.size_bytes.load(Ordering::Acquire);
        if size_bytes < old_bytes {
            let object_bytes = 1u64 << inner.order;
            let first_gone = size_bytes.div_ceil(object_bytes);
            let old_count = old_bytes.div_ceil(object_bytes);
            let objects: Vec<String> = if old_count - first_gone > SHRINK_PROBE_OBJECTS_MAX {
                let prefix = format!("{}.", inner.object_prefix);
                data.list_all()
                    .await
                    .map_err(|error| VolumeError::rados("list the pool's objects", error))?
                    .into_iter()
                    .filter(|object| {
                        object
                            .strip_prefix(&prefix)
                            .and_then(|number| u64::from_str_radix(number, 16).ok())
                            .is_some_and(|number| number >= first_gone)
                    })
                    .collect()
            } else {
                (first_gone..old_count)
                    .map(|number| format::data_object(&inner.object_prefix, number))
                    .collect()
            };
            remove_objects(data, objects, inner.shared.config.in_flight_max).await?;
            let tail_bytes = size_bytes % object_bytes;
            if tail_bytes != 0 {
                let last = format::data_object(&inner.object_prefix, size_bytes / object_bytes);
                data.truncate(&last, tail_bytes)
                    .await
                    .map_err(|error| VolumeError::rados(format!("truncate {last}"), error))?;
            }
        }
        let lease_value = inner.lease_value()?;
        let op = WriteOp::new()
            .compare_xattr(lease::LEASE_XATTR, Comparison::Equal, lease_value)
            .compare_omap(keys::SIZE, Some(old_bytes.to_le_bytes().to_vec()))
            .omap_set(vec![
                (keys::SIZE.into(), size_bytes.to_le_bytes().to_vec()),
                (
                    keys::MODIFY_TIMESTAMP.into(),
                    format::encode_time(inner.shared.now_ns()),
                ),
            ]);
        match io_ctx.operate(&inner.header_object, op).await {
            Ok(()) => {
                inner.size_bytes.store(size_bytes, Ordering::Release);
                Ok(())
            }
            Err(RadosError::CompareFailed(_)) => Err(VolumeError::Conflict {
                name: inner.volume.clone(),
                reason: format!(
                    "the header's size is no longer {old_bytes} or the lease is no longer this writer's"
                ),
            }),
            Err(error) => Err(VolumeError::rados(
                format!("update {}", inner.header_object),
                error,
            )),
        }
    }

    /// Stops renewing and releases the lease.
    pub async fn close(mut self) -> Result<()> {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        self.inner.release().await
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let inner = self.inner.clone();
                runtime.spawn(async move {
                    let _ = inner.release().await;
                });
            }
        }
    }
}

impl Inner {
    fn lease_value(&self) -> Result<Vec<u8>> {
        self.lease
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .ok_or_else(|| self.lost_error())
    }

    fn lost_error(&self) -> VolumeError {
        let reason = self
            .lost
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .unwrap_or_else(|| "released".into());
        VolumeError::LeaseLost {
            name: self.volume.clone(),
            reason,
        }
    }

    /// Refuses writes on a read-only handle or one without a valid lease; renews a lease
    /// found expired first (a stalled background task).
    pub(crate) async fn check_writable(&self) -> Result<()> {
        if self.mode == OpenMode::ReadOnly {
            return Err(VolumeError::ReadOnly {
                name: self.volume.clone(),
            });
        }
        self.lease_value()?;
        if self.shared.now_ns() >= self.lease_expires_ns.load(Ordering::Acquire) {
            let _renewing = self.renewing.lock().await;
            // Another call may have renewed it while this one waited.
            if self.shared.now_ns() >= self.lease_expires_ns.load(Ordering::Acquire) {
                self.renew_locked().await?;
            }
        }
        Ok(())
    }

    async fn renew(&self) -> Result<()> {
        let _renewing = self.renewing.lock().await;
        self.renew_locked().await
    }

    async fn renew_locked(&self) -> Result<()> {
        let current = self.lease_value()?;
        let now_ns = self.shared.now_ns();
        let duration_ns = self.shared.lease_duration_ns();
        match lease::renew(
            self.shared.io_ctx.as_ref(),
            &self.volume,
            &self.header_object,
            &current,
            &self.holder,
            now_ns,
            duration_ns,
        )
        .await
        {
            Ok(next) => {
                let mut lease = self
                    .lease
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if lease.as_deref() == Some(current.as_slice()) {
                    *lease = Some(next);
                    self.lease_expires_ns
                        .fetch_max(now_ns + duration_ns, Ordering::AcqRel);
                }
                Ok(())
            }
            Err(VolumeError::Conflict { .. }) => {
                let reason = "another writer took the lease after it expired".to_string();
                tracing::warn!(volume = %self.device_name, "{reason}");
                *self
                    .lease
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
                *self
                    .lost
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(reason);
                Err(self.lost_error())
            }
            // A transient failure: the lease stays ours until it expires.
            Err(error) => Err(error),
        }
    }

    async fn release(&self) -> Result<()> {
        let value = self
            .lease
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        match value {
            Some(value) => {
                lease::release(self.shared.io_ctx.as_ref(), &self.header_object, &value).await
            }
            None => Ok(()),
        }
    }
}
