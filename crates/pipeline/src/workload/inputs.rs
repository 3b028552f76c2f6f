//! One (shape, recipe, seed)'s kernel arguments as bytes: inputs drawn by their `init` or
//! a generator and quantized where declared, output sizes, scalar values. No GPU needed:
//! the same bytes go to the kernel, the reference and a baseline script.
//!
//! Every `init` draws from its own ChaCha20 stream: seeded with the run's seed (or the
//! init's own `seed`), stream number the FNV-1a hash of the argument's name. So an input's
//! values depend on its name and the seed only, not on the order or number of the others.

use super::blocks::{dequantize, quantize, BlockGrid};
use super::dtype::Dtype;
use super::exprs::{Bindings, Compiled, Number};
use super::generators::GeneratorKind;
use super::keystream;
use super::problem::Problem;
use super::spec::{Arg, Declaration, Init, Role};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// One (shape, recipe, seed)'s arguments, in ABI order.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub shape: String,
    pub recipe: String,
    pub seed: u64,
    pub dims: Bindings,
    pub args: Vec<ArgData>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ArgData {
    /// An input buffer.
    Input {
        extents: Vec<usize>,
        bytes: Vec<u8>,
        /// Quantized: the block (in the trailing dimensions) and the argument holding the
        /// scales.
        quantized: Option<(Vec<usize>, usize)>,
    },
    /// An output buffer (filled with the dtype's sentinel before a run).
    Output {
        extents: Vec<usize>,
    },
    Scalar {
        value: Number,
        bytes: Vec<u8>,
    },
}

impl ArgData {
    /// The extents of a buffer (empty for a scalar).
    pub fn extents(&self) -> &[usize] {
        match self {
            ArgData::Input { extents, .. } | ArgData::Output { extents } => extents,
            ArgData::Scalar { .. } => &[],
        }
    }

    pub fn numel(&self) -> usize {
        self.extents().iter().product()
    }
}

impl Case {
    /// Draw the arguments of `c` for its shape `shape`, `recipe` and `seed` (all declared:
    /// the declaration is validated).
    pub fn generate(c: &Compiled, shape: &str, recipe: &str, seed: u64) -> Result<Case, Problem> {
        let dims = c.dims(shape).expect("a declared shape");
        Case::generate_for(c, shape, dims, recipe, seed)
    }

    /// [`Case::generate`] for the dimensions `dims`, called `shape` (a declared shape, or
    /// dimensions given on the command line).
    pub fn generate_for(
        c: &Compiled,
        shape: &str,
        dims: Bindings,
        recipe: &str,
        seed: u64,
    ) -> Result<Case, Problem> {
        let decl = c.decl;
        let what = format!("shape `{shape}`");
        let extents: Vec<Vec<usize>> = (0..decl.args.len())
            .map(|i| c.extents(i, &dims, &what))
            .collect::<Result<_, _>>()?;
        let mut values: Vec<Option<Vec<f64>>> = vec![None; decl.args.len()];
        for (name, g) in &decl.generators {
            let kind = GeneratorKind::parse(&g.kind).expect("a known kind (validated)");
            let chosen = decl
                .recipes
                .get(recipe)
                .and_then(|r| r.generators.get(name))
                .map_or(kind.recipes()[0], String::as_str);
            let first = decl.arg(&g.args[0]).expect("validated").0;
            let parts = kind.draw(chosen, &extents[first], seed);
            for (arg, part) in g.args.iter().zip(parts) {
                let i = decl.arg(arg).expect("validated").0;
                values[i] = Some(part.par_iter().map(|&x| f64::from(x)).collect());
            }
        }
        for (i, a) in decl.args.iter().enumerate() {
            if let Some(init) = init_of(decl, recipe, a) {
                let n = extents[i].iter().product();
                values[i] = Some(draw(init, &a.name, seed, n));
            }
        }
        let mut args: Vec<Option<ArgData>> = vec![None; decl.args.len()];
        for (i, a) in decl.args.iter().enumerate() {
            let Some(q) = &a.quantize else { continue };
            let block = c.block(i, &dims, &what)?;
            let x = values[i]
                .as_deref()
                .expect("a quantized input has values (validated)");
            let (codes, scales) = quantize(a.dtype, x, &BlockGrid::new(&extents[i], &block));
            let s = decl.arg(&q.scales).expect("validated").0;
            values[s] = Some(scales.into_iter().map(f64::from).collect());
            args[i] = Some(ArgData::Input {
                extents: extents[i].clone(),
                bytes: codes,
                quantized: Some((block, s)),
            });
        }
        for (i, a) in decl.args.iter().enumerate() {
            if args[i].is_some() {
                continue;
            }
            args[i] = Some(match a.role {
                Role::Input => ArgData::Input {
                    extents: extents[i].clone(),
                    bytes: a
                        .dtype
                        .encode(values[i].as_deref().expect("drawn (validated)")),
                    quantized: None,
                },
                Role::Output => ArgData::Output {
                    extents: extents[i].clone(),
                },
                Role::Scalar => {
                    let value = c.scalar(i, &dims, &what)?;
                    ArgData::Scalar {
                        value,
                        bytes: scalar_bytes(a.dtype, value),
                    }
                }
            });
        }
        Ok(Case {
            shape: shape.to_string(),
            recipe: recipe.to_string(),
            seed,
            dims,
            args: args
                .into_iter()
                .map(|a| a.expect("every argument"))
                .collect(),
        })
    }

