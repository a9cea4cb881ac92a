//! Full handling, as Ceph's: the pure policy deciding which OSDs are nearfull, backfillfull
//! or full and which pools are full ([`assess`]), and the per-write check that no OSD goes
//! past the full ratio ([`SpaceReservation`]).
//!
//! Ceph's three ratios (`cluster.toml`: `nearfull_ratio` 0.85, `backfillfull_ratio` 0.90,
//! `full_ratio` 0.95) apply to the share of an OSD's data region in use:
//! - nearfull: a warning (`OSD_NEARFULL`); the S3 gateway's GC stops waiting out its delay;
//! - backfillfull: recovery and backfill copy nothing more onto it (`backfill_toofull`);
//! - full: every pool whose CRUSH rule can place on it is full (`POOL_FULL`, Ceph's per-pool
//!   `FLAG_FULL`), and writes that would add data or objects to such a pool are refused with
//!   [`rados::RadosError::NoSpace`]; as in Ceph's `PrimaryLogPG`, an op that adds neither
//!   (a removal, an omap or xattr change of an existing object, a truncate) goes on, so a
//!   user can clean up.
//!
//! A flag computed from the last statistics lags the writes: a burst could fill a device
//! between two reports (Ceph keeps a `failsafe_full_ratio` for that). Here every write also
//! reserves the space it needs on each replica before it is applied and is refused if that
//! would take one past the full ratio; reservations are released once the store has
//! accounted for the write. So no OSD crosses the full ratio by more than what its stores
//! allocate beyond the estimate, and a physically full device is never reached by writes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

pub use rados::FullLevel;
use rados::{PoolInfo, RadosError};

use crate::{Inner, Osd};

/// The three ratios, each a share of an OSD's data region in use (`0 < nearfull <=
/// backfillfull <= full <= 1`, checked by the config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FullRatios {
    /// `nearfull_ratio`.
    pub nearfull: f64,
    /// `backfillfull_ratio`.
    pub backfillfull: f64,
    /// `full_ratio`.
    pub full: f64,
}

impl FullRatios {
    /// The level of an OSD using `used_bytes` of `total_bytes` (an empty device is `Ok`).
    pub fn level(&self, used_bytes: u64, total_bytes: u64) -> FullLevel {
        if total_bytes == 0 {
            return FullLevel::Ok;
        }
        let used = used_bytes as f64 / total_bytes as f64;
        if used >= self.full {
            FullLevel::Full
        } else if used >= self.backfillfull {
            FullLevel::Backfillfull
        } else if used >= self.nearfull {
            FullLevel::Nearfull
        } else {
            FullLevel::Ok
        }
    }

    /// The level of an OSD that refused a write of `refused_bytes` for space (0: none since
    /// its use last fell): full while that write would still not fit below the full ratio,
    /// so an OSD that stops writes short of the ratio (each write counts what it needs)
    /// is reported and handled as full, and stops being so once removals made room.
    pub fn level_after_refusal(
        &self,
        used_bytes: u64,
        total_bytes: u64,
        refused_bytes: u64,
    ) -> FullLevel {
        let level = self.level(used_bytes, total_bytes);
        if refused_bytes > 0 && !Self::fits(self.full, used_bytes, refused_bytes, total_bytes) {
            return FullLevel::Full;
        }
        level
    }

    /// Whether `used_bytes + extra_bytes` of `total_bytes` stays within `ratio`.
    pub fn fits(ratio: f64, used_bytes: u64, extra_bytes: u64, total_bytes: u64) -> bool {
        used_bytes.saturating_add(extra_bytes) as f64 <= ratio * total_bytes as f64
    }
}

/// One OSD's space, as [`assess`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsdSpace {
    /// The OSD.
    pub id: i32,
    /// Its device class.
    pub class: String,
    /// In (CRUSH places on it). An out OSD fills no pool.
    pub is_in: bool,
    /// Size of its data region.
    pub total_bytes: u64,
    /// Bytes of it in use.
    pub used_bytes: u64,
    /// Its level ([`FullRatios::level_after_refusal`]).
    pub level: FullLevel,
}

