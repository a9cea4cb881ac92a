//! # gateway: S3 over the RADOS-shaped API
//!
//! Owns the S3 protocol surface of strata: an [`s3s::S3`] implementation ([`Gateway`]) whose
//! every piece of state lives in the cluster behind [`rados::Rados`], so any number of gateways
//! can serve the same data. Also owns the S3 users (access keys) and SigV4 authentication.
//!
//! ## Layout on the cluster (see [`layout`])
//! - metadata pool: `users` (omap: access key -> user), `buckets` (omap: name -> bucket),
//!   `gc` (omap: data objects whose removal failed, drained by [`Gateway::reclaim`]).
//! - index pool: bucket index `.dir.<bucket-id>.<shard>` (omap: key -> entry), sharded by a
//!   hash of the key; in a bucket with versioning also `0xFF key 0x00 suffix` -> one version
//!   or delete marker, newest first, in the same shard as the key ([`versioning`]);
//!   multipart uploads `.uploads.<bucket-id>` and `.upload.<bucket-id>.<id>`; in both a shard
//!   and an upload object, `0xFE tag` -> start time is the write intent of an upload in
//!   progress (between the plain entries and the versions; listings skip it).
//! - data pool (replicated, or erasure-coded: nothing of it is in omap unless packing is
//!   on, which an erasure-coded data pool refuses at start): one head object per written object version, `<bucket-id>_<tag>_<key>`, holding
//!   up to one chunk (4 MiB) of data with the metadata in an xattr; larger objects continue in
//!   `<bucket-id>_<tag>__shadow_<n>` pieces. Multipart parts are pieces of their own and are
//!   stitched by the manifest at completion, never copied.
//!
//! ## Access
//! SigV4 (headers, presigned URLs, signed aws-chunked bodies) is checked by s3s against
//! [`Users`], whose secret keys are sealed at rest under the operator's master key
//! ([`secrets`], [`GatewayConfig::secret_keys`]); every operation then checks the requester against the owner and the ACL grants
//! ([`acl`]; canned ACLs, `x-amz-grant-*` and AccessControlPolicy bodies all become grants),
//! the bucket policy ([`policy`]: an explicit Deny refuses even the owner, an Allow grants
//! beyond the ACL) and the bucket's public access block. CORS rules ([`cors`]) are applied by the HTTP layer
//! ([`server`]), which also refuses over-long or expired presigned URLs, closes connections
//! whose refused request body was never read, and adapts what s3s does differently from S3:
//! chunked PUTs without Content-Length, browser form uploads (POST object: `${filename}`
//! keys, the `acl` field, 403 for broken policy conditions, the redirect's quoted ETag), and
//! header fields S3 reads leniently (a malformed `Range` ignored, conditional dates in all
//! three HTTP-date forms; headers a SigV4 signature covers excepted).
//!
//! ## Conformance
//! `scripts/s3-tests.sh S3_TESTS_CHECKOUT` runs the ceph/s3-tests core subset (303 tests)
//! against a fresh `strata serve` and prints the count.
//!
//! ## Invariants
//! - An acknowledged PUT is in the index: the index entry is written before the reply.
//! - Data objects are never overwritten in place: a new version gets a new tag; the index entry
//!   switches atomically (one omap set); the pieces of the version it replaced are removed
//!   in the same request, and whatever removal fails goes to the `gc` queue.
//! - With versioning, a change of a key (new version, delete marker, version removal) is one
//!   atomic omap write to the key's shard; a version's pieces are removed only after the
//!   write that made them unreachable, and belong to that version alone.
//! - Client mistakes map to S3 4xx errors in one place ([`error`]); 5xx only for the cluster.
//! - Orphan collection (`strata gc`) never removes data an acknowledged object uses: every
//!   PUT, copy and part upload records a write intent (`0xFE tag` in the omap of the object
//!   it commits to) before writing data, and its commit is one guarded omap write that needs
//!   the intent and removes it. The collector lists the data pool first, then reads every
//!   reference (entries, parts, intents, GC queue); it leaves data under a live intent alone
//!   and fences an intent older than the grace period by removing it with a guarded write, so
//!   of a slow upload and the collector exactly one wins: the upload then fails with 500
//!   (nothing stored, retry) instead of acknowledging data that is gone. Orphans go to the
//!   GC queue (removed after `gc_min_wait_s`), so data an overwrite replaced during the pass
//!   keeps its wait. Decided as radosgw's bucket-index prepare/complete, with the
//!   conservatism of its offline orphan tools; see `store/orphans.rs` for the whole protocol.

