//! Bad input gets a clear error and damages nothing: a name that exists, sizes and names
//! beyond the limits, I/O past the end, malformed and unsupported headers, a second writer,
//! the leftovers of an interrupted create.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use device::{Device, DeviceError};
use rados::memory::MemoryRados;
use rados::{IoCtx, PoolSpec, Rados};
use volume::format::{self, keys};
use volume::{OpenMode, VolumeError, Volumes, VolumesConfig, VOLUME_SIZE_BYTES_MAX};

const SECOND_NS: u64 = 1_000_000_000;

/// Omap entries.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

struct Setup {
    _rados: MemoryRados,
    io_ctx: Arc<dyn IoCtx>,
    now_ns: Arc<AtomicU64>,
}

impl Setup {
    async fn new() -> Setup {
        let rados = MemoryRados::new();
        rados.pool_create(PoolSpec::new("rbd")).await.expect("pool");
        Setup {
            io_ctx: rados.io_ctx("rbd").await.expect("io_ctx"),
            _rados: rados,
            now_ns: Arc::new(AtomicU64::new(1_700_000_000 * SECOND_NS)),
        }
    }

    /// A catalogue (a client) on the shared pool and clock.
    fn volumes(&self, holder: &str) -> Volumes {
        let now_ns = self.now_ns.clone();
        Volumes::with(
            self.io_ctx.clone(),
            VolumesConfig {
                holder: Some(holder.into()),
                lease_duration_ms: 10_000,
                ..VolumesConfig::default()
            },
            Arc::new(move || now_ns.load(Ordering::SeqCst)),
            7,
        )
    }

    fn advance_s(&self, seconds: u64) {
        self.now_ns.fetch_add(seconds * SECOND_NS, Ordering::SeqCst);
    }

    async fn header_object(&self, volumes: &Volumes, name: &str) -> String {
        format::header_object(&volumes.info(name).await.expect("info").id)
    }
}

async fn write_pattern(volumes: &Volumes, name: &str) -> Vec<u8> {
    let volume = volumes.open(name, OpenMode::ReadWrite).await.expect("open");
    let data: Vec<u8> = (0..8192u32).map(|index| (index % 251) as u8 + 1).collect();
    volume.write_at(4096, &data).await.expect("write");
    volume.close().await.expect("close");
    data
}

async fn read_pattern(volumes: &Volumes, name: &str) -> Vec<u8> {
    let volume = volumes
        .open(name, OpenMode::ReadOnly)
        .await
        .expect("open read-only");
    let mut buffer = vec![0u8; 8192];
    volume.read_at(4096, &mut buffer).await.expect("read");
    buffer
}

#[tokio::test]
async fn a_name_that_exists_is_refused_and_the_volume_keeps_its_data() {
    let setup = Setup::new().await;
    let volumes = setup.volumes("a");
    volumes.create("disk", 1 << 20, 22).await.expect("create");
    let data = write_pattern(&volumes, "disk").await;
    let error = volumes
        .create("disk", 2 << 20, 22)
        .await
        .expect_err("exists");
    assert!(matches!(error, VolumeError::Exists { .. }), "{error}");
    assert!(error.to_string().contains("disk"), "{error}");
    assert_eq!(
        volumes.info("disk").await.expect("info").size_bytes,
        1 << 20
    );
    assert_eq!(read_pattern(&volumes, "disk").await, data);
    assert_eq!(
        volumes.list().await.expect("list"),
        vec!["disk".to_string()]
    );
}

