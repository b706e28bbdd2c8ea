//! A loaded skill: its validated manifest, compiled tool schemas and
//! component. Calls validate arguments before entering the sandbox and the
//! result after.

pub(crate) mod builtin;
pub(crate) mod content;
pub(crate) mod guest_build;
pub(crate) mod manifest;
pub(crate) mod schema;
pub mod scripts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use serde_json::Value;

use crate::limits::{Limits, LimitsRequest};
use crate::sandbox::{
    CallError, CallFailure, CallOptions, CallOutput, Capabilities, InvokeFuture, InvokeRequest,
    Invoker, LoadError, Sandbox, SkillComponent, ToolError,
};
use crate::skill::manifest::{ManifestError, SkillManifest};
use crate::skill::schema::{Schema, default_args_schema};

/// Name of the folder a skill's assets are in, beside its manifest.
pub const ASSETS_DIR: &str = "assets";

/// A skill that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The manifest is malformed or invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The component file is missing or unreadable.
    #[error("skill `{skill}`: cannot read component {path}: {message}")]
    ComponentFile {
        /// `name@version`.
        skill: String,
        /// Where it was looked for.
        path: PathBuf,
        /// The I/O error, or what to do.
        message: String,
    },
    /// The component was refused or failed to compile.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The component's `implemented()` disagrees with the manifest.
    #[error("skill `{skill}`: {message}")]
    Mismatch {
        /// `name@version`.
        skill: String,
        /// What differs.
        message: String,
    },
    /// Calling `implemented()` failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A prompt or resource names a file the skill folder does not have.
    #[error("skill `{skill}`: `{field}` names `{path}`, which is not a file in the skill folder")]
    MissingFile {
        /// `name@version`.
        skill: String,
        /// The manifest field, e.g. `resources[0].file`.
        field: String,
        /// The relative path it names.
        path: String,
    },
}

/// Every file `prompts` and `resources` name is a regular file in `dir`
/// (not a folder, not a symlink: what a bundle would pack and serve).
fn published_files_exist(m: &SkillManifest, dir: &Path) -> Result<(), SkillError> {
    let mut named: Vec<(String, &str)> = Vec::new();
    for (i, p) in m.prompts.iter().enumerate() {
        for (j, msg) in p.messages.iter().enumerate() {
            for (field, path) in [("image", &msg.image), ("resource", &msg.resource)] {
                if let Some(path) = path {
                    named.push((format!("prompts[{i}].messages[{j}].{field}"), path));
                }
            }
        }
    }
    for (i, r) in m.resources.iter().enumerate() {
        named.push((format!("resources[{i}].file"), &r.file));
    }
    for (field, path) in named {
        let is_file = std::fs::symlink_metadata(dir.join(path)).is_ok_and(|md| md.is_file());
        if !is_file {
            return Err(SkillError::MissingFile {
                skill: label_of(m),
                field,
                path: path.to_string(),
            });
        }
    }
    Ok(())
}

struct ToolContract {
    input: Schema,
    output: Option<Schema>,
}

struct SkillInner {
    manifest: SkillManifest,
    label: String,
    component: Option<SkillComponent>,
    contracts: BTreeMap<String, ToolContract>,
    limits: LimitsRequest,
    sandbox: Sandbox,
    config: Arc<BTreeMap<String, String>>,
    /// The skill's `assets/` folder, when loaded from a folder and its
    /// manifest declares `permissions.assets`.
    assets: Option<Arc<crate::AssetsFolder>>,
}

/// A loaded skill. Cheap to clone.
///
/// ```no_run
/// # async fn f() -> anyhow::Result<()> {
/// let sandbox = skillhost::SandboxBuilder::new().build()?;
/// let skill = skillhost::Skill::load_dir(&sandbox, std::path::Path::new("plugins/text-tools"))?;
/// let out = skill.call("text.word_count", &serde_json::json!({"text": "a b"}), &Default::default()).await?;
/// assert_eq!(out.output["words"], 2);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Skill {
    inner: Arc<SkillInner>,
}

