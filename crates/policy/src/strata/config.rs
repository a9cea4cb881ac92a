//! `strata`'s parameters ([`StrataConfig`]: every knob, its default and what it does) and the
//! sketch period derived from them.

/// Parameters of our policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrataConfig {
    /// Capacity in objects (DRAM buffer + flash main).
    pub capacity: usize,
    /// Initial buffer share of the capacity (fixed when `adapt` is off). Default 0.1.
    pub small: f64,
    /// Initial promotion threshold: hits in the buffer needed to be promoted. Default 2.
    pub threshold: u8,
    /// Initial frequency gate (see [`Candidate::Shape`](super::Candidate::Shape); fixed when
    /// `adapt` is off). Default false.
    pub gate: bool,
    /// Also try the shapes with the frequency gate on. Default true.
    pub gate_shapes: bool,
    /// Ghost entries as a share of the capacity. Default 0.9.
    pub ghost: f64,
    /// Follow the best shadow candidate online. Default true.
    pub adapt: bool,
    /// Also shadow the other policies ([`Candidate::Follow`](super::Candidate::Follow)), not
    /// only our shapes. Default false.
    pub follow: bool,
    /// Also follow the frequency-style others (W-TinyLFU, 2Q), not only the recency-style ones
    /// (LRU, ARC, FIFO, SIEVE). Default false.
    pub follow_frequency: bool,
    /// Also try shapes that write every object leaving the buffer to flash (threshold 0, as
    /// CLOCK does), within the write budget. Default false.
    pub admit_unhit: bool,
    /// Buffer share while following another policy. Default 0.25.
    pub follow_small: f64,
    /// A challenger must have fewer decayed misses than the leader by this share to take over
    /// (hysteresis: a switch costs misses while the contents move). Default 0.
    pub switch_margin: f64,
    /// Requests per scoring epoch, as a multiple of the capacity (at least `epoch_min`).
    /// Default 2.
    pub epoch: f64,
    /// Shadow caches hold at most this many objects: above it they see only a hash-sampled
    /// share of the keys (capacity x share = this), as SHARDS does, so their cost stops growing
    /// with the cache. 0 = never sample. Not applied while `follow` is on. Default 16,384.
    pub sample_objects: usize,
    /// Fewest requests per scoring epoch. Default 1,000.
    pub epoch_min: u64,
    /// Add to each candidate's score the misses the live cache had beyond that candidate's
    /// shadow while it led (learned, decayed). Default false.
    pub learn: bool,
    /// Misses charged per object of the capacity that changes side (buffer to main or back)
    /// when the cache switches shape, against the challenger's per-epoch advantage. Default 0.
    pub switch_cost: f64,
    /// Epochs after a switch during which the cache does not switch again. Default 0.
    pub dwell: u32,
    /// Forget the scores when the shadows' mean miss ratio jumps by more than this many mean
    /// deviations (a phase change; 0 = never). Default 0.
    pub reset: f64,
    /// Epochs running the same challenger must beat the leader before the cache switches to
    /// it. Default 1.
    pub persist: u32,
    /// Decay of older epochs' misses per epoch. Default 0.5.
    pub decay: f64,
    /// Flash writes allowed, as a share of a shadow admit-all LRU's misses. Default 0.33.
    pub budget: f64,
    /// Adapt the buffer's share request by request as ARC adapts its recency target: a hit in
    /// the buffer's ghost grows the buffer, a hit in main's ghost (ids of objects evicted from
    /// main) shrinks it. The selector then picks only the threshold and the gate. Default false.
    pub split: bool,
    /// Give the shadows of our shapes the live cache's write budget (their writes stay below
    /// `budget` x the budget LRU's misses, scaled by the sampling rate), so that a shape that
    /// writes more than the budget allows is scored as the live cache would run it. Default
    /// false.
    pub shadow_budget: bool,
    /// Also try shapes whose split adapts (`split` on for them only). Default false.
    pub split_shapes: bool,
    /// Largest buffer share `split` may reach. Default 0.4.
    pub split_max: f64,
    /// Smallest buffer share `split` may reach. Default 0.01.
    pub split_min: f64,
    /// Write an object found in main's ghost straight back to main (within the budget), as ARC
    /// puts a hit in B2 into T2, instead of into the buffer. Default true.
    pub main_ghost_admit: bool,
    /// Selector trials (see the `trials` module), a bit set over `trials::TRIALS` (the default
    /// selector, bit 0, always runs when any runs): each steers a replica of the live queues at
    /// the shadows' capacity, and the live cache takes the choices of the one whose replica
    /// missed least. 0 = none. Default 2: the default selector and one that never switches.
    pub trials: u32,
    /// A trial must have this share fewer replica misses than the followed one to take over.
    /// Default 0.03.
    pub trials_margin: f64,
    /// On a switch, move the live contents toward the new leader's shadow where it is not
    /// sampled (see `Strata::adopt_contents`). Default false.
    pub adopt: bool,
    /// Also a trial: the shape whose shadow has missed least so far (no replica: the shadows
    /// are fixed shapes). Default false.
    pub fixed_trial: bool,
    /// Decay per tick (half an epoch) of the trials' replica misses. Default 1 (summed since
    /// the start).
    pub trials_decay: f64,
    /// *Tiny caches*: an adaptive cache of at most this many objects starts with a buffer of
    /// `tiny_small` of the capacity and threshold 2 (overriding `small`, `threshold` and
    /// `gate`), and its shadows also try `tiny_candidate` buffers (threshold 1 and 2). 0 =
    /// never (the previous policy, cell for cell). Default 64.
    pub tiny: usize,
    /// Initial buffer share of a tiny cache (see `tiny`). Default 0.7.
    pub tiny_small: f64,
    /// Whether tiny caches also try the large-buffer shapes (see `tiny`). Default true.
    pub tiny_shapes: bool,
    /// Buffer share of the tiny caches' extra shapes (see `tiny`). Default 0.8.
    pub tiny_candidate: f64,
    /// LRU-ordered buffer: a hit in the buffer moves the object to the buffer's head (fixed;
    /// what the LRU trial's replica runs). Default false.
    pub lru_buffer: bool,
    /// *LRU trials* (a bit set; needs `trials`): 1 = a trial of the default selector whose
    /// replica has an LRU-ordered buffer, 2 = a never-switching one with such a buffer. The
    /// live cache orders its buffer as the trial it follows. 0 = none (the previous policy,
    /// cell for cell). Default 3 (both; 1 until session `policy-s9`, whose paired test,
    /// `trials_z`, lets the live cache reach the never-switching one).
    pub lru_trial: u32,
    /// Lead (share of the followed trial's replica misses) a trial needs to take over when
    /// the two order their buffers differently. Default 0.005.
    pub lru_trial_margin: f64,
    /// The same where the shadows and replicas are sampled (above `sample_objects`), whose
    /// misses are noisier. Default 0.01.
    pub lru_trial_margin_sampled: f64,
    /// The LRU order applies only to buffers below this share of the capacity. Default 1.
    pub lru_below: f64,
    /// The LRU trials' selector scores a second set of shadows, the same shapes with
    /// LRU-ordered buffers, instead of the ordinary ones. Default true.
    pub lru_shadows: bool,
    /// Highest frequency main's CLOCK remembers: an object hit that often in main survives
    /// that many passes of main's tail unrequested. Default 3 (S3-FIFO's 2-bit counter).
    pub main_frequency_cap: u8,
    /// Main's frequency cap in the LRU shadows and the LRU trials' replicas (0 =
    /// `main_frequency_cap`); the live cache takes the cap of the trial it follows. Default 8
    /// (`lru_frequency_cap=0` is the previous policy, cell for cell).
    pub lru_frequency_cap: u8,
    /// Whether `lru_frequency_cap` applies in tiny caches (`tiny`) too. Default false.
    pub lru_frequency_cap_tiny: bool,
    /// The never-switching trial's cap (0 = `main_frequency_cap`). Default 0.
    pub never_frequency_cap: u8,
    /// Initial promotion threshold of the LRU trials' replicas and selectors, where the
    /// shadows are not sampled (0 = `threshold`, the previous policy cell for cell). Default 1:
    /// the LRU trial starts from 10% / threshold 1 while the others start from 10% /
    /// threshold 2, so the live cache can follow a main built with threshold 1 from the first
    /// request when that has paid.
    pub lru_trial_threshold: u8,
    /// Whether `lru_trial_threshold` applies where the shadows and replicas are sampled too.
    /// Default false.
    pub lru_trial_threshold_sampled: bool,
    /// *Scan trials* (a bit set; needs `trials`): 1 = a never-switching trial whose replica
    /// holds the whole capacity in an LRU-ordered DRAM buffer (admit-all LRU, nothing written
    /// to flash), 2 = the same FIFO-ordered (FIFO). Where almost nothing is requested twice
    /// (the SYSTOR samples), plain LRU or FIFO beats every shape with a flash main: they hit
    /// the first re-reference of an object anywhere in the cache. 0 = none. Default 0.
    pub scan_trial: u32,
    /// The live cache starts by following a scan trial (1: the LRU one if it runs, 2: the FIFO
    /// one if it runs; 0: none), and leaves it for a lead of `scan_trial_margin`. Before the
    /// cache first fills no shape evicts, so the start costs nothing until then. Default 0.
    pub scan_start: u8,
    /// Lead (share of the followed trial's replica misses) needed to change between a scan
    /// trial and another trial. Default 0.005.
    pub scan_trial_margin: f64,
    /// Lead a trial needs to take over from a followed scan trial (below 0: the same as
    /// `scan_trial_margin`). Default -1.
    pub scan_leave_margin: f64,
    /// On leaving a scan trial where the replicas see every key, the live cache takes the new
    /// trial's replica's order and placement for the objects it holds (see
    /// `Strata::adopt_replica`). Default false.
    pub scan_adopt: bool,
    /// While following a scan trial, leave it on any request on which another trial's
    /// replica leads (see `Strata::watch_scan`), not only at a tick's end. Default false.
    pub scan_watch: bool,
    /// Scan trials only in caches of at most this many objects (0 = any size). Default 0.
    pub scan_below: usize,
    /// The whole capacity is a DRAM buffer and nothing is written to flash (fixed; what the
    /// scan trials' replicas run). Default false.
    pub dram_only: bool,
    /// *Paired test between trials* (0 = off: the previous policy, cell for cell): besides the
    /// relative margins, the live cache also changes to the trial whose replica has missed
    /// least when its lead over the followed trial's replica, in misses summed over ticks,
    /// exceeds this many x the square root of the requests on which the two replicas
    /// differed (one hit, the other missed): a sign test on their paired outcomes, so the
    /// lead needed grows with the noise between those two replicas, not with the trace's
    /// misses. Not between scan trials. Meant for `trials_decay` 1. Default 1.5.
    pub trials_z: f64,
    /// Fewest requests on which the two replicas differed before `trials_z` may change trial
    /// (the normal approximation of a sign test is poor below it). Default 16.
    pub trials_z_min: u64,
    /// On any change of trial where the replicas see every key, the live cache takes the new
    /// trial's replica's placement for the objects it holds (see `Strata::adopt_replica`), so
    /// that it does not pay the old shape's contents again. Default false.
    pub trials_adopt: bool,
    /// *Convergence on the followed replica* (where the replicas see every key): a live miss
    /// for an object the followed trial's replica holds in main is written straight into main
    /// (within the budget), as a ghost hit is, so that after a change of trial the live cache
    /// takes the new replica's main as its objects are requested instead of waiting for its own
    /// promotions. While the live cache runs as its replica (no change of trial, the budget not
    /// binding) it never happens. Default false.
    pub trials_converge: bool,
    /// The live cache takes the shape its followed trial's replica runs, not only the
    /// candidate that trial's selector names: they differ while a never-switching trial keeps
    /// an initial shape that is not a candidate (the tiny caches' 70% buffer, for which the
    /// named candidate is the first, 1% / threshold 1). Default true (a fix: without it the
    /// live cache ran a shape no replica ran; MSR at 2%, 38 objects: +.0024 -> +.0004 behind
    /// LRU, no scored cell moves).
    pub trials_shape: bool,
    /// Whether the paired test (`trials_z`) also runs where the replicas are sampled (above
    /// `sample_objects`). Default true.
    pub trials_z_sampled: bool,
}

