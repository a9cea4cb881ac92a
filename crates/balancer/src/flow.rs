//! An exact min-cost flow solver (primal-dual successive shortest paths), our own implementation.
//!
//! The balancer states its problem as a flow network whose initial flow is the raw CRUSH
//! placement; [`Network::solve`] turns it into a minimum-cost flow that balances every node.
//!
//! Method: every arc with negative cost and residual capacity is saturated first (that leaves
//! excess at some nodes and deficit at others, and makes every residual arc cost >= 0 so zero
//! potentials are valid). Then, phase by phase: Dijkstra with reduced costs from all excess
//! nodes finds the distance `d*` of the nearest deficit node, potentials rise by
//! `min(dist, d*)`, and a depth-first search pushes flow along zero-reduced-cost (admissible)
//! residual paths until none is left. Every augmentation runs along a shortest path, which is
//! the successive-shortest-path invariant, so the final flow has minimum cost among all flows
//! that balance the nodes (integral, because capacities and supplies are integers).
//!
//! A budget on a second, "counted" weight of the arcs (the balancer counts shard moves) stops
//! the search early: paths
//! are taken in order of increasing cost, so the result is the cheapest-first prefix.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Index of a node.
pub type NodeId = u32;
/// Index of an arc; arc `a ^ 1` is its reverse.
pub type ArcId = u32;

/// Effectively infinite capacity.
pub const CAPACITY_INFINITE: i64 = i64::MAX / 4;
const DISTANCE_INFINITE: i64 = i64::MAX / 4;

/// A flow network under construction and, after [`Network::solve`], its solution.
#[derive(Debug, Default)]
pub struct Network {
    /// Per arc (forward at even ids, reverse at odd ids).
    head: Vec<NodeId>,
    residual: Vec<i64>,
    cost: Vec<i64>,
    /// Counted weight per arc (reverse arcs hold the negation).
    counted: Vec<i64>,
    /// Initial capacity of each forward arc (reverse arcs hold 0).
    capacity: Vec<i64>,
    /// Node supply (+) / demand (-) not yet routed.
    excess: Vec<i64>,
    /// CSR adjacency, built by [`Network::solve`].
    adjacency_start: Vec<u32>,
    adjacency: Vec<ArcId>,
}

/// What [`Network::solve`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SolveReport {
    /// Total cost of the final flow, relative to the initial flow.
    pub cost_delta: i128,
    /// Sum of flow times counted weight, relative to the initial flow.
    pub counted_delta: i64,
    /// Phases (Dijkstra runs).
    pub phases: u32,
    /// Augmenting paths.
    pub augmentations: u64,
    /// True if the counted budget stopped the search before every node was balanced.
    pub budget_exhausted: bool,
}

impl Network {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_node(&mut self) -> NodeId {
        let id = u32::try_from(self.excess.len()).unwrap_or(u32::MAX);
        assert!(id < u32::MAX, "too many nodes");
        self.excess.push(0);
        id
    }

    pub fn node_count(&self) -> usize {
        self.excess.len()
    }

    pub fn arc_count(&self) -> usize {
        self.head.len() / 2
    }

    /// Add supply (positive) or demand (negative) at `node`.
    pub fn add_supply(&mut self, node: NodeId, amount: i64) {
        self.excess[node as usize] += amount;
    }

    /// Add an arc `from -> to` with capacity `capacity` and unit cost `cost`. Each unit of flow
    /// adds `counted` to [`SolveReport::counted_delta`], which the budget of
    /// [`Network::solve`] limits.
    pub fn add_arc(
        &mut self,
        from: NodeId,
        to: NodeId,
        capacity: i64,
        cost: i64,
        counted: i64,
    ) -> ArcId {
        assert!(capacity >= 0, "negative capacity");
        assert!(self.adjacency.is_empty(), "arcs added after solve");
        let id = u32::try_from(self.head.len()).unwrap_or(u32::MAX);
        assert!(id < u32::MAX - 1, "too many arcs");
        // The forward arc's tail is the reverse arc's head.
        self.head.extend([to, from]);
        self.residual.extend([capacity, 0]);
        self.cost.extend([cost, -cost]);
        self.counted.extend([counted, -counted]);
        self.capacity.extend([capacity, 0]);
        id
    }

