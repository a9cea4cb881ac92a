//! The contract suite: one async function per behaviour the crate docs promise, generic over
//! the backend, so the memory model, the embedded cluster and librados are held to one text.
//!
//! Every case takes a cluster handle and a pool name, creates that pool fresh (size 1, 8 PGs:
//! it runs on a one-OSD cluster too), works in it, and deletes it; it panics on the first
//! difference, saying what was expected. A backend runs them with [`crate::contract_tests!`]
//! (one `#[tokio::test]` per case) or with [`run_all`]. The cases assume nothing the contract
//! leaves open: no listing order, no page sizes beyond "at most `max`", no mtime resolution.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{IoCtx, PoolSpec, Rados, RadosError, Result};

/// A case's future.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One case of the suite: its name and how to run it on a backend and a pool name.
pub struct Case {
    /// The function's name.
    pub name: &'static str,
    /// Runs it.
    pub run: for<'a> fn(&'a dyn Rados, &'a str) -> CaseFuture<'a>,
}

/// Calls the macro named in brackets with the tokens after it and then every case's name, in the order [`run_all`] runs them: the one list of cases, behind
/// both [`CASES`] and [`crate::contract_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! contract_case_names {
    ([$($callback:tt)*] $($leading:tt)*) => {
        $($callback)*!($($leading)*
            pools_create_lookup_list_delete,
            pool_errors,
            pool_delete_removes_its_objects,
            pools_are_isolated,
            write_full_replaces_data,
            write_extends_with_zeros,
            append_creates_and_extends,
            read_ranges_and_past_end,
            large_object_round_trip,
            missing_object_reads_not_found,
            truncate_shrinks_and_grows,
            truncate_missing_object_creates_nothing,
            zero_never_creates_or_extends,
            create_plain_and_exclusive,
            remove_takes_data_xattrs_and_omap,
            stat_reports_size_mtime_version,
            versions_grow_with_every_change,
            xattrs_round_trip,
            xattr_names_are_checked,
            remove_xattr_needs_the_object,
            omap_round_trip,
            omap_keys_are_binary,
            omap_values_are_never_empty,
            omap_on_missing_object,
            omap_paging_reports_more,
            omap_prefix_filter,
            omap_start_after_is_binary,
            compare_xattr_each_comparison,
            compare_xattr_missing_xattr_and_object,
            compare_omap_values_and_absence,
            compare_omap_on_missing_object,
            compare_omap_sees_state_before_op,
            assert_exists_guard,
            failed_guard_applies_nothing,
            failed_step_applies_nothing,
            steps_apply_in_order,
            empty_write_op_changes_nothing,
            object_name_limits,
            listing_empty_pool,
            listing_many_pages,
        );
    };
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        /// Every case, in the order [`run_all`] runs them.
        pub const CASES: &[Case] = &[$(Case {
            name: stringify!($case),
            run: |rados, pool| Box::pin($case(rados, pool)),
        }),*];
    };
}

contract_case_names!([cases]);

/// Runs every case in turn on `rados`, each in its own pool named `{pool_prefix}{case}`.
pub async fn run_all(rados: &dyn Rados, pool_prefix: &str) {
    for case in CASES {
        let pool = format!("{pool_prefix}{}", case.name);
        (case.run)(rados, &pool).await;
    }
}

/// Generates one `#[tokio::test]` per case of [`CASES`] in the calling module (which needs
/// `tokio` with its macros); both come from one list of names.
///
/// `$backend` is an expression evaluated afresh in each test (it may `.await`) to a value that
/// dereferences to a [`Rados`] implementation and owns whatever must outlive the case (a
/// temporary directory, say): `Arc<MemoryRados>`, `Arc<dyn Rados>`, a struct with `Deref`.
///
/// ```ignore
/// rados::contract_tests!(std::sync::Arc::new(rados::memory::MemoryRados::new()));
/// ```
#[macro_export]
macro_rules! contract_tests {
    ($backend:expr) => {
        $crate::contract_case_names!([$crate::contract_tests] @cases $backend;);
    };
    (@cases $backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let backend = $backend;
                let rados: &dyn $crate::Rados = &*backend;
                $crate::contract::$case(rados, concat!("contract-", stringify!($case))).await;
            }
        )*
    };
}

/// Fails the case unless `$result` is an `Err` matching `$pattern`.
macro_rules! expect_err {
    ($result:expr, $pattern:pat, $($what:tt)+) => {
        match $result {
            Err($pattern) => {}
            other => panic!(
                "{}: expected Err({}), got {:?}",
                format!($($what)+),
                stringify!($pattern),
                other
            ),
        }
    };
}

mod guards;
mod listing;
mod objects;
mod omap;
mod pools;
mod xattr;

pub use guards::*;
pub use listing::*;
pub use objects::*;
pub use omap::*;
pub use pools::*;
pub use xattr::*;

/// `pool`, created afresh (a leftover of an earlier run is deleted first).
async fn fresh_pool(rados: &dyn Rados, pool: &str) -> Arc<dyn IoCtx> {
    match rados.pool_delete(pool).await {
        Ok(()) | Err(RadosError::NotFound(_)) => {}
        Err(error) => panic!("deleting a leftover pool {pool:?}: {error}"),
    }
    rados
        .pool_create(spec(pool))
        .await
        .unwrap_or_else(|error| panic!("creating pool {pool:?}: {error}"));
    rados
        .io_ctx(pool)
        .await
        .unwrap_or_else(|error| panic!("io_ctx({pool:?}): {error}"))
}

fn spec(pool: &str) -> PoolSpec {
    PoolSpec::new(pool).with_size(1).with_pg_num(8)
}

async fn finish(rados: &dyn Rados, pool: &str) {
    rados
        .pool_delete(pool)
        .await
        .unwrap_or_else(|error| panic!("deleting pool {pool:?}: {error}"));
}

fn ok<T>(result: Result<T>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

async fn data(io: &dyn IoCtx, object: &str) -> Vec<u8> {
    ok(
        io.read_full(object).await,
        &format!("read_full({object:?})"),
    )
}

async fn version(io: &dyn IoCtx, object: &str) -> u64 {
    ok(io.stat(object).await, &format!("stat({object:?})")).version
}

async fn exists(io: &dyn IoCtx, object: &str) -> bool {
    match io.stat(object).await {
        Ok(_) => true,
        Err(RadosError::NotFound(_)) => false,
        Err(error) => panic!("stat({object:?}): {error}"),
    }
}

async fn omap(io: &dyn IoCtx, object: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let page = ok(
        io.omap_get_vals(object, None, b"", 1000).await,
        &format!("omap_get_vals({object:?})"),
    );
    assert!(
        !page.more,
        "{object}: more than 1000 omap entries in a test"
    );
    page.entries.into_iter().collect()
}

fn entries(pairs: &[(&[u8], &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}
