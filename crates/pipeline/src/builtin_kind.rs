//! The names of the built-in stage kinds, as a stage's `uses:` spells them: a vocabulary
//! for the readers of a pipeline (the report). The kinds themselves, and the table the
//! loader is given, are `repro_stages`'.

/// A built-in stage kind. `StageSpec::uses` stays the text as written, so the loader can
/// point at an unknown one; `repro_stages::registry` holds one implementation per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinKind {
    Cmd,
    Build,
    Bench,
    Tune,
    Profile,
    Summarize,
}

impl BuiltinKind {
    /// Every kind, in the order the loader lists them for an unknown `uses:`.
    pub const ALL: [BuiltinKind; 6] = [
        BuiltinKind::Cmd,
        BuiltinKind::Build,
        BuiltinKind::Bench,
        BuiltinKind::Tune,
        BuiltinKind::Profile,
        BuiltinKind::Summarize,
    ];

    /// The name `uses:` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            BuiltinKind::Cmd => "cmd",
            BuiltinKind::Build => "build",
            BuiltinKind::Bench => "bench",
            BuiltinKind::Tune => "tune",
            BuiltinKind::Profile => "profile",
            BuiltinKind::Summarize => "summarize",
        }
    }

    /// The kind named `name`, if one is built in.
    pub fn named(name: &str) -> Option<BuiltinKind> {
        BuiltinKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}
