//! Built-in generators: inputs that must be drawn together because their values depend on
//! each other. [`attention`] draws an attention workload's Q, K and V by one of its recipes
//! (`gaussian`, `outliers`, `sharp`, `sink`, `e4m3-edge`).

pub mod attention;

use attention::Recipe;

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
                // The recipes see heads × S × D; every leading index is one head to them.
                let heads: usize = extents[..extents.len() - 2].iter().product();
                let drawn = attention::draw(heads, *s, *d, recipe, seed);
                vec![drawn.q, drawn.k, drawn.v]
            }
        }
    }
}
