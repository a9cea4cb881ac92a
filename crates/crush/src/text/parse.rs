//! The crushmap grammar of Ceph 16.2 (`src/crush/grammar.h`) as a PEG over the joined source,
//! producing declarations with their source lines. Only syntax is checked here; names, ids and
//! weights are checked by [`super::compiler`], in the order Ceph checks them.
//!
//! ```text
//! crushmap    := (tunable | device | type)* (bucket | rule)* choose_args* END
//! tunable     := "tunable" name posint
//! device      := "device" posint name ("class" name)?
//! type        := "type" posint name
//! bucket      := name name "{" ("id" negint ("class" name)?)* "alg" name
//!                ("hash" (integer | "rjenkins1"))* ("item" name ("weight" real)? ("pos" posint)?)* "}"
//! rule        := "rule" name? "{" ("id" | "ruleset") posint "type" ("replicated" | "erasure")
//!                "min_size" posint "max_size" posint step+ "}"
//! step        := "step" ( "take" name ("class" name)? | "set_choose_tries" posint | ...
//!                | ("choose" | "chooseleaf") ("indep" | "firstn") integer "type" name | "emit" )
//! choose_args := "choose_args" posint "{" ("{" "bucket_id" negint
//!                ("weight_set" "[" ("[" real* "]")* "]")? ("ids" "[" integer* "]")? "}")* "}"
//! ```

use super::lexer::{c_int, weight_16_16, Cursor, Source};
use crate::error::{CrushError, Result};
use crate::map::{RULE_TYPE_ERASURE, RULE_TYPE_REPLICATED};

/// `tunable NAME VALUE`.
#[derive(Debug, Clone)]
pub(crate) struct TunableDecl {
    pub line: usize,
    pub name: String,
    pub value: i32,
}

/// `device ID NAME [class CLASS]`.
#[derive(Debug, Clone)]
pub(crate) struct DeviceDecl {
    pub line: usize,
    pub id: i32,
    pub name: String,
    pub class: Option<String>,
}

/// `type ID NAME`.
#[derive(Debug, Clone)]
pub(crate) struct TypeDecl {
    pub id: i32,
    pub name: String,
}

/// `id -N [class C]` inside a bucket.
#[derive(Debug, Clone)]
pub(crate) struct BucketIdDecl {
    pub line: usize,
    pub id: i32,
    pub class: Option<String>,
}

/// `item NAME [weight W] [pos P]`; the weight already in 16.16 as Ceph converts it.
#[derive(Debug, Clone)]
pub(crate) struct ItemDecl {
    pub line: usize,
    pub name: String,
    pub weight: Option<u32>,
    pub position: Option<i32>,
}

/// A bucket block.
#[derive(Debug, Clone)]
pub(crate) struct BucketDecl {
    pub line: usize,
    pub type_name: String,
    pub name: String,
    pub ids: Vec<BucketIdDecl>,
    pub alg_line: usize,
    pub alg: String,
    /// Each `hash` line's value (`rjenkins1` = 0), in order; the last one wins.
    pub hashes: Vec<i32>,
    pub items: Vec<ItemDecl>,
}

/// One rule step.
#[derive(Debug, Clone)]
pub(crate) enum StepKind {
    Take {
        item: String,
        class: Option<String>,
    },
    SetChooseTries(i32),
    SetChooseLocalTries(i32),
    SetChooseLocalFallbackTries(i32),
    SetChooseLeafTries(i32),
    SetChooseLeafVaryR(i32),
    SetChooseLeafStable(i32),
    Choose {
        leaf: bool,
        indep: bool,
        count: i32,
        type_name: String,
    },
    Emit,
}

#[derive(Debug, Clone)]
pub(crate) struct StepDecl {
    pub line: usize,
    pub kind: StepKind,
}

/// A rule block.
#[derive(Debug, Clone)]
pub(crate) struct RuleDecl {
    pub line: usize,
    pub name: Option<String>,
    pub id: i32,
    pub rule_type: u8,
    pub min_size: i32,
    pub max_size: i32,
    pub steps: Vec<StepDecl>,
}

