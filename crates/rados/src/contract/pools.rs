//! Pools: create, look up, list, delete, errors, isolation.

use super::{data, finish, fresh_pool, ok, spec};
use crate::{PoolSpec, Rados, RadosError};

/// Pools: create, look up, list, delete.
pub async fn pools_create_lookup_list_delete(rados: &dyn Rados, pool: &str) {
    let _ = rados.pool_delete(pool).await;
    let created = ok(rados.pool_create(spec(pool)).await, "pool_create");
    assert_eq!(created.name, pool);
    assert_eq!(created.size, 1);
    assert_eq!(created.min_size, 1, "min_size defaults to size - size / 2");
    let found = ok(rados.pool_lookup(pool).await, "pool_lookup");
    assert_eq!((found.id, &found.name), (created.id, &created.name));
    let listed = ok(rados.pool_list().await, "pool_list");
    assert!(
        listed.iter().any(|p| p.id == created.id && p.name == pool),
        "pool_list holds the new pool"
    );
    let io = ok(rados.io_ctx(pool).await, "io_ctx");
    assert_eq!(io.pool().name, pool);
    assert_eq!(io.pool().id, created.id);
    let stats = ok(rados.cluster_stats().await, "cluster_stats");
    assert!(stats.osds >= 1 && stats.osds_up >= 1, "{stats:?}");
    assert!(stats.osds_up <= stats.osds && stats.osds_in <= stats.osds);
    assert!(stats.total_bytes > 0, "{stats:?}");
    finish(rados, pool).await;
    expect_err!(
        rados.pool_lookup(pool).await,
        RadosError::NotFound(_),
        "lookup after delete"
    );
    let listed = ok(rados.pool_list().await, "pool_list");
    assert!(
        !listed.iter().any(|p| p.name == pool),
        "deleted pool listed"
    );
}

/// Pool errors: `Exists`, `NotFound`, `InvalidArgument`.
pub async fn pool_errors(rados: &dyn Rados, pool: &str) {
    fresh_pool(rados, pool).await;
    expect_err!(
        rados.pool_create(spec(pool)).await,
        RadosError::Exists(_),
        "second create"
    );
    let missing = format!("{pool}-missing");
    expect_err!(
        rados.pool_lookup(&missing).await,
        RadosError::NotFound(_),
        "lookup"
    );
    expect_err!(
        rados.io_ctx(&missing).await.map(|io| io.pool().clone()),
        RadosError::NotFound(_),
        "io_ctx"
    );
    expect_err!(
        rados.pool_delete(&missing).await,
        RadosError::NotFound(_),
        "delete"
    );
    let zero = PoolSpec::new(format!("{pool}-size0")).with_size(0);
    expect_err!(
        rados.pool_create(zero).await,
        RadosError::InvalidArgument(_),
        "size 0"
    );
    finish(rados, pool).await;
}

/// Deleting a pool deletes its objects: a pool created again under the name is empty.
pub async fn pool_delete_removes_its_objects(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"data").await, "write_full");
    finish(rados, pool).await;
    expect_err!(
        rados.io_ctx(pool).await.map(|io| io.pool().clone()),
        RadosError::NotFound(_),
        "io_ctx after delete"
    );
    let io = fresh_pool(rados, pool).await;
    expect_err!(
        io.stat("o").await,
        RadosError::NotFound(_),
        "object of the old pool"
    );
    assert!(ok(io.list_all().await, "list_all").is_empty());
    finish(rados, pool).await;
}

/// One object name in two pools is two objects.
pub async fn pools_are_isolated(rados: &dyn Rados, pool: &str) {
    let other = format!("{pool}-other");
    let first = fresh_pool(rados, pool).await;
    let second = fresh_pool(rados, &other).await;
    ok(first.write_full("same", b"one").await, "write first");
    expect_err!(
        second.stat("same").await,
        RadosError::NotFound(_),
        "other pool"
    );
    ok(second.write_full("same", b"two").await, "write second");
    assert_eq!(data(&*first, "same").await, b"one");
    assert_eq!(data(&*second, "same").await, b"two");
    finish(rados, &other).await;
    assert_eq!(data(&*first, "same").await, b"one");
    finish(rados, pool).await;
}
