//! One object of an erasure-coded PG: its shards' records gathered ([`Target::probe`]), the
//! version they agree on decided ([`decide`]), torn writes rolled back or forward and stale
//! shards rebuilt ([`Target::resolve`]), and stripes read from any `k` shards
//! ([`Target::read_rows`]).

use std::collections::BTreeMap;

use osdmap::{OsdMap, PgId, ITEM_NONE};
use rados::{RadosError, Result};
use store::{ObjectId, StoreError, Transaction};

use crate::ec::shard::{ShardMeta, SIZE_XATTR, UNDO_XATTR};
use crate::ec::{Codec, ErasureProfile};
use crate::error::store_to_rados;
use crate::osd::{Osd, VERSION_XATTR};
use crate::util::join_all;
use crate::Inner;

/// What one position of a PG said about an object.
#[derive(Clone, Debug)]
pub enum Probe {
    /// No OSD there, it is down, or it failed to answer: it may hold anything.
    Unavailable,
    /// The OSD there has no shard of the object.
    Absent,
    /// Its shard.
    Present(ShardMeta),
}

/// What the shards of an object say together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No version has `k` shards, nor could have with the unavailable ones: the object does
    /// not exist; `leftovers` are shards of a write or removal that never completed.
    Absent {
        /// Positions holding a shard to remove.
        leftovers: Vec<usize>,
    },
    /// `version` has at least `k` shards (counting those that roll back to it).
    Version {
        /// The version.
        version: u64,
        /// Positions holding it.
        good: Vec<usize>,
        /// Positions holding a newer, torn write that rolls back to it.
        roll_back: Vec<usize>,
        /// Available positions holding anything else (nothing, an older or a torn version):
        /// rebuilt from the good ones.
        stale: Vec<usize>,
    },
    /// The newest version has fewer than `k` shards but the unavailable positions may hold
    /// enough more: nothing can be decided until they return.
    Undecided {
        /// Positions that answered.
        available: usize,
    },
}

/// Decides which version of an object its shards hold (see [`Decision`]). A write is
/// acknowledged only once `k + 1` shards hold it, so an acknowledged version always has `k`
/// among any `m - 1`... fewer answering positions; a torn one is rolled back to the version
/// its shards' undo records name, or forward when `k` shards hold it.
pub fn decide(probes: &[Probe], k: usize) -> Decision {
    let unavailable = probes
        .iter()
        .filter(|probe| matches!(probe, Probe::Unavailable))
        .count();
    let metas: Vec<(usize, &ShardMeta)> = probes
        .iter()
        .enumerate()
        .filter_map(|(position, probe)| match probe {
            Probe::Present(meta) => Some((position, meta)),
            _ => None,
        })
        .collect();
    let mut versions: Vec<u64> = metas.iter().map(|(_, meta)| meta.version).collect();
    versions.sort_unstable_by(|a, b| b.cmp(a));
    versions.dedup();
    for version in versions {
        let good: Vec<usize> = metas
            .iter()
            .filter(|(_, meta)| meta.version == version)
            .map(|(position, _)| *position)
            .collect();
        let roll_back: Vec<usize> = metas
            .iter()
            .filter(|(_, meta)| meta.rolls_back_to(version))
            .map(|(position, _)| *position)
            .collect();
        let holding = good.len() + roll_back.len();
        if holding >= k {
            let stale = probes
                .iter()
                .enumerate()
                .filter(|(position, probe)| {
                    !matches!(probe, Probe::Unavailable)
                        && !good.contains(position)
                        && !roll_back.contains(position)
                })
                .map(|(position, _)| position)
                .collect();
            return Decision::Version {
                version,
                good,
                roll_back,
                stale,
            };
        }
        if holding + unavailable >= k {
            return Decision::Undecided {
                available: probes.len() - unavailable,
            };
        }
    }
    Decision::Absent {
        leftovers: metas.iter().map(|(position, _)| *position).collect(),
    }
}

/// The object as its shards agree on it.
#[derive(Clone, Debug, Default)]
pub struct ObjectState {
    /// Version.
    pub version: u64,
    /// Logical size.
    pub size_bytes: u64,
    /// Modification time.
    pub mtime_ns: u64,
    /// User xattrs.
    pub xattrs: BTreeMap<String, Vec<u8>>,
}

