//! The `rados` contract suite (`rados::contract`) on real Ceph: one test per case, each in a
//! pool of its own on this binary's fresh minicluster (see `common`).

mod common;

rados::contract_tests!(match common::connect().await {
    Some(rados) => std::sync::Arc::new(rados),
    None => return,
});
