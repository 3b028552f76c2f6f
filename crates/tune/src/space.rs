//! The search space of a tune stage: discrete values per define, conditional parameters,
//! and constraints, enumerated once into the list of valid configurations.
//!
//! ```yaml
//! space:
//!   TILE_M: [32, 64, 128]
//!   USE_WARP_SPECIALIZATION: [0, 1]
//!   NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
//! constraints:
//!   - "TILE_M * TILE_N <= 8192"
//!   - "USE_WARP_SPECIALIZATION == 0 || NUM_PRODUCER_WARPS < NUM_WARPS"
//! ```
//!
//! A parameter whose `when:` is false is absent from the configuration, so two
//! configurations that differ only in an inactive parameter are the same configuration.
//! A `when:` may read only parameters declared above it. Reading a parameter where it is
//! inactive is an error, in a `when:` and in a constraint alike (a constraint silently
//! skipped would let invalid configurations through): guard the read with a short-circuit,
//! as in the second constraint above. The error says which guard to write.

use repro_expr::{EvalError, Expr};
use repro_pipeline::kind::OptionError;
use serde_yaml::Value;
use std::collections::{BTreeMap, HashMap};

/// One configuration: the active parameters and their values (sorted by name).
pub type Config = BTreeMap<String, i64>;

/// The most configurations (valid or not) a space may enumerate.
pub const MAX_CONFIGS: usize = 200_000;

/// One tunable define.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    /// Distinct values in the declared order; "neighbouring" means adjacent here.
    pub values: Vec<i64>,
    /// Active only when this holds (source text, parsed).
    pub when: Option<(String, Expr)>,
}

impl Param {
    fn active(&self, partial: &Config) -> bool {
        match &self.when {
            None => true,
            // Enumeration has already checked every condition on every partial
            // configuration it can be asked about, so errors cannot occur here.
            Some((_, cond)) => cond.holds(partial).unwrap_or(false),
        }
    }
}

/// A constraint every valid configuration satisfies.
#[derive(Debug, Clone)]
pub struct Constraint {
    pub source: String,
    pub expr: Expr,
}

/// The declared space and its valid configurations, in enumeration order.
#[derive(Debug, Clone)]
pub struct Space {
    params: Vec<Param>,
    constraints: Vec<Constraint>,
    valid: Vec<Config>,
    index: HashMap<Config, usize>,
    rejected: usize,
}

fn err(path: &[&str], message: impl Into<String>) -> OptionError {
    OptionError {
        path: path.iter().map(|s| s.to_string()).collect(),
        message: message.into(),
    }
}

fn int_values(v: &Value, path: &[&str]) -> Result<Vec<i64>, OptionError> {
    let Value::Sequence(items) = v else {
        return Err(err(
            path,
            "expected a list of integers, e.g. `[32, 64, 128]`",
        ));
    };
    let mut out: Vec<i64> = Vec::new();
    for item in items {
        let value = item.as_i64().ok_or_else(|| {
            err(
                path,
                format!(
                    "expected integers, found `{}`",
                    serde_yaml::to_string(item).unwrap_or_default().trim()
                ),
            )
        })?;
        if out.contains(&value) {
            return Err(err(path, format!("the value {value} is listed twice")));
        }
        out.push(value);
    }
    if out.is_empty() {
        return Err(err(path, "the list of values is empty"));
    }
    Ok(out)
}

impl Space {
    /// Read `space:` and `constraints:` from a tune stage's options.
    pub fn from_yaml(space: &Value, constraints: Option<&Value>) -> Result<Space, OptionError> {
        let Value::Mapping(map) = space else {
            return Err(err(
                &["space"],
                "expected a mapping of define names to value lists, e.g. `{TILE_M: [32, 64]}`",
            ));
        };
        let mut names = Vec::new();
        for key in map.keys() {
            let name = key
                .as_str()
                .ok_or_else(|| err(&["space"], "parameter names must be strings"))?;
            names.push(name.to_string());
        }
        let known: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut params = Vec::new();
        for (i, (name, value)) in names.iter().zip(map.values()).enumerate() {
            let path = ["space", name.as_str()];
            let (values, when) = match value {
                Value::Mapping(m) => {
                    for k in m.keys() {
                        let k = k.as_str().unwrap_or("?");
                        if k != "values" && k != "when" {
                            return Err(err(
                                &path,
                                format!("unknown key `{k}` (expected `values` and `when`)"),
                            ));
                        }
                    }
                    let values = m
                        .get("values")
                        .ok_or_else(|| err(&path, "missing `values: [...]`"))?;
                    let values = int_values(values, &["space", name, "values"])?;
                    let when = match m.get("when") {
                        None => None,
                        Some(w) => Some(condition(w, name, &known, i)?),
                    };
                    (values, when)
                }
                other => (int_values(other, &path)?, None),
            };
            params.push(Param {
                name: name.clone(),
                values,
                when,
            });
        }
        let mut parsed = Vec::new();
        if let Some(list) = constraints {
            let Value::Sequence(items) = list else {
                return Err(err(
                    &["constraints"],
                    "expected a list of expressions, e.g. `[\"TILE_M * TILE_N <= 8192\"]`",
                ));
            };
            for (i, item) in items.iter().enumerate() {
                let index = i.to_string();
                let path = ["constraints", index.as_str()];
                let source = item
                    .as_str()
                    .ok_or_else(|| err(&path, "expected an expression in quotes"))?;
                let expr = Expr::parse(source, &known).map_err(|e| err(&path, e.render(source)))?;
                parsed.push(Constraint {
                    source: source.to_string(),
                    expr,
                });
            }
        }
        Space::new(params, parsed)
    }

