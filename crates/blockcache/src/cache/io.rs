//! Requests through the cache: stripes, classification, the read and write plans, and the
//! device calls they make.

use super::*;

/// Stripe guards held for a request: one without an allocation, or several. Never read:
/// they are held for their `Drop`, which releases the locks.
#[allow(dead_code)]
pub(super) enum Held<G> {
    One(G),
    Many(Vec<G>),
}

/// One line of a read plan.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReadPart {
    core_line: u64,
    action: ReadAction,
    line: Option<u32>,
}

/// One line of a write plan.
#[derive(Clone, Copy, Debug)]
pub(super) struct WritePart {
    core_line: u64,
    action: WriteAction,
    line: Option<u32>,
    /// The line was allocated for this write (its data is not there yet).
    fresh: bool,
}

/// A contiguous piece of I/O: device offset, offset in the request buffer, length.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    device_bytes: u64,
    buffer_bytes: usize,
    length_bytes: usize,
}

/// Runs device operations concurrently; the first error wins (all are awaited).
pub(super) async fn join_all<F>(futures: Vec<F>) -> Result<(), DeviceError>
where
    F: std::future::Future<Output = Result<(), DeviceError>>,
{
    if futures.len() <= 1 {
        for future in futures {
            future.await?;
        }
        return Ok(());
    }
    let mut slots: Vec<Option<std::pin::Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outcome = Ok(());
    std::future::poll_fn(|context| {
        let mut pending = false;
        for slot in slots.iter_mut() {
            if let Some(future) = slot {
                match future.as_mut().poll(context) {
                    std::task::Poll::Ready(result) => {
                        if let (Err(error), true) = (result, outcome.is_ok()) {
                            outcome = Err(error);
                        }
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outcome
}

pub(super) fn push_segment(segments: &mut Vec<Segment>, next: Segment) {
    if let Some(last) = segments.last_mut() {
        if last.device_bytes + last.length_bytes as u64 == next.device_bytes
            && last.buffer_bytes + last.length_bytes == next.buffer_bytes
        {
            last.length_bytes += next.length_bytes;
            return;
        }
    }
    segments.push(next);
}

impl Inner {
    /// The stripe of core line `core_line`.
    pub(super) fn stripe_of(core_line: u64) -> usize {
        (core_line / STRIPE_LINES % STRIPES) as usize
    }

    /// The stripes of core lines `first..=last`, each once, ascending.
    pub(super) fn stripe_indices(first: u64, last: u64) -> Vec<usize> {
        let (first_run, last_run) = (first / STRIPE_LINES, last / STRIPE_LINES);
        let count = (last_run - first_run + 1).min(STRIPES);
        let mut indices: Vec<usize> = (first_run..first_run + count)
            .map(|run| (run % STRIPES) as usize)
            .collect();
        indices.sort_unstable();
        indices
    }

    /// Read lock on stripe `index`: taken at once when it is free, awaited only when held.
    ///
    /// Why not always `read().await`: tokio charges every acquisition, even an uncontended
    /// one, to the task's cooperative budget (128 per poll), and a 512 KiB request, which took
    /// 128 stripes when a stripe was one 4 KiB line, spent it all and yielded halfway. The NBD server runs a
    /// connection's requests as futures of one task, so the requests decoded after it took
    /// their locks first and reached the core first: a sequential pass-through stream
    /// arrived at an HDD core out of order and paid seeks and rotations the HDD alone never
    /// paid (tests/core_order.rs). `try_read` costs no budget and keeps arrival order.
    pub(super) async fn read_stripe(&self, index: usize) -> tokio::sync::RwLockReadGuard<'_, ()> {
        match self.stripes[index].try_read() {
            Ok(guard) => guard,
            Err(_) => self.stripes[index].read().await,
        }
    }

    /// Write lock on stripe `index`: at once when free, else awaited (see [`Self::read_stripe`]).
    pub(super) async fn write_stripe(&self, index: usize) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        match self.stripes[index].try_write() {
            Ok(guard) => guard,
            Err(_) => self.stripes[index].write().await,
        }
    }

    /// Read locks on the stripes of core lines `first..=last` (ascending order: no deadlock).
    pub(super) async fn read_stripes(
        &self,
        first: u64,
        last: u64,
    ) -> Held<tokio::sync::RwLockReadGuard<'_, ()>> {
        if Self::stripe_of(first) == Self::stripe_of(last) && last - first < STRIPE_LINES {
            // The common case (a request inside one stripe) allocates nothing.
            return Held::One(self.read_stripe(Self::stripe_of(first)).await);
        }
        let mut guards = Vec::new();
        for index in Self::stripe_indices(first, last) {
            guards.push(self.read_stripe(index).await);
        }
        Held::Many(guards)
    }

    /// Write locks on the stripes of core lines `first..=last` (ascending order).
    pub(super) async fn write_stripes(
        &self,
        first: u64,
        last: u64,
    ) -> Held<tokio::sync::RwLockWriteGuard<'_, ()>> {
        if Self::stripe_of(first) == Self::stripe_of(last) && last - first < STRIPE_LINES {
            return Held::One(self.write_stripe(Self::stripe_of(first)).await);
        }
        let mut guards = Vec::new();
        for index in Self::stripe_indices(first, last) {
            guards.push(self.write_stripe(index).await);
        }
        Held::Many(guards)
    }

    /// Whether the request bypasses the cache, and its class; records the request.
    pub(super) fn classify(
        &self,
        state: &mut State,
        offset: u64,
        length: u64,
        write: bool,
    ) -> (bool, usize) {
        state.last_io_ms = self.now_ms();
        let class = state.classes.classify(length);
        let not_cached = state
            .classes
            .classes()
            .get(class)
            .is_none_or(|c| c.allocation <= 0.0);
        let cutoff = state.config.seq_cutoff;
        let full = state.free_lines() == 0;
        let verdict = state.cutoff.check(&cutoff, offset, length, write, full);
        (verdict.cut_off || not_cached, class)
    }

    pub(super) fn count(&self, write: bool, bypass: bool, hits: usize, lines: usize) {
        let c = &self.counters;
        let counter = match (write, bypass) {
            (false, true) => &c.read_pass_through,
            (true, true) => &c.write_pass_through,
            (false, false) if hits == lines => &c.read_hits,
            (false, false) if hits == 0 => &c.read_full_misses,
            (false, false) => &c.read_partial_misses,
            (true, false) if hits == lines => &c.write_hits,
            (true, false) if hits == 0 => &c.write_full_misses,
            (true, false) => &c.write_partial_misses,
        };
        add(counter, 1);
    }

    pub(super) async fn read(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let length = buffer.len() as u64;
        if length == 0 {
            return Ok(());
        }
        let line_bytes = self.layout.line_size_bytes;
        let (first, last) = (offset / line_bytes, (offset + length - 1) / line_bytes);
        let _guards = self.read_stripes(first, last).await;
        let plan = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let (bypass, class) = self.classify(&mut state, offset, length, false);
            let mode = state.config.mode;
            let promotion = state.config.promotion;
            let occupancy = state.occupancy_percent();
            let mut plan = Vec::with_capacity((last - first + 1) as usize);
            let mut hits = 0;
            for core_line in first..=last {
                let (line_state, line) = state.lookup(core_line);
                hits += usize::from(line_state != LineState::Miss);
                let promote = line_state == LineState::Miss
                    && !bypass
                    && core_line < self.core_lines
                    && !state.is_mapped(core_line)
                    && state.promotion.promote(&promotion, core_line, occupancy);
                let mut part = ReadPart {
                    core_line,
                    action: read_action(mode, line_state, bypass, promote),
                    line,
                };
                match (part.action, line) {
                    (ReadAction::Cache, Some(line)) => {
                        state.pin(line);
                        state.touch_clean(line);
                    }
                    (ReadAction::CoreAndPromote, _) => match state.allocate(core_line, class) {
                        Some(line) => part.line = Some(line),
                        None => part.action = ReadAction::Core,
                    },
                    _ => part.line = None,
                }
                plan.push(part);
            }
            self.count(false, bypass || mode == CacheMode::Pt, hits, plan.len());
            plan
        };
        let result = self.read_planned(offset, buffer, &plan).await;
        let mut state = self.lock();
        for part in &plan {
            let Some(line) = part.line else { continue };
            state.unpin(line);
            state.free_if_invalid(line);
            if part.action == ReadAction::CoreAndPromote {
                if result.is_ok() {
                    state.mark_clean_valid(line);
                } else {
                    state.unmap(line);
                }
            }
        }
        result
    }

    pub(super) async fn read_planned(
        &self,
        offset: u64,
        buffer: &mut [u8],
        plan: &[ReadPart],
    ) -> Result<(), DeviceError> {
        let line_bytes = self.layout.line_size_bytes;
        let length = buffer.len() as u64;
        let end = offset + length;
        if plan.iter().any(|p| p.action != ReadAction::Cache) {
            let promoting = plan.iter().any(|p| p.action == ReadAction::CoreAndPromote);
            let (span_start, span_end) = match (plan.first(), plan.last(), promoting) {
                (Some(a), Some(b), true) => (
                    a.core_line * line_bytes,
                    ((b.core_line + 1) * line_bytes).min(self.core.size_bytes()),
                ),
                _ => (offset, end),
            };
            let mut owned = Vec::new();
            let span: &[u8] = if span_start == offset && span_end == end {
                self.core_read(offset, buffer).await?;
                buffer
            } else {
                owned.resize((span_end - span_start) as usize, 0u8);
                self.core_read(span_start, &mut owned).await?;
                let skip = (offset - span_start) as usize;
                buffer.copy_from_slice(&owned[skip..skip + buffer.len()]);
                &owned
            };
            let mut fills = Vec::new();
            for part in plan
                .iter()
                .filter(|p| p.action == ReadAction::CoreAndPromote)
            {
                let Some(line) = part.line else { continue };
                let at = (part.core_line * line_bytes - span_start) as usize;
                push_segment(
                    &mut fills,
                    Segment {
                        device_bytes: self.layout.line_offset(line),
                        buffer_bytes: at,
                        length_bytes: line_bytes as usize,
                    },
                );
            }
            let writes = fills.iter().map(|fill| {
                let data = &span[fill.buffer_bytes..fill.buffer_bytes + fill.length_bytes];
                self.cache_write(fill.device_bytes, data)
            });
            join_all(writes.collect()).await?;
        }
        if let [ReadPart {
            core_line,
            action: ReadAction::Cache,
            line: Some(line),
        }] = plan
        {
            // A hit inside one line (the common case): one cache read, no bookkeeping vectors.
            let line_start = core_line * line_bytes;
            let device_bytes = self.layout.line_offset(*line) + (offset - line_start);
            return self.cache_read(device_bytes, buffer).await;
        }
        let mut segments = Vec::new();
        for part in plan.iter().filter(|p| p.action == ReadAction::Cache) {
            let Some(line) = part.line else { continue };
            let line_start = part.core_line * line_bytes;
            let start = offset.max(line_start);
            let stop = end.min(line_start + line_bytes);
            push_segment(
                &mut segments,
                Segment {
                    device_bytes: self.layout.line_offset(line) + (start - line_start),
                    buffer_bytes: (start - offset) as usize,
                    length_bytes: (stop - start) as usize,
                },
            );
        }
        // Segments come in buffer order and never overlap: carve the buffer into them.
        let mut reads = Vec::with_capacity(segments.len());
        let mut rest: &mut [u8] = buffer;
        let mut consumed = 0;
        for segment in &segments {
            let (_, tail) = rest.split_at_mut(segment.buffer_bytes - consumed);
            let (target, tail) = tail.split_at_mut(segment.length_bytes);
            reads.push(self.cache_read(segment.device_bytes, target));
            rest = tail;
            consumed = segment.buffer_bytes + segment.length_bytes;
        }
        join_all(reads).await
    }

    pub(super) async fn write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let length = data.len() as u64;
        if length == 0 {
            return Ok(());
        }
        let line_bytes = self.layout.line_size_bytes;
        let (first, last) = (offset / line_bytes, (offset + length - 1) / line_bytes);
        let _guards = self.write_stripes(first, last).await;
        let now_ms = self.now_ms();
        let plan = {
            let mut state = self.lock();
            let (bypass, class) = self.classify(&mut state, offset, length, true);
            let mode = state.config.mode;
            let promotion = state.config.promotion;
            let occupancy = state.occupancy_percent();
            let mut plan = Vec::with_capacity((last - first + 1) as usize);
            let mut hits = 0;
            for core_line in first..=last {
                let (line_state, line) = state.lookup(core_line);
                hits += usize::from(line_state != LineState::Miss);
                let covered = offset <= core_line * line_bytes
                    && (core_line + 1) * line_bytes <= offset + length;
                let promote = line_state == LineState::Miss
                    && !bypass
                    && covered
                    && core_line < self.core_lines
                    && !state.is_mapped(core_line)
                    && state.promotion.promote(&promotion, core_line, occupancy);
                let mut part = WritePart {
                    core_line,
                    action: write_action(mode, line_state, bypass, promote),
                    line,
                    fresh: false,
                };
                match (part.action, line) {
                    (WriteAction::Core, _) => part.line = None,
                    (WriteAction::CacheDirty, Some(line)) => {
                        state.pin(line);
                        state.mark_dirty(line, now_ms);
                    }
                    (WriteAction::CacheAndCore | WriteAction::CoreAndInvalidate, Some(line)) => {
                        state.pin(line);
                        if state.lines[line as usize].dirty {
                            // A dirty line stays dirty (and its entry with it).
                            state.mark_dirty(line, now_ms);
                        }
                    }
                    (WriteAction::CacheDirty | WriteAction::CacheAndCore, None) => {
                        match state.allocate(core_line, class) {
                            Some(line) => {
                                part.line = Some(line);
                                part.fresh = true;
                            }
                            None => part.action = WriteAction::Core,
                        }
                    }
                    (WriteAction::CoreAndInvalidate, None) => part.action = WriteAction::Core,
                }
                plan.push(part);
            }
            self.count(true, bypass || mode == CacheMode::Pt, hits, plan.len());
            plan
        };
        let result = self.write_planned(offset, data, &plan).await;
        let mut persist: BTreeMap<u64, u64> = BTreeMap::new();
        {
            let mut state = self.lock();
            for part in &plan {
                let Some(line) = part.line else { continue };
                state.unpin(line);
                let meta = state.lines[line as usize];
                match part.action {
                    WriteAction::CacheDirty if part.fresh => {
                        if result.is_ok() {
                            state.mark_dirty(line, now_ms);
                        } else {
                            state.unmap(line);
                            continue;
                        }
                    }
                    WriteAction::CacheAndCore if part.fresh => {
                        if result.is_ok() {
                            state.mark_clean_valid(line);
                        } else {
                            state.unmap(line);
                        }
                        continue;
                    }
                    WriteAction::CoreAndInvalidate if !meta.dirty => {
                        // Pinned by the cleaner (waiting for its entry to be durable): mark it
                        // invalid now; whoever unpins it last frees it.
                        state.invalidate(line);
                        continue;
                    }
                    WriteAction::CacheAndCore if !meta.dirty => {
                        state.touch_clean(line);
                        continue;
                    }
                    _ => {}
                }
                let meta = state.lines[line as usize];
                if meta.dirty {
                    let block = u64::from(line) / ENTRIES_PER_BLOCK;
                    let need = persist.entry(block).or_insert(0);
                    *need = (*need).max(meta.metadata_gen);
                }
            }
        }
        result?;
        for (block, need) in persist {
            self.persist_metadata(block, need).await?;
        }
        Ok(())
    }

    pub(super) async fn write_planned(
        &self,
        offset: u64,
        data: &[u8],
        plan: &[WritePart],
    ) -> Result<(), DeviceError> {
        let line_bytes = self.layout.line_size_bytes;
        let end = offset + data.len() as u64;
        let to_core = plan.iter().any(|p| {
            matches!(
                p.action,
                WriteAction::Core | WriteAction::CacheAndCore | WriteAction::CoreAndInvalidate
            )
        });
        let mut segments = Vec::new();
        for part in plan {
            let (Some(line), WriteAction::CacheDirty | WriteAction::CacheAndCore) =
                (part.line, part.action)
            else {
                continue;
            };
            let line_start = part.core_line * line_bytes;
            let start = offset.max(line_start);
            let stop = end.min(line_start + line_bytes);
            push_segment(
                &mut segments,
                Segment {
                    device_bytes: self.layout.line_offset(line) + (start - line_start),
                    buffer_bytes: (start - offset) as usize,
                    length_bytes: (stop - start) as usize,
                },
            );
        }
        let core = async {
            if to_core {
                self.core_write(offset, data).await
            } else {
                Ok(())
            }
        };
        let cache = join_all(
            segments
                .iter()
                .map(|segment| {
                    let source =
                        &data[segment.buffer_bytes..segment.buffer_bytes + segment.length_bytes];
                    self.cache_write(segment.device_bytes, source)
                })
                .collect(),
        );
        let (core, cache) = tokio::join!(core, cache);
        core.and(cache)
    }

    pub(super) async fn discard(&self, offset: u64, length: u64) -> Result<(), DeviceError> {
        if length == 0 {
            return Ok(());
        }
        let line_bytes = self.layout.line_size_bytes;
        let (first, last) = (offset / line_bytes, (offset + length - 1) / line_bytes);
        let _guards = self.write_stripes(first, last).await;
        {
            let mut state = self.lock();
            for core_line in first..=last {
                let covered = offset <= core_line * line_bytes
                    && (core_line + 1) * line_bytes <= offset + length;
                if let (LineState::Clean, Some(line), true) = (
                    state.lookup(core_line).0,
                    state.lookup(core_line).1,
                    covered,
                ) {
                    if state.lines[line as usize].pins == 0 {
                        state.unmap(line);
                    }
                }
            }
        }
        // Dirty lines keep their data: discard is a hint, and dropping a dirty entry would
        // need a metadata write before the core discard.
        self.core.discard(offset, length).await
    }

    pub(super) async fn core_read(
        &self,
        offset: u64,
        buffer: &mut [u8],
    ) -> Result<(), DeviceError> {
        let result = self.core.read_at(offset, buffer).await;
        let counters = &self.counters;
        tally(
            result,
            &counters.core_read_bytes,
            &counters.core_errors,
            buffer.len(),
        )
    }

    pub(super) async fn core_write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let result = self.core.write_at(offset, data).await;
        // Set once the write is over (also when it failed: its blocks may have changed), so
        // a flush that starts after it sees the flag.
        self.core_unflushed.store(true, Ordering::SeqCst);
        let counters = &self.counters;
        tally(
            result,
            &counters.core_write_bytes,
            &counters.core_errors,
            data.len(),
        )
    }

    pub(super) async fn cache_read(
        &self,
        offset: u64,
        buffer: &mut [u8],
    ) -> Result<(), DeviceError> {
        let result = self.cache.read_at(offset, buffer).await;
        let counters = &self.counters;
        tally(
            result,
            &counters.cache_read_bytes,
            &counters.cache_errors,
            buffer.len(),
        )
    }

    pub(super) async fn cache_write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let result = self.cache.write_at(offset, data).await;
        let counters = &self.counters;
        tally(
            result,
            &counters.cache_write_bytes,
            &counters.cache_errors,
            data.len(),
        )
    }
}