pub mod acl;
mod auth;
mod cache;
pub mod cors;
pub mod encryption;
pub mod error;
pub mod layout;
mod list;
pub mod policy;
pub mod secrets;
mod server;
mod service;
mod store;
pub mod tagging;
pub mod users;
pub mod versioning;

pub use auth::{AllowAll, ClusterAuth, GatewayAccess, XML_BODY_MAX_BYTES};
pub use error::GatewayError;
pub use secrets::{MasterKey, SecretKeyring};
pub use server::requests::{RequestMetrics, RequestStats, LATENCY_BUCKETS_S};
pub use server::{serve, Server};
pub use service::{Gateway, LifecycleReport};
pub use store::{
    gc_wait_s, placement_group, GatewayStats, GcBacklog, OrphanReport, PackGcReport, PackGcStatus,
    ORPHAN_GRACE_S_MIN,
};
pub use users::{User, Users};

/// How a gateway lays out and serves data.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Pool for users, buckets and the GC queue. Default `strata.rgw.meta`.
    pub metadata_pool: String,
    /// Pool for bucket indexes and multipart bookkeeping. Default `strata.rgw.index`.
    pub index_pool: String,
    /// Pool for object data. Default `strata.rgw.data`. It may be erasure-coded (the
    /// gateway keeps nothing in the omap of data objects), except with packing on, which the
    /// gateway then refuses to start with; the metadata and index pools must keep omap.
    pub data_pool: String,
    /// Replicas of each pool when the gateway creates it (min_size is Ceph's default,
    /// size - size/2). Default 1.
    pub pool_size: u32,
    /// Placement groups of each pool when the gateway creates it. Default 16.
    pub pool_pg_num: u32,
    /// Bytes stored in one data object (the head holds the first chunk). Default 4 MiB.
    pub chunk_size_bytes: usize,
    /// Shards of each new bucket's index. Default 8.
    pub index_shards: u32,
    /// Smallest multipart part but the last. Default 5 MiB (as AWS).
    pub multipart_part_size_min_bytes: u64,
    /// Region reported by GetBucketLocation and used by SigV4. Default `us-east-1`.
    pub region: String,
    /// Require SigV4 authentication (anonymous requests still pass where an ACL allows).
    /// Default true; false serves everything as the `anonymous` user with full rights (tests):
    /// signed requests too, their signatures ignored, except that aws-chunked bodies are
    /// refused (400; only the signature check decodes their framing).
    pub auth: bool,
    /// Period of the background GC pass, in seconds. Default 30.
    pub gc_period_s: u64,
    /// Seconds the data an overwrite or a delete replaced is kept before the GC removes it,
    /// so a GET that started on the old version can finish reading it (radosgw's
    /// `rgw_gc_obj_min_wait`). 0 removes it at the commit. Default 300.
    pub gc_min_wait_s: u64,
    /// The same wait while the cluster's fullest OSD is at or past its `nearfull_ratio`
    /// (space is wanted back now: a full pool refuses writes until it is). Default 5.
    pub gc_nearfull_min_wait_s: u64,
    /// Seconds between the GC task's questions to the cluster about how full it is; from
    /// nearfull on, a GC pass follows each (see [`gc_wait_s`]). Default 5.
    pub gc_fullness_check_s: u64,
    /// Master keys sealing the S3 secret keys of the users table ([`secrets`]): with them,
    /// secrets are stored encrypted and plaintext ones left by older builds are resealed at
    /// start. Default `None`: secrets are stored as given (a gateway in a test; `strata
    /// serve` always gives the keys of its data directory's `s3-master.key`).
    pub secret_keys: Option<SecretKeyring>,
    /// Milliseconds a gateway may answer from its own copy of a user record (the signing
    /// key of a request) or a bucket record (GET, HEAD and PUT of objects) before reading it
    /// again, so a request does not read the `users` and `buckets` omaps each time. Changes
    /// made through this gateway take effect on it at once; a change made through another
    /// gateway (a removed key, an ACL or policy) is seen here within this bound. A deleted
    /// bucket and a changed versioning status are seen at once on writes: a PUT's intent is
    /// guarded by the index shard's existence and its versioning stamp (see `store`). 0 reads
    /// every time. Default 1000.
    pub metadata_cache_ms: u64,
    /// Small-object packing ([`PackingConfig`]). Default off.
    pub packing: PackingConfig,
    /// The master key wrapping the data keys of SSE-S3 objects (`x-amz-server-side-encryption:
    /// AES256`, bucket default encryption; see [`encryption`]). Default `None`: such writes
    /// are refused (501) and such objects cannot be read.
    pub sse_master_key: Option<encryption::SecretKey>,
    /// Serve SSE-C (customer keys) over plain HTTP, which is all this gateway speaks. S3 and
    /// radosgw (`rgw_crypt_require_ssl`) refuse customer keys sent in the clear; so does
    /// strata unless this is set. Default false.
    pub sse_c_allow_insecure: bool,
    /// The length of a lifecycle day in seconds: rules' `Days` count these, and the lifecycle
    /// worker runs a pass ten times per such day (at least every second, at most every
    /// hour). Default 86400; tests shorten it (as radosgw's `rgw_lc_debug_interval`).
    pub lifecycle_day_s: u64,
}

