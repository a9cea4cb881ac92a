//! The rule interpreter: Ceph's `crush_do_rule` and the choose functions it calls
//! (`crush_choose_firstn`, `crush_choose_indep`), bit for bit with Ceph 16.2.
//!
//! [`Mapper`] owns the scratch a mapping needs (three result-sized vectors and the uniform
//! permutation cache), so repeated mappings allocate nothing. [`do_rule`] is the one-shot form.
//! The mapper never panics on a map that passed [`CrushMap::validate`]; on other maps it still
//! avoids panics (missing buckets count as bad items) but the result is unspecified.
//!
//! Work is bounded by the map, as in Ceph: a firstn step visits every rank up to its count and
//! retries each up to the try budgets, so a map with absurd counts or tries (legal, if hostile)
//! maps slowly rather than wrongly.

use crate::bucket::{self, PermWork};
use crate::map::{Bucket, BucketData, ChooseArg, ChooseArgMap, CrushMap, RuleStep};
use crate::map::{ITEM_NONE, ITEM_UNDEF};

/// Map input `x` through rule `rule_id`, as Ceph's `crush_do_rule` does.
///
/// * `result_max`: the most OSDs to return (crushtool passes `--num-rep`; OSDMap passes pool size).
/// * `weights`: per-device reweight, 16.16 (0x10000 = in, 0 = out), indexed by device id; devices
///   beyond its end count as out (Ceph's `is_out`).
/// * `choose_args`: an optional weight-set / id remap.
///
/// Returns the OSD list; `indep` steps leave [`crate::ITEM_NONE`] holes in place.
pub fn do_rule(
    map: &CrushMap,
    rule_id: usize,
    x: u32,
    result_max: usize,
    weights: &[u32],
    choose_args: Option<&ChooseArgMap>,
) -> Vec<i32> {
    let mut mapper = Mapper::new(map, choose_args);
    let mut result = Vec::with_capacity(result_max);
    mapper.do_rule_into(rule_id, x, result_max, weights, &mut result);
    result
}

/// A reusable mapping workspace for one map (and one choose_args set).
///
/// Not `Sync`: give each thread its own `Mapper` (they are cheap: a few vectors).
#[derive(Debug)]
pub struct Mapper<'m> {
    map: &'m CrushMap,
    /// choose_args by bucket slot (`-1 - id`); empty when the map is used without them.
    args: Vec<Option<&'m ChooseArg>>,
    /// Uniform permutation scratch by bucket slot.
    work: Vec<PermWork>,
    /// Bumped per mapping: invalidates every [`PermWork`] at once.
    generation: u64,
    scratch_w: Vec<i32>,
    scratch_o: Vec<i32>,
    scratch_c: Vec<i32>,
}

/// Retry budgets of one choose step (Ceph's tunables after `set_*` steps).
#[derive(Debug, Clone, Copy)]
struct Budget {
    tries: u32,
    recurse_tries: u32,
    local_retries: u32,
    local_fallback_retries: u32,
    vary_r: u32,
    stable: bool,
}

/// What stays fixed while one input descends the hierarchy.
struct Walk<'a, 'm> {
    map: &'m CrushMap,
    args: &'a [Option<&'m ChooseArg>],
    work: &'a mut [PermWork],
    generation: u64,
    weights: &'a [u32],
    x: u32,
}

impl<'m> Mapper<'m> {
    /// A workspace for `map`, hashing with `choose_args` when given.
    pub fn new(map: &'m CrushMap, choose_args: Option<&'m ChooseArgMap>) -> Self {
        let args = match choose_args {
            Some(args) => map
                .buckets
                .iter()
                .enumerate()
                .map(|(slot, _)| args.get(&(-1 - slot as i32)))
                .collect(),
            None => Vec::new(),
        };
        let work = map
            .buckets
            .iter()
            .map(|b| PermWork::new(b.as_ref().map_or(0, |b| b.items.len())))
            .collect();
        Self {
            map,
            args,
            work,
            generation: 0,
            scratch_w: Vec::new(),
            scratch_o: Vec::new(),
            scratch_c: Vec::new(),
        }
    }

    /// [`do_rule`] into a caller-owned vector (cleared first); allocation-free once warm.
    pub fn do_rule_into(
        &mut self,
        rule_id: usize,
        x: u32,
        result_max: usize,
        weights: &[u32],
        result: &mut Vec<i32>,
    ) {
        result.clear();
        let map = self.map;
        let Some(rule) = map.rule(rule_id) else {
            return;
        };
        if result_max == 0 {
            return;
        }
        self.generation += 1;
        let mut w = std::mem::take(&mut self.scratch_w);
        let mut o = std::mem::take(&mut self.scratch_o);
        let mut c = std::mem::take(&mut self.scratch_c);
        for v in [&mut w, &mut o, &mut c] {
            if v.len() < result_max {
                v.resize(result_max, 0);
            }
        }
        let mut walk = Walk {
            map,
            args: &self.args,
            work: &mut self.work,
            generation: self.generation,
            weights,
            x,
        };
        walk.run(&rule.steps, result_max, &mut w, &mut o, &mut c, result);
        self.scratch_w = w;
        self.scratch_o = o;
        self.scratch_c = c;
    }
}

