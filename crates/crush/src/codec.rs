//! Binary crushmap codec: what `ceph osd getcrushmap` and `crushtool -c` write (Ceph 16.2's
//! `CrushWrapper::encode` / `decode` with all features, magic 0x00010000, little endian).
//!
//! Layout: magic, max_buckets, max_rules, max_devices; per bucket slot its algorithm (0 = empty)
//! and data; per rule slot a presence flag, step count, mask and steps; the type, item and rule
//! name maps; tunables; device classes; choose_args.
//!
//! Decoding never panics and never trusts a count to size an allocation: every read is bounds
//! checked and a failure names the byte offset and the field. Decoding finishes the way Ceph's
//! does (`finalize`: `max_devices` is recomputed from the bucket items and device names) and then
//! requires [`CrushMap::validate`]. Encoding a map decoded from Ceph's bytes gives those bytes.

use std::collections::BTreeMap;

use crate::error::{CrushError, Result};
use crate::map::{
    Bucket, BucketAlgorithm, BucketData, ChooseArg, ChooseArgMap, CrushMap, Rule, RuleStep,
    Tunables,
};

/// `CRUSH_MAGIC`.
pub const CRUSH_MAGIC: u32 = 0x0001_0000;

/// Decode a binary crushmap.
pub fn decode(bytes: &[u8]) -> Result<CrushMap> {
    let mut reader = Reader {
        bytes,
        offset: 0,
        context: String::new(),
    };
    let mut map = decode_map(&mut reader)?;
    finalize(&mut map);
    map.validate()?;
    Ok(map)
}

/// Encode a crushmap as Ceph 16.2 does (byte-identical for maps Ceph wrote).
pub fn encode(map: &CrushMap) -> Vec<u8> {
    let mut out = Writer(Vec::with_capacity(4096));
    out.u32(CRUSH_MAGIC);
    out.i32(map.buckets.len() as i32);
    out.u32(map.rules.len() as u32);
    out.i32(map.max_devices);
    for slot in &map.buckets {
        match slot {
            None => out.u32(0),
            Some(bucket) => encode_bucket(&mut out, bucket),
        }
    }
    for slot in &map.rules {
        match slot {
            None => out.u32(0),
            Some(rule) => {
                out.u32(1);
                out.u32(rule.steps.len() as u32);
                out.0.extend_from_slice(&[
                    rule.ruleset,
                    rule.rule_type,
                    rule.min_size,
                    rule.max_size,
                ]);
                for step in &rule.steps {
                    let (op, arg1, arg2) = step.to_raw();
                    out.u32(op);
                    out.i32(arg1);
                    out.i32(arg2);
                }
            }
        }
    }
    for names in [&map.type_names, &map.item_names, &map.rule_names] {
        out.u32(names.len() as u32);
        for (&key, name) in names {
            out.i32(key);
            out.string(name);
        }
    }
    let t = &map.tunables;
    out.u32(t.choose_local_tries);
    out.u32(t.choose_local_fallback_tries);
    out.u32(t.choose_total_tries);
    out.u32(t.chooseleaf_descend_once);
    out.u8(t.chooseleaf_vary_r);
    out.u8(t.straw_calc_version);
    out.u32(t.allowed_bucket_algs);
    out.u8(t.chooseleaf_stable);
    out.u32(map.device_classes.len() as u32);
    for (&device, &class) in &map.device_classes {
        out.i32(device);
        out.i32(class);
    }
    out.u32(map.class_names.len() as u32);
    for (&class, name) in &map.class_names {
        out.i32(class);
        out.string(name);
    }
    out.u32(map.class_buckets.len() as u32);
    for (&bucket, by_class) in &map.class_buckets {
        out.i32(bucket);
        out.u32(by_class.len() as u32);
        for (&class, &shadow) in by_class {
            out.i32(class);
            out.i32(shadow);
        }
    }
    out.u32(map.choose_args.len() as u32);
    for (&index, args) in &map.choose_args {
        out.i64(index);
        let present: Vec<(&i32, &ChooseArg)> = args
            .iter()
            .filter(|(_, a)| !a.weight_set.is_empty() || !a.ids.is_empty())
            .collect();
        out.u32(present.len() as u32);
        // Ceph writes them by bucket slot (-1 - id) ascending, i.e. by id descending.
        for (&bucket_id, arg) in present.into_iter().rev() {
            out.u32((-1_i64 - i64::from(bucket_id)) as u32);
            out.u32(arg.weight_set.len() as u32);
            for weights in &arg.weight_set {
                out.u32(weights.len() as u32);
                for &w in weights {
                    out.u32(w);
                }
            }
            out.u32(arg.ids.len() as u32);
            for &id in &arg.ids {
                out.i32(id);
            }
        }
    }
    out.0
}