/// Small-object packing: PUTs of small objects to a bucket without versioning that arrive
/// together and whose head objects would land in the same placement group are written as
/// one pack object, in one write (see `store/pack.rs`); a pack GC rewrites packs whose dead
/// share passed a threshold (`store/pack_gc.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackingConfig {
    /// Whether PUTs are packed. Default false (see BENCHMARKS.md for the figures).
    pub enabled: bool,
    /// Objects smaller than this are packed. Default 64 KiB.
    pub object_size_max_bytes: u64,
    /// A group closes when it holds this many bytes. Default 4 MiB.
    pub group_bytes_max: u64,
    /// A group closes when it holds this many objects. Default 32.
    pub group_count_max: usize,
    /// A group closes this long after its first object arrived at the latest (with
    /// `adaptive_close`, the cap; without, the rule). Default 5000 us.
    pub group_wait_us: u64,
    /// Whether a group closes as soon as no other PUT bound for its OSD is on its way (see
    /// `store/pack_close.rs`), its count, bytes and wait only bounding it; without, it
    /// closes on them alone. Default true.
    pub adaptive_close: bool,
    /// With `adaptive_close`: how long a group nobody else is coming to stays open after its
    /// last member joined, in case one arrives unannounced. Default 0 us.
    pub group_linger_us: u64,
    /// A pack is rewritten without its dead ranges once they are this share of it, in
    /// percent. Default 30.
    pub gc_dead_percent_min: u64,
}

impl Default for PackingConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            object_size_max_bytes: 64 << 10,
            group_bytes_max: 4 << 20,
            group_count_max: 32,
            group_wait_us: 5000,
            adaptive_close: true,
            group_linger_us: 0,
            gc_dead_percent_min: 30,
        }
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            metadata_pool: "strata.rgw.meta".into(),
            index_pool: "strata.rgw.index".into(),
            data_pool: "strata.rgw.data".into(),
            pool_size: 1,
            pool_pg_num: 16,
            chunk_size_bytes: 4 << 20,
            index_shards: 8,
            multipart_part_size_min_bytes: 5 << 20,
            region: "us-east-1".into(),
            auth: true,
            gc_period_s: 30,
            gc_min_wait_s: 300,
            gc_nearfull_min_wait_s: 5,
            gc_fullness_check_s: 5,
            secret_keys: None,
            metadata_cache_ms: 1000,
            packing: PackingConfig::default(),
            sse_master_key: None,
            sse_c_allow_insecure: false,
            lifecycle_day_s: 86_400,
        }
    }
}
