//! The skill manifest, `skill.yaml`: parsed and validated completely before
//! anything runs.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component as PathComponent, Path};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::LimitsRequest;

mod located;
mod permissions;
pub(crate) mod prompts;
pub(crate) mod resources;
mod scripts;
mod warning;
pub use permissions::{Permissions, ScriptsPermission, SecretDecl};
pub use prompts::{PromptArgumentDecl, PromptDecl, PromptMessageDecl, PromptRole};
pub use resources::{ResourceDecl, ResourceTemplateDecl};
pub use scripts::{DEFAULT_SCRIPTS_FOLDER, PythonDecl, ReadOnlyScripts, ScriptsDecl};
pub use warning::{AGENT_SKILL_DESCRIPTION_CHARS, ManifestWarning};

/// Name of the manifest file in a skill folder.
pub const MANIFEST_FILE: &str = "skill.yaml";

/// Name of an Agent Skills file, accepted when there is no `skill.yaml`.
pub const AGENT_SKILL_FILE: &str = "SKILL.md";

/// Deepest nesting of YAML collections accepted in a manifest.
pub const MAX_YAML_DEPTH: usize = 32;

/// Largest `skill.yaml` accepted, in bytes. A manifest is a page of text;
/// anything bigger is a mistake or an attack on the parser.
pub const MAX_MANIFEST_BYTES: usize = 1 << 20;

/// Most YAML values (scalars, sequences, mappings; keys included) a
/// manifest may expand to, counting a value again each time an alias
/// repeats it. serde_yaml's own "repetition limit" bounds the number of
/// alias uses, not what they expand to: one anchored list of `n` items
/// used `n` times costs `n * n` values, gigabytes from a few kilobytes.
const MAX_YAML_VALUES: usize = 1 << 18;

/// Most bytes of scalar text a manifest may expand to, aliases counted
/// each time they are used. Without aliases the text is never longer
/// than the manifest itself.
const MAX_YAML_TEXT_BYTES: usize = 2 * MAX_MANIFEST_BYTES;

/// Longest Agent Skills `compatibility` accepted, in characters (the spec's
/// limit).
const MAX_COMPATIBILITY_CHARS: usize = 500;

/// A validated skill manifest.
///
/// ```
/// let m = skillhost::SkillManifest::parse(r#"
/// name: greeter
/// version: 1.0.0
/// description: Greets people.
/// instructions: Use demo.greet to greet someone.
/// tool_names: [demo.greet]
/// component: greeter.wasm
/// tools:
///   - name: demo.greet
///     description: Greets someone by name.
///     read_only: true
/// "#).unwrap();
/// assert_eq!(m.name, "greeter");
/// assert!(!m.tools[0].requires_confirmation());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillManifest {
    /// The skill's name: `[a-z0-9][a-z0-9._-]{0,63}`.
    pub name: String,
    /// A semantic version.
    pub version: semver::Version,
    /// One or two sentences on what the skill is for.
    pub description: String,
    /// Text for the agent's system prompt. Never executed.
    #[serde(default)]
    pub instructions: String,
    /// Every tool the skill may use: its own, built-in ones, MCP ones.
    #[serde(default)]
    pub tool_names: Vec<String>,
    /// The tools the skill's component implements.
    #[serde(default)]
    pub tools: Vec<ToolDecl>,
    /// Path of the component, relative to the skill folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// Limits the skill asks for; the host policy caps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ManifestLimits>,
    /// Example calls and their expected outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
    /// License name or file (Agent Skills `license`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Environment requirements (Agent Skills `compatibility`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Free-form string metadata (Agent Skills `metadata`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// What the component may reach beyond computing (network origins,
    /// secrets, its assets); nothing unless declared, and nothing until an
    /// operator approved it.
    #[serde(default, skip_serializing_if = "Permissions::is_empty")]
    pub permissions: Permissions,
    /// Prompt templates the skill publishes besides its instructions
    /// prompt, served to MCP clients that may see the skill.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<PromptDecl>,
    /// Resources the skill publishes under URIs of its own, each one of
    /// its files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceDecl>,
    /// Resource templates the skill publishes, each served by one of its
    /// read-only tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_templates: Vec<ResourceTemplateDecl>,
    /// How the skill's scripts folder is run (optional: a skill with a
    /// `scripts/` folder gets the defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scripts: Option<ScriptsDecl>,
    /// What loaded but should be known (a long `SKILL.md` description, a
    /// script the sandbox cannot run); never read from the file.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<ManifestWarning>,
    /// The scripts found in the skill's folder ([`SkillManifest::load_dir`]).
    #[serde(skip)]
    pub(crate) script_set: Option<std::sync::Arc<crate::skill::scripts::ScriptSet>>,
}

