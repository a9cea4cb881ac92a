//! Orphan collection raced by uploads, with the interleavings forced: a pausing pool
//! ([`Paused`]) stops the pass at a chosen call while the test commits, overwrites or
//! finishes an upload, then lets it go on. Each case is a bug the review found.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use rados::{IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, Rados, WriteOp};
use tokio::sync::oneshot;

use super::super::{system_clock, Body, Store};
use crate::error::GatewayError;
use crate::layout::{self, BucketRecord, ObjectEntry, Piece};
use crate::GatewayConfig;

/// Where a [`Paused`] pool stops: a call named `method` on object `object` (any when empty).
struct Pause {
    method: &'static str,
    object: String,
    reached: oneshot::Sender<()>,
    resume: oneshot::Receiver<()>,
}

/// A pool that stops once at the armed [`Pause`] until the test resumes it.
struct Paused {
    inner: Arc<dyn IoCtx>,
    pause: Mutex<Option<Pause>>,
}

impl Paused {
    async fn at(&self, method: &'static str, object: &str) {
        let armed = {
            let mut slot = self.pause.lock().unwrap();
            let hit = slot
                .as_ref()
                .is_some_and(|p| p.method == method && (p.object.is_empty() || p.object == object));
            if hit {
                slot.take()
            } else {
                None
            }
        };
        if let Some(pause) = armed {
            let _ = pause.reached.send(());
            let _ = pause.resume.await;
        }
    }

    /// Arms a stop at `method` on `object`; returns (reached, resume).
    fn arm(
        &self,
        method: &'static str,
        object: &str,
    ) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached_tx, reached_rx) = oneshot::channel();
        let (resume_tx, resume_rx) = oneshot::channel();
        *self.pause.lock().unwrap() = Some(Pause {
            method,
            object: object.to_string(),
            reached: reached_tx,
            resume: resume_rx,
        });
        (reached_rx, resume_tx)
    }
}

#[async_trait]
impl IoCtx for Paused {
    fn pool(&self) -> &PoolInfo {
        self.inner.pool()
    }
    async fn operate(&self, object: &str, op: WriteOp) -> rados::Result<()> {
        self.inner.operate(object, op).await
    }
    async fn read(&self, object: &str, offset: u64, length: u64) -> rados::Result<Vec<u8>> {
        self.inner.read(object, offset, length).await
    }
    async fn stat(&self, object: &str) -> rados::Result<ObjectStat> {
        self.inner.stat(object).await
    }
    async fn get_xattr(&self, object: &str, name: &str) -> rados::Result<Vec<u8>> {
        self.inner.get_xattr(object, name).await
    }
    async fn get_xattrs(&self, object: &str) -> rados::Result<BTreeMap<String, Vec<u8>>> {
        self.inner.get_xattrs(object).await
    }
    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> rados::Result<OmapPage> {
        self.at("omap_get_vals", object).await;
        self.inner
            .omap_get_vals(object, start_after, prefix, max)
            .await
    }
    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> rados::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.inner.omap_get_vals_by_keys(object, keys).await
    }
    async fn list(&self, cursor: &ListCursor, max: usize) -> rados::Result<ListPage> {
        self.at("list", "").await;
        self.inner.list(cursor, max).await
    }
}

struct Fixture {
    store: Arc<Store>,
    data: Arc<Paused>,
    index: Arc<Paused>,
    bucket: BucketRecord,
    _cluster: Cluster,
    _dir: tempfile::TempDir,
}

