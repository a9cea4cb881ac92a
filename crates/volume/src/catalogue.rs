//! [`Volumes`]: the volumes of one pool (create, list, info, resize, remove, open).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures_util::{stream, StreamExt};
use rados::{IoCtx, Rados, RadosError, WriteOp};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Result, VolumeError};
use crate::format::{self, Header};
use crate::lease::{self, LeaseRecord};
use crate::volume::Volume;
use crate::{
    validate_name, validate_size, Clock, VolumesConfig, ORDER_MAX, ORDER_MIN, STALE_CREATE_S,
};

/// How a volume is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Reads only; no lease, so any number of readers (and one writer) may have it open.
    ReadOnly,
    /// Reads and writes, holding the volume's lease.
    ReadWrite,
}

/// What `info` reports about a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeInfo {
    /// Its name.
    pub name: String,
    /// Its image id (12 hex digits for strata's volumes).
    pub id: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// log2 of the object size.
    pub order: u8,
    /// Objects the size spans (`ceil(size / object size)`), as `rbd info` counts them.
    pub object_count: u64,
    /// Feature bits.
    pub features: u64,
    /// `rbd_data.<id>`.
    pub object_prefix: String,
    /// When it was made (ns since the epoch), when the header says.
    pub create_timestamp_ns: Option<u64>,
    /// The pool id of its data objects when they are not in the header's pool (RBD's
    /// `data-pool` feature).
    pub data_pool_id: Option<i64>,
    /// The current lease, if any (it may have expired).
    pub lease: Option<LeaseRecord>,
}

impl VolumeInfo {
    /// Bytes per data object.
    pub fn object_size_bytes(&self) -> u64 {
        1 << self.order
    }
}

/// What a catalogue and its open volumes share.
pub(crate) struct Shared {
    pub(crate) io_ctx: Arc<dyn IoCtx>,
    /// Where new volumes put their data objects when not in `io_ctx`'s pool (RBD's
    /// `--data-pool`, e.g. an erasure-coded pool under a replicated one holding the headers).
    pub(crate) data_io: Option<Arc<dyn IoCtx>>,
    /// The cluster, when the catalogue was given it: a volume's data pool is then any pool
    /// its header names (opened on first use and kept in `data_pools`), and a new volume
    /// may name its own.
    rados: Option<Arc<dyn Rados>>,
    data_pools: Mutex<BTreeMap<i64, Arc<dyn IoCtx>>>,
    pub(crate) clock: Clock,
    pub(crate) config: VolumesConfig,
    random: Mutex<ChaCha8Rng>,
    holder: String,
    /// The volumes this catalogue has open for writing (one writer per volume per holder).
    writers: Mutex<BTreeSet<String>>,
}

/// This catalogue's claim to be the one writer of a volume; released when dropped.
pub(crate) struct WriterClaim {
    shared: Arc<Shared>,
    volume: String,
}

impl Drop for WriterClaim {
    fn drop(&mut self) {
        self.shared
            .writers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&self.volume);
    }
}

impl Shared {
    pub(crate) fn now_ns(&self) -> u64 {
        (self.clock)()
    }

    pub(crate) fn lease_duration_ns(&self) -> u64 {
        self.config.lease_duration_ms * 1_000_000
    }

    fn random_u64(&self) -> u64 {
        self.random
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .next_u64()
    }

    pub(crate) fn holder(&self) -> &str {
        &self.holder
    }

    /// The pool holding the data objects of volume `name` with `header`: the catalogue's
    /// own, or its data pool when the header names that one; a header naming another data
    /// pool is refused (this catalogue cannot reach it).
    pub(crate) async fn data_pool_of(&self, name: &str, header: &Header) -> Result<Arc<dyn IoCtx>> {
        let Some(wanted) = header.data_pool_id else {
            return Ok(self.io_ctx.clone());
        };
        if self.io_ctx.pool().id == wanted {
            return Ok(self.io_ctx.clone());
        }
        if let Some(data) = self
            .data_io
            .as_ref()
            .filter(|data| data.pool().id == wanted)
        {
            return Ok(data.clone());
        }
        if let Some(rados) = &self.rados {
            return self.data_pool_by_id(rados.as_ref(), name, wanted).await;
        }
        Err(VolumeError::Unsupported {
            name: name.to_string(),
            what: format!(
                "its data in pool id {wanted}, which this catalogue was not given as its data \
                 pool ({})",
                match &self.data_io {
                    Some(data) => format!("it has {:?}", data.pool().name),
                    None => "it has none".into(),
                }
            ),
        })
    }

