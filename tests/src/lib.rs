//! Helpers shared by the end-to-end tests: loading the plugins built from
//! `plugins/` by the host's build script.

use std::path::Path;

use skillhost::plugin_artifacts as art;
use skillhost::{Sandbox, SandboxBuilder, Skill, SkillManifest};

/// A sandbox with default settings.
pub fn sandbox() -> Sandbox {
    SandboxBuilder::new().build().expect("sandbox")
}

/// Loads a plugin from its source folder's manifest and the built component.
pub fn load_plugin(sandbox: &Sandbox, dir: &str, wasm_path: &str) -> Result<Skill, skillhost::SkillError> {
    let manifest = SkillManifest::load_dir(Path::new(dir))?;
    let wasm = std::fs::read(wasm_path).expect("built plugin");
    Skill::from_parts(sandbox, manifest, Some(&wasm))
}

/// The hostile test skill.
pub fn hostile(sandbox: &Sandbox) -> Skill {
    load_plugin(sandbox, art::HOSTILE_DIR, art::HOSTILE_WASM_PATH).expect("hostile loads")
}

/// The text-tools example skill.
pub fn text_tools(sandbox: &Sandbox) -> Skill {
    load_plugin(sandbox, art::TEXT_TOOLS_DIR, art::TEXT_TOOLS_WASM_PATH).expect("text-tools loads")
}

/// The json-tools example skill.
pub fn json_tools(sandbox: &Sandbox) -> Skill {
    load_plugin(sandbox, art::JSON_TOOLS_DIR, art::JSON_TOOLS_WASM_PATH).expect("json-tools loads")
}
