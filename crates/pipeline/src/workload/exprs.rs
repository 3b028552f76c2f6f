//! A declaration's expressions, parsed once (in the language of tune constraints,
//! `repro_expr`) and evaluated per shape and variant: argument extents,
//! quantization blocks, scalar values and launch geometry.

use super::problem::{path, Problem};
use super::spec::{Arg, Declaration, ExprText, Launch, RefArg, ScalarValue};
use repro_expr::{EvalError, Expr};
use std::collections::BTreeMap;

/// Names and their values: a shape's dimensions, and for launch geometry the defines.
pub type Bindings = BTreeMap<String, i64>;

/// One parsed expression and where it is written.
#[derive(Debug, Clone)]
pub(super) struct Located {
    expr: Expr,
    text: String,
    path: Vec<String>,
}

impl Located {
    pub(super) fn parse(
        text: &ExprText,
        known: &[&str],
        path: Vec<String>,
    ) -> Result<Located, Problem> {
        Expr::parse(&text.0, known)
            .map(|expr| Located {
                expr,
                text: text.0.clone(),
                path: path.clone(),
            })
            .map_err(|e| {
                Problem::at(
                    path,
                    format!("cannot read `{}`: {}", text.0, e.message),
                    "an expression of integers, names, `+ - * / %`, comparisons and parentheses",
                )
                .in_expr(e.col)
            })
    }

    /// The value under `b`; `what` names the bindings in messages (`shape \`small\``).
    pub(super) fn eval(&self, b: &Bindings, what: &str) -> Result<i64, Problem> {
        self.expr.eval(b).map_err(|e| {
            let (col, why, help) = match e {
                EvalError::Absent { name, col } => (
                    col,
                    format!("`{name}` has no value"),
                    format!(
                        "give `{name}` a value in the variant's defines or in `launch.defines`"
                    ),
                ),
                EvalError::DivisionByZero { col } => {
                    (col, "it divides by zero".into(), "guard the divisor".into())
                }
                EvalError::Overflow { col } => (
                    col,
                    "it overflows 64 bits".into(),
                    "check the dimensions".into(),
                ),
            };
            Problem::at(
                self.path.clone(),
                format!("`{}` cannot be evaluated for {what}: {why}", self.text),
                help,
            )
            .in_expr(col)
        })
    }

    /// The value under `b`, which must be at least `min`.
    fn at_least(&self, min: i64, b: &Bindings, what: &str) -> Result<i64, Problem> {
        let v = self.eval(b, what)?;
        if v < min {
            return Err(Problem::at(
                self.path.clone(),
                format!(
                    "`{}` is {v} for {what}; it must be at least {min}",
                    self.text
                ),
                format!("with {}", show(b, &self.expr.params())),
            )
            .in_expr(1));
        }
        Ok(v)
    }
}

/// `rows = 4, hidden = 1024`: the bindings an expression read.
fn show(b: &Bindings, names: &[String]) -> String {
    names
        .iter()
        .filter_map(|n| b.get(n).map(|v| format!("{n} = {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A scalar's value, parsed.
#[derive(Debug, Clone)]
enum ScalarExpr {
    Float(f64),
    Int(Located),
    Pow(Located, f64),
}

/// A scalar argument's value for one shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(x) => x,
        }
    }
}

/// Grid, block and dynamic shared memory of one launch, as evaluated (checked against
/// limits by `super::limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub grid: [i64; 3],
    pub block: [i64; 3],
    pub smem: i64,
}

#[derive(Debug, Clone)]
struct LaunchExprs {
    grid: Vec<Located>,
    block: Vec<Located>,
    smem: Option<Located>,
    requires: Vec<Located>,
    defaults: Bindings,
}

