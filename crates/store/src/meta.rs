//! The metadata database: keyspaces, key encodings, the superblock, the mount scan, and the
//! batch a group commit writes.
//!
//! The database is fjall, an LSM tree: a batch is an append to its journal (unsynced here)
//! and memtable inserts; flushing memtables to sorted tables and compacting them happens on
//! its own thread. (It was redb, a copy-on-write B-tree: each durable commit rewrote the
//! touched pages and their parents, 24 µs of CPU per 4 KiB object write against 4 for a
//! durable fjall batch and 3 for our log's pwrite + fdatasync, measured with batches of 7
//! writes as the cluster makes them (a microbenchmark of 20,000 batches); redb
//! capped replica-1 writes at about 20k/s.)
//!
//! The metadata path is a directory: `db/` holds the database, persisted only at checkpoints;
//! the write-ahead log that makes each commit durable lives on the data device (`wal.rs`).
//!
//! Keyspaces (all keys and values are bytes):
//! - `super`: layout recorded at create (`format`, `min_alloc_size`, `checksum_block`,
//!   `device_size` (the data part), `log_size`), and `wal_sequence`, the last log record applied, as u64 little endian;
//! - `objects`: `collection \0 name` -> encoded [`Onode`]; sorted by collection, then name;
//! - `omap`: `u16 BE len, collection, u16 BE len, name, key` -> value; one object's keys are
//!   contiguous and sorted.

use std::collections::BTreeMap;
use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::allocator::DeviceExtent;
use crate::error::{Result, StoreError};
use crate::onode::Onode;
use crate::types::CollectionUsage;

/// On-disk format version, bumped on incompatible changes (6: log records carry digests of
/// the data their batch wrote; 5: log records say which earlier records are known flushed,
/// as several batches flush at once; format 4 and 5 stores are read and upgraded at mount;
/// 4: the log lives on the data device; 3: log records carry a generation id and the log file is recycled; 2: fjall; 1 was
/// redb).
pub(crate) const FORMAT_VERSION: u64 = 6;
/// Older formats this build reads (and upgrades to [`FORMAT_VERSION`] when it mounts them).
const FORMAT_VERSIONS_UPGRADED: [u64; 2] = [4, 5];

/// The layout a store was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub min_alloc_size_bytes: u64,
    pub checksum_block_bytes: u64,
    /// Bytes of the device that hold data: from offset 0.
    pub device_size_bytes: u64,
    /// Bytes of the metadata log's region, right after the data (`wal.rs`).
    pub log_bytes: u64,
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

/// Which keyspace a batch entry goes to (the numbers are the log's encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Space {
    Objects = 0,
    Omap = 1,
    Super = 2,
}

impl Space {
    pub fn from_u8(value: u8) -> Option<Space> {
        match value {
            0 => Some(Space::Objects),
            1 => Some(Space::Omap),
            2 => Some(Space::Super),
            _ => None,
        }
    }
}

/// The `super` key holding the sequence of the last log record the database took.
pub(crate) const WAL_SEQUENCE_KEY: &[u8] = b"wal_sequence";

/// Superblock key: why a mount found the metadata log damaged (UTF-8), while the store's
/// owner has not restored what it lost (`Store::log_damage`).
pub(crate) const LOG_DAMAGE_KEY: &[u8] = b"log_damage";

/// The open metadata database and its keyspaces.
pub(crate) struct Meta {
    db: Database,
    directory: std::path::PathBuf,
    superblock: Keyspace,
    pub objects: Keyspace,
    pub omap: Keyspace,
}

/// Why a metadata directory could not be opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// Another handle (in this process or another) holds it.
    Locked,
    Other(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Locked => f.write_str("in use by another store handle"),
            OpenError::Other(why) => f.write_str(why),
        }
    }
}

