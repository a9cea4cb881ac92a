//! The `rados` contract through the cache tier's overlay, on the in-memory model: every case
//! runs with each pool served through a cache pool, in writeback with everything admitted at
//! once (Ceph's tier without hit sets), with promotion after a proxied miss (Ceph's tier with
//! recency 1), and with seed 000's predictive admission.

mod common;

use std::sync::Arc;

use rados::memory::MemoryRados;
use tier::CacheMode;

mod writeback_promote_at_once {
    use super::*;
    rados::contract_tests!(
        common::AutoTiered::new(
            Arc::new(MemoryRados::new()),
            CacheMode::Writeback,
            vec![("hit_set_count", "0"), ("tier_block_bytes", "4096")],
        )
        .await
    );
}

mod writeback_proxy_then_promote {
    use super::*;
    rados::contract_tests!(
        common::AutoTiered::new(
            Arc::new(MemoryRados::new()),
            CacheMode::Writeback,
            vec![("tier_block_bytes", "4096")],
        )
        .await
    );
}

mod predictive {
    use super::*;
    rados::contract_tests!(
        common::AutoTiered::new(
            Arc::new(MemoryRados::new()),
            CacheMode::Writeback,
            vec![
                ("tier_admission", "predictive"),
                ("predictive_threshold", "0"),
                ("tier_block_bytes", "4096"),
            ],
        )
        .await
    );
}

mod proxy {
    use super::*;
    rados::contract_tests!(
        common::AutoTiered::new(Arc::new(MemoryRados::new()), CacheMode::Proxy, vec![]).await
    );
}
