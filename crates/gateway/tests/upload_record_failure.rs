//! CreateMultipartUpload writes the upload's parts object, then its record in the bucket's
//! uploads index. When the record's write fails the client gets an error and no upload id, so
//! nothing would ever abort the upload: its parts object must not be left behind.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use gateway::{serve, GatewayConfig};
use rados::{
    ClusterStats, IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, PoolSpec, Rados,
    RadosError, WriteOp,
};

/// The embedded cluster, but every write to a bucket's uploads index fails while `failing`.
struct UploadsIndexFails {
    inner: Arc<dyn Rados>,
    failing: Arc<AtomicBool>,
}

struct FailingIoCtx {
    inner: Arc<dyn IoCtx>,
    failing: Arc<AtomicBool>,
}

#[async_trait]
impl Rados for UploadsIndexFails {
    async fn pool_create(&self, spec: PoolSpec) -> rados::Result<PoolInfo> {
        self.inner.pool_create(spec).await
    }
    async fn pool_delete(&self, name: &str) -> rados::Result<()> {
        self.inner.pool_delete(name).await
    }
    async fn pool_list(&self) -> rados::Result<Vec<PoolInfo>> {
        self.inner.pool_list().await
    }
    async fn pool_lookup(&self, name: &str) -> rados::Result<PoolInfo> {
        self.inner.pool_lookup(name).await
    }
    async fn cluster_stats(&self) -> rados::Result<ClusterStats> {
        self.inner.cluster_stats().await
    }
    async fn io_ctx(&self, pool: &str) -> rados::Result<Arc<dyn IoCtx>> {
        Ok(Arc::new(FailingIoCtx {
            inner: self.inner.io_ctx(pool).await?,
            failing: self.failing.clone(),
        }))
    }
}

#[async_trait]
impl IoCtx for FailingIoCtx {
    fn pool(&self) -> &PoolInfo {
        self.inner.pool()
    }
    async fn operate(&self, object: &str, op: WriteOp) -> rados::Result<()> {
        if object.starts_with(".uploads.") && self.failing.load(Ordering::SeqCst) {
            return Err(RadosError::Io(format!("injected failure writing {object}")));
        }
        self.inner.operate(object, op).await
    }
    async fn read(
        &self,
        object: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> rados::Result<Vec<u8>> {
        self.inner.read(object, offset_bytes, length_bytes).await
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
        self.inner.list(cursor, max).await
    }
}

async fn upload_objects(rados: &Arc<dyn Rados>, pool: &str) -> Vec<String> {
    common::object_names(rados, pool, |name| name.starts_with(".upload.")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_whose_record_cannot_be_written_leaves_no_parts_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = common::cluster(dir.path(), "1G").await;
    let failing = Arc::new(AtomicBool::new(false));
    let rados: Arc<dyn Rados> = Arc::new(UploadsIndexFails {
        inner: cluster.clone(),
        failing: failing.clone(),
    });
    let config = GatewayConfig {
        auth: false,
        gc_min_wait_s: 0,
        ..GatewayConfig::default()
    };
    let server = serve(rados, "127.0.0.1:0".parse().unwrap(), config.clone())
        .await
        .expect("gateway");
    let address = server.local_addr;
    assert_eq!(common::status_of(address, "PUT", "/bucket").await, 200);

    failing.store(true, Ordering::SeqCst);
    let refused = common::status_of(address, "POST", "/bucket/key?uploads").await;
    assert!(refused >= 500, "a failed record write answers {refused}");
    assert_eq!(
        upload_objects(&cluster, &config.index_pool).await,
        Vec::<String>::new(),
        "the refused upload left its parts object"
    );

    failing.store(false, Ordering::SeqCst);
    assert_eq!(
        common::status_of(address, "POST", "/bucket/key?uploads").await,
        200
    );
    assert_eq!(
        upload_objects(&cluster, &config.index_pool).await.len(),
        1,
        "an upload that was recorded keeps its parts object"
    );
    server.shutdown().await;
}
