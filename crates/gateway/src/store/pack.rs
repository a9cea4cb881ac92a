//! Small-object packing on PUT (seed 002): small objects that arrive together and whose head
//! objects would map to the same placement group are written as one pack object, in one
//! write, instead of one replicated write each.
//!
//! ## How a group forms and closes
//! A PUT whose body is smaller than `packing.object_size_max_bytes`, to a bucket without
//! versioning, reads its body, then joins the open group of the OSD CRUSH sends it to: the
//! primary of the placement group its head object `<bucket-id>_<tag>_<key>` would map to
//! (Ceph's object -> PG hash, and the data pool's acting sets from
//! [`rados::Rados::pg_acting_sets`], fetched again every [`PLACEMENT_REFRESH_NS`]). A
//! backend that cannot name acting sets groups by that placement group instead. Grouping by
//! OSD rather than PG is what lets packs fill: there are far fewer primaries than PGs, so
//! the PUTs in flight together meet in few groups. A small PUT announces itself to its
//! target before its write intent (an [`Arrival`]), so the packer knows which PUTs are on
//! their way; the group closes as soon as none is and no member joined within
//! `group_linger_us` (batching would gain nothing more), when it holds `group_count_max`
//! objects or `group_bytes_max` bytes, or `group_wait_us` after it opened at the latest (the
//! rule is [`super::pack_close`]; with `adaptive_close` off only the last three). Whoever
//! decides it closed (the member that joined last, or a waiting member woken by its
//! deadline or by an announced PUT giving up) writes it: every member waits on the group's
//! deadline, so a member whose request went away never strands the
//! others). The write is one [`WriteOp`]: the members' bytes back to back and one omap value
//! listing them all ([`layout::PackMemberList`]), so a pack always records whom it holds, at
//! the cost of one record per pack rather than one per member. The
//! pack's name is searched so that it maps to a placement group whose primary is the group's
//! OSD (or to the group's placement group); the members' index entries name the pack, so
//! where it lands is only a matter of locality, never of correctness.
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
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use futures::{Stream, StreamExt};
use md5::{Digest, Md5};

use super::pack_close::{decide, CloseLimits, Closed, GroupDecision, GroupState};
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

/// How long the data pool's acting sets are used before they are asked for again, in ns.
pub const PLACEMENT_REFRESH_NS: u64 = 10_000_000_000;

/// What a group gathers: the objects bound for one primary OSD, or for one placement group
/// when the backend cannot name acting sets.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Target {
    Primary(i32),
    PlacementGroup(u32),
}

/// The group target of an object whose head maps to `pg`, given the acting sets by PG.
pub fn target_of(pg: u32, acting: Option<&[Vec<i32>]>) -> Target {
    match acting.and_then(|sets| sets.get(pg as usize)?.first()) {
        Some(&osd) => Target::Primary(osd),
        None => Target::PlacementGroup(pg),
    }
}

/// The first pack object name of `tag` that lands on `target`: in a placement group whose
/// primary is the OSD, or in the placement group. An OSD that is no PG's primary any more
/// (the map changed) gets the first name: the pack is still found through its members'
/// index entries.
pub fn pack_name_for(
    tag: &str,
    target: Target,
    pg_num: u32,
    acting: Option<&[Vec<i32>]>,
) -> String {
    match target {
        Target::PlacementGroup(pg) => pack_name_in(tag, pg, pg_num),
        Target::Primary(_) => {
            let wanted: Vec<bool> = (0..pg_num)
                .map(|pg| target_of(pg, acting) == target)
                .collect();
            if !wanted.contains(&true) {
                return layout::pack_object(tag, 0);
            }
            (0..)
                .map(|n| layout::pack_object(tag, n))
                .find(|name| wanted[placement_group(name, pg_num) as usize])
                .expect("some suffix maps to every placement group")
        }
    }
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
    /// Groups closed by `group_count_max`.
    pub closed_count: AtomicU64,
    /// Groups closed by `group_bytes_max`.
    pub closed_bytes: AtomicU64,
    /// Groups closed because no other PUT was on its way to them (`adaptive_close`).
    pub closed_idle: AtomicU64,
    /// Groups closed by `group_wait_us`.
    pub closed_wait: AtomicU64,
    /// The time members spent in their group, from joining to its close, summed, in ns.
    pub member_wait_ns: AtomicU64,
    /// The time pack writes took, summed, in ns.
    pub pack_write_ns: AtomicU64,
}