/// `{ bucket_id -N [weight_set [...]] [ids [...]] }`.
#[derive(Debug, Clone)]
pub(crate) struct ChooseArgDecl {
    pub line: usize,
    pub bucket_id: i32,
    pub weight_set: Option<Vec<Vec<u32>>>,
    pub ids: Option<Vec<i32>>,
}

/// `choose_args N { ... }`.
#[derive(Debug, Clone)]
pub(crate) struct ChooseArgsDecl {
    pub line: usize,
    pub index: i32,
    pub args: Vec<ChooseArgDecl>,
}

/// One top-level statement.
#[derive(Debug, Clone)]
pub(crate) enum Statement {
    Tunable(TunableDecl),
    Device(DeviceDecl),
    Type(TypeDecl),
    Bucket(BucketDecl),
    Rule(RuleDecl),
    ChooseArgs(ChooseArgsDecl),
}

/// Parse a whole source text into statements, or a `Parse` error naming the line of the
/// farthest point the grammar could reach.
pub(crate) fn parse(source_text: &str) -> Result<Vec<Statement>> {
    let source = Source::new(source_text);
    let mut parser = Parser {
        cursor: Cursor::new(&source.text),
        source: &source,
    };
    let statements = parser.crushmap();
    match statements {
        Some(statements) => Ok(statements),
        None => Err(parser
            .misplaced_statement()
            .unwrap_or_else(|| parser.syntax_error())),
    }
}

struct Parser<'s> {
    cursor: Cursor<'s>,
    source: &'s Source,
}

/// Run `body` as one PEG alternative: on failure the cursor goes back to where it started.
macro_rules! attempt {
    ($parser:expr, $body:expr) => {{
        let saved = $parser.cursor.position;
        let result = $body;
        if result.is_none() {
            $parser.cursor.position = saved;
        }
        result
    }};
}

impl<'s> Parser<'s> {
    /// A statement that would parse but sits in the wrong section (the grammar wants tunables,
    /// devices and types first, then buckets and rules, then choose_args): say so plainly.
    fn misplaced_statement(&mut self) -> Option<CrushError> {
        let stopped_at = self.cursor.position;
        let line = self.source.line_of(stopped_at);
        let early = attempt!(self, self.tunable())
            .or_else(|| attempt!(self, self.device()))
            .or_else(|| attempt!(self, self.type_decl()))
            .is_some();
        self.cursor.position = stopped_at;
        let middle = !early
            && (attempt!(self, self.bucket()).or_else(|| attempt!(self, self.rule()))).is_some();
        self.cursor.position = stopped_at;
        let message = if early {
            "tunable, device and type lines must come before buckets, rules and choose_args"
        } else if middle {
            "buckets and rules must come before choose_args"
        } else {
            return None;
        };
        Some(CrushError::Parse {
            line,
            message: message.to_string(),
        })
    }

    fn syntax_error(&self) -> CrushError {
        let at = self.cursor.farthest;
        let found: String = self
            .source
            .text
            .get(at..)
            .unwrap_or("")
            .split(' ')
            .next()
            .unwrap_or("")
            .chars()
            .take(40)
            .collect();
        let mut wanted: Vec<String> = self.cursor.expected.iter().map(|e| e.describe()).collect();
        wanted.dedup();
        let found = if found.is_empty() {
            "end of input".to_string()
        } else {
            format!("'{found}'")
        };
        CrushError::Parse {
            line: self.source.line_of(at),
            message: format!(
                "syntax error: expected {} but found {found}",
                wanted.join(" or ")
            ),
        }
    }

    /// The line of the next token.
    fn line_here(&mut self) -> usize {
        self.cursor.skip_spaces();
        self.source.line_of(self.cursor.position)
    }

    fn crushmap(&mut self) -> Option<Vec<Statement>> {
        let mut statements = Vec::new();
        loop {
            let statement = attempt!(self, self.tunable())
                .or_else(|| attempt!(self, self.device()))
                .or_else(|| attempt!(self, self.type_decl()));
            match statement {
                Some(statement) => statements.push(statement),
                None => break,
            }
        }
        loop {
            let statement = attempt!(self, self.bucket()).or_else(|| attempt!(self, self.rule()));
            match statement {
                Some(statement) => statements.push(statement),
                None => break,
            }
        }
        while let Some(statement) = attempt!(self, self.choose_args()) {
            statements.push(statement);
        }
        if self.cursor.at_end() {
            Some(statements)
        } else {
            None
        }
    }