impl std::fmt::Debug for Skill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skill")
            .field("label", &self.inner.label)
            .finish_non_exhaustive()
    }
}

impl Skill {
    /// Loads a skill folder: `skill.yaml` and the component it names.
    ///
    /// ```no_run
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// let err = skillhost::Skill::load_dir(&sandbox, std::path::Path::new("/nonexistent")).unwrap_err();
    /// ```
    pub fn load_dir(sandbox: &Sandbox, dir: &Path) -> Result<Skill, SkillError> {
        let manifest = SkillManifest::load_dir(dir)?;
        published_files_exist(&manifest, dir)?;
        let wasm = match &manifest.component {
            Some(rel) => {
                let path = dir.join(rel);
                let bytes = std::fs::read(&path).map_err(|e| SkillError::ComponentFile {
                    skill: label_of(&manifest),
                    path: path.clone(),
                    message: if e.kind() == std::io::ErrorKind::NotFound {
                        format!("not found; run `skillhost build {}` first", dir.display())
                    } else {
                        e.to_string()
                    },
                })?;
                Some(bytes)
            }
            None => None,
        };
        let assets = manifest
            .permissions
            .assets
            .then(|| crate::AssetsFolder::new(dir.join(ASSETS_DIR)));
        let mut skill = Skill::from_parts(sandbox, manifest, wasm.as_deref())?;
        if let Some(inner) = Arc::get_mut(&mut skill.inner) {
            inner.assets = assets;
        }
        Ok(skill)
    }

    /// Builds a skill from a parsed manifest and the component bytes (which
    /// must be present exactly when the manifest names a component).
    ///
    /// ```
    /// let sandbox = skillhost::SandboxBuilder::new().build().unwrap();
    /// let m = skillhost::SkillManifest::parse("name: notes\nversion: 1.0.0\ndescription: Only instructions.").unwrap();
    /// let skill = skillhost::Skill::from_parts(&sandbox, m, None).unwrap();
    /// assert_eq!(skill.label(), "notes@1.0.0");
    /// ```
    pub fn from_parts(
        sandbox: &Sandbox,
        manifest: SkillManifest,
        wasm: Option<&[u8]>,
    ) -> Result<Skill, SkillError> {
        let label = label_of(&manifest);
        let component = match (&manifest.component, wasm) {
            (Some(_), Some(bytes)) => Some(sandbox.load_with(
                &label,
                bytes,
                Capabilities {
                    network: !manifest.permissions.network.is_empty(),
                    assets: manifest.permissions.assets,
                },
            )?),
            (None, None) => None,
            (Some(path), None) => {
                return Err(SkillError::ComponentFile {
                    skill: label,
                    path: path.into(),
                    message: "the manifest names a component but none was given".into(),
                });
            }
            (None, Some(_)) => {
                return Err(SkillError::Mismatch {
                    skill: label,
                    message: "a component was given but the manifest names none".into(),
                });
            }
        };
        let mut contracts = BTreeMap::new();
        for t in &manifest.tools {
            // Schemas were compiled once during manifest validation; these
            // cannot fail, but report rather than panic if they do.
            let compile = |s: &Value| {
                Schema::compile(s).map_err(|e| SkillError::Mismatch {
                    skill: label.clone(),
                    message: format!("tool `{}`: {e}", t.name),
                })
            };
            let input = compile(t.input_schema.as_ref().unwrap_or(&default_args_schema()))?;
            let output = t.output_schema.as_ref().map(compile).transpose()?;
            contracts.insert(t.name.clone(), ToolContract { input, output });
        }
        let limits = manifest.limits.map(|l| l.to_request()).unwrap_or_default();
        Ok(Skill {
            inner: Arc::new(SkillInner {
                manifest,
                label,
                component,
                contracts,
                limits,
                sandbox: sandbox.clone(),
                config: Arc::default(),
                assets: None,
            }),
        })
    }