/// One PG of an erasure-coded pool as the current map places it.
pub struct Target<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) pg: PgId,
    /// The OSD at each shard position (`ITEM_NONE` for a hole).
    pub(crate) positions: Vec<i32>,
    pub(crate) codec: Codec,
    pub(crate) profile: ErasureProfile,
}

/// The collection holding shard `position` of `pg`: `<pool>.<seed>s<position>`, as Ceph
/// names an EC PG's shard (`1.2as3`).
pub fn shard_collection(pg: PgId, position: usize) -> String {
    format!("{}.{:x}s{position}", pg.pool, pg.seed)
}

/// The PG and position of shard collection `name` (`<pool>.<seed>s<position>`); `None` for
/// any other name.
pub fn parse_shard_collection(name: &str) -> Option<(PgId, usize)> {
    let (pool, rest) = name.split_once('.')?;
    let (seed, position) = rest.split_once('s')?;
    Some((
        PgId::new(pool.parse().ok()?, u32::from_str_radix(seed, 16).ok()?),
        position.parse().ok()?,
    ))
}

impl<'a> Target<'a> {
    /// The PG of `object` in `map`.
    pub(crate) fn of(
        inner: &'a Inner,
        map: &OsdMap,
        pg: PgId,
        profile: &ErasureProfile,
    ) -> Target<'a> {
        let size = profile.size() as usize;
        let mut positions = map.pg_to_up_acting(pg).up;
        positions.resize(size, ITEM_NONE);
        for osd in &mut positions {
            if *osd == ITEM_NONE || !map.is_up(*osd) || !inner.osds.contains_key(osd) {
                *osd = ITEM_NONE;
            }
        }
        Target {
            inner,
            pg,
            positions,
            codec: Codec::new(profile),
            profile: profile.clone(),
        }
    }

    /// The OSD serving `position`, if one is up there.
    pub(crate) fn osd(&self, position: usize) -> Option<&'a Osd> {
        let id = *self.positions.get(position)?;
        (id != ITEM_NONE)
            .then(|| self.inner.osds.get(&id))
            .flatten()
    }

    /// Positions with an OSD up.
    pub(crate) fn available(&self) -> usize {
        (0..self.positions.len())
            .filter(|&position| self.osd(position).is_some())
            .count()
    }

    fn id(&self, position: usize, object: &str) -> ObjectId {
        ObjectId::new(shard_collection(self.pg, position), object)
    }

    fn error(&self, position: usize, error: &StoreError) -> RadosError {
        store_to_rados(self.positions[position], error)
    }

    /// Bytes of a shard of an object of `size_bytes`.
    pub(crate) fn shard_bytes(&self, size_bytes: u64) -> u64 {
        let width = self.profile.stripe_width_bytes();
        size_bytes.div_ceil(width) * self.profile.stripe_unit_bytes
    }

    /// Every position's record of `object`.
    pub(crate) async fn probe(&self, object: &str) -> Vec<Probe> {
        let futures = (0..self.positions.len())
            .map(|position| async move {
                let Some(osd) = self.osd(position) else {
                    return Probe::Unavailable;
                };
                let collection = shard_collection(self.pg, position);
                let stat = osd.store().stat(&collection, object).await;
                self.inner.note_osd_result(osd.id, &stat);
                let stat = match stat {
                    Ok(stat) => stat,
                    Err(StoreError::NotFound { .. }) => return Probe::Absent,
                    Err(_) => return Probe::Unavailable,
                };
                match osd.store().get_xattrs(&collection, object).await {
                    Ok(xattrs) => Probe::Present(ShardMeta::from_xattrs(
                        xattrs,
                        stat.size_bytes,
                        stat.mtime_ns,
                    )),
                    Err(StoreError::NotFound { .. }) => Probe::Absent,
                    Err(_) => Probe::Unavailable,
                }
            })
            .collect();
        join_all(futures).await
    }

    /// Decides `object`'s version and makes every available shard hold it (rolls torn
    /// writes back, rebuilds stale shards, removes leftovers of a write that never took).
    /// The caller holds the object's lock. Returns the state (`None`: no object) and the
    /// positions that hold it.
    pub(crate) async fn resolve(&self, object: &str) -> Result<(Option<ObjectState>, Vec<usize>)> {
        let probes = self.probe(object).await;
        match decide(&probes, self.codec.k()) {
            Decision::Undecided { available } => Err(RadosError::Degraded {
                pg: format!("{}.{:x}", self.pg.pool, self.pg.seed),
                available: available as u32,
                min_size: self.profile.min_size(),
            }),
            Decision::Absent { leftovers } => {
                let removals = leftovers
                    .iter()
                    .map(|&position| async move {
                        let Some(osd) = self.osd(position) else {
                            return;
                        };
                        let mut transaction = Transaction::new(0);
                        transaction.remove(&self.id(position, object));
                        let result = osd.apply(transaction, 0).await;
                        if let Err(error) = result {
                            tracing::warn!(osd = osd.id, %error, object, "removing a leftover shard");
                        }
                    })
                    .collect();
                join_all(removals).await;
                let good = probes
                    .iter()
                    .enumerate()
                    .filter(|(_, probe)| !matches!(probe, Probe::Unavailable))
                    .map(|(position, _)| position)
                    .collect();
                Ok((None, good))
            }
            Decision::Version {
                version,
                mut good,
                roll_back,
                stale,
            } => {
                let first = good
                    .first()
                    .copied()
                    .and_then(|position| match &probes[position] {
                        Probe::Present(meta) => Some(meta.clone()),
                        _ => None,
                    });
                let state = match first {
                    Some(meta) => ObjectState {
                        version,
                        size_bytes: meta.size_bytes,
                        mtime_ns: meta.mtime_ns,
                        xattrs: meta.xattrs,
                    },
                    None => {
                        // Only shards that roll back hold it: their undo records say what.
                        let Probe::Present(meta) = &probes[roll_back[0]] else {
                            return Err(RadosError::Io("rollback shard vanished".into()));
                        };
                        let undo = meta.undo.clone().unwrap_or_else(unreachable_undo);
                        ObjectState {
                            version,
                            size_bytes: undo.prev_size_bytes,
                            mtime_ns: meta.mtime_ns,
                            xattrs: undo.xattrs,
                        }
                    }
                };
                let rolled = join_all(
                    roll_back
                        .iter()
                        .map(|&position| self.roll_back(object, position, &probes[position]))
                        .collect(),
                )
                .await;
                for (&position, result) in roll_back.iter().zip(rolled) {
                    match result {
                        Ok(()) => good.push(position),
                        Err(error) => {
                            tracing::warn!(%error, object, position, "rolling a shard back")
                        }
                    }
                }
                good.sort_unstable();
                if !stale.is_empty() {
                    let rebuilt = self.rebuild(object, &state, &good, &stale).await?;
                    good.extend(rebuilt);
                    good.sort_unstable();
                }
                Ok((Some(state), good))
            }
        }
    }

    /// Puts a shard back to the version before its last write, from its undo record.
    async fn roll_back(&self, object: &str, position: usize, probe: &Probe) -> Result<()> {
        let (Some(osd), Probe::Present(meta)) = (self.osd(position), probe) else {
            return Err(RadosError::Io("no shard to roll back".into()));
        };
        let Some(undo) = &meta.undo else {
            return Err(RadosError::Io("no undo record".into()));
        };
        let id = self.id(position, object);
        let mut transaction = Transaction::new(meta.mtime_ns);
        if !undo.bytes.is_empty() {
            transaction.write(&id, undo.offset_bytes, undo.bytes.clone());
        }
        transaction.truncate(&id, undo.prev_shard_bytes);
        for key in meta
            .xattrs
            .keys()
            .filter(|key| !undo.xattrs.contains_key(*key))
        {
            transaction.remove_xattr(&id, key.clone());
        }
        for (key, value) in &undo.xattrs {
            transaction.set_xattr(&id, key.clone(), value.clone());
        }
        transaction.set_xattr(&id, VERSION_XATTR, undo.prev_version.to_le_bytes().to_vec());
        transaction.set_xattr(&id, SIZE_XATTR, undo.prev_size_bytes.to_le_bytes().to_vec());
        transaction.remove_xattr(&id, UNDO_XATTR);
        let bytes = undo.bytes.len() as u64;
        let result = osd.apply(transaction, bytes).await;
        self.inner.note_osd_result(osd.id, &result);
        result.map_err(|error| self.error(position, &error))
    }

    /// Rewrites the `stale` shards whole from the `good` ones; returns those rewritten.
    pub(crate) async fn rebuild(
        &self,
        object: &str,
        state: &ObjectState,
        good: &[usize],
        stale: &[usize],
    ) -> Result<Vec<usize>> {
        let shard_bytes = self.shard_bytes(state.size_bytes);
        let shards = self.read_shards(object, good, 0, shard_bytes).await?;
        let whole = self
            .codec
            .reconstruct(&shards)
            .map_err(|error| RadosError::Io(format!("rebuilding {object}: {error}")))?;
        let writes = stale
            .iter()
            .map(|&position| {
                let whole = &whole;
                async move {
                    let osd = self.osd(position)?;
                    let id = self.id(position, object);
                    let mut transaction = Transaction::new(state.mtime_ns);
                    transaction.remove(&id);
                    transaction.write_full(&id, whole[position].clone());
                    for (key, value) in &state.xattrs {
                        transaction.set_xattr(&id, key.clone(), value.clone());
                    }
                    transaction.set_xattr(&id, VERSION_XATTR, state.version.to_le_bytes().to_vec());
                    transaction.set_xattr(&id, SIZE_XATTR, state.size_bytes.to_le_bytes().to_vec());
                    // The shard may be missing: remove only what is there.
                    let exists = osd
                        .store()
                        .exists(&id.collection, &id.name)
                        .await
                        .unwrap_or(false);
                    if !exists {
                        transaction.ops.remove(0);
                    }
                    let result = osd.apply(transaction, shard_bytes).await;
                    self.inner.note_osd_result(osd.id, &result);
                    match result {
                        Ok(()) => Some(position),
                        Err(error) => {
                            tracing::warn!(osd = osd.id, %error, object, "rebuilding a shard");
                            None
                        }
                    }
                }
            })
            .collect();
        let rebuilt: Vec<usize> = join_all(writes).await.into_iter().flatten().collect();
        if rebuilt.len() < stale.len() {
            self.inner.mark_dirty(self.pg);
        }
        Ok(rebuilt)
    }

    /// Bytes `[offset, offset + length)` of the shards, read from at least `k` of the `good`
    /// positions (data shards first); the others `None`. A shard that fails its checksum or
    /// its device is read around.
    pub(crate) async fn read_shards(
        &self,
        object: &str,
        good: &[usize],
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let k = self.codec.k();
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; self.positions.len()];
        let mut candidates = good.iter().copied();
        let mut have = 0;
        let mut last_error = None;
        while have < k {
            let batch: Vec<usize> = candidates.by_ref().take(k - have).collect();
            if batch.is_empty() {
                let error = last_error.unwrap_or_else(|| {
                    RadosError::Io(format!("{object}: fewer than {k} shards to read"))
                });
                return Err(error);
            }
            let reads = batch
                .iter()
                .map(|&position| async move {
                    let osd = self
                        .osd(position)
                        .ok_or_else(|| RadosError::Io("OSD went down".into()))?;
                    let collection = shard_collection(self.pg, position);
                    let result = osd
                        .read(&collection, object, offset_bytes, length_bytes)
                        .await;
                    self.inner.note_osd_result(osd.id, &result);
                    result.map_err(|error| self.error(position, &error))
                })
                .collect();
            for (position, result) in batch.iter().zip(join_all(reads).await) {
                match result {
                    Ok(mut bytes) => {
                        bytes.resize(length_bytes as usize, 0);
                        shards[*position] = Some(bytes);
                        have += 1;
                    }
                    Err(error) => {
                        tracing::warn!(%error, object, position, "shard read failed");
                        self.inner.mark_dirty(self.pg);
                        last_error = Some(error);
                    }
                }
            }
        }
        Ok(shards)
    }

    /// A whole shard as its device holds it (checked against its checksums, not from the
    /// data cache), padded to `shard_bytes`; `None` if it cannot be read.
    pub(crate) async fn read_from_device(
        &self,
        object: &str,
        position: usize,
        shard_bytes: u64,
    ) -> Option<Vec<u8>> {
        let osd = self.osd(position)?;
        let collection = shard_collection(self.pg, position);
        let result = osd
            .store()
            .read_device(&collection, object, 0, shard_bytes)
            .await;
        self.inner.note_osd_result(osd.id, &result);
        let mut bytes = result.ok()?;
        bytes.resize(shard_bytes as usize, 0);
        Some(bytes)
    }

    /// Logical bytes of stripes `[first_row, end_row)` of `object`.
    pub(crate) async fn read_rows(
        &self,
        object: &str,
        good: &[usize],
        first_row: u64,
        end_row: u64,
    ) -> Result<Vec<u8>> {
        if end_row <= first_row {
            return Ok(Vec::new());
        }
        let unit = self.profile.stripe_unit_bytes;
        let shards = self
            .read_shards(object, good, first_row * unit, (end_row - first_row) * unit)
            .await?;
        self.codec
            .decode(&shards)
            .map_err(|error| RadosError::Io(format!("decoding {object}: {error}")))
    }
}