/// One tool a skill's component implements.
///
/// ```
/// let t: skillhost::ToolDecl = serde_yaml::from_str("name: a.b\ndescription: d").unwrap();
/// assert!(t.requires_confirmation(), "mutating by default");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDecl {
    /// The tool's name, unique within the skill.
    pub name: String,
    /// What the tool does, for the agent.
    pub description: String,
    /// JSON Schema of the arguments; absent means the default args schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the result; absent means any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// True if the tool changes nothing outside itself.
    #[serde(default)]
    pub read_only: bool,
    /// Whether a call must be confirmed; defaults to "not read-only".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_confirmation: Option<bool>,
    /// The canonical worker this tool belongs to (e.g. `knowledge_worker`);
    /// default `general_worker`. Checked against the host's list when the
    /// skill is registered; an alias such as `knowledge` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specialist: Option<String>,
    /// What the tool returns: one JSON value (`json`, the default) or a
    /// list of MCP content blocks (`content`: text, images, audio,
    /// resources), served as the call's MCP `content`.
    #[serde(
        default,
        skip_serializing_if = "crate::skill::content::ResultKind::is_json"
    )]
    pub result: crate::skill::content::ResultKind,
}

impl ToolDecl {
    /// Whether calls need confirmation: as declared, else `!read_only`.
    ///
    /// ```
    /// let t: skillhost::ToolDecl = serde_yaml::from_str("name: a\ndescription: d\nread_only: true").unwrap();
    /// assert!(!t.requires_confirmation());
    /// ```
    pub fn requires_confirmation(&self) -> bool {
        self.requires_confirmation.unwrap_or(!self.read_only)
    }

    /// Why calls need confirmation, naming the `skill.yaml` field that
    /// decided; `None` when they do not.
    ///
    /// ```
    /// let t: skillhost::ToolDecl = serde_yaml::from_str("name: a\ndescription: d").unwrap();
    /// assert_eq!(t.confirmation_reason().as_deref(),
    ///     Some("its skill.yaml does not declare `read_only: true`"));
    /// ```
    pub fn confirmation_reason(&self) -> Option<String> {
        match (self.requires_confirmation, self.read_only) {
            (Some(true), _) => {
                Some("its skill.yaml declares `requires_confirmation: true`".to_string())
            }
            (None, false) => Some("its skill.yaml does not declare `read_only: true`".to_string()),
            (Some(false), _) | (None, true) => None,
        }
    }
}

/// Limits as a manifest asks for them.
///
/// ```
/// let l: skillhost::ManifestLimits = serde_yaml::from_str("memory_mb: 16").unwrap();
/// assert_eq!(l.to_request().memory_bytes, Some(16 << 20));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestLimits {
    /// Fuel units per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Memory cap per call, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// Deadline per call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl ManifestLimits {
    /// The same request in the host's units.
    ///
    /// ```
    /// let l = skillhost::ManifestLimits { timeout_ms: Some(5), ..Default::default() };
    /// assert_eq!(l.to_request().timeout_ms, Some(5));
    /// ```
    pub fn to_request(&self) -> LimitsRequest {
        LimitsRequest {
            fuel: self.fuel,
            memory_bytes: self.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
            timeout_ms: self.timeout_ms,
        }
    }
}