    /// Enumerate the valid configurations of `params` under `constraints`.
    pub fn new(params: Vec<Param>, constraints: Vec<Constraint>) -> Result<Space, OptionError> {
        if params.is_empty() {
            return Err(err(&["space"], "the space declares no parameters"));
        }
        let mut all = Vec::new();
        enumerate(&params, 0, &mut Config::new(), &mut all)?;
        let mut valid = Vec::new();
        for config in all.iter() {
            if satisfies(&params, &constraints, config)? {
                valid.push(config.clone());
            }
        }
        if valid.is_empty() {
            return Err(err(
                &["constraints"],
                format!(
                    "no configuration of the {} declared satisfies every constraint",
                    all.len()
                ),
            ));
        }
        let index = valid
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), i))
            .collect();
        Ok(Space {
            rejected: all.len() - valid.len(),
            params,
            constraints,
            valid,
            index,
        })
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }

    /// The valid configurations, in enumeration order (declaration order of parameters
    /// and values).
    pub fn valid(&self) -> &[Config] {
        &self.valid
    }

    /// How many configurations the constraints ruled out.
    pub fn rejected(&self) -> usize {
        self.rejected
    }

    /// Position of a configuration in [`Space::valid`], if it is valid (canonical form).
    pub fn position(&self, config: &Config) -> Option<usize> {
        self.index.get(config).copied()
    }

    /// The canonical configuration for an assignment: inactive parameters dropped, and
    /// parameters that the assignment lacks but that are active taken from `fill`.
    /// `None` when the result breaks a constraint.
    pub fn canonicalize(
        &self,
        assignment: &Config,
        mut fill: impl FnMut(&Param) -> i64,
    ) -> Option<Config> {
        let mut out = Config::new();
        for p in &self.params {
            if !p.active(&out) {
                continue;
            }
            let value = match assignment.get(&p.name) {
                Some(v) if p.values.contains(v) => *v,
                _ => fill(p),
            };
            out.insert(p.name.clone(), value);
        }
        self.index.contains_key(&out).then_some(out)
    }
}

fn condition(
    value: &Value,
    name: &str,
    known: &[&str],
    position: usize,
) -> Result<(String, Expr), OptionError> {
    let path = ["space", name, "when"];
    let source = value.as_str().ok_or_else(|| {
        err(
            &path,
            "expected an expression in quotes, e.g. \"USE_WS == 1\"",
        )
    })?;
    let expr = Expr::parse(source, known).map_err(|e| err(&path, e.render(source)))?;
    for read in expr.params() {
        let at = known.iter().position(|k| *k == read).unwrap_or(0);
        if at >= position {
            return Err(err(
                &path,
                format!(
                    "the condition reads `{read}`, which is declared {} `{name}`; a condition may only read parameters declared above it (move `{read}` up)",
                    if at == position { "as" } else { "after" }
                ),
            ));
        }
    }
    Ok((source.to_string(), expr))
}

fn enumerate(
    params: &[Param],
    at: usize,
    partial: &mut Config,
    out: &mut Vec<Config>,
) -> Result<(), OptionError> {
    let Some(p) = params.get(at) else {
        if out.len() >= MAX_CONFIGS {
            return Err(err(
                &["space"],
                format!("the space has more than {MAX_CONFIGS} configurations; narrow it"),
            ));
        }
        out.push(partial.clone());
        return Ok(());
    };
    let active = match &p.when {
        None => true,
        Some((source, cond)) => cond.holds(partial).map_err(|e| {
            err(
                &["space", &p.name, "when"],
                format!("`{source}` cannot be evaluated for {}: {e}", show(partial)),
            )
        })?,
    };
    if !active {
        return enumerate(params, at + 1, partial, out);
    }
    for v in &p.values {
        partial.insert(p.name.clone(), *v);
        enumerate(params, at + 1, partial, out)?;
    }
    partial.remove(&p.name);
    Ok(())
}

