//! The `status` of a record, typed. Each reads and writes the very text the field held
//! when it was a string; a name this version does not write (a hand-edited file, one from
//! a newer repro) is kept as `Other` and written back as read, as the string was.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An enum of the names a status field is written as, plus `Other` for any other name.
macro_rules! status_enum {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $variant:ident => $name:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq)]
        pub enum $ty {
            $($(#[$vdoc])* $variant,)+
            /// A name this version does not write, kept as read.
            Other(String),
        }

        impl $ty {
            /// The name as the records spell it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($ty::$variant => $name,)+
                    $ty::Other(name) => name,
                }
            }

            pub fn is_ok(&self) -> bool {
                *self == $ty::Ok
            }
        }

        impl From<String> for $ty {
            fn from(name: String) -> Self {
                match name.as_str() {
                    $($name => $ty::$variant,)+
                    _ => $ty::Other(name),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// As the string the field was: `"ok"`, so debug output reads as it did.
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self.as_str(), f)
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map($ty::from)
            }
        }
    };
}

status_enum!(
    /// How a measurement ended: a bench run (`BenchResult`), a bench file (`BenchFile`), a
    /// profiled target (`NcuTarget`).
    RunStatus {
        Ok => "ok",
        /// A fault, a timeout, a launch error.
        Failed => "failed",
        /// Not run here, for the reason the record gives.
        Skipped => "skipped",
    }
);

status_enum!(
    /// How a variant's compile ended (`BuildRecord`, and each of its `ArchBuild`s).
    BuildStatus {
        Ok => "ok",
        CompileError => "compile_error",
    }
);

status_enum!(
    /// How a tune trial ended: `ok`, or the first gate it failed (`TuneTrial`,
    /// `LineageStep`, the tuner's `Evaluation`).
    TrialStatus {
        Ok => "ok",
        CompileError => "compile_error",
        PtxasGate => "ptxas_gate",
        Incorrect => "incorrect",
        /// The run crashed or timed out.
        Failed => "failed",
        /// A proposer's answer that could not become a source (a patch that does not
        /// apply, a malformed entry).
        ProposalError => "proposal_error",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status as JSON and as a CSV field (the tune log) is its old string, and reads
    /// back as the same status.
    fn round_trips<T>(statuses: &[(T, &str)])
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug,
    {
        for (status, name) in statuses {
            let json = serde_json::to_string(status).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(&serde_json::from_str::<T>(&json).unwrap(), status);

            let mut csv = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new());
            csv.serialize((status,)).unwrap();
            let row = String::from_utf8(csv.into_inner().unwrap()).unwrap();
            assert_eq!(row, format!("{name}\n"));
            let read: (T,) = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(row.as_bytes())
                .deserialize()
                .next()
                .unwrap()
                .unwrap();
            assert_eq!(&read.0, status);
        }
    }

    #[test]
    fn every_status_is_written_and_read_as_its_old_string() {
        round_trips(&[
            (RunStatus::Ok, "ok"),
            (RunStatus::Failed, "failed"),
            (RunStatus::Skipped, "skipped"),
            (RunStatus::Other("pending".into()), "pending"),
        ]);
        round_trips(&[
            (BuildStatus::Ok, "ok"),
            (BuildStatus::CompileError, "compile_error"),
            (BuildStatus::Other("linker_error".into()), "linker_error"),
        ]);
        round_trips(&[
            (TrialStatus::Ok, "ok"),
            (TrialStatus::CompileError, "compile_error"),
            (TrialStatus::PtxasGate, "ptxas_gate"),
            (TrialStatus::Incorrect, "incorrect"),
            (TrialStatus::Failed, "failed"),
            (TrialStatus::ProposalError, "proposal_error"),
            (TrialStatus::Other("invalid".into()), "invalid"),
        ]);
    }

    /// A name the enum knows reads as its variant, never as `Other`, so `is_ok` and the
    /// matches see it; any other name is kept as it was, case included.
    #[test]
    fn known_names_read_as_variants_and_others_are_kept() {
        assert!(RunStatus::from("ok".to_string()).is_ok());
        assert_eq!(
            RunStatus::from("OK".to_string()),
            RunStatus::Other("OK".into())
        );
        assert!(!RunStatus::Other("OK".into()).is_ok());
        assert_eq!(TrialStatus::PtxasGate.to_string(), "ptxas_gate");
        assert_eq!(format!("{:?}", RunStatus::Skipped), r#""skipped""#);
    }
}