impl StrataConfig {
    /// What shadows and trial replicas run: `live`'s queues at `capacity` in one fixed shape
    /// (`small`, `threshold`, `gate`), with `live`'s ghost share, no adaptation, no trials
    /// and no write budget.
    pub(crate) fn fixed_shape(
        live: &StrataConfig,
        capacity: usize,
        small: f64,
        threshold: u8,
        gate: bool,
    ) -> Self {
        let mut config = StrataConfig::new(capacity);
        config.small = small;
        config.threshold = threshold;
        config.gate = gate;
        config.ghost = live.ghost;
        config.adapt = false;
        config.trials = 0;
        config.budget = f64::INFINITY;
        config.lru_below = live.lru_below;
        config.main_frequency_cap = live.main_frequency_cap;
        config
    }

    /// Defaults for a cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        StrataConfig {
            capacity,
            small: 0.1,
            threshold: 2,
            gate: false,
            gate_shapes: true,
            ghost: 0.9,
            adapt: true,
            follow: false,
            follow_frequency: false,
            admit_unhit: false,
            follow_small: 0.25,
            switch_margin: 0.0,
            epoch: 2.0,
            epoch_min: 1000,
            sample_objects: 16_384,
            learn: false,
            persist: 1,
            reset: 0.0,
            dwell: 0,
            switch_cost: 0.0,
            decay: 0.5,
            budget: 0.33,
            split: false,
            split_shapes: false,
            shadow_budget: false,
            split_max: 0.4,
            split_min: 0.01,
            main_ghost_admit: true,
            trials: 2,
            trials_margin: 0.03,
            trials_decay: 1.0,
            fixed_trial: false,
            adopt: false,
            tiny: 64,
            tiny_small: 0.7,
            tiny_shapes: true,
            tiny_candidate: 0.8,
            lru_buffer: false,
            lru_trial: 3,
            lru_trial_margin: 0.005,
            lru_trial_margin_sampled: 0.01,
            lru_below: 1.0,
            lru_shadows: true,
            main_frequency_cap: 3,
            lru_frequency_cap: 8,
            lru_frequency_cap_tiny: false,
            never_frequency_cap: 0,
            lru_trial_threshold: 1,
            lru_trial_threshold_sampled: false,
            scan_trial: 0,
            scan_start: 0,
            scan_trial_margin: 0.005,
            scan_below: 0,
            scan_watch: false,
            scan_adopt: false,
            scan_leave_margin: -1.0,
            dram_only: false,
            trials_z: 1.5,
            trials_z_min: 16,
            trials_adopt: false,
            trials_converge: false,
            trials_shape: true,
            trials_z_sampled: true,
        }
    }
}

/// Requests between halvings of the gate's sketch: 10 x the capacity, as W-TinyLFU's reset
/// period (Caffeine samples 10 x the maximum size), but never fewer than the selector's
/// shortest epoch (`epoch_min`): in a cache of a few objects 10 x capacity is a few dozen
/// requests, a memory too short to tell a frequent object from a lucky one, and filters sized
/// for it are all collisions.
pub(super) fn sketch_period(config: &StrataConfig) -> u64 {
    (10 * config.capacity as u64).max(config.epoch_min).max(1)
}