fn satisfies(
    params: &[Param],
    constraints: &[Constraint],
    config: &Config,
) -> Result<bool, OptionError> {
    for (i, c) in constraints.iter().enumerate() {
        let message = match c.expr.holds(config) {
            Ok(true) => continue,
            Ok(false) => return Ok(false),
            Err(EvalError::Absent { name, .. }) => {
                let when = params
                    .iter()
                    .find(|p| p.name == name)
                    .and_then(|p| p.when.as_ref())
                    .map_or("its condition", |(source, _)| source.as_str());
                format!(
                    "`{}` reads `{name}`, which is inactive in {} (its `when: {when}` is false); guard the read so the constraint holds there: `!({when}) || {}`",
                    c.source,
                    show(config),
                    c.source
                )
            }
            Err(e) => format!(
                "`{}` cannot be evaluated for {}: {e}",
                c.source,
                show(config)
            ),
        };
        return Err(err(&["constraints", &i.to_string()], message));
    }
    Ok(true)
}

/// A configuration as compact JSON with sorted keys: the form logs and the CSV use.
pub fn show(config: &Config) -> String {
    serde_json::to_string(config).expect("a map of integers always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(yaml: &str, constraints: &str) -> Result<Space, OptionError> {
        let space: Value = serde_yaml::from_str(yaml).unwrap();
        let constraints: Value = serde_yaml::from_str(constraints).unwrap();
        Space::from_yaml(&space, Some(&constraints))
    }

    const KERNEL_SPACE: &str = r#"
TILE_M: [32, 64, 128]
TILE_N: [32, 64, 128]
NUM_WARPS: [2, 4, 8]
USE_WARP_SPECIALIZATION: [0, 1]
NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
"#;

    #[test]
    fn conditional_parameters_are_absent_when_inactive() {
        let s = space(KERNEL_SPACE, "[]").unwrap();
        // 27 tile/warp combinations × (1 without WS + 2 with WS).
        assert_eq!(s.valid().len(), 27 * 3);
        for c in s.valid() {
            let ws = c["USE_WARP_SPECIALIZATION"];
            assert_eq!(c.contains_key("NUM_PRODUCER_WARPS"), ws == 1, "{c:?}");
        }
        // Canonical form: an inactive parameter is dropped, so these are one config.
        let mut with_inactive = s.valid()[0].clone();
        assert_eq!(with_inactive["USE_WARP_SPECIALIZATION"], 0);
        with_inactive.insert("NUM_PRODUCER_WARPS".into(), 2);
        assert_eq!(
            s.canonicalize(&with_inactive, |_| unreachable!()),
            Some(s.valid()[0].clone())
        );
        // Turning a condition on fills the newly active parameter.
        let mut on = s.valid()[0].clone();
        on.insert("USE_WARP_SPECIALIZATION".into(), 1);
        let filled = s.canonicalize(&on, |p| p.values[1]).unwrap();
        assert_eq!(filled["NUM_PRODUCER_WARPS"], 2);
    }

    #[test]
    fn constraints_prune_and_must_guard_reads_of_inactive_parameters() {
        let e = space(
            KERNEL_SPACE,
            r#"["TILE_M * TILE_N <= 8192", "NUM_PRODUCER_WARPS < NUM_WARPS"]"#,
        )
        .unwrap_err();
        assert_eq!(e.path, vec!["constraints", "1"]);
        assert_eq!(
            e.message,
            "`NUM_PRODUCER_WARPS < NUM_WARPS` reads `NUM_PRODUCER_WARPS`, which is inactive in \
             {\"NUM_WARPS\":2,\"TILE_M\":32,\"TILE_N\":32,\"USE_WARP_SPECIALIZATION\":0} (its \
             `when: USE_WARP_SPECIALIZATION == 1` is false); guard the read so the constraint \
             holds there: `!(USE_WARP_SPECIALIZATION == 1) || NUM_PRODUCER_WARPS < NUM_WARPS`"
        );
        let s = space(
            KERNEL_SPACE,
            r#"["TILE_M * TILE_N <= 8192", "!(USE_WARP_SPECIALIZATION == 1) || NUM_PRODUCER_WARPS < NUM_WARPS"]"#,
        )
        .unwrap();
        for c in s.valid() {
            assert!(c["TILE_M"] * c["TILE_N"] <= 8192);
            if let Some(p) = c.get("NUM_PRODUCER_WARPS") {
                assert!(*p < c["NUM_WARPS"]);
            }
        }
        // Tile pairs allowed: all but (128,128): 8. Warps × WS: NUM_WARPS=2 allows only
        // NPW=1 → 2 + 3 + 3 = 8 per tile pair.
        assert_eq!(s.valid().len(), 8 * 8);
        assert_eq!(s.rejected(), 81 - 64);
        let mut bad = s.valid()[0].clone();
        bad.insert("TILE_M".into(), 128);
        bad.insert("TILE_N".into(), 128);
        assert_eq!(s.canonicalize(&bad, |_| unreachable!()), None);
    }

    #[test]
    fn constraint_errors_name_the_key_and_column() {
        let e = space(KERNEL_SPACE, r#"["TILEM * TILE_N <= 8192"]"#).unwrap_err();
        assert_eq!(e.path, vec!["constraints", "0"]);
        assert!(
            e.message
                .starts_with("column 1: unknown parameter `TILEM` — did you mean `TILE_M`?"),
            "{}",
            e.message
        );
        let e = space(KERNEL_SPACE, r#"["1 <= 2", "TILE_M * <= 3"]"#).unwrap_err();
        assert_eq!(e.path, vec!["constraints", "1"]);
        assert!(e.message.contains("expected an operand after `*`"));
        let e = space(KERNEL_SPACE, r#"["TILE_M / (NUM_WARPS - 2) > 0"]"#).unwrap_err();
        assert_eq!(e.path, vec!["constraints", "0"]);
        assert!(e.message.contains("division by zero"), "{}", e.message);
        let e = space(KERNEL_SPACE, r#"["TILE_M > 1000"]"#).unwrap_err();
        assert!(e.message.contains("no configuration of the 81"));
    }

    #[test]
    fn condition_errors() {
        let later = r#"
A: {values: [1, 2], when: "B == 1"}
B: [0, 1]
"#;
        let e = space(later, "[]").unwrap_err();
        assert_eq!(e.path, vec!["space", "A", "when"]);
        assert!(e.message.contains("declared after `A`"), "{}", e.message);

        let unguarded = r#"
A: [0, 1]
B: {values: [1, 2], when: "A == 1"}
C: {values: [1, 2], when: "B == 2"}
"#;
        let e = space(unguarded, "[]").unwrap_err();
        assert_eq!(e.path, vec!["space", "C", "when"]);
        assert!(e.message.contains("`B` is inactive"), "{}", e.message);

        let guarded = r#"
A: [0, 1]
B: {values: [1, 2], when: "A == 1"}
C: {values: [1, 2], when: "A == 1 && B == 2"}
"#;
        // A=0; A=1,B=1; A=1,B=2,C∈{1,2}.
        assert_eq!(space(guarded, "[]").unwrap().valid().len(), 4);
    }

    #[test]
    fn value_errors() {
        let cases = [
            ("A: 3", vec!["space", "A"], "expected a list of integers"),
            ("A: []", vec!["space", "A"], "the list of values is empty"),
            (
                "A: [1, x]",
                vec!["space", "A"],
                "expected integers, found `x`",
            ),
            (
                "A: [1, 1]",
                vec!["space", "A"],
                "the value 1 is listed twice",
            ),
            (
                "A: {values: [1], if: x}",
                vec!["space", "A"],
                "unknown key `if`",
            ),
            ("A: {when: \"1\"}", vec!["space", "A"], "missing `values"),
            ("{}", vec!["space"], "declares no parameters"),
            ("[1]", vec!["space"], "expected a mapping"),
        ];
        for (yaml, path, message) in cases {
            let e = space(yaml, "[]").unwrap_err();
            assert_eq!(e.path, path, "{yaml}");
            assert!(e.message.contains(message), "{yaml}: {}", e.message);
        }
    }

    /// The spaces documented for the real kernel have the sizes kernels/README.md derives.
    #[test]
    fn the_kernel_spaces_have_the_documented_sizes() {
        for (file, want) in [("kernel_space.yaml", 189), ("kernel_space_full.yaml", 722)] {
            let path = format!(
                "{}/tests/fixtures/tune/{file}",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
            );
            let v: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let s = Space::from_yaml(&v["space"], v.get("constraints")).unwrap();
            assert_eq!(s.valid().len(), want, "{file}");
        }
    }
}