/// An undo-less shard never counts as rolling back ([`ShardMeta::rolls_back_to`]).
fn unreachable_undo() -> crate::ec::shard::Undo {
    crate::ec::shard::Undo {
        prev_version: 0,
        prev_size_bytes: 0,
        prev_shard_bytes: 0,
        offset_bytes: 0,
        bytes: Vec::new(),
        xattrs: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec::shard::Undo;

    fn at(version: u64, undo_to: Option<u64>) -> Probe {
        Probe::Present(ShardMeta {
            version,
            size_bytes: 1,
            shard_bytes: 1,
            mtime_ns: 0,
            xattrs: BTreeMap::new(),
            undo: undo_to.map(|prev_version| Undo {
                prev_version,
                ..unreachable_undo()
            }),
        })
    }

    #[test]
    fn decides_forward_back_or_waits() {
        use Probe::{Absent, Unavailable};
        // A write that reached 4 of 6 rolls forward; the 2 others are stale.
        let forward = [
            at(5, Some(3)),
            at(5, Some(3)),
            at(5, Some(3)),
            at(5, Some(3)),
            at(3, None),
            at(3, None),
        ];
        assert!(
            matches!(decide(&forward, 4), Decision::Version { version: 5, ref stale, .. } if stale == &[4, 5])
        );
        // Reached 3 of 6: back to 3 (the three shards roll back).
        let back = [
            at(5, Some(3)),
            at(5, Some(3)),
            at(5, Some(3)),
            at(3, None),
            at(3, None),
            at(3, None),
        ];
        assert!(
            matches!(decide(&back, 4), Decision::Version { version: 3, ref roll_back, .. } if roll_back == &[0, 1, 2])
        );
        // Reached 3, and 2 positions cannot answer: it may have reached 5; wait.
        let unsure = [
            at(5, Some(3)),
            at(5, Some(3)),
            at(5, Some(3)),
            at(3, None),
            Unavailable,
            Unavailable,
        ];
        assert!(matches!(
            decide(&unsure, 4),
            Decision::Undecided { available: 4 }
        ));
        // A create that reached 2 of 6, all answering: no object; its shards are leftovers.
        let torn_create = [at(9, None), at(9, None), Absent, Absent, Absent, Absent];
        assert_eq!(
            decide(&torn_create, 4),
            Decision::Absent {
                leftovers: vec![0, 1]
            }
        );
        // An object 5 shards hold, one OSD down: readable.
        let degraded = [
            at(2, None),
            Unavailable,
            at(2, None),
            at(2, None),
            at(2, None),
            at(2, None),
        ];
        assert!(
            matches!(decide(&degraded, 4), Decision::Version { version: 2, ref stale, .. } if stale.is_empty())
        );
        // A new OSD at a position (absent shard) is stale.
        let replaced = [
            at(2, None),
            Absent,
            at(2, None),
            at(2, None),
            at(2, None),
            at(2, None),
        ];
        assert!(
            matches!(decide(&replaced, 4), Decision::Version { ref stale, .. } if stale == &[1])
        );
    }
}
