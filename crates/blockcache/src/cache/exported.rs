//! The [`Device`] a cached device is: admission of client operations, the request entry points.

use super::*;

/// A client operation in progress (counted in `client_ops`, also when its future is dropped).
pub(super) struct ClientOp<'a>(&'a AtomicU64);

impl Drop for ClientOp<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Inner {
    /// Admits a client operation, unless the cache is stopped.
    pub(super) fn admit(&self) -> Result<ClientOp<'_>, DeviceError> {
        // Counted before the check, so `stop` sees either this operation or its refusal.
        self.client_ops.fetch_add(1, Ordering::SeqCst);
        let op = ClientOp(&self.client_ops);
        if self.closed.load(Ordering::SeqCst) {
            return Err(DeviceError::io(
                "the cache is stopped",
                std::io::Error::from_raw_os_error(108), // ESHUTDOWN
            ));
        }
        Ok(op)
    }
}

#[async_trait]
impl Device for BlockCache {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let inner = &self.inner;
        let _op = inner.admit()?;
        let guard = inner.recorder.begin(OpKind::Read);
        let length = buffer.len() as u64;
        let result = match check_request(
            offset_bytes,
            length,
            inner.core.size_bytes(),
            inner.block_bytes,
        ) {
            Ok(()) => inner.read(offset_bytes, buffer).await,
            Err(error) => Err(error),
        };
        spend_budget().await;
        if result.is_ok() {
            add(&inner.counters.exported_read_bytes, length);
        }
        guard.finish(length, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let inner = &self.inner;
        let _op = inner.admit()?;
        let guard = inner.recorder.begin(OpKind::Write);
        let length = data.len() as u64;
        let result = match check_request(
            offset_bytes,
            length,
            inner.core.size_bytes(),
            inner.block_bytes,
        ) {
            Ok(()) => inner.write(offset_bytes, data).await,
            Err(error) => Err(error),
        };
        spend_budget().await;
        if result.is_ok() {
            add(&inner.counters.exported_write_bytes, length);
        }
        guard.finish(length, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        let _op = self.inner.admit()?;
        let inner = &self.inner;
        let guard = inner.recorder.begin(OpKind::Flush);
        let core = async {
            if !inner.core_unflushed.swap(false, Ordering::SeqCst) {
                return Ok(());
            }
            let result = inner.core.flush().await;
            if result.is_err() {
                // Still owed: the next flush tries again.
                inner.core_unflushed.store(true, Ordering::SeqCst);
            }
            result
        };
        let (cache, core) = tokio::join!(inner.cache.flush(), core);
        guard.finish(0, cache.and(core))
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let inner = &self.inner;
        let _op = inner.admit()?;
        let guard = inner.recorder.begin(OpKind::Discard);
        let result = match check_request(
            offset_bytes,
            length_bytes,
            inner.core.size_bytes(),
            inner.block_bytes,
        ) {
            Ok(()) => inner.discard(offset_bytes, length_bytes).await,
            Err(error) => Err(error),
        };
        guard.finish(length_bytes, result)
    }

    fn size_bytes(&self) -> u64 {
        self.inner.core.size_bytes()
    }

    fn block_size_bytes(&self) -> u64 {
        self.inner.block_bytes
    }

    fn name(&self) -> &str {
        self.inner.recorder.name()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Other("blockcache")
    }

    fn stats(&self) -> DeviceStats {
        self.inner.recorder.snapshot()
    }
}

/// Spends one unit of the task's cooperative budget, yielding when it is spent, once a
/// request is done.
///
/// Why: stripes are taken without touching the budget (see `Inner::read_stripe`), so over
/// devices that answer at once (memory) a request might never yield, and a task looping over
/// requests would hold its worker thread, and the timers it drives, for ever. Spent after the
/// request, not before, so the yield never reorders requests on their way to the devices.
pub(super) async fn spend_budget() {
    tokio::task::coop::consume_budget().await;
}

/// Counts one device call's outcome: its bytes on success, one error otherwise.
pub(super) fn tally(
    result: Result<(), DeviceError>,
    bytes: &AtomicU64,
    errors: &AtomicU64,
    length_bytes: usize,
) -> Result<(), DeviceError> {
    match &result {
        Ok(()) => add(bytes, length_bytes as u64),
        Err(_) => add(errors, 1),
    }
    result
}
