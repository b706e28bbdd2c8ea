//! Plugin-author commands: `new` (Rust, Python or JavaScript) and `check`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use skillhost::LimitsRequest;
use skillhost::Sandbox;
use skillhost::Skill;
use skillhost::SkillManifest;

/// The Rust guest SDK's sources, vendored into a new Rust skill (with the
/// WIT package its bindings are generated from), so the skill builds
/// anywhere and no path of this machine ships in its bundle.
const RUST_SDK_FILES: &[(&str, &str)] = &[
    (
        "sdk/skillhost-guest/src/lib.rs",
        include_str!("../../../guest-sdk/src/lib.rs"),
    ),
    (
        "sdk/skillhost-guest/src/http.rs",
        include_str!("../../../guest-sdk/src/http.rs"),
    ),
    ("sdk/wit/skill.wit", skillhost::SKILL_WIT),
];

/// The guest SDK's Cargo.toml with the workspace's values filled in.
fn rust_sdk_manifest() -> String {
    // `rust-version` first: it contains `version.workspace`.
    include_str!("../../../guest-sdk/Cargo.toml")
        .replace(
            "rust-version.workspace = true",
            &format!("rust-version = \"{}\"", env!("CARGO_PKG_RUST_VERSION")),
        )
        .replace(
            "version.workspace = true",
            &format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
        )
        .replace("edition.workspace = true", "edition = \"2024\"")
        .replace(
            "license.workspace = true",
            &format!("license = \"{}\"", env!("CARGO_PKG_LICENSE")),
        )
}

/// The Rust toolchain this checkout pins (`rust-toolchain.toml`), which
/// the guest SDK is built and tested with.
fn toolchain_channel() -> &'static str {
    include_str!("../../../rust-toolchain.toml")
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel"))
        .and_then(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"'))
        .filter(|v| !v.is_empty())
        .unwrap_or(env!("CARGO_PKG_RUST_VERSION"))
}

/// The language of a new skill (`skillhost new --lang`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Lang {
    /// A Rust crate on the vendored `skillhost-guest` SDK.
    Rust,
    /// `app.py` on `skillhost.py`, built with componentize-py.
    Python,
    /// `app.js` on `skillhost.js`, built with componentize-js.
    Js,
}

/// The manifest every template starts from: one `greet` tool, one example.
fn template_manifest(name: &str, tool: &str, component: &str, lang: &str) -> String {
    format!(
        r#"name: {name}
version: 0.1.0
description: Greets someone by name ({lang}).
instructions: |
  Use `{tool}` to greet a person by name.
tool_names: [{tool}]
component: {component}
tools:
  - name: {tool}
    description: Returns a greeting for a name.
    read_only: true
    input_schema:
      type: object
      properties:
        name: {{type: string, minLength: 1}}
      required: [name]
      additionalProperties: false
    output_schema:
      type: object
      properties:
        greeting: {{type: string}}
      required: [greeting]
      additionalProperties: false
examples:
  - tool: {tool}
    args: {{name: world}}
    output: {{greeting: "Hello, world!"}}
"#
    )
}