impl LaunchExprs {
    /// Parse `l`; its expressions may read `known`, its `defines` and its `globals`.
    fn parse(l: &Launch, known: &[&str], at: &[String]) -> Result<LaunchExprs, Vec<Problem>> {
        let mut known = known.to_vec();
        known.extend(l.defines.keys().map(String::as_str));
        known.extend(l.globals.iter().map(String::as_str));
        let known = known.as_slice();
        let mut problems = Vec::new();
        let mut list = |key: &str, items: &[ExprText]| -> Vec<Located> {
            let mut here: Vec<String> = at.to_vec();
            here.push(key.into());
            if key != "requires" && (items.is_empty() || items.len() > 3) {
                problems.push(Problem::at(
                    here.clone(),
                    format!(
                        "`{key}` has {} extents; a launch has 1 to 3 (x, y, z)",
                        items.len()
                    ),
                    format!("write `{key}: [x]`, `[x, y]` or `[x, y, z]`"),
                ));
            }
            items
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    let mut p = here.clone();
                    p.push(i.to_string());
                    Located::parse(t, known, p)
                        .map_err(|e| problems.push(e))
                        .ok()
                })
                .collect()
        };
        let grid = list("grid", &l.grid);
        let block = list("block", &l.block);
        let requires = list("requires", &l.requires);
        let smem = l.smem.as_ref().and_then(|t| {
            let mut p: Vec<String> = at.to_vec();
            p.push("smem".into());
            Located::parse(t, known, p)
                .map_err(|e| problems.push(e))
                .ok()
        });
        if problems.is_empty() {
            Ok(LaunchExprs {
                grid,
                block,
                smem,
                requires,
                defaults: l.defines.clone(),
            })
        } else {
            Err(problems)
        }
    }

    /// The names' values: the dims, then the variant's defines (and the cubin's globals),
    /// then the launch's default defines.
    fn bindings(&self, dims: &Bindings, values: &Bindings) -> Bindings {
        let mut b = self.defaults.clone();
        b.extend(values.iter().map(|(k, v)| (k.clone(), *v)));
        b.extend(dims.iter().map(|(k, v)| (k.clone(), *v)));
        b
    }

    /// The first of `requires` that does not hold.
    fn unmet(
        &self,
        dims: &Bindings,
        values: &Bindings,
        what: &str,
    ) -> Result<Option<String>, Problem> {
        let b = self.bindings(dims, values);
        for r in &self.requires {
            if r.eval(&b, what)? == 0 {
                return Ok(Some(r.text.clone()));
            }
        }
        Ok(None)
    }

    fn eval(&self, dims: &Bindings, values: &Bindings, what: &str) -> Result<Geometry, Problem> {
        let b = self.bindings(dims, values);
        let three = |items: &[Located]| -> Result<[i64; 3], Problem> {
            let mut out = [1; 3];
            for (slot, e) in out.iter_mut().zip(items) {
                *slot = e.at_least(1, &b, what)?;
            }
            Ok(out)
        };
        Ok(Geometry {
            grid: three(&self.grid)?,
            block: three(&self.block)?,
            smem: match &self.smem {
                Some(e) => e.at_least(0, &b, what)?,
                None => 0,
            },
        })
    }
}

/// A declaration with every expression parsed.
#[derive(Debug, Clone)]
pub struct Compiled<'d> {
    pub name: &'d str,
    pub decl: &'d Declaration,
    shapes: Vec<Vec<Located>>,
    blocks: Vec<Vec<Located>>,
    scalars: Vec<Option<ScalarExpr>>,
    launch: LaunchExprs,
    reference_launch: Option<LaunchExprs>,
    /// Per reference argument: the value of an extra scalar.
    reference_scalars: Vec<Option<ScalarExpr>>,
}

