//! Metadata on the cache device: entry blocks (group-committed), load, the superblock.

use super::*;

impl Inner {
    /// Makes sure metadata block `block` on disk is at least generation `need`.
    pub(super) async fn persist_metadata(&self, block: u64, need: u64) -> Result<(), DeviceError> {
        let written = &self.metadata_written[block as usize];
        if written.load(Ordering::Acquire) >= need {
            return Ok(());
        }
        let _turn = self.metadata_locks[block as usize].lock().await;
        if written.load(Ordering::Acquire) >= need {
            return Ok(()); // group commit: someone wrote a newer snapshot meanwhile
        }
        let (generation, bytes) = {
            let state = self.lock();
            let generation = state.metadata_gen[block as usize];
            (
                generation,
                layout::encode_metadata(block, &state.metadata_entries(block)),
            )
        };
        self.cache
            .write_at(self.layout.metadata_offset(block), &bytes)
            .await
            .inspect_err(|_| add(&self.counters.cache_errors, 1))?;
        written.fetch_max(generation, Ordering::AcqRel);
        Ok(())
    }

    /// Writes every metadata block from memory (create, stop) and flushes the cache device.
    pub(super) async fn write_all_metadata(&self) -> Result<(), DeviceError> {
        let blocks = self.layout.metadata_blocks;
        let mut block = 0;
        while block < blocks {
            let count = METADATA_CHUNK_BLOCKS.min(blocks - block);
            let (bytes, generations) = {
                let state = self.lock();
                let mut bytes = Vec::with_capacity((count * BLOCK_BYTES) as usize);
                let mut generations = Vec::new();
                for b in block..block + count {
                    bytes
                        .extend_from_slice(&layout::encode_metadata(b, &state.metadata_entries(b)));
                    generations.push(state.metadata_gen[b as usize]);
                }
                (bytes, generations)
            };
            self.cache
                .write_at(self.layout.metadata_offset(block), &bytes)
                .await?;
            for (offset, generation) in generations.into_iter().enumerate() {
                self.metadata_written[block as usize + offset]
                    .fetch_max(generation, Ordering::AcqRel);
            }
            block += count;
        }
        self.cache.flush().await
    }

    /// Loads entries from disk: all of them after a clean stop, only dirty ones after a crash.
    /// Returns the number of dirty lines recovered.
    pub(super) async fn load_metadata(&self, clean_shutdown: bool) -> Result<u64, CacheError> {
        let blocks = self.layout.metadata_blocks;
        let mut dirty = 0;
        let mut block = 0;
        while block < blocks {
            let count = METADATA_CHUNK_BLOCKS.min(blocks - block);
            let mut bytes = vec![0u8; (count * BLOCK_BYTES) as usize];
            self.cache
                .read_at(self.layout.metadata_offset(block), &mut bytes)
                .await?;
            let mut state = self.lock();
            for (index, chunk) in bytes.chunks_exact(BLOCK_BYTES as usize).enumerate() {
                let b = block + index as u64;
                let Some(entries) = layout::decode_metadata(b, chunk)? else {
                    continue;
                };
                for (slot, entry) in entries.into_iter().enumerate() {
                    let line = b * ENTRIES_PER_BLOCK + slot as u64;
                    if line >= self.layout.lines
                        || entry.flags & FLAG_VALID == 0
                        || entry.core_line == UNMAPPED
                    {
                        continue;
                    }
                    let is_dirty = entry.flags & FLAG_DIRTY != 0;
                    if !clean_shutdown && !is_dirty {
                        continue;
                    }
                    if entry.core_line >= self.core_lines || state.is_mapped(entry.core_line) {
                        return Err(CacheError::Corrupt(format!(
                            "line {line} maps core line {} twice or beyond the core",
                            entry.core_line
                        )));
                    }
                    state.restore(line as u32, entry);
                    dirty += u64::from(is_dirty);
                }
            }
            block += count;
        }
        // The disk may still hold stale clean entries: rewrite everything from memory.
        self.write_all_metadata().await?;
        Ok(dirty)
    }

    pub(super) async fn write_superblock(&self, clean_shutdown: bool) -> Result<(), DeviceError> {
        let superblock = Superblock {
            clean_shutdown,
            mode: self.lock().config.mode,
            layout: self.layout,
            core_size_bytes: self.core.size_bytes(),
            core_labels: self.core_labels.clone(),
        };
        self.cache.flush().await?;
        self.cache.write_at(0, &superblock.encode()).await?;
        self.cache.flush().await
    }
}
