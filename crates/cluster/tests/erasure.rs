//! Erasure-coded pools: the object API against the contract's in-memory model with OSDs
//! failing and returning, torn writes, recovery of a lost OSD's shards, deep scrub, omap
//! refused, persistence of the pool across a restart.

mod common;

use cluster::ec::object::shard_collection;
use cluster::ec::ErasureProfile;
use cluster::{Cluster, ClusterOptions};
use rados::memory::MemoryRados;
use rados::{IoCtx, PoolSpec, Rados, RadosError, WriteOp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn options() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

/// Six hosts of one OSD each, `backing` devices.
fn six_hosts(backing: &str) -> cluster::ClusterConfig {
    let mut config = common::small_config(6, 1, backing, 3);
    config.pools.clear();
    config
}

/// [`six_hosts`] on memory and a seventh host of one OSD (osd.6), so CRUSH has somewhere to put
/// the shards of an OSD marked out.
fn six_hosts_and_a_spare() -> cluster::ClusterConfig {
    let mut config = six_hosts("mem");
    config.hosts.push(cluster::HostConfig {
        name: "host6".into(),
    });
    let mut spare = config.osds[0].clone();
    spare.id = 6;
    spare.host = "host6".into();
    config.osds.push(spare);
    config
}

fn profile(k: u32, m: u32, unit: u64) -> ErasureProfile {
    ErasureProfile {
        stripe_unit_bytes: unit,
        ..ErasureProfile::new(k, m)
    }
}

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

/// A random op of the kinds an EC pool serves, sized around a few stripes of 4 x 64 bytes.
fn random_op(rng: &mut ChaCha8Rng, seed: u64) -> WriteOp {
    let data = |rng: &mut ChaCha8Rng| {
        let length = rng.gen_range(0..1200);
        common::content(seed, length)
    };
    match rng.gen_range(0..10) {
        0 | 1 => WriteOp::new().write_full(data(rng)),
        2 | 3 => WriteOp::new().write(rng.gen_range(0..1500), data(rng)),
        4 => WriteOp::new().append(data(rng)),
        5 => WriteOp::new().truncate(rng.gen_range(0..1500)),
        6 => WriteOp::new().zero(rng.gen_range(0..1200), rng.gen_range(0..700)),
        7 => WriteOp::new().remove(),
        8 => WriteOp::new()
            .set_xattr(format!("x{}", rng.gen_range(0..3)), data(rng))
            .write(rng.gen_range(0..400), data(rng)),
        _ => WriteOp::new()
            .truncate(rng.gen_range(0..900))
            .write(rng.gen_range(0..1500), data(rng))
            .remove_xattr("x1"),
    }
}

fn same_outcome(ours: &Result<(), RadosError>, model: &Result<(), RadosError>) -> bool {
    match (ours, model) {
        (Ok(()), Ok(())) => true,
        (Err(a), Err(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => false,
    }
}

async fn verify(ours: &dyn IoCtx, model: &dyn IoCtx, context: &str, rng: &mut ChaCha8Rng) {
    for name in NAMES {
        let expected = model.read_full(name).await;
        let got = ours.read_full(name).await;
        match (&expected, &got) {
            (Ok(a), Ok(b)) => assert!(a == b, "{context}: data of {name} differs"),
            (Err(RadosError::NotFound(_)), Err(RadosError::NotFound(_))) => continue,
            _ => panic!("{context}: {name}: model {expected:?}, cluster {got:?}"),
        }
        let size = expected.map(|data| data.len() as u64).unwrap_or(0);
        let offset = rng.gen_range(0..size + 10);
        let length = rng.gen_range(0..600);
        assert_eq!(
            ours.read(name, offset, length).await.unwrap(),
            model.read(name, offset, length).await.unwrap(),
            "{context}: {name} [{offset}+{length}]"
        );
        assert_eq!(ours.stat(name).await.unwrap().size_bytes, size);
        assert_eq!(
            ours.get_xattrs(name).await.unwrap(),
            model.get_xattrs(name).await.unwrap(),
            "{context}: xattrs of {name}"
        );
    }
    let mut listed = Vec::new();
    let mut cursor = rados::ListCursor::default();
    loop {
        let page = ours.list(&cursor, 4).await.unwrap();
        listed.extend(page.objects);
        match page.next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    listed.sort();
    let mut expected = Vec::new();
    for name in NAMES {
        if model.stat(name).await.is_ok() {
            expected.push(name.to_string());
        }
    }
    assert_eq!(listed, expected, "{context}: listing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_ops_match_the_model_while_osds_fail_and_return() {
    for seed in [1u64, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let cluster = Cluster::create(dir.path(), six_hosts("mem"), options())
            .await
            .unwrap();
        cluster
            .create_erasure_pool("ec", &profile(4, 2, 64), 4)
            .unwrap();
        let ours = cluster.io_ctx("ec").await.unwrap();
        let memory = MemoryRados::new();
        memory.pool_create(PoolSpec::new("m")).await.unwrap();
        let model = memory.io_ctx("m").await.unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut down: Vec<i32> = Vec::new();
        for step in 0..400u64 {
            let context = format!("seed {seed} step {step} down {down:?}");
            if rng.gen_ratio(1, 25) {
                if down.len() < 2 && rng.gen_bool(0.6) {
                    let osd = rng.gen_range(0..6);
                    if !down.contains(&osd) {
                        cluster.mark_down(osd).unwrap();
                        down.push(osd);
                    }
                } else if let Some(osd) = down.pop() {
                    cluster.mark_up(osd).unwrap();
                    if rng.gen_bool(0.5) {
                        // Whole only once no OSD is down.
                        let whole = cluster.recover(10).await.unwrap();
                        assert!(whole || !down.is_empty(), "{context}: recovery");
                    }
                }
            }
            let name = NAMES[rng.gen_range(0..NAMES.len())];
            let op = random_op(&mut rng, seed * 1000 + step);
            let got = ours.operate(name, op.clone()).await;
            if down.len() >= 2 {
                // Fewer than min_size (k+1 = 5) positions may be up: a write must be
                // refused for such a PG, and then the model does not take it.
                if let Err(RadosError::Degraded { .. }) = got {
                    continue;
                }
            }
            let expected = model.operate(name, op).await;
            assert!(
                same_outcome(&got, &expected),
                "{context}: {name}: cluster {got:?}, model {expected:?}"
            );
            if step % 40 == 39 {
                verify(&*ours, &*model, &context, &mut rng).await;
            }
        }
        for osd in down.drain(..) {
            cluster.mark_up(osd).unwrap();
        }
        assert!(cluster.recover(10).await.unwrap(), "seed {seed}: recovery");
        verify(&*ours, &*model, &format!("seed {seed} end"), &mut rng).await;
        let report = cluster.scrub(Some("ec"), false).await.unwrap();
        assert!(report.is_clean(), "seed {seed}: scrub {report:?}");
        assert_eq!(report.pgs, 4);
        cluster.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn omap_is_refused_naming_the_pool_type() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), six_hosts("mem"), options())
        .await
        .unwrap();
    cluster
        .create_erasure_pool("ec", &ErasureProfile::new(4, 2), 8)
        .unwrap();
    let io = cluster.io_ctx("ec").await.unwrap();
    let error = io
        .operate(
            "o",
            WriteOp::new().omap_set(vec![(b"k".to_vec(), b"v".to_vec())]),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, RadosError::NotSupported(_)), "{error:?}");
    assert!(error.to_string().contains("erasure-coded"), "{error}");
    assert_eq!(error.errno(), rados::errno::EOPNOTSUPP);
    // Nothing of the op applied.
    assert!(matches!(io.stat("o").await, Err(RadosError::NotFound(_))));
    assert!(io.omap_get_vals("o", None, b"", 10).await.is_err());
    cluster.shutdown().await.unwrap();
}

/// The OSDs holding `object`'s shards, by position.
fn shard_osds(cluster: &Cluster, object: &str) -> (osdmap::PgId, Vec<i32>) {
    let place = cluster.locate("ec", object).unwrap();
    (place.pg, place.up.clone())
}

/// Rewrites one shard's store object directly with a new version and other bytes, as a
/// write that reached only this shard before a crash would leave it (no undo record: it
/// cannot roll back).
async fn forge_shard(
    cluster: &Cluster,
    pg: osdmap::PgId,
    osd: i32,
    position: usize,
    object: &str,
    version: u64,
) {
    let mut transaction = store::Transaction::new(1);
    let id = store::ObjectId::new(shard_collection(pg, position), object);
    transaction.write(&id, 0, vec![0xAB; 64]);
    transaction.set_xattr(&id, "_strata.v", version.to_le_bytes().to_vec());
    transaction.remove_xattr(&id, "_strata.ec.undo");
    cluster
        .osd(osd)
        .unwrap()
        .store()
        .apply(transaction)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_writes_roll_back_or_forward_never_mix() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), six_hosts("mem"), options())
        .await
        .unwrap();
    cluster
        .create_erasure_pool("ec", &profile(4, 2, 64), 4)
        .unwrap();
    let io = cluster.io_ctx("ec").await.unwrap();
    let old = common::content(1, 1000);
    io.write_full("o", &old).await.unwrap();
    let version = io.stat("o").await.unwrap().version;
    // A partial overwrite: the new version on every shard, with undo records.
    io.write("o", 100, &[7u8; 300]).await.unwrap();
    let mut new = old.clone();
    new[100..400].fill(7);
    assert_eq!(io.read_full("o").await.unwrap(), new);
    let (pg, osds) = shard_osds(&cluster, "o");
    assert_eq!(osds.len(), 6);

    // Roll back: put three shards back at the old version by hand (as if the overwrite had
    // reached only the other three): the three at the new version roll back with their
    // undo records, and the old content reads back whole.
    for (position, &osd) in osds.iter().enumerate().take(3) {
        let id = store::ObjectId::new(shard_collection(pg, position), "o");
        let osd = cluster.osd(osd).unwrap();
        let undo = osd
            .store()
            .get_xattr(&id.collection, "o", "_strata.ec.undo")
            .await
            .unwrap();
        let undo = cluster::ec::shard::Undo::decode(&undo).unwrap();
        assert_eq!(undo.prev_version, version);
        let mut transaction = store::Transaction::new(1);
        if !undo.bytes.is_empty() {
            transaction.write(&id, undo.offset_bytes, undo.bytes.clone());
        }
        transaction.truncate(&id, undo.prev_shard_bytes);
        transaction.set_xattr(&id, "_strata.v", version.to_le_bytes().to_vec());
        transaction.remove_xattr(&id, "_strata.ec.undo");
        osd.store().apply(transaction).await.unwrap();
    }
    assert_eq!(io.read_full("o").await.unwrap(), old, "rolled back");
    assert_eq!(io.stat("o").await.unwrap().version, version);
    let report = cluster.scrub(Some("ec"), false).await.unwrap();
    assert!(report.is_clean(), "after rollback {report:?}");

    // Roll forward: a version that reached four shards (k) wins; the other two are rebuilt.
    io.write("o", 0, &[9u8; 64]).await.unwrap();
    let mut newer = old.clone();
    newer[..64].fill(9);
    let newest = io.stat("o").await.unwrap().version;
    for (position, &osd) in osds.iter().enumerate().skip(4) {
        forge_shard(&cluster, pg, osd, position, "o", version).await;
    }
    assert_eq!(io.read_full("o").await.unwrap(), newer, "rolled forward");
    assert_eq!(io.stat("o").await.unwrap().version, newest);

    // A version on three shards that cannot roll back, two positions down: undecidable,
    // the read waits (Degraded) instead of returning a mix.
    for (position, &osd) in osds.iter().enumerate().take(3) {
        forge_shard(&cluster, pg, osd, position, "o", newest + 100).await;
    }
    cluster.mark_down(osds[3]).unwrap();
    cluster.mark_down(osds[4]).unwrap();
    let read = io.read_full("o").await;
    assert!(matches!(read, Err(RadosError::Degraded { .. })), "{read:?}");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_osds_shards_are_rebuilt_and_scrub_finds_bad_parity() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), six_hosts_and_a_spare(), options())
        .await
        .unwrap();
    cluster
        .create_erasure_pool("ec", &profile(4, 2, 4096), 8)
        .unwrap();
    let io = cluster.io_ctx("ec").await.unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("obj{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        io.write_full(name, &common::content(i as u64, 10_000 + i * 1000))
            .await
            .unwrap();
    }
    // osd.2 fails for good: down and out. Its positions go to other OSDs, which hold
    // nothing yet: reads decode around them.
    cluster.mark_down(2).unwrap();
    cluster.mark_out(2).unwrap();
    assert!(cluster.recover(20).await.unwrap());
    // Two more down: only rebuilt shards can make k = 4 now for PGs that held osd.2.
    cluster.mark_down(0).unwrap();
    cluster.mark_down(1).unwrap();
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            io.read_full(name).await.unwrap(),
            common::content(i as u64, 10_000 + i * 1000),
            "{name}"
        );
    }
    cluster.mark_up(0).unwrap();
    cluster.mark_up(1).unwrap();
    assert!(cluster.recover(20).await.unwrap());

    // A shard's bytes changed behind the cluster's back (its checksums rewritten with it):
    // deep scrub finds the shard by the parity, repairs it.
    let (pg, osds) = shard_osds(&cluster, "obj3");
    let mut transaction = store::Transaction::new(1);
    transaction.write(
        &store::ObjectId::new(shard_collection(pg, 1), "obj3"),
        10,
        vec![0x55; 5],
    );
    cluster
        .osd(osds[1])
        .unwrap()
        .store()
        .apply(transaction)
        .await
        .unwrap();
    let report = cluster.scrub(Some("ec"), false).await.unwrap();
    assert_eq!(report.inconsistencies.len(), 1, "{report:?}");
    assert_eq!(report.inconsistencies[0].osd, osds[1]);
    assert_eq!(report.inconsistencies[0].kind, "differs");
    let report = cluster.scrub(Some("ec"), true).await.unwrap();
    assert!(report.inconsistencies[0].repaired);
    assert!(cluster.scrub(Some("ec"), false).await.unwrap().is_clean());
    assert_eq!(
        io.read_full("obj3").await.unwrap(),
        common::content(3, 13_000)
    );
    cluster.shutdown().await.unwrap();
}

