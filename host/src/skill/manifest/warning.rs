//! What a manifest may carry and still load, but an operator or author
//! should know: shown by `skillhost check`, `skills show` and the
//! console, never a reason to refuse the skill.

use serde::{Serialize, Serializer};

/// The Agent Skills specification's longest `description`, in characters.
/// Longer ones load with [`ManifestWarning::LongDescription`]: the
/// description is served whole, which some clients cut or refuse.
pub const AGENT_SKILL_DESCRIPTION_CHARS: usize = 1024;

/// One warning about a manifest that loaded.
///
/// ```
/// let w = skillhost::ManifestWarning::LongDescription { chars: 1500, place: String::new() };
/// assert!(w.to_string().contains("1500 characters"));
/// assert_eq!(w.kind(), "long_description");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestWarning {
    /// A `SKILL.md` `description` longer than the specification's 1024
    /// characters.
    LongDescription {
        /// Its length in characters.
        chars: usize,
        /// Where it is in the file (` (line L, column C)`), or empty.
        place: String,
    },
    /// A file of the scripts folder the sandbox cannot run (a shell
    /// script, JavaScript, another interpreter's): listed in the tool's
    /// schema, refused when called.
    NotRunnable {
        /// Its path in the skill folder.
        script: String,
        /// Why, naming the interpreter it needs.
        why: String,
    },
}

impl ManifestWarning {
    /// The warning's kind, as serialized (`long_description`,
    /// `not_runnable`).
    pub fn kind(&self) -> &'static str {
        match self {
            ManifestWarning::LongDescription { .. } => "long_description",
            ManifestWarning::NotRunnable { .. } => "not_runnable",
        }
    }
}

impl std::fmt::Display for ManifestWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestWarning::LongDescription { chars, place } => write!(
                f,
                "SKILL.md: `description` is {chars} characters, longer than the \
                 {AGENT_SKILL_DESCRIPTION_CHARS} the Agent Skills specification allows{place}: \
                 it is served whole, but some clients cut or refuse it"
            ),
            ManifestWarning::NotRunnable { why, .. } => f.write_str(why),
        }
    }
}

/// Serialized as `{"kind": …, "message": …}`.
impl Serialize for ManifestWarning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut st = s.serialize_struct("ManifestWarning", 2)?;
        st.serialize_field("kind", self.kind())?;
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}