    /// The values input `i` stands for: decoded, and for a quantized input multiplied by
    /// its block's scale (what references and baselines compute on).
    pub fn values(&self, decl: &Declaration, i: usize) -> Vec<f64> {
        let ArgData::Input {
            extents,
            bytes,
            quantized,
        } = &self.args[i]
        else {
            panic!("argument {i} is not an input")
        };
        let dtype = decl.args[i].dtype;
        match quantized {
            None => dtype.decode(bytes),
            Some((block, s)) => {
                let ArgData::Input { bytes: sb, .. } = &self.args[*s] else {
                    panic!("scales are an input (validated)")
                };
                let scales = decl.args[*s].dtype.decode(sb);
                dequantize(dtype, bytes, &scales, &BlockGrid::new(extents, block))
            }
        }
    }
}

/// The init of `arg` under `recipe`: the recipe's replacement, else its own.
pub fn init_of<'d>(decl: &'d Declaration, recipe: &str, arg: &'d Arg) -> Option<&'d Init> {
    decl.recipes
        .get(recipe)
        .and_then(|r| r.init.get(&arg.name))
        .or(arg.init.as_ref())
}

/// FNV-1a, 64 bits: a stable stream number for a name.
fn stream_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn draw(init: &Init, name: &str, seed: u64, n: usize) -> Vec<f64> {
    let rng = |own: Option<u64>| {
        let mut rng = ChaCha20Rng::seed_from_u64(own.unwrap_or(seed));
        rng.set_stream(stream_of(name));
        rng
    };
    match init {
        Init::Constant(x) => vec![*x; n],
        Init::Normal(p) => {
            let mut x = keystream::normals(&mut rng(p.seed), n);
            x.par_iter_mut().for_each(|x| *x = p.mean + p.std * *x);
            x
        }
        Init::Uniform(p) => {
            let mut rng = rng(p.seed);
            (0..n).map(|_| rng.random_range(p.low..p.high)).collect()
        }
    }
}

