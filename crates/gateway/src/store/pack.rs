//! Small-object packing on PUT (seed 002): small objects that arrive together and whose head
//! objects would map to the same placement group are written as one pack object, in one
//! write, instead of one replicated write each.
//!
//! ## How a group forms and closes
//! A PUT whose body is smaller than `packing.object_size_max_bytes`, to a bucket without
//! versioning, reads its body, then joins the open group of the placement group its head
//! object `<bucket-id>_<tag>_<key>` would map to (Ceph's object -> PG hash, so the grouping
//! is the one CRUSH makes, on the embedded cluster and on Ceph alike). The group closes when
//! it holds `group_count_max` objects or `group_bytes_max` bytes (the member that filled it
//! writes it at once), or `group_wait_us` after a member joined (that member writes it: every
//! member waits on its own deadline, so a member whose request went away never strands the
//! others). The write is one [`WriteOp`]: the members' bytes back to back and one omap entry
//! per member ([`PackMember`], keyed by offset), so a pack always records whom it holds. The
//! pack's name is searched so that it maps to the group's placement group.
//!
//! ## Durability and acknowledgement
//! Each member then commits its own index entry (one piece: the pack, its offset, its
//! length) exactly as an unpacked PUT commits (guarded by its write intent), and is
//! acknowledged after that commit. A member whose commit fails leaves a dead range, which is
//! logged for the pack GC like the range of a deleted object (`pack_gc.rs`). A pack whose
//! members all failed before committing is unreferenced; orphan collection finds it (its
//! members' intents are gone).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use futures::{Stream, StreamExt};
use md5::{Digest, Md5};

use super::{Body, Intent, Store};
use crate::error::{GatewayError, Result};
use crate::layout::{self, PackMember, Piece};
use rados::{RadosError, WriteOp};

/// The placement group data object `name` maps to in a pool of `pg_num` PGs (Ceph's
/// rjenkins string hash and `ceph_stable_mod`, as the embedded cluster and Ceph place it).
pub fn placement_group(name: &str, pg_num: u32) -> u32 {
    let pg_num = pg_num.max(1);
    let hash = osdmap::pg::str_hash_rjenkins(name.as_bytes());
    osdmap::pg::stable_mod(hash, pg_num, osdmap::pg::stable_mod_mask(pg_num))
}

/// The first pack object name of `tag` that maps to `pg` among `pg_num` placement groups
/// (about `pg_num` hashes on average).
pub fn pack_name_in(tag: &str, pg: u32, pg_num: u32) -> String {
    (0..)
        .map(|n| layout::pack_object(tag, n))
        .find(|name| placement_group(name, pg_num) == pg)
        .expect("some suffix maps to every placement group")
}

/// Counters of the packer (observable through [`super::GatewayStats`]).
#[derive(Default)]
pub(super) struct PackCounters {
    /// Pack objects written.
    pub packs_written: AtomicU64,
    /// Objects written into packs.
    pub objects_packed: AtomicU64,
    /// Dead ranges logged.
    pub ranges_logged: AtomicU64,
    /// Packs the GC rewrote.
    pub packs_rewritten: AtomicU64,
    /// Dead bytes of the packs the GC rewrote.
    pub bytes_reclaimed: AtomicU64,
}

/// One member waiting in a group.
struct Pending {
    member: PackMember,
    data: Bytes,
    done: oneshot::Sender<std::result::Result<Piece, String>>,
}

/// An open group of one placement group.
struct Group {
    generation: u64,
    bytes: u64,
    members: Vec<Pending>,
}

/// The open groups, one per placement group with a member waiting.
#[derive(Default)]
pub(super) struct Packer {
    groups: Mutex<HashMap<u32, Group>>,
    generations: AtomicU64,
    pub counters: PackCounters,
}

impl Packer {
    /// Adds a member to `pg`'s group; returns its generation and, when the member filled the
    /// group, the group to write now.
    fn join(
        &self,
        pg: u32,
        pending: Pending,
        count_max: usize,
        bytes_max: u64,
    ) -> (u64, Option<Group>) {
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        let group = groups.entry(pg).or_insert_with(|| Group {
            generation: self.generations.fetch_add(1, Ordering::Relaxed),
            bytes: 0,
            members: Vec::new(),
        });
        group.bytes += pending.data.len() as u64;
        group.members.push(pending);
        let generation = group.generation;
        if group.members.len() >= count_max || group.bytes >= bytes_max {
            return (generation, groups.remove(&pg));
        }
        (generation, None)
    }

    /// `pg`'s group if it is still generation `generation` (nobody wrote it yet).
    fn take(&self, pg: u32, generation: u64) -> Option<Group> {
        let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        match groups.get(&pg) {
            Some(group) if group.generation == generation => groups.remove(&pg),
            _ => None,
        }
    }
}

impl Store {
    /// Whether a PUT of `size_bytes` to `bucket` is packed.
    pub fn packs(&self, bucket: &layout::BucketRecord, size_bytes: u64) -> bool {
        let packing = &self.config.packing;
        packing.enabled
            && bucket.versioning.is_none()
            && size_bytes > 0
            && size_bytes < packing.object_size_max_bytes
    }

