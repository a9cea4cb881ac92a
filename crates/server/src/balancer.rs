//! The embedded cluster's continuous balancer, as Ceph's mgr balancer offers it: `on|off`, a
//! mode, `eval`, named plans (`optimize`, `show`, `execute`, `rm`) and, while on, a period
//! ([`BalancerService`] is a [`Worker`]) that plans with the `balancer` crate's flow and
//! applies the changes in one map change (one epoch; the moved PGs keep their old holders as
//! `pg_temp` until recovery has copied them, so no PG is unavailable while upmaps apply).
//!
//! The decision is the pure [`balancer::period::decide`]: nothing while any PG is not
//! `active+clean` (recovery behind), else at most `target_max_misplaced_ratio` of all shards
//! per period. The settings (on/off, mode, period, ratio) persist in `balancer.json` in the
//! data directory; plans live in memory, as the mgr's do, and a plan made on an older map
//! epoch is refused by `execute` (the cluster moved on; optimize again).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use balancer::bytes_exact::{self, BytesConfig};
use balancer::load::{self, LoadConfig, LoadPlan, OsdCapability, PgLoad};
use balancer::period::{self, PeriodConfig, PeriodDecision, Score};
use balancer::read::{self, ReadPlan, ReadScore};
use balancer::{Plan, Problem, Scope, UpmapChange};
use cluster::Cluster;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::backend::embedded::WeakCluster;
use crate::error::{Result, ServerError};

/// The settings file in the data directory.
pub const SETTINGS_FILE: &str = "balancer.json";

/// What the balancer balances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BalancerMode {
    /// PG shard counts per OSD, per pool and in total, with pg_upmap_items (the min-cost flow).
    #[default]
    Upmap,
    /// Bytes per OSD against each OSD's weight share, exact on the PGs' stored bytes
    /// (`balancer::bytes_exact`), with pg_upmap_items.
    Bytes,
    /// Primaries per OSD by weight, no data moved (`balancer::read`): a replicated PG's
    /// members reordered with a full `pg_upmap`, since 16.2 has no `pg_upmap_primary`.
    Read,
    /// Seed 000's I/O-load balancing (`balancer::load`): per-PG reads and writes of the last
    /// statistics period against each OSD's measured capability; primaries first, then the
    /// hottest PGs' shards.
    Load,
}

impl BalancerMode {
    /// Parses a mode's name.
    pub fn parse(word: &str) -> Result<Self> {
        match word {
            "upmap" => Ok(Self::Upmap),
            "bytes" => Ok(Self::Bytes),
            "read" => Ok(Self::Read),
            "load" => Ok(Self::Load),
            other => Err(ServerError::BadRequest(format!(
                "unknown balancer mode {other:?} (upmap, bytes, read, load)"
            ))),
        }
    }
}

/// The persisted settings (`balancer.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BalancerSettings {
    /// Whether a period runs. Default false (as Ceph before Nautilus; `strata balancer on`).
    pub active: bool,
    /// The mode. Default upmap.
    pub mode: BalancerMode,
    /// Seconds between periods (Ceph's `sleep_interval`). Default 60.
    pub period_s: u64,
    /// At most this share of all shards changes OSD per period (Ceph's
    /// `target_max_misplaced_ratio`). Default 0.05.
    pub target_max_misplaced_ratio: f64,
    /// The load mode's knobs.
    pub load: LoadSettings,
}

/// The load mode's knobs (`balancer config read_threshold=...`), as [`LoadConfig`] names them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadSettings {
    pub read_threshold: f64,
    pub write_threshold: f64,
    pub hysteresis: f64,
    pub weight_performance: f64,
    pub weight_load: f64,
    pub weight_capacity: f64,
}

impl Default for LoadSettings {
    fn default() -> Self {
        let config = LoadConfig::default();
        Self {
            read_threshold: config.read_threshold,
            write_threshold: config.write_threshold,
            hysteresis: config.hysteresis,
            weight_performance: config.weight_performance,
            weight_load: config.weight_load,
            weight_capacity: config.weight_capacity,
        }
    }
}

