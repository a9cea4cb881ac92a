//! Omap: round trips, binary keys, empty values, missing objects, paging and prefixes.

use std::collections::BTreeMap;

use super::{data, entries, exists, finish, fresh_pool, ok, omap};
use crate::{Rados, RadosError, WriteOp};

/// Omap: set (creating the object), read all and by keys, remove keys, clear.
pub async fn omap_round_trip(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let set = entries(&[(b"b", b"2"), (b"a", b"1"), (b"c", b"3")]);
    ok(io.omap_set("o", set).await, "omap_set on a missing object");
    assert_eq!(
        data(&*io, "o").await,
        b"",
        "omap_set creates an empty object"
    );
    let all = omap(&*io, "o").await;
    assert_eq!(
        all,
        entries(&[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
            .into_iter()
            .collect()
    );
    let page = ok(io.omap_get_vals("o", None, b"", 10).await, "get_vals");
    let keys: Vec<&[u8]> = page.entries.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, [b"a", b"b", b"c"], "in key order");
    ok(
        io.omap_set("o", entries(&[(b"a", b"one")])).await,
        "overwrite",
    );
    let by_keys = ok(
        io.omap_get_vals_by_keys("o", &[b"a".to_vec(), b"zz".to_vec(), b"c".to_vec()])
            .await,
        "by keys",
    );
    assert_eq!(
        by_keys,
        entries(&[(b"a", b"one"), (b"c", b"3")])
            .into_iter()
            .collect()
    );
    ok(
        io.omap_remove_keys("o", vec![b"a".to_vec(), b"missing".to_vec()])
            .await,
        "remove keys (one missing)",
    );
    assert_eq!(omap(&*io, "o").await.len(), 2);
    ok(io.omap_clear("o").await, "clear");
    assert!(omap(&*io, "o").await.is_empty());
    assert!(
        exists(&*io, "o").await,
        "clearing the omap keeps the object"
    );
    finish(rados, pool).await;
}

/// Omap keys and values are bytes: 0x00 and 0xFF anywhere, ordered bytewise (unsigned).
pub async fn omap_keys_are_binary(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys: [&[u8]; 8] = [
        b"\0",
        b"\0\x01",
        b"a",
        b"a\0b",
        b"a\0c",
        b"a\x01",
        b"\xfex",
        b"\xff\xff",
    ];
    let set: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .rev()
        .enumerate()
        .map(|(i, k)| (k.to_vec(), vec![0, 0xff, i as u8]))
        .collect();
    ok(io.omap_set("o", set.clone()).await, "omap_set binary");
    let page = ok(io.omap_get_vals("o", None, b"", 100).await, "get_vals");
    let got: Vec<&[u8]> = page.entries.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(got, keys, "bytewise order, NUL and 0xFF kept");
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = set.into_iter().collect();
    assert_eq!(
        page.entries.into_iter().collect::<BTreeMap<_, _>>(),
        expected
    );
    let wanted = vec![b"a\0b".to_vec(), b"\0".to_vec(), b"a\0".to_vec()];
    let by_keys = ok(
        io.omap_get_vals_by_keys("o", &wanted).await,
        "by binary keys",
    );
    let found: Vec<&Vec<u8>> = by_keys.keys().collect();
    assert_eq!(found, [&b"\0".to_vec(), &b"a\0b".to_vec()]);
    ok(
        io.omap_remove_keys("o", vec![b"a\0b".to_vec()]).await,
        "remove a\\0b",
    );
    let left = omap(&*io, "o").await;
    assert!(!left.contains_key(&b"a\0b"[..]) && left.contains_key(&b"a\0c"[..]));
    assert!(left.contains_key(&b"a"[..]), "removing a\\0b left a alone");
    finish(rados, pool).await;
}

/// Omap values are never empty: an `OmapSet` with one is `InvalidArgument`, applying nothing.
pub async fn omap_values_are_never_empty(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let set = entries(&[(b"a", b"1"), (b"b", b"")]);
    expect_err!(
        io.omap_set("o", set).await,
        RadosError::InvalidArgument(_),
        "empty value"
    );
    assert!(
        !exists(&*io, "o").await,
        "an invalid omap_set created the object"
    );
    ok(io.omap_set("o", entries(&[(b"a", b"1")])).await, "omap_set");
    let op = WriteOp::new()
        .write_full(b"x".to_vec())
        .omap_set(entries(&[(b"c", b"")]));
    expect_err!(
        io.operate("o", op).await,
        RadosError::InvalidArgument(_),
        "in an op"
    );
    assert_eq!(data(&*io, "o").await, b"", "nothing applied");
    finish(rados, pool).await;
}

/// Omap removals on a missing object are `NotFound` (Ceph's) and create nothing.
pub async fn omap_on_missing_object(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys = vec![b"k".to_vec()];
    expect_err!(
        io.omap_remove_keys("none", keys.clone()).await,
        RadosError::NotFound(_),
        "rm"
    );
    expect_err!(
        io.omap_clear("none").await,
        RadosError::NotFound(_),
        "clear"
    );
    let op = WriteOp::new().omap_remove_keys(keys);
    expect_err!(
        io.operate("none", op).await,
        RadosError::NotFound(_),
        "rm step"
    );
    let op = WriteOp::new().omap_clear();
    expect_err!(
        io.operate("none", op).await,
        RadosError::NotFound(_),
        "clear step"
    );
    assert!(!exists(&*io, "none").await);
    finish(rados, pool).await;
}

/// Paging: at most `max` entries a page, `more` exactly when an entry follows.
pub async fn omap_paging_reports_more(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let all: Vec<(Vec<u8>, Vec<u8>)> = (0..250)
        .map(|i| {
            (
                format!("key-{i:04}").into_bytes(),
                format!("{i}").into_bytes(),
            )
        })
        .collect();
    ok(io.omap_set("o", all.clone()).await, "omap_set 250");
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let after = seen.last().map(|(k, _): &(Vec<u8>, Vec<u8>)| k.clone());
        let page = ok(
            io.omap_get_vals("o", after.as_deref(), b"", 100).await,
            "page",
        );
        assert!(page.entries.len() <= 100, "a page holds at most max");
        pages += 1;
        assert!(pages <= 250, "paging does not end");
        let more = page.more;
        seen.extend(page.entries);
        assert_eq!(
            more,
            seen.len() < all.len(),
            "more after {} entries",
            seen.len()
        );
        if !more {
            break;
        }
    }
    assert_eq!(seen, all, "pages concatenate to the omap, in order");
    let exact = ok(io.omap_get_vals("o", None, b"", 250).await, "max = count");
    assert_eq!((exact.entries.len(), exact.more), (250, false));
    let one_short = ok(
        io.omap_get_vals("o", None, b"", 249).await,
        "max = count - 1",
    );
    assert_eq!((one_short.entries.len(), one_short.more), (249, true));
    let after_last = ok(
        io.omap_get_vals("o", Some(b"key-0249"), b"", 10).await,
        "after last",
    );
    assert_eq!((after_last.entries.len(), after_last.more), (0, false));
    let between = ok(
        io.omap_get_vals("o", Some(b"key-0100a"), b"", 1).await,
        "not a key",
    );
    assert_eq!(
        between.entries[0].0, b"key-0101",
        "start_after need not be a key"
    );
    finish(rados, pool).await;
}

