//! Two gateways' stores over one cluster (the `rados` in-memory model), one answering from
//! copies of the bucket record an hour old: what must not be stale is checked in the cluster
//! (see `orphans::begin_object_write_guarded` and `index::commit_from`).

use bytes::Bytes;
use rados::memory::MemoryRados;
use rados::{Rados, WriteOp};

use super::{system_clock, Body, Store};
use crate::error::GatewayError;
use crate::layout::{self, ObjectEntry, Versioning};
use crate::GatewayConfig;

/// Two stores over one in-memory cluster (kept alive by the third member).
async fn two_stores() -> (Store, Store, MemoryRados) {
    let rados = MemoryRados::new();
    let config = GatewayConfig {
        metadata_cache_ms: 3_600_000,
        gc_min_wait_s: 0,
        ..GatewayConfig::default()
    };
    let a = Store::open(&rados as &dyn Rados, config.clone(), system_clock())
        .await
        .expect("store A");
    let b = Store::open(&rados as &dyn Rados, config, system_clock())
        .await
        .expect("store B");
    (a, b, rados)
}

/// A whole PUT of `key` in bucket `name` through `store`, as `do_put_object` does it:
/// the bucket from the store's copy, a guarded intent (read again when it fails), data
/// beside a prefetch of the entry, the commit.
async fn put(store: &Store, name: &str, key: &str, fill: u8) -> crate::error::Result<ObjectEntry> {
    let tag = store.new_tag(8);
    let (mut bucket, copy) = store.bucket_cached(name).await?;
    let intent = match copy {
        true => store.begin_object_write_guarded(&bucket, key, &tag).await?,
        false => None,
    };
    let intent = match intent {
        Some(intent) => intent,
        None => {
            store.forget_bucket(name);
            bucket = store.bucket(name).await?;
            store.begin_object_write_checked(&bucket, key, &tag).await?
        }
    };
    let prefetched = match bucket.versioning {
        None => Some(store.prefetch_plain(&bucket, key).await?),
        Some(_) => None,
    };
    let body = futures::stream::iter(vec![Ok(Bytes::from(vec![fill; 100]))]);
    let (pieces, size, _) = store
        .write_body(&bucket.id, &tag, key, Body::new(body, None))
        .await?;
    let entry = ObjectEntry {
        size,
        pieces,
        ..ObjectEntry::default()
    };
    let condition = super::WriteCondition::default();
    store
        .commit_from(&bucket, key, entry, &condition, Some(&intent), prefetched)
        .await
}

#[tokio::test]
async fn a_bucket_deleted_through_another_gateway_takes_no_put_from_a_copy() {
    let (a, b, _rados) = two_stores().await;
    a.create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    assert!(
        a.bucket_cached("b").await.expect("copy").1,
        "A holds a copy"
    );
    let record = b.bucket("b").await.expect("B reads it");
    b.delete_bucket(&record).await.expect("B deletes it");
    assert!(
        a.bucket_cached("b").await.expect("copy").1,
        "A's copy is still fresh"
    );
    match put(&a, "b", "key", 1).await {
        Err(GatewayError::NoSuchBucket(_)) => {}
        other => panic!("a PUT into a deleted bucket: {other:?}"),
    }
    // Nothing was left in the index pool: the shard was not brought back.
    let shard = layout::index_shard_object(&record.id, layout::shard_of("key", record.shards));
    assert!(
        a.index.stat(&shard).await.is_err(),
        "shard {shard} came back"
    );
}