/// One pool, as [`assess`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolPlacement {
    /// The pool's id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// The device class its CRUSH rule takes (`None`: every OSD).
    pub class: Option<String>,
}

/// One OSD's level and use.
#[derive(Clone, Debug, PartialEq)]
pub struct OsdFull {
    /// The OSD.
    pub id: i32,
    /// Its level.
    pub level: FullLevel,
    /// Share of its data region in use, 0..=1.
    pub used_ratio: f64,
}

/// A pool's level: the worst of the in OSDs its rule can place on, and that OSD.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolFull {
    /// The pool's id.
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Its level (Ceph's pool flags `FULL`, `BACKFILLFULL`, `NEARFULL`).
    pub level: FullLevel,
    /// The fullest OSD it can place on, if it is not `Ok`.
    pub worst_osd: Option<i32>,
}

/// What [`assess`] decided: every OSD's level and every pool's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FullState {
    /// The ratios it used.
    pub ratios: Option<FullRatios>,
    /// By OSD id.
    pub osds: BTreeMap<i32, OsdFull>,
    /// By pool id.
    pub pools: BTreeMap<i64, PoolFull>,
}

impl FullState {
    /// The OSDs at `level` exactly, in id order.
    pub fn osds_at(&self, level: FullLevel) -> Vec<&OsdFull> {
        self.osds
            .values()
            .filter(|osd| osd.level == level)
            .collect()
    }

    /// The pools at `level` exactly, in id order.
    pub fn pools_at(&self, level: FullLevel) -> Vec<&PoolFull> {
        self.pools
            .values()
            .filter(|pool| pool.level == level)
            .collect()
    }

    /// The worst level of any OSD.
    pub fn worst(&self) -> FullLevel {
        self.osds
            .values()
            .map(|osd| osd.level)
            .max()
            .unwrap_or_default()
    }
}

/// Decides every OSD's level from its use, and every pool's: a pool is as full as the
/// fullest in OSD its CRUSH rule can place on (its device class, or every OSD), as Ceph's
/// `OSDMap::get_full_pools` marks a pool `FULL` when any OSD under its rule is full, so a
/// pool's writes stop as a whole rather than on the PGs that happen to sit on that OSD.
/// Pure.
pub fn assess(ratios: FullRatios, osds: &[OsdSpace], pools: &[PoolPlacement]) -> FullState {
    let levels: BTreeMap<i32, OsdFull> = osds
        .iter()
        .map(|osd| {
            let used_ratio = if osd.total_bytes == 0 {
                0.0
            } else {
                osd.used_bytes as f64 / osd.total_bytes as f64
            };
            (
                osd.id,
                OsdFull {
                    id: osd.id,
                    level: osd.level,
                    used_ratio,
                },
            )
        })
        .collect();
    let pools = pools
        .iter()
        .map(|pool| {
            let worst = osds
                .iter()
                .filter(|osd| osd.is_in)
                .filter(|osd| pool.class.as_deref().is_none_or(|class| osd.class == class))
                .filter_map(|osd| levels.get(&osd.id))
                .max_by(|a, b| {
                    a.level
                        .cmp(&b.level)
                        .then(a.used_ratio.total_cmp(&b.used_ratio))
                });
            let level = worst.map_or(FullLevel::Ok, |osd| osd.level);
            (
                pool.id,
                PoolFull {
                    id: pool.id,
                    name: pool.name.clone(),
                    level,
                    worst_osd: worst.filter(|_| level > FullLevel::Ok).map(|osd| osd.id),
                },
            )
        })
        .collect();
    FullState {
        ratios: Some(ratios),
        osds: levels,
        pools,
    }
}

/// The error of a write refused because a pool is full.
pub fn pool_full_error(pool: &str, osd: i32, used_ratio: f64, full_ratio: f64) -> RadosError {
    RadosError::NoSpace(format!(
        "pool {pool:?} is full: osd.{osd} is {:.1}% used, at or past full_ratio {full_ratio} \
         (remove data or add capacity; reads and removals still work)",
        100.0 * used_ratio
    ))
}