    /// The pool of id `wanted`, through the cluster (kept once opened).
    async fn data_pool_by_id(
        &self,
        rados: &dyn Rados,
        name: &str,
        wanted: i64,
    ) -> Result<Arc<dyn IoCtx>> {
        if let Some(data) = self.lock_data_pools().get(&wanted) {
            return Ok(data.clone());
        }
        let pools = rados
            .pool_list()
            .await
            .map_err(|error| VolumeError::rados("list the pools", error))?;
        let Some(pool) = pools.iter().find(|pool| pool.id == wanted) else {
            return Err(VolumeError::rados(
                format!("volume {name:?}: its data pool"),
                RadosError::NotFound(format!("pool id {wanted} (deleted?)")),
            ));
        };
        let data = rados
            .io_ctx(&pool.name)
            .await
            .map_err(|error| VolumeError::rados(format!("open data pool {}", pool.name), error))?;
        self.lock_data_pools().insert(wanted, data.clone());
        Ok(data)
    }

    fn lock_data_pools(&self) -> std::sync::MutexGuard<'_, BTreeMap<i64, Arc<dyn IoCtx>>> {
        self.data_pools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claims `volume` for this catalogue's one writer; refused while it has it open.
    pub(crate) fn claim_writer(self: &Arc<Self>, volume: &str) -> Result<WriterClaim> {
        let mut writers = self
            .writers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !writers.insert(volume.to_string()) {
            return Err(VolumeError::Leased {
                name: volume.to_string(),
                holder: format!("{} (this process has it open)", self.holder),
                expires_ns: 0,
            });
        }
        Ok(WriterClaim {
            shared: self.clone(),
            volume: volume.to_string(),
        })
    }
}

/// A resolved volume: its id and header.
pub(crate) struct Resolved {
    pub(crate) id: String,
    pub(crate) header_object: String,
    pub(crate) header: Header,
}

/// The volumes of one pool. Cheap to clone.
#[derive(Clone)]
pub struct Volumes {
    shared: Arc<Shared>,
}

impl Volumes {
    /// The catalogue of `io_ctx`'s pool with the system clock and a random seed from the OS
    /// (the edges where time and randomness come in).
    pub fn new(io_ctx: Arc<dyn IoCtx>, config: VolumesConfig) -> Self {
        Self::with(io_ctx, config, crate::system_clock(), rand::random())
    }

    /// The catalogue with an injected clock and random seed (ids and the holder id).
    pub fn with(
        io_ctx: Arc<dyn IoCtx>,
        config: VolumesConfig,
        clock: Clock,
        random_seed: u64,
    ) -> Self {
        Self::with_data_pool(io_ctx, None, config, clock, random_seed)
    }

    /// The catalogue of `io_ctx`'s pool on `rados`'s cluster (system clock, random seed): a
    /// volume's data may be in any pool of the cluster its header names, and
    /// [`Volumes::create_in`] may give a new volume a data pool of its own.
    pub fn on_cluster(
        rados: Arc<dyn Rados>,
        io_ctx: Arc<dyn IoCtx>,
        config: VolumesConfig,
    ) -> Self {
        let mut volumes = Self::with(io_ctx, config, crate::system_clock(), rand::random());
        Arc::get_mut(&mut volumes.shared)
            .expect("a new catalogue is not shared")
            .rados = Some(rados);
        volumes
    }

    /// [`Volumes::with`] whose new volumes keep their data objects in `data_io`'s pool (an
    /// erasure-coded one, say), their header, id and directory entries in `io_ctx`'s, as
    /// `rbd create --data-pool` does; volumes already there keep whatever their header says.
    pub fn with_data_pool(
        io_ctx: Arc<dyn IoCtx>,
        data_io: Option<Arc<dyn IoCtx>>,
        config: VolumesConfig,
        clock: Clock,
        random_seed: u64,
    ) -> Self {
        assert!(config.in_flight_max > 0, "in_flight_max must be positive");
        assert!(
            config.lease_duration_ms > 0,
            "lease_duration_ms must be positive"
        );
        let mut random = ChaCha8Rng::seed_from_u64(random_seed);
        let holder = match &config.holder {
            Some(holder) => holder.clone(),
            None => format!("strata-{}-{:08x}", std::process::id(), random.next_u32()),
        };
        Self {
            shared: Arc::new(Shared {
                io_ctx,
                data_io,
                rados: None,
                data_pools: Mutex::default(),
                clock,
                config,
                random: Mutex::new(random),
                holder,
                writers: Mutex::default(),
            }),
        }
    }