/// The names of [`LoadSettings`]' knobs.
pub const LOAD_KNOBS: [&str; 6] = [
    "read_threshold",
    "write_threshold",
    "hysteresis",
    "weight_performance",
    "weight_load",
    "weight_capacity",
];

impl LoadSettings {
    fn set(&mut self, knob: &str, value: f64) -> Result<()> {
        let slot = match knob {
            "read_threshold" => &mut self.read_threshold,
            "write_threshold" => &mut self.write_threshold,
            "hysteresis" => &mut self.hysteresis,
            "weight_performance" => &mut self.weight_performance,
            "weight_load" => &mut self.weight_load,
            "weight_capacity" => &mut self.weight_capacity,
            other => return Err(ServerError::BadRequest(format!("unknown knob {other:?}"))),
        };
        *slot = value;
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        let fractions = [
            self.read_threshold,
            self.write_threshold,
            self.hysteresis,
            self.weight_performance,
            self.weight_load,
            self.weight_capacity,
        ];
        let sum = self.weight_performance + self.weight_load + self.weight_capacity;
        if fractions.iter().any(|f| !(0.0..=1.0).contains(f)) || (sum - 1.0).abs() > 1e-6 {
            return Err(ServerError::BadRequest(format!(
                "load knobs must lie in [0, 1] and the three weights sum to 1 (they sum to {sum})"
            )));
        }
        Ok(())
    }
}

impl Default for BalancerSettings {
    fn default() -> Self {
        Self {
            active: false,
            mode: BalancerMode::Upmap,
            period_s: 60,
            target_max_misplaced_ratio: period::TARGET_MAX_MISPLACED_RATIO_DEFAULT,
            load: LoadSettings::default(),
        }
    }
}

/// What a plan changes.
#[derive(Clone, Debug)]
enum Proposal {
    /// `pg_upmap_items` (modes upmap and bytes).
    Items(Plan),
    /// Primaries, through full `pg_upmap` reorderings (mode read).
    Primaries(ReadPlan),
    /// Both (mode load).
    Load(LoadPlan),
}

impl Proposal {
    fn is_empty(&self) -> bool {
        match self {
            Self::Items(plan) => plan.changes.is_empty(),
            Self::Primaries(plan) => plan.primaries.is_empty(),
            Self::Load(plan) => plan.primaries.is_empty() && plan.moves.changes.is_empty(),
        }
    }

    /// PGs changed, shards moved.
    fn size(&self) -> (usize, usize) {
        match self {
            Self::Items(plan) => (plan.changes.len(), plan.shards_changed),
            Self::Primaries(plan) => (plan.primaries.len(), 0),
            Self::Load(plan) => (
                plan.primaries.len() + plan.moves.changes.len(),
                plan.moves.shards_changed,
            ),
        }
    }

    /// Up sets after the proposal.
    fn up(&self, problem: &Problem) -> BTreeMap<balancer::PgId, Vec<i32>> {
        match self {
            Self::Items(plan) => plan.up.clone(),
            Self::Primaries(_) => problem.pgs.iter().map(|pg| (pg.id, pg.up())).collect(),
            Self::Load(plan) => plan.moves.up.clone(),
        }
    }

    fn commands(&self) -> Vec<String> {
        match self {
            Self::Items(plan) => plan.changes.iter().map(UpmapChange::command).collect(),
            Self::Primaries(plan) => pg_upmap_commands(&plan.pg_upmap),
            Self::Load(plan) => {
                let mut commands = pg_upmap_commands(&plan.pg_upmap);
                commands.extend(plan.moves.changes.iter().map(UpmapChange::command));
                commands
            }
        }
    }
}