    fn name(&mut self) -> Option<String> {
        self.cursor.name().map(str::to_string)
    }

    fn unsigned(&mut self) -> Option<i32> {
        self.cursor.unsigned_integer().map(c_int)
    }

    /// `"class" name`, optional.
    fn optional_class(&mut self) -> Option<String> {
        attempt!(self, {
            if self.cursor.literal("class") {
                self.name()
            } else {
                None
            }
        })
    }

    fn tunable(&mut self) -> Option<Statement> {
        let line = self.line_here();
        if !self.cursor.literal("tunable") {
            return None;
        }
        let name = self.name()?;
        let value = self.unsigned()?;
        Some(Statement::Tunable(TunableDecl { line, name, value }))
    }

    fn device(&mut self) -> Option<Statement> {
        let line = self.line_here();
        if !self.cursor.literal("device") {
            return None;
        }
        let id = self.unsigned()?;
        let name = self.name()?;
        let class = self.optional_class();
        Some(Statement::Device(DeviceDecl {
            line,
            id,
            name,
            class,
        }))
    }

    fn type_decl(&mut self) -> Option<Statement> {
        if !self.cursor.literal("type") {
            return None;
        }
        let id = self.unsigned()?;
        let name = self.name()?;
        Some(Statement::Type(TypeDecl { id, name }))
    }

    fn bucket(&mut self) -> Option<Statement> {
        let line = self.line_here();
        let type_name = self.name()?;
        let name = self.name()?;
        if !self.cursor.literal("{") {
            return None;
        }
        let mut ids = Vec::new();
        while let Some(id) = attempt!(self, self.bucket_id()) {
            ids.push(id);
        }
        let alg_line = self.line_here();
        if !self.cursor.literal("alg") {
            return None;
        }
        let alg = self.name()?;
        let mut hashes = Vec::new();
        while let Some(hash) = attempt!(self, self.bucket_hash()) {
            hashes.push(hash);
        }
        let mut items = Vec::new();
        while let Some(item) = attempt!(self, self.bucket_item()) {
            items.push(item);
        }
        if !self.cursor.literal("}") {
            return None;
        }
        Some(Statement::Bucket(BucketDecl {
            line,
            type_name,
            name,
            ids,
            alg_line,
            alg,
            hashes,
            items,
        }))
    }

    fn bucket_id(&mut self) -> Option<BucketIdDecl> {
        let line = self.line_here();
        if !self.cursor.literal("id") {
            return None;
        }
        let id = c_int(self.cursor.negative_integer()?);
        let class = self.optional_class();
        Some(BucketIdDecl { line, id, class })
    }

    fn bucket_hash(&mut self) -> Option<i32> {
        if !self.cursor.literal("hash") {
            return None;
        }
        if let Some(value) = attempt!(self, self.cursor.integer()) {
            return Some(c_int(value));
        }
        // `atoi("rjenkins1")` is never reached: the compiler maps the word to 0 itself.
        self.cursor.literal("rjenkins1").then_some(0)
    }

    fn bucket_item(&mut self) -> Option<ItemDecl> {
        let line = self.line_here();
        if !self.cursor.literal("item") {
            return None;
        }
        let name = self.name()?;
        let weight = attempt!(self, {
            if self.cursor.literal("weight") {
                self.cursor.real().map(weight_16_16)
            } else {
                None
            }
        });
        let position = attempt!(self, {
            if self.cursor.literal("pos") {
                self.unsigned()
            } else {
                None
            }
        });
        Some(ItemDecl {
            line,
            name,
            weight,
            position,
        })
    }

