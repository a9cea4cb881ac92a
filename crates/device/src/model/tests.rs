//! Calibration and behaviour of the pure timing models, in virtual time: the figures do not
//! depend on the machine, so they are asserted.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::OpKind;

const DISK_BYTES: u64 = 1 << 40; // 1 TiB: a whole disk

fn run(
    profile: &EmulationProfile,
    size_bytes: u64,
    workload: Workload,
    queue_depth: usize,
) -> ClosedLoopReport {
    let mut model = profile.build(size_bytes);
    run_closed_loop(model.as_mut(), size_bytes, workload, queue_depth, 10_000, 7)
}

fn iops(profile: &EmulationProfile, workload: Workload, queue_depth: usize) -> f64 {
    run(profile, DISK_BYTES, workload, queue_depth).iops()
}

fn preset(name: &str) -> EmulationProfile {
    EmulationProfile::preset(name).expect("known preset")
}

#[test]
fn hdd_10k_gives_about_350_random_4k_iops_under_load() {
    for workload in [Workload::random_read_4k(), Workload::random_write_4k()] {
        let at_32 = iops(&preset("hdd-10k"), workload, 32);
        assert!((300.0..=400.0).contains(&at_32), "QD 32: {at_32}");
        // QD 1 pays a mean seek and half a revolution: physics, not calibration.
        let at_1 = iops(&preset("hdd-10k"), workload, 1);
        assert!((120.0..=180.0).contains(&at_1), "QD 1: {at_1}");
    }
}

#[test]
fn hdd_7200_gives_about_180_random_4k_iops_under_load() {
    for workload in [Workload::random_read_4k(), Workload::random_write_4k()] {
        let at_32 = iops(&preset("hdd-7200"), workload, 32);
        assert!((150.0..=210.0).contains(&at_32), "QD 32: {at_32}");
        let at_1 = iops(&preset("hdd-7200"), workload, 1);
        assert!((65.0..=100.0).contains(&at_1), "QD 1: {at_1}");
    }
}

#[test]
fn hdd_calibration_holds_on_a_small_device() {
    // The device's range spans the full stroke, so a 1 GiB emulated disk behaves like a whole one.
    for size_bytes in [64 << 20, 1 << 30] {
        let small = run(
            &preset("hdd-10k"),
            size_bytes,
            Workload::random_read_4k(),
            32,
        )
        .iops();
        assert!((300.0..=400.0).contains(&small), "{small}");
        let slow = run(
            &preset("hdd-7200"),
            size_bytes,
            Workload::random_read_4k(),
            32,
        )
        .iops();
        assert!((150.0..=210.0).contains(&slow), "{slow}");
    }
}

#[test]
fn hdd_iops_rise_with_queue_depth_only_when_reordering() {
    let sptf = [1, 4, 16, 32].map(|qd| iops(&preset("hdd-10k"), Workload::random_read_4k(), qd));
    assert!(sptf.windows(2).all(|pair| pair[1] > pair[0]), "{sptf:?}");
    let fifo = EmulationProfile::Hdd(HddProfile {
        scheduler: Scheduler::Fifo,
        ..HddProfile::hdd_10k()
    });
    let (at_1, at_32) = (
        iops(&fifo, Workload::random_read_4k(), 1),
        iops(&fifo, Workload::random_read_4k(), 32),
    );
    assert!((at_32 / at_1 - 1.0).abs() < 0.05, "{at_1} vs {at_32}");
    // An elevator shortens seeks but not rotation: between FIFO and NCQ.
    let elevator = EmulationProfile::Hdd(HddProfile {
        scheduler: Scheduler::Elevator { window: 32 },
        ..HddProfile::hdd_10k()
    });
    let lifted = iops(&elevator, Workload::random_read_4k(), 32);
    assert!(lifted > at_32 * 1.2 && lifted < sptf[3], "{lifted}");
}