#[tokio::test]
async fn names_sizes_and_orders_beyond_the_limits_are_refused_and_create_nothing() {
    let setup = Setup::new().await;
    let volumes = setup.volumes("a");
    for name in ["", "a/b", "snap@1", "nul\0", &"n".repeat(96)] {
        let error = volumes
            .create(name, 1 << 20, 22)
            .await
            .expect_err("bad name");
        assert!(
            matches!(error, VolumeError::InvalidName { .. }),
            "{name:?}: {error}"
        );
    }
    for size in [0, 100, 1000, VOLUME_SIZE_BYTES_MAX + 512, u64::MAX] {
        let error = volumes.create("v", size, 22).await.expect_err("bad size");
        assert!(
            matches!(error, VolumeError::InvalidSize { .. }),
            "{size}: {error}"
        );
        assert!(error.to_string().contains(&size.to_string()), "{error}");
    }
    for order in [0, 11, 26] {
        let error = volumes
            .create("v", 1 << 20, order)
            .await
            .expect_err("bad order");
        assert!(
            matches!(error, VolumeError::InvalidOrder { .. }),
            "{order}: {error}"
        );
    }
    assert!(
        setup.io_ctx.list_all().await.expect("list").is_empty(),
        "nothing was written"
    );
    volumes.create("v", 1 << 20, 22).await.expect("create");
    let error = volumes.resize("v", 0).await.expect_err("resize to 0");
    assert!(matches!(error, VolumeError::InvalidSize { .. }), "{error}");
    let error = volumes
        .resize("v", VOLUME_SIZE_BYTES_MAX * 2)
        .await
        .expect_err("resize too big");
    assert!(matches!(error, VolumeError::InvalidSize { .. }), "{error}");
    assert_eq!(volumes.info("v").await.expect("info").size_bytes, 1 << 20);
    let error = volumes
        .open("missing", OpenMode::ReadOnly)
        .await
        .err()
        .expect("missing");
    assert!(matches!(error, VolumeError::NotFound { .. }), "{error}");
    assert!(matches!(
        volumes.remove("missing").await,
        Err(VolumeError::NotFound { .. })
    ));
}

#[tokio::test]
async fn io_past_the_end_or_misaligned_is_refused_and_writes_nothing() {
    let setup = Setup::new().await;
    let volumes = setup.volumes("a");
    volumes.create("v", 64 << 10, 12).await.expect("create");
    let volume = volumes.open("v", OpenMode::ReadWrite).await.expect("open");
    let block = vec![7u8; 1024];
    let mut buffer = vec![0u8; 1024];
    for offset in [(63 << 10) + 512, 64 << 10, u64::MAX - 511] {
        assert!(matches!(
            volume.write_at(offset, &block).await,
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            volume.read_at(offset, &mut buffer).await,
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            volume.discard(offset, 1024).await,
            Err(DeviceError::OutOfRange { .. })
        ));
    }
    assert!(matches!(
        volume.write_at(100, &block).await,
        Err(DeviceError::Misaligned { .. })
    ));
    assert!(matches!(
        volume.write_at(0, &block[..100]).await,
        Err(DeviceError::Misaligned { .. })
    ));
    let objects = setup.io_ctx.list_all().await.expect("list");
    assert!(
        objects
            .iter()
            .all(|object| !object.starts_with("rbd_data.")),
        "{objects:?}"
    );
    volume.close().await.expect("close");
}

#[tokio::test]
async fn malformed_headers_are_refused_naming_the_key_and_others_still_work() {
    let setup = Setup::new().await;
    let volumes = setup.volumes("a");
    volumes.create("good", 1 << 20, 22).await.expect("create");
    let data = write_pattern(&volumes, "good").await;
    volumes.create("bad", 1 << 20, 22).await.expect("create");
    let header = setup.header_object(&volumes, "bad").await;
    let original = setup
        .io_ctx
        .omap_get_vals(&header, None, b"", 100)
        .await
        .expect("omap")
        .entries;
    let corruptions: Vec<(&str, Option<Vec<u8>>)> = vec![
        (keys::SIZE, None),
        (keys::SIZE, Some(vec![1, 2, 3])),
        (keys::ORDER, None),
        (keys::ORDER, Some(vec![22, 0])),
        (keys::ORDER, Some(vec![64])),
        (keys::FEATURES, Some(vec![1])),
        (keys::OBJECT_PREFIX, None),
        (keys::OBJECT_PREFIX, Some(vec![200, 0, 0, 0, b'r'])),
        (keys::SNAP_SEQ, None),
        (keys::CREATE_TIMESTAMP, Some(vec![1, 2])),
    ];
    for (key, value) in corruptions {
        setup.io_ctx.omap_clear(&header).await.expect("clear");
        let mut entries = original.clone();
        entries.retain(|(stored, _)| stored.as_slice() != key.as_bytes());
        if let Some(value) = &value {
            entries.push((key.as_bytes().to_vec(), value.clone()));
        }
        setup
            .io_ctx
            .omap_set(&header, entries)
            .await
            .expect("corrupt");
        for error in [
            volumes
                .info("bad")
                .await
                .expect_err("info of a malformed header"),
            volumes
                .open("bad", OpenMode::ReadWrite)
                .await
                .err()
                .expect("open of a malformed header"),
        ] {
            assert!(
                matches!(error, VolumeError::Malformed { .. }),
                "{key}: {error}"
            );
            assert!(error.to_string().contains(key), "{key}: {error}");
        }
    }
    // A damaged rbd_id.
    setup
        .io_ctx
        .write_full("rbd_id.bad", b"\x09\0\0\0ab")
        .await
        .expect("corrupt id");
    let error = volumes.info("bad").await.expect_err("malformed id");
    assert!(error.to_string().contains("rbd_id.bad"), "{error}");
    // The other volume and the listing are untouched.
    assert_eq!(read_pattern(&volumes, "good").await, data);
    assert_eq!(
        volumes.list().await.expect("list"),
        vec!["bad".to_string(), "good".to_string()]
    );
}

