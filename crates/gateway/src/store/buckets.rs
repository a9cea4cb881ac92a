//! Bucket records (the `buckets` omap of the metadata pool, one name claimed by an exclusive
//! create), this gateway's short-lived copies of them ([`Store::bucket_cached`]), and whether
//! a bucket's index still holds objects.

use std::sync::Arc;

use rados::{IoCtx, RadosError, WriteOp};

use super::{ignore_missing, Store};
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord};

impl Store {
    /// Bucket `name` as the cluster holds it now (and kept as this gateway's copy).
    pub async fn bucket(&self, name: &str) -> Result<BucketRecord> {
        let found = self.read_bucket(name).await;
        match &found {
            Ok(record) => self.bucket_copies.put(name, record.clone()),
            Err(_) => self.bucket_copies.forget(name),
        }
        found
    }

    /// Bucket `name`, from this gateway's copy when it was read less than
    /// `metadata_cache_ms` ago; `true` with a copy. For GET, HEAD and PUT of objects only:
    /// a caller must check in the cluster what may not be stale (a missing entry may be a
    /// deleted bucket's; a PUT's intent is guarded by the shard's versioning stamp).
    pub async fn bucket_cached(&self, name: &str) -> Result<(BucketRecord, bool)> {
        match self.bucket_copies.get(name) {
            Some(record) => Ok((record, true)),
            None => Ok((self.bucket(name).await?, false)),
        }
    }

    /// Drops this gateway's copy of bucket `name` (found stale).
    pub fn forget_bucket(&self, name: &str) {
        self.bucket_copies.forget(name);
    }