    /// [`Store::write_checked`] of a small object to pack: the body is read whole (it was
    /// announced smaller than `packing.object_size_max_bytes`), `check`ed, and written into
    /// a pack ([`Store::write_packed`]); a body that turns out empty or too large is written
    /// as usual.
    pub(crate) async fn write_checked_packed<S, T>(
        &self,
        intent: &Intent,
        bucket: &layout::BucketRecord,
        tag: &str,
        key: &str,
        body: Body<S>,
        check: impl FnOnce(&[u8; 16]) -> Result<T>,
    ) -> Result<(Vec<Piece>, u64, [u8; 16], T)>
    where
        S: Stream<Item = Result<Bytes>> + Unpin,
    {
        let Body {
            stream: mut body,
            size_hint_bytes,
        } = body;
        let mut whole = BytesMut::with_capacity(size_hint_bytes.unwrap_or(0) as usize);
        let mut failed = None;
        while let Some(item) = body.next().await {
            match item {
                Ok(bytes) => whole.extend_from_slice(&bytes),
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            }
        }
        if let Some(error) = failed {
            self.abandon_write(intent, Vec::new()).await;
            return Err(error);
        }
        let whole = whole.freeze();
        let size = whole.len() as u64;
        if !self.packs(bucket, size) {
            let stream = futures::stream::iter([Ok(whole)]);
            return self
                .write_checked(
                    intent,
                    &bucket.id,
                    tag,
                    key,
                    Body::new(stream, Some(size)),
                    check,
                )
                .await;
        }
        let md5: [u8; 16] = Md5::digest(&whole).into();
        let checked = match check(&md5) {
            Ok(checked) => checked,
            Err(error) => {
                self.abandon_write(intent, Vec::new()).await;
                return Err(error);
            }
        };
        match self.write_packed(bucket, tag, key, whole).await {
            Ok(piece) => Ok((vec![piece], size, md5, checked)),
            Err(error) => {
                self.abandon_write(intent, Vec::new()).await;
                Err(error)
            }
        }
    }

    /// Writes `data` (a whole small object, key `key` of `bucket`, written under `tag`) into
    /// a pack with the other small objects bound for the same placement group; returns its
    /// piece once the pack is written.
    pub(crate) async fn write_packed(
        &self,
        bucket: &layout::BucketRecord,
        tag: &str,
        key: &str,
        data: Bytes,
    ) -> Result<Piece> {
        let pg_num = self.data.pool().pg_num;
        let pg = placement_group(&layout::piece_object(&bucket.id, tag, key, 0), pg_num);
        let member = PackMember {
            index_oid: layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards)),
            key: key.to_string(),
            writer: format!("{}_{tag}_", bucket.id),
            length: data.len() as u64,
            moved_from: None,
        };
        let (done, mut result) = oneshot::channel();
        let packing = &self.config.packing;
        let (generation, full) = self.packer.join(
            pg,
            Pending { member, data, done },
            packing.group_count_max.max(1),
            packing.group_bytes_max,
        );
        let answer = if let Some(group) = full {
            self.write_pack(pg, pg_num, group).await;
            result.await
        } else {
            let wait = Duration::from_micros(packing.group_wait_us);
            tokio::select! {
                answer = &mut result => answer,
                () = tokio::time::sleep(wait) => {
                    if let Some(group) = self.packer.take(pg, generation) {
                        self.write_pack(pg, pg_num, group).await;
                    }
                    result.await
                }
            }
        };
        match answer {
            Ok(Ok(piece)) => Ok(piece),
            Ok(Err(error)) => Err(RadosError::Io(error).into()),
            Err(_) => Err(GatewayError::Rados(RadosError::Io(
                "the pack writer went away".into(),
            ))),
        }
    }

    /// Writes one closed group as one pack object and tells every member its piece.
    async fn write_pack(&self, pg: u32, pg_num: u32, group: Group) {
        let name = pack_name_in(&self.new_tag(8), pg, pg_num);
        let mut body = BytesMut::with_capacity(group.bytes as usize);
        let mut records = Vec::with_capacity(group.members.len());
        let mut pieces = Vec::with_capacity(group.members.len());
        for pending in &group.members {
            let offset = body.len() as u64;
            body.extend_from_slice(&pending.data);
            records.push((
                layout::pack_member_key(offset),
                layout::encode(&pending.member),
            ));
            pieces.push(Piece {
                oid: name.clone(),
                size: pending.member.length,
                pack_offset: Some(offset),
            });
        }
        let op = WriteOp::new().write_full(body.freeze()).omap_set(records);
        let written = self.data.operate(&name, op).await;
        if written.is_ok() {
            let counters = &self.packer.counters;
            counters.packs_written.fetch_add(1, Ordering::Relaxed);
            counters
                .objects_packed
                .fetch_add(group.members.len() as u64, Ordering::Relaxed);
        }
        for (pending, piece) in group.members.into_iter().zip(pieces) {
            let answer = match &written {
                Ok(()) => Ok(piece),
                Err(error) => Err(format!("pack {name}: {error}")),
            };
            let _ = pending.done.send(answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pack_name_maps_to_the_wanted_group() {
        for pg_num in [1, 7, 16, 100] {
            for pg in 0..pg_num {
                let name = pack_name_in("0123abcd", pg, pg_num);
                assert!(layout::is_pack_object(&name));
                assert_eq!(placement_group(&name, pg_num), pg);
            }
        }
    }

    #[test]
    fn placement_is_cephs() {
        // ceph_str_hash_rjenkins("a") with 8 PGs: x & 7 (stable_mod with a power of two).
        let hash = osdmap::pg::str_hash_rjenkins(b"a");
        assert_eq!(placement_group("a", 8), hash & 7);
        // 12 PGs: mask 15; values 12..15 fold onto 4..7.
        let pg = placement_group("a", 12);
        assert!(pg < 12);
        assert_eq!(pg, if hash & 15 < 12 { hash & 15 } else { hash & 7 });
    }
}
