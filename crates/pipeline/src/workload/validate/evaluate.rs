//! The expressions on every shape and variant: buffer sizes, quantization blocks, launches.

use super::Checker;
use crate::workload::dtype::Dtype;
use crate::workload::limits::Limits;
use crate::{
    workload::exprs::Bindings, workload::exprs::Compiled, workload::exprs::Geometry,
    workload::exprs::Number,
};
use crate::{workload::problem::path, workload::problem::Problem};
use crate::{
    workload::spec::Arg, workload::spec::Launch, workload::spec::RefArg, workload::spec::Role,
};

impl<'a> Checker<'a> {
    /// Parse the expressions, then evaluate them on every shape (and variant).
    pub(super) fn evaluate(&mut self) {
        let define_names = self.define_names();
        let names: Vec<&str> = define_names.iter().map(String::as_str).collect();
        let compiled = match Compiled::new(self.name, self.decl, &names) {
            Ok(c) => c,
            Err(problems) => {
                self.out.extend(problems);
                return;
            }
        };
        for shape in self.decl.shapes.keys() {
            let dims = compiled.dims(shape).expect("a declared shape");
            let what = format!("shape `{shape}`");
            if let Err(p) = self.buffers(&compiled, &dims, &what) {
                self.out.push(p);
                continue;
            }
            // A launch that reads the cubin's globals is checked once the kernel is built.
            if self.decl.launch.globals.is_empty() {
                for (variant, defines) in self.variants() {
                    let what = format!("shape `{shape}` with variant `{variant}`");
                    self.launch(compiled.launch(&dims, &defines, &what), &["launch"], &what);
                }
            }
            let reference_globals = self
                .decl
                .reference
                .launch
                .as_ref()
                .is_some_and(|l| !l.globals.is_empty());
            if let Some(g) = compiled
                .reference_launch(&dims, &what)
                .filter(|_| !reference_globals)
            {
                self.launch(g, &["reference", "launch"], &what);
            }
        }
    }

    /// Extents, blocks and values on one shape.
    fn buffers(&self, c: &Compiled, dims: &Bindings, what: &str) -> Result<(), Problem> {
        let d = self.decl;
        for (i, a) in d.args.iter().enumerate() {
            let idx = i.to_string();
            let at = |rest: &[&str]| {
                let mut p = vec!["args", idx.as_str()];
                p.extend(rest);
                path(self.name, &p)
            };
            if a.role == Role::Scalar {
                if let (Number::Int(v), Some(range)) = (c.scalar(i, dims, what)?, int_range(a)) {
                    if !range.contains(&v) {
                        return Err(Problem::at(
                            at(&["value"]),
                            format!("scalar `{}` is {v} for {what}, outside {}", a.name, a.dtype),
                            "use int64, or smaller dimensions",
                        ));
                    }
                }
                continue;
            }
            let extents = c.extents(i, dims, what)?;
            let bytes = extents
                .iter()
                .try_fold(a.dtype.size(), |n, &e| n.checked_mul(e));
            if bytes.is_none_or(|b| b > isize::MAX as usize) {
                return Err(Problem::at(
                    at(&["shape"]),
                    format!("`{}` does not fit in memory for {what}", a.name),
                    "check the extents",
                ));
            }
            if let Some(q) = &a.quantize {
                let block = c.block(i, dims, what)?;
                let trailing = &extents[extents.len() - block.len()..];
                if let Some((j, (e, b))) = trailing
                    .iter()
                    .zip(&block)
                    .enumerate()
                    .find(|(_, (e, b))| *e % *b != 0)
                {
                    return Err(Problem::at(
                        at(&["quantize", "block", &j.to_string()]),
                        format!(
                            "the block extent {b} does not divide `{}`'s extent {e} for {what}",
                            a.name
                        ),
                        "quantization blocks tile the tensor exactly",
                    ));
                }
                let blocks = extents.iter().product::<usize>() / block.iter().product::<usize>();
                let (s, _) = d.arg(&q.scales).expect("checked by `structure`");
                let scales = c.extents(s, dims, what)?.iter().product::<usize>();
                if scales != blocks {
                    return Err(Problem::at(
                        at(&["quantize", "scales"]),
                        format!(
                            "`{}` has {blocks} blocks for {what} but `{}` holds {scales} scales",
                            a.name, q.scales
                        ),
                        "give the scales one element per block",
                    ));
                }
            }
        }
        for (g, spec) in &d.generators {
            let shapes: Vec<Vec<usize>> = spec
                .args
                .iter()
                .map(|n| c.extents(d.arg(n).expect("checked").0, dims, what))
                .collect::<Result<_, _>>()?;
            if shapes.iter().any(|s| s != &shapes[0] || s.len() < 2) {
                return Err(Problem::at(path(self.name, &["generators", g, "args"]), format!("generator `{g}` needs inputs of one shape `[..., S, D]`; for {what} they are {shapes:?}"), "give its inputs the same extents"));
            }
        }
        for (i, a) in d.reference.args.iter().flatten().enumerate() {
            if matches!(a, RefArg::Extra(_)) {
                c.reference_scalar(i, dims, what)?;
            }
        }
        Ok(())
    }

    /// A launch's evaluation, checked against CUDA's architectural limits.
    fn launch(&mut self, g: Result<Geometry, Problem>, at: &[&str], what: &str) {
        let g = match g {
            Ok(g) => g,
            Err(p) => return self.out.push(p),
        };
        for e in Limits::ARCHITECTURAL.check(&g) {
            let mut p: Vec<&str> = at.to_vec();
            p.push(e.key);
            let index = e.index.map(|i| i.to_string());
            let declared = match e.key {
                "grid" => self.decl_launch(at).grid.len(),
                "block" => self.decl_launch(at).block.len(),
                _ => 1,
            };
            // An extent that is not written (z of a 2-D grid) is 1: point at the key.
            if let Some(i) = index
                .as_deref()
                .filter(|_| e.index.is_some_and(|i| i < declared))
            {
                p.push(i);
            }
            self.push(&p, format!("the launch for {what} is beyond CUDA's limits: {}", e.message), "make the extent smaller (grid.x goes up to 2³¹−1; y and z to 65535), or change the shape");
        }
    }

    fn decl_launch(&self, at: &[&str]) -> &'a Launch {
        match at {
            ["reference", ..] => self.decl.reference.launch.as_ref().expect("evaluated"),
            _ => &self.decl.launch,
        }
    }
}

/// The values an integer scalar can hold.
fn int_range(a: &Arg) -> Option<std::ops::RangeInclusive<i64>> {
    match a.dtype {
        Dtype::Int32 => Some(i64::from(i32::MIN)..=i64::from(i32::MAX)),
        _ => None,
    }
}