impl<'d> Compiled<'d> {
    /// Parse every expression of `decl`. Extents, blocks and values may name the dims;
    /// launch geometry also `defines` (every define a variant of the workload sets).
    pub fn new(
        name: &'d str,
        decl: &'d Declaration,
        defines: &[&str],
    ) -> Result<Compiled<'d>, Vec<Problem>> {
        let dims: Vec<&str> = decl.dims.iter().map(String::as_str).collect();
        let mut launch_names = dims.clone();
        launch_names.extend(defines);
        let mut problems = Vec::new();
        let mut shapes = Vec::new();
        let mut blocks = Vec::new();
        let mut scalars = Vec::new();
        for (i, arg) in decl.args.iter().enumerate() {
            let at = |rest: &[&str]| {
                let mut p = path(name, &["args", &i.to_string()]);
                p.extend(rest.iter().map(|s| s.to_string()));
                p
            };
            let mut list = |texts: &[ExprText], key: &str| -> Vec<Located> {
                texts
                    .iter()
                    .enumerate()
                    .filter_map(|(j, t)| {
                        Located::parse(t, &dims, at(&[key, &j.to_string()]))
                            .map_err(|e| problems.push(e))
                            .ok()
                    })
                    .collect()
            };
            shapes.push(list(&arg.shape, "shape"));
            let block = arg.quantize.as_ref().map(|q| q.block.as_slice());
            blocks.push(list(block.unwrap_or_default(), "block"));
            scalars.push(
                scalar(arg, &dims, at(&["value"]))
                    .map_err(|e| problems.push(e))
                    .ok()
                    .flatten(),
            );
        }
        let launch = LaunchExprs::parse(&decl.launch, &launch_names, &path(name, &["launch"]))
            .map_err(|e| problems.extend(e))
            .ok();
        let reference_launch = decl.reference.launch.as_ref().and_then(|l| {
            LaunchExprs::parse(l, &dims, &path(name, &["reference", "launch"]))
                .map_err(|e| problems.extend(e))
                .ok()
        });
        let reference_scalars = decl
            .reference
            .args
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, a)| match a {
                RefArg::Name(_) => None,
                RefArg::Extra(arg) => {
                    let at = path(name, &["reference", "args", &i.to_string(), "value"]);
                    scalar(arg, &dims, at)
                        .map_err(|e| problems.push(e))
                        .ok()
                        .flatten()
                }
            })
            .collect();
        match launch {
            Some(launch) if problems.is_empty() => Ok(Compiled {
                name,
                decl,
                shapes,
                blocks,
                scalars,
                launch,
                reference_launch,
                reference_scalars,
            }),
            _ => Err(problems),
        }
    }

    /// The dimensions of shape `shape` as bindings (`None`: no such shape).
    pub fn dims(&self, shape: &str) -> Option<Bindings> {
        self.decl.shape_dims(shape)
    }

    /// The extents of argument `i` (empty for a scalar), each at least 1.
    pub fn extents(&self, i: usize, dims: &Bindings, what: &str) -> Result<Vec<usize>, Problem> {
        extents(&self.shapes[i], dims, what)
    }

    /// The quantization block of argument `i`, in its trailing dimensions.
    pub fn block(&self, i: usize, dims: &Bindings, what: &str) -> Result<Vec<usize>, Problem> {
        extents(&self.blocks[i], dims, what)
    }

    /// The value of scalar argument `i`.
    pub fn scalar(&self, i: usize, dims: &Bindings, what: &str) -> Result<Number, Problem> {
        let e = self.scalars[i]
            .as_ref()
            .expect("a scalar has a value (validated)");
        scalar_value(e, dims, what)
    }

    /// The value of the reference's extra scalar at position `i` of `reference.args`.
    pub fn reference_scalar(
        &self,
        i: usize,
        dims: &Bindings,
        what: &str,
    ) -> Result<Number, Problem> {
        let e = self.reference_scalars[i]
            .as_ref()
            .expect("an extra reference argument is a scalar with a value (validated)");
        scalar_value(e, dims, what)
    }

    /// The kernel's launch for `dims` and `values`: a variant's defines, and the globals
    /// of its cubin when the launch reads any.
    pub fn launch(
        &self,
        dims: &Bindings,
        values: &Bindings,
        what: &str,
    ) -> Result<Geometry, Problem> {
        self.launch.eval(dims, values, what)
    }

    /// The first `launch.requires` condition that does not hold for `dims` and `values`
    /// (that variant cannot run that shape).
    pub fn unmet(
        &self,
        dims: &Bindings,
        values: &Bindings,
        what: &str,
    ) -> Result<Option<String>, Problem> {
        self.launch.unmet(dims, values, what)
    }

    /// The reference kernel's launch for `dims` (`None`: the reference is a command).
    pub fn reference_launch(
        &self,
        dims: &Bindings,
        what: &str,
    ) -> Option<Result<Geometry, Problem>> {
        self.reference_launch
            .as_ref()
            .map(|l| l.eval(dims, &Bindings::new(), what))
    }
}

fn extents(list: &[Located], dims: &Bindings, what: &str) -> Result<Vec<usize>, Problem> {
    list.iter()
        .map(|e| e.at_least(1, dims, what).map(|v| v as usize))
        .collect()
}

fn scalar(arg: &Arg, known: &[&str], at: Vec<String>) -> Result<Option<ScalarExpr>, Problem> {
    Ok(match &arg.value {
        None => None,
        Some(ScalarValue::Float(x)) => Some(ScalarExpr::Float(*x)),
        Some(ScalarValue::Int(t)) => Some(ScalarExpr::Int(Located::parse(t, known, at)?)),
        Some(ScalarValue::Pow { pow: (t, p) }) => {
            let mut base = at;
            base.extend(["pow".to_string(), "0".to_string()]);
            Some(ScalarExpr::Pow(Located::parse(t, known, base)?, *p))
        }
    })
}