fn pg_upmap_commands(pg_upmap: &BTreeMap<balancer::PgId, Vec<i32>>) -> Vec<String> {
    pg_upmap
        .iter()
        .map(|(pg, osds)| {
            let osds: Vec<String> = osds.iter().map(i32::to_string).collect();
            format!("ceph osd pg-upmap {pg} {}", osds.join(" "))
        })
        .collect()
}

/// What one period (or `optimize`) decides.
enum Decision {
    Wait(usize),
    Balanced,
    /// Boxed: a plan is large, the other answers small.
    Apply(Box<Proposal>, usize),
}

/// A plan kept for `show`, `eval` and `execute`.
#[derive(Clone, Debug)]
struct StoredPlan {
    epoch: u64,
    mode: BalancerMode,
    proposal: Proposal,
    problem: Problem,
}

/// What the last period did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LastPeriod {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// `waiting`, `balanced`, `applied` or `failed`.
    pub outcome: String,
    /// The detail (PGs not clean, changes and shards applied, the error).
    pub detail: String,
}

/// `strata balancer status`, also part of `/status`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BalancerStatus {
    /// The settings.
    #[serde(flatten)]
    pub settings: BalancerSettings,
    /// The last period, if one ran since the start.
    pub last_period: Option<LastPeriod>,
    /// Names of the plans kept.
    pub plans: Vec<String>,
    /// Shards the periods applied since the start.
    pub shards_moved: u64,
}

#[derive(Debug, Default)]
struct State {
    settings: BalancerSettings,
    plans: BTreeMap<String, StoredPlan>,
    last_period: Option<LastPeriod>,
    shards_moved: u64,
    /// Load mode: each OSD's capability last measured (object operations per busy second).
    measured_ops_per_s: BTreeMap<i32, f64>,
    /// Load mode: the PGs the last period changed (not moved again next period).
    cooldown: std::collections::BTreeSet<balancer::PgId>,
}

/// The balancer of one embedded cluster.
pub struct BalancerService {
    cluster: WeakCluster,
    path: PathBuf,
    state: Mutex<State>,
}

