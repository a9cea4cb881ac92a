//! Small-object packing against a model (a map of key -> bytes): concurrent PUTs, deletes
//! and overwrites with packing on, pack GC steps and restarts in between; a crash injected
//! at every cluster write of packing and of a GC pass (the process "dies": every later call
//! fails), then a restart that must find every acknowledged object readable and, after GC,
//! every dead byte gone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use rados::memory::MemoryRados;
use rados::WriteOp;
use rados::{IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, Rados, RadosError};
use rand::{Rng, SeedableRng};

use super::{system_clock, Body, Store};
use crate::error::Result;
use crate::layout::{self, BucketRecord, ObjectEntry};
use crate::{GatewayConfig, PackingConfig};

/// A pool whose process dies after `budget` more writes: that write and every later call
/// fail, as if the gateway had been killed there.
struct Crashing {
    inner: Arc<dyn IoCtx>,
    budget: Arc<AtomicI64>,
}

impl Crashing {
    fn alive(&self) -> rados::Result<()> {
        if self.budget.load(Ordering::SeqCst) <= 0 {
            return Err(RadosError::Io("crashed".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl IoCtx for Crashing {
    fn pool(&self) -> &PoolInfo {
        self.inner.pool()
    }
    async fn operate(&self, object: &str, op: WriteOp) -> rados::Result<()> {
        if self.budget.fetch_sub(1, Ordering::SeqCst) <= 1 {
            self.budget.store(0, Ordering::SeqCst);
            return Err(RadosError::Io("crashed".into()));
        }
        self.inner.operate(object, op).await
    }
    async fn read(&self, object: &str, offset: u64, length: u64) -> rados::Result<Vec<u8>> {
        self.alive()?;
        self.inner.read(object, offset, length).await
    }
    async fn stat(&self, object: &str) -> rados::Result<ObjectStat> {
        self.alive()?;
        self.inner.stat(object).await
    }
    async fn get_xattr(&self, object: &str, name: &str) -> rados::Result<Vec<u8>> {
        self.alive()?;
        self.inner.get_xattr(object, name).await
    }
    async fn get_xattrs(&self, object: &str) -> rados::Result<BTreeMap<String, Vec<u8>>> {
        self.alive()?;
        self.inner.get_xattrs(object).await
    }
    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> rados::Result<OmapPage> {
        self.alive()?;
        self.inner
            .omap_get_vals(object, start_after, prefix, max)
            .await
    }
    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> rados::Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.alive()?;
        self.inner.omap_get_vals_by_keys(object, keys).await
    }
    async fn list(&self, cursor: &ListCursor, max: usize) -> rados::Result<ListPage> {
        self.alive()?;
        self.inner.list(cursor, max).await
    }
}

fn config(gc_dead_percent_min: u64) -> GatewayConfig {
    GatewayConfig {
        gc_min_wait_s: 0,
        pool_pg_num: 4,
        packing: PackingConfig {
            enabled: true,
            object_size_max_bytes: 8 << 10,
            group_count_max: 8,
            group_wait_us: 2000,
            // These tests drive packs, GC and crashes, not the close rule: groups close on
            // their wait, so concurrent PUTs meet whatever the order the runtime runs them
            // in (the adaptive close has its own tests below).
            adaptive_close: false,
            gc_dead_percent_min,
            ..PackingConfig::default()
        },
        ..GatewayConfig::default()
    }
}

/// A store over `rados`; with `budget`, one that dies after that many writes.
async fn open(rados: &MemoryRados, gc_percent: u64, budget: Option<Arc<AtomicI64>>) -> Store {
    let mut store = Store::open(rados as &dyn Rados, config(gc_percent), system_clock())
        .await
        .expect("store");
    if let Some(budget) = budget {
        let wrap = |inner: Arc<dyn IoCtx>| -> Arc<dyn IoCtx> {
            Arc::new(Crashing {
                inner,
                budget: budget.clone(),
            })
        };
        store.meta = wrap(store.meta.clone());
        store.index = wrap(store.index.clone());
        store.data = wrap(store.data.clone());
    }
    store
}

/// A PUT as `do_put_object` makes it: announcement, intent, packed write, commit (or
/// abandon).
async fn put(store: &Store, bucket: &BucketRecord, key: &str, body: Vec<u8>) -> Result<()> {
    let tag = store.new_tag(8);
    let size = Some(body.len() as u64);
    let arrival = store.announce_packed(bucket, &tag, key, size).await;
    put_announced(store, bucket, key, body, &tag, arrival).await
}

/// [`put`] of a PUT announced as `arrival` under `tag`.
async fn put_announced(
    store: &Store,
    bucket: &BucketRecord,
    key: &str,
    body: Vec<u8>,
    tag: &str,
    arrival: Option<super::pack::Arrival>,
) -> Result<()> {
    let intent = store.begin_object_write_checked(bucket, key, tag).await?;
    let stream = futures::stream::iter([Ok(Bytes::from(body))]);
    let body = Body::new(stream, None);
    let (pieces, size, md5, ()) = store
        .write_checked_packed(arrival, &intent, bucket, tag, key, body, |_| Ok(()))
        .await?;
    let entry = ObjectEntry {
        size,
        etag: hex::encode(md5),
        pieces,
        ..ObjectEntry::default()
    };
    store.commit(bucket, key, entry, Some(&intent)).await?;
    Ok(())
}

/// The bytes of `key`, or `None`.
async fn get(store: &Store, bucket: &BucketRecord, key: &str) -> Result<Option<Vec<u8>>> {
    let Some(entry) = store.entry_opt(bucket, key).await? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    let mut stream = Box::pin(store.read_range(&entry.pieces, 0, entry.size));
    while let Some(bytes) = stream.next().await {
        out.extend_from_slice(&bytes?);
    }
    Ok(Some(out))
}

/// The bytes every pack object holds, and how many there are.
async fn pack_bytes(store: &Store) -> (u64, u64) {
    let mut bytes = 0;
    let mut count = 0;
    for name in store.data.list_all().await.expect("list") {
        if layout::is_pack_object(&name) {
            count += 1;
            bytes += store.data.stat(&name).await.expect("stat").size_bytes;
        }
    }
    (bytes, count)
}

fn body_of(key: &str, round: usize, size: usize) -> Vec<u8> {
    let seed = layout::shard_of(&format!("{key}/{round}"), 251) as u8;
    (0..size).map(|i| seed.wrapping_add(i as u8)).collect()
}

async fn check_model(
    store: &Store,
    bucket: &BucketRecord,
    model: &BTreeMap<String, Vec<u8>>,
    keys: usize,
) {
    for n in 0..keys {
        let key = format!("k{n}");
        let got = get(store, bucket, &key).await.expect("get");
        assert_eq!(got.as_ref(), model.get(&key), "{key}");
    }
}

/// GC passes with every dead range counted, until nothing is left to rewrite.
async fn gc_to_the_end(store: &Store) {
    for _ in 0..10 {
        let report = store.pack_gc().await.expect("pack gc");
        store.reclaim().await.expect("reclaim");
        if report.packs_rewritten == 0 && report.jobs_failed == 0 {
            return;
        }
    }
    panic!("the pack GC does not settle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn packing_matches_a_map_through_deletes_overwrites_gc_and_restarts() {
    let rados = MemoryRados::new();
    let mut store = open(&rados, 30, None).await;
    store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    const KEYS: usize = 40;
    for round in 0..12 {
        let bucket = store.bucket("b").await.expect("bucket");
        // A batch of concurrent changes to distinct keys (so they form groups).
        let mut changes = Vec::new();
        for n in 0..KEYS {
            if rng.gen_bool(0.5) {
                let key = format!("k{n}");
                let body = rng
                    .gen_bool(0.7)
                    .then(|| body_of(&key, round, rng.gen_range(1..6000)));
                changes.push((key, body));
            }
        }
        let results = futures::future::join_all(changes.iter().map(|(key, body)| {
            let store = &store;
            let bucket = &bucket;
            async move {
                match body {
                    Some(body) => put(store, bucket, key, body.clone()).await,
                    None => store.delete(bucket, key).await.map(|_| ()),
                }
            }
        }))
        .await;
        for ((key, body), result) in changes.into_iter().zip(results) {
            result.expect("change");
            match body {
                Some(body) => model.insert(key, body),
                None => model.remove(&key),
            };
        }
        check_model(&store, &bucket, &model, KEYS).await;
        match round % 3 {
            0 => {
                store.pack_gc().await.expect("pack gc");
            }
            1 => {
                drop(store);
                store = open(&rados, 30, None).await;
            }
            _ => {}
        }
        check_model(&store, &bucket, &model, KEYS).await;
    }
    // With every dead byte counted, the GC leaves packs holding the live bytes alone.
    let store = open(&rados, 0, None).await;
    let bucket = store.bucket("b").await.expect("bucket");
    gc_to_the_end(&store).await;
    check_model(&store, &bucket, &model, KEYS).await;
    let live: u64 = model.values().map(|v| v.len() as u64).sum();
    let (packed, packs) = pack_bytes(&store).await;
    assert!(packs > 0);
    assert_eq!(packed, live, "pack bytes after GC are the live bytes");
    assert_eq!(store.pack_gc_status().await.expect("status").dead_bytes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_of_one_key_in_one_pack_leave_one_whole_object() {
    let rados = MemoryRados::new();
    let store = open(&rados, 1, None).await;
    store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let bucket = store.bucket("b").await.expect("bucket");
    let bodies: Vec<Vec<u8>> = (0..8).map(|n| vec![n as u8; 1000 + n]).collect();
    let results = futures::future::join_all(
        bodies
            .iter()
            .map(|b| put(&store, &bucket, "same", b.clone())),
    )
    .await;
    assert!(results.iter().all(|r| r.is_ok()));
    assert!(store.stats().packs_written < 8, "the PUTs shared a pack");
    let got = get(&store, &bucket, "same")
        .await
        .expect("get")
        .expect("there");
    assert!(bodies.contains(&got), "one PUT's bytes, whole");
    // The seven others are dead and the GC takes them.
    assert_eq!(store.pack_gc_status().await.expect("status").dead_ranges, 7);
    gc_to_the_end(&store).await;
    assert_eq!(pack_bytes(&store).await.0, got.len() as u64);
    assert_eq!(get(&store, &bucket, "same").await.expect("get"), Some(got));
}

/// The state both crash tests start from: 24 packed objects, every other one deleted.
async fn half_deleted(rados: &MemoryRados) -> BTreeMap<String, Vec<u8>> {
    let store = open(rados, 30, None).await;
    store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let bucket = store.bucket("b").await.expect("bucket");
    let mut model = BTreeMap::new();
    let keys: Vec<String> = (0..24).map(|n| format!("k{n}")).collect();
    futures::future::join_all(keys.iter().map(|key| {
        let body = body_of(key, 0, 3000);
        model.insert(key.clone(), body.clone());
        let store = &store;
        let bucket = &bucket;
        async move { put(store, bucket, key, body).await.expect("put") }
    }))
    .await;
    for key in keys.iter().step_by(2) {
        store.delete(&bucket, key).await.expect("delete");
        model.remove(key);
    }
    model
}

/// After a crash: a fresh process finds every acknowledged object, and orphan collection
/// plus GC passes reclaim every dead byte.
async fn recovers(rados: &MemoryRados, model: &BTreeMap<String, Vec<u8>>, budget: i64) {
    let store = open(rados, 0, None).await;
    let bucket = store.bucket("b").await.expect("bucket");
    check_model(&store, &bucket, model, 24).await;
    store.collect_orphans(0, false).await.expect("orphans");
    gc_to_the_end(&store).await;
    store.reclaim().await.expect("reclaim");
    check_model(&store, &bucket, model, 24).await;
    let live: u64 = model.values().map(|v| v.len() as u64).sum();
    assert_eq!(
        pack_bytes(&store).await.0,
        live,
        "crash after {budget} writes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_at_any_write_of_a_gc_pass_loses_nothing_and_leaks_nothing() {
    let mut budget = 1;
    loop {
        let rados = MemoryRados::new();
        let model = half_deleted(&rados).await;
        let counter = Arc::new(AtomicI64::new(budget));
        let dying = open(&rados, 30, Some(counter.clone())).await;
        let finished = dying.pack_gc().await.is_ok_and(|r| r.jobs_failed == 0)
            && counter.load(Ordering::SeqCst) > 0;
        drop(dying);
        recovers(&rados, &model, budget).await;
        if finished {
            assert!(budget > 3, "the pass wrote something");
            return;
        }
        budget += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_at_any_write_of_packed_puts_loses_no_acknowledged_object() {
    let mut budget = 1;
    loop {
        let rados = MemoryRados::new();
        let mut model = half_deleted(&rados).await;
        let counter = Arc::new(AtomicI64::new(budget));
        let dying = open(&rados, 30, Some(counter.clone())).await;
        let bucket = {
            let store = open(&rados, 30, None).await;
            store.bucket("b").await.expect("bucket")
        };
        let keys: Vec<String> = (0..24).map(|n| format!("k{n}")).collect();
        let results = futures::future::join_all(keys.iter().map(|key| {
            let dying = &dying;
            let bucket = &bucket;
            async move { put(dying, bucket, key, body_of(key, 1, 2000)).await }
        }))
        .await;
        let finished = counter.load(Ordering::SeqCst) > 0;
        drop(dying);
        // Acknowledged PUTs must be there; the others may or may not (a commit may have
        // happened before the reply was lost): the model takes what the store says for them.
        let store = open(&rados, 0, None).await;
        for (key, result) in keys.iter().zip(results) {
            let got = get(&store, &bucket, key).await.expect("get");
            if result.is_ok() {
                assert_eq!(got, Some(body_of(key, 1, 2000)), "{key} acknowledged");
            }
            match got {
                Some(bytes) => {
                    assert!(bytes == body_of(key, 1, 2000) || Some(&bytes) == model.get(key));
                    model.insert(key.clone(), bytes);
                }
                None => {
                    model.remove(key);
                }
            }
        }
        drop(store);
        recovers(&rados, &model, budget).await;
        if finished {
            return;
        }
        budget += 1;
    }
}

/// A cluster in memory whose pools name acting sets: placement group `pg`'s primary is OSD
/// `pg % 2`.
struct TwoPrimaries(MemoryRados);

#[async_trait]
impl Rados for TwoPrimaries {
    async fn pool_create(&self, spec: rados::PoolSpec) -> rados::Result<PoolInfo> {
        self.0.pool_create(spec).await
    }
    async fn pool_delete(&self, name: &str) -> rados::Result<()> {
        self.0.pool_delete(name).await
    }
    async fn pool_list(&self) -> rados::Result<Vec<PoolInfo>> {
        self.0.pool_list().await
    }
    async fn pool_lookup(&self, name: &str) -> rados::Result<PoolInfo> {
        self.0.pool_lookup(name).await
    }
    async fn cluster_stats(&self) -> rados::Result<rados::ClusterStats> {
        self.0.cluster_stats().await
    }
    async fn io_ctx(&self, pool: &str) -> rados::Result<Arc<dyn IoCtx>> {
        self.0.io_ctx(pool).await
    }
    async fn pg_acting_sets(&self, pool: &str) -> rados::Result<Vec<Vec<i32>>> {
        let pg_num = self.0.pool_lookup(pool).await?.pg_num as i32;
        Ok((0..pg_num).map(|pg| vec![pg % 2, (pg + 1) % 2]).collect())
    }
}

/// 32 concurrent PUTs over 8 placement groups with 2 primaries, groups of 8: they meet in
/// 2 groups (by PG they would form 8 groups of about 4), and every pack lands in a placement
/// group whose primary is its members' primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn packs_group_by_primary_osd_and_land_on_it() {
    let rados = Arc::new(TwoPrimaries(MemoryRados::new()));
    let mut config = config(30);
    config.pool_pg_num = 8;
    config.packing.group_wait_us = 300_000;
    config.packing.adaptive_close = false;
    let store = Store::open(rados.as_ref(), config, system_clock())
        .await
        .expect("store")
        .with_placement_source(rados.clone());
    store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let bucket = store.bucket("b").await.expect("bucket");
    let keys: Vec<String> = (0..32).map(|n| format!("k{n}")).collect();
    let results = futures::future::join_all(
        keys.iter()
            .map(|key| put(&store, &bucket, key, body_of(key, 0, 900))),
    )
    .await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let stats = store.stats();
    assert_eq!(stats.objects_packed, 32);
    // n0 + n1 = 32 objects in groups of at most 8: at most 5 packs, at least 3 closed full.
    assert!(stats.packs_written <= 5, "{} packs", stats.packs_written);
    assert!(
        stats.packs_closed_count >= 3,
        "{} closed full",
        stats.packs_closed_count
    );
    assert_eq!(
        stats.packs_closed_count + stats.packs_closed_wait + stats.packs_closed_bytes,
        stats.packs_written
    );
    let primary = |name: &str| super::pack::placement_group(name, 8) % 2;
    let mut members_seen = 0;
    for name in store.data.list_all().await.expect("list") {
        if !layout::is_pack_object(&name) {
            continue;
        }
        for member in store.pack_members(&name).await.expect("members").values() {
            let head = format!("{}{}", member.writer, member.key);
            assert_eq!(primary(&head), primary(&name), "{head} in {name}");
            members_seen += 1;
        }
    }
    assert_eq!(members_seen, 32);
    for n in 0..32 {
        let key = format!("k{n}");
        let got = get(&store, &bucket, &key).await.expect("get");
        assert_eq!(got, Some(body_of(&key, 0, 900)));
    }
}

/// A pack written before member lists (one omap record per member, keyed by offset) is
/// still read: its members are the same, and the GC rewrites it (into a pack with a list)
/// without losing a live object.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn packs_with_one_record_per_member_are_still_read_and_collected() {
    let rados = MemoryRados::new();
    let store = open(&rados, 1, None).await;
    store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let bucket = store.bucket("b").await.expect("bucket");
    let keys: Vec<String> = (0..16).map(|n| format!("k{n}")).collect();
    let results = futures::future::join_all(
        keys.iter()
            .map(|key| put(&store, &bucket, key, body_of(key, 0, 700))),
    )
    .await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    // Every pack back to the old form.
    let mut packs = 0;
    for name in store.data.list_all().await.expect("list") {
        if !layout::is_pack_object(&name) {
            continue;
        }
        let members = store.pack_members(&name).await.expect("members");
        let records = members
            .iter()
            .map(|(&offset, member)| (layout::pack_member_key(offset), layout::encode(member)))
            .collect();
        store.data.omap_clear(&name).await.expect("clear");
        store.data.omap_set(&name, records).await.expect("set");
        assert_eq!(store.pack_members(&name).await.expect("old form"), members);
        packs += 1;
    }
    assert!(packs > 0);
    let mut model: BTreeMap<String, Vec<u8>> = keys
        .iter()
        .map(|k| (k.clone(), body_of(k, 0, 700)))
        .collect();
    for key in keys.iter().step_by(2) {
        store.delete(&bucket, key).await.expect("delete");
        model.remove(key);
    }
    gc_to_the_end(&store).await;
    check_model(&store, &bucket, &model, keys.len()).await;
    assert_eq!(
        pack_bytes(&store).await.0,
        8 * 700,
        "the dead half reclaimed"
    );
    let mut listed = 0;
    for name in store.data.list_all().await.expect("list") {
        if layout::is_pack_object(&name) {
            let omap = store.omap_all(&store.data, &name).await.expect("omap");
            if omap.iter().any(|(key, _)| key == layout::PACK_MEMBERS_KEY) {
                assert_eq!(omap.len(), 1, "a rewritten pack holds one member list");
                listed += 1;
            }
        }
    }
    assert!(listed > 0, "the GC wrote its packs with member lists");
}

/// A GC pass says how many old packs it removed (no GC wait) or queued (a wait): the
/// counter `strata bench pack` prints, which read only the queue and so said 0 while the
/// packs were already gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gc_pass_counts_the_old_packs_it_removed_or_queued() {
    for wait_s in [0, 3600] {
        let rados = MemoryRados::new();
        half_deleted(&rados).await;
        let (_, packs_before) = pack_bytes(&open(&rados, 30, None).await).await;
        let store = Store::open(
            &rados as &dyn Rados,
            GatewayConfig {
                gc_min_wait_s: wait_s,
                ..config(30)
            },
            system_clock(),
        )
        .await
        .expect("store");
        let report = store.pack_gc().await.expect("pack gc");
        assert!(report.packs_rewritten > 0, "{report:?}");
        let (_, packs_after) = pack_bytes(&store).await;
        if wait_s == 0 {
            assert_eq!(report.old_packs_removed, report.packs_rewritten);
            assert_eq!(report.old_packs_queued, 0);
            // Each rewritten pack was replaced by one target (or none, all dead): the old
            // ones are gone.
            assert!(
                packs_after <= packs_before,
                "{packs_before} -> {packs_after}"
            );
        } else {
            assert_eq!(report.old_packs_removed, 0);
            assert_eq!(report.old_packs_queued, report.packs_rewritten);
            assert_eq!(
                store.gc_backlog().await.expect("backlog").objects,
                report.packs_rewritten
            );
        }
    }
}

/// A store over two primaries (8 PGs) whose groups close adaptively, capped at 60 s (a
/// group that closed on its cap would stall the test and fail it).
async fn adaptive_store(rados: &Arc<TwoPrimaries>) -> (Store, BucketRecord) {
    let mut config = config(30);
    config.pool_pg_num = 8;
    config.packing.adaptive_close = true;
    config.packing.group_wait_us = 60_000_000;
    let store = Store::open(rados.as_ref(), config, system_clock())
        .await
        .expect("store")
        .with_placement_source(rados.clone());
    store
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let bucket = store.bucket("b").await.expect("bucket");
    (store, bucket)
}

/// The primary (of 2) the head of `key` written under `tag` maps to.
fn primary_of(bucket: &BucketRecord, tag: &str, key: &str) -> u32 {
    super::pack::placement_group(&layout::piece_object(&bucket.id, tag, key, 0), 8) % 2
}

/// Six PUTs announced together: each primary's group holds until the last PUT announced to
/// it has joined, then closes at once (one pack per primary, none on its wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_closes_once_the_puts_announced_to_it_have_joined() {
    let rados = Arc::new(TwoPrimaries(MemoryRados::new()));
    let (store, bucket) = adaptive_store(&rados).await;
    let keys: Vec<String> = (0..6).map(|n| format!("k{n}")).collect();
    let mut announced = Vec::new();
    for key in &keys {
        let tag = store.new_tag(8);
        let arrival = store.announce_packed(&bucket, &tag, key, Some(900)).await;
        assert!(arrival.is_some(), "a small PUT is announced");
        announced.push((key, tag, arrival));
    }
    let primaries: std::collections::BTreeSet<u32> = announced
        .iter()
        .map(|(key, tag, _)| primary_of(&bucket, tag, key))
        .collect();
    let puts = announced.into_iter().map(|(key, tag, arrival)| {
        let store = &store;
        let bucket = &bucket;
        async move {
            let body = body_of(key, 0, 900);
            put_announced(store, bucket, key, body, &tag, arrival).await
        }
    });
    let results = futures::future::join_all(puts).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let stats = store.stats();
    assert_eq!(stats.objects_packed, 6);
    assert_eq!(stats.packs_written, primaries.len() as u64);
    assert_eq!(stats.packs_closed_idle, stats.packs_written);
    assert_eq!(stats.packs_closed_wait, 0);
    for key in &keys {
        let got = get(&store, &bucket, key).await.expect("get");
        assert_eq!(got, Some(body_of(key, 0, 900)));
    }
}

/// A PUT announced to a group that never joins it (it failed, or was not packed after all)
/// stops holding the group when its announcement is dropped: the group closes then, not at
/// its cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_put_that_gives_up_stops_holding_its_group() {
    let rados = Arc::new(TwoPrimaries(MemoryRados::new()));
    let (store, bucket) = adaptive_store(&rados).await;
    let tag = store.new_tag(8);
    let primary = primary_of(&bucket, &tag, "joins");
    let other_tag = (0..)
        .map(|_| store.new_tag(8))
        .find(|other| primary_of(&bucket, other, "gives-up") == primary)
        .expect("a tag on the same primary");
    let joins = store
        .announce_packed(&bucket, &tag, "joins", Some(900))
        .await;
    let gives_up = store
        .announce_packed(&bucket, &other_tag, "gives-up", Some(900))
        .await;
    assert!(gives_up.is_some());
    let body = body_of("joins", 0, 900);
    let put = put_announced(&store, &bucket, "joins", body, &tag, joins);
    let give_up = async {
        // The first PUT joins meanwhile, and its group holds for the second.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(store.stats().packs_written, 0, "the group held");
        drop(gives_up);
    };
    let (result, ()) = futures::join!(put, give_up);
    result.expect("put");
    let stats = store.stats();
    assert_eq!((stats.packs_written, stats.packs_closed_idle), (1, 1));
    assert_eq!(stats.packs_closed_wait, 0);
    let got = get(&store, &bucket, "joins").await.expect("get");
    assert_eq!(got, Some(body_of("joins", 0, 900)));
}

/// Concurrent PUTs to one index shard: their write intents and commits share writes
/// (`index_batch`), fewer writes than operations, and every object reads back; with
/// batches of one, as before, each operation is its own write.
#[tokio::test]
async fn concurrent_puts_to_one_shard_share_index_writes() {
    for ops_max in [super::index_batch::BATCH_OPS_MAX, 1] {
        let rados = MemoryRados::new();
        let config = GatewayConfig {
            index_shards: 1,
            ..config(30)
        };
        let mut store = Store::open(&rados as &dyn Rados, config, system_clock())
            .await
            .expect("store");
        store.index_batcher = Arc::new(super::index_batch::IndexBatcher::new(ops_max));
        store
            .create_bucket("b", "owner", "", Vec::new(), "")
            .await
            .expect("bucket");
        let bucket = store.bucket("b").await.expect("bucket");
        let keys: Vec<String> = (0..32).map(|n| format!("k{n}")).collect();
        let before = store.stats();
        let results = futures::future::join_all(
            keys.iter()
                .map(|key| put(&store, &bucket, key, body_of(key, 0, 3000))),
        )
        .await;
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        let stats = store.stats();
        let ops = stats.index_ops - before.index_ops;
        let writes = stats.index_writes - before.index_writes;
        assert!(ops >= 64, "an intent and a commit each: {ops}");
        if ops_max == 1 {
            assert_eq!(writes, ops);
        } else {
            assert!(
                writes < ops / 2,
                "{writes} writes for {ops} index operations"
            );
        }
        for key in &keys {
            let got = get(&store, &bucket, key).await.expect("get");
            assert_eq!(got, Some(body_of(key, 0, 3000)), "{key}");
        }
    }
}