fn encode_bucket(out: &mut Writer, bucket: &Bucket) {
    out.u32(u32::from(bucket.algorithm.code()));
    out.i32(bucket.id);
    out.u16(bucket.type_id);
    out.u8(bucket.algorithm.code());
    out.u8(bucket.hash);
    out.u32(bucket.weight);
    out.u32(bucket.items.len() as u32);
    for &item in &bucket.items {
        out.i32(item);
    }
    match &bucket.data {
        BucketData::Uniform { item_weight } => out.u32(*item_weight),
        BucketData::List {
            item_weights,
            sum_weights,
        } => {
            for (w, s) in item_weights.iter().zip(sum_weights) {
                out.u32(*w);
                out.u32(*s);
            }
        }
        BucketData::Tree {
            num_nodes,
            node_weights,
        } => {
            out.u8(*num_nodes);
            for &w in node_weights {
                out.u32(w);
            }
        }
        BucketData::Straw {
            item_weights,
            straws,
        } => {
            for (w, s) in item_weights.iter().zip(straws) {
                out.u32(*w);
                out.u32(*s);
            }
        }
        BucketData::Straw2 { item_weights } => {
            for &w in item_weights {
                out.u32(w);
            }
        }
    }
}

/// Ceph's `CrushWrapper::finalize` effect on the fields we keep: `max_devices` is one past the
/// highest device in any bucket, or past the highest named id if that is higher.
fn finalize(map: &mut CrushMap) {
    let mut max_devices = 0_i32;
    for bucket in map.iter_buckets() {
        for &item in &bucket.items {
            if item >= max_devices {
                max_devices = item.saturating_add(1);
            }
        }
    }
    if let Some((&highest, _)) = map.item_names.iter().next_back() {
        if highest >= max_devices {
            max_devices = highest.saturating_add(1);
        }
    }
    map.max_devices = max_devices;
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// A bounds-checked little-endian cursor that names what it was reading when it fails.
struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
    /// Where we are (e.g. "bucket slot 3"), prefixed to field names in errors.
    context: String,
}

impl Reader<'_> {
    fn error(&self, field: &str, reason: impl Into<String>) -> CrushError {
        let field = if self.context.is_empty() {
            field.to_string()
        } else {
            format!("{}: {field}", self.context)
        };
        CrushError::Decode {
            offset: self.offset,
            field,
            reason: reason.into(),
        }
    }

    fn at_end(&self) -> bool {
        self.offset >= self.bytes.len()
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.offset)
    }

    fn take<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let end = self
            .offset
            .checked_add(N)
            .filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.error(field, format!("needs {N} bytes, {} left", self.remaining())));
        };
        let mut raw = [0_u8; N];
        raw.copy_from_slice(&self.bytes[self.offset..end]);
        self.offset = end;
        Ok(raw)
    }

    fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.take::<1>(field)?[0])
    }
    fn u16(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(field)?))
    }
    fn u32(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(field)?))
    }
    fn i32(&mut self, field: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(field)?))
    }
    fn i64(&mut self, field: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.take(field)?))
    }

    /// A count of elements of at least `min_element_bytes` each: refuses counts the remaining
    /// input cannot hold, so no allocation is ever sized by a corrupt count.
    fn count(&mut self, field: &str, min_element_bytes: usize) -> Result<usize> {
        let start = self.offset;
        let n = self.u32(field)? as usize;
        if n.saturating_mul(min_element_bytes.max(1)) > self.remaining() {
            self.offset = start;
            return Err(self.error(
                field,
                format!("count {n} exceeds the {} bytes left", self.remaining()),
            ));
        }
        Ok(n)
    }

    fn string_body(&mut self, field: &str, len: usize) -> Result<String> {
        if len > self.remaining() {
            return Err(self.error(
                field,
                format!("string of {len} bytes, {} left", self.remaining()),
            ));
        }
        let raw = &self.bytes[self.offset..self.offset + len];
        let text = std::str::from_utf8(raw)
            .map_err(|e| self.error(field, format!("not UTF-8: {e}")))?
            .to_string();
        self.offset += len;
        Ok(text)
    }

    fn string(&mut self, field: &str) -> Result<String> {
        let len = self.u32(field)? as usize;
        self.string_body(field, len)
    }

    /// Ceph's `decode_32_or_64_string_map`: old encoders wrote 64-bit keys; a zero length then
    /// is the key's high half, and the real length follows.
    fn name_map(&mut self, field: &str) -> Result<BTreeMap<i32, String>> {
        let n = self.count(field, 8)?;
        let mut names = BTreeMap::new();
        for _ in 0..n {
            let key = self.i32(field)?;
            let mut len = self.u32(field)?;
            if len == 0 {
                len = self.u32(field)?;
            }
            let name = self.string_body(field, len as usize)?;
            names.insert(key, name);
        }
        Ok(names)
    }

    fn u32_vec(&mut self, field: &str, n: usize) -> Result<Vec<u32>> {
        if n.saturating_mul(4) > self.remaining() {
            return Err(self.error(field, format!("{n} words, {} bytes left", self.remaining())));
        }
        (0..n).map(|_| self.u32(field)).collect()
    }
}