    /// The pool's name.
    pub fn pool(&self) -> &str {
        &self.shared.io_ctx.pool().name
    }

    /// The pool new volumes keep their data in, when not [`Volumes::pool`].
    pub fn data_pool(&self) -> Option<&str> {
        self.shared.data_io.as_ref().map(|data| &*data.pool().name)
    }

    /// Pool `pool` as the data pool of new volume `name`: it must exist and the catalogue must
    /// know the cluster.
    async fn named_data_pool(&self, name: &str, pool: &str) -> Result<Arc<dyn IoCtx>> {
        let Some(rados) = &self.shared.rados else {
            return Err(VolumeError::rados(
                format!("create {name:?} with data pool {pool:?}"),
                RadosError::NotSupported(
                    "this catalogue was not given the cluster (Volumes::on_cluster)".into(),
                ),
            ));
        };
        rados.io_ctx(pool).await.map_err(|error| {
            VolumeError::rados(format!("create {name:?}: data pool {pool:?}"), error)
        })
    }

    /// Creates an empty volume of `size_bytes` with objects of `2^order` bytes.
    pub async fn create(&self, name: &str, size_bytes: u64, order: u8) -> Result<VolumeInfo> {
        self.create_in(name, size_bytes, order, None).await
    }

    /// [`Volumes::create`] with the data objects in pool `data_pool` (`rbd create
    /// --data-pool`): an erasure-coded pool, say, under this replicated one, which keeps the
    /// header, id and directory. `None`: the catalogue's data pool, else its own pool. Naming
    /// a pool needs a catalogue made [`Volumes::on_cluster`].
    pub async fn create_in(
        &self,
        name: &str,
        size_bytes: u64,
        order: u8,
        data_pool: Option<&str>,
    ) -> Result<VolumeInfo> {
        validate_name(name)?;
        validate_size(size_bytes)?;
        if !(ORDER_MIN..=ORDER_MAX).contains(&order) {
            return Err(VolumeError::InvalidOrder { order });
        }
        let io_ctx = &self.shared.io_ctx;
        if self.directory_id(name).await?.is_some() {
            return Err(VolumeError::Exists {
                name: name.to_string(),
                detail: String::new(),
            });
        }
        // (1) The header under a fresh id.
        let now_ns = self.shared.now_ns();
        let data_io = match data_pool {
            None => self.shared.data_io.clone(),
            Some(pool) if pool == io_ctx.pool().name => None,
            Some(pool) => Some(self.named_data_pool(name, pool).await?),
        };
        let data_pool = data_io
            .as_ref()
            .map(|data| (io_ctx.pool().id, data.pool().id));
        let mut id = String::new();
        for attempt in 0.. {
            id = format!("{:012x}", self.shared.random_u64() & 0xffff_ffff_ffff);
            let op = WriteOp::new().create(true).omap_set(Header::encode_new(
                size_bytes, order, &id, now_ns, data_pool,
            ));
            match io_ctx.operate(&format::header_object(&id), op).await {
                Ok(()) => break,
                Err(RadosError::Exists(_)) if attempt < 8 => continue,
                Err(error) => {
                    return Err(VolumeError::rados(
                        format!("create the header of {name}"),
                        error,
                    ))
                }
            }
        }
        let header_object = format::header_object(&id);
        let undo_header = || async {
            let _ = io_ctx.remove(&header_object).await;
        };
        // (2) The name's reservation.
        let id_object = format::id_object(name);
        let reserve = || {
            io_ctx.operate(
                &id_object,
                WriteOp::new()
                    .create(true)
                    .write_full(format::encode_string(&id)),
            )
        };
        match reserve().await {
            Ok(()) => {}
            Err(RadosError::Exists(_)) => {
                if let Err(error) = self.clear_leftover(name, now_ns).await {
                    undo_header().await;
                    return Err(error);
                }
                if let Err(error) = reserve().await {
                    undo_header().await;
                    return Err(match error {
                        RadosError::Exists(_) => VolumeError::Exists {
                            name: name.to_string(),
                            detail: String::new(),
                        },
                        other => VolumeError::rados(format!("create {id_object}"), other),
                    });
                }
            }
            Err(error) => {
                undo_header().await;
                return Err(VolumeError::rados(format!("create {id_object}"), error));
            }
        }
        // (3) The directory entries, only if neither is there.
        let name_key = format::directory_name_key(name);
        let id_key = format::directory_id_key(&id);
        let op = WriteOp::new()
            .compare_omap(name_key.clone(), None)
            .compare_omap(id_key.clone(), None)
            .omap_set(vec![
                (name_key, format::encode_string(&id)),
                (id_key, format::encode_string(name)),
            ]);
        if let Err(error) = io_ctx.operate(format::DIRECTORY_OBJECT, op).await {
            let _ = io_ctx.remove(&id_object).await;
            undo_header().await;
            return Err(match error {
                RadosError::CompareFailed(_) => VolumeError::Exists {
                    name: name.to_string(),
                    detail: " (its directory entry appeared while it was being created)".into(),
                },
                other => VolumeError::rados("add to rbd_directory", other),
            });
        }
        self.info(name).await
    }