/// A scalar's value as the bytes the kernel takes by value.
pub fn scalar_bytes(dtype: Dtype, value: Number) -> Vec<u8> {
    match (dtype, value) {
        (Dtype::Int32, Number::Int(v)) => (v as i32).to_le_bytes().to_vec(),
        (Dtype::Int64, Number::Int(v)) => v.to_le_bytes().to_vec(),
        (_, v) => dtype.encode(&[v.as_f64()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{workload::testing::attention, workload::testing::rmsnorm};

    #[test]
    fn rmsnorm_inputs_are_deterministic_and_recipes_change_only_their_input() {
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let a = Case::generate(&c, "small", "gaussian", 1).unwrap();
        assert_eq!(a, Case::generate(&c, "small", "gaussian", 1).unwrap());
        let b = Case::generate(&c, "small", "gaussian", 2).unwrap();
        assert_ne!(a.args[0], b.args[0], "the seed changes x");
        let ArgData::Input { bytes, extents, .. } = &a.args[0] else {
            panic!()
        };
        assert_eq!(
            (extents.as_slice(), bytes.len()),
            ([4, 1024].as_slice(), 4 * 1024 * 2)
        );
        let x = a.values(&decl, 0);
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let std = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / x.len() as f64).sqrt();
        assert!(mean.abs() < 0.1 && (std - 1.0).abs() < 0.1, "{mean} {std}");
        let w = a.values(&decl, 1);
        assert!(w.iter().all(|v| (0.5..=1.5).contains(v)));
        assert_eq!(
            a.args[2],
            ArgData::Output {
                extents: vec![4, 1024]
            }
        );
        assert_eq!(
            a.args[3],
            ArgData::Scalar {
                value: Number::Int(4),
                bytes: 4i32.to_le_bytes().to_vec()
            }
        );
        assert_eq!(
            a.args[5],
            ArgData::Scalar {
                value: Number::Float(1e-6),
                bytes: 1e-6f32.to_le_bytes().to_vec()
            }
        );

        let large = Case::generate(&c, "small", "large", 1).unwrap();
        assert_eq!(large.args[1], a.args[1], "the weight is not redrawn");
        let xl = large.values(&decl, 0);
        // The same stream, scaled: x in `large` is 300 times x in `gaussian` (to fp16).
        let ratio = xl[7] / x[7];
        assert!((ratio - 300.0).abs() < 1.0, "{ratio}");
    }

    /// The attention declaration draws the bytes the attention harness drew before
    /// workloads were declared (SHA-256 of every input, in ABI order, of shape B 2, H 3,
    /// S 40, D 64 and seed 5, recorded from that harness): results measured before stay
    /// comparable with those measured after.
    #[test]
    fn the_attention_declaration_draws_the_bytes_recorded_before() {
        use sha2::{Digest, Sha256};
        let decl = attention();
        let c = Compiled::new("attention", &decl, &[]).unwrap();
        let golden = [
            (
                "gaussian",
                "35d28e454392df8978ad4949eabae7999c6905060e3daf6543849f0a830b6d77",
            ),
            (
                "outliers",
                "1ab4af34c3650dbf99b84c4be449b471fdfaab1d77143443f45cac22c38ad2c2",
            ),
            (
                "sharp",
                "5d44305d8597d6ca63041fd4aaa6f6871a9321475df3cbf20cf50d3074dfaca8",
            ),
            (
                "sink",
                "a3ec87eb46875aef1d046af105abb9b0ef5f40583ec7f385105afbf3286ab49d",
            ),
            (
                "e4m3-edge",
                "093eb79199e679c50500686a692e2c8fa0b2f79c5b5bdb3811277e9dbd0f8a99",
            ),
        ];
        for (recipe, digest) in golden {
            let case = Case::generate(&c, "small", recipe, 5).unwrap();
            let mut h = Sha256::new();
            for a in &case.args {
                if let ArgData::Input { bytes, .. } = a {
                    h.update(bytes);
                }
            }
            assert_eq!(repro_base::tools::hex(&h.finalize()), digest, "{recipe}");
        }
    }

    #[test]
    fn streams_depend_on_the_name_and_seed_only() {
        let init = Init::Uniform(super::super::spec::Uniform {
            low: 0.0,
            high: 1.0,
            seed: None,
        });
        assert_eq!(draw(&init, "a", 3, 5), draw(&init, "a", 3, 5));
        assert_ne!(draw(&init, "a", 3, 5), draw(&init, "b", 3, 5));
        assert_ne!(draw(&init, "a", 3, 5), draw(&init, "a", 4, 5));
        let fixed = Init::Uniform(super::super::spec::Uniform {
            low: 0.0,
            high: 1.0,
            seed: Some(9),
        });
        assert_eq!(
            draw(&fixed, "a", 3, 5),
            draw(&fixed, "a", 4, 5),
            "its own seed"
        );
        assert_eq!(stream_of(""), 0xcbf2_9ce4_8422_2325);
    }
}