/// Bytes a store may allocate to write `data_bytes` in `steps` writes with allocation unit
/// `unit_bytes`: each write rounded up to whole units, plus one for a write that starts
/// inside a unit. Copy-on-write stores allocate the new data before freeing the old, so an
/// overwrite needs it too.
pub fn allocation_bytes(data_bytes: u64, steps: u64, unit_bytes: u64) -> u64 {
    if data_bytes == 0 {
        return 0;
    }
    let unit = unit_bytes.max(1);
    data_bytes
        .div_ceil(unit)
        .saturating_add(steps)
        .saturating_mul(unit)
}

/// One OSD's writes in flight and last level seen.
#[derive(Debug, Default)]
pub struct SpaceTracker {
    /// Bytes reserved by writes in flight.
    pub reserved: Reserved,
    /// The [`FullLevel`] last read from its store (a hint: a `Full` one is read again
    /// before a write is refused for it).
    level: AtomicU8,
    /// Bytes of the last client write refused for space (0: none, or room was made since).
    refused_bytes: AtomicU64,
}

impl SpaceTracker {
    /// The level last seen.
    pub fn level(&self) -> FullLevel {
        match self.level.load(Ordering::Acquire) {
            0 => FullLevel::Ok,
            1 => FullLevel::Nearfull,
            2 => FullLevel::Backfillfull,
            _ => FullLevel::Full,
        }
    }

    fn set_level(&self, level: FullLevel) {
        self.level.store(level as u8, Ordering::Release);
    }
}

/// Bytes reserved on one OSD for writes in flight (see [`SpaceReservation`]).
#[derive(Debug, Default)]
pub struct Reserved(AtomicU64);

impl Reserved {
    /// Bytes reserved now.
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// Space reserved on some OSDs for one write in flight; released when dropped (after the
/// stores applied the write, so their own accounting then includes it).
pub struct SpaceReservation<'a> {
    held: Vec<(&'a Reserved, u64)>,
}

impl<'a> SpaceReservation<'a> {
    /// Nothing reserved yet.
    pub fn new() -> Self {
        Self { held: Vec::new() }
    }

    /// Reserves `need_bytes` on an OSD using `used_bytes` of `total_bytes` with `reserved`
    /// in flight, if the total stays within `ratio`; else reserves nothing and returns the
    /// share the OSD would reach.
    pub fn reserve(
        &mut self,
        reserved: &'a Reserved,
        need_bytes: u64,
        used_bytes: u64,
        total_bytes: u64,
        ratio: f64,
    ) -> std::result::Result<(), f64> {
        let before = reserved.0.fetch_add(need_bytes, Ordering::AcqRel);
        let projected = used_bytes.saturating_add(before);
        if FullRatios::fits(ratio, projected, need_bytes, total_bytes) {
            self.held.push((reserved, need_bytes));
            return Ok(());
        }
        reserved.0.fetch_sub(need_bytes, Ordering::AcqRel);
        let share = projected.saturating_add(need_bytes) as f64 / total_bytes.max(1) as f64;
        Err(share)
    }
}

impl Default for SpaceReservation<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SpaceReservation<'_> {
    fn drop(&mut self) {
        for (reserved, bytes) in self.held.drain(..) {
            reserved.0.fetch_sub(bytes, Ordering::AcqRel);
        }
    }
}

/// One OSD's use now, read from its store: its level, used bytes, data region bytes and
/// allocation unit. Updates the OSD's level hint.
pub(crate) fn read_space(osd: &Osd, ratios: &FullRatios) -> (FullLevel, u64, u64, u64) {
    let (total_bytes, free_bytes, unit_bytes) = osd.store().space_bytes();
    let used_bytes = total_bytes.saturating_sub(free_bytes);
    let refused_bytes = osd.space.refused_bytes.load(Ordering::Acquire);
    let level = ratios.level_after_refusal(used_bytes, total_bytes, refused_bytes);
    if refused_bytes > 0 && level < FullLevel::Full {
        osd.space.refused_bytes.store(0, Ordering::Release);
    }
    osd.space.set_level(level);
    (level, used_bytes, total_bytes, unit_bytes)
}

impl Inner {
    /// The three ratios of the config.
    pub(crate) fn full_ratios(&self) -> FullRatios {
        FullRatios {
            nearfull: self.config().nearfull_ratio,
            backfillfull: self.config().backfillfull_ratio,
            full: self.config().full_ratio,
        }
    }