#[test]
fn hdd_sequential_streams_at_the_media_rate() {
    let workload = Workload {
        length_bytes: 512 * 1024,
        read_fraction: 1.0,
        random: false,
    };
    let report = run(&preset("hdd-10k"), DISK_BYTES, workload, 1);
    let mb_per_s = report.iops() * 512.0 * 1024.0 / 1e6;
    // 200 MB/s media rate less the 50 µs command overhead per 2.6 ms transfer.
    assert!((185.0..=200.0).contains(&mb_per_s), "{mb_per_s}");
}

#[test]
fn hdd_reordering_does_not_starve_requests() {
    let report = run(
        &preset("hdd-7200"),
        DISK_BYTES,
        Workload::random_read_4k(),
        32,
    );
    // The oldest request is forced after STARVATION_LIMIT pass-overs of ~5 ms each.
    let bound_ns = (u64::from(hdd::STARVATION_LIMIT) + 32) * 20_000_000;
    assert!(
        report.latency_ns.max() < bound_ns,
        "{}",
        report.latency_ns.max()
    );
}

#[test]
fn seek_curve_fits_the_three_datasheet_figures() {
    let profile = HddProfile::hdd_7200();
    let tracks = 1_000_000;
    let curve = hdd::SeekCurve::fit(&profile, tracks);
    let close =
        |got: u64, want_us: u32| (got as f64 / (f64::from(want_us) * 1e3) - 1.0).abs() < 0.01;
    assert!(close(curve.seek_ns(1), profile.seek_track_to_track_us));
    assert!(close(curve.seek_ns(tracks), profile.seek_full_stroke_us));
    assert_eq!(curve.seek_ns(0), 0);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let samples = 200_000;
    let mean = (0..samples)
        .map(|_| curve.seek_ns(rng.gen_range(0..tracks).abs_diff(rng.gen_range(0..tracks))) as f64)
        .sum::<f64>()
        / samples as f64;
    assert!(
        (mean / (f64::from(profile.seek_average_us) * 1e3) - 1.0).abs() < 0.02,
        "{mean}"
    );
    let mut previous = 0;
    for distance in (1..tracks).step_by(997) {
        let seek = curve.seek_ns(distance);
        assert!(seek >= previous, "not monotonic at {distance}");
        previous = seek;
    }
}