fn decode_map(r: &mut Reader) -> Result<CrushMap> {
    let magic = r.u32("magic")?;
    if magic != CRUSH_MAGIC {
        r.offset = 0;
        return Err(r.error(
            "magic",
            format!("{magic:#010x}, expected {CRUSH_MAGIC:#010x}"),
        ));
    }
    let max_buckets = r.i32("max_buckets")?;
    if max_buckets < 0 || (max_buckets as usize).saturating_mul(4) > r.remaining() {
        r.offset -= 4;
        return Err(r.error(
            "max_buckets",
            format!("{max_buckets} does not fit the input"),
        ));
    }
    let max_rules = r.u32("max_rules")? as usize;
    if max_rules.saturating_mul(4) > r.remaining() {
        r.offset -= 4;
        return Err(r.error("max_rules", format!("{max_rules} does not fit the input")));
    }
    let max_devices = r.i32("max_devices")?;
    let mut map = CrushMap {
        max_devices,
        tunables: Tunables::profile("legacy").unwrap_or_default(),
        ..CrushMap::default()
    };
    for slot in 0..max_buckets as usize {
        r.context = format!("bucket slot {slot}");
        map.buckets.push(decode_bucket(r)?);
    }
    for slot in 0..max_rules {
        r.context = format!("rule {slot}");
        map.rules.push(decode_rule(r)?);
    }
    r.context.clear();
    map.type_names = r.name_map("type names")?;
    map.item_names = r.name_map("item names")?;
    map.rule_names = r.name_map("rule names")?;
    decode_tunables(r, &mut map.tunables)?;
    if !r.at_end() {
        decode_classes(r, &mut map)?;
    }
    if !r.at_end() {
        decode_choose_args(r, &mut map)?;
    }
    r.context.clear();
    Ok(map)
}

fn decode_bucket(r: &mut Reader) -> Result<Option<Bucket>> {
    let alg = r.u32("algorithm")?;
    if alg == 0 {
        return Ok(None);
    }
    let Some(algorithm) = u8::try_from(alg).ok().and_then(BucketAlgorithm::from_code) else {
        r.offset -= 4;
        return Err(r.error("algorithm", format!("unsupported bucket algorithm {alg}")));
    };
    let id = r.i32("id")?;
    let type_id = r.u16("type")?;
    let inner_alg = r.u8("alg")?;
    if inner_alg != algorithm.code() {
        r.offset -= 1;
        return Err(r.error(
            "alg",
            format!("{inner_alg} disagrees with the slot's {alg}"),
        ));
    }
    let hash = r.u8("hash")?;
    let weight = r.u32("weight")?;
    let size = r.count("size", 4)?;
    let items = (0..size)
        .map(|_| r.i32("items"))
        .collect::<Result<Vec<i32>>>()?;
    let data = match algorithm {
        BucketAlgorithm::Uniform => BucketData::Uniform {
            item_weight: r.u32("item_weight")?,
        },
        BucketAlgorithm::List => {
            let pairs = r.u32_vec("item_weights/sum_weights", 2 * size)?;
            BucketData::List {
                item_weights: pairs.iter().step_by(2).copied().collect(),
                sum_weights: pairs.iter().skip(1).step_by(2).copied().collect(),
            }
        }
        BucketAlgorithm::Tree => {
            let num_nodes = r.u8("num_nodes")?;
            BucketData::Tree {
                num_nodes,
                node_weights: r.u32_vec("node_weights", usize::from(num_nodes))?,
            }
        }
        BucketAlgorithm::Straw => {
            let pairs = r.u32_vec("item_weights/straws", 2 * size)?;
            BucketData::Straw {
                item_weights: pairs.iter().step_by(2).copied().collect(),
                straws: pairs.iter().skip(1).step_by(2).copied().collect(),
            }
        }
        BucketAlgorithm::Straw2 => BucketData::Straw2 {
            item_weights: r.u32_vec("item_weights", size)?,
        },
    };
    Ok(Some(Bucket {
        id,
        type_id,
        algorithm,
        hash,
        weight,
        items,
        data,
    }))
}