/// The prefix filter, alone and with `start_after` before, inside and after its range.
pub async fn omap_prefix_filter(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys: [&[u8]; 6] = [b"a", b"ab", b"abc", b"abd", b"ac", b"b"];
    let set: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.to_vec(), b"v".to_vec())).collect();
    ok(io.omap_set("o", set).await, "omap_set");
    let get = |after: Option<&'static [u8]>, prefix: &'static [u8], max| {
        let io = io.clone();
        async move {
            let page = ok(io.omap_get_vals("o", after, prefix, max).await, "get_vals");
            let keys: Vec<Vec<u8>> = page.entries.into_iter().map(|(k, _)| k).collect();
            (keys, page.more)
        }
    };
    let owned = |keys: &[&[u8]]| keys.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
    assert_eq!(
        get(None, b"ab", 10).await,
        (owned(&[b"ab", b"abc", b"abd"]), false)
    );
    assert_eq!(get(None, b"ab", 2).await, (owned(&[b"ab", b"abc"]), true));
    assert_eq!(
        get(Some(b"abc"), b"ab", 10).await,
        (owned(&[b"abd"]), false)
    );
    assert_eq!(
        get(Some(b"a"), b"ab", 10).await,
        (owned(&[b"ab", b"abc", b"abd"]), false)
    );
    assert_eq!(get(Some(b"abd"), b"ab", 10).await, (owned(&[]), false));
    assert_eq!(get(Some(b"b"), b"ab", 10).await, (owned(&[]), false));
    assert_eq!(get(None, b"x", 10).await, (owned(&[]), false));
    assert_eq!(get(None, b"", 10).await, (owned(&keys), false));
    assert_eq!(get(Some(b"aa"), b"", 10).await, (owned(&keys[1..]), false));
    finish(rados, pool).await;
}

/// `start_after` and the prefix are bytes too: NUL and 0xFF in them page correctly.
pub async fn omap_start_after_is_binary(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys: [&[u8]; 7] = [
        b"\0", b"\0\0", b"\0a", b"k\0a", b"k\0b", b"k\x01", b"\xff\0",
    ];
    let set: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.to_vec(), b"v".to_vec())).collect();
    ok(io.omap_set("o", set).await, "omap_set");
    let mut seen: Vec<Vec<u8>> = Vec::new();
    loop {
        let after = seen.last().cloned();
        let page = ok(
            io.omap_get_vals("o", after.as_deref(), b"", 1).await,
            "page of 1",
        );
        seen.extend(page.entries.into_iter().map(|(k, _)| k));
        assert!(seen.len() <= keys.len(), "paging repeats keys: {seen:?}");
        if !page.more {
            break;
        }
    }
    let expected: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
    assert_eq!(seen, expected, "one key a page, after keys holding NUL");
    let prefixed = |prefix: &'static [u8], after: Option<&'static [u8]>| {
        let io = io.clone();
        async move {
            let page = ok(io.omap_get_vals("o", after, prefix, 10).await, "prefix");
            page.entries.into_iter().map(|(k, _)| k).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        prefixed(b"k\0", None).await,
        [b"k\0a".to_vec(), b"k\0b".to_vec()]
    );
    assert_eq!(prefixed(b"k\0", Some(b"k\0a")).await, [b"k\0b".to_vec()]);
    assert_eq!(prefixed(b"\0", None).await.len(), 3);
    assert_eq!(prefixed(b"\xff", None).await, [b"\xff\0".to_vec()]);
    finish(rados, pool).await;
}
