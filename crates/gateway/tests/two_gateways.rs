//! Any number of gateways may serve one cluster (issue 6): two real S3 servers over one
//! embedded cluster, raced by boto3 threads on the same keys (tests/two_gateways.py). Each
//! gateway's key lock is in-process only; what keeps them correct is the guarded index
//! commit (`rados::Op::CompareOmap`). After the script removed every version and bucket of
//! the race, only the live data it left on purpose may remain: an overwrite or delete that
//! lost a race and orphaned data fails. Then orphan collection (`strata gc`) must remove a
//! planted orphan (a crashed PUT's data) and nothing live, which the script reads back.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_racing_on_one_key_leave_no_orphaned_data_and_gc_spares_live_data() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (rados, config, mut servers) = common::cluster_and_gateways(dir.path(), "1G", 2).await;
    let second = servers.pop().expect("gateway B");
    let first = servers.pop().expect("gateway A");
    let user = common::user(&first, "main").await;

    let endpoints = [first.local_addr, second.local_addr];
    let stdout = run_script(&endpoints, &user, "race").await;
    assert!(stdout.contains("OPS "), "no operation count:\n{stdout}");

    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");
    let live = data.list_all().await.expect("list");
    let (a, b) = (first.gateway.stats(), second.gateway.stats());
    println!(
        "index races lost and decided again: A {}, B {}; pieces removed: A {}, B {}",
        a.index_races, b.index_races, a.pieces_removed, b.pieces_removed
    );
    // Left on purpose: the plain object, two versions, one part.
    assert_eq!(
        live.len(),
        4,
        "orphaned data objects besides the 4 live ones: {:?}",
        &live[..live.len().min(12)]
    );
    assert_eq!(a.gc_enqueued + b.gc_enqueued, 0);

    // A gateway that died between writing data and committing its entry leaves this.
    let orphan = "crashed-put-data";
    data.write_full(orphan, b"never committed")
        .await
        .expect("orphan");
    let hour_ns = 3_600_000_000_000;
    let report = first.gateway.collect_orphans(hour_ns, false).await.unwrap();
    assert_eq!((report.too_young, report.removed), (1, 0), "{report:?}");
    assert_eq!(report.referenced, 4, "{report:?}");
    let report = second.gateway.collect_orphans(0, true).await.unwrap();
    assert_eq!(report.orphans, vec![orphan.to_string()], "{report:?}");
    assert_eq!(report.removed, 0, "a dry run removes nothing");
    let report = second.gateway.collect_orphans(0, false).await.unwrap();
    assert_eq!((report.orphans.len(), report.removed), (1, 1), "{report:?}");
    assert_eq!(data.list_all().await.unwrap().len(), 4);
    assert_eq!(second.gateway.stats().orphans_removed, 1);

    let stdout = run_script(&endpoints, &user, "check").await;
    assert!(stdout.contains("CHECKED"), "{stdout}");
    let left = data.list_all().await.expect("list");
    assert!(
        left.is_empty(),
        "data left after removing everything: {left:?}"
    );
    first.shutdown().await;
    second.shutdown().await;
}

/// Runs one phase of tests/two_gateways.py against both gateways; panics if it fails.
async fn run_script(
    endpoints: &[std::net::SocketAddr; 2],
    user: &gateway::User,
    phase: &str,
) -> String {
    let mut env = vec![
        ("ENDPOINT_A", format!("http://{}", endpoints[0])),
        ("ENDPOINT_B", format!("http://{}", endpoints[1])),
    ];
    env.extend(common::main_keys(user));
    common::run_script("tests/two_gateways.py", &[phase], &env).await
}