impl PackCounters {
    fn count_close(&self, closed: Closed) {
        let counter = match closed {
            Closed::Count => &self.closed_count,
            Closed::Bytes => &self.closed_bytes,
            Closed::Idle => &self.closed_idle,
            Closed::Wait => &self.closed_wait,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// One member waiting in a group.
struct Pending {
    member: PackMember,
    data: Bytes,
    joined_ns: u64,
    done: oneshot::Sender<std::result::Result<Piece, String>>,
}

/// An open group of one target.
struct Group {
    generation: u64,
    bytes: u64,
    members: Vec<Pending>,
    opened_ns: u64,
    joined_last_ns: u64,
    /// Wakes one waiting member to decide again (an expected PUT gave up).
    wake: Arc<Notify>,
}

/// The open groups, and the PUTs announced to each target that have not joined yet.
#[derive(Default)]
struct Groups {
    open: HashMap<Target, Group>,
    expected: HashMap<Target, usize>,
}

impl Groups {
    /// One PUT less expected for `target`.
    fn forget(&mut self, target: Target) {
        if let Some(expected) = self.expected.get_mut(&target) {
            *expected = expected.saturating_sub(1);
            if *expected == 0 {
                self.expected.remove(&target);
            }
        }
    }

    fn state(&self, target: Target, group: &Group) -> GroupState {
        GroupState {
            members: group.members.len(),
            bytes: group.bytes,
            opened_ns: group.opened_ns,
            joined_last_ns: group.joined_last_ns,
            expected: self.expected.get(&target).copied().unwrap_or(0),
        }
    }

    /// `target`'s open group decided at `now_ns`: removed and returned when it closes.
    fn settle(
        &mut self,
        target: Target,
        limits: &CloseLimits,
        now_ns: u64,
        counters: &PackCounters,
    ) -> Settled {
        let Some(group) = self.open.get(&target) else {
            return Settled::Gone;
        };
        let state = self.state(target, group);
        match decide(&state, limits, now_ns) {
            GroupDecision::Hold { deadline_ns } => Settled::Hold {
                generation: group.generation,
                deadline_ns,
                wake: group.wake.clone(),
            },
            GroupDecision::Close(closed) => {
                counters.count_close(closed);
                let group = self.open.remove(&target).expect("the group is open");
                let waited: u64 = group
                    .members
                    .iter()
                    .map(|pending| now_ns.saturating_sub(pending.joined_ns))
                    .sum();
                counters.member_wait_ns.fetch_add(waited, Ordering::Relaxed);
                Settled::Write(group)
            }
        }
    }
}

/// A group after a decision.
enum Settled {
    /// Closed: the caller writes it.
    Write(Group),
    /// Still open (generation `generation`) until `deadline_ns` at the latest.
    Hold {
        generation: u64,
        deadline_ns: u64,
        wake: Arc<Notify>,
    },
    /// Not open any more (another member closed it).
    Gone,
}

/// The data pool's acting sets by PG as last fetched, and when they were asked for.
#[derive(Default)]
struct Placement {
    asked_ns: Option<u64>,
    acting: Option<Arc<Vec<Vec<i32>>>>,
}

/// The open groups, one per target with a member waiting.
pub(super) struct Packer {
    groups: Mutex<Groups>,
    generations: AtomicU64,
    placement: Mutex<Placement>,
    /// The origin of the packer's own time: groups are timed by tokio's clock (a test may
    /// pause it), not the store's wall clock, which a test may pin.
    epoch: Instant,
    pub counters: PackCounters,
}

impl Default for Packer {
    fn default() -> Self {
        Self {
            groups: Mutex::default(),
            generations: AtomicU64::new(0),
            placement: Mutex::default(),
            epoch: Instant::now(),
            counters: PackCounters::default(),
        }
    }
}

/// A small PUT on its way to a group (announced before its write intent): the group of its
/// target holds while it is expected. Dropped without joining (the PUT failed, or turned
/// out not to be packed), it stops being expected and the group decides again.
pub(crate) struct Arrival {
    packer: Arc<Packer>,
    target: Target,
    joined: bool,
}

impl Drop for Arrival {
    fn drop(&mut self) {
        if self.joined {
            return;
        }
        let mut groups = self.packer.lock_groups();
        groups.forget(self.target);
        if let Some(group) = groups.open.get(&self.target) {
            group.wake.notify_one();
        }
    }
}

impl Packer {
    fn lock_groups(&self) -> std::sync::MutexGuard<'_, Groups> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The packer's time, in ns.
    fn now_ns(&self) -> u64 {
        Instant::now().duration_since(self.epoch).as_nanos() as u64
    }

    /// Announces a PUT bound for `target`.
    fn expect(self: &Arc<Self>, target: Target) -> Arrival {
        *self.lock_groups().expected.entry(target).or_insert(0) += 1;
        Arrival {
            packer: self.clone(),
            target,
            joined: false,
        }
    }

    /// Adds a member to `target`'s group (its arrival, if it announced itself, ends) and
    /// decides the group.
    fn join(
        &self,
        target: Target,
        arrival: Option<Arrival>,
        mut pending: Pending,
        limits: &CloseLimits,
    ) -> Settled {
        let mut groups = self.lock_groups();
        if let Some(mut arrival) = arrival {
            arrival.joined = true;
            groups.forget(arrival.target);
        }
        let now_ns = self.now_ns();
        pending.joined_ns = now_ns;
        let group = groups.open.entry(target).or_insert_with(|| Group {
            generation: self.generations.fetch_add(1, Ordering::Relaxed),
            bytes: 0,
            members: Vec::new(),
            opened_ns: now_ns,
            joined_last_ns: now_ns,
            wake: Arc::new(Notify::new()),
        });
        group.bytes += pending.data.len() as u64;
        group.joined_last_ns = now_ns;
        group.members.push(pending);
        groups.settle(target, limits, now_ns, &self.counters)
    }

    /// Decides `target`'s group again if it is still generation `generation`.
    fn recheck(&self, target: Target, generation: u64, limits: &CloseLimits) -> Settled {
        let mut groups = self.lock_groups();
        match groups.open.get(&target) {
            Some(group) if group.generation == generation => {
                groups.settle(target, limits, self.now_ns(), &self.counters)
            }
            _ => Settled::Gone,
        }
    }
}

impl Store {
    /// The data pool's acting sets by PG, asked for again when the last answer is older than
    /// [`PLACEMENT_REFRESH_NS`] (one caller asks; the others use the previous answer
    /// meanwhile). `None` when the backend cannot say or answered for another PG count.
    async fn acting_sets(&self) -> Option<Arc<Vec<Vec<i32>>>> {
        let now = self.now_ns();
        {
            let mut placement = self
                .packer
                .placement
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(asked) = placement.asked_ns {
                if now.saturating_sub(asked) < PLACEMENT_REFRESH_NS {
                    return placement.acting.clone();
                }
            }
            placement.asked_ns = Some(now);
        }
        self.fetch_acting_sets(now).await
    }

    /// Asks the backend for the data pool's acting sets and keeps the answer.
    async fn fetch_acting_sets(&self, now: u64) -> Option<Arc<Vec<Vec<i32>>>> {
        let pg_num = self.data.pool().pg_num;
        let Some(rados) = &self.placement_source else {
            return None;
        };
        let acting = match rados.pg_acting_sets(&self.config.data_pool).await {
            Ok(sets) if sets.len() == pg_num as usize => Some(Arc::new(sets)),
            Ok(sets) => {
                tracing::debug!(pgs = sets.len(), pg_num, "acting sets for another PG count");
                None
            }
            Err(error) => {
                tracing::debug!(%error, "no acting sets: packs group by placement group");
                None
            }
        };
        let mut placement = self
            .packer
            .placement
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        placement.asked_ns = Some(now);
        placement.acting = acting.clone();
        acting
    }

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
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn write_checked_packed<S, T>(
        &self,
        arrival: Option<Arrival>,
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
        match self.write_packed(arrival, bucket, tag, key, whole).await {
            Ok(piece) => Ok((vec![piece], size, md5, checked)),
            Err(error) => {
                self.abandon_write(intent, Vec::new()).await;
                Err(error)
            }
        }
    }

    /// The group target of the head object `key` of `bucket` written under `tag` would
    /// have.
    async fn target_for(&self, bucket: &layout::BucketRecord, tag: &str, key: &str) -> Target {
        let pg_num = self.data.pool().pg_num;
        let pg = placement_group(&layout::piece_object(&bucket.id, tag, key, 0), pg_num);
        let acting = self.acting_sets().await;
        target_of(pg, acting.as_ref().map(|sets| sets.as_slice()))
    }

    /// Announces a PUT of `size_bytes` (its announced length) to `bucket` before its write
    /// intent, so that the group it will join waits for it (`pack_close.rs`); `None` when it
    /// will not be packed, or groups close on their limits alone. Pass the arrival to
    /// [`Store::write_checked_packed`]; dropping it instead tells the group not to wait.
    pub(crate) async fn announce_packed(
        &self,
        bucket: &layout::BucketRecord,
        tag: &str,
        key: &str,
        size_bytes: Option<u64>,
    ) -> Option<Arrival> {
        if !self.config.packing.adaptive_close || !self.packs(bucket, size_bytes?) {
            return None;
        }
        let target = self.target_for(bucket, tag, key).await;
        Some(self.packer.expect(target))
    }

    /// The limits groups close on.
    fn close_limits(&self) -> CloseLimits {
        let packing = &self.config.packing;
        CloseLimits {
            count_max: packing.group_count_max.max(1),
            bytes_max: packing.group_bytes_max,
            wait_max_ns: packing.group_wait_us.saturating_mul(1_000),
            linger_ns: if packing.adaptive_close {
                packing.group_linger_us.saturating_mul(1_000)
            } else {
                // Without the adaptive close a group holds until its wait, as if someone
                // were always on the way.
                u64::MAX
            },
        }
    }

    /// Writes `data` (a whole small object, key `key` of `bucket`, written under `tag`) into
    /// a pack with the other small objects bound for the same OSD; returns its piece once the
    /// pack is written. `arrival` is the PUT's announcement, if it made one.
    pub(crate) async fn write_packed(
        &self,
        arrival: Option<Arrival>,
        bucket: &layout::BucketRecord,
        tag: &str,
        key: &str,
        data: Bytes,
    ) -> Result<Piece> {
        let pg_num = self.data.pool().pg_num;
        let target = match &arrival {
            Some(arrival) => arrival.target,
            None => self.target_for(bucket, tag, key).await,
        };
        let member = PackMember {
            index_oid: layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards)),
            key: key.to_string(),
            writer: format!("{}_{tag}_", bucket.id),
            length: data.len() as u64,
            moved_from: None,
        };
        let (done, mut result) = oneshot::channel();
        let limits = self.close_limits();
        let pending = Pending {
            member,
            data,
            joined_ns: 0,
            done,
        };
        let mut settled = self.packer.join(target, arrival, pending, &limits);
        // Every member waits on the group's deadline and its wake-ups, so a member whose
        // request went away never strands the others; whichever decides it closed writes it.
        let answer = loop {
            match settled {
                Settled::Write(group) => {
                    self.write_pack(target, pg_num, group).await;
                    break result.await;
                }
                Settled::Gone => break result.await,
                Settled::Hold {
                    generation,
                    deadline_ns,
                    wake,
                } => {
                    let wait = deadline_ns.saturating_sub(self.packer.now_ns());
                    tokio::select! {
                        answer = &mut result => break answer,
                        () = wake.notified() => {}
                        () = tokio::time::sleep(std::time::Duration::from_nanos(wait)) => {}
                    }
                    settled = self.packer.recheck(target, generation, &limits);
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
    async fn write_pack(&self, target: Target, pg_num: u32, group: Group) {
        let acting = self.acting_sets().await;
        let name = pack_name_for(
            &self.new_tag(8),
            target,
            pg_num,
            acting.as_ref().map(|sets| sets.as_slice()),
        );
        let mut body = BytesMut::with_capacity(group.bytes as usize);
        let mut members = Vec::with_capacity(group.members.len());
        let mut pieces = Vec::with_capacity(group.members.len());
        for pending in &group.members {
            let offset = body.len() as u64;
            body.extend_from_slice(&pending.data);
            members.push((offset, &pending.member));
            pieces.push(Piece {
                oid: name.clone(),
                size: pending.member.length,
                pack_offset: Some(offset),
            });
        }
        let list = layout::PackMemberList::of(members);
        let records = vec![(layout::PACK_MEMBERS_KEY.to_vec(), layout::encode(&list))];
        let op = WriteOp::new().write_full(body.freeze()).omap_set(records);
        let started_ns = self.packer.now_ns();
        let written = self.data.operate(&name, op).await;
        let counters = &self.packer.counters;
        counters.pack_write_ns.fetch_add(
            self.packer.now_ns().saturating_sub(started_ns),
            Ordering::Relaxed,
        );
        if written.is_ok() {
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
    fn a_pack_name_lands_on_the_wanted_primary() {
        let acting: Vec<Vec<i32>> = (0..16).map(|pg| vec![pg % 3, (pg + 1) % 3]).collect();
        for osd in 0..3 {
            let name = pack_name_for("0123abcd", Target::Primary(osd), 16, Some(&acting));
            assert_eq!(acting[placement_group(&name, 16) as usize][0], osd);
        }
        // An OSD that is no PG's primary: the first name, wherever it lands.
        let name = pack_name_for("0123abcd", Target::Primary(7), 16, Some(&acting));
        assert_eq!(name, layout::pack_object("0123abcd", 0));
        // Without acting sets, an object groups (and its pack lands) by placement group.
        assert_eq!(target_of(5, None), Target::PlacementGroup(5));
        assert_eq!(target_of(5, Some(&acting)), Target::Primary(2));
        let name = pack_name_for("0123abcd", Target::PlacementGroup(5), 16, None);
        assert_eq!(placement_group(&name, 16), 5);
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
