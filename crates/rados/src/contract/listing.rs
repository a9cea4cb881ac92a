//! Object names' limits and pool listing.

use std::collections::BTreeSet;

use super::{data, finish, fresh_pool, ok};
use crate::{IoCtx, ListCursor, Rados, RadosError, OBJECT_NAME_BYTES_MAX};

/// Names: 1..=2048 bytes without NUL (any other character goes); the rest `InvalidArgument`.
pub async fn object_name_limits(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    assert_eq!(
        OBJECT_NAME_BYTES_MAX, 2048,
        "Ceph's osd_max_object_name_len"
    );
    let longest = "n".repeat(OBJECT_NAME_BYTES_MAX);
    let multibyte = "é".repeat(OBJECT_NAME_BYTES_MAX / 2);
    let odd = [
        ".hidden",
        "_under",
        "dir/sub/file",
        "with space",
        "ünïcode ☃",
        "a\u{1}b",
        "%00",
    ];
    let good: Vec<&str> = [longest.as_str(), multibyte.as_str()]
        .into_iter()
        .chain(odd)
        .collect();
    for name in &good {
        ok(
            io.write_full(name, name.as_bytes()).await,
            &format!("write {} bytes", name.len()),
        );
        assert_eq!(data(&*io, name).await, name.as_bytes());
    }
    let listed: BTreeSet<String> = ok(io.list_all().await, "list_all").into_iter().collect();
    let expected: BTreeSet<String> = good.iter().map(|n| n.to_string()).collect();
    assert_eq!(listed, expected, "every name lists as written");
    let too_long = "n".repeat(OBJECT_NAME_BYTES_MAX + 1);
    for name in [too_long.as_str(), "", "a\0b"] {
        let what = format!("name of {} bytes", name.len());
        expect_err!(
            io.write_full(name, b"x").await,
            RadosError::InvalidArgument(_),
            "write {what}"
        );
        expect_err!(
            io.stat(name).await,
            RadosError::InvalidArgument(_),
            "stat {what}"
        );
        expect_err!(
            io.read_full(name).await,
            RadosError::InvalidArgument(_),
            "read {what}"
        );
    }
    finish(rados, pool).await;
}

/// An empty pool lists nothing and ends.
pub async fn listing_empty_pool(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let page = ok(io.list(&ListCursor::start(), 10).await, "list");
    assert!(page.objects.is_empty());
    assert!(page.next.is_none(), "an empty listing ends");
    assert!(ok(io.list_all().await, "list_all").is_empty());
    finish(rados, pool).await;
}

/// Listing many objects through small pages: each page at most `max`, every object exactly
/// once, in no promised order; removed objects no longer listed.
pub async fn listing_many_pages(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let names: Vec<String> = (0..300)
        .map(|i| format!("object-{i:03}-{}", i * 7919 % 1000))
        .collect();
    for name in &names {
        ok(io.create(name, true).await, name);
    }
    let listed = list_in_pages(&*io, 7).await;
    assert_eq!(listed.len(), names.len(), "each object once");
    let expected: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(listed.iter().cloned().collect::<BTreeSet<_>>(), expected);
    let all: BTreeSet<String> = ok(io.list_all().await, "list_all").into_iter().collect();
    assert_eq!(all, expected);
    for name in names.iter().step_by(3) {
        ok(io.remove(name).await, name);
    }
    let left: BTreeSet<String> = list_in_pages(&*io, 50).await.into_iter().collect();
    let expected: BTreeSet<String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, n)| n.clone())
        .collect();
    assert_eq!(left, expected, "removed objects are not listed");
    finish(rados, pool).await;
}

/// Every name, through pages of `max`, checking each page's bound and that no name repeats.
async fn list_in_pages(io: &dyn IoCtx, max: usize) -> Vec<String> {
    let mut cursor = ListCursor::start();
    let mut names = Vec::new();
    let mut seen = BTreeSet::new();
    for _ in 0..10_000 {
        let page = ok(io.list(&cursor, max).await, "list");
        assert!(
            page.objects.len() <= max,
            "page of {} > max {max}",
            page.objects.len()
        );
        for name in page.objects {
            assert!(seen.insert(name.clone()), "{name} listed twice");
            names.push(name);
        }
        match page.next {
            Some(next) => cursor = next,
            None => return names,
        }
    }
    panic!("listing did not end after 10000 pages");
}