    /// `name@version`.
    ///
    /// ```no_run
    /// # fn f(s: skillhost::Skill) { println!("{}", s.label()); }
    /// ```
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The validated manifest.
    ///
    /// ```no_run
    /// # fn f(s: skillhost::Skill) { println!("{}", s.manifest().description); }
    /// ```
    pub fn manifest(&self) -> &SkillManifest {
        &self.inner.manifest
    }

    /// The component, if the skill has one.
    ///
    /// ```no_run
    /// # fn f(s: skillhost::Skill) { if let Some(c) = s.component() { println!("{}", c.sha256()); } }
    /// ```
    pub fn component(&self) -> Option<&SkillComponent> {
        self.inner.component.as_ref()
    }

    /// The limits a call of this skill runs under: the manifest's request,
    /// then `request` on top, resolved against the sandbox policy.
    ///
    /// ```no_run
    /// # fn f(s: skillhost::Skill) {
    /// let l = s.limits(&skillhost::LimitsRequest { timeout_ms: Some(100), ..Default::default() }).unwrap();
    /// # }
    /// ```
    pub fn limits(&self, request: &LimitsRequest) -> Result<Limits, crate::limits::LimitError> {
        let own = &self.inner.limits;
        let merged = LimitsRequest {
            fuel: request.fuel.or(own.fuel),
            memory_bytes: request.memory_bytes.or(own.memory_bytes),
            timeout_ms: request.timeout_ms.or(own.timeout_ms),
        };
        self.inner.sandbox.policy().resolve(&merged)
    }

    /// Checks that the component implements exactly the declared tools.
    ///
    /// ```no_run
    /// # async fn f(s: skillhost::Skill) { s.verify_implemented().await.unwrap(); }
    /// ```
    pub async fn verify_implemented(&self) -> Result<(), SkillError> {
        let Some(component) = &self.inner.component else {
            return Ok(());
        };
        let limits = self.limits(&LimitsRequest::default()).unwrap_or_default();
        let implemented = component.implemented(&limits).await?;
        let declared: Vec<&str> = self
            .inner
            .manifest
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let missing: Vec<&str> = declared
            .iter()
            .copied()
            .filter(|d| !implemented.iter().any(|i| i == d))
            .collect();
        let extra: Vec<&str> = implemented
            .iter()
            .map(String::as_str)
            .filter(|i| !declared.contains(i))
            .collect();
        if missing.is_empty() && extra.is_empty() {
            return Ok(());
        }
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!(
                "declared but not implemented: {}",
                missing.join(", ")
            ));
        }
        if !extra.is_empty() {
            parts.push(format!(
                "implemented but not declared: {}",
                extra.join(", ")
            ));
        }
        Err(SkillError::Mismatch {
            skill: self.inner.label.clone(),
            message: parts.join("; "),
        })
    }

    /// Calls one of this skill's tools: validates `args` against the input
    /// schema, runs the component under the resolved limits, and validates
    /// the result against the output schema.
    ///
    /// `host.invoke` from the component may reach only this skill's own
    /// tools listed in its `tool_names`; anything else is `denied`.
    ///
    /// ```no_run
    /// # async fn f(s: skillhost::Skill) {
    /// let err = s.call("text.word_count", &serde_json::json!({"txt": 1}), &Default::default()).await.unwrap_err();
    /// assert!(err.to_string().contains("invalid-input"));
    /// # }
    /// ```
    pub async fn call(
        &self,
        tool: &str,
        args: &Value,
        request: &LimitsRequest,
    ) -> Result<CallOutput, CallError> {
        let limits = self.limits(request).map_err(|e| {
            CallError::new(
                &self.inner.label,
                tool,
                CallFailure::Tool {
                    error: ToolError::InvalidInput(e.to_string()),
                },
            )
        })?;
        let opts = CallOptions {
            limits,
            config: self.inner.config.clone(),
            invoker: Some(Arc::new(SameSkill(Arc::downgrade(&self.inner)))),
            depth: 0,
            not_after: None,
            refs: None,
            // A direct call (an author's `call --skill DIR`, `check`, an
            // install's checks) reaches no network: only an operator's
            // approval does. Its own assets, read-only, it may read.
            outbound: None,
            assets: self.inner.assets.clone(),
            redact: Arc::default(),
            ..Default::default()
        };
        self.call_with(tool, args, &opts).await
    }

    /// The skill's config map (for the host's call options).
    pub(crate) fn config(&self) -> Arc<BTreeMap<String, String>> {
        self.inner.config.clone()
    }

    /// Runs a tool whose arguments the caller (the host's registry) has
    /// already validated against the same input schema; validates the
    /// result.
    pub(crate) async fn run_validated(
        &self,
        tool: &str,
        args: &Value,
        opts: &CallOptions,
    ) -> Result<CallOutput, CallError> {
        self.execute(tool, args, opts, false).await
    }

    async fn call_with(
        &self,
        tool: &str,
        args: &Value,
        opts: &CallOptions,
    ) -> Result<CallOutput, CallError> {
        self.execute(tool, args, opts, true).await
    }

    async fn execute(
        &self,
        tool: &str,
        args: &Value,
        opts: &CallOptions,
        check_input: bool,
    ) -> Result<CallOutput, CallError> {
        let label = &self.inner.label;
        let tool_err = |error| CallError::new(label, tool, CallFailure::Tool { error });
        let (Some(contract), Some(component)) =
            (self.inner.contracts.get(tool), &self.inner.component)
        else {
            return Err(tool_err(ToolError::InvalidInput(format!(
                "this skill has no tool `{tool}` (it has: {})",
                self.inner
                    .contracts
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))));
        };
        if check_input && let Err(problems) = contract.input.check(args) {
            return Err(tool_err(ToolError::InvalidInput(format!(
                "arguments do not match the input schema: {}",
                problems.join("; ")
            ))));
        }
        let out = component.call(tool, &args.to_string(), opts).await?;
        if let Some(schema) = &contract.output
            && let Err(problems) = schema.check(&out.output)
        {
            return Err(tool_err(ToolError::Failed(format!(
                "the result does not match the output schema: {}",
                problems.join("; ")
            ))));
        }
        Ok(out)
    }
}