/// The shard collections of pool "ec" on `osd`, by name.
fn shard_collections_on(cluster: &Cluster, osd: i32) -> Vec<String> {
    let pool = cluster.locate("ec", "any").unwrap().pg.pool;
    cluster
        .osd(osd)
        .unwrap()
        .store()
        .list_collections()
        .into_keys()
        .filter(|name| {
            cluster::ec::object::parse_shard_collection(name).is_some_and(|(pg, _)| pg.pool == pool)
        })
        .collect()
}

/// Every shard collection on every OSD is one its OSD serves now (the PG's up set has that
/// OSD at that position).
fn only_served_shards_remain(cluster: &Cluster, osds: &[i32]) {
    for &osd in osds {
        for name in shard_collections_on(cluster, osd) {
            let (pg, position) = cluster::ec::object::parse_shard_collection(&name).unwrap();
            let up = cluster.osd_map().pg_to_up_acting(pg).up;
            assert_eq!(
                up.get(position),
                Some(&osd),
                "osd.{osd} still holds {name} (up set {up:?})"
            );
        }
    }
}

/// An OSD that returns after its shards were rebuilt elsewhere, and the spare that held them
/// meanwhile, keep no shards of positions they no longer serve once the PGs are whole again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_left_at_old_positions_are_removed_once_the_pg_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), six_hosts_and_a_spare(), options())
        .await
        .unwrap();
    cluster
        .create_erasure_pool("ec", &profile(4, 2, 4096), 8)
        .unwrap();
    let io = cluster.io_ctx("ec").await.unwrap();
    let names: Vec<String> = (0..40).map(|i| format!("obj{i}")).collect();
    let content = |i: usize| common::content(i as u64, 10_000 + i * 1000);
    for (i, name) in names.iter().enumerate() {
        io.write_full(name, &content(i)).await.unwrap();
    }
    let all: Vec<i32> = (0..7).collect();
    only_served_shards_remain(&cluster, &all);
    let before = shard_collections_on(&cluster, 2);
    assert!(!before.is_empty(), "osd.2 holds shards");

    // osd.2 down and out: the spare rebuilds its positions.
    cluster.mark_down(2).unwrap();
    cluster.mark_out(2).unwrap();
    assert!(cluster.recover(20).await.unwrap());
    assert!(
        !shard_collections_on(&cluster, 6).is_empty(),
        "the spare took positions"
    );
    // osd.2 back up but still out: what it kept is stale and not needed.
    cluster.mark_up(2).unwrap();
    assert!(cluster.recover(20).await.unwrap());
    assert_eq!(shard_collections_on(&cluster, 2), Vec::<String>::new());
    only_served_shards_remain(&cluster, &all);
    for (i, name) in names.iter().enumerate() {
        assert_eq!(io.read_full(name).await.unwrap(), content(i), "{name}");
    }

    // osd.2 in again: its positions come back to it (rebuilt there), and the spare's copies go.
    cluster.mark_in(2).unwrap();
    assert!(cluster.recover(20).await.unwrap());
    assert_eq!(shard_collections_on(&cluster, 2).len(), before.len());
    only_served_shards_remain(&cluster, &all);
    // With every position served and nothing else kept, a read needs the rebuilt shards:
    // two OSDs down leaves exactly k.
    cluster.mark_down(0).unwrap();
    cluster.mark_down(1).unwrap();
    for (i, name) in names.iter().enumerate() {
        assert_eq!(io.read_full(name).await.unwrap(), content(i), "{name}");
    }
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_persist_and_come_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = six_hosts("file");
    config.pools.push(cluster::PoolConfig {
        name: "cold".into(),
        size: 3,
        min_size: None,
        pg_num: 8,
        device_class: None,
        crush_rule: None,
        erasure: Some("k=3,m=2,stripe-unit=8K".into()),
    });
    let cluster = Cluster::create(dir.path(), config.clone(), options())
        .await
        .unwrap();
    let info = cluster.pool_lookup("cold").await.unwrap();
    assert_eq!((info.size, info.min_size), (5, 4));
    let io = cluster.io_ctx("cold").await.unwrap();
    io.write_full("x", &common::content(5, 100_000))
        .await
        .unwrap();
    io.set_xattr("x", "user", b"v").await.unwrap();
    let map = cluster.osd_map();
    let pool = map.pool(info.id).unwrap();
    assert_eq!(pool.pool_type, osdmap::PoolType::Erasure);
    assert_eq!(pool.stripe_width, 3 * 8192);
    let place = cluster.locate("cold", "x").unwrap();
    assert_eq!(place.up.len(), 5);
    cluster.shutdown().await.unwrap();

    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    let profile = cluster.erasure_profile("cold").unwrap();
    assert_eq!(
        (profile.k, profile.m, profile.stripe_unit_bytes),
        (3, 2, 8192)
    );
    let io = cluster.io_ctx("cold").await.unwrap();
    assert_eq!(
        io.read_full("x").await.unwrap(),
        common::content(5, 100_000)
    );
    assert_eq!(io.get_xattr("x", "user").await.unwrap(), b"v");
    // Too few hosts for k+m: refused with the reason.
    let error = cluster
        .create_erasure_pool("wide", &ErasureProfile::new(6, 2), 8)
        .unwrap_err();
    assert!(error.to_string().contains("hosts"), "{error}");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_stats_count_an_erasure_coded_pool_once_stored_and_k_plus_m_raw() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), six_hosts("mem"), options())
        .await
        .unwrap();
    cluster
        .create_erasure_pool("ec", &ErasureProfile::new(4, 2), 8)
        .unwrap();
    let io = cluster.io_ctx("ec").await.unwrap();
    let objects = 20u64;
    let object_bytes = 64 << 10; // four 16 KiB chunks per stripe of 4 KiB units: no padding
    for number in 0..objects {
        io.write_full(
            &format!("o{number}"),
            &common::content(number, object_bytes),
        )
        .await
        .unwrap();
    }
    let pool_stats = |stats: &rados::ClusterStats| {
        stats
            .pools
            .iter()
            .find(|pool| pool.name == "ec")
            .cloned()
            .expect("the pool's stats")
    };
    let stats = pool_stats(&cluster.cluster_stats().await.unwrap());
    assert_eq!(stats.objects, objects);
    assert_eq!(stats.degraded_objects, 0);
    let stored = objects * object_bytes as u64;
    assert_eq!(stats.stored_bytes, stored, "{stats:?}");
    // Raw: six shards of a quarter each, 1.5x (4 KiB allocation units, no rounding here).
    assert_eq!(stats.allocated_bytes, stored * 6 / 4, "{stats:?}");
    // One OSD down: its shards' space is not counted, the objects and stored bytes still
    // are (from another shard), and the objects of its PGs are degraded.
    cluster.mark_down(1).unwrap();
    let degraded = pool_stats(&cluster.cluster_stats().await.unwrap());
    assert_eq!(degraded.objects, objects, "{degraded:?}");
    assert_eq!(degraded.stored_bytes, stored, "{degraded:?}");
    assert!(degraded.degraded_objects > 0, "{degraded:?}");
    assert!(
        degraded.allocated_bytes < stats.allocated_bytes,
        "{degraded:?}"
    );
    cluster.shutdown().await.unwrap();
}