/// Scaffolds a skill folder in `lang` that `build`, `check` and `pack`
/// accept as is. Every path it writes is inside the folder.
pub(super) fn new_skill(name: &str, parent: &Path, lang: Lang) -> anyhow::Result<PathBuf> {
    let probe = format!("name: {name}\nversion: 0.1.0\ndescription: probe\n");
    if name.contains(['\n', ':', '#', '"', '\'']) || SkillManifest::parse(&probe).is_err() {
        anyhow::bail!(
            "`{}` is not a valid skill name: use [a-z0-9][a-z0-9._-]{{0,63}}",
            name.escape_debug()
        );
    }
    let dir = parent.join(name);
    if dir.exists() {
        anyhow::bail!("{} already exists", dir.display());
    }
    let crate_name = name.replace('.', "-");
    let stem = crate_name.replace('-', "_");
    let tool = format!("{stem}.greet");
    let component = format!("{stem}.wasm");
    let mut files: Vec<(String, String)> = Vec::new();
    match lang {
        Lang::Rust => {
            files.push((
                "skill.yaml".into(),
                template_manifest(name, &tool, &component, "Rust"),
            ));
            files.push((
                "Cargo.toml".into(),
                format!(
                    r#"[package]
name = "{crate_name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
# The guest SDK, vendored by `skillhost new` (with the WIT it binds to).
skillhost-guest = {{ path = "sdk/skillhost-guest" }}
serde = {{ version = "1", features = ["derive"] }}

[profile.release]
opt-level = "s"
lto = true
strip = true

# A skill is its own workspace, even inside another project's folder.
[workspace]
"#
                ),
            ));
            files.push((
                "src/lib.rs".into(),
                format!(
                    r#"use serde::{{Deserialize, Serialize}};
use skillhost_guest::{{ToolError, skill}};

#[derive(Deserialize)]
struct GreetArgs {{
    name: String,
}}

#[derive(Serialize)]
struct Greeting {{
    greeting: String,
}}

fn greet(args: GreetArgs) -> Result<Greeting, ToolError> {{
    Ok(Greeting {{ greeting: format!("Hello, {{}}!", args.name) }})
}}

skill! {{
    "{tool}" => greet,
}}
"#
                ),
            ));
            files.push(("sdk/skillhost-guest/Cargo.toml".into(), rust_sdk_manifest()));
            for (path, text) in RUST_SDK_FILES {
                files.push(((*path).into(), (*text).into()));
            }
            // The toolchain the SDK is built and tested with; rustup
            // installs the wasm target itself for a folder that names it.
            files.push((
                "rust-toolchain.toml".into(),
                format!(
                    "[toolchain]\nchannel = \"{}\"\ntargets = [\"wasm32-wasip2\"]\n",
                    toolchain_channel()
                ),
            ));
            files.push((".gitignore".into(), "target/\n*.wasm\n".into()));
        }
        Lang::Python => {
            files.push((
                "skill.yaml".into(),
                template_manifest(name, &tool, &component, "Python"),
            ));
            files.push((
                "app.py".into(),
                format!(
                    r#""""{name}: a skillhost skill in Python (built with componentize-py)."""

from dataclasses import dataclass

import skillhost

skill = skillhost.Skill()


@dataclass
class GreetArgs:
    name: str


# warm_up: called this way while the component is built, so every
# instance starts with this path already run (faster calls). Only for
# tools that need nothing from the host.
@skill.tool("{tool}", warm_up=[{{"name": "Ada"}}])
def greet(args: GreetArgs) -> dict:
    if not args.name.strip():
        raise skillhost.InvalidInput("field `name`: must not be blank")
    return {{"greeting": f"Hello, {{args.name}}!"}}


# The export componentize-py looks for.
Tools = skill.tools()
"#
                ),
            ));
            files.push(("skillhost.py".into(), skillhost::PYTHON_SDK.into()));
            files.push((".gitignore".into(), "*.wasm\n.venv/\n__pycache__/\n".into()));
        }
        Lang::Js => {
            files.push((
                "skill.yaml".into(),
                template_manifest(name, &tool, &component, "JavaScript"),
            ));
            files.push((
                "app.js".into(),
                format!(
                    r#"// {name}: a skillhost skill in JavaScript (built with componentize-js).
import {{ skill, InvalidInput }} from "./skillhost.js";

function greet({{ name }}) {{
  if (!name.trim()) throw new InvalidInput("field `name`: must not be blank");
  return {{ greeting: `Hello, ${{name}}!` }};
}}

export const tools = skill({{ "{tool}": greet }});
"#
                ),
            ));
            files.push(("skillhost.js".into(), skillhost::JS_SDK.into()));
            files.push((
                "package.json".into(),
                format!(
                    r#"{{
  "name": "{crate_name}",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "description": "A skillhost skill in JavaScript.",
  "scripts": {{
    "build": "skillhost build ."
  }},
  "devDependencies": {{
    "@bytecodealliance/componentize-js": "{version}"
  }}
}}
"#,
                    version = skillhost::COMPONENTIZE_JS_VERSION
                ),
            ));
            files.push((".gitignore".into(), "*.wasm\nnode_modules/\n".into()));
        }
    }
    for (path, text) in &files {
        let at = dir.join(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(at, text)?;
    }
    Ok(dir)
}

/// Checks a skill folder; returns every problem found (empty when fine)
/// and a summary line.
pub(super) async fn check(sandbox: &Sandbox, dir: &Path) -> (Vec<String>, String) {
    let mut problems = Vec::new();
    let manifest = match SkillManifest::load_dir(dir) {
        Ok(m) => m,
        Err(e) => return (vec![e.to_string()], String::new()),
    };
    let label = format!("{}@{}", manifest.name, manifest.version);
    if let Some(stale) = stale_component(dir, &manifest) {
        return (vec![stale], label);
    }
    let skill = match Skill::load_dir(sandbox, dir) {
        Ok(s) => s,
        Err(e) => return (vec![e.to_string()], label),
    };
    if let Err(e) = skill.verify_implemented().await {
        problems.push(e.to_string());
    }
    let mut passed = 0;
    for (i, ex) in manifest.examples.iter().enumerate() {
        match skill
            .call(&ex.tool, &ex.args, &LimitsRequest::default())
            .await
        {
            Ok(out) => match ex
                .output
                .as_ref()
                .and_then(|expected| first_difference(expected, &out.output, ""))
            {
                Some(diff) => problems.push(format!(
                    "examples[{i}] ({}): the output differs {diff}",
                    ex.tool
                )),
                None => passed += 1,
            },
            Err(e) => problems.push(format!("examples[{i}] ({}): {e}", ex.tool)),
        }
    }
    let mut summary = format!(
        "{label}: {} tools, {passed}/{} examples passed",
        manifest.tools.len(),
        manifest.examples.len()
    );
    if let Some(set) = manifest.script_set() {
        summary.push_str(&format!(
            "; {} scripts run by `{}`",
            set.scripts.iter().filter(|s| s.refusal().is_none()).count(),
            skillhost::run_script_tool(&manifest.name)
        ));
    }
    let asks = manifest.permissions.beyond(&Default::default());
    if !asks.is_empty() {
        summary.push_str(&format!(
            "; asks for (an operator approves it with `skillhost skills approve {}`): {}",
            manifest.name,
            asks.join("; ")
        ));
    }
    (problems, summary)
}

