//! The metadata database: table definitions, key encodings, the superblock and the mount scan.
//!
//! Tables (all keys and values are bytes):
//! - `super`: layout recorded at create (`format`, `min_alloc_size`, `checksum_block`,
//!   `device_size`), as u64 little endian;
//! - `objects`: `collection \0 name` -> encoded [`Onode`]; sorted by collection, then name;
//! - `omap`: `u16 BE len, collection, u16 BE len, name, key` -> value; one object's keys are
//!   contiguous and sorted;
//! - `deferred`: sequence -> `u64 LE device offset, data`: data of deferred writes whose
//!   device blocks may not be durable yet; replayed in sequence order at mount.

use std::collections::BTreeMap;

use redb::{Database, ReadableTable, TableDefinition};

use crate::allocator::DeviceExtent;
use crate::error::{Result, StoreError};
use crate::onode::Onode;
use crate::types::CollectionUsage;

pub(crate) const SUPER: TableDefinition<&str, u64> = TableDefinition::new("super");
pub(crate) const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("objects");
pub(crate) const OMAP: TableDefinition<&[u8], &[u8]> = TableDefinition::new("omap");
pub(crate) const DEFERRED: TableDefinition<u64, &[u8]> = TableDefinition::new("deferred");

/// On-disk format version, bumped on incompatible changes.
pub(crate) const FORMAT_VERSION: u64 = 1;

/// The layout a store was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub min_alloc_size_bytes: u64,
    pub checksum_block_bytes: u64,
    pub device_size_bytes: u64,
}

/// Key of an object in `objects`.
pub(crate) fn object_key(collection: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(collection.len() + 1 + name.len());
    key.extend_from_slice(collection.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

/// Splits an `objects` key back into (collection, name).
pub(crate) fn split_object_key(key: &[u8]) -> Result<(String, String)> {
    let zero = key
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| StoreError::Metadata("object key without separator".into()))?;
    let text = |bytes: &[u8]| {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| StoreError::Metadata("object key is not UTF-8".into()))
    };
    Ok((text(&key[..zero])?, text(&key[zero + 1..])?))
}

/// Prefix of every omap key of an object.
pub(crate) fn omap_prefix(collection: &str, name: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(4 + collection.len() + name.len());
    prefix.extend_from_slice(&(collection.len() as u16).to_be_bytes());
    prefix.extend_from_slice(collection.as_bytes());
    prefix.extend_from_slice(&(name.len() as u16).to_be_bytes());
    prefix.extend_from_slice(name.as_bytes());
    prefix
}

/// The smallest key greater than every key starting with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return end;
        }
    }
    unreachable!("prefixes start with a length below 0xff00")
}

/// Writes the layout into a fresh database and creates the tables.
pub(crate) fn initialize(db: &Database, layout: Layout) -> Result<()> {
    let transaction = db.begin_write()?;
    {
        let mut table = transaction.open_table(SUPER)?;
        table.insert("format", FORMAT_VERSION)?;
        table.insert("min_alloc_size", layout.min_alloc_size_bytes)?;
        table.insert("checksum_block", layout.checksum_block_bytes)?;
        table.insert("device_size", layout.device_size_bytes)?;
        transaction.open_table(OBJECTS)?;
        transaction.open_table(OMAP)?;
        transaction.open_table(DEFERRED)?;
    }
    transaction.commit()?;
    Ok(())
}

/// Reads the layout of an existing store.
pub(crate) fn read_layout(db: &Database) -> Result<Layout> {
    let transaction = db.begin_read()?;
    let table = transaction.open_table(SUPER)?;
    let get = |key: &str| -> Result<u64> {
        table
            .get(key)?
            .map(|value| value.value())
            .ok_or_else(|| StoreError::Metadata(format!("superblock lacks {key}")))
    };
    let format = get("format")?;
    if format != FORMAT_VERSION {
        return Err(StoreError::Metadata(format!(
            "format {format} is not {FORMAT_VERSION}"
        )));
    }
    Ok(Layout {
        min_alloc_size_bytes: get("min_alloc_size")?,
        checksum_block_bytes: get("checksum_block")?,
        device_size_bytes: get("device_size")?,
    })
}