/// An example call, run by `skillhost check`.
///
/// ```
/// let e: skillhost::Example = serde_yaml::from_str("tool: a\nargs: {x: 1}\noutput: 2").unwrap();
/// assert_eq!(e.output, Some(serde_json::json!(2)));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Tool to call.
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// Expected output; absent means "any successful output".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// A manifest that could not be parsed or failed validation. Each error
/// names the file (`skill.yaml`, `SKILL.md`) and, where it is about one,
/// the field (`` `tools[0].read_only` ``) and its line and column in the
/// file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The YAML itself is malformed or has unknown or mistyped fields; the
    /// message begins with the file's name.
    #[error("{0}")]
    Syntax(String),
    /// The skill's scripts folder cannot be read (a symbolic link out of
    /// the skill folder, a folder over the sandbox's caps, a declared
    /// read-only script that is not one).
    #[error("{0}")]
    Scripts(String),
    /// The YAML parsed but its content is not allowed; every problem is listed.
    #[error("{file} of `{skill}`: {}", problems.join("; "))]
    Invalid {
        /// The file: `skill.yaml` or `SKILL.md`.
        file: &'static str,
        /// The skill's name as written.
        skill: String,
        /// Every problem found, each with the line of the field it names.
        problems: Vec<String>,
    },
}

/// Agent Skills front matter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentSkillFrontMatter {
    name: String,
    description: String,
    #[serde(default)]
    license: Option<String>,
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default, rename = "allowed-tools")]
    allowed_tools: Option<AllowedTools>,
}

/// `allowed-tools`: a space-separated string (as the spec writes it) or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AllowedTools {
    Text(String),
    List(Vec<String>),
}

/// What a YAML document expands to so far: values and bytes of text left.
struct YamlBudget {
    values: Cell<usize>,
    text_bytes: Cell<usize>,
}

/// Walks a YAML document the way building a `serde_yaml::Value` would,
/// aliases expanded, building nothing and failing once the document
/// expands past [`MAX_YAML_VALUES`] or [`MAX_YAML_TEXT_BYTES`], or nests
/// collections deeper than its depth limit (a mapping's keys count as
/// deep as its values).
#[derive(Clone, Copy)]
struct CountValues<'a> {
    budget: &'a YamlBudget,
    /// How deep the value about to be read is (the document: 0).
    depth: usize,
    /// The deepest accepted.
    max_depth: usize,
}

impl CountValues<'_> {
    /// The walker of the values inside the one about to be read.
    fn deeper(self) -> Self {
        CountValues {
            depth: self.depth + 1,
            ..self
        }
    }

    /// Refuses a value past the depth limit (called from inside the
    /// reader's read of the value, so the error names where it is).
    fn within<E: serde::de::Error>(self) -> Result<(), E> {
        if self.depth > self.max_depth {
            return Err(E::custom(format!(
                "nested deeper than {} levels",
                self.max_depth
            )));
        }
        Ok(())
    }

    fn take_value<E: serde::de::Error>(self) -> Result<(), E> {
        let left = self.budget.values.get();
        if left == 0 {
            return Err(E::custom(format!(
                "expands to more than {MAX_YAML_VALUES} YAML values (aliases count each time they are used)"
            )));
        }
        self.budget.values.set(left - 1);
        Ok(())
    }

    fn take_text<E: serde::de::Error>(self, len: usize) -> Result<(), E> {
        let left = self.budget.text_bytes.get();
        if len > left {
            return Err(E::custom(format!(
                "expands to more than {MAX_YAML_TEXT_BYTES} bytes of text (aliases count each time they are used)"
            )));
        }
        self.budget.text_bytes.set(left - len);
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for CountValues<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.take_value()?;
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CountValues<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        // As serde_yaml's own `Value` says, so that errors read the same.
        f.write_str("any YAML value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.within()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.within()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.within()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.within()
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<(), E> {
        self.within()?;
        self.take_text(s.len())
    }
    fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<(), E> {
        self.within()?;
        self.take_text(b.len())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.within()
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.within()
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_newtype_struct<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.within()?;
        while seq.next_element_seed(self.deeper())?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.within()?;
        while map.next_key_seed(self.deeper())?.is_some() {
            map.next_value_seed(self.deeper())?;
        }
        Ok(())
    }
    /// A tagged value (`!tag value`).
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        use serde::de::VariantAccess as _;
        self.within()?;
        let ((), contents) = data.variant_seed(self)?;
        contents.newtype_variant_seed(self.deeper())
    }
}