#[tokio::test]
async fn versioning_enabled_through_another_gateway_is_not_missed_by_a_copy() {
    let (a, b, _rados) = two_stores().await;
    a.create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let first = put(&a, "b", "key", 1).await.expect("first PUT");
    assert_eq!(first.version_id, None);
    let mut record = b.bucket("b").await.expect("B reads it");
    record.versioning = Some(Versioning::Enabled);
    b.save_bucket(&record).await.expect("B enables versioning");
    b.stamp_shards(&record).await.expect("B stamps the shards");
    assert_eq!(a.bucket_cached("b").await.expect("copy").0.versioning, None);
    let second = put(&a, "b", "key", 2).await.expect("second PUT");
    assert!(second.version_id.is_some(), "{second:?}");
    // The first object survives as the null version, its data intact.
    let state = a
        .key_state(&record, "key", usize::MAX)
        .await
        .expect("state");
    let null = state
        .find("null")
        .and_then(|found| state.get(found))
        .cloned();
    assert_eq!(null.map(|e| e.pieces), Some(first.pieces.clone()));
    assert!(a.data.stat(&first.pieces[0].oid).await.is_ok());
}

#[tokio::test]
async fn a_bucket_without_stamps_is_stamped_by_its_first_put() {
    let (a, _, _rados) = two_stores().await;
    let record = a
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    // As a bucket of an older build: no shard objects at all.
    for shard in 0..record.shards {
        let oid = layout::index_shard_object(&record.id, shard);
        a.index.remove(&oid).await.expect("remove shard");
    }
    a.forget_bucket("b");
    put(&a, "b", "key", 1).await.expect("PUT");
    let shard = layout::index_shard_object(&record.id, layout::shard_of("key", record.shards));
    let stamp = a
        .index
        .get_xattr(&shard, layout::VERSIONING_STAMP_XATTR)
        .await
        .expect("stamp");
    assert_eq!(stamp, layout::versioning_stamp(None));
    // Later PUTs of the key from a copy pass the guard.
    let tag = a.new_tag(8);
    let guarded = a
        .begin_object_write_guarded(&record, "key", &tag)
        .await
        .expect("intent");
    assert!(guarded.is_some(), "the stamped shard refused the guard");
}

#[tokio::test]
async fn a_commit_from_a_stale_prefetch_reads_again_and_frees_what_it_replaced() {
    let (a, b, _rados) = two_stores().await;
    let bucket = a
        .create_bucket("b", "owner", "", Vec::new(), "")
        .await
        .expect("bucket");
    let tag = a.new_tag(8);
    let intent = a
        .begin_object_write_guarded(&bucket, "key", &tag)
        .await
        .expect("intent")
        .expect("guard holds");
    let prefetched = a.prefetch_plain(&bucket, "key").await.expect("prefetch");
    // Gateway B commits the key between A's prefetch and A's commit.
    let theirs = put(&b, "b", "key", 2).await.expect("B's PUT");
    let body = futures::stream::iter(vec![Ok(Bytes::from(vec![1u8; 100]))]);
    let (pieces, size, _) = a
        .write_body(&bucket.id, &tag, "key", Body::new(body, None))
        .await
        .expect("data");
    let ours = ObjectEntry {
        size,
        pieces: pieces.clone(),
        ..ObjectEntry::default()
    };
    a.commit_from(
        &bucket,
        "key",
        ours,
        &super::WriteCondition::default(),
        Some(&intent),
        Some(prefetched),
    )
    .await
    .expect("A's commit");
    assert_eq!(
        a.stats().index_races,
        1,
        "the stale prefetch failed the guard once"
    );
    let entry = a
        .entry_opt(&bucket, "key")
        .await
        .expect("entry")
        .expect("one");
    assert_eq!(entry.pieces, pieces);
    // B's data, which A's commit replaced, was freed (gc_min_wait_s 0), not orphaned.
    assert!(a.data.stat(&theirs.pieces[0].oid).await.is_err());
    // A guard on a missing shard is NotFound, never a created shard.
    let op = WriteOp::new().compare_xattr(
        layout::VERSIONING_STAMP_XATTR,
        rados::Comparison::Equal,
        b"off".to_vec(),
    );
    assert!(a.index.operate("missing-shard", op).await.is_err());
}
