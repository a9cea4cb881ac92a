//! RBD compatibility on a real Ceph (16.2): volumes strata makes are listed, described and
//! exported byte-exact by the `rbd` CLI (librbd), and images `rbd` makes (`rbd create
//! --image-feature layering`, `rbd import`, `rbd bench --io-type write`) are read by strata
//! byte-exact. Starts its own minicluster (`scripts/ceph-minicluster.sh`); skipped with
//! `STRATA_SKIP_CEPH=1` when Ceph is not installed.

#[path = "../../ceph/tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use device::Device;
use rados::{PoolSpec, Rados};
use tokio::sync::OnceCell;
use volume::{OpenMode, Volumes, VolumesConfig};

const POOL: &str = "volumes";

/// Runs `rbd` on the minicluster; panics with its output on failure.
fn rbd(conf: &Path, arguments: &[&str]) -> String {
    let output = Command::new("rbd")
        .arg("-c")
        .arg(conf)
        .args(arguments)
        .output()
        .expect("run rbd");
    assert!(
        output.status.success(),
        "rbd {arguments:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The pool's catalogue on the binary's minicluster (the pool made once), or `None` to skip.
async fn setup() -> Option<(&'static common::MiniCluster, Volumes)> {
    if std::env::var("STRATA_SKIP_CEPH").as_deref() == Ok("1") {
        println!("skipping the RBD compatibility tests (STRATA_SKIP_CEPH=1)");
        return None;
    }
    let cluster = common::cluster()?;
    static POOL_MADE: OnceCell<()> = OnceCell::const_new();
    let rados = Arc::new(cluster.connect().await.expect("connect to the minicluster"));
    POOL_MADE
        .get_or_init(|| async {
            let mut spec = PoolSpec::new(POOL);
            spec.size = 1;
            spec.min_size = Some(1);
            rados.pool_create(spec).await.expect("create the pool");
            rbd(&cluster.conf(), &["pool", "init", POOL]);
        })
        .await;
    let io_ctx = rados.io_ctx(POOL).await.expect("io_ctx");
    Some((cluster, Volumes::new(io_ctx, VolumesConfig::default())))
}

/// Deterministic bytes.
fn pattern(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

async fn read_all(volumes: &Volumes, name: &str) -> Vec<u8> {
    let volume = volumes.open(name, OpenMode::ReadOnly).await.expect("open");
    let mut buffer = vec![0u8; volume.size_bytes() as usize];
    volume.read_at(0, &mut buffer).await.expect("read");
    buffer
}

fn rbd_export(conf: &Path, name: &str) -> Vec<u8> {
    let file = tempfile::NamedTempFile::new().expect("tempfile");
    let path = file.path().to_str().expect("utf-8 path").to_string();
    std::fs::remove_file(&path).expect("rbd export makes the file");
    rbd(
        conf,
        &["export", "--no-progress", &format!("{POOL}/{name}"), &path],
    );
    std::fs::read(&path).expect("read the export")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbd_lists_describes_and_exports_what_strata_writes() {
    let Some((cluster, volumes)) = setup().await else {
        return;
    };
    // 2 objects and a short third (4 MiB objects), written across an object boundary,
    // within objects, and at the very end; the rest are holes.
    let size_bytes: u64 = (8 << 20) + (512 << 10);
    volumes
        .create("from-strata", size_bytes, 22)
        .await
        .expect("create");
    let mut model = vec![0u8; size_bytes as usize];
    let volume = volumes
        .open("from-strata", OpenMode::ReadWrite)
        .await
        .expect("open");
    for (seed, offset, length) in [
        (1u64, (4 << 20) - 8192, 16384usize),
        (2, 4096, 512),
        (3, size_bytes - 65536, 65536),
    ] {
        let data = pattern(seed, length);
        volume.write_at(offset, &data).await.expect("write");
        model[offset as usize..offset as usize + length].copy_from_slice(&data);
    }
    volume.close().await.expect("close");

    let listed = rbd(&cluster.conf(), &["ls", POOL]);
    assert!(
        listed.lines().any(|line| line == "from-strata"),
        "rbd ls: {listed}"
    );
    let info = rbd(
        &cluster.conf(),
        &["info", "--format", "json", &format!("{POOL}/from-strata")],
    );
    assert!(
        info.contains(&format!("\"size\":{size_bytes}")),
        "rbd info: {info}"
    );
    assert!(info.contains("\"order\":22"), "rbd info: {info}");
    assert!(
        info.contains("\"features\":[\"layering\"]"),
        "rbd info: {info}"
    );
    assert!(
        info.contains(&format!(
            "\"id\":\"{}\"",
            volumes.info("from-strata").await.expect("info").id
        )),
        "rbd info: {info}"
    );
    assert!(
        rbd_export(&cluster.conf(), "from-strata") == model,
        "rbd export differs from what strata wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strata_reads_what_rbd_import_and_rbd_bench_write() {
    let Some((cluster, volumes)) = setup().await else {
        return;
    };
    // rbd import of a file with data and a hole.
    let mut image = pattern(9, (6 << 20) + 4096);
    image[(1 << 20)..(5 << 20)].fill(0);
    let file = tempfile::NamedTempFile::new().expect("tempfile");
    std::fs::write(file.path(), &image).expect("write the image file");
    rbd(
        &cluster.conf(),
        &[
            "import",
            "--no-progress",
            "--image-feature",
            "layering",
            file.path().to_str().expect("utf-8"),
            &format!("{POOL}/imported"),
        ],
    );
    assert!(
        read_all(&volumes, "imported").await == image,
        "strata reads what rbd import wrote"
    );
    assert!(volumes
        .list()
        .await
        .expect("list")
        .contains(&"imported".to_string()));

    // rbd create + rbd bench --io-type write, then strata's read against rbd export.
    rbd(
        &cluster.conf(),
        &[
            "create",
            "--size",
            "16M",
            "--image-feature",
            "layering",
            &format!("{POOL}/benched"),
        ],
    );
    rbd(
        &cluster.conf(),
        &[
            "bench",
            "--io-type",
            "write",
            "--io-size",
            "4K",
            "--io-total",
            "2M",
            "--io-pattern",
            "rand",
            "--io-threads",
            "4",
            &format!("{POOL}/benched"),
        ],
    );
    let exported = rbd_export(&cluster.conf(), "benched");
    let read = read_all(&volumes, "benched").await;
    assert!(
        exported.iter().any(|&byte| byte != 0),
        "rbd bench wrote something"
    );
    assert!(read == exported, "strata reads what rbd export reads");

    // strata writes into rbd's image; rbd export sees it.
    let volume = volumes
        .open("benched", OpenMode::ReadWrite)
        .await
        .expect("open rbd's image");
    let data = pattern(11, 8192);
    volume.write_at(12 << 20, &data).await.expect("write");
    volume.close().await.expect("close");
    let exported = rbd_export(&cluster.conf(), "benched");
    assert!(
        exported[(12 << 20)..(12 << 20) + 8192] == data[..],
        "rbd export sees strata's write"
    );

    // An image with rbd's default features is refused, naming them.
    rbd(
        &cluster.conf(),
        &["create", "--size", "4M", &format!("{POOL}/full-featured")],
    );
    let error = volumes
        .open("full-featured", OpenMode::ReadWrite)
        .await
        .err()
        .expect("refused");
    assert!(error.to_string().contains("object-map"), "{error}");

    // strata removes an image rbd made; rbd no longer lists it.
    volumes.remove("imported").await.expect("remove");
    let listed = rbd(&cluster.conf(), &["ls", POOL]);
    assert!(
        !listed.lines().any(|line| line == "imported"),
        "rbd ls after remove: {listed}"
    );
}

/// RBD's `data-pool` feature both ways: a volume strata creates with its data in another pool
/// is described (`data_pool`) and exported byte-exact by `rbd`, its data objects named
/// `rbd_data.<header pool id>.<id>.%016x` in that pool as librbd names them; an image `rbd
/// import --data-pool` writes is read byte-exact by strata and removed with its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_pool_feature_matches_librbd_both_ways() {
    const DATA_POOL: &str = "volumes-data";
    let Some((cluster, _)) = setup().await else {
        return;
    };
    let rados: Arc<dyn Rados> = Arc::new(cluster.connect().await.expect("connect"));
    static DATA_POOL_MADE: OnceCell<()> = OnceCell::const_new();
    DATA_POOL_MADE
        .get_or_init(|| async {
            let mut spec = PoolSpec::new(DATA_POOL);
            spec.size = 1;
            spec.min_size = Some(1);
            rados.pool_create(spec).await.expect("create the data pool");
        })
        .await;
    let volumes = Volumes::on_cluster(
        rados.clone(),
        rados.io_ctx(POOL).await.expect("io_ctx"),
        VolumesConfig::default(),
    );
    let data_io = rados.io_ctx(DATA_POOL).await.expect("data io_ctx");
    let header_pool_id = rados.pool_lookup(POOL).await.expect("lookup").id;

    // strata -> rbd.
    let size_bytes: u64 = 6 << 20;
    let info = volumes
        .create_in("data-from-strata", size_bytes, 22, Some(DATA_POOL))
        .await
        .expect("create with a data pool");
    assert_eq!(info.data_pool_id, Some(data_io.pool().id));
    let mut model = vec![0u8; size_bytes as usize];
    let volume = volumes
        .open("data-from-strata", OpenMode::ReadWrite)
        .await
        .expect("open");
    let data = pattern(21, 12288);
    let offset = (4 << 20) - 4096;
    volume.write_at(offset, &data).await.expect("write");
    model[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
    volume.close().await.expect("close");
    let info_json = rbd(
        &cluster.conf(),
        &[
            "info",
            "--format",
            "json",
            &format!("{POOL}/data-from-strata"),
        ],
    );
    assert!(
        info_json.contains(&format!("\"data_pool\":\"{DATA_POOL}\"")),
        "rbd info: {info_json}"
    );
    assert!(
        rbd_export(&cluster.conf(), "data-from-strata") == model,
        "rbd export differs from what strata wrote into the data pool"
    );
    let prefix = format!("rbd_data.{header_pool_id}.{}.", info.id);
    let names = data_io.list_all().await.expect("list the data pool");
    let mut ours: Vec<&String> = names
        .iter()
        .filter(|name| name.starts_with(&prefix))
        .collect();
    ours.sort();
    assert_eq!(
        ours,
        [
            &format!("{prefix}0000000000000000"),
            &format!("{prefix}0000000000000001")
        ],
        "data objects as librbd names them"
    );

    // rbd -> strata.
    let image = pattern(22, (5 << 20) + 8192);
    let file = tempfile::NamedTempFile::new().expect("tempfile");
    std::fs::write(file.path(), &image).expect("write the image file");
    rbd(
        &cluster.conf(),
        &[
            "import",
            "--no-progress",
            "--image-feature",
            "layering",
            "--data-pool",
            DATA_POOL,
            file.path().to_str().expect("utf-8"),
            &format!("{POOL}/data-from-rbd"),
        ],
    );
    let info = volumes.info("data-from-rbd").await.expect("info");
    assert_eq!(info.data_pool_id, Some(data_io.pool().id));
    assert!(
        read_all(&volumes, "data-from-rbd").await == image,
        "strata reads what rbd import wrote into the data pool"
    );
    let prefix = format!("rbd_data.{header_pool_id}.{}.", info.id);
    volumes.remove("data-from-rbd").await.expect("remove");
    let left = data_io.list_all().await.expect("list the data pool");
    assert!(
        !left.iter().any(|name| name.starts_with(&prefix)),
        "removed with its data objects: {left:?}"
    );
    volumes.remove("data-from-strata").await.expect("remove");
}