impl Meta {
    /// Opens (or, with `create`, creates) the database in `directory/db`. Opening refuses a
    /// directory without one and a plain file (the metadata of an older build was one redb
    /// file), so that a typo never silently starts an empty store.
    pub fn open(directory: &Path, cache_bytes: u64, create: bool) -> Result<Meta, OpenError> {
        let path = directory.join("db");
        if create {
            std::fs::create_dir_all(directory)
                .map_err(|error| OpenError::Other(format!("cannot create: {error}")))?;
        } else {
            match std::fs::metadata(directory) {
                Err(error) => return Err(OpenError::Other(format!("cannot open: {error}"))),
                Ok(found) if !found.is_dir() => {
                    return Err(OpenError::Other(
                        "is a file, not a metadata directory (stores made by builds before \
                         format 2 cannot be opened)"
                            .into(),
                    ))
                }
                Ok(_) if !path.is_dir() => {
                    return Err(OpenError::Other("holds no metadata database (db/)".into()))
                }
                Ok(_) => {}
            }
        }
        let db = Database::builder(&path)
            .cache_size(cache_bytes)
            // Onodes are mostly crc32cs, which do not compress (lz4 is not built in either).
            .journal_compression(fjall::CompressionType::None)
            // Bounds the journal on disk (a memtable flush lets old journal files go).
            .max_journaling_size(64 << 20)
            // One background worker: the cluster runs one store per OSD on a few cores.
            .worker_threads(1)
            .open()
            .map_err(|error| match error {
                fjall::Error::Locked => OpenError::Locked,
                other => OpenError::Other(other.to_string()),
            })?;
        let open = |name: &str, memtable_bytes: u64| {
            db.keyspace(name, || {
                KeyspaceCreateOptions::default().max_memtable_size(memtable_bytes)
            })
            .map_err(|error| OpenError::Other(format!("keyspace {name}: {error}")))
        };
        Ok(Meta {
            superblock: open("super", 1 << 20)?,
            objects: open("objects", 16 << 20)?,
            omap: open("omap", 16 << 20)?,
            db,
            directory: directory.to_path_buf(),
        })
    }

    /// Writes the layout into a fresh database, durably.
    pub fn initialize(&self, layout: Layout) -> Result<()> {
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        for (key, value) in [
            ("format", FORMAT_VERSION),
            ("min_alloc_size", layout.min_alloc_size_bytes),
            ("checksum_block", layout.checksum_block_bytes),
            ("device_size", layout.device_size_bytes),
            ("log_size", layout.log_bytes),
        ] {
            batch.insert(&self.superblock, key, value.to_le_bytes().to_vec());
        }
        batch.commit()?;
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    /// Records [`FORMAT_VERSION`] in the superblock, durably, if an older format is there:
    /// called at mount once the log (the only part that changed) has been replayed and
    /// emptied, so an older build then refuses the store instead of misreading new records.
    pub fn upgrade_format(&self) -> Result<()> {
        let current = self.superblock.get("format")?;
        if current.as_deref() == Some(&FORMAT_VERSION.to_le_bytes()[..]) {
            return Ok(());
        }
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        batch.insert(
            &self.superblock,
            "format",
            FORMAT_VERSION.to_le_bytes().to_vec(),
        );
        batch.commit()?;
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    /// Reads the layout of an existing store.
    pub fn read_layout(&self) -> Result<Layout> {
        let get = |key: &str| -> Result<u64> {
            let value = self
                .superblock
                .get(key)?
                .ok_or_else(|| {
                    StoreError::Metadata(format!(
                        "the database's superblock has no `{key}`: the database is damaged (a file of it truncated or removed) or was never completed by a create"
                    ))
                })?;
            let bytes: [u8; 8] = value[..].try_into().map_err(|_| {
                StoreError::Metadata(format!("superblock {key} is {} bytes", value.len()))
            })?;
            Ok(u64::from_le_bytes(bytes))
        };
        let format = get("format")?;
        if format != FORMAT_VERSION && !FORMAT_VERSIONS_UPGRADED.contains(&format) {
            return Err(StoreError::Metadata(format!(
                "format {format} is not {FORMAT_VERSION}"
            )));
        }
        Ok(Layout {
            min_alloc_size_bytes: get("min_alloc_size")?,
            checksum_block_bytes: get("checksum_block")?,
            device_size_bytes: get("device_size")?,
            log_bytes: get("log_size")?,
        })
    }

    /// The encoded onode stored under an `objects` key.
    pub fn object(&self, key: &[u8]) -> Result<Option<fjall::Slice>> {
        Ok(self.objects.get(key)?)
    }

    /// The sequence of the last log record the database took, if any.
    pub fn wal_sequence(&self) -> Result<Option<u64>> {
        let Some(value) = self.superblock.get(WAL_SEQUENCE_KEY)? else {
            return Ok(None);
        };
        let bytes: [u8; 8] = value[..]
            .try_into()
            .map_err(|_| StoreError::Metadata("wal_sequence is not 8 bytes".into()))?;
        Ok(Some(u64::from_le_bytes(bytes)))
    }

    /// The superblock's [`LOG_DAMAGE_KEY`], if set.
    pub fn log_damage(&self) -> Result<Option<String>> {
        Ok(self
            .superblock
            .get(LOG_DAMAGE_KEY)?
            .map(|value| String::from_utf8_lossy(&value).into_owned()))
    }

    /// Bytes the metadata directory (database and log) takes on disk: allocated blocks, not
    /// apparent sizes (fjall's journal files are sparse, 64 MiB apparent each).
    pub fn disk_bytes(&self) -> u64 {
        allocated_bytes(&self.directory)
    }

    /// Makes everything committed so far durable (a checkpoint, a clean shutdown).
    pub fn persist(&self) -> Result<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }

    fn keyspace(&self, space: Space) -> &Keyspace {
        match space {
            Space::Objects => &self.objects,
            Space::Omap => &self.omap,
            Space::Super => &self.superblock,
        }
    }
}

/// Bytes allocated on disk to the files below `path` (0 for what cannot be read).
fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(found) if found.is_dir() => allocated_bytes(&entry.path()),
            Ok(found) => found.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Changes committed atomically by [`MetaBatch::commit`]. A key changed twice keeps its last
/// change: the database stamps a batch with one sequence number, so two entries for one key
/// in it would be ambiguous.
#[derive(Default)]
pub(crate) struct MetaBatch {
    changes: BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>>,
}

impl MetaBatch {
    pub fn insert(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.changes.insert((space, key), Some(value));
    }