    /// `rbd_id.<name>` exists but the directory does not name it: removes it (and what it
    /// points to) if it is a crash's leftover, else says the volume is being created.
    async fn clear_leftover(&self, name: &str, now_ns: u64) -> Result<()> {
        if self.directory_id(name).await?.is_some() {
            return Err(VolumeError::Exists {
                name: name.to_string(),
                detail: String::new(),
            });
        }
        let id = self.read_id(name).await?;
        let header_object = format::header_object(&id);
        let created_ns = match self.read_header_omap(&header_object).await {
            Ok(Some(omap)) => Header::decode(&header_object, &omap)
                .ok()
                .and_then(|header| header.create_timestamp_ns),
            Ok(None) => None,
            Err(error) => return Err(error),
        };
        if let Some(created_ns) = created_ns {
            if now_ns.saturating_sub(created_ns) < STALE_CREATE_S * 1_000_000_000 {
                return Err(VolumeError::Exists {
                    name: name.to_string(),
                    detail: format!(
                        " (half-created less than {STALE_CREATE_S} s ago: another client may be creating it)"
                    ),
                });
            }
        }
        tracing::info!(
            volume = name,
            id,
            "removing the leftover of an interrupted create or remove"
        );
        self.remove_parts(name, &id, None).await
    }

    /// The names of the pool's volumes (the directory's), sorted.
    pub async fn list(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = match self
                .shared
                .io_ctx
                .omap_get_vals(format::DIRECTORY_OBJECT, after.as_deref(), b"name_", 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(names),
                Err(error) => return Err(VolumeError::rados("list rbd_directory", error)),
            };
            for (key, _) in &page.entries {
                if let Some(name) = key.strip_prefix(b"name_") {
                    names.push(String::from_utf8_lossy(name).into_owned());
                }
            }
            match (page.more, page.entries.last()) {
                (true, Some((key, _))) => after = Some(key.clone()),
                _ => break,
            }
        }
        names.sort();
        Ok(names)
    }

    /// What the volume's header says, and its lease.
    pub async fn info(&self, name: &str) -> Result<VolumeInfo> {
        validate_name(name)?;
        let resolved = self.resolve(name).await?;
        let lease_raw =
            lease::read_raw(self.shared.io_ctx.as_ref(), name, &resolved.header_object).await?;
        let lease = LeaseRecord::decode(&resolved.header_object, &lease_raw)?;
        let header = resolved.header;
        Ok(VolumeInfo {
            name: name.to_string(),
            id: resolved.id,
            size_bytes: header.size_bytes,
            order: header.order,
            object_count: header.size_bytes.div_ceil(header.object_size_bytes()),
            features: header.features,
            object_prefix: header.object_prefix,
            create_timestamp_ns: header.create_timestamp_ns,
            data_pool_id: header.data_pool_id,
            lease,
        })
    }

    /// Opens the volume; `ReadWrite` takes its lease (refused while another writer holds it).
    pub async fn open(&self, name: &str, mode: OpenMode) -> Result<Volume> {
        validate_name(name)?;
        let resolved = self.resolve(name).await?;
        resolved.header.check_supported(name)?;
        let claim = match mode {
            OpenMode::ReadWrite => Some(self.shared.claim_writer(name)?),
            OpenMode::ReadOnly => None,
        };
        Volume::open(self.shared.clone(), name, resolved, claim).await
    }

    /// Sets the volume's size: growing only rewrites the header; shrinking first removes the
    /// objects past the new end and cuts the last one, then rewrites the header. Takes the
    /// lease for the time (refused while another writer holds it).
    pub async fn resize(&self, name: &str, size_bytes: u64) -> Result<VolumeInfo> {
        validate_size(size_bytes)?;
        let volume = self.open(name, OpenMode::ReadWrite).await?;
        let resized = volume.resize(size_bytes).await;
        volume.close().await?;
        resized?;
        self.info(name).await
    }

    /// Removes the volume: directory entries, data objects, header and `rbd_id`. Refused while
    /// a writer holds its lease. Also removes what an interrupted create or remove left.
    pub async fn remove(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        let id = match self.read_id(name).await {
            Ok(id) => id,
            Err(VolumeError::NotFound { .. }) => {
                // librbd adds the directory entry before `rbd_id`: a half-made rbd image.
                if let Some(id) = self.directory_id(name).await? {
                    return self.remove_directory_entries(name, &id).await;
                }
                return Err(VolumeError::NotFound {
                    name: name.to_string(),
                });
            }
            Err(error) => return Err(error),
        };
        let header_object = format::header_object(&id);
        let _claim = self.shared.claim_writer(name)?;
        let holder = self.shared.holder().to_string();
        let lease = match lease::acquire(
            self.shared.io_ctx.as_ref(),
            name,
            &header_object,
            &holder,
            self.shared.now_ns(),
            self.shared.lease_duration_ns(),
        )
        .await
        {
            Ok(value) => Some(value),
            Err(VolumeError::NotFound { .. }) => None, // no header: a leftover
            Err(error) => return Err(error),
        };
        self.remove_parts(name, &id, lease).await
    }

    async fn remove_parts(&self, name: &str, id: &str, lease: Option<Vec<u8>>) -> Result<()> {
        let io_ctx = &self.shared.io_ctx;
        // The data pool the header names (read before anything is removed); a volume whose
        // header is gone (a leftover) may have used the catalogue's.
        let header_object = format::header_object(id);
        let named = match self.read_header_omap(&header_object).await? {
            Some(omap) => match Header::decode(&header_object, &omap) {
                Ok(header) if header.data_pool_id.is_some() => {
                    match self.shared.data_pool_of(name, &header).await {
                        Ok(data) => Some(data),
                        // Its data pool was deleted, and its data with it: the rest still goes.
                        Err(VolumeError::Rados {
                            source: RadosError::NotFound(_),
                            ..
                        }) => None,
                        Err(error) => return Err(error),
                    }
                }
                _ => None,
            },
            None => None,
        };
        self.remove_directory_entries(name, id).await?;
        // The data objects: in this pool (`rbd_data.<id>.`), and in the data pool
        // (`rbd_data.<this pool's id>.<id>.`) when there is one.
        let mut places = vec![(io_ctx.clone(), format!("{}.", format::data_prefix(id)))];
        if let Some(data) = named.as_ref().or(self.shared.data_io.as_ref()) {
            let pool_id = io_ctx.pool().id;
            places.push((
                data.clone(),
                format!("{}.", format::data_prefix(&format!("{pool_id}.{id}"))),
            ));
        }
        for (pool, prefix) in places {
            let objects: Vec<String> = pool
                .list_all()
                .await
                .map_err(|error| VolumeError::rados("list the pool's objects", error))?
                .into_iter()
                .filter(|object| object.starts_with(&prefix))
                .collect();
            remove_objects(pool.as_ref(), objects, self.shared.config.in_flight_max).await?;
        }
        let mut op = WriteOp::new();
        if let Some(lease) = lease {
            op = op.compare_xattr(lease::LEASE_XATTR, rados::Comparison::Equal, lease);
        }
        match io_ctx.operate(&header_object, op.remove()).await {
            Ok(()) | Err(RadosError::NotFound(_)) => {}
            Err(RadosError::CompareFailed(_)) => {
                return Err(VolumeError::Conflict {
                    name: name.to_string(),
                    reason: "another writer took the lease during the removal".into(),
                })
            }
            Err(error) => return Err(VolumeError::rados(format!("remove {header_object}"), error)),
        }
        match io_ctx.remove(&format::id_object(name)).await {
            Ok(()) | Err(RadosError::NotFound(_)) => Ok(()),
            Err(error) => Err(VolumeError::rados(format!("remove rbd_id.{name}"), error)),
        }
    }

    async fn remove_directory_entries(&self, name: &str, id: &str) -> Result<()> {
        let io_ctx = &self.shared.io_ctx;
        let name_key = format::directory_name_key(name);
        let id_key = format::directory_id_key(id);
        let present = match io_ctx
            .omap_get_vals_by_keys(
                format::DIRECTORY_OBJECT,
                &[name_key.clone(), id_key.clone()],
            )
            .await
        {
            Ok(present) => present,
            Err(RadosError::NotFound(_)) => return Ok(()),
            Err(error) => return Err(VolumeError::rados("read rbd_directory", error)),
        };
        let mut op = WriteOp::new();
        let mut keys = Vec::new();
        for key in [name_key, id_key] {
            if let Some(value) = present.get(&key) {
                op = op.compare_omap(key.clone(), Some(value.clone()));
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        io_ctx
            .operate(format::DIRECTORY_OBJECT, op.omap_remove_keys(keys))
            .await
            .map_err(|error| VolumeError::rados(format!("remove {name} from rbd_directory"), error))
    }

    /// The id the directory maps `name` to, if any.
    async fn directory_id(&self, name: &str) -> Result<Option<String>> {
        let key = format::directory_name_key(name);
        match self
            .shared
            .io_ctx
            .omap_get_vals_by_keys(format::DIRECTORY_OBJECT, std::slice::from_ref(&key))
            .await
        {
            Ok(values) => match values.get(&key) {
                None => Ok(None),
                Some(value) => format::decode_string(value).map(Some).map_err(|reason| {
                    VolumeError::Malformed {
                        object: format::DIRECTORY_OBJECT.into(),
                        key: String::from_utf8_lossy(&key).into_owned(),
                        reason,
                    }
                }),
            },
            Err(RadosError::NotFound(_)) => Ok(None),
            Err(error) => Err(VolumeError::rados("read rbd_directory", error)),
        }
    }

    /// The id `rbd_id.<name>` holds.
    async fn read_id(&self, name: &str) -> Result<String> {
        let object = format::id_object(name);
        let data = match self.shared.io_ctx.read_full(&object).await {
            Ok(data) => data,
            Err(RadosError::NotFound(_)) => {
                return Err(VolumeError::NotFound {
                    name: name.to_string(),
                })
            }
            Err(error) => return Err(VolumeError::rados(format!("read {object}"), error)),
        };
        let id = format::decode_string(&data).map_err(|reason| VolumeError::Malformed {
            object: object.clone(),
            key: "data".into(),
            reason,
        })?;
        if id.is_empty() || id.contains(['/', '\0']) {
            return Err(VolumeError::Malformed {
                object,
                key: "data".into(),
                reason: format!("{id:?} is not an image id"),
            });
        }
        Ok(id)
    }

    /// Every omap entry of a header; `None` if the object is missing.
    async fn read_header_omap(
        &self,
        header_object: &str,
    ) -> Result<Option<BTreeMap<Vec<u8>, Vec<u8>>>> {
        let mut omap = BTreeMap::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = match self
                .shared
                .io_ctx
                .omap_get_vals(header_object, after.as_deref(), b"", 512)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(None),
                Err(error) => {
                    return Err(VolumeError::rados(format!("read {header_object}"), error))
                }
            };
            let last = page.entries.last().map(|(key, _)| key.clone());
            omap.extend(page.entries);
            match (page.more, last) {
                (true, Some(key)) => after = Some(key),
                _ => return Ok(Some(omap)),
            }
        }
    }

    /// The volume's id and decoded header.
    pub(crate) async fn resolve(&self, name: &str) -> Result<Resolved> {
        let id = self.read_id(name).await?;
        let header_object = format::header_object(&id);
        let Some(omap) = self.read_header_omap(&header_object).await? else {
            return Err(VolumeError::Malformed {
                object: header_object,
                key: "(the object)".into(),
                reason: format!(
                    "missing, though rbd_id.{name} names it (an interrupted create or remove: \
                     removing the volume cleans it up)"
                ),
            });
        };
        let header = Header::decode(&header_object, &omap)?;
        Ok(Resolved {
            id,
            header_object,
            header,
        })
    }
}

/// Removes `objects` (missing ones are fine), `in_flight_max` at a time.
pub(crate) async fn remove_objects(
    io_ctx: &dyn IoCtx,
    objects: Vec<String>,
    in_flight_max: usize,
) -> Result<()> {
    let mut removals = stream::iter(objects)
        .map(|object| async move {
            match io_ctx.remove(&object).await {
                Ok(()) | Err(RadosError::NotFound(_)) => Ok(()),
                Err(error) => Err(VolumeError::rados(format!("remove {object}"), error)),
            }
        })
        .buffer_unordered(in_flight_max);
    while let Some(result) = removals.next().await {
        result?;
    }
    Ok(())
}