fn decode_rule(r: &mut Reader) -> Result<Option<Rule>> {
    let present = r.u32("present")?;
    if present == 0 {
        return Ok(None);
    }
    let len = r.count("len", 12)?;
    let ruleset = r.u8("mask.ruleset")?;
    let rule_type = r.u8("mask.type")?;
    let min_size = r.u8("mask.min_size")?;
    let max_size = r.u8("mask.max_size")?;
    let mut steps = Vec::with_capacity(len);
    for j in 0..len {
        let op = r.u32("step op")?;
        let arg1 = r.i32("step arg1")?;
        let arg2 = r.i32("step arg2")?;
        let Some(step) = RuleStep::from_raw(op, arg1, arg2) else {
            r.offset -= 12;
            return Err(r.error(&format!("step {j}"), format!("unknown opcode {op}")));
        };
        steps.push(step);
    }
    Ok(Some(Rule {
        ruleset,
        rule_type,
        min_size,
        max_size,
        steps,
    }))
}

/// Tunables, each group optional at the end of older maps (legacy values stay then).
fn decode_tunables(r: &mut Reader, t: &mut Tunables) -> Result<()> {
    if !r.at_end() {
        t.choose_local_tries = r.u32("choose_local_tries")?;
        t.choose_local_fallback_tries = r.u32("choose_local_fallback_tries")?;
        t.choose_total_tries = r.u32("choose_total_tries")?;
    }
    if !r.at_end() {
        t.chooseleaf_descend_once = r.u32("chooseleaf_descend_once")?;
    }
    if !r.at_end() {
        t.chooseleaf_vary_r = r.u8("chooseleaf_vary_r")?;
    }
    if !r.at_end() {
        t.straw_calc_version = r.u8("straw_calc_version")?;
    }
    if !r.at_end() {
        t.allowed_bucket_algs = r.u32("allowed_bucket_algs")?;
    }
    if !r.at_end() {
        t.chooseleaf_stable = r.u8("chooseleaf_stable")?;
    }
    Ok(())
}

fn decode_classes(r: &mut Reader, map: &mut CrushMap) -> Result<()> {
    let n = r.count("class_map", 8)?;
    for _ in 0..n {
        let device = r.i32("class_map device")?;
        let class = r.i32("class_map class")?;
        map.device_classes.insert(device, class);
    }
    let n = r.count("class_name", 8)?;
    for _ in 0..n {
        let class = r.i32("class_name id")?;
        let name = r.string("class_name name")?;
        map.class_names.insert(class, name);
    }
    let n = r.count("class_bucket", 8)?;
    for _ in 0..n {
        let bucket = r.i32("class_bucket bucket")?;
        let m = r.count("class_bucket classes", 8)?;
        let mut by_class = BTreeMap::new();
        for _ in 0..m {
            let class = r.i32("class_bucket class")?;
            let shadow = r.i32("class_bucket shadow")?;
            by_class.insert(class, shadow);
        }
        map.class_buckets.insert(bucket, by_class);
    }
    Ok(())
}

fn decode_choose_args(r: &mut Reader, map: &mut CrushMap) -> Result<()> {
    let sets = r.count("choose_args", 12)?;
    for _ in 0..sets {
        let index = r.i64("choose_args index")?;
        r.context = format!("choose_args {index}");
        let n = r.count("bucket count", 12)?;
        let mut args = ChooseArgMap::new();
        for _ in 0..n {
            let slot = r.u32("bucket index")?;
            let Some(bucket) = map.buckets.get(slot as usize).and_then(|b| b.as_ref()) else {
                r.offset -= 4;
                return Err(r.error("bucket index", format!("no bucket in slot {slot}")));
            };
            let (bucket_id, bucket_size) = (bucket.id, bucket.items.len());
            let positions = r.count("weight_set_positions", 4)?;
            let mut weight_set = Vec::with_capacity(positions);
            for _ in 0..positions {
                let size = r.count("weight_set size", 4)?;
                weight_set.push(r.u32_vec("weight_set weights", size)?);
            }
            let ids_size = r.count("ids_size", 4)?;
            if ids_size != 0 && ids_size != bucket_size {
                r.offset -= 4;
                return Err(r.error(
                    "ids_size",
                    format!("{ids_size} ids for a bucket of {bucket_size}"),
                ));
            }
            let ids = (0..ids_size)
                .map(|_| r.i32("ids"))
                .collect::<Result<Vec<i32>>>()?;
            if !weight_set.is_empty() || !ids.is_empty() {
                args.insert(bucket_id, ChooseArg { ids, weight_set });
            }
        }
        map.choose_args.insert(index, args);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_names_the_magic() {
        match decode(&[]) {
            Err(CrushError::Decode { offset, field, .. }) => {
                assert_eq!(offset, 0);
                assert_eq!(field, "magic");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn minimal_map_round_trips() {
        let map = CrushMap {
            tunables: Tunables::profile("jewel").unwrap_or_default(),
            ..CrushMap::default()
        };
        let bytes = encode(&map);
        let decoded = decode(&bytes).expect("decode");
        assert_eq!(decoded, map);
        assert_eq!(encode(&decoded), bytes);
    }
}