    /// Admits a write that adds `data_bytes` (in `steps` writes) or a new object to `pool`
    /// on the `acting` OSDs: refused with `NoSpace` past a quota of the pool
    /// ([`Inner::check_pool_quota`]), when the pool is full (an in OSD its
    /// rule can place on is at the full ratio, read again from its store before refusing),
    /// or when the space it needs would take an acting OSD past the full ratio. The
    /// returned reservation holds that space until dropped (after the write was applied).
    pub(crate) fn admit_growth(
        &self,
        pool: &PoolInfo,
        acting: &[i32],
        data_bytes: u64,
        steps: u64,
    ) -> rados::Result<SpaceReservation<'_>> {
        self.check_pool_quota(pool, data_bytes)?;
        let ratios = self.full_ratios();
        let map = self.map();
        for osd in self.osds.values() {
            let placeable = map.is_in(osd.id)
                && pool
                    .device_class
                    .as_deref()
                    .is_none_or(|class| osd.class == class);
            if !placeable || osd.space.level() < FullLevel::Full {
                continue;
            }
            let (level, used_bytes, total_bytes, _) = read_space(osd, &ratios);
            if level == FullLevel::Full {
                return Err(pool_full_error(
                    &pool.name,
                    osd.id,
                    used_bytes as f64 / total_bytes.max(1) as f64,
                    ratios.full,
                ));
            }
        }
        self.reserve_space(acting, data_bytes, steps, ratios.full, true)
    }

    /// Reserves on each of `osds` the space `data_bytes` written in `steps` writes needs,
    /// unless that would take one past `ratio`: then `NoSpace` naming it (and, for a
    /// `client` write, the OSD counts as full until that write would fit).
    pub(crate) fn reserve_space(
        &self,
        osds: &[i32],
        data_bytes: u64,
        steps: u64,
        ratio: f64,
        client: bool,
    ) -> rados::Result<SpaceReservation<'_>> {
        let ratios = self.full_ratios();
        let mut reservation = SpaceReservation::new();
        for &id in osds {
            let Some(osd) = self.osds.get(&id) else {
                continue;
            };
            let (_, used_bytes, total_bytes, unit_bytes) = read_space(osd, &ratios);
            let need_bytes = allocation_bytes(data_bytes, steps, unit_bytes);
            if need_bytes == 0 {
                continue;
            }
            reservation
                .reserve(
                    &osd.space.reserved,
                    need_bytes,
                    used_bytes,
                    total_bytes,
                    ratio,
                )
                .map_err(|share| {
                    if client {
                        osd.space.refused_bytes.store(need_bytes, Ordering::Release);
                        osd.space.set_level(FullLevel::Full);
                    }
                    RadosError::NoSpace(format!(
                        "osd.{id} would be {:.1}% used with this write's {need_bytes} bytes \
                         (and those in flight), past its limit {ratio} (full_ratio {}); \
                         remove data or add capacity",
                        100.0 * share,
                        ratios.full
                    ))
                })?;
        }
        Ok(reservation)
    }

    /// Every OSD's level and every pool's, read from the stores now.
    pub(crate) fn full_state(&self) -> FullState {
        let ratios = self.full_ratios();
        let map = self.map();
        let osds: Vec<OsdSpace> = self
            .osds
            .values()
            .map(|osd| {
                let (level, used_bytes, total_bytes, _) = read_space(osd, &ratios);
                OsdSpace {
                    level,
                    id: osd.id,
                    class: osd.class.clone(),
                    is_in: map.is_in(osd.id),
                    total_bytes,
                    used_bytes,
                }
            })
            .collect();
        let pools: Vec<PoolPlacement> = {
            let state = self.lock_state();
            state
                .pools
                .values()
                .map(|pool| PoolPlacement {
                    id: pool.id,
                    name: pool.name.clone(),
                    class: state
                        .rules
                        .iter()
                        .find(|rule| rule.name == pool.rule)
                        .and_then(|rule| rule.class.clone()),
                })
                .collect()
        };
        assess(ratios, &osds, &pools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATIOS: FullRatios = FullRatios {
        nearfull: 0.85,
        backfillfull: 0.90,
        full: 0.95,
    };

    fn osd(id: i32, class: &str, used_percent: u64) -> OsdSpace {
        OsdSpace {
            id,
            class: class.into(),
            is_in: true,
            total_bytes: 100,
            used_bytes: used_percent,
            level: RATIOS.level(used_percent, 100),
        }
    }

    #[test]
    fn levels_follow_the_three_ratios() {
        assert_eq!(RATIOS.level(84, 100), FullLevel::Ok);
        assert_eq!(RATIOS.level(85, 100), FullLevel::Nearfull);
        assert_eq!(RATIOS.level(90, 100), FullLevel::Backfillfull);
        assert_eq!(RATIOS.level(95, 100), FullLevel::Full);
        assert_eq!(RATIOS.level(100, 100), FullLevel::Full);
        assert_eq!(RATIOS.level(0, 0), FullLevel::Ok);
        // An OSD that refused a 3% write at 93% is full until that write would fit.
        assert_eq!(RATIOS.level_after_refusal(93, 100, 3), FullLevel::Full);
        assert_eq!(
            RATIOS.level_after_refusal(92, 100, 3),
            FullLevel::Backfillfull
        );
        assert_eq!(
            RATIOS.level_after_refusal(93, 100, 0),
            FullLevel::Backfillfull
        );
    }

    /// A pool is as full as the fullest in OSD of its class; out OSDs and other classes do
    /// not count.
    #[test]
    fn a_pool_is_full_when_an_osd_its_rule_reaches_is_full() {
        let mut out = osd(3, "hdd", 99);
        out.is_in = false;
        let osds = [osd(0, "ssd", 96), osd(1, "hdd", 86), osd(2, "hdd", 91), out];
        let pools = [
            PoolPlacement {
                id: 1,
                name: "fast".into(),
                class: Some("ssd".into()),
            },
            PoolPlacement {
                id: 2,
                name: "slow".into(),
                class: Some("hdd".into()),
            },
            PoolPlacement {
                id: 3,
                name: "any".into(),
                class: None,
            },
            PoolPlacement {
                id: 4,
                name: "none".into(),
                class: Some("nvme".into()),
            },
        ];
        let state = assess(RATIOS, &osds, &pools);
        assert_eq!(state.pools[&1].level, FullLevel::Full);
        assert_eq!(state.pools[&1].worst_osd, Some(0));
        assert_eq!(state.pools[&2].level, FullLevel::Backfillfull);
        assert_eq!(state.pools[&2].worst_osd, Some(2));
        assert_eq!(state.pools[&3].level, FullLevel::Full);
        assert_eq!(state.pools[&4].level, FullLevel::Ok);
        assert_eq!(state.pools[&4].worst_osd, None);
        // The out OSD is still reported full itself.
        assert_eq!(state.osds[&3].level, FullLevel::Full);
        assert_eq!(state.osds_at(FullLevel::Full).len(), 2);
        assert_eq!(state.worst(), FullLevel::Full);
    }

    #[test]
    fn allocations_round_up_and_allow_for_misalignment() {
        assert_eq!(allocation_bytes(0, 0, 4096), 0);
        assert_eq!(allocation_bytes(1, 1, 4096), 8192);
        assert_eq!(allocation_bytes(4096, 1, 4096), 8192);
        assert_eq!(allocation_bytes(4097, 2, 4096), 16384);
    }

    /// Reservations add up until the ratio, are refused past it, and go when dropped.
    #[test]
    fn reservations_never_pass_the_ratio() {
        let reserved = Reserved::default();
        let mut first = SpaceReservation::new();
        assert!(first.reserve(&reserved, 40, 50, 100, 0.95).is_ok());
        let mut second = SpaceReservation::new();
        let refused = second.reserve(&reserved, 10, 50, 100, 0.95);
        assert_eq!(refused, Err(1.0));
        assert_eq!(reserved.bytes(), 40);
        assert!(second.reserve(&reserved, 5, 50, 100, 0.95).is_ok());
        assert_eq!(reserved.bytes(), 45);
        drop(first);
        drop(second);
        assert_eq!(reserved.bytes(), 0);
    }
}
