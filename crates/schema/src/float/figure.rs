//! Figures a gate judges (an error statistic, a gate's measurement) as records write and
//! read them: like [`super::f6`] when finite; NaN and the infinities kept, not lost.

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;

/// A figure a gate judges: [`super::f6`] when finite, else the
/// string Rust prints for it (`"NaN"`, `"inf"`, `"-inf"`). JSON has no such numbers and
/// serde_json would write `null`, which reads back as "not measured": a figure that
/// failed would come back as one that was never judged.
pub fn figure<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        super::f6(x, s)
    } else {
        s.serialize_str(&x.to_string())
    }
}

/// [`figure`], or `null` for `None`.
pub fn opt_figure<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    struct Figure(f64);
    impl serde::Serialize for Figure {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            figure(&self.0, s)
        }
    }
    match x {
        Some(v) => s.serialize_some(&Figure(*v)),
        None => s.serialize_none(),
    }
}

/// Reads what [`figure`] writes; `null`, what a non-finite figure was written as
/// before, reads as NaN.
pub fn read_figure<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(read_opt_figure(d)?.unwrap_or(f64::NAN))
}

/// Reads what [`opt_figure`] writes: `null` is `None`.
pub fn read_opt_figure<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(FigureVisitor)
}

struct FigureVisitor;

impl<'de> Visitor<'de> for FigureVisitor {
    type Value = Option<f64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a number, \"NaN\", \"inf\", \"-inf\" or null")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.parse::<f64>() {
            Ok(x) if !x.is_finite() => Ok(Some(x)),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Record {
        #[serde(
            serialize_with = "super::figure",
            deserialize_with = "super::read_figure"
        )]
        measured: f64,
        #[serde(
            default,
            serialize_with = "super::opt_figure",
            deserialize_with = "super::read_opt_figure"
        )]
        err: Option<f64>,
    }

    fn written(measured: f64, err: Option<f64>) -> String {
        serde_json::to_string(&Record { measured, err }).unwrap()
    }

    fn read(text: &str) -> Record {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn finite_figures_are_written_as_f6_and_read_back() {
        assert_eq!(
            written(0.0600004, Some(-0.0)),
            r#"{"measured":0.06,"err":0.0}"#
        );
        assert_eq!(written(168.0, None), r#"{"measured":168.0,"err":null}"#);
        let r = read(r#"{"measured":168,"err":0.002}"#);
        assert_eq!((r.measured, r.err), (168.0, Some(0.002)));
        assert_eq!(read(r#"{"measured":1}"#).err, None);
    }

    #[test]
    fn nan_and_the_infinities_survive_a_round_trip() {
        let text = written(f64::NAN, Some(f64::NEG_INFINITY));
        assert_eq!(text, r#"{"measured":"NaN","err":"-inf"}"#);
        let r = read(&text);
        assert!(r.measured.is_nan());
        assert_eq!(r.err, Some(f64::NEG_INFINITY));
        assert_eq!(read(r#"{"measured":"inf"}"#).measured, f64::INFINITY);
    }

    #[test]
    fn null_is_nan_for_a_figure_and_absent_for_an_optional_one() {
        let r = read(r#"{"measured":null,"err":null}"#);
        assert!(r.measured.is_nan());
        assert_eq!(r.err, None);
    }

    #[test]
    fn a_word_that_is_not_a_non_finite_figure_is_refused() {
        for bad in [r#"{"measured":"0.5"}"#, r#"{"measured":"lots"}"#] {
            let e = serde_json::from_str::<Record>(bad).unwrap_err().to_string();
            assert!(e.contains("expected a number, \"NaN\""), "{e}");
        }
    }
}