fn label_of(m: &SkillManifest) -> String {
    format!("{}@{}", m.name, m.version)
}

/// The `invoke` policy until a registry exists: a skill may reach its own
/// tools that it lists in `tool_names`, nothing else.
struct SameSkill(Weak<SkillInner>);

impl Invoker for SameSkill {
    fn invoke(&self, req: InvokeRequest) -> InvokeFuture {
        let inner = self.0.upgrade();
        Box::pin(async move {
            let Some(inner) = inner else {
                return Err(ToolError::Failed("the skill was unloaded".into()));
            };
            let own = inner.contracts.contains_key(&req.tool);
            let listed = inner.manifest.tool_names.contains(&req.tool);
            if !(own && listed) {
                return Err(ToolError::Denied(format!(
                    "`{}` is not a tool of `{}` listed in its tool_names",
                    req.tool, inner.label
                )));
            }
            let args: Value = serde_json::from_str(&req.arguments_json).map_err(|e| {
                ToolError::InvalidInput(format!("arguments for `{}` are not JSON: {e}", req.tool))
            })?;
            let skill = Skill {
                inner: inner.clone(),
            };
            let limits = skill
                .limits(&LimitsRequest::default())
                .map_err(|e| ToolError::Failed(e.to_string()))?;
            let opts = CallOptions {
                limits,
                config: inner.config.clone(),
                invoker: Some(Arc::new(SameSkill(Arc::downgrade(&inner)))),
                depth: req.depth,
                not_after: Some(req.deadline),
                refs: None,
                outbound: None,
                assets: None,
                redact: Arc::default(),
                ..Default::default()
            };
            match Box::pin(skill.call_with(&req.tool, &args, &opts)).await {
                Ok(out) => Ok(out.output.to_string()),
                Err(e) => Err(match e.failure {
                    CallFailure::Tool { error } => error,
                    _ => ToolError::Failed(e.to_string()),
                }),
            }
        })
    }
}
