//! The base pool as clients see it with an overlay: an [`IoCtx`] whose every op goes through
//! the tier, so the S3 gateway and block volumes run on a tiered pool unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use rados::{IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, Result, WriteOp};

use crate::engine::Tier;

/// A base pool served through its cache tier.
pub struct OverlayIoCtx {
    pool: PoolInfo,
    tier: Arc<Tier>,
}

impl OverlayIoCtx {
    /// The base pool `pool` served through `tier`.
    pub fn new(pool: PoolInfo, tier: Arc<Tier>) -> Self {
        OverlayIoCtx { pool, tier }
    }

    /// The tier behind it.
    pub fn tier(&self) -> &Arc<Tier> {
        &self.tier
    }
}

#[async_trait]
impl IoCtx for OverlayIoCtx {
    fn pool(&self) -> &PoolInfo {
        &self.pool
    }

    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        rados::validate_object_name(object)?;
        Ok(self.tier.operate(object, op).await?)
    }

    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        Ok(self.tier.read(object, offset_bytes, length_bytes).await?)
    }

    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        Ok(self.tier.stat(object).await?)
    }

    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        Ok(self.tier.get_xattr(object, name).await?)
    }

    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.tier.get_xattrs(object).await?)
    }

    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        Ok(self
            .tier
            .omap_get_vals(object, start_after, prefix, max)
            .await?)
    }

    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        Ok(self.tier.omap_get_vals_by_keys(object, keys).await?)
    }

    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        Ok(self.tier.list(cursor, max).await?)
    }
}
