//! The correctness gates of an output: its thresholds, one number or one per precision class.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// The correctness gates of one output. Absolute thresholds are in the output's units;
/// the normalized ones are unitless (`docs/guide/correctness.md`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputGates {
    /// Largest |out − ref|; also the threshold above which an element counts as bad.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_abs_err: Option<f64>,
    /// Largest percentage of bad elements (needs `max_abs_err`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pct_bad: Option<f64>,
    /// Largest ‖out − ref‖₂ / ‖ref‖₂.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rel_l2_err: Option<Threshold>,
    /// Largest |out − ref| over the spread of the reference where the element lies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_err_over_ref_std: Option<Threshold>,
    /// The trailing dimensions one spread is taken over (`2` for `[B, H, S, D]`: per head);
    /// default: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_dims: Option<usize>,
}

/// A figure of one output that its gates judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    MaxAbsErr,
    MeanAbsErr,
    PctBad,
    MaxErrOverRefStd,
    RelL2Err,
}

impl Figure {
    /// Its name in records (`rel_l2_err`).
    pub fn name(self) -> &'static str {
        match self {
            Figure::MaxAbsErr => "max_abs_err",
            Figure::MeanAbsErr => "mean_abs_err",
            Figure::PctBad => "pct_bad",
            Figure::MaxErrOverRefStd => "max_err_over_ref_std",
            Figure::RelL2Err => "rel_l2_err",
        }
    }

    /// The name of its gate (`max_rel_l2_err`).
    pub fn gate(self) -> &'static str {
        match self {
            Figure::PctBad => "max_pct_bad",
            Figure::RelL2Err => "max_rel_l2_err",
            f => f.name(),
        }
    }
}

impl OutputGates {
    /// The thresholds a run is judged by, in order: the absolute ones when `absolute` (the
    /// recipe's `absolute_gates`), then the normalized ones at precision class `class`. A
    /// gate not declared (or with no threshold for the class) is left out.
    pub fn thresholds(&self, class: Option<&str>, absolute: bool) -> Vec<(Figure, f64)> {
        let per_class = |t: &Option<Threshold>| t.as_ref().and_then(|t| t.for_class(class));
        let absolutes = [
            (Figure::MaxAbsErr, self.max_abs_err),
            (Figure::MeanAbsErr, self.mean_abs_err),
            (Figure::PctBad, self.max_pct_bad),
        ];
        let normalized = [
            (
                Figure::MaxErrOverRefStd,
                per_class(&self.max_err_over_ref_std),
            ),
            (Figure::RelL2Err, per_class(&self.max_rel_l2_err)),
        ];
        absolutes
            .into_iter()
            .filter(|_| absolute)
            .chain(normalized)
            .filter_map(|(f, t)| Some((f, t?)))
            .collect()
    }
}

/// A threshold: one number, or one per precision class of the kernels (`fp16-pv: 0.02`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Threshold {
    One(f64),
    PerClass(BTreeMap<String, f64>),
}

impl Threshold {
    /// The threshold for a kernel of precision class `class` (`None`: not given for it).
    pub fn for_class(&self, class: Option<&str>) -> Option<f64> {
        match self {
            Threshold::One(x) => Some(*x),
            Threshold::PerClass(map) => class.and_then(|c| map.get(c).copied()),
        }
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml::Value;
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_f64()
                .map(Threshold::One)
                .ok_or_else(|| serde::de::Error::custom("not a number")),
            v @ Value::Mapping(_) => BTreeMap::<String, f64>::deserialize(v)
                .map(Threshold::PerClass)
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "a threshold is a number, or a number per precision class (`{fp16-pv: 0.02, fp8-pv: 1.0}`)",
            )),
        }
    }
}