    /// Put `amount` units of initial flow on `arc` (moving supply from its tail to its head).
    pub fn push_initial(&mut self, arc: ArcId, amount: i64) {
        let a = arc as usize;
        assert!(a.is_multiple_of(2), "initial flow on a reverse arc");
        assert!(self.residual[a] >= amount, "initial flow above capacity");
        self.residual[a] -= amount;
        self.residual[a ^ 1] += amount;
        let (tail, head) = (self.head[a ^ 1] as usize, self.head[a] as usize);
        self.excess[tail] -= amount;
        self.excess[head] += amount;
    }

    /// Flow on a forward arc.
    pub fn flow(&self, arc: ArcId) -> i64 {
        self.capacity[arc as usize] - self.residual[arc as usize]
    }

    /// Head of an arc.
    pub fn arc_head(&self, arc: ArcId) -> NodeId {
        self.head[arc as usize]
    }

    /// Forward arcs leaving `node` (only after [`Network::solve`] built the adjacency).
    pub fn arcs_out(&self, node: NodeId) -> impl Iterator<Item = ArcId> + '_ {
        self.arc_ids(node).filter(|a| a.is_multiple_of(2))
    }

    fn arc_ids(&self, node: NodeId) -> impl Iterator<Item = ArcId> + '_ {
        let start = self.adjacency_start[node as usize] as usize;
        let end = self.adjacency_start[node as usize + 1] as usize;
        self.adjacency[start..end].iter().copied()
    }

    fn tail(&self, arc: usize) -> usize {
        self.head[arc ^ 1] as usize
    }

    fn build_adjacency(&mut self) {
        let nodes = self.excess.len();
        let mut degree = vec![0_u32; nodes + 1];
        for arc in 0..self.head.len() {
            degree[self.tail(arc) + 1] += 1;
        }
        for i in 0..nodes {
            degree[i + 1] += degree[i];
        }
        let mut fill = degree.clone();
        self.adjacency = vec![0; self.head.len()];
        for arc in 0..self.head.len() {
            let tail = self.tail(arc);
            self.adjacency[fill[tail] as usize] = arc as u32;
            fill[tail] += 1;
        }
        self.adjacency_start = degree;
    }

    /// Route every excess to a deficit at minimum total cost. `counted_budget` limits the cost
    /// on counted arcs added by augmentations (None = no limit).
    ///
    /// Panics if the excesses do not sum to zero; returns with unrouted excess only if the
    /// network is infeasible (no residual path) or the budget ran out.
    pub fn solve(&mut self, counted_budget: Option<i64>) -> SolveReport {
        assert_eq!(
            self.excess.iter().sum::<i64>(),
            0,
            "supplies do not balance"
        );
        self.build_adjacency();
        let mut report = SolveReport {
            cost_delta: 0,
            counted_delta: 0,
            phases: 0,
            augmentations: 0,
            budget_exhausted: false,
        };
        // Saturate negative arcs: afterwards every residual arc has cost >= 0.
        for arc in 0..self.head.len() {
            if self.cost[arc] < 0 && self.residual[arc] > 0 {
                let amount = self.residual[arc];
                self.augment_arc(arc, amount, &mut report);
                let (tail, head) = (self.tail(arc), self.head[arc] as usize);
                self.excess[tail] -= amount;
                self.excess[head] += amount;
            }
        }
        let mut potential = vec![0_i64; self.excess.len()];
        let mut search = Search::new(self.excess.len());
        loop {
            if !self.excess.iter().any(|&e| e > 0) {
                break;
            }
            report.phases += 1;
            if !self.dijkstra(&mut potential, &mut search) {
                break; // infeasible: no deficit reachable.
            }
            let pushed =
                self.augment_admissible(&potential, &mut search, counted_budget, &mut report);
            if report.budget_exhausted || pushed == 0 {
                break;
            }
        }
        report
    }

    fn augment_arc(&mut self, arc: usize, amount: i64, report: &mut SolveReport) {
        self.residual[arc] -= amount;
        self.residual[arc ^ 1] += amount;
        report.cost_delta += i128::from(amount) * i128::from(self.cost[arc]);
        report.counted_delta += amount * self.counted[arc];
    }

    /// Multi-source Dijkstra on reduced costs; raises potentials by `min(dist, d*)`. Returns
    /// false if no deficit node is reachable.
    fn dijkstra(&self, potential: &mut [i64], search: &mut Search) -> bool {
        let distance = &mut search.distance;
        distance.fill(DISTANCE_INFINITE);
        let mut heap = BinaryHeap::new();
        for (node, &e) in self.excess.iter().enumerate() {
            if e > 0 {
                distance[node] = 0;
                heap.push(Reverse((0_i64, node as u32)));
            }
        }
        let mut nearest_deficit = DISTANCE_INFINITE;
        while let Some(Reverse((d, node))) = heap.pop() {
            let u = node as usize;
            if d > distance[u] {
                continue;
            }
            if d > nearest_deficit {
                break;
            }
            if self.excess[u] < 0 {
                nearest_deficit = nearest_deficit.min(d);
            }
            for arc in self.arc_ids(node) {
                let a = arc as usize;
                if self.residual[a] <= 0 {
                    continue;
                }
                let v = self.head[a] as usize;
                let reduced = self.cost[a] + potential[u] - potential[v];
                debug_assert!(reduced >= 0, "negative reduced cost {reduced}");
                let candidate = d + reduced;
                if candidate < distance[v] {
                    distance[v] = candidate;
                    heap.push(Reverse((candidate, v as u32)));
                }
            }
        }
        if nearest_deficit == DISTANCE_INFINITE {
            return false;
        }
        for (p, &d) in potential.iter_mut().zip(distance.iter()) {
            *p += d.min(nearest_deficit);
        }
        true
    }

    /// Push flow along admissible paths (reduced cost 0) from excess to deficit nodes until
    /// none is found. Returns the amount pushed.
    fn augment_admissible(
        &mut self,
        potential: &[i64],
        search: &mut Search,
        counted_budget: Option<i64>,
        report: &mut SolveReport,
    ) -> i64 {
        let nodes = self.excess.len();
        search.dead.fill(false);
        search.on_path.fill(false);
        for node in 0..nodes {
            search.next_arc[node] = self.adjacency_start[node];
        }
        let mut pushed = 0_i64;
        let sources: Vec<usize> = (0..nodes).filter(|&n| self.excess[n] > 0).collect();
        for source in sources {
            while self.excess[source] > 0 && !search.dead[source] {
                let Some(path) = self.find_admissible_path(source, potential, search) else {
                    break;
                };
                let sink = path
                    .last()
                    .map_or(source, |&a| self.head[a as usize] as usize);
                let mut amount = self.excess[source].min(-self.excess[sink]);
                let mut counted_cost = 0_i64;
                for &arc in &path {
                    amount = amount.min(self.residual[arc as usize]);
                    counted_cost += self.counted[arc as usize];
                }
                if let (Some(budget), true) = (counted_budget, counted_cost > 0) {
                    let left = budget - report.counted_delta;
                    amount = amount.min(left / counted_cost);
                    if amount <= 0 {
                        report.budget_exhausted = true;
                        return pushed;
                    }
                }
                debug_assert!(amount > 0);
                for &arc in &path {
                    self.augment_arc(arc as usize, amount, report);
                }
                self.excess[source] -= amount;
                self.excess[sink] += amount;
                pushed += amount;
                report.augmentations += 1;
            }
        }
        pushed
    }

    /// Iterative DFS over admissible residual arcs from `source` to any deficit node.
    fn find_admissible_path(
        &self,
        source: usize,
        potential: &[i64],
        search: &mut Search,
    ) -> Option<Vec<ArcId>> {
        let mut path: Vec<ArcId> = Vec::new();
        let mut node = source;
        search.on_path[source] = true;
        loop {
            if self.excess[node] < 0 && node != source {
                for &arc in &path {
                    search.on_path[self.tail(arc as usize)] = false;
                }
                search.on_path[node] = false;
                return Some(path);
            }
            let end = self.adjacency_start[node + 1];
            let mut advanced = false;
            while search.next_arc[node] < end {
                let arc = self.adjacency[search.next_arc[node] as usize];
                let a = arc as usize;
                let v = self.head[a] as usize;
                if self.residual[a] > 0
                    && !search.dead[v]
                    && !search.on_path[v]
                    && self.cost[a] + potential[node] - potential[v] == 0
                {
                    path.push(arc);
                    search.on_path[v] = true;
                    node = v;
                    advanced = true;
                    break;
                }
                search.next_arc[node] += 1;
            }
            if advanced {
                continue;
            }
            // Dead end: retreat.
            search.dead[node] = true;
            search.on_path[node] = false;
            let arc = path.pop()?;
            node = self.tail(arc as usize);
            search.next_arc[node] += 1;
        }
    }

    /// Remaining unrouted excess (sum of positive excesses).
    pub fn unrouted(&self) -> i64 {
        self.excess.iter().filter(|&&e| e > 0).sum()
    }
}

