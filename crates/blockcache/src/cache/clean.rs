//! The cleaner: rounds of dirty lines copied to the core, and the background loop.

use super::*;

impl Inner {
    /// Flushes up to `lines_max` dirty lines not written for `min_age_ms`, taken in `order`.
    /// Returns how many were flushed.
    pub(super) async fn clean_round(
        &self,
        lines_max: u32,
        min_age_ms: u64,
        order: CleaningOrder,
    ) -> Result<u32, DeviceError> {
        let now_ms = self.now_ms();
        let mut picked: Vec<(u32, u64, u32)> = {
            let mut state = self.lock();
            let lines: Vec<u32> = match order {
                CleaningOrder::OldestWrite => {
                    let candidates = state
                        .lists
                        .iter(DIRTY_LIST)
                        .filter(|&line| state.lines[line as usize].pins == 0)
                        .map(|line| (line, state.lines[line as usize].written_ms));
                    cleaning::pick_stale(candidates, now_ms, min_age_ms, lines_max)
                }
                CleaningOrder::CoreAddress => {
                    let view = &*state;
                    let line_of = |core_line: u64| view.map[&core_line];
                    let core_lines = cleaning::pick_by_address(
                        &view.dirty_core_lines,
                        view.cleaning_cursor,
                        lines_max,
                        |core_line| {
                            let meta = &view.lines[line_of(core_line) as usize];
                            meta.pins > 0 || now_ms.saturating_sub(meta.written_ms) < min_age_ms
                        },
                    );
                    let lines: Vec<u32> = core_lines.iter().map(|&c| line_of(c)).collect();
                    if let Some(&last) = core_lines.last() {
                        state.cleaning_cursor = last + 1;
                    }
                    lines
                }
            };
            lines
                .into_iter()
                .map(|line| {
                    state.pin(line);
                    let meta = state.lines[line as usize];
                    (line, meta.core_line, meta.write_seq)
                })
                .collect()
        };
        if picked.is_empty() {
            return Ok(0);
        }
        picked.sort_by_key(|&(_, core_line, _)| core_line);
        let result = self.clean_lines(&picked).await;
        let mut persist: BTreeMap<u64, u64> = BTreeMap::new();
        let mut cleaned = 0;
        {
            let mut state = self.lock();
            for &(line, core_line, write_seq) in &picked {
                let meta = state.lines[line as usize];
                if result.is_ok()
                    && meta.core_line == core_line
                    && meta.write_seq == write_seq
                    && meta.dirty
                {
                    state.mark_clean_valid(line);
                    let block = u64::from(line) / ENTRIES_PER_BLOCK;
                    let need = persist.entry(block).or_insert(0);
                    *need = (*need).max(state.lines[line as usize].metadata_gen);
                    cleaned += 1;
                }
            }
        }
        // Keep the lines pinned until their clean entries are durable (see the module doc).
        // Blocks have their own locks: write them all at once.
        let persisted = async {
            join_all(
                persist
                    .iter()
                    .map(|(&block, &need)| self.persist_metadata(block, need))
                    .collect(),
            )
            .await?;
            self.cache.flush().await
        }
        .await;
        {
            let mut state = self.lock();
            for &(line, _, _) in &picked {
                state.unpin(line);
                state.free_if_invalid(line);
            }
        }
        result?;
        persisted?;
        add(&self.counters.cleaned_lines, cleaned);
        Ok(cleaned as u32)
    }

    /// Copies `picked` lines (sorted by core line) to the core and flushes it: the cache
    /// reads run at once (each under its stripe's read lock, so never a half-written line),
    /// and runs of neighbouring core lines go to the core as one write each.
    pub(super) async fn clean_lines(&self, picked: &[(u32, u64, u32)]) -> Result<(), DeviceError> {
        let line_bytes = self.layout.line_size_bytes as usize;
        let mut data = vec![0u8; picked.len() * line_bytes];
        let reads = picked
            .iter()
            .zip(data.chunks_exact_mut(line_bytes))
            .map(|(&(line, core_line, _), target)| async move {
                let _guard = self.stripes[Self::stripe_of(core_line)].read().await;
                self.cache_read(self.layout.line_offset(line), target).await
            })
            .collect();
        join_all(reads).await?;
        // Runs of consecutive core lines: (first index in `picked`, line count).
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (index, &(_, core_line, _)) in picked.iter().enumerate() {
            match runs.last_mut() {
                Some((first, count)) if picked[*first].1 + *count as u64 == core_line => {
                    *count += 1
                }
                _ => runs.push((index, 1)),
            }
        }
        // Write to the core with some parallelism so the disk can reorder (elevator / NCQ).
        let mut writes = tokio::task::JoinSet::new();
        let data = Arc::new(data);
        for (first, count) in runs {
            let core = Arc::clone(&self.core);
            let data = Arc::clone(&data);
            let offset_bytes = picked[first].1 * line_bytes as u64;
            writes.spawn(async move {
                let source = &data[first * line_bytes..(first + count) * line_bytes];
                core.write_at(offset_bytes, source)
                    .await
                    .map(|()| source.len() as u64)
            });
        }
        let mut outcome = Ok(());
        while let Some(joined) = writes.join_next().await {
            match joined {
                Ok(Ok(bytes)) => add(&self.counters.core_write_bytes, bytes),
                Ok(Err(error)) => {
                    add(&self.counters.core_errors, 1);
                    outcome = Err(error);
                }
                Err(join) => {
                    outcome = Err(DeviceError::Injected {
                        what: format!("clean task: {join}"),
                    })
                }
            }
        }
        outcome?;
        self.core.flush().await
    }
}

pub(super) async fn cleaner_loop(inner: Arc<Inner>) {
    while !inner.stopping.load(Ordering::SeqCst) {
        let (config, last_io_ms, dirty) = {
            let state = inner.lock();
            (state.config.cleaning, state.last_io_ms, state.dirty_lines())
        };
        let decision = if inner.flushes_running.load(Ordering::SeqCst) > 0 {
            CleaningDecision::Sleep {
                ms: cleaning::wake_up_ms(&config),
            }
        } else {
            cleaning::decide(&config, inner.now_ms(), last_io_ms, dirty)
        };
        let pause_ms = match decision {
            CleaningDecision::Sleep { ms } => ms,
            CleaningDecision::Clean {
                lines,
                min_age_ms,
                order,
            } => match inner.clean_round(lines, min_age_ms, order).await {
                Ok(flushed) => cleaning::pause_after_round_ms(&config, flushed, lines),
                Err(error) => {
                    tracing::warn!(%error, "cleaning failed; retrying later");
                    1_000
                }
            },
        };
        if pause_ms == 0 {
            tokio::task::yield_now().await;
        } else {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(pause_ms)) => {}
                _ = inner.wake.notified() => {}
            }
        }
    }
}