/// Deferred writes not known to be durable on the device, in commit order.
pub(crate) fn deferred_records(db: &Database) -> Result<Vec<(u64, Vec<u8>)>> {
    let transaction = db.begin_read()?;
    let table = transaction.open_table(DEFERRED)?;
    let mut records = Vec::new();
    for entry in table.iter()? {
        let (_, value) = entry?;
        let value = value.value();
        if value.len() < 8 {
            return Err(StoreError::Metadata("deferred record too short".into()));
        }
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&value[..8]);
        records.push((u64::from_le_bytes(offset), value[8..].to_vec()));
    }
    Ok(records)
}

/// Removes every deferred record (after their data is durable on the device).
pub(crate) fn clear_deferred(db: &Database) -> Result<()> {
    let transaction = db.begin_write()?;
    {
        let mut table = transaction.open_table(DEFERRED)?;
        table.retain(|_, _| false)?;
    }
    transaction.commit()?;
    Ok(())
}

/// What the mount scan finds: every allocated extent and the accounting totals.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub allocated: Vec<DeviceExtent>,
    pub counters: Counters,
}

/// Running totals kept in memory, rebuilt at mount and updated after each commit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub stored_bytes: u64,
    pub onode_bytes: u64,
    pub omap_bytes: u64,
    pub collections: BTreeMap<String, CollectionUsage>,
}

impl Counters {
    pub fn objects(&self) -> u64 {
        self.collections.values().map(|usage| usage.objects).sum()
    }
}

/// The collection an omap key belongs to (see `omap_prefix`).
fn omap_collection(key: &[u8]) -> Result<String> {
    let length = key
        .get(..2)
        .map(|bytes| usize::from(u16::from_be_bytes([bytes[0], bytes[1]])))
        .ok_or_else(|| StoreError::Metadata("omap key too short".into()))?;
    let bytes = key
        .get(2..2 + length)
        .ok_or_else(|| StoreError::Metadata("omap key shorter than its collection".into()))?;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| StoreError::Metadata("omap collection is not UTF-8".into()))
}

/// Reads every onode and omap entry once (O(objects)): the allocator is rebuilt from the
/// extents the onodes reference, so space that no committed record references is free.
pub(crate) fn scan(db: &Database, checksum_block_bytes: u64) -> Result<Scan> {
    let transaction = db.begin_read()?;
    let objects = transaction.open_table(OBJECTS)?;
    let mut scan = Scan::default();
    for entry in objects.iter()? {
        let (key, value) = entry?;
        let (collection, _) = split_object_key(key.value())?;
        let onode = Onode::decode(value.value(), checksum_block_bytes)?;
        scan.allocated
            .extend(onode.extents.values().map(|extent| extent.device()));
        let record_bytes = (key.value().len() + value.value().len()) as u64;
        scan.counters.stored_bytes += onode.stored_bytes();
        scan.counters.onode_bytes += record_bytes;
        let usage = scan.counters.collections.entry(collection).or_default();
        usage.objects += 1;
        usage.stored_bytes += onode.stored_bytes();
        usage.allocated_bytes += onode.allocated_bytes();
        usage.metadata_bytes += record_bytes;
    }
    let omap = transaction.open_table(OMAP)?;
    for entry in omap.iter()? {
        let (key, value) = entry?;
        let entry_bytes = (key.value().len() + value.value().len()) as u64;
        scan.counters.omap_bytes += entry_bytes;
        let collection = omap_collection(key.value())?;
        scan.counters
            .collections
            .entry(collection)
            .or_default()
            .metadata_bytes += entry_bytes;
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_keys_sort_by_collection_then_name() {
        let mut keys = [
            object_key("1.a", "b"),
            object_key("1.a", "a\u{0}z"),
            object_key("1.b", "a"),
            object_key("1.a", "ab"),
        ];
        keys.sort();
        let names: Vec<_> = keys
            .iter()
            .map(|k| split_object_key(k).expect("valid"))
            .collect();
        assert_eq!(names[0], ("1.a".into(), "a\u{0}z".into()));
        assert_eq!(names[1], ("1.a".into(), "ab".into()));
        assert_eq!(names[2], ("1.a".into(), "b".into()));
        assert_eq!(names[3], ("1.b".into(), "a".into()));
    }

    #[test]
    fn omap_prefixes_do_not_collide() {
        let a = omap_prefix("c", "a\u{0}b");
        let b = omap_prefix("c", "a");
        assert!(!a.starts_with(&b) && !b.starts_with(&a));
        assert!(prefix_end(&b).as_slice() > b.as_slice());
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
    }
}
