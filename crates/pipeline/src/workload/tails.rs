//! The tail paths a kernel declares (`kernels.<name>.tails`): code that only some shapes
//! reach — a partial query block, a partial last KV tile, a partial tile in a reused ring
//! slot, a scalar tail — each a condition over its workload's dims and a variant's defines.
//! A bug there passes every gate unless a declared shape reaches it, so the expressions are
//! checked when pipeline.yaml loads (`file:line:column` errors), and `repro build --list`
//! says, per variant, which declared shapes reach each path.

use super::exprs::{Bindings, Located};
use super::problem::Problem;
use super::{Declaration, Workloads};
use crate::{define_value, KernelSpec, Pipeline, TailSpec};
use std::collections::BTreeSet;

/// One tail path of one variant, evaluated over its workload's shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Reach {
    pub tail: String,
    /// The `reached` expression as written (with its `when`).
    pub condition: String,
    /// The declared shapes that reach it; `None`: the variant has no such path (its
    /// `when` is false).
    pub shapes: Option<Vec<String>>,
}

impl Reach {
    /// A path the variant has that no declared shape reaches.
    pub fn unreached(&self) -> bool {
        self.shapes.as_ref().is_some_and(Vec::is_empty)
    }
}

/// A tail's expressions, parsed.
struct Parsed {
    when: Option<Located>,
    reached: Located,
}

/// `["kernels", kernel, "tails", tail, rest...]`.
fn at(kernel: &str, tail: &str, rest: &[&str]) -> Vec<String> {
    ["kernels", kernel, "tails", tail]
        .iter()
        .chain(rest)
        .map(|s| s.to_string())
        .collect()
}

/// Parse tail `tail` of `kernel`; its expressions may read `known`.
fn parse(kernel: &str, tail: &str, spec: &TailSpec, known: &[&str]) -> Result<Parsed, Problem> {
    match spec {
        TailSpec::Reached(e) => Ok(Parsed {
            when: None,
            reached: Located::parse(e, known, at(kernel, tail, &[]))?,
        }),
        TailSpec::Guarded(g) => Ok(Parsed {
            when: Some(Located::parse(&g.when, known, at(kernel, tail, &["when"]))?),
            reached: Located::parse(&g.reached, known, at(kernel, tail, &["reached"]))?,
        }),
    }
}

/// A variant's integer defines over the kernel's `defaults` and the workload's
/// `launch.defines`.
fn define_bindings(
    decl: &Declaration,
    kernel: &KernelSpec,
    variant: &str,
    p: &Pipeline,
) -> Bindings {
    let mut b = decl.launch.defines.clone();
    b.extend(kernel.defaults.iter().map(|(k, v)| (k.clone(), *v)));
    let defines = p
        .variants
        .get(variant)
        .map(|v| &v.defines)
        .into_iter()
        .flatten();
    b.extend(defines.filter_map(|(k, v)| Some((k.clone(), define_value(v).ok()?.parse().ok()?))));
    b
}

/// The names a tail of `kernel` may read: the workload's dims and every define its
/// variants, its `defaults` or the workload's `launch.defines` give.
fn known_names(
    p: &Pipeline,
    decl: &Declaration,
    name: &str,
    kernel: &KernelSpec,
) -> BTreeSet<String> {
    let mut known: BTreeSet<String> = decl.dims.iter().cloned().collect();
    known.extend(decl.launch.defines.keys().cloned());
    known.extend(kernel.defaults.keys().cloned());
    let variants = p.variants.values().filter(|v| v.kernel == name);
    known.extend(variants.flat_map(|v| v.defines.keys().cloned()));
    known
}

/// Tail `parsed` of `variant` over every shape of `decl`.
fn reach(
    parsed: &Parsed,
    decl: &Declaration,
    defines: &Bindings,
    variant: &str,
) -> Result<Option<Vec<String>>, Problem> {
    let what = format!("variant `{variant}`");
    if let Some(when) = &parsed.when {
        if when.eval(defines, &what)? == 0 {
            return Ok(None);
        }
    }
    let mut shapes = Vec::new();
    for (shape, dims) in &decl.shapes {
        let mut b = defines.clone();
        b.extend(dims.iter().map(|(k, v)| (k.clone(), *v)));
        let what = format!("shape `{shape}` with variant `{variant}`");
        if parsed.reached.eval(&b, &what)? != 0 {
            shapes.push(shape.clone());
        }
    }
    Ok(Some(shapes))
}

