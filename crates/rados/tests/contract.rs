//! The contract suite (`rados::contract`) on the reference model, `MemoryRados`.

use std::sync::Arc;

use rados::memory::MemoryRados;

rados::contract_tests!(Arc::new(MemoryRados::new()));

#[tokio::test]
async fn run_all_runs_every_case_on_one_cluster() {
    let rados = MemoryRados::new();
    rados::contract::run_all(&rados, "all-").await;
}