impl<'m> Walk<'_, 'm> {
    #[inline]
    fn bucket(&self, id: i32) -> Option<&'m Bucket> {
        self.map.bucket(id)
    }

    #[inline]
    fn arg(&self, bucket: &Bucket) -> Option<&'m ChooseArg> {
        let slot = (-1_i64 - i64::from(bucket.id)) as usize;
        self.args.get(slot).copied().flatten()
    }

    #[inline]
    fn choose(&mut self, bucket: &Bucket, r: u32, position: usize) -> i32 {
        let arg = self.arg(bucket);
        let slot = (-1_i64 - i64::from(bucket.id)) as usize;
        match self.work.get_mut(slot) {
            Some(work) => bucket::choose(bucket, work, self.generation, self.x, r, arg, position),
            None => crate::map::ITEM_NONE,
        }
    }

    #[inline]
    fn perm_choose(&mut self, bucket: &Bucket, r: u32) -> i32 {
        let slot = (-1_i64 - i64::from(bucket.id)) as usize;
        match self.work.get_mut(slot) {
            Some(work) => bucket::perm_choose(bucket, work, self.generation, self.x, r),
            None => crate::map::ITEM_NONE,
        }
    }

    /// Type of `item`: 0 for devices, the bucket's type for buckets; `None` for a missing bucket.
    #[inline]
    fn item_type(&self, item: i32) -> Option<(i32, Option<&'m Bucket>)> {
        if item >= 0 {
            Some((0, None))
        } else {
            self.bucket(item).map(|b| (i32::from(b.type_id), Some(b)))
        }
    }

    /// Interpret `steps` (Ceph's `crush_do_rule` after the rule lookup).
    fn run(
        &mut self,
        steps: &[RuleStep],
        result_max: usize,
        w: &mut Vec<i32>,
        o: &mut Vec<i32>,
        c: &mut [i32],
        result: &mut Vec<i32>,
    ) {
        let tunables = &self.map.tunables;
        // The original choose_total_tries counted retries, not tries: add one.
        let mut choose_tries = tunables.choose_total_tries.wrapping_add(1);
        let mut choose_leaf_tries = 0_u32;
        let mut local_retries = tunables.choose_local_tries;
        let mut local_fallback_retries = tunables.choose_local_fallback_tries;
        let mut vary_r = u32::from(tunables.chooseleaf_vary_r);
        let mut stable = u32::from(tunables.chooseleaf_stable);
        let max_devices = self.map.max_devices;
        let mut wsize = 0_usize;

        for step in steps {
            let (firstn, count, type_id, recurse_to_leaf) = match *step {
                RuleStep::Take { item } => {
                    let valid = (item >= 0 && item < max_devices) || self.bucket(item).is_some();
                    if valid {
                        w[0] = item;
                        wsize = 1;
                    }
                    continue;
                }
                RuleStep::SetChooseTries(n) => {
                    if n > 0 {
                        choose_tries = n as u32;
                    }
                    continue;
                }
                RuleStep::SetChooseLeafTries(n) => {
                    if n > 0 {
                        choose_leaf_tries = n as u32;
                    }
                    continue;
                }
                RuleStep::SetChooseLocalTries(n) => {
                    if n >= 0 {
                        local_retries = n as u32;
                    }
                    continue;
                }
                RuleStep::SetChooseLocalFallbackTries(n) => {
                    if n >= 0 {
                        local_fallback_retries = n as u32;
                    }
                    continue;
                }
                RuleStep::SetChooseLeafVaryR(n) => {
                    if n >= 0 {
                        vary_r = n as u32;
                    }
                    continue;
                }
                RuleStep::SetChooseLeafStable(n) => {
                    if n >= 0 {
                        stable = n as u32;
                    }
                    continue;
                }
                RuleStep::Emit => {
                    for &item in &w[..wsize] {
                        if result.len() >= result_max {
                            break;
                        }
                        result.push(item);
                    }
                    wsize = 0;
                    continue;
                }
                RuleStep::Noop => continue,
                RuleStep::ChooseFirstN { count, type_id } => (true, count, type_id, false),
                RuleStep::ChooseLeafFirstN { count, type_id } => (true, count, type_id, true),
                RuleStep::ChooseIndep { count, type_id } => (false, count, type_id, false),
                RuleStep::ChooseLeafIndep { count, type_id } => (false, count, type_id, true),
            };
            if wsize == 0 {
                continue;
            }
            let mut osize = 0_usize;
            for &take in &w[..wsize] {
                let mut numrep = count;
                if numrep <= 0 {
                    numrep = numrep.saturating_add(result_max as i32);
                    if numrep <= 0 {
                        continue;
                    }
                }
                // w[i] may be a device or ITEM_NONE: only buckets are descended.
                let Some(start) = self.bucket(take) else {
                    continue;
                };
                if firstn {
                    let recurse_tries = if choose_leaf_tries > 0 {
                        choose_leaf_tries
                    } else if self.map.tunables.chooseleaf_descend_once != 0 {
                        1
                    } else {
                        choose_tries
                    };
                    let budget = Budget {
                        tries: choose_tries,
                        recurse_tries,
                        local_retries,
                        local_fallback_retries,
                        vary_r,
                        stable: stable != 0,
                    };
                    osize += self.choose_firstn(
                        start,
                        numrep,
                        type_id,
                        &mut o[osize..result_max],
                        0,
                        result_max - osize,
                        &budget,
                        recurse_to_leaf,
                        Some(&mut c[osize..result_max]),
                        0,
                    );
                } else {
                    let out_size = (numrep as usize).min(result_max - osize);
                    let leaf_tries = if choose_leaf_tries > 0 {
                        choose_leaf_tries
                    } else {
                        1
                    };
                    self.choose_indep(
                        start,
                        out_size,
                        numrep as u32,
                        type_id,
                        &mut o[osize..result_max],
                        0,
                        choose_tries,
                        leaf_tries,
                        recurse_to_leaf,
                        Some(&mut c[osize..result_max]),
                        0,
                    );
                    osize += out_size;
                }
            }
            if recurse_to_leaf {
                // The leaves, not the chosen buckets, go on.
                o[..osize].copy_from_slice(&c[..osize]);
            }
            std::mem::swap(w, o);
            wsize = osize;
        }
    }

    /// Choose `numrep` distinct items of type `want_type` under `bucket`, depth first, retrying
    /// on collision / rejection (Ceph's `crush_choose_firstn`). Returns the new `outpos`.
    #[allow(clippy::too_many_arguments)]
    fn choose_firstn(
        &mut self,
        bucket: &'m Bucket,
        numrep: i32,
        want_type: i32,
        out: &mut [i32],
        mut outpos: usize,
        out_size: usize,
        budget: &Budget,
        recurse_to_leaf: bool,
        mut out2: Option<&mut [i32]>,
        parent_r: u32,
    ) -> usize {
        let mut count = out_size;
        let mut rep: i32 = if budget.stable { 0 } else { outpos as i32 };
        while rep < numrep && count > 0 {
            let mut ftotal = 0_u32;
            let mut skip_rep = false;
            let mut item = 0_i32;
            'descent: loop {
                let mut current = bucket;
                let mut flocal = 0_u32;
                loop {
                    let r = (rep as u32).wrapping_add(parent_r).wrapping_add(ftotal);
                    let size = current.items.len() as u32;
                    let mut collide = false;
                    let reject;
                    if size == 0 {
                        reject = true;
                    } else {
                        item = if budget.local_fallback_retries > 0
                            && flocal >= (size >> 1)
                            && flocal > budget.local_fallback_retries
                        {
                            self.perm_choose(current, r)
                        } else {
                            self.choose(current, r, outpos)
                        };
                        if item >= self.map.max_devices {
                            skip_rep = true;
                            break 'descent;
                        }
                        let Some((item_type, child)) = self.item_type(item) else {
                            skip_rep = true;
                            break 'descent;
                        };
                        if item_type != want_type {
                            match child {
                                Some(child) => {
                                    current = child;
                                    continue;
                                }
                                None => {
                                    skip_rep = true;
                                    break 'descent;
                                }
                            }
                        }
                        collide = out[..outpos].contains(&item);
                        let mut rejected = false;
                        if !collide && recurse_to_leaf {
                            if let Some(out2) = out2.as_deref_mut() {
                                match child {
                                    Some(child) => {
                                        let sub_r = if budget.vary_r > 0 {
                                            r.checked_shr(budget.vary_r - 1).unwrap_or(0)
                                        } else {
                                            0
                                        };
                                        let inner = Budget {
                                            tries: budget.recurse_tries,
                                            recurse_tries: 0,
                                            ..*budget
                                        };
                                        let inner_numrep =
                                            if budget.stable { 1 } else { outpos as i32 + 1 };
                                        let got = self.choose_firstn(
                                            child,
                                            inner_numrep,
                                            0,
                                            out2,
                                            outpos,
                                            count,
                                            &inner,
                                            false,
                                            None,
                                            sub_r,
                                        );
                                        rejected = got <= outpos;
                                    }
                                    None => out2[outpos] = item,
                                }
                            }
                        }
                        if !rejected && !collide && item_type == 0 {
                            rejected = bucket::is_out(self.weights, item, self.x);
                        }
                        reject = rejected;
                    }
                    if !(reject || collide) {
                        break 'descent;
                    }
                    ftotal += 1;
                    flocal += 1;
                    if (collide && flocal <= budget.local_retries)
                        || (budget.local_fallback_retries > 0
                            && flocal <= size.wrapping_add(budget.local_fallback_retries))
                    {
                        // Retry in the same bucket.
                        continue;
                    }
                    if ftotal < budget.tries {
                        continue 'descent;
                    }
                    skip_rep = true;
                    break 'descent;
                }
            }
            if !skip_rep {
                out[outpos] = item;
                outpos += 1;
                count -= 1;
            }
            rep += 1;
        }
        outpos
    }

    /// Choose `left` items breadth first, each position stable under failures elsewhere; holes
    /// become [`ITEM_NONE`] (Ceph's `crush_choose_indep`).
    #[allow(clippy::too_many_arguments)]
    fn choose_indep(
        &mut self,
        bucket: &'m Bucket,
        left: usize,
        numrep: u32,
        want_type: i32,
        out: &mut [i32],
        outpos: usize,
        tries: u32,
        recurse_tries: u32,
        recurse_to_leaf: bool,
        mut out2: Option<&mut [i32]>,
        parent_r: u32,
    ) {
        let endpos = outpos + left;
        let mut left = left;
        out[outpos..endpos].fill(ITEM_UNDEF);
        if let Some(out2) = out2.as_deref_mut() {
            out2[outpos..endpos].fill(ITEM_UNDEF);
        }
        let mut ftotal = 0_u32;
        while left > 0 && ftotal < tries {
            for rep in outpos..endpos {
                if out[rep] != ITEM_UNDEF {
                    continue;
                }
                let mut current = bucket;
                loop {
                    let size = current.items.len() as u32;
                    // Same bucket chosen in another position tends to a different item there.
                    let stride = if matches!(current.data, BucketData::Uniform { .. })
                        && size.is_multiple_of(numrep)
                    {
                        numrep.wrapping_add(1)
                    } else {
                        numrep
                    };
                    let r = (rep as u32)
                        .wrapping_add(parent_r)
                        .wrapping_add(stride.wrapping_mul(ftotal));
                    if size == 0 {
                        break;
                    }
                    let item = self.choose(current, r, outpos);
                    let resolved = if item >= self.map.max_devices {
                        None
                    } else {
                        self.item_type(item)
                    };
                    let Some((item_type, child)) = resolved else {
                        out[rep] = ITEM_NONE;
                        if let Some(out2) = out2.as_deref_mut() {
                            out2[rep] = ITEM_NONE;
                        }
                        left -= 1;
                        break;
                    };
                    if item_type != want_type {
                        match child {
                            Some(child) => {
                                current = child;
                                continue;
                            }
                            None => {
                                out[rep] = ITEM_NONE;
                                if let Some(out2) = out2.as_deref_mut() {
                                    out2[rep] = ITEM_NONE;
                                }
                                left -= 1;
                                break;
                            }
                        }
                    }
                    if out[outpos..endpos].contains(&item) {
                        break;
                    }
                    if recurse_to_leaf {
                        if let Some(out2) = out2.as_deref_mut() {
                            match child {
                                Some(child) => {
                                    self.choose_indep(
                                        child,
                                        1,
                                        numrep,
                                        0,
                                        out2,
                                        rep,
                                        recurse_tries,
                                        0,
                                        false,
                                        None,
                                        r,
                                    );
                                    if out2[rep] == ITEM_NONE {
                                        // Placed nothing: no leaf.
                                        break;
                                    }
                                }
                                None => out2[rep] = item,
                            }
                        }
                    }
                    if item_type == 0 && bucket::is_out(self.weights, item, self.x) {
                        break;
                    }
                    out[rep] = item;
                    left -= 1;
                    break;
                }
            }
            ftotal += 1;
        }
        for slot in &mut out[outpos..endpos] {
            if *slot == ITEM_UNDEF {
                *slot = ITEM_NONE;
            }
        }
        if let Some(out2) = out2 {
            for slot in &mut out2[outpos..endpos] {
                if *slot == ITEM_UNDEF {
                    *slot = ITEM_NONE;
                }
            }
        }
    }
}