/// Scratch buffers reused across phases.
struct Search {
    distance: Vec<i64>,
    dead: Vec<bool>,
    on_path: Vec<bool>,
    next_arc: Vec<u32>,
}

impl Search {
    fn new(nodes: usize) -> Self {
        Self {
            distance: vec![DISTANCE_INFINITE; nodes],
            dead: vec![false; nodes],
            on_path: vec![false; nodes],
            next_arc: vec![0; nodes],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Brute force: minimum cost of an integral flow balancing every node, by enumerating the
    /// flow on every arc (tiny networks only).
    fn brute_force(
        nodes: usize,
        supplies: &[i64],
        arcs: &[(usize, usize, i64, i64)],
    ) -> Option<i64> {
        fn go(
            index: usize,
            arcs: &[(usize, usize, i64, i64)],
            balance: &mut Vec<i64>,
            cost: i64,
            best: &mut Option<i64>,
        ) {
            if index == arcs.len() {
                if balance.iter().all(|&b| b == 0) {
                    *best = Some(best.map_or(cost, |b: i64| b.min(cost)));
                }
                return;
            }
            let (from, to, capacity, unit) = arcs[index];
            for f in 0..=capacity {
                balance[from] -= f;
                balance[to] += f;
                go(index + 1, arcs, balance, cost + f * unit, best);
                balance[from] += f;
                balance[to] -= f;
            }
        }
        let mut balance: Vec<i64> = supplies.to_vec();
        let mut best = None;
        let _ = nodes;
        go(0, arcs, &mut balance, 0, &mut best);
        best
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn matches_brute_force(
            arcs in proptest::collection::vec((0usize..5, 0usize..5, 0i64..3, -3i64..4), 1..7),
            supply in proptest::collection::vec(-2i64..3, 5),
        ) {
            let mut supplies = supply.clone();
            let sum: i64 = supplies.iter().sum();
            supplies[4] -= sum;
            let arcs: Vec<_> = arcs.into_iter().filter(|a| a.0 != a.1).collect();
            let expected = brute_force(5, &supplies, &arcs);
            let mut network = Network::new();
            for _ in 0..5 { network.add_node(); }
            for (node, &s) in supplies.iter().enumerate() { network.add_supply(node as u32, s); }
            for &(from, to, capacity, cost) in &arcs {
                network.add_arc(from as u32, to as u32, capacity, cost, 0);
            }
            let report = network.solve(None);
            match expected {
                Some(cost) => {
                    prop_assert_eq!(network.unrouted(), 0);
                    prop_assert_eq!(report.cost_delta, i128::from(cost));
                }
                None => prop_assert!(network.unrouted() > 0),
            }
        }
    }
}