/// Parses YAML text into a value, refusing documents whose aliases expand
/// past [`MAX_YAML_VALUES`] or [`MAX_YAML_TEXT_BYTES`] before anything is
/// built.
pub(crate) fn parse_yaml(text: &str) -> Result<serde_yaml::Value, serde_yaml::Error> {
    parse_yaml_within(text, usize::MAX)
}

/// [`parse_yaml`], refusing collections nested deeper than `max_depth`
/// too (naming where).
fn parse_yaml_within(text: &str, max_depth: usize) -> Result<serde_yaml::Value, serde_yaml::Error> {
    use serde::de::DeserializeSeed as _;
    let budget = YamlBudget {
        values: Cell::new(MAX_YAML_VALUES),
        text_bytes: Cell::new(MAX_YAML_TEXT_BYTES),
    };
    CountValues {
        budget: &budget,
        depth: 0,
        max_depth,
    }
    .deserialize(serde_yaml::Deserializer::from_str(text))?;
    serde_yaml::from_str(text)
}

/// Reads `text` of `file` as a `T`: checked and parsed by
/// [`parse_yaml_within`] (aliases, depth, duplicate keys), then read from
/// that value, the path of the field an error is about kept, so that the
/// error names the field and where it is in the file (see `located.rs`).
fn read_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    file: located::ManifestFile,
) -> Result<T, ManifestError> {
    let value = parse_yaml_within(text, MAX_YAML_DEPTH)
        .map_err(|e| ManifestError::Syntax(file.syntax(&e)))?;
    serde_path_to_error::deserialize(value).map_err(|e| ManifestError::Syntax(file.typed(text, &e)))
}

fn valid_skill_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c))
}

/// Whether `name` is an acceptable tool name: 1 to 128 characters of ASCII
/// letters, digits, `.`, `_`, `-`, starting with a letter or digit.
///
/// ```
/// assert!(skillhost::valid_tool_name("text.word_count"));
/// assert!(!skillhost::valid_tool_name("text word"));
/// ```
pub fn valid_tool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
}

/// Whether a relative path stays inside its folder: no absolute path, no
/// `..`, no backslash, no NUL.
fn contained_relative_path(p: &str) -> bool {
    !p.is_empty()
        && !p.contains('\\')
        && !p.contains('\0')
        && Path::new(p)
            .components()
            .all(|c| matches!(c, PathComponent::Normal(_) | PathComponent::CurDir))
}

