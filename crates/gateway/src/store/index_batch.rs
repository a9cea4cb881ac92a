//! Write-combining of index writes, per index-pool object (issue 39).
//!
//! Every PUT writes its index shard object twice: its write intent, then its commit (the
//! entry set and the intent removed, guarded). Writes to one object are serialized by the
//! cluster, so with many PUTs in flight to one bucket's few shards each of those writes
//! waited for all the others queued on its shard: at 64 clients a PUT spent ten times longer
//! in its two index writes than in its data write.
//!
//! Here the writes bound for one object queue up, and one writer drains the queue: each
//! write it issues carries every queued operation it can ([`batch_of`]), concatenated into
//! one [`WriteOp`] (group commit: the first waiter's write takes everything queued so far,
//! the others wait for that write's result). A combined op is atomic and its guards test
//! the object as it was before it, so it applies exactly when every member's op would have
//! applied alone (members touch disjoint keys; see [`Footprint`]). When it fails on a guard
//! or a missing object, nothing applied, and the answer says nothing about which member's
//! guard failed: every member then writes its own op alone and gets its own answer, so
//! races and fences are decided exactly as without batching. Any other error is every
//! member's answer, as it would have been alone (a write that timed out may have applied
//! for all of them, as for one).
//!
//! Nothing waits for a timer: a write goes as soon as the previous one on its object
//! finished, with whatever queued meanwhile. The drain runs as its own task, so a request
//! that goes away mid-write strands nobody.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rados::{IoCtx, Op, RadosError, WriteOp};
use tokio::sync::oneshot;

/// The most operations one combined write carries.
pub const BATCH_OPS_MAX: usize = 64;

/// What an operation reads (guards) and changes, for deciding which can share a write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Omap keys and xattrs (`Name::Xattr`) its guards test.
    reads: BTreeSet<Name>,
    /// Omap keys and xattrs it sets or removes.
    writes: BTreeSet<Name>,
    /// It changes the object as a whole (data, removal, omap clear): it goes alone.
    whole: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Name {
    Omap(Vec<u8>),
    Xattr(String),
}

impl Footprint {
    pub fn of(op: &WriteOp) -> Self {
        let mut footprint = Footprint::default();
        for step in op.ops() {
            match step {
                Op::AssertExists => {}
                Op::CompareXattr { name, .. } => {
                    footprint.reads.insert(Name::Xattr(name.clone()));
                }
                Op::CompareOmap { key, .. } => {
                    footprint.reads.insert(Name::Omap(key.clone()));
                }
                Op::SetXattr { name, .. } | Op::RemoveXattr { name } => {
                    footprint.writes.insert(Name::Xattr(name.clone()));
                }
                Op::OmapSet(entries) => {
                    let keys = entries.iter().map(|(key, _)| Name::Omap(key.clone()));
                    footprint.writes.extend(keys);
                }
                Op::OmapRemoveKeys(keys) => {
                    footprint
                        .writes
                        .extend(keys.iter().map(|key| Name::Omap(key.clone())));
                }
                _ => footprint.whole = true,
            }
        }
        footprint
    }

    /// Whether the two cannot share a write: one changes what the other tests or changes
    /// (shared guards alone are fine: both test the state before the write).
    fn conflicts(&self, other: &Footprint) -> bool {
        self.whole
            || other.whole
            || self
                .writes
                .iter()
                .any(|name| other.reads.contains(name) || other.writes.contains(name))
            || other.writes.iter().any(|name| self.reads.contains(name))
    }
}

/// Which of the queued operations (in queue order) the next write carries: the first, then
/// each later one that conflicts neither with those taken nor with those passed over (an
/// operation never overtakes one it conflicts with), up to `ops_max`. An operation that
/// changes the whole object goes alone.
pub fn batch_of(queued: &[Footprint], ops_max: usize) -> Vec<usize> {
    let mut taken: Vec<usize> = Vec::new();
    let mut passed: Vec<usize> = Vec::new();
    for (at, footprint) in queued.iter().enumerate() {
        if taken.len() >= ops_max.max(1) {
            break;
        }
        let free = taken
            .iter()
            .chain(&passed)
            .all(|&other| !queued[other].conflicts(footprint));
        if free {
            taken.push(at);
        } else {
            passed.push(at);
        }
    }
    taken
}

/// What a queued operation's writer answers.
enum Answer {
    /// The write that carried it (alone or with others) returned this.
    Done(std::result::Result<(), RadosError>),
    /// It was combined and the combined write failed on a guard or a missing object: write
    /// it alone.
    Alone(WriteOp),
}