/// A cluster of `hosts` hosts with one OSD each.
async fn cluster_of(dir: &std::path::Path, hosts: u32) -> Cluster {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = false;
    for id in 0..hosts as i32 {
        config.hosts.push(HostConfig {
            name: format!("host{id}"),
        });
        config.osds.push(OsdConfig {
            id,
            host: format!("host{id}"),
            device: format!("file:osd.{id}.img:256M"),
            size: None,
            class: "ssd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    Cluster::create(dir, config, ClusterOptions::default())
        .await
        .expect("cluster")
}

async fn fixture(gc_min_wait_s: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster_of(dir.path(), 1).await;
    let gateway = GatewayConfig {
        gc_min_wait_s,
        chunk_size_bytes: 4096,
        ..GatewayConfig::default()
    };
    let mut store = Store::open(&cluster as &dyn Rados, gateway, system_clock())
        .await
        .expect("store");
    let data = Arc::new(Paused {
        inner: store.data.clone(),
        pause: Mutex::new(None),
    });
    let index = Arc::new(Paused {
        inner: store.index.clone(),
        pause: Mutex::new(None),
    });
    store.data = data.clone();
    store.index = index.clone();
    let bucket = store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    Fixture {
        store: Arc::new(store),
        data,
        index,
        bucket,
        _cluster: cluster,
        _dir: dir,
    }
}

/// Three pieces (the chunk is 4 KiB) of `fill` bytes.
fn body(fill: u8) -> impl futures::Stream<Item = crate::error::Result<Bytes>> + Unpin {
    futures::stream::iter(vec![Ok(Bytes::from(vec![fill; 10_000]))])
}

/// A whole PUT of `key` through the store: intent, data, commit.
async fn put(f: &Fixture, key: &str, fill: u8) -> ObjectEntry {
    let tag = f.store.new_tag(8);
    let intent = f
        .store
        .begin_object_write(&f.bucket, key, &tag)
        .await
        .expect("intent");
    let pieces = write(f, &tag, key, fill).await;
    let entry = ObjectEntry {
        size: 10_000,
        pieces,
        ..ObjectEntry::default()
    };
    f.store
        .commit(&f.bucket, key, entry, Some(&intent))
        .await
        .expect("commit")
}

async fn write(f: &Fixture, tag: &str, key: &str, fill: u8) -> Vec<Piece> {
    let (pieces, size, _) = f
        .store
        .write_body(&f.bucket.id, tag, key, Body::new(body(fill), None))
        .await
        .expect("data");
    assert_eq!((pieces.len(), size), (3, 10_000));
    pieces
}

/// Whether every piece is there, whole.
async fn intact(f: &Fixture, pieces: &[Piece]) -> bool {
    for piece in pieces {
        match f.store.data.stat(&piece.oid).await {
            Ok(stat) if stat.size_bytes == piece.size => {}
            _ => return false,
        }
    }
    true
}

fn shard_of(f: &Fixture, key: &str) -> String {
    layout::index_shard_object(&f.bucket.id, layout::shard_of(key, f.bucket.shards))
}

/// Review item 1: an object committed while the pass runs (after it read the references and
/// before it listed the data pool, or the other way round) was taken for an orphan and
/// removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_committed_during_the_pass_is_not_an_orphan() {
    for stop in ["list", "omap_get_vals"] {
        let f = fixture(0).await;
        let (reached, resume) = match stop {
            "list" => f.data.arm("list", ""),
            _ => f.index.arm("omap_get_vals", &shard_of(&f, "k")),
        };
        let (report, entry) = tokio::join!(f.store.collect_orphans(0, false), async {
            reached.await.expect("the pass reached the stop");
            let entry = put(&f, "k", 1).await;
            resume.send(()).expect("resume");
            entry
        });
        let report = report.expect("gc");
        assert!(report.orphans.is_empty(), "stop at {stop}: {report:?}");
        assert!(
            intact(&f, &entry.pieces).await,
            "stop at {stop}: {report:?}"
        );
    }
}

/// Review item 2: an upload that takes longer than the grace period had its data removed
/// mid-way and was still acknowledged. Now the pass fences its intent, and its commit fails
/// (500, nothing stored) instead of acknowledging data that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_outliving_the_grace_period_fails_instead_of_losing_data() {
    let f = fixture(0).await;
    let tag = f.store.new_tag(8);
    let intent = f
        .store
        .begin_object_write(&f.bucket, "slow", &tag)
        .await
        .expect("intent");
    let pieces = write(&f, &tag, "slow", 2).await;
    let report = f.store.collect_orphans(0, false).await.expect("gc");
    assert_eq!(report.intents_fenced, 1, "{report:?}");
    let entry = ObjectEntry {
        size: 10_000,
        pieces: pieces.clone(),
        ..ObjectEntry::default()
    };
    match f
        .store
        .commit(&f.bucket, "slow", entry, Some(&intent))
        .await
    {
        Err(GatewayError::UploadCollected(_)) => {}
        Ok(_) => panic!("acknowledged an upload whose data gc removed: {report:?}"),
        Err(other) => panic!("{other}"),
    }
    assert!(f
        .store
        .entry_opt(&f.bucket, "slow")
        .await
        .expect("read")
        .is_none());

    // Within the grace period the same upload is left alone and commits.
    let tag = f.store.new_tag(8);
    let intent = f
        .store
        .begin_object_write(&f.bucket, "slow", &tag)
        .await
        .expect("intent");
    let pieces = write(&f, &tag, "slow", 3).await;
    let hour_ns = 3_600_000_000_000;
    let report = f.store.collect_orphans(hour_ns, false).await.expect("gc");
    assert_eq!(
        (report.in_flight, report.intents_fenced),
        (3, 0),
        "{report:?}"
    );
    let entry = ObjectEntry {
        size: 10_000,
        pieces: pieces.clone(),
        ..ObjectEntry::default()
    };
    f.store
        .commit(&f.bucket, "slow", entry, Some(&intent))
        .await
        .expect("commit");
    let report = f.store.collect_orphans(0, false).await.expect("gc");
    assert!(report.orphans.is_empty(), "{report:?}");
    assert!(intact(&f, &pieces).await);
}

/// Review item 3: data an overwrite replaced after the pass read the GC queue and before it
/// read the key's shard was removed at once, skipping `gc_min_wait_s` (a GET may be
/// streaming it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_an_overwrite_replaces_during_the_pass_keeps_its_wait() {
    let f = fixture(300).await;
    let old = put(&f, "k", 4).await;
    let (reached, resume) = f.index.arm("omap_get_vals", &shard_of(&f, "k"));
    let (report, _) = tokio::join!(f.store.collect_orphans(0, false), async {
        reached.await.expect("the pass reached the shard");
        put(&f, "k", 5).await;
        resume.send(()).expect("resume");
    });
    let report = report.expect("gc");
    assert_eq!(report.removed, 0, "{report:?}");
    assert!(intact(&f, &old.pieces).await, "{report:?}");
}