    fn rule(&mut self) -> Option<Statement> {
        let line = self.line_here();
        if !self.cursor.literal("rule") {
            return None;
        }
        let name = attempt!(self, self.name());
        if !self.cursor.literal("{") {
            return None;
        }
        if !(attempt!(self, self.cursor.literal("id").then_some(())).is_some()
            || self.cursor.literal("ruleset"))
        {
            return None;
        }
        let id = self.unsigned()?;
        if !self.cursor.literal("type") {
            return None;
        }
        let rule_type = if attempt!(self, self.cursor.literal("replicated").then_some(())).is_some()
        {
            RULE_TYPE_REPLICATED
        } else if self.cursor.literal("erasure") {
            RULE_TYPE_ERASURE
        } else {
            return None;
        };
        if !self.cursor.literal("min_size") {
            return None;
        }
        let min_size = self.unsigned()?;
        if !self.cursor.literal("max_size") {
            return None;
        }
        let max_size = self.unsigned()?;
        let mut steps = Vec::new();
        while let Some(step) = attempt!(self, self.step()) {
            steps.push(step);
        }
        if steps.is_empty() || !self.cursor.literal("}") {
            return None;
        }
        Some(Statement::Rule(RuleDecl {
            line,
            name,
            id,
            rule_type,
            min_size,
            max_size,
            steps,
        }))
    }

    fn step(&mut self) -> Option<StepDecl> {
        let line = self.line_here();
        if !self.cursor.literal("step") {
            return None;
        }
        let kind = attempt!(self, self.step_take())
            .or_else(|| {
                attempt!(
                    self,
                    self.step_set("set_choose_tries", StepKind::SetChooseTries)
                )
            })
            .or_else(|| {
                attempt!(
                    self,
                    self.step_set("set_choose_local_tries", StepKind::SetChooseLocalTries)
                )
            })
            .or_else(|| {
                attempt!(
                    self,
                    self.step_set(
                        "set_choose_local_fallback_tries",
                        StepKind::SetChooseLocalFallbackTries
                    )
                )
            })
            .or_else(|| {
                attempt!(
                    self,
                    self.step_set("set_chooseleaf_tries", StepKind::SetChooseLeafTries)
                )
            })
            .or_else(|| {
                attempt!(
                    self,
                    self.step_set("set_chooseleaf_vary_r", StepKind::SetChooseLeafVaryR)
                )
            })
            .or_else(|| {
                attempt!(
                    self,
                    self.step_set("set_chooseleaf_stable", StepKind::SetChooseLeafStable)
                )
            })
            .or_else(|| attempt!(self, self.step_choose("choose", false)))
            .or_else(|| attempt!(self, self.step_choose("chooseleaf", true)))
            .or_else(|| attempt!(self, self.cursor.literal("emit").then_some(StepKind::Emit)))?;
        Some(StepDecl { line, kind })
    }

    fn step_take(&mut self) -> Option<StepKind> {
        if !self.cursor.literal("take") {
            return None;
        }
        let item = self.name()?;
        let class = self.optional_class();
        Some(StepKind::Take { item, class })
    }

    fn step_set(&mut self, keyword: &'static str, make: fn(i32) -> StepKind) -> Option<StepKind> {
        if !self.cursor.literal(keyword) {
            return None;
        }
        self.unsigned().map(make)
    }

    fn step_choose(&mut self, keyword: &'static str, leaf: bool) -> Option<StepKind> {
        if !self.cursor.literal(keyword) {
            return None;
        }
        let indep = if attempt!(self, self.cursor.literal("indep").then_some(())).is_some() {
            true
        } else if self.cursor.literal("firstn") {
            false
        } else {
            return None;
        };
        let count = c_int(self.cursor.integer()?);
        if !self.cursor.literal("type") {
            return None;
        }
        let type_name = self.name()?;
        Some(StepKind::Choose {
            leaf,
            indep,
            count,
            type_name,
        })
    }

    fn choose_args(&mut self) -> Option<Statement> {
        let line = self.line_here();
        if !self.cursor.literal("choose_args") {
            return None;
        }
        let index = self.unsigned()?;
        if !self.cursor.literal("{") {
            return None;
        }
        let mut args = Vec::new();
        while let Some(arg) = attempt!(self, self.choose_arg()) {
            args.push(arg);
        }
        if !self.cursor.literal("}") {
            return None;
        }
        Some(Statement::ChooseArgs(ChooseArgsDecl { line, index, args }))
    }

