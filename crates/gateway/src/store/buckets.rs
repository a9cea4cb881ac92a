//! Bucket records (the `buckets` omap of the metadata pool, one name claimed by an exclusive
//! create) and whether a bucket's index still holds objects.

use std::sync::Arc;

use rados::{IoCtx, RadosError};

use super::{ignore_missing, Store};
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord};

impl Store {
    pub async fn bucket(&self, name: &str) -> Result<BucketRecord> {
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
        };
        self.save_bucket(&record).await?;
        Ok(record)
    }

    pub async fn save_bucket(&self, record: &BucketRecord) -> Result<()> {
        self.meta
            .omap_set(
                layout::BUCKETS_OBJECT,
                vec![(record.name.as_bytes().to_vec(), layout::encode(record))],
            )
            .await?;
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
