//! Issue 43: the data directory is private (0700 directories, 0600 files, looser modes
//! tightened), and an OSD can run on a faulty device named in `cluster.toml`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cluster::{Cluster, ClusterOptions};
use rados::IoCtx;

fn quiet() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

/// Every entry under `root` (itself included) whose mode lets the group or others in.
fn shared_entries(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            found.push(format!("{} {mode:o}", path.display()));
        }
        if metadata.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        }
    }
    found
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Fails on the code before issue 43: the directory was 0755 and `osd.*.img` 0644.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_directory_is_private_when_created_and_tightened_when_opened() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let config = common::small_config(1, 2, "file", 1);
    let cluster = Cluster::create(&dir, config, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("secret", b"nobody else reads this")
        .await
        .unwrap();
    drop(pool);
    cluster.shutdown().await.unwrap();
    assert_eq!(shared_entries(&dir), Vec::<String>::new(), "after create");
    let mode = |name: &str| {
        std::fs::metadata(dir.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(""), 0o700);
    for name in ["osd.0.img", "osd.1.img", "state.json", "cluster.toml"] {
        assert_eq!(mode(name), 0o600, "{name}");
    }

    // A directory left world-readable (an older build, or by hand) is tightened on open.
    set_mode(&dir, 0o755);
    for name in ["osd.0.img", "osd.1.img", "state.json", "cluster.toml"] {
        set_mode(&dir.join(name), 0o644);
    }
    set_mode(&dir.join("osd.0.meta"), 0o755);
    let cluster = Cluster::open(&dir, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    assert_eq!(
        pool.read_full("secret").await.unwrap(),
        b"nobody else reads this"
    );
    drop(pool);
    cluster.shutdown().await.unwrap();
    assert_eq!(shared_entries(&dir), Vec::<String>::new(), "after open");
}

/// An OSD whose device fails 5% of reads and writes with EIO (seeded): every acknowledged
/// write reads back whole, through the failures (reads fall back to other replicas, failed
/// replica writes are repaired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osd_on_a_faulty_device_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(3, 1, "file", 3);
    config.osds[1].device = "faulty:eio=0.05,seed=43:file:osd.1.img:64M".into();
    config.validate().unwrap();
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut acknowledged = Vec::new();
    for index in 0..200u64 {
        let name = format!("object-{index}");
        let data = common::content(index, 1000 + (index as usize * 37) % 9000);
        if pool.write_full(&name, &data).await.is_ok() {
            acknowledged.push((name, data));
        }
    }
    assert!(
        acknowledged.len() >= 150,
        "most writes succeed with 2 of 3 replicas healthy: {} of 200",
        acknowledged.len()
    );
    for (name, data) in &acknowledged {
        let read = pool.read_full(name).await;
        assert_eq!(read.as_deref().ok(), Some(&data[..]), "{name}: {read:?}");
    }
    let faulty = cluster
        .osd_stats()
        .into_iter()
        .find(|osd| osd.id == 1)
        .unwrap();
    let errors = faulty.device.read.errors + faulty.device.write.errors;
    eprintln!(
        "{} of 200 writes acknowledged; osd.1's device failed {errors} operations",
        acknowledged.len()
    );
    assert!(errors > 0, "the faults fired");
    drop(pool);
    cluster.shutdown().await.unwrap();
    // The spec survives a restart: cluster.toml keeps it.
    let saved = std::fs::read_to_string(dir.path().join("cluster.toml")).unwrap();
    assert!(saved.contains("faulty:eio=0.05,seed=43:"), "{saved}");
    // Reopened (the faulty device mounted again), every acknowledged write still reads back.
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    for (name, data) in &acknowledged {
        let read = pool.read_full(name).await;
        assert_eq!(
            read.as_deref().ok(),
            Some(&data[..]),
            "{name} after reopen: {read:?}"
        );
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}