impl BalancerService {
    /// The balancer of `cluster`, with the settings its data directory keeps.
    pub fn open(cluster: &Arc<Cluster>) -> Result<Self> {
        let path = cluster.data_dir().join(SETTINGS_FILE);
        let settings = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                ServerError::Backend(format!("reading {}: {error}", path.display()))
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                BalancerSettings::default()
            }
            Err(error) => {
                return Err(ServerError::Backend(format!(
                    "reading {}: {error}",
                    path.display()
                )))
            }
        };
        Ok(Self {
            cluster: WeakCluster::new(cluster),
            path,
            state: Mutex::new(State {
                settings,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The status.
    pub fn status(&self) -> BalancerStatus {
        let state = self.lock();
        BalancerStatus {
            settings: state.settings.clone(),
            last_period: state.last_period.clone(),
            plans: state.plans.keys().cloned().collect(),
            shards_moved: state.shards_moved,
        }
    }

    /// Changes and persists the settings (written to a temporary file, then renamed).
    pub fn configure(
        &self,
        change: impl FnOnce(&mut BalancerSettings) -> Result<()>,
    ) -> Result<BalancerStatus> {
        {
            let mut state = self.lock();
            let mut settings = state.settings.clone();
            change(&mut settings)?;
            if !(settings.target_max_misplaced_ratio > 0.0
                && settings.target_max_misplaced_ratio <= 1.0)
            {
                return Err(ServerError::BadRequest(format!(
                    "target_max_misplaced_ratio {} is outside (0, 1]",
                    settings.target_max_misplaced_ratio
                )));
            }
            if settings.period_s == 0 {
                return Err(ServerError::BadRequest(
                    "period_s must be at least 1".into(),
                ));
            }
            let text = serde_json::to_vec_pretty(&settings)
                .map_err(|e| ServerError::Backend(format!("encoding balancer settings: {e}")))?;
            let temporary = self.path.with_extension("json.tmp");
            std::fs::write(&temporary, text)
                .and_then(|()| std::fs::rename(&temporary, &self.path))
                .map_err(|e| {
                    ServerError::Backend(format!("writing {}: {e}", self.path.display()))
                })?;
            state.settings = settings;
        }
        Ok(self.status())
    }

    /// The movable part of the current map, its epoch, and the PGs not `active+clean`.
    fn snapshot(&self) -> Result<(Problem, u64, usize)> {
        let cluster = self.cluster.get()?;
        let epoch = cluster.epoch();
        let map = cluster.osd_map();
        let (problem, skipped) = balancer::cluster::from_osdmap(&map, &[]);
        for pool in skipped {
            tracing::debug!(pool = pool.id, reason = %pool.reason, "balancer skips pool");
        }
        let (problem, _aside) = balancer::set_aside(&problem);
        let not_clean = cluster
            .pg_list()
            .iter()
            .filter(|pg| pg.state != "active+clean")
            .count();
        Ok((problem, epoch, not_clean))
    }

    fn period_config(&self) -> PeriodConfig {
        PeriodConfig {
            target_max_misplaced_ratio: self.lock().settings.target_max_misplaced_ratio,
        }
    }

    /// Scores of the current map, or of a plan's result (`eval [PLAN]`).
    pub fn eval(&self, plan: Option<&str>) -> Result<Value> {
        let (problem, up, epoch) = match plan {
            None => {
                let (problem, epoch, _) = self.snapshot()?;
                let up = problem.pgs.iter().map(|pg| (pg.id, pg.up())).collect();
                (problem, up, epoch)
            }
            Some(name) => {
                let stored = self.plan(name)?;
                let up = stored.proposal.up(&stored.problem);
                (stored.problem, up, stored.epoch)
            }
        };
        let distribution = balancer::Distribution::compute(&problem, &up, None);
        let mut answer = json!({ "epoch": epoch, "plan": plan,
            "scores": scores_json(&period::score(&distribution)) });
        if plan.is_none() {
            let primaries = read::plan_read(&problem, Some(0))
                .map_err(|e| ServerError::Backend(e.to_string()))?;
            answer["primaries"] = read_scores_json(&primaries.before);
            let sizes = pg_bytes(&*self.cluster.get()?);
            let fills = bytes_exact::osd_fills(&problem, &sizes);
            let fill = |pick: fn(f64, f64) -> f64, start: f64| {
                fills.iter().map(|&(_, f)| f).fold(start, pick)
            };
            answer["bytes"] = json!({ "fill_max": fill(f64::max, 0.0),
                "fill_min": fill(f64::min, f64::INFINITY), "stored_bytes": sizes.values().sum::<u64>() });
        }
        Ok(answer)
    }

    /// The load mode's plan from the last statistics period (None before the first one).
    fn plan_load(&self, problem: &Problem, budget: usize) -> Result<Option<LoadPlan>> {
        let cluster = self.cluster.get()?;
        let Some(period) = cluster.last_stats_period() else {
            return Ok(None);
        };
        let seconds = (period.end_ns.saturating_sub(period.start_ns) as f64 / 1e9).max(1e-3);
        let map = cluster.osd_map();
        let sizes = pg_bytes(&cluster);
        let mut loads: BTreeMap<balancer::PgId, PgLoad> = BTreeMap::new();
        for ((pool, name), access) in &period.access.objects {
            let Ok(pg) = map.object_to_pg(*pool, name) else {
                continue;
            };
            let id = balancer::PgId {
                pool: pg.pool,
                seed: pg.seed,
            };
            let load = loads.entry(id).or_default();
            load.reads_per_s += access.reads as f64 / seconds;
            load.writes_per_s += access.writes as f64 / seconds;
        }
        for (id, load) in &mut loads {
            load.bytes = sizes.get(id).copied().unwrap_or(0);
        }
        let capability = self.capabilities(&period);
        let (cooldown, settings) = {
            let state = self.lock();
            (state.cooldown.clone(), state.settings.clone())
        };
        let stored: u64 = sizes.values().sum();
        let config = LoadConfig {
            read_threshold: settings.load.read_threshold,
            write_threshold: settings.load.write_threshold,
            hysteresis: settings.load.hysteresis,
            weight_performance: settings.load.weight_performance,
            weight_load: settings.load.weight_load,
            weight_capacity: settings.load.weight_capacity,
            max_primary_changes: budget,
            max_shards_moved: budget,
            max_bytes_moved: ((stored as f64) * settings.target_max_misplaced_ratio) as u64,
        };
        Ok(Some(load::plan_load(
            problem,
            &loads,
            &capability,
            &cooldown,
            &config,
        )))
    }

    /// Each OSD's capability: object operations per second of device busy time in the period
    /// when it was busy enough to tell (5 % of the period), else the last measured figure,
    /// else the highest measured on an OSD of its class (an idle device is not slow); and at
    /// least the most object operations per second an OSD of its class served in the period
    /// (reads from the stores' data caches keep the devices idle, yet were served).
    fn capabilities(&self, period: &cluster::StatsPeriod) -> BTreeMap<i32, OsdCapability> {
        let mut state = self.lock();
        for osd in &period.osds {
            let busy_s = osd.device.busy_ns as f64 / 1e9;
            let ops = (osd.ops.read.ops + osd.ops.write.ops) as f64;
            if osd.busy_fraction() >= 0.05 && ops > 0.0 {
                state.measured_ops_per_s.insert(osd.id, ops / busy_s);
            }
        }
        let seconds = (period.end_ns.saturating_sub(period.start_ns) as f64 / 1e9).max(1e-3);
        let class_peak = |class: &str| {
            period
                .osds
                .iter()
                .filter(|o| o.class == class)
                .map(|o| (o.ops.read.ops + o.ops.write.ops) as f64 / seconds)
                .fold(0.0_f64, f64::max)
        };
        let class_best = |class: &str| {
            period
                .osds
                .iter()
                .filter(|o| o.class == class)
                .filter_map(|o| state.measured_ops_per_s.get(&o.id).copied())
                .fold(None, |best: Option<f64>, x| {
                    Some(best.map_or(x, |b| b.max(x)))
                })
        };
        period
            .osds
            .iter()
            .filter(|osd| osd.up && osd.is_in)
            .map(|osd| {
                let ops = state
                    .measured_ops_per_s
                    .get(&osd.id)
                    .copied()
                    .or_else(|| class_best(&osd.class))
                    .unwrap_or(DEFAULT_OPS_PER_S)
                    .max(class_peak(&osd.class));
                (
                    osd.id,
                    OsdCapability {
                        read_ops_per_s: ops,
                        write_ops_per_s: ops,
                        free_bytes: osd.statfs.free_bytes,
                    },
                )
            })
            .collect()
    }

    /// Decides one period or `optimize` in the current mode; `not_clean` PGs make it wait.
    fn decide(&self, problem: &Problem, not_clean: usize) -> Result<Decision> {
        if not_clean > 0 {
            return Ok(Decision::Wait(not_clean));
        }
        let config = self.period_config();
        let mode = self.lock().settings.mode;
        let backend = |e: balancer::BalancerError| ServerError::Backend(e.to_string());
        let budget = period::budget_shards(problem, config.target_max_misplaced_ratio);
        let proposal = match mode {
            BalancerMode::Upmap => match period::decide(problem, 0, &config).map_err(backend)? {
                PeriodDecision::Apply { plan, .. } => Proposal::Items(plan),
                PeriodDecision::Balanced | PeriodDecision::Wait { .. } => {
                    return Ok(Decision::Balanced)
                }
            },
            BalancerMode::Bytes => {
                let sizes = pg_bytes(&*self.cluster.get()?);
                let result = bytes_exact::plan_bytes(
                    problem,
                    &sizes,
                    &BytesConfig {
                        max_moves: Some(budget),
                        node_budget: BYTES_NODE_BUDGET,
                        ..BytesConfig::default()
                    },
                );
                tracing::debug!(proven = result.proven, nodes = result.nodes, "bytes plan");
                Proposal::Items(result.plan)
            }
            BalancerMode::Read => {
                Proposal::Primaries(read::plan_read(problem, Some(budget)).map_err(backend)?)
            }
            BalancerMode::Load => match self.plan_load(problem, budget)? {
                Some(plan) => Proposal::Load(plan),
                None => return Ok(Decision::Balanced),
            },
        };
        if proposal.is_empty() {
            return Ok(Decision::Balanced);
        }
        Ok(Decision::Apply(Box::new(proposal), budget))
    }

    fn plan(&self, name: &str) -> Result<StoredPlan> {
        self.lock()
            .plans
            .get(name)
            .cloned()
            .ok_or_else(|| rados::RadosError::NotFound(format!("balancer plan {name:?}")).into())
    }

    /// Plans one period's worth of changes (the budget applies, as to a period) under `name`,
    /// even while recovery is behind (a plan is only shown until executed).
    pub fn optimize(&self, name: &str) -> Result<Value> {
        let (problem, epoch, _) = self.snapshot()?;
        let proposal = match self.decide(&problem, 0)? {
            Decision::Apply(proposal, _) => *proposal,
            Decision::Balanced | Decision::Wait(_) => {
                let up = problem.pgs.iter().map(|pg| (pg.id, pg.up())).collect();
                let items = problem
                    .pgs
                    .iter()
                    .map(|pg| (pg.id, pg.upmap_items.clone()))
                    .collect();
                Proposal::Items(Plan {
                    up,
                    items,
                    changes: Vec::new(),
                    moved_before: 0,
                    moved_after: 0,
                    shards_changed: 0,
                    violations: Vec::new(),
                    stats: Default::default(),
                })
            }
        };
        let mode = self.lock().settings.mode;
        let stored = StoredPlan {
            epoch,
            mode,
            proposal,
            problem,
        };
        let shown = show_json(name, &stored);
        self.lock().plans.insert(name.to_string(), stored);
        Ok(shown)
    }

    /// A plan's changes, as `ceph osd pg-upmap-items` commands.
    pub fn show(&self, name: &str) -> Result<Value> {
        Ok(show_json(name, &self.plan(name)?))
    }

    /// Forgets a plan.
    pub fn remove(&self, name: &str) -> Result<Value> {
        self.lock().plans.remove(name).ok_or_else(|| {
            ServerError::from(rados::RadosError::NotFound(format!(
                "balancer plan {name:?}"
            )))
        })?;
        Ok(json!({ "removed": name }))
    }

    /// Applies a plan made on the current epoch; the new epoch.
    pub fn execute(&self, name: &str) -> Result<Value> {
        let stored = self.plan(name)?;
        let cluster = self.cluster.get()?;
        let epoch = cluster.epoch();
        if epoch != stored.epoch {
            return Err(ServerError::Busy(format!(
                "plan {name:?} was made on epoch {}, the map is at {epoch}: optimize again",
                stored.epoch
            )));
        }
        let epoch = apply(&cluster, &stored.proposal)?;
        self.lock().plans.remove(name);
        let (changes, shards) = stored.proposal.size();
        Ok(json!({ "plan": name, "changes": changes, "shards_changed": shards, "epoch": epoch }))
    }

    /// One period at `now_ms`: decides and applies; what it did.
    pub fn run_period(&self, now_ms: u64) -> Result<LastPeriod> {
        let result = self.decide_and_apply();
        let last = match result {
            Ok(last) => last,
            Err(error) => ("failed".to_string(), error.to_string()),
        };
        let last = LastPeriod {
            at_ms: now_ms,
            outcome: last.0,
            detail: last.1,
        };
        self.lock().last_period = Some(last.clone());
        Ok(last)
    }

    fn decide_and_apply(&self) -> Result<(String, String)> {
        let (problem, _, not_clean) = self.snapshot()?;
        Ok(match self.decide(&problem, not_clean)? {
            Decision::Wait(pgs_not_clean) => (
                "waiting".into(),
                format!("{pgs_not_clean} PGs are not active+clean"),
            ),
            Decision::Balanced => {
                self.lock().cooldown.clear();
                ("balanced".into(), "no change improves the balance".into())
            }
            Decision::Apply(proposal, budget_shards) => {
                let cluster = self.cluster.get()?;
                let epoch = apply(&cluster, &proposal)?;
                let (changes, shards) = proposal.size();
                {
                    let mut state = self.lock();
                    state.shards_moved += shards as u64;
                    state.cooldown = match &*proposal {
                        Proposal::Load(plan) => plan
                            .primaries
                            .keys()
                            .copied()
                            .chain(plan.moves.changes.iter().map(|c| match c {
                                UpmapChange::Set { pg, .. } | UpmapChange::Remove { pg } => *pg,
                            }))
                            .collect(),
                        _ => Default::default(),
                    };
                }
                tracing::info!(changes, shards, epoch, "balancer applied a plan");
                (
                    "applied".into(),
                    format!(
                        "{changes} PGs changed, {shards} shards moved (budget {budget_shards}), epoch {epoch}"
                    ),
                )
            }
        })
    }
}

/// The balancer's loop on the shared [`worker::Worker`]: each step runs a period when the
/// balancer is on, then sleeps for the period the settings give now.
pub struct BalancerLoop(pub Arc<BalancerService>);

#[async_trait]
impl worker::Step for BalancerLoop {
    async fn step(&mut self, now_ms: u64) -> worker::Next {
        let (active, period_s) = {
            let state = self.0.lock();
            (state.settings.active, state.settings.period_s.max(1))
        };
        if active {
            match self.0.run_period(now_ms) {
                Ok(last) if last.outcome == "failed" => {
                    tracing::warn!(detail = %last.detail, "balancer period failed")
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "balancer period failed"),
            }
        }
        worker::Next::SleepMs(period_s * 1000)
    }
}

/// Applies a proposal's changes in one map change; the new epoch.
fn apply(cluster: &Cluster, proposal: &Proposal) -> Result<u64> {
    let plan = match proposal {
        Proposal::Items(plan) => plan,
        Proposal::Load(plan) => {
            let mut epoch = cluster.epoch();
            if !plan.pg_upmap.is_empty() {
                let changes = plan
                    .pg_upmap
                    .iter()
                    .map(|(pg, osds)| (osdmap::PgId::new(pg.pool, pg.seed), Some(osds.clone())))
                    .collect();
                epoch = cluster.set_pg_upmap_many(changes)?;
            }
            if plan.moves.changes.is_empty() {
                return Ok(epoch);
            }
            &plan.moves
        }
        Proposal::Primaries(plan) => {
            let changes = plan
                .pg_upmap
                .iter()
                .map(|(pg, osds)| (osdmap::PgId::new(pg.pool, pg.seed), Some(osds.clone())))
                .collect();
            return Ok(cluster.set_pg_upmap_many(changes)?);
        }
    };
    let changes = plan
        .changes
        .iter()
        .map(|change| match change {
            UpmapChange::Set { pg, items } => {
                (osdmap::PgId::new(pg.pool, pg.seed), Some(items.clone()))
            }
            UpmapChange::Remove { pg } => (osdmap::PgId::new(pg.pool, pg.seed), None),
        })
        .collect();
    Ok(cluster.set_pg_upmap_items_many(changes)?)
}

fn scores_json(scores: &[Score]) -> Value {
    scores
        .iter()
        .map(|s| {
            json!({ "scope": match s.scope { Scope::Pool(p) => p.to_string(), Scope::Total => "total".into() },
                "score": s.score, "max_deviation": s.max_deviation, "outside_bounds": s.outside_bounds })
        })
        .collect()
}

fn show_json(name: &str, stored: &StoredPlan) -> Value {
    let (changes, shards) = stored.proposal.size();
    json!({ "plan": name, "epoch": stored.epoch, "mode": stored.mode,
        "changes": changes, "shards_changed": shards,
        "commands": stored.proposal.commands() })
}

fn read_scores_json(scores: &[ReadScore]) -> Value {
    scores
        .iter()
        .map(|s| {
            json!({ "scope": match s.scope { Scope::Pool(p) => p.to_string(), Scope::Total => "total".into() },
                "max_deviation": s.max_deviation, "outside_bounds": s.outside_bounds })
        })
        .collect()
}

/// An OSD's capability before any period measured one (object operations per second).
const DEFAULT_OPS_PER_S: f64 = 1000.0;

/// Branch-and-bound nodes a bytes period may search (about half a second on 9 OSDs).
const BYTES_NODE_BUDGET: u64 = 500_000;

/// Each PG's stored bytes, from the OSDs' per-collection statistics (the largest copy, so a
/// replica still being filled by recovery does not shrink it).
fn pg_bytes(cluster: &Cluster) -> BTreeMap<balancer::PgId, u64> {
    let mut sizes: BTreeMap<balancer::PgId, u64> = BTreeMap::new();
    for osd in cluster.osd_stats() {
        for (collection, usage) in &osd.statfs.collections {
            if let Ok(pg) = collection.parse::<balancer::PgId>() {
                let size = sizes.entry(pg).or_default();
                *size = (*size).max(usage.stored_bytes);
            }
        }
    }
    sizes
}

/// One `strata balancer` command, as the admin API passes it on.
#[derive(Clone, Debug, PartialEq)]
pub enum BalancerRequest {
    /// `status`.
    Status,
    /// `on` or `off`.
    Activate(bool),
    /// `mode MODE`.
    Mode(String),
    /// Period (s) and/or `target_max_misplaced_ratio`.
    Configure {
        /// Seconds between periods.
        period_s: Option<u64>,
        /// Share of shards a period may move.
        target_max_misplaced_ratio: Option<f64>,
        /// Load mode knobs ([`LOAD_KNOBS`]) and their new values.
        load: Vec<(String, f64)>,
    },
    /// `eval [PLAN]`.
    Eval(Option<String>),
    /// `optimize PLAN`.
    Optimize(String),
    /// `show PLAN`.
    Show(String),
    /// `execute PLAN`.
    Execute(String),
    /// `rm PLAN`.
    Remove(String),
}

impl BalancerService {
    /// Answers one request.
    pub fn handle(&self, request: BalancerRequest) -> Result<Value> {
        let status = |status: BalancerStatus| {
            serde_json::to_value(status).map_err(|e| ServerError::Backend(format!("encoding: {e}")))
        };
        match request {
            BalancerRequest::Status => status(self.status()),
            BalancerRequest::Activate(active) => status(self.configure(|s| {
                s.active = active;
                Ok(())
            })?),
            BalancerRequest::Mode(word) => {
                let mode = BalancerMode::parse(&word)?;
                status(self.configure(|s| {
                    s.mode = mode;
                    Ok(())
                })?)
            }
            BalancerRequest::Configure {
                period_s,
                target_max_misplaced_ratio,
                load,
            } => status(self.configure(|s| {
                for (knob, value) in &load {
                    s.load.set(knob, *value)?;
                }
                s.load.validate()?;
                if let Some(period_s) = period_s {
                    s.period_s = period_s;
                }
                if let Some(ratio) = target_max_misplaced_ratio {
                    s.target_max_misplaced_ratio = ratio;
                }
                Ok(())
            })?),
            BalancerRequest::Eval(plan) => self.eval(plan.as_deref()),
            BalancerRequest::Optimize(name) => self.optimize(&name),
            BalancerRequest::Show(name) => self.show(&name),
            BalancerRequest::Execute(name) => self.execute(&name),
            BalancerRequest::Remove(name) => self.remove(&name),
        }
    }
}