    pub fn remove(&mut self, space: Space, key: Vec<u8>) {
        self.changes.insert((space, key), None);
    }

    /// Changes held.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// The changes in key order: (keyspace, key, new value or `None` for a removal).
    pub fn iter(&self) -> impl Iterator<Item = (Space, &[u8], Option<&[u8]>)> {
        self.changes
            .iter()
            .map(|((space, key), value)| (*space, key.as_slice(), value.as_deref()))
    }

    /// The change this batch already holds for a key: `Some(None)` is a removal.
    pub fn pending(&self, space: Space, key: &[u8]) -> Option<Option<&[u8]>> {
        self.changes
            .get(&(space, key.to_vec()))
            .map(|value| value.as_deref())
    }

    /// Applies the batch to the database atomically, without a sync: the log made it durable.
    pub fn commit(self, meta: &Meta) -> Result<()> {
        if self.changes.is_empty() {
            return Ok(());
        }
        let mut batch = meta.db.batch().durability(None);
        for ((space, key), value) in self.changes {
            let keyspace = meta.keyspace(space);
            match value {
                Some(value) => batch.insert(keyspace, key, value),
                None => batch.remove(keyspace, key),
            }
        }
        batch.commit()?;
        Ok(())
    }
}

/// What the mount scan finds: every allocated extent and the accounting totals.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub allocated: Vec<DeviceExtent>,
    /// [`crate::presence::key_hash`] of every object key, for the presence filter.
    pub object_hashes: Vec<u64>,
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
pub(crate) fn scan(meta: &Meta, checksum_block_bytes: u64) -> Result<Scan> {
    let mut scan = Scan::default();
    for entry in meta.objects.iter() {
        let (key, value) = entry.into_inner()?;
        let (collection, _) = split_object_key(&key)?;
        scan.object_hashes.push(crate::presence::key_hash(&key));
        let onode = Onode::decode(&value, checksum_block_bytes)?;
        scan.allocated
            .extend(onode.extents.values().map(|extent| extent.device()));
        let record_bytes = (key.len() + value.len()) as u64;
        scan.counters.stored_bytes += onode.stored_bytes();
        scan.counters.onode_bytes += record_bytes;
        let usage = scan.counters.collections.entry(collection).or_default();
        usage.objects += 1;
        usage.stored_bytes += onode.stored_bytes();
        usage.allocated_bytes += onode.allocated_bytes();
        usage.metadata_bytes += record_bytes;
    }
    for entry in meta.omap.iter() {
        let (key, value) = entry.into_inner()?;
        let entry_bytes = (key.len() + value.len()) as u64;
        scan.counters.omap_bytes += entry_bytes;
        let collection = omap_collection(&key)?;
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

    /// A format 4 or 5 store (whose log records a mount of this build still reads) opens and
    /// is marked format 6 by the upgrade; an older format is refused with its number.
    #[test]
    fn formats_4_and_5_are_upgraded_and_older_formats_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = Meta::open(dir.path(), 1 << 20, true).expect("create");
        let layout = Layout {
            min_alloc_size_bytes: 4096,
            checksum_block_bytes: 4096,
            device_size_bytes: 1 << 30,
            log_bytes: 1 << 20,
        };
        meta.initialize(layout).expect("initialize");
        let set_format = |format: u64| {
            meta.superblock
                .insert("format", format.to_le_bytes().to_vec())
                .expect("insert");
        };
        for old in [4u64, 5] {
            set_format(old);
            assert_eq!(meta.read_layout().expect("older format reads"), layout);
            meta.upgrade_format().expect("upgrade");
            assert_eq!(
                meta.superblock.get("format").expect("get").as_deref(),
                Some(&6u64.to_le_bytes()[..])
            );
        }
        set_format(3);
        let refused = meta.read_layout().expect_err("format 3 refused");
        assert!(
            refused.to_string().contains("format 3 is not 6"),
            "{refused}"
        );
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
