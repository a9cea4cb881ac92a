//! Recovery and deep scrub of an erasure-coded PG, under the PG's exclusive lock.
//!
//! Recovery resolves every object any position holds ([`Target::resolve`]): torn writes go
//! back or forward, shards missing on a position (an OSD that returned, or a new OSD CRUSH
//! put in a failed one's place) are rebuilt from `k` others. Deep scrub reads every shard
//! whole (each block checked against its crc32c by the store), re-encodes the parity from
//! the data shards and compares; a shard that disagrees is found by leaving each out in turn
//! and rewritten from the others.

use futures_util::stream::{self, StreamExt};
use osdmap::PgId;
use rados::{RadosError, Result};

use crate::ec::io::list_pg;
use crate::ec::object::{decide, Decision, Probe, Target};
use crate::ec::ErasureProfile;
use crate::scrub::{Inconsistency, ScrubReport};
use crate::Inner;

/// Objects one PG's recovery resolves at once. Each reads `k` shards and writes the missing
/// ones: one at a time, recovery ran at one object's read-decode-write latency instead of at
/// the devices' depth. Objects are independent under the PG's exclusive lock. (Ceph's
/// `osd_recovery_max_active` is 3 per HDD OSD and 10 per SSD one.)
const OBJECTS_IN_FLIGHT: usize = 8;

/// Makes every available shard of every object of `pg` current. Returns whether the PG is
/// whole (every position available and every object resolved).
pub(crate) async fn recover_pg(inner: &Inner, pg: PgId, profile: &ErasureProfile) -> Result<bool> {
    let _guard = inner.pg_lock(pg).write().await;
    let map = inner.map();
    let target = Target::of(inner, &map, pg, profile);
    let mut whole = target.available() == profile.size() as usize;
    let objects = list_pg(&target, None).await?;
    let target = &target;
    let mut resolved = stream::iter(objects)
        .map(|object| async move {
            let result = target.resolve(&object).await;
            (object, result)
        })
        .buffer_unordered(OBJECTS_IN_FLIGHT);
    while let Some((object, result)) = resolved.next().await {
        if let Err(error) = result {
            tracing::warn!(%error, object, pg = %pg, "erasure-coded recovery");
            whole = false;
        }
    }
    Ok(whole)
}

/// Deep-scrubs `pg`; with `repair`, rewrites bad shards (and resolves torn or stale objects).
pub(crate) async fn scrub_pg(
    inner: &Inner,
    pg: PgId,
    profile: &ErasureProfile,
    repair: bool,
) -> Result<ScrubReport> {
    let _guard = inner.pg_lock(pg).write().await;
    let map = inner.map();
    let target = Target::of(inner, &map, pg, profile);
    let pg_name = format!("{}.{:x}", pg.pool, pg.seed);
    let mut report = ScrubReport {
        pgs: 1,
        ..ScrubReport::default()
    };
    let note = |report: &mut ScrubReport, object: &str, position: usize, kind, repaired| {
        report.inconsistencies.push(Inconsistency {
            pg: pg_name.clone(),
            object: object.to_string(),
            osd: target.positions[position],
            kind,
            repaired,
        })
    };
    for object in list_pg(&target, None).await? {
        report.objects += 1;
        let probes = target.probe(&object).await;
        let decision = decide(&probes, profile.k as usize);
        let Decision::Version {
            good,
            roll_back,
            stale,
            ..
        } = &decision
        else {
            continue;
        };
        if !roll_back.is_empty() || !stale.is_empty() {
            for &position in roll_back.iter().chain(stale) {
                let kind = if matches!(probes[position], Probe::Absent) {
                    "missing"
                } else {
                    "differs"
                };
                note(&mut report, &object, position, kind, repair);
            }
            if repair {
                target.resolve(&object).await?;
            }
            continue;
        }
        let Probe::Present(meta) = &probes[good[0]] else {
            continue;
        };
        let shard_bytes = target.shard_bytes(meta.size_bytes);
        // Read every good shard whole; an unreadable one is bad.
        let mut shards: Vec<Option<Vec<u8>>> = vec![None; target.positions.len()];
        let mut unreadable = Vec::new();
        for &position in good {
            match target
                .read_from_device(&object, position, shard_bytes)
                .await
            {
                Some(bytes) => shards[position] = Some(bytes),
                None => unreadable.push(position),
            }
        }
        let mut bad = unreadable.clone();
        if unreadable.is_empty() && !consistent(&target, &shards) {
            // Find the one shard whose absence makes the rest agree.
            let culprits: Vec<usize> = good
                .iter()
                .copied()
                .filter(|&position| {
                    let mut without = shards.clone();
                    without[position] = None;
                    consistent(&target, &without)
                })
                .collect();
            if culprits.len() == 1 {
                bad = culprits;
            } else {
                report.lost.push(format!(
                    "{}/{object}: parity disagrees with the data and no single shard explains it",
                    pg_name
                ));
                continue;
            }
        }
        for &position in &bad {
            let kind = if unreadable.contains(&position) {
                "unreadable"
            } else {
                "differs"
            };
            note(&mut report, &object, position, kind, repair);
        }
        if repair && !bad.is_empty() {
            let state = crate::ec::object::ObjectState {
                version: meta.version,
                size_bytes: meta.size_bytes,
                mtime_ns: meta.mtime_ns,
                xattrs: meta.xattrs.clone(),
            };
            let sources: Vec<usize> = good
                .iter()
                .copied()
                .filter(|position| !bad.contains(position))
                .collect();
            target.rebuild(&object, &state, &sources, &bad).await?;
        }
    }
    Ok(report)
}

/// Whether the present shards are one codeword: the parity re-encoded from the data (decoded
/// from the first `k` present) equals every present shard.
fn consistent(target: &Target<'_>, shards: &[Option<Vec<u8>>]) -> bool {
    let k = target.codec.k();
    let mut first_k: Vec<Option<Vec<u8>>> = vec![None; shards.len()];
    for (position, shard) in shards
        .iter()
        .enumerate()
        .filter(|(_, shard)| shard.is_some())
        .take(k)
    {
        first_k[position] = shard.clone();
    }
    match target.codec.reconstruct(&first_k) {
        Ok(whole) => shards
            .iter()
            .zip(&whole)
            .all(|(shard, expected)| shard.as_ref().is_none_or(|shard| shard == expected)),
        Err(_) => false,
    }
}

/// An error naming a pool that is not erasure-coded.
pub(crate) fn not_erasure(pool: &str) -> RadosError {
    RadosError::InvalidArgument(format!("pool {pool:?} is not erasure-coded"))
}