struct Queued {
    op: WriteOp,
    footprint: Footprint,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    queued: Vec<Queued>,
    /// A drain task is running for this object.
    draining: bool,
}

/// Counters of the batcher (observable through [`super::GatewayStats`]).
#[derive(Default)]
pub(super) struct BatchCounters {
    /// Operations submitted.
    pub ops: AtomicU64,
    /// Writes issued for them (combined or alone, retries alone included).
    pub writes: AtomicU64,
}

/// The write-combining queues of one pool's objects.
pub(super) struct IndexBatcher {
    queues: Mutex<HashMap<String, Queue>>,
    ops_max: usize,
    pub counters: BatchCounters,
}

impl IndexBatcher {
    pub fn new(ops_max: usize) -> Self {
        Self {
            queues: Mutex::default(),
            ops_max: ops_max.max(1),
            counters: BatchCounters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Queue>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `op` to `oid` of `io`'s pool, in one write with other operations queued for
    /// `oid` when it can; its answer is the one it would have had alone (see the module
    /// docs). The queues are by object name: every caller passes the same pool.
    pub async fn operate(
        self: &Arc<Self>,
        io: &Arc<dyn IoCtx>,
        oid: &str,
        op: WriteOp,
    ) -> rados::Result<()> {
        self.counters.ops.fetch_add(1, Ordering::Relaxed);
        let (answer, receiver) = oneshot::channel();
        let start = {
            let mut queues = self.lock();
            let queue = queues.entry(oid.to_string()).or_default();
            queue.queued.push(Queued {
                footprint: Footprint::of(&op),
                op,
                answer,
            });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            tokio::spawn(self.clone().drain(io.clone(), oid.to_string()));
        }
        match receiver.await {
            Ok(Answer::Done(result)) => result,
            Ok(Answer::Alone(op)) => {
                self.counters.writes.fetch_add(1, Ordering::Relaxed);
                io.operate(oid, op).await
            }
            Err(_) => Err(RadosError::Io(format!("{oid}: the index writer went away"))),
        }
    }

    /// Writes `oid`'s queue, a batch at a time, until it is empty.
    async fn drain(self: Arc<Self>, io: Arc<dyn IoCtx>, oid: String) {
        loop {
            let batch: Vec<Queued> = {
                let mut queues = self.lock();
                let Some(queue) = queues.get_mut(&oid) else {
                    return;
                };
                if queue.queued.is_empty() {
                    queues.remove(&oid);
                    return;
                }
                let footprints: Vec<Footprint> =
                    queue.queued.iter().map(|q| q.footprint.clone()).collect();
                let taken: BTreeSet<usize> =
                    batch_of(&footprints, self.ops_max).into_iter().collect();
                let (batch, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut queue.queued)
                    .into_iter()
                    .enumerate()
                    .partition(|(at, _)| taken.contains(at));
                queue.queued = rest.into_iter().map(|(_, queued)| queued).collect();
                batch.into_iter().map(|(_, queued)| queued).collect()
            };
            self.write(&io, &oid, batch).await;
        }
    }

    /// One write of `batch` to `oid`, and its answers.
    async fn write(&self, io: &Arc<dyn IoCtx>, oid: &str, mut batch: Vec<Queued>) {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        if batch.len() == 1 {
            let Queued { op, answer, .. } = batch.remove(0);
            let _ = answer.send(Answer::Done(io.operate(oid, op).await));
            return;
        }
        let combined = batch
            .iter()
            .flat_map(|queued| queued.op.ops().iter().cloned())
            .fold(WriteOp::new(), WriteOp::push);
        let result = io.operate(oid, combined).await;
        let alone = matches!(
            result,
            Err(RadosError::CompareFailed(_)
                | RadosError::NotFound(_)
                | RadosError::Exists(_)
                | RadosError::InvalidArgument(_))
        );
        for Queued { op, answer, .. } in batch {
            let _ = answer.send(match alone {
                true => Answer::Alone(op),
                false => Answer::Done(result.clone()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rados::memory::MemoryRados;
    use rados::Rados;

    fn intent(key: &[u8]) -> WriteOp {
        WriteOp::new()
            .compare_xattr("stamp", rados::Comparison::Equal, b"v".to_vec())
            .omap_set(vec![(key.to_vec(), b"t".to_vec())])
    }

    fn commit(key: &[u8], old: Option<&[u8]>, intent: &[u8]) -> WriteOp {
        WriteOp::new()
            .compare_omap(key.to_vec(), old.map(<[u8]>::to_vec))
            .compare_omap(intent.to_vec(), Some(b"t".to_vec()))
            .omap_set(vec![(key.to_vec(), b"entry".to_vec())])
            .omap_remove_keys(vec![intent.to_vec()])
    }

    fn footprints(ops: &[WriteOp]) -> Vec<Footprint> {
        ops.iter().map(Footprint::of).collect()
    }

    #[test]
    fn one_write_serves_every_queued_op_on_other_keys_up_to_the_bound() {
        let ops: Vec<WriteOp> = (0..5u8).map(|n| intent(&[b'i', n])).collect();
        // Shared guards (the shard's versioning stamp) do not keep ops apart.
        assert_eq!(batch_of(&footprints(&ops), 64), vec![0, 1, 2, 3, 4]);
        assert_eq!(batch_of(&footprints(&ops), 3), vec![0, 1, 2]);
        assert_eq!(batch_of(&footprints(&ops), 0), vec![0]);
        let commits = [commit(b"a", None, b"ia"), commit(b"b", Some(b"x"), b"ib")];
        assert_eq!(batch_of(&footprints(&commits), 64), vec![0, 1]);
    }

    #[test]
    fn ops_on_one_key_go_in_separate_writes_in_queue_order() {
        let ops = [
            commit(b"a", None, b"i1"),
            intent(b"i2"),
            // Sets `a`, which the first tests: waits for the next write.
            commit(b"a", Some(b"entry"), b"i3"),
            intent(b"i4"),
            // Tests `a` too, and may not overtake the third.
            WriteOp::new()
                .compare_omap(b"a".to_vec(), None)
                .omap_remove_keys(vec![b"a".to_vec()]),
            // Only guards `a`: the first only tests it too, but the third (passed over)
            // changes it.
            WriteOp::new()
                .compare_omap(b"a".to_vec(), None)
                .omap_set(vec![(b"z".to_vec(), b"1".to_vec())]),
        ];
        assert_eq!(batch_of(&footprints(&ops), 64), vec![0, 1, 3]);
        assert_eq!(batch_of(&footprints(&ops[2..]), 64), vec![0, 1]);
        // A write of the whole object goes alone, first or not.
        let whole = [WriteOp::new().remove(), intent(b"i5")];
        assert_eq!(batch_of(&footprints(&whole), 64), vec![0]);
        assert_eq!(batch_of(&footprints(&whole[1..]), 64), vec![0]);
        let after = [intent(b"i5"), WriteOp::new().remove()];
        assert_eq!(batch_of(&footprints(&after), 64), vec![0]);
    }

    /// Ops queued while a write is in flight go out together, and a member whose guard
    /// fails gets its own failure while the others apply.
    #[tokio::test]
    async fn a_failed_guard_in_a_combined_write_fails_only_its_op() {
        let rados = MemoryRados::new();
        rados
            .pool_create(rados::PoolSpec::new("index"))
            .await
            .expect("pool");
        let io = rados.io_ctx("index").await.expect("io");
        io.operate("shard", WriteOp::new().set_xattr("stamp", b"v".to_vec()))
            .await
            .expect("stamp");
        let batcher = Arc::new(IndexBatcher::new(BATCH_OPS_MAX));
        let ops = vec![
            intent(b"i1"),
            intent(b"i2"),
            // Expects `k` set: it is not, so this one fails, alone.
            WriteOp::new()
                .compare_omap(b"k".to_vec(), Some(b"old".to_vec()))
                .omap_set(vec![(b"k".to_vec(), b"new".to_vec())]),
            intent(b"i3"),
        ];
        let results =
            futures::future::join_all(ops.into_iter().map(|op| batcher.operate(&io, "shard", op)))
                .await;
        assert!(results[0].is_ok() && results[1].is_ok() && results[3].is_ok());
        assert!(matches!(results[2], Err(RadosError::CompareFailed(_))));
        let stored = io
            .omap_get_vals("shard", None, b"", 100)
            .await
            .expect("omap");
        let keys: Vec<&[u8]> = stored.entries.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, vec![&b"i1"[..], b"i2", b"i3"]);
        // One combined write (failed), then each of the four alone.
        assert_eq!(batcher.counters.ops.load(Ordering::Relaxed), 4);
        assert_eq!(batcher.counters.writes.load(Ordering::Relaxed), 5);
    }
}