    fn choose_arg(&mut self) -> Option<ChooseArgDecl> {
        let line = self.line_here();
        if !self.cursor.literal("{") || !self.cursor.literal("bucket_id") {
            return None;
        }
        let bucket_id = c_int(self.cursor.negative_integer()?);
        let weight_set = attempt!(self, self.weight_set());
        let ids = attempt!(self, self.choose_arg_ids());
        if !self.cursor.literal("}") {
            return None;
        }
        Some(ChooseArgDecl {
            line,
            bucket_id,
            weight_set,
            ids,
        })
    }

    fn weight_set(&mut self) -> Option<Vec<Vec<u32>>> {
        if !self.cursor.literal("weight_set") || !self.cursor.literal("[") {
            return None;
        }
        let mut positions = Vec::new();
        while let Some(weights) = attempt!(self, self.weight_list()) {
            positions.push(weights);
        }
        self.cursor.literal("]").then_some(positions)
    }

    fn weight_list(&mut self) -> Option<Vec<u32>> {
        if !self.cursor.literal("[") {
            return None;
        }
        let mut weights = Vec::new();
        while let Some(real) = attempt!(self, self.cursor.real()) {
            weights.push(weight_16_16(real));
        }
        self.cursor.literal("]").then_some(weights)
    }

    fn choose_arg_ids(&mut self) -> Option<Vec<i32>> {
        if !self.cursor.literal("ids") || !self.cursor.literal("[") {
            return None;
        }
        let mut ids = Vec::new();
        while let Some(id) = attempt!(self, self.cursor.integer()) {
            ids.push(c_int(id));
        }
        self.cursor.literal("]").then_some(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error_line(text: &str) -> usize {
        match parse(text) {
            Err(CrushError::Parse { line, .. }) => line,
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn statements_parse_with_lines() {
        let statements = parse(
            "tunable choose_total_tries 50\ndevice 0 osd.0 class ssd\ntype 0 osd\n\
             host h { id -1\n alg straw2 hash 0 item osd.0 weight 1.5 pos 0 }\n\
             rule r { id 0 type replicated min_size 1 max_size 10\n step take h class ssd\n\
             step chooseleaf firstn 0 type osd step emit }\n\
             choose_args 0 { { bucket_id -1 weight_set [ [ 2.0 ] ] ids [ 7 ] } }",
        )
        .expect("parses");
        assert_eq!(statements.len(), 6);
        match &statements[3] {
            Statement::Bucket(bucket) => {
                assert_eq!(bucket.line, 4);
                assert_eq!(bucket.items[0].line, 5);
                assert_eq!(bucket.items[0].weight, Some(0x18000));
                assert_eq!(bucket.items[0].position, Some(0));
            }
            other => panic!("{other:?}"),
        }
        match &statements[4] {
            Statement::Rule(rule) => {
                assert_eq!(rule.steps.len(), 3);
                assert_eq!(rule.steps[0].line, 7);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn syntax_errors_name_the_offending_line() {
        assert_eq!(
            parse_error_line(
                "device 0 osd.0\ntype 0 osd\nhost h {\n alg straw2\n item osd.0 weight x\n}"
            ),
            5
        );
        assert_eq!(
            parse_error_line("type 0 osd\nrule r {\n id 0\n type fast\n}"),
            4
        );
        assert_eq!(parse_error_line("device 0 osd.0\n\n\ndevice x osd.1"), 4);
    }

    #[test]
    fn keywords_are_prefixes_like_spirit() {
        // Spirit reads "device0" as "device" "0" and "id-1" as "id" "-1".
        assert!(parse("device0 osd.0\ntype 0 osd\nhost h { id-1 alg straw2 }").is_ok());
        // A bucket type called "type1" is eaten by the type rule and fails, as in Ceph.
        assert!(parse("type 1 type1\ntype1 h { alg straw2 }").is_err());
    }
}
