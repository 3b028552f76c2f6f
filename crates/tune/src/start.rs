//! Where a tune starts: its base variant's configuration, the first trial of the search, so
//! the tune never reports a best slower than the variant it was asked to improve.

use crate::space::{Config, Space};
use std::collections::BTreeMap;

/// The valid configuration of `space` that the base variant compiles to: each parameter's
/// value from `base_defines`, else from the default the kernel's `source` gives it
/// ([`source_defaults`]). `None` when a parameter has neither, or when the configuration
/// breaks a constraint.
pub fn base_config(
    space: &Space,
    base_defines: &BTreeMap<String, String>,
    source: &str,
) -> Option<Config> {
    let defaults = source_defaults(source);
    let value = |name: &str| {
        base_defines
            .get(name)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .or_else(|| defaults.get(name).copied())
    };
    space
        .valid()
        .iter()
        .find(|c| c.iter().all(|(k, v)| value(k) == Some(*v)))
        .cloned()
}

/// `NAME → value` for each `#ifndef NAME` whose next line is `#define NAME <integer>`.
pub fn source_defaults(source: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let mut guarded: Option<&str> = None;
    for line in source.lines().map(str::trim) {
        if let Some(name) = guarded.take() {
            let mut words = line.split_whitespace();
            if words.next() == Some("#define") && words.next() == Some(name) {
                if let Some(v) = words.next().and_then(|v| v.parse().ok()) {
                    out.insert(name.to_string(), v);
                }
            }
        }
        guarded = line.strip_prefix("#ifndef").map(str::trim);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "#ifndef TILE_N\n#define TILE_N 64\n#endif\n\
                          #ifndef RAW\n  #define RAW 2\n#endif\n\
                          #ifndef EXPR\n#define EXPR (TILE_N / 2)\n#endif\n\
                          #ifndef OTHER\n#define NOT_OTHER 3\n#endif\n";

    fn space(yaml: &str) -> Space {
        let value: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
        Space::from_yaml(&value, None).unwrap()
    }

    #[test]
    fn the_defaults_are_the_guarded_integer_defines() {
        let d = source_defaults(SOURCE);
        assert_eq!(
            d,
            BTreeMap::from([("RAW".into(), 2), ("TILE_N".into(), 64)])
        );
    }

    #[test]
    fn the_base_config_takes_the_base_defines_then_the_sources_defaults() {
        let s = space("{C: [1, 2], TILE_N: [64, 128], RAW: [1, 2, 3]}");
        let base = BTreeMap::from([("C".to_string(), "2".to_string())]);
        let want = Config::from([("C".into(), 2), ("RAW".into(), 2), ("TILE_N".into(), 64)]);
        assert_eq!(base_config(&s, &base, SOURCE), Some(want));
        let base = BTreeMap::from([
            ("C".to_string(), "1".to_string()),
            ("TILE_N".to_string(), "128".to_string()),
        ]);
        assert_eq!(base_config(&s, &base, SOURCE).unwrap()["TILE_N"], 128);
        // A parameter with no value anywhere, or a value outside the space: no start.
        let s = space("{C: [1, 2], MISSING: [1, 2]}");
        assert_eq!(base_config(&s, &BTreeMap::new(), SOURCE), None);
        let s = space("{RAW: [1, 3]}");
        assert_eq!(base_config(&s, &BTreeMap::new(), SOURCE), None);
    }
}