impl SkillManifest {
    /// Parses and validates a manifest from YAML text.
    ///
    /// ```
    /// let err = skillhost::SkillManifest::parse("name: x\nversion: 1.0.0\ndescription: d\nflavour: mint").unwrap_err();
    /// assert!(err.to_string().contains("unknown field `flavour`"));
    /// ```
    pub fn parse(yaml: &str) -> Result<SkillManifest, ManifestError> {
        let file = located::ManifestFile::SkillYaml;
        if yaml.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::Syntax(format!(
                "skill.yaml: {} bytes is larger than the {MAX_MANIFEST_BYTES}-byte limit",
                yaml.len()
            )));
        }
        // A byte-order mark, as some editors write, is not part of the YAML.
        let yaml = yaml.strip_prefix('\u{feff}').unwrap_or(yaml);
        let mut manifest: SkillManifest = read_yaml(yaml, file)?;
        manifest
            .validate(file.name())
            .map_err(|e| e.located(yaml, file))?;
        Ok(manifest)
    }

    /// Parses an Agent Skills `SKILL.md`: YAML front matter (`name`,
    /// `description`, optional `license`, `compatibility`, `metadata`,
    /// `allowed-tools`) and a Markdown body that becomes the instructions.
    /// The version is `metadata.version` when it is semver, else `0.0.0`.
    ///
    /// ```
    /// let m = skillhost::SkillManifest::parse_skill_md("---\nname: pdf-notes\ndescription: Takes notes.\n---\nRead the PDF first.\n").unwrap();
    /// assert_eq!(m.instructions, "Read the PDF first.\n");
    /// assert_eq!(m.version.to_string(), "0.0.0");
    /// ```
    pub fn parse_skill_md(text: &str) -> Result<SkillManifest, ManifestError> {
        let file = located::ManifestFile::SkillMd;
        if text.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::Syntax(format!(
                "SKILL.md: larger than the {MAX_MANIFEST_BYTES}-byte limit"
            )));
        }
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let rest = text
            .strip_prefix("---\n")
            .or_else(|| text.strip_prefix("---\r\n"))
            .ok_or_else(|| {
                ManifestError::Syntax("SKILL.md: must start with `---` YAML front matter".into())
            })?;
        // The front matter ends at the first line that is `---` alone
        // (trailing blanks allowed), which may be the very next line.
        let mut start = 0;
        let mut closing = None;
        for line in rest.split_inclusive('\n') {
            let end = start + line.len();
            if line.trim_end_matches(['\n', '\r', ' ', '\t']) == "---" {
                closing = Some((start, end));
                break;
            }
            start = end;
        }
        let Some((front_end, body_start)) = closing else {
            return Err(ManifestError::Syntax(
                "SKILL.md: the front matter has no closing `---`".into(),
            ));
        };
        let (front, body) = (&rest[..front_end], &rest[body_start..]);
        let fm: AgentSkillFrontMatter = read_yaml(front, file)?;
        let mut problems = Vec::new();
        let valid_name = !fm.name.is_empty()
            && fm.name.len() <= 64
            && fm
                .name
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && !fm.name.starts_with('-')
            && !fm.name.ends_with('-')
            && !fm.name.contains("--");
        if !valid_name {
            problems.push(format!(
                "`name`: `{}` must be 1 to 64 characters of [a-z0-9-], \
                 neither starting nor ending with `-` nor containing `--`",
                fm.name.escape_debug()
            ));
        }
        let description_chars = fm.description.chars().count();
        if fm
            .compatibility
            .as_ref()
            .is_some_and(|c| c.chars().count() > MAX_COMPATIBILITY_CHARS)
        {
            problems.push(format!(
                "`compatibility` is longer than {MAX_COMPATIBILITY_CHARS} characters"
            ));
        }
        if !problems.is_empty() {
            return Err(ManifestError::Invalid {
                file: file.name(),
                skill: fm.name,
                problems,
            }
            .located(front, file));
        }
        let version = fm
            .metadata
            .get("version")
            .and_then(|v| semver::Version::parse(v).ok())
            .unwrap_or_else(|| semver::Version::new(0, 0, 0));
        let tool_names = match fm.allowed_tools {
            None => Vec::new(),
            Some(AllowedTools::List(v)) => v,
            Some(AllowedTools::Text(t)) => t.split_whitespace().map(str::to_string).collect(),
        };
        let mut manifest = SkillManifest {
            name: fm.name,
            version,
            description: fm.description,
            instructions: body.to_string(),
            tool_names,
            tools: Vec::new(),
            component: None,
            limits: None,
            examples: Vec::new(),
            license: fm.license,
            compatibility: fm.compatibility,
            metadata: fm.metadata,
            // A SKILL.md skill has no component: nothing would use them.
            permissions: Permissions::default(),
            prompts: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
            scripts: None,
            warnings: Vec::new(),
            script_set: None,
        };
        manifest
            .validate(file.name())
            .map_err(|e| e.located(front, file))?;
        // Longer than the specification allows, yet only a client could
        // break on it: the whole manifest's byte cap is the refusal.
        if description_chars > AGENT_SKILL_DESCRIPTION_CHARS {
            manifest.warnings.push(ManifestWarning::LongDescription {
                chars: description_chars,
                place: located::place(front, file, "description"),
            });
        }
        Ok(manifest)
    }

    /// Reads `skill.yaml` from a skill folder.
    ///
    /// ```no_run
    /// let m = skillhost::SkillManifest::load_dir(std::path::Path::new("plugins/text-tools")).unwrap();
    /// ```
    pub fn load_dir(dir: &Path) -> Result<SkillManifest, ManifestError> {
        let yaml = dir.join(MANIFEST_FILE);
        let md = dir.join(AGENT_SKILL_FILE);
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|e| {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                ManifestError::Syntax(format!("{name}: cannot read {}: {e}", path.display()))
            })
        };
        let mut manifest = if yaml.exists() {
            SkillManifest::parse(&read(&yaml)?)?
        } else if md.exists() {
            SkillManifest::parse_skill_md(&read(&md)?)?
        } else {
            return Err(ManifestError::Syntax(format!(
                "{} has neither {MANIFEST_FILE} nor {AGENT_SKILL_FILE}",
                dir.display()
            )));
        };
        let scanned = crate::skill::scripts::ScriptSet::scan(dir, &manifest)
            .map_err(|e| ManifestError::Scripts(format!("skill `{}`: {e}", manifest.name)))?;
        if let Some((set, _files)) = scanned {
            manifest.warnings.extend(set.warnings());
            manifest.permissions.scripts = Some(set.permission());
            manifest.script_set = Some(std::sync::Arc::new(set));
        }
        Ok(manifest)
    }

    /// The scripts of the skill, when it was read from a folder that has
    /// them ([`SkillManifest::load_dir`]).
    ///
    /// ```no_run
    /// let m = skillhost::SkillManifest::load_dir(std::path::Path::new("plugins/text-tools")).unwrap();
    /// assert!(m.script_set().is_none());
    /// ```
    pub fn script_set(&self) -> Option<&crate::skill::scripts::ScriptSet> {
        self.script_set.as_deref()
    }

    /// Checks everything serde cannot: names, uniqueness, schemas, paths,
    /// permissions (put in canonical form). `file` names the manifest in
    /// the error.
    fn validate(&mut self, file: &'static str) -> Result<(), ManifestError> {
        let mut problems = Vec::new();
        self.permissions.validate(&mut problems);
        if let Some(s) = &self.scripts {
            problems.extend(s.problems());
        }
        problems.extend(prompts::problems(&self.name, &self.prompts));
        problems.extend(resources::problems(
            &self.resources,
            &self.resource_templates,
            &self.tools,
        ));
        if !self.permissions.is_empty() && self.component.is_none() {
            problems
                .push("`permissions`: the skill has no `component`; nothing would use them".into());
        }
        if !valid_skill_name(&self.name) {
            problems.push(format!(
                "`name`: `{}` must match [a-z0-9][a-z0-9._-]{{0,63}}",
                self.name.escape_debug()
            ));
        }
        if self.description.trim().is_empty() {
            problems.push("`description` is empty".into());
        }
        let mut listed = BTreeSet::new();
        for n in &self.tool_names {
            if !valid_tool_name(n) {
                problems.push(format!(
                    "`tool_names`: `{}` is not a valid tool name",
                    n.escape_debug()
                ));
            }
            if !listed.insert(n.as_str()) {
                problems.push(format!("`tool_names`: `{n}` is listed twice"));
            }
        }
        let mut declared = BTreeSet::new();
        for (i, t) in self.tools.iter().enumerate() {
            if !valid_tool_name(&t.name) {
                problems.push(format!(
                    "`tools[{i}].name`: `{}` is not a valid tool name",
                    t.name.escape_debug()
                ));
            }
            if !declared.insert(t.name.as_str()) {
                problems.push(format!("`tools[{i}]`: tool `{}` is declared twice", t.name));
            }
            if !listed.contains(t.name.as_str()) {
                problems.push(format!(
                    "`tools[{i}]`: tool `{}` is not listed in `tool_names`; add it there",
                    t.name
                ));
            }
            if t.result == crate::skill::content::ResultKind::Content && t.output_schema.is_some() {
                problems.push(format!(
                    "`tools[{i}]` `{}`: `result: content` returns MCP content blocks, which the \
                     host checks itself; remove `output_schema` (it describes a `result: json` value)",
                    t.name
                ));
            }
            for (field, schema) in [
                ("input_schema", &t.input_schema),
                ("output_schema", &t.output_schema),
            ] {
                if let Some(s) = schema
                    && let Err(e) = crate::skill::schema::Schema::compile(s)
                {
                    problems.push(format!("`tools[{i}].{field}` of `{}`: {e}", t.name));
                }
            }
        }
        if let Some(c) = &self.component {
            if !contained_relative_path(c) {
                problems.push(format!(
                    "`component`: `{}` must be a relative path inside the skill folder",
                    c.escape_debug()
                ));
            }
            if self.tools.is_empty() {
                problems.push("`component` is set but `tools` declares no tool".into());
            }
        } else if !self.tools.is_empty() {
            problems.push("`tools` are declared but no `component` implements them".into());
        }
        if let Some(l) = &self.limits {
            for (name, v) in [
                ("fuel", l.fuel),
                ("memory_mb", l.memory_mb),
                ("timeout_ms", l.timeout_ms),
            ] {
                if v == Some(0) {
                    problems.push(format!("`limits.{name}` must be greater than 0"));
                }
            }
        }
        for (i, e) in self.examples.iter().enumerate() {
            if !declared.contains(e.tool.as_str()) {
                problems.push(format!(
                    "`examples[{i}]`: `{}` is not one of this skill's tools",
                    e.tool
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ManifestError::Invalid {
                file,
                skill: self.name.clone(),
                problems,
            })
        }
    }

    /// The declaration of one of this skill's own tools.
    ///
    /// ```
    /// let m = skillhost::SkillManifest::parse("name: s\nversion: 0.1.0\ndescription: d").unwrap();
    /// assert!(m.tool("nope").is_none());
    /// ```
    pub fn tool(&self, name: &str) -> Option<&ToolDecl> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name: s\nversion: 0.1.0\ndescription: d\ntool_names: [a.b]\ntools:\n  - name: a.b\n    description: x\ncomponent: c.wasm\n";

    #[test]
    fn good_manifest_parses() {
        let m = SkillManifest::parse(GOOD).unwrap();
        assert_eq!(m.tools.len(), 1);
        assert!(m.tools[0].requires_confirmation());
    }

    #[test]
    fn problems_are_all_listed() {
        let y = "name: Bad Name\nversion: 0.1.0\ndescription: ''\ntool_names: [x, x]\ntools:\n  - name: y\n    description: d\n    input_schema: {type: 12}\ncomponent: ../escape.wasm\n";
        let err = SkillManifest::parse(y).unwrap_err().to_string();
        for needle in [
            "`name`",
            "`description` is empty",
            "listed twice",
            "not listed in `tool_names`",
            "input_schema",
            "relative path",
        ] {
            assert!(err.contains(needle), "missing {needle:?} in {err}");
        }
    }

    #[test]
    fn a_content_result_takes_no_output_schema_and_unknown_kinds_fail() {
        let content = GOOD.replace("description: x\n", "description: x\n    result: content\n");
        let m = SkillManifest::parse(&content).unwrap();
        assert_eq!(
            m.tools[0].result,
            crate::skill::content::ResultKind::Content
        );
        let both = content.replace(
            "result: content\n",
            "result: content\n    output_schema: {type: object}\n",
        );
        let err = SkillManifest::parse(&both).unwrap_err().to_string();
        assert!(err.contains("remove `output_schema`"), "{err}");
        let err = SkillManifest::parse(&content.replace("result: content", "result: image"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `image`"), "{err}");
    }

    #[test]
    fn bad_version_and_unknown_fields_fail() {
        assert!(SkillManifest::parse(&GOOD.replace("0.1.0", "one")).is_err());
        let err = SkillManifest::parse(&format!("{GOOD}extra: 1\n")).unwrap_err();
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
    }

    #[test]
    fn component_paths_must_stay_inside() {
        for p in ["/etc/x.wasm", "../x.wasm", "a/../../x", "a\\b", ""] {
            assert!(!contained_relative_path(p), "{p}");
        }
        assert!(contained_relative_path("target/skill.wasm"));
    }
}

#[cfg(test)]
mod golden_tests;
