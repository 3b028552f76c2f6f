//! The one place a stage kind reads its own keys: `spec.options` (what a stage declares
//! besides the common keys) deserialized into the kind's typed options struct
//! (`#[serde(default, deny_unknown_fields)]`). A serde error becomes an [`OptionError`]
//! naming the offending key, which the loader turns into file:line:column (see
//! `pipeline::spans`); an unknown key gets a "did you mean" for the nearest known one.

use crate::kind::OptionError;
use crate::validate::unknown_stage_key_help;
use crate::{check_duration, StageSpec};
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Deserialize;
use std::time::Duration;

/// Deserialize the `kind` stage's own keys into `T`. `T` must take every key as optional
/// (`#[serde(default)]`), so a key can be checked alone to find which one is wrong.
pub fn decode<T: DeserializeOwned>(kind: &str, spec: &StageSpec) -> Result<T, OptionError> {
    #[cfg(any(test, feature = "testing"))]
    DECODES.with(|n| n.set(n.get() + 1));
    let known = field_names::<T>();
    for key in spec.options.keys() {
        let name = key
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{key:?}"));
        if known.contains(&name.as_str()) {
            continue;
        }
        let help = unknown_stage_key_help(kind, &name, known);
        return Err(OptionError {
            message: format!("unknown key `{name}` for a `{kind}` stage\nhelp: {help}"),
            path: vec![name],
        });
    }
    // Each key alone first, so an error names its key; then all together.
    for (key, value) in &spec.options {
        let one = serde_yaml::Mapping::from_iter([(key.clone(), value.clone())]);
        if let Err(e) = serde_yaml::from_value::<T>(serde_yaml::Value::Mapping(one)) {
            return Err(OptionError {
                path: vec![key.as_str().unwrap_or_default().to_string()],
                message: format!("invalid value: {e}"),
            });
        }
    }
    serde_yaml::from_value(serde_yaml::Value::Mapping(spec.options.clone())).map_err(|e| {
        OptionError {
            path: vec![],
            message: format!("invalid options for a `{kind}` stage: {e}"),
        }
    })
}

/// How many times this thread has decoded a stage's options: a test of "decoded once".
#[cfg(any(test, feature = "testing"))]
pub fn decodes() -> usize {
    DECODES.with(std::cell::Cell::get)
}

#[cfg(any(test, feature = "testing"))]
thread_local! {
    static DECODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The error of a kind that has no use for the common `timeout:` key: `why` says what
/// limits its work instead. Nothing when the stage sets none.
pub fn refuse_timeout(kind: &str, spec: &StageSpec, why: &str) -> Result<(), OptionError> {
    match spec.timeout {
        None => Ok(()),
        Some(_) => Err(OptionError {
            path: vec!["timeout".into()],
            message: format!(
                "a `{kind}` stage takes no `timeout:`: {why}\nhelp: remove `timeout:` from the stage"
            ),
        }),
    }
}

/// A duration option (`90`, `1.5`, `500ms`, `90s`, `10m`, `2h`), read by the pipeline's one
/// duration parser: `#[serde(deserialize_with = "crate::options::duration")]`.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(f64),
        Text(String),
    }
    let text = match Written::deserialize(d)? {
        Written::Number(n) => n.to_string(),
        Written::Text(t) => t,
    };
    check_duration(&text)
        .map_err(|why| de::Error::custom(format!("invalid duration `{text}`: {why}")))
}

/// The field names of a `#[derive(Deserialize)]` struct, as serde hands them to the
/// deserializer.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

/// A deserializer that only records the fields a struct asks for, then stops.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Opts {
        warmup: u32,
        keep: bool,
        names: Vec<String>,
        #[serde(deserialize_with = "duration")]
        limit: Duration,
    }

    fn spec(yaml: &str) -> StageSpec {
        serde_yaml::from_str(&format!("uses: x\n{yaml}")).unwrap()
    }

    #[test]
    fn reads_the_struct_with_defaults() {
        let o: Opts = decode("x", &spec("warmup: 3\nnames: [a]")).unwrap();
        assert_eq!(
            (o.warmup, o.keep, o.names),
            (3, false, vec!["a".to_string()])
        );
        assert_eq!(field_names::<Opts>(), ["warmup", "keep", "names", "limit"]);
    }

    #[test]
    fn names_the_bad_key_and_suggests_a_known_one() {
        let e = decode::<Opts>("x", &spec("warmpu: 3")).unwrap_err();
        assert_eq!(e.path, ["warmpu"]);
        assert_eq!(
            e.message,
            "unknown key `warmpu` for a `x` stage\nhelp: did you mean `warmup`?"
        );
        let e = decode::<Opts>("x", &spec("zzz: 3")).unwrap_err();
        assert!(e.message.ends_with("`names`, `limit`"), "{}", e.message);
        let e = decode::<Opts>("x", &spec("warmup: 3\nkeep: sure")).unwrap_err();
        assert_eq!(e.path, ["keep"]);
        assert!(e.message.contains("expected a boolean"), "{}", e.message);
    }

    #[test]
    fn durations_take_the_pipelines_grammar() {
        let limit = |yaml: &str| decode::<Opts>("x", &spec(yaml)).map(|o| o.limit);
        assert_eq!(limit("limit: 90"), Ok(Duration::from_secs(90)));
        assert_eq!(limit("limit: 1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(limit("limit: 500ms"), Ok(Duration::from_millis(500)));
        let e = limit("limit: 2d").unwrap_err();
        assert_eq!(e.path, ["limit"]);
        assert!(e.message.contains("invalid duration `2d`"), "{}", e.message);
    }
}