fn scalar_value(e: &ScalarExpr, dims: &Bindings, what: &str) -> Result<Number, Problem> {
    Ok(match e {
        ScalarExpr::Float(x) => Number::Float(*x),
        ScalarExpr::Int(l) => Number::Int(l.eval(dims, what)?),
        ScalarExpr::Pow(l, p) => Number::Float((l.eval(dims, what)? as f64).powf(*p)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::testing::rmsnorm;

    #[test]
    fn evaluates_extents_values_and_launch_per_shape_and_variant() {
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &["ROWS_PER_BLOCK", "THREADS_PER_ROW"]).unwrap();
        let dims = c.dims("ragged").unwrap();
        assert_eq!(c.extents(0, &dims, "shape `ragged`").unwrap(), [33, 1001]);
        assert_eq!(c.extents(1, &dims, "").unwrap(), [1001]);
        assert_eq!(c.scalar(4, &dims, "").unwrap(), Number::Int(1001));
        assert_eq!(c.scalar(5, &dims, "").unwrap(), Number::Float(1e-6));
        let defines = Bindings::from([("ROWS_PER_BLOCK".into(), 4)]);
        let g = c.launch(&dims, &defines, "").unwrap();
        // 33 rows, 4 per block; THREADS_PER_ROW from launch.defines (128).
        assert_eq!(
            g,
            Geometry {
                grid: [9, 1, 1],
                block: [512, 1, 1],
                smem: 0
            }
        );
        let r = c.reference_launch(&dims, "").unwrap().unwrap();
        assert_eq!(r.grid, [33, 1, 1]);
    }

    #[test]
    fn parse_errors_name_the_expression_and_column() {
        let mut decl = rmsnorm();
        decl.args[0].shape[1] = ExprText("hiden * 2".into());
        decl.launch.grid[0] = ExprText("rows +".into());
        let problems = Compiled::new("rmsnorm", &decl, &[]).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert_eq!(
            problems[0].path.join("."),
            "workloads.rmsnorm.args.0.shape.1"
        );
        assert_eq!(problems[0].col, Some(1));
        assert!(
            problems[0].message.contains("did you mean `hidden`?"),
            "{}",
            problems[0].message
        );
        assert_eq!(
            problems[1].path.join("."),
            "workloads.rmsnorm.launch.grid.0"
        );
        assert_eq!(problems[1].col, Some(7));
    }

    #[test]
    fn evaluation_errors_say_which_shape_and_why() {
        let mut decl = rmsnorm();
        decl.args[1].shape[0] = ExprText("hidden - 1001".into());
        decl.args[4].value = Some(ScalarValue::Int(ExprText("hidden / (rows - 33)".into())));
        decl.launch.defines.clear();
        let c = Compiled::new("rmsnorm", &decl, &["ROWS_PER_BLOCK", "THREADS_PER_ROW"]).unwrap();
        let dims = c.dims("ragged").unwrap();
        let p = c.extents(1, &dims, "shape `ragged`").unwrap_err();
        assert_eq!(
            p.message,
            "`hidden - 1001` is 0 for shape `ragged`; it must be at least 1"
        );
        assert_eq!(p.help, "with hidden = 1001");
        let p = c.scalar(4, &dims, "shape `ragged`").unwrap_err();
        assert_eq!((p.col, p.help.as_str()), (Some(8), "guard the divisor"));
        let p = c.launch(&dims, &Bindings::new(), "shape `ragged`, variant `v`");
        assert!(p
            .unwrap_err()
            .message
            .contains("`ROWS_PER_BLOCK` has no value"));
    }

    #[test]
    fn pow_values_and_launch_arity() {
        let mut decl = rmsnorm();
        decl.args[5].value = Some(ScalarValue::Pow {
            pow: (ExprText("hidden".into()), -0.5),
        });
        decl.launch.block = vec![];
        let problems = Compiled::new("rmsnorm", &decl, &[]).unwrap_err();
        assert_eq!(
            problems[0].message,
            "`block` has 0 extents; a launch has 1 to 3 (x, y, z)"
        );
        decl.launch.block = vec![ExprText("32".into())];
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let v = c.scalar(5, &c.dims("small").unwrap(), "").unwrap();
        assert_eq!(v, Number::Float(1.0 / 32.0));
    }
}
