//! Online changes of a pool's settings (`strata osd pool set`): size with recovery following,
//! min_size validated, pg_num refused, quotas enforced by the write path; all persisted.

mod common;

use cluster::{Cluster, ClusterError, ClusterOptions};
use rados::{IoCtx, RadosError};

fn options() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

/// How many OSD stores hold `name` of pool "data".
async fn copies(cluster: &Cluster, name: &str) -> usize {
    let collection = cluster.collection_of("data", name).unwrap();
    let mut count = 0;
    for osd in 0..9 {
        let store = cluster.osd(osd).unwrap().store();
        if store.read(&collection, name, 0, u64::MAX).await.is_ok() {
            count += 1;
        }
    }
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_change_recovers_replicas_and_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), common::small_config(3, 3, "file", 2), options())
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut expected = Vec::new();
    for i in 0..30 {
        let data = common::content(i, 300 + i as usize * 17);
        pool.write_full(&format!("object-{i}"), &data)
            .await
            .unwrap();
        expected.push(data);
    }
    assert!(cluster.recover(3).await.unwrap());
    assert_eq!(copies(&cluster, "object-0").await, 2);

    let refusal = |key: &str, value: &str| cluster.pool_set("data", key, value).unwrap_err();
    let error = refusal("min_size", "3");
    assert!(
        error
            .to_string()
            .contains("pool min_size must be between 1 and size, which is set to 2"),
        "{error}"
    );
    assert!(matches!(
        refusal("size", "4"),
        ClusterError::Rados(RadosError::InvalidArgument(_))
    ));
    assert!(matches!(
        refusal("size", "0"),
        ClusterError::Rados(RadosError::InvalidArgument(_))
    ));
    assert!(matches!(
        refusal("pgp_num", "1"),
        ClusterError::Rados(RadosError::InvalidArgument(_))
    ));
    assert!(matches!(
        cluster.pool_set("nope", "size", "2").unwrap_err(),
        ClusterError::Rados(RadosError::NotFound(_))
    ));
    let epoch = cluster.epoch();
    let pg_num = cluster.pool_settings("data").unwrap().pg_num;
    let error = refusal("pg_num", &(pg_num * 2).to_string());
    assert!(
        matches!(&error, ClusterError::Rados(RadosError::NotSupported(m)) if m.contains("splitting")),
        "{error}"
    );
    cluster
        .pool_set("data", "pg_num", &pg_num.to_string())
        .unwrap(); // unchanged: accepted

    // 2 -> 3: every object gets its third copy.
    assert!(cluster.pool_set("data", "size", "3").unwrap() > epoch);
    let settings = cluster.pool_settings("data").unwrap();
    assert_eq!((settings.size, settings.min_size), (3, 2));
    assert!(cluster.recover(5).await.unwrap());
    for (i, data) in expected.iter().enumerate() {
        let name = format!("object-{i}");
        assert_eq!(&pool.read_full(&name).await.unwrap(), data);
        let placement = cluster.locate("data", &name).unwrap();
        assert_eq!(placement.acting.len(), 3, "{name}");
        assert_eq!(copies(&cluster, &name).await, 3, "{name}");
    }
    cluster.pool_set("data", "min_size", "3").unwrap();

    // Persisted across a restart.
    cluster.shutdown().await.unwrap();
    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    let settings = cluster.pool_settings("data").unwrap();
    assert_eq!((settings.size, settings.min_size), (3, 3));

    // 3 -> 2: the extra copies go.
    cluster.pool_set("data", "size", "2").unwrap();
    assert!(cluster.recover(5).await.unwrap());
    let pool = cluster.pool("data").unwrap();
    for (i, data) in expected.iter().enumerate() {
        let name = format!("object-{i}");
        assert_eq!(&pool.read_full(&name).await.unwrap(), data);
        assert_eq!(copies(&cluster, &name).await, 2, "{name}");
    }
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_refuse_writes_past_them_and_allow_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), common::small_config(3, 3, "file", 2), options())
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    cluster.pool_set("data", "quota_max_objects", "3").unwrap();
    for i in 0..3 {
        pool.write_full(&format!("object-{i}"), b"abc")
            .await
            .unwrap();
    }
    let error = pool.write_full("object-3", b"abc").await.unwrap_err();
    assert!(
        matches!(&error, RadosError::NoSpace(m) if m.contains("quota exceeded")),
        "{error}"
    );
    pool.remove("object-0").await.unwrap();
    pool.write_full("object-3", b"abc").await.unwrap();

    // Bytes: 9 stored, a quota of 20 takes 11 more and refuses 12.
    cluster.pool_set("data", "quota_max_objects", "0").unwrap();
    cluster.pool_set("data", "quota_max_bytes", "20").unwrap();
    let error = pool.write_full("big", &[7u8; 12]).await.unwrap_err();
    assert!(
        matches!(&error, RadosError::NoSpace(m) if m.contains("quota_max_bytes is 20")),
        "{error}"
    );
    pool.write_full("fits", &[7u8; 11]).await.unwrap();
    assert!(pool.write_full("one-more", b"x").await.is_err());

    // Persisted, and enforced after a restart; deleting gets back under it.
    cluster.shutdown().await.unwrap();
    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    assert_eq!(cluster.pool_settings("data").unwrap().quota_max_bytes, 20);
    let pool = cluster.pool("data").unwrap();
    assert!(pool.write_full("one-more", b"x").await.is_err());
    pool.remove("fits").await.unwrap();
    pool.write_full("one-more", b"x").await.unwrap();
    cluster.pool_set("data", "quota_max_bytes", "0").unwrap();
    pool.write_full("big", &[7u8; 12]).await.unwrap();
    cluster.shutdown().await.unwrap();
}