/// Every tail of `variant`'s kernel over its workload's shapes, by tail name (empty when the
/// kernel declares none); `Err` names the expression that cannot be read or evaluated.
pub fn of_variant(p: &Pipeline, variant: &str) -> Result<Vec<Reach>, Problem> {
    let Some(v) = p.variants.get(variant) else {
        return Ok(Vec::new());
    };
    let Some(kernel) = p.kernels.get(&v.kernel).filter(|k| !k.tails.is_empty()) else {
        return Ok(Vec::new());
    };
    let workloads = Workloads::of(p);
    let Some((_, decl)) = workloads.of_kernel(&v.kernel) else {
        return Ok(Vec::new());
    };
    let known = known_names(p, decl, &v.kernel, kernel);
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    let defines = define_bindings(decl, kernel, variant, p);
    kernel
        .tails
        .iter()
        .map(|(tail, spec)| {
            let parsed = parse(&v.kernel, tail, spec, &known)?;
            Ok(Reach {
                tail: tail.clone(),
                condition: match spec {
                    TailSpec::Reached(e) => e.0.clone(),
                    TailSpec::Guarded(g) => format!("{}, when {}", g.reached, g.when),
                },
                shapes: reach(&parsed, decl, &defines, variant)?,
            })
        })
        .collect()
}

/// Every problem with the `tails` of `p`'s kernels: a kernel with tails but no workload, an
/// expression that does not parse, or one that cannot be evaluated for a variant and shape.
pub fn check(p: &Pipeline) -> Vec<Problem> {
    let workloads = Workloads::of(p);
    let mut out = Vec::new();
    for name in p
        .kernels
        .iter()
        .filter(|(_, k)| !k.tails.is_empty())
        .map(|(n, _)| n)
    {
        if workloads.of_kernel(name).is_none() {
            out.push(Problem::at(
                vec!["kernels".into(), name.clone(), "tails".into()],
                format!("kernel `{name}` declares tails but no workload lists it"),
                "list the kernel under a workload's `kernels:` (its dims and shapes are what the tails are evaluated over), or remove `tails`",
            ).on_key());
        }
    }
    let variants = p.variants.keys().map(|v| of_variant(p, v));
    out.extend(variants.filter_map(Result::err));
    // One problem per place: an expression that fails for every variant is one fix.
    let mut seen = BTreeSet::new();
    out.retain(|p| seen.insert(p.path.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{workload::testing::pipeline, workload::testing::SHIPPED_PIPELINE};

    /// The check that the shipped shapes reach what the kernels declare: every variant of
    /// pipeline.yaml reaches each of its kernel's tail paths with some declared shape.
    #[test]
    fn the_shipped_shapes_reach_every_declared_tail_of_every_variant() {
        let p = pipeline(SHIPPED_PIPELINE);
        assert!(check(&p).is_empty(), "{:?}", check(&p));
        let mut listed = 0;
        for v in p.variants.keys() {
            for r in of_variant(&p, v).unwrap() {
                assert!(
                    !r.unreached(),
                    "variant `{v}` reaches no shape's `{}` ({})",
                    r.tail,
                    r.condition
                );
                listed += usize::from(r.shapes.is_some());
            }
        }
        // 12 attention variants × 3 paths, but no ring with KV_VIA_REGS (2 variants), and
        // ws-c2-kv2's split with no tiles for its second warpgroup; RMSNorm: rms-warp-row both,
        // rms-block-row the scalar tail, rms-scalar neither.
        assert_eq!(listed, 38);
    }

    #[test]
    fn the_scalar_tail_is_reached_by_odd_and_by_four_but_not_eight_halves() {
        let p = pipeline(SHIPPED_PIPELINE);
        let scalar = |v: &str| {
            of_variant(&p, v)
                .unwrap()
                .into_iter()
                .find(|r| r.tail == "scalar_tail")
                .unwrap()
                .shapes
        };
        let both = Some(vec!["ragged".to_string(), "ragged4".to_string()]);
        assert_eq!(scalar("rms-warp-row"), both);
        assert_eq!(scalar("rms-scalar"), None, "VEC 1 has no scalar tail");
    }

    #[test]
    fn a_tail_no_shape_reaches_is_unreached_and_a_bad_one_is_a_problem_at_its_key() {
        let text = SHIPPED_PIPELINE.replace(
            r#"scalar_tail: {when: "VEC > 1", reached: "hidden % VEC != 0"}"#,
            r#"scalar_tail: {when: "VEC > 1", reached: "hidden % 2 != 0 && hidden > 5000"}"#,
        );
        let p = pipeline(&text);
        let r = of_variant(&p, "rms-warp-row").unwrap();
        assert!(
            r.iter().any(|r| r.tail == "scalar_tail" && r.unreached()),
            "{r:?}"
        );

        let text = SHIPPED_PIPELINE.replace(
            r#"reached: "hidden % VEC != 0""#,
            r#"reached: "hidden % WIDTH != 0""#,
        );
        let problems = check(&pipeline(&text));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].path,
            ["kernels", "rmsnorm", "tails", "scalar_tail", "reached"]
        );
        assert!(problems[0].message.contains("WIDTH"), "{problems:?}");
    }
}