/// Why the component of the skill in `dir` is older than its sources (a
/// source changed since `skillhost build` made it, by the record the build
/// left in it, or without one by modification time), or `None`.
pub(super) fn stale_component(dir: &Path, manifest: &SkillManifest) -> Option<String> {
    let component = dir.join(manifest.component.as_ref()?);
    match skillhost::freshness(dir, &component) {
        Ok(skillhost::Freshness::Stale { changed }) => Some(format!(
            "{} is older than its sources{}: run `skillhost build {}` first",
            component.display(),
            if changed.is_empty() {
                String::new()
            } else {
                format!(" ({} changed since it was built)", changed.join(", "))
            },
            dir.display()
        )),
        // A missing or unreadable component is named when it is loaded.
        Ok(_) | Err(_) => None,
    }
}

/// Where `got` first differs from `expected`, as JSON values (numbers by
/// value: `19` and `19.0` are equal): `at /path: expected X, got Y`, or
/// `None` when they are equal.
fn first_difference(expected: &Value, got: &Value, at: &str) -> Option<String> {
    let here = || {
        if at.is_empty() {
            "/".to_string()
        } else {
            at.to_string()
        }
    };
    match (expected, got) {
        (Value::Number(a), Value::Number(b)) => {
            let same = match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => a.as_f64() == b.as_f64(),
            };
            (!same).then(|| format!("at {}: expected {a}, got {b}", here()))
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if let Some(d) = first_difference(x, y, &format!("{at}/{i}")) {
                    return Some(d);
                }
            }
            (a.len() != b.len())
                .then(|| format!("at {}: expected {} items, got {}", here(), a.len(), b.len()))
        }
        (Value::Object(a), Value::Object(b)) => {
            let pointer = |k: &str| format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
            for (k, x) in a {
                let path = pointer(k);
                match b.get(k) {
                    Some(y) => {
                        if let Some(d) = first_difference(x, y, &path) {
                            return Some(d);
                        }
                    }
                    None => return Some(format!("at {path}: expected {x}, got nothing")),
                }
            }
            b.keys()
                .find(|k| !a.contains_key(*k))
                .map(|k| format!("at {}: expected nothing, got {}", pointer(k), b[k]))
        }
        (a, b) => (a != b).then(|| format!("at {}: expected {a}, got {b}", here())),
    }
}

#[cfg(test)]
mod tests {
    use super::first_difference;
    use serde_json::json;

    #[test]
    fn outputs_compare_as_json_values_and_name_the_first_difference() {
        assert_eq!(first_difference(&json!(19), &json!(19.0), ""), None);
        assert_eq!(
            first_difference(&json!({"a": [1, 2.5]}), &json!({"a": [1.0, 2.5]}), ""),
            None
        );
        assert_eq!(
            first_difference(&json!({"a": [1, 2]}), &json!({"a": [1, 3]}), "").as_deref(),
            Some("at /a/1: expected 2, got 3")
        );
        assert_eq!(
            first_difference(&json!({"a": 1}), &json!({"a": 1, "b": true}), "").as_deref(),
            Some("at /b: expected nothing, got true")
        );
        assert_eq!(
            first_difference(&json!({"a/b": "x"}), &json!({}), "").as_deref(),
            Some("at /a~1b: expected \"x\", got nothing")
        );
        assert_eq!(
            first_difference(&json!({}), &json!({"a/b~": 1}), "").as_deref(),
            Some("at /a~1b~0: expected nothing, got 1")
        );
        assert_eq!(
            first_difference(&json!("19"), &json!(19), "").as_deref(),
            Some("at /: expected \"19\", got 19")
        );
        assert_eq!(
            first_difference(&json!([1]), &json!([1, 2]), "").as_deref(),
            Some("at /: expected 1 items, got 2")
        );
    }
}
