//! The test binary's fresh Ceph minicluster (memstore, 3 OSDs, pools of 3), shared by its
//! tests: `ceph_backend::minicluster`, with the connection helpers these tests use. Kept as a
//! module of its own because other test helpers include it with `#[path]`.

#![allow(dead_code)]

use ceph_backend::CephRados;

pub use ceph_backend::minicluster::MiniCluster;

/// The test binary's cluster, started on first use; `None` (after printing why) when Ceph is
/// not installed and `STRATA_SKIP_CEPH=1` says to skip. Without Ceph and without that, fails.
pub fn cluster() -> Option<&'static MiniCluster> {
    ceph_backend::minicluster::shared()
}

/// A connection to the binary's cluster, or `None` to skip (see [`cluster`]).
pub async fn connect() -> Option<CephRados> {
    Some(
        cluster()?
            .connect()
            .await
            .expect("connect to the minicluster"),
    )
}
