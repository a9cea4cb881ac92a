//! The `rados` contract suite (`rados::contract`) on the embedded cluster: one test per case,
//! each on a fresh cluster of three in-memory OSDs on three hosts.

mod common;

use std::ops::Deref;

use cluster::{Cluster, ClusterOptions};

/// A cluster and the directory it lives in, dropped together at the end of a case.
struct Embedded {
    cluster: Cluster,
    _dir: tempfile::TempDir,
}

impl Deref for Embedded {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

async fn embedded() -> Embedded {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir.path(), common::small_config(3, 1, "mem", 3), options)
        .await
        .expect("cluster starts");
    Embedded { cluster, _dir: dir }
}

rados::contract_tests!(embedded().await);
