//! The inputs a lock entry records, parsed from the lock's JSON mirror only when first
//! read: a no-op run compares each stage's fingerprint and outputs with the lock and reads
//! no recorded inputs, and at thousands of stages they are nine tenths of the lock.

use crate::fingerprint::Inputs;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

/// A lock entry's [`Inputs`]: parsed, or the JSON the mirror holds for them until first
/// read (through `Deref`, like the inputs themselves).
#[derive(Clone)]
pub struct RecordedInputs {
    parsed: OnceLock<Inputs>,
    /// The mirror's text, shared by its entries, and where these inputs are in it.
    json: Option<(Arc<String>, Range<usize>)>,
}

impl RecordedInputs {
    /// Inputs held as `text[range]`, JSON this binary wrote for them (the mirror is read
    /// only by the binary that wrote it, and only while its checksum holds), so parsing it
    /// later cannot fail.
    pub(super) fn lazy(text: Arc<String>, range: Range<usize>) -> RecordedInputs {
        RecordedInputs {
            parsed: OnceLock::new(),
            json: Some((text, range)),
        }
    }
}

impl Deref for RecordedInputs {
    type Target = Inputs;

    fn deref(&self) -> &Inputs {
        self.parsed.get_or_init(|| {
            let (text, range) = self.json.as_ref().expect("unparsed inputs have their JSON");
            serde_json::from_str(&text[range.clone()])
                .expect("the lock's mirror holds inputs as this binary wrote them")
        })
    }
}

impl From<Inputs> for RecordedInputs {
    fn from(inputs: Inputs) -> RecordedInputs {
        RecordedInputs {
            parsed: OnceLock::from(inputs),
            json: None,
        }
    }
}

impl Default for RecordedInputs {
    fn default() -> RecordedInputs {
        Inputs::default().into()
    }
}

impl PartialEq for RecordedInputs {
    fn eq(&self, other: &RecordedInputs) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for RecordedInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for RecordedInputs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

/// The lock's YAML and its journal are read as they always were: parsed at once.
impl<'de> Deserialize<'de> for RecordedInputs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RecordedInputs, D::Error> {
        Inputs::deserialize(d).map(RecordedInputs::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_held_as_json_read_as_the_inputs_they_were() {
        let inputs = Inputs {
            kind: "cmd".into(),
            command: "c".into(),
            deps: [("a \"b\"".to_string(), "d".to_string())].into(),
            hardware: Some("L4".into()),
            ..Default::default()
        };
        let json = serde_json::to_string(&inputs).unwrap();
        let text = Arc::new(format!("[{json},1]"));
        let lazy = RecordedInputs::lazy(Arc::clone(&text), 1..1 + json.len());
        assert!(lazy.parsed.get().is_none());
        assert_eq!(lazy, RecordedInputs::from(inputs.clone()));
        assert_eq!(*lazy, inputs);
        assert_eq!(serde_json::to_string(&lazy.clone()).unwrap(), json);
        let yaml = serde_yaml::to_string(&lazy).unwrap();
        assert_eq!(
            *serde_yaml::from_str::<RecordedInputs>(&yaml).unwrap(),
            inputs
        );
    }
}
