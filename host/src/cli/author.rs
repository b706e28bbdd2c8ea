//! Plugin-author commands: `new` and `check`.

use std::path::{Path, PathBuf};

use skillhost::LimitsRequest;
use skillhost::Sandbox;
use skillhost::Skill;
use skillhost::SkillManifest;

/// Where the guest SDK's source is, when this binary was built from a checkout.
fn sdk_dependency() -> String {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.join("guest-sdk"));
    match sdk.and_then(|p| p.canonicalize().ok()) {
        Some(p) if p.join("Cargo.toml").exists() => {
            format!("{{ path = {:?} }}", p.display().to_string())
        }
        _ => format!("\"{}\"", env!("CARGO_PKG_VERSION")),
    }
}

/// Scaffolds a skill folder that `build`, `check` and `pack` accept as is.
pub(super) fn new_skill(name: &str, parent: &Path) -> anyhow::Result<PathBuf> {
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
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(
        dir.join("skill.yaml"),
        format!(
            r#"name: {name}
version: 0.1.0
description: Greets someone by name.
instructions: |
  Use `{tool}` to greet a person by name.
tool_names: [{tool}]
component: {stem}.wasm
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
        ),
    )?;
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "{crate_name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
skillhost-guest = {sdk}
serde = {{ version = "1", features = ["derive"] }}

[profile.release]
opt-level = "s"
lto = true
strip = true

# A skill is its own workspace, even inside another project's folder.
[workspace]
"#,
            sdk = sdk_dependency()
        ),
    )?;
    std::fs::write(
        dir.join("src/lib.rs"),
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
    )?;
    std::fs::write(dir.join(".gitignore"), "target/\n*.wasm\n")?;
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
            Ok(out) => match &ex.output {
                Some(expected) if *expected != out.output => problems.push(format!(
                    "examples[{i}] ({}): expected {expected} but got {}",
                    ex.tool, out.output
                )),
                _ => passed += 1,
            },
            Err(e) => problems.push(format!("examples[{i}] ({}): {e}", ex.tool)),
        }
    }
    let mut summary = format!(
        "{label}: {} tools, {passed}/{} examples passed",
        manifest.tools.len(),
        manifest.examples.len()
    );
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
