//! The rules of `gates.profile` as pipeline.yaml declares them: a bound on a metric of what
//! the profile measured, or its relation to another variant's. The profile stage kind
//! checks them against the metrics it reads and judges them (`repro_stages::profile::gates`).

use serde::{Deserialize, Serialize};

/// One rule of `gates.profile`, and one check of a rule's `any_of` (which takes neither
/// `any_of` nor `targets`): a bound on a metric, or its relation to another variant's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRule {
    /// Checks of which one must pass; empty: the rule's own check (the keys below).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<ProfileRule>,
    /// Labels or variants the rule applies to (`control` included); empty: every profiled
    /// variant and tune elite on its primary shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// `control` (the target's workload's) or a variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// `equal`'s tolerance, in percent of the other variant's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_pct: Option<f64>,
}

/// A check: a rule without `any_of` and `targets`.
pub type Check = ProfileRule;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Up,
    Down,
    Equal,
}

impl ProfileRule {
    /// Whether the rule has a check of its own (a key besides `any_of` and `targets`).
    pub fn has_own_check(&self) -> bool {
        let own = ProfileRule {
            any_of: Vec::new(),
            targets: Vec::new(),
            ..self.clone()
        };
        own != ProfileRule::default()
    }

    /// The checks of the rule with the key path (under the rule) of each.
    pub fn checks(&self) -> Vec<(Vec<String>, &Check)> {
        if self.any_of.is_empty() {
            return vec![(Vec::new(), self)];
        }
        self.any_of
            .iter()
            .enumerate()
            .map(|(i, c)| (vec!["any_of".to_string(), i.to_string()], c))
            .collect()
    }
}
