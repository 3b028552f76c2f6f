//! Built-in generators: inputs that must be drawn together because their values depend on
//! each other. `attention` is the FP8 attention workload's Q, K and V with its recipes
//! (`gaussian`, `outliers`, `sharp`, `sink`, `e4m3-edge`, `crate::gpu::recipes`): the
//! same ChaCha20 stream, so the same (shape, recipe, seed) gives the same values whether
//! the built-in workload or a declaration draws them.

use crate::pipeline::{Recipe, Shape};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratorKind {
    Attention,
}

impl GeneratorKind {
    pub const NAMES: [&'static str; 1] = ["attention"];

    pub fn parse(name: &str) -> Option<GeneratorKind> {
        (name == "attention").then_some(GeneratorKind::Attention)
    }

    /// The inputs it fills, in order.
    pub fn parts(self) -> &'static [&'static str] {
        match self {
            GeneratorKind::Attention => &["q", "k", "v"],
        }
    }

    /// Its recipes; the first is the default.
    pub fn recipes(self) -> Vec<&'static str> {
        match self {
            GeneratorKind::Attention => Recipe::ALL.iter().map(|r| r.name()).collect(),
        }
    }

    /// The values of every part, for inputs of `extents` (`[..., S, D]`, rank ≥ 2).
    pub fn draw(self, recipe: &str, extents: &[usize], seed: u64) -> Vec<Vec<f32>> {
        match self {
            GeneratorKind::Attention => {
                let recipe = Recipe::parse(recipe).expect("a recipe of the generator (validated)");
                let [.., s, d] = extents else {
                    panic!("attention inputs are [..., S, D] (validated)")
                };
                let heads: usize = extents[..extents.len() - 2].iter().product();
                let as_u32 = |n: usize| u32::try_from(n).expect("an extent of pipeline.yaml");
                // The recipes see heads × S × D; batch and head are one index to them.
                let shape = Shape {
                    B: as_u32(heads),
                    H: 1,
                    S: as_u32(*s),
                    D: as_u32(*d),
                };
                let drawn = crate::gpu::recipes::draw(shape, recipe, seed);
                vec![drawn.q, drawn.k, drawn.v]
            }
        }
    }
}