/// Review item 4: the report counted GC-queue keys and pieces of missing objects as
/// "referenced", so it could exceed the objects listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_counts_only_listed_objects() {
    let f = fixture(300).await;
    put(&f, "k", 6).await;
    put(&f, "k", 7).await; // the first one's 3 pieces wait in the GC queue
    let broken = ObjectEntry {
        size: 1,
        pieces: vec![Piece::whole("missing".into(), 1)],
        ..ObjectEntry::default()
    };
    f.store
        .commit(&f.bucket, "broken", broken, None)
        .await
        .expect("commit");
    let report = f.store.collect_orphans(0, true).await.expect("gc");
    assert_eq!(report.data_objects, 6, "{report:?}");
    assert_eq!(
        (report.referenced, report.awaiting_gc),
        (3, 3),
        "{report:?}"
    );
}

/// Review item 5: the gateway created its pools with min_size 1 whatever their size, so S3
/// writes were acknowledged with one copy while two of three OSDs were down. Now Ceph's
/// default, size - size/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_pools_take_cephs_min_size() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster_of(dir.path(), 3).await;
    for (size, min_size) in [(1, 1), (2, 1), (3, 2)] {
        let config = GatewayConfig {
            pool_size: size,
            ..GatewayConfig::default()
        };
        let name = format!("pool-of-{size}");
        super::super::open_pool(&cluster, &config, &name)
            .await
            .expect("pool");
        let info = cluster.pool_lookup(&name).await.expect("lookup");
        assert_eq!((info.size, info.min_size), (size, min_size));
    }
}

/// A part's intent racing Abort: the parts object gone (Abort removed it after the part
/// checked its upload), the intent is refused as `NoSuchUpload` and the object stays gone. It
/// was written anyway, which brought the object back, left behind empty once the part saw its
/// upload gone and removed its intent. An upload begun by an older version (no parts object
/// yet) still has its intent create one when asked to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_intent_after_abort_does_not_bring_the_parts_object_back() {
    let f = fixture(300).await;
    let oid = layout::upload_object(&f.bucket.id, "aborted");
    let refused = f
        .store
        .begin_part_write(&f.bucket, "aborted", "t1", false)
        .await;
    assert!(
        matches!(refused, Err(GatewayError::NoSuchUpload(_))),
        "{refused:?}"
    );
    assert!(f.store.index.stat(&oid).await.is_err(), "{oid} was created");

    let intent = f
        .store
        .begin_part_write(&f.bucket, "aborted", "t2", true)
        .await
        .expect("an older upload's first intent");
    assert_eq!(intent.oid, oid);
    assert!(f.store.index.stat(&oid).await.is_ok());
}
