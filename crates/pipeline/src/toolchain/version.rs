//! An nvcc version as `pipeline.yaml` pins it (`13.0.88`) and as `nvcc --version` reports
//! it (`Cuda compilation tools, release 13.0, V13.0.88`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// `major.minor.patch`, e.g. 13.0.88.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NvccVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl NvccVersion {
    /// The version in `nvcc --version`'s `release` line (its `V13.0.88` word).
    pub fn from_release_line(line: &str) -> Option<NvccVersion> {
        line.split([' ', ','])
            .find_map(|word| word.strip_prefix('V').and_then(|v| v.parse().ok()))
    }
}

impl fmt::Display for NvccVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for NvccVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!("`{s}` is not an nvcc version; expected major.minor.patch, e.g. 13.0.88 (the V13.0.88 of `nvcc --version`)")
        };
        let parts: Vec<u32> = s
            .split('.')
            .map(|p| p.parse::<u32>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match parts[..] {
            [major, minor, patch] => Ok(NvccVersion {
                major,
                minor,
                patch,
            }),
            _ => Err(bad()),
        }
    }
}

impl Serialize for NvccVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NvccVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = NvccVersion;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an nvcc version written major.minor.patch, e.g. 13.0.88")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<NvccVersion, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pins_and_release_lines() {
        let v: NvccVersion = "13.0.88".parse().unwrap();
        assert_eq!((v.major, v.minor, v.patch), (13, 0, 88));
        assert_eq!(v.to_string(), "13.0.88");
        assert_eq!(
            NvccVersion::from_release_line("Cuda compilation tools, release 13.0, V13.0.88"),
            Some(v)
        );
        assert_eq!(NvccVersion::from_release_line("release 12.4"), None);
        for bad in ["13.0", "13.0.88.1", "13.x.88", ""] {
            let err = bad.parse::<NvccVersion>().unwrap_err();
            assert!(err.contains("expected major.minor.patch"), "{err}");
        }
    }

    #[test]
    fn a_yaml_float_is_refused_with_the_expected_form() {
        let err = serde_yaml::from_str::<NvccVersion>("13.0")
            .unwrap_err()
            .to_string();
        assert!(err.contains("e.g. 13.0.88"), "{err}");
        let v: NvccVersion = serde_yaml::from_str("13.0.88").unwrap();
        assert_eq!(serde_yaml::to_string(&v).unwrap().trim(), "13.0.88");
    }
}