#[tokio::test]
async fn unsupported_features_snapshots_and_parents_are_refused_by_name() {
    let setup = Setup::new().await;
    let volumes = setup.volumes("a");
    volumes.create("v", 1 << 20, 22).await.expect("create");
    let header = setup.header_object(&volumes, "v").await;
    let cases: Vec<(Entries, &str)> = vec![
        (
            vec![(keys::FEATURES.into(), 0x3du64.to_le_bytes().to_vec())],
            "object-map",
        ),
        (
            vec![(keys::FEATURES.into(), 3u64.to_le_bytes().to_vec())],
            "striping",
        ),
        (
            vec![(keys::FEATURES.into(), 65u64.to_le_bytes().to_vec())],
            "journaling",
        ),
        (
            vec![(b"snapshot_0000000000000004".to_vec(), vec![1])],
            "snapshots",
        ),
        (vec![(keys::PARENT.into(), vec![1])], "parent"),
    ];
    for (entries, named) in cases {
        let before = setup
            .io_ctx
            .omap_get_vals(&header, None, b"", 100)
            .await
            .expect("omap")
            .entries;
        setup.io_ctx.omap_set(&header, entries).await.expect("set");
        let error = volumes
            .open("v", OpenMode::ReadWrite)
            .await
            .err()
            .expect("refused");
        assert!(matches!(error, VolumeError::Unsupported { .. }), "{error}");
        assert!(error.to_string().contains(named), "{named}: {error}");
        setup.io_ctx.omap_clear(&header).await.expect("clear");
        setup
            .io_ctx
            .omap_set(&header, before)
            .await
            .expect("restore");
    }
    volumes
        .open("v", OpenMode::ReadWrite)
        .await
        .expect("open again")
        .close()
        .await
        .expect("close");
}

#[tokio::test]
async fn a_second_writer_is_refused_naming_the_holder_until_the_lease_expires() {
    let setup = Setup::new().await;
    let first = setup.volumes("host-a");
    let second = setup.volumes("host-b");
    first.create("v", 1 << 20, 22).await.expect("create");
    let writer = first
        .open("v", OpenMode::ReadWrite)
        .await
        .expect("first writer");
    writer.write_at(0, &[1u8; 512]).await.expect("write");
    let error = second
        .open("v", OpenMode::ReadWrite)
        .await
        .err()
        .expect("second writer");
    assert!(matches!(error, VolumeError::Leased { .. }), "{error}");
    assert!(error.to_string().contains(writer.holder()), "{error}");
    assert!(matches!(
        second.remove("v").await,
        Err(VolumeError::Leased { .. })
    ));
    assert!(matches!(
        second.resize("v", 2 << 20).await,
        Err(VolumeError::Leased { .. })
    ));
    // Readers need no lease.
    let reader = second.open("v", OpenMode::ReadOnly).await.expect("reader");
    assert!(matches!(
        reader.write_at(0, &[2u8; 512]).await,
        Err(DeviceError::Io { .. })
    ));
    // Renewed, the lease holds.
    setup.advance_s(8);
    writer.renew_lease().await.expect("renew");
    setup.advance_s(8);
    assert!(
        second.open("v", OpenMode::ReadWrite).await.is_err(),
        "renewed lease holds"
    );
    // Expired, it is taken over, and the first writer is fenced.
    setup.advance_s(11);
    let taker = second
        .open("v", OpenMode::ReadWrite)
        .await
        .expect("after expiry");
    let error = writer
        .write_at(0, &[3u8; 512])
        .await
        .expect_err("the old writer is fenced");
    assert!(error.to_string().contains("lease"), "{error}");
    taker
        .write_at(0, &[4u8; 512])
        .await
        .expect("new writer writes");
    let mut block = [0u8; 512];
    reader.read_at(0, &mut block).await.expect("read");
    assert_eq!(block, [4u8; 512]);
    writer.close().await.expect("close old");
    assert!(
        first.info("v").await.expect("info").lease.is_some(),
        "the old writer's close leaves the new lease"
    );
    taker.close().await.expect("close");
    assert!(first.info("v").await.expect("info").lease.is_none());
    first.remove("v").await.expect("remove once free");
}

