//! A stage's `params:` read without losing what was written. A plain YAML value turns
//! `.inf`, `-.inf` and `.nan` into floats that JSON (the fingerprint's form) writes as
//! `null`, so changing one into another went unseen; and an integer past 64 bits is
//! refused by `serde_yaml::Value`. Here such values are kept as their YAML text
//! (`.inf`, `-.inf`, `.nan`, the integer's digits): the stage sees that text in its
//! `REPRO_PARAM_*` variable and the fingerprint holds it. Every other value (strings,
//! integers, booleans, finite floats, lists, mappings, tags) is the `serde_yaml::Value`
//! it always was, so its fingerprint text is unchanged.

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::fmt;

/// The `params` mapping of a stage, each value read by [`Exact`].
pub fn exact_params<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Value>, D::Error> {
    let params: BTreeMap<String, Exact> = BTreeMap::deserialize(d)?;
    Ok(params.into_iter().map(|(k, v)| (k, v.0)).collect())
}

/// One YAML value, with the values a `Value` loses kept as their text (module doc).
struct Exact(Value);

/// The YAML spelling of a float that is not finite; `None` for a finite one.
fn non_finite_text(v: f64) -> Option<&'static str> {
    match v {
        _ if v.is_nan() => Some(".nan"),
        f64::INFINITY => Some(".inf"),
        f64::NEG_INFINITY => Some("-.inf"),
        _ => None,
    }
}

impl<'de> Deserialize<'de> for Exact {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ExactVisitor).map(Exact)
    }
}

struct ExactVisitor;

impl<'de> Visitor<'de> for ExactVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(non_finite_text(v).map_or(Value::Number(v.into()), |t| Value::String(t.into())))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Exact::deserialize(d).map(|e| e.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Exact(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Sequence(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_yaml::Mapping::new();
        while let Some((Exact(k), Exact(v))) = map.next_entry()? {
            out.insert(k, v);
        }
        Ok(Value::Mapping(out))
    }

    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A tagged value (`!tag x`): read as `serde_yaml::Value` reads it.
        Value::deserialize(serde::de::value::EnumAccessDeserializer::new(data))
    }
}

/// A YAML value as compact JSON with mapping keys sorted; plain strings stay bare.
pub fn canonical(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        other => canonical_json(&serde_json::to_value(other).unwrap_or(serde_json::Value::Null)),
    }
}

/// Compact JSON with object keys sorted at every level.
pub fn canonical_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical_json(v, &mut out);
    out
}

/// [`canonical_json`] of `v` written at the end of `out` (one buffer for the whole value).
fn write_canonical_json(v: &serde_json::Value, out: &mut String) {
    use std::fmt::Write;
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (n, k) in keys.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("a string serializes"));
                out.push(':');
                write_canonical_json(&map[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_canonical_json(item, out);
            }
            out.push(']');
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> BTreeMap<String, Value> {
        exact_params(serde_yaml::Deserializer::from_str(yaml)).unwrap()
    }

    #[test]
    fn canonical_json_is_compact_with_keys_sorted_and_strings_escaped() {
        let v = serde_json::json!({"z": [], "a\"b": {"y": {}, "x": [1, 2.5, null, true, "t\n"]}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a\"b":{"x":[1,2.5,null,true,"t\n"],"y":{}},"z":[]}"#
        );
    }

    #[test]
    fn values_a_yaml_value_loses_are_kept_as_their_text() {
        let p = read("{a: .inf, b: -.inf, c: .nan, d: 123456789012345678901234567890, e: -123456789012345678901234567890, f: [.inf, {g: .nan}]}");
        let text = |k: &str| super::canonical(&p[k]);
        assert_eq!(text("a"), ".inf");
        assert_eq!(text("b"), "-.inf");
        assert_eq!(text("c"), ".nan");
        assert_eq!(text("d"), "123456789012345678901234567890");
        assert_eq!(text("e"), "-123456789012345678901234567890");
        assert_eq!(text("f"), r#"[".inf",{"g":".nan"}]"#);
    }

    #[test]
    fn every_other_value_is_the_yaml_value_it_always_was() {
        let yaml = "{s: text, i: -3, u: 18446744073709551615, f: 0.1, e: 1.5e3, b: true, n: null, l: [1, x], m: {k: 2.5}, t: !tag 1, q: '.inf'}";
        let plain: BTreeMap<String, Value> = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(read(yaml), plain);
    }
}
