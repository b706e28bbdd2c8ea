//! Built-in skills: the example plugins `text-tools` and `json-tools`,
//! built from source by the build script and shipped inside the library.
//! Built-in skills are trusted.

use crate::sandbox::Sandbox;
use crate::skill::manifest::SkillManifest;
use crate::skill::{Skill, SkillError};

mod artifacts {
    include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));
}

/// One built-in skill: its manifest text and component bytes.
///
/// ```
/// for b in skillhost::builtin_skills() {
///     println!("{} ({} bytes)", b.name, b.component.len());
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct BuiltinSkill {
    /// The skill's name.
    pub name: &'static str,
    /// `skill.yaml` as shipped.
    pub manifest: &'static str,
    /// The component.
    pub component: &'static [u8],
}

impl BuiltinSkill {
    /// Loads this built-in skill into a sandbox.
    ///
    /// ```
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// let skill = skillhost::builtin_skills()[0].load(&sandbox).unwrap();
    /// ```
    pub fn load(&self, sandbox: &Sandbox) -> Result<Skill, SkillError> {
        let manifest = SkillManifest::parse(self.manifest)?;
        Skill::from_parts(sandbox, manifest, Some(self.component))
    }
}

const BUILTINS: &[BuiltinSkill] = &[
    BuiltinSkill {
        name: "text-tools",
        manifest: artifacts::TEXT_TOOLS_MANIFEST,
        component: artifacts::TEXT_TOOLS_WASM,
    },
    BuiltinSkill {
        name: "json-tools",
        manifest: artifacts::JSON_TOOLS_MANIFEST,
        component: artifacts::JSON_TOOLS_WASM,
    },
];

/// The built-in skills.
///
/// ```
/// assert!(skillhost::builtin_skills().iter().any(|b| b.name == "text-tools"));
/// ```
pub fn builtin_skills() -> &'static [BuiltinSkill] {
    BUILTINS
}