#[tokio::test]
async fn an_interrupted_create_leaves_nothing_a_later_create_or_listing_trips_over() {
    let setup = Setup::new().await;
    let volumes = setup.volumes("a");
    // A create that stopped after reserving the name: header and rbd_id, no directory entry.
    volumes.create("v", 1 << 20, 22).await.expect("create");
    let id = volumes.info("v").await.expect("info").id;
    setup
        .io_ctx
        .omap_remove_keys(
            format::DIRECTORY_OBJECT,
            vec![
                format::directory_name_key("v"),
                format::directory_id_key(&id),
            ],
        )
        .await
        .expect("drop the directory entries");
    assert!(volumes.list().await.expect("list").is_empty(), "not listed");
    // Young: maybe someone is creating it.
    let error = volumes
        .create("v", 2 << 20, 22)
        .await
        .expect_err("being created");
    assert!(error.to_string().contains("half-created"), "{error}");
    // Old: a crash's leftover, removed by the next create.
    setup.advance_s(volume::STALE_CREATE_S + 1);
    let info = volumes
        .create("v", 2 << 20, 22)
        .await
        .expect("create over the leftover");
    assert_ne!(info.id, id);
    assert_eq!(info.size_bytes, 2 << 20);
    let objects = setup.io_ctx.list_all().await.expect("list");
    assert!(
        !objects.contains(&format::header_object(&id)),
        "{objects:?}"
    );
    // A remove that stopped after the header: rbd_id alone; remove finishes it.
    volumes.create("w", 1 << 20, 22).await.expect("create");
    let header = setup.header_object(&volumes, "w").await;
    setup.io_ctx.remove(&header).await.expect("drop header");
    let error = volumes
        .open("w", OpenMode::ReadOnly)
        .await
        .err()
        .expect("half-removed");
    assert!(error.to_string().contains("interrupted"), "{error}");
    volumes.remove("w").await.expect("remove finishes");
    assert_eq!(volumes.list().await.expect("list"), vec!["v".to_string()]);
    volumes
        .create("w", 1 << 20, 22)
        .await
        .expect("create again");
}

#[tokio::test]
async fn a_restarted_writer_takes_its_own_lease_over_and_one_catalogue_has_one_writer() {
    let setup = Setup::new().await;
    let before_crash = setup.volumes("server-at-/srv/data");
    before_crash.create("v", 1 << 20, 22).await.expect("create");
    let writer = before_crash
        .open("v", OpenMode::ReadWrite)
        .await
        .expect("open");
    let error = before_crash
        .open("v", OpenMode::ReadWrite)
        .await
        .err()
        .expect("second open");
    assert!(matches!(error, VolumeError::Leased { .. }), "{error}");
    assert!(matches!(
        before_crash.remove("v").await,
        Err(VolumeError::Leased { .. })
    ));
    writer.write_at(0, &[9u8; 512]).await.expect("write");
    // The process dies: its lease stays in the header until it expires.
    std::mem::forget(writer);
    assert!(setup
        .volumes("someone-else")
        .open("v", OpenMode::ReadWrite)
        .await
        .is_err());
    // The same server, restarted, takes it over at once.
    let after_restart = setup.volumes("server-at-/srv/data");
    let reopened = after_restart
        .open("v", OpenMode::ReadWrite)
        .await
        .expect("takeover");
    let mut block = [0u8; 512];
    reopened.read_at(0, &mut block).await.expect("read");
    assert_eq!(block, [9u8; 512]);
    reopened.close().await.expect("close");
    after_restart
        .open("v", OpenMode::ReadWrite)
        .await
        .expect("reopen after close")
        .close()
        .await
        .expect("close");
}