#[test]
fn hdd_sequential_request_skips_seek_and_rotation() {
    let profile = HddProfile::hdd_10k();
    let mut model = HddModel::new(profile.clone(), DISK_BYTES);
    let mut done = Vec::new();
    let request = |id, offset_bytes| ModelRequest {
        id,
        op: OpKind::Read,
        offset_bytes,
        length_bytes: 4096,
    };
    model.submit(request(0, 1 << 39), 0);
    let first = model.next_completion_ns().expect("in service");
    model.advance_to(first, &mut done);
    model.submit(request(1, (1 << 39) + 4096), first);
    let second = model.next_completion_ns().expect("in service");
    let expected = u64::from(profile.command_overhead_us) * 1000 + model.transfer_ns(4096);
    assert_eq!(second - first, expected);
    model.advance_to(second, &mut done);
    assert_eq!(done.iter().map(|c| c.id).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(model.pending(), 0);
}

#[test]
fn ssd_qd1_is_latency_bound_and_qd32_hits_the_ceilings() {
    let sata = SsdProfile::ssd_sata();
    let report = run(
        &preset("ssd-sata"),
        DISK_BYTES,
        Workload::random_read_4k(),
        1,
    );
    let expected_ns =
        u64::from(sata.read_latency_us) * 1000 + 4096 * 1000 / u64::from(sata.read_mb_per_s);
    assert_eq!(report.latency_ns.mean() as u64, expected_ns);
    let at_32 = iops(&preset("ssd-sata"), Workload::random_read_4k(), 32);
    assert!(
        (at_32 / f64::from(sata.read_iops_max) - 1.0).abs() < 0.01,
        "{at_32}"
    );
    let nvme_writes = iops(&preset("nvme"), Workload::random_write_4k(), 32);
    assert!((nvme_writes / f64::from(SsdProfile::nvme().write_iops_max) - 1.0).abs() < 0.01);
    // Large sequential reads at depth reach the bandwidth ceiling.
    let large = Workload {
        length_bytes: 512 * 1024,
        read_fraction: 1.0,
        random: false,
    };
    let mb_per_s = iops(&preset("ssd-sata"), large, 32) * 512.0 * 1024.0 / 1e6;
    assert!(
        (mb_per_s / f64::from(sata.read_mb_per_s) - 1.0).abs() < 0.01,
        "{mb_per_s}"
    );
}

#[test]
fn nvme_parallelism_scales_until_the_channels_are_busy() {
    let at_1 = iops(&preset("nvme"), Workload::random_read_4k(), 1);
    let at_8 = iops(&preset("nvme"), Workload::random_read_4k(), 8);
    assert!((at_8 / at_1 - 8.0).abs() < 0.1, "{at_1} {at_8}");
}

#[test]
fn instant_profile_completes_on_arrival() {
    let mut model = EmulationProfile::instant().build(1 << 20);
    let request = ModelRequest {
        id: 5,
        op: OpKind::Write,
        offset_bytes: 0,
        length_bytes: 1 << 20,
    };
    model.submit(request, 1000);
    let mut done = Vec::new();
    model.advance_to(1000, &mut done);
    assert_eq!(
        done,
        vec![Completion {
            id: 5,
            finish_ns: 1000
        }]
    );
}

#[test]
fn models_are_deterministic() {
    for name in EmulationProfile::PRESETS {
        let a = run(&preset(name), DISK_BYTES, Workload::random_read_4k(), 16);
        let b = run(&preset(name), DISK_BYTES, Workload::random_read_4k(), 16);
        assert_eq!(a.elapsed_ns, b.elapsed_ns, "{name}");
        assert_eq!(a.latency_ns, b.latency_ns, "{name}");
    }
    assert!(EmulationProfile::preset("floppy").is_none());
}

#[test]
fn every_request_completes_once_in_finish_order_and_never_before_arrival() {
    for name in EmulationProfile::PRESETS {
        for seed in 0..40u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut model = preset(name).build(1 << 30);
            let mut arrivals = std::collections::HashMap::new();
            let mut done = Vec::new();
            let mut now = 0u64;
            let mut last_finish = 0u64;
            let mut completed = 0;
            let total = 300u64;
            for id in 0..total {
                now += rng.gen_range(0..2_000_000u64); // 0-2 ms apart: queues build and drain
                let before = done.len();
                model.advance_to(now, &mut done);
                assert!(done[before..].iter().all(|c| c.finish_ns <= now));
                let op = [OpKind::Read, OpKind::Write, OpKind::Flush, OpKind::Discard]
                    [rng.gen_range(0..4usize)];
                let length_bytes = 4096 * rng.gen_range(1..=32u64);
                let request = ModelRequest {
                    id,
                    op,
                    offset_bytes: rng.gen_range(0..(1u64 << 30) / length_bytes) * length_bytes,
                    length_bytes,
                };
                arrivals.insert(id, now);
                model.submit(request, now);
                assert_eq!(model.pending() + done.len(), id as usize + 1);
            }
            while let Some(next) = model.next_completion_ns() {
                assert!(next >= now, "{name}: a completion in the past");
                now = next;
                model.advance_to(now, &mut done);
            }
            for completion in &done {
                let arrival = arrivals.remove(&completion.id).expect("completed once");
                assert!(completion.finish_ns >= arrival, "{name} seed {seed}");
                assert!(
                    completion.finish_ns >= last_finish,
                    "{name} seed {seed}: order"
                );
                last_finish = completion.finish_ns;
                completed += 1;
            }
            assert_eq!(completed, total, "{name} seed {seed}");
            assert!(arrivals.is_empty());
            assert_eq!(model.pending(), 0);
        }
    }
}

#[test]
#[should_panic(expected = "time went back")]
fn models_refuse_time_going_back() {
    let mut model = preset("nvme").build(1 << 20);
    let mut done = Vec::new();
    model.advance_to(1_000, &mut done);
    model.advance_to(999, &mut done);
}