    async fn read_bucket(&self, name: &str) -> Result<BucketRecord> {
        let key = name.as_bytes().to_vec();
        let found = match self
            .meta
            .omap_get_vals_by_keys(layout::BUCKETS_OBJECT, std::slice::from_ref(&key))
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => Default::default(),
            Err(error) => return Err(error.into()),
        };
        match found.get(&key) {
            Some(bytes) => layout::decode(bytes),
            None => Err(GatewayError::NoSuchBucket(name.to_string())),
        }
    }

    pub async fn buckets(&self) -> Result<Vec<BucketRecord>> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = match self
                .meta
                .omap_get_vals(layout::BUCKETS_OBJECT, after.as_deref(), b"", 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(out),
                Err(error) => return Err(error.into()),
            };
            for (key, value) in &page.entries {
                out.push(layout::decode(value)?);
                after = Some(key.clone());
            }
            if !page.more || page.entries.is_empty() {
                return Ok(out);
            }
        }
    }

    pub async fn create_bucket(
        &self,
        name: &str,
        owner: &str,
        acl: &str,
        grants: Vec<crate::acl::Grant>,
        location: &str,
    ) -> Result<BucketRecord> {
        let claim = layout::bucket_claim_object(name);
        match self.meta.create(&claim, true).await {
            Ok(()) => {}
            Err(RadosError::Exists(_)) => {
                return match self.bucket(name).await {
                    Ok(record) if record.owner == owner => {
                        Err(GatewayError::BucketAlreadyOwnedByYou)
                    }
                    _ => Err(GatewayError::BucketAlreadyExists),
                }
            }
            Err(error) => return Err(error.into()),
        }
        let record = BucketRecord {
            name: name.to_string(),
            id: self.new_tag(8),
            owner: owner.to_string(),
            created_ns: self.now_ns(),
            shards: self.config.index_shards,
            acl: acl.to_string(),
            location: location.to_string(),
            grants: Some(grants),
            public_access_block: None,
            cors: None,
            policy: None,
            versioning: None,
            tags: None,
            encryption: None,
            lifecycle: None,
        };
        // Every shard exists, stamped, before the bucket does: a PUT guarded by the stamp
        // then fails only on a changed or deleted bucket.
        self.stamp_shards(&record).await?;
        self.save_bucket(&record).await?;
        Ok(record)
    }

    /// Writes the bucket's versioning status into the stamp of every index shard (creating
    /// missing shards). After a versioning change, so PUTs answered from copies of the
    /// record that predate it fail their guard and read the record again.
    pub async fn stamp_shards(&self, record: &BucketRecord) -> Result<()> {
        let stamp = layout::versioning_stamp(record.versioning);
        let writes = (0..record.shards).map(|shard| {
            let op = WriteOp::new().set_xattr(layout::VERSIONING_STAMP_XATTR, stamp.to_vec());
            let oid = layout::index_shard_object(&record.id, shard);
            async move { self.index.operate(&oid, op).await }
        });
        for result in futures::future::join_all(writes).await {
            result?;
        }
        Ok(())
    }

    pub async fn save_bucket(&self, record: &BucketRecord) -> Result<()> {
        self.meta
            .omap_set(
                layout::BUCKETS_OBJECT,
                vec![(record.name.as_bytes().to_vec(), layout::encode(record))],
            )
            .await?;
        self.bucket_copies.put(&record.name, record.clone());
        Ok(())
    }

    /// Whether no index shard of the bucket holds an object.
    pub async fn bucket_has_no_objects(&self, record: &BucketRecord) -> Result<bool> {
        for shard in 0..record.shards {
            let oid = layout::index_shard_object(&record.id, shard);
            if self.shard_has_entries(&oid).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub async fn delete_bucket(&self, record: &BucketRecord) -> Result<()> {
        if !self.bucket_has_no_objects(record).await? {
            return Err(GatewayError::BucketNotEmpty);
        }
        if !self
            .omap_is_empty(&self.index, &layout::uploads_object(&record.id))
            .await?
        {
            return Err(GatewayError::BucketNotEmpty);
        }
        self.meta
            .omap_remove_keys(
                layout::BUCKETS_OBJECT,
                vec![record.name.as_bytes().to_vec()],
            )
            .await?;
        self.bucket_copies.forget(&record.name);
        for shard in 0..record.shards {
            ignore_missing(
                self.index
                    .remove(&layout::index_shard_object(&record.id, shard))
                    .await,
            )?;
        }
        ignore_missing(self.index.remove(&layout::uploads_object(&record.id)).await)?;
        ignore_missing(
            self.meta
                .remove(&layout::bucket_claim_object(&record.name))
                .await,
        )?;
        Ok(())
    }

    /// Whether an index shard holds an entry or a version (write intents of uploads in
    /// progress do not count: their commits fail once the bucket's shards are gone).
    async fn shard_has_entries(&self, oid: &str) -> Result<bool> {
        let first = match self.index.omap_get_vals(oid, None, b"", 1).await {
            Ok(page) => page.entries.into_iter().next(),
            Err(RadosError::NotFound(_)) => return Ok(false),
            Err(error) => return Err(error.into()),
        };
        match first {
            None => Ok(false),
            Some((key, _)) if key.first() == Some(&layout::INTENT_NAMESPACE) => {
                let versions = [layout::VERSION_NAMESPACE];
                Ok(!self.omap_is_empty_with(oid, &versions).await?)
            }
            Some(_) => Ok(true),
        }
    }

    async fn omap_is_empty_with(&self, oid: &str, prefix: &[u8]) -> Result<bool> {
        match self.index.omap_get_vals(oid, None, prefix, 1).await {
            Ok(page) => Ok(page.entries.is_empty()),
            Err(RadosError::NotFound(_)) => Ok(true),
            Err(error) => Err(error.into()),
        }
    }

    async fn omap_is_empty(&self, io: &Arc<dyn IoCtx>, oid: &str) -> Result<bool> {
        match io.omap_get_vals(oid, None, b"", 1).await {
            Ok(page) => Ok(page.entries.is_empty()),
            Err(RadosError::NotFound(_)) => Ok(true),
            Err(error) => Err(error.into()),
        }
    }
}
