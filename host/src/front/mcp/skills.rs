//! Skills served to MCP clients: the Skills extension (SEP-2640,
//! `io.modelcontextprotocol/skills`) and, for clients without it, prompts.
//!
//! What a caller sees is what it may use: a persona, the skills that are
//! trusted, enabled and granted to it (their tools registered); the
//! operator, every such skill. A skill is served at
//! `skill://<name>/SKILL.md` with every file of the skill:
//!
//! - **managed installs**: the files, sizes and digests of the signed
//!   statement kept with the install (`.skillhost/statement.json`); an
//!   install made before the statement was kept is listed from its folder;
//! - **local folders**: the files a bundle would pack, hashed as they are
//!   now;
//! - **built-in skills**: `skill.yaml` and the component.
//!
//! A skill without its own `SKILL.md` gets one generated from `skill.yaml`
//! (name, description, instructions, each tool with its input schema); its
//! frontmatter is exactly the entry's. Files are read only by exact listed
//! name, through a `cap_std` directory handle (the data dir's for managed
//! installs), and checked against the listed size and digest before they
//! are served.
//!
//! A skill whose name does not follow the Agent Skills rules (lowercase
//! letters, digits, single inner hyphens; `.` and `_` are not allowed there
//! although skill.yaml allows them) is not served as an MCP skill; it is
//! still a prompt.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::PathBuf;

use base64::Engine as _;
use cap_std::fs::Dir;
use rmcp::model::{
    ErrorData, JsonObject, ReadResourceResult, Resource, ResourceContents, SKILL_MD,
    Skill as McpSkill, SkillFrontmatter, SkillResource, SkillResources, sha256_digest,
};
use serde_json::Value;

use crate::skill::scripts::tool::instructions_note;

use crate::bundle::{STATEMENT_PATH, Statement, is_packed};
use crate::registry::SkillInfo;
use crate::registry::catalog::SkillSource;
use crate::skill::builtin::builtin_skills;
use crate::skill::manifest::{MANIFEST_FILE, SkillManifest};

/// Entries per page of `skills/list`, `resources/list` and `prompts/list`.
pub(crate) const PAGE_SIZE: usize = 50;

/// Most files a served skill may have (SEP-2640: hosts need not load more).
const SKILL_FILE_LIMIT: usize = 512;

/// Most bytes a served skill may have, all files together.
const SKILL_BYTE_LIMIT: u64 = 16 << 20;

const SCHEME: &str = "skill://";
const MARKDOWN: &str = "text/markdown";

/// A fingerprint of a caller's skills, to tell whether its prompts and
/// skill resources changed.
pub(crate) fn fingerprint(skills: &[SkillInfo]) -> u64 {
    let mut h = DefaultHasher::new();
    for s in skills {
        s.entry.name.hash(&mut h);
        s.entry.version.to_string().hash(&mut h);
        s.entry.digest.hash(&mut h);
        format!("{:?}", s.entry.source).hash(&mut h);
        if let Some(m) = &s.manifest {
            m.description.hash(&mut h);
            m.instructions.hash(&mut h);
        }
    }
    h.finish()
}

/// The items of one page: those after `cursor` (the key of the last item
/// of the previous page), at most [`PAGE_SIZE`], and the cursor of the
/// next page if more follow. `items` are sorted by `key`.
pub(crate) fn page<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> &str,
    cursor: Option<&str>,
) -> (Vec<T>, Option<String>) {
    let mut rest: Vec<T> = items
        .into_iter()
        .filter(|i| cursor.is_none_or(|c| key(i) > c))
        .collect();
    if rest.len() <= PAGE_SIZE {
        return (rest, None);
    }
    rest.truncate(PAGE_SIZE);
    let next = rest.last().map(|i| key(i).to_string());
    (rest, next)
}

/// Whether `name` follows the Agent Skills naming rules SEP-2640 requires
/// of a skill's URI: 1 to 64 of `[a-z0-9-]`, no leading, trailing or double
/// hyphen.
pub(crate) fn servable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The URI of a skill's `SKILL.md`.
pub(crate) fn skill_md_uri(name: &str) -> String {
    format!("{SCHEME}{name}/{SKILL_MD}")
}

/// The URI of the file at `path` (`/`-separated) in skill `name`: every
/// byte but unreserved ones and `/` percent-encoded.
pub(crate) fn file_uri(name: &str, path: &str) -> String {
    let mut uri = format!("{SCHEME}{name}/");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// The skill name a `skill://<name>/<path>` URI names, if it is one.
pub(crate) fn skill_of_uri(uri: &str) -> Option<&str> {
    let (name, path) = uri.strip_prefix(SCHEME)?.split_once('/')?;
    (servable_name(name) && !path.is_empty()).then_some(name)
}

/// The `-32602` answer for a URI the caller cannot read: the same whether
/// the skill does not exist or is not the caller's.
pub(crate) fn unknown_uri(uri: &str) -> ErrorData {
    // The requested URI in `data` (SEP-2164), unless it is too long to echo.
    let data = (uri.len() <= MAX_ECHOED_URI).then(|| serde_json::json!({ "uri": uri }));
    let message = if skill_of_uri(uri).is_some() {
        format!(
            "no skill resource `{}` is served to this client; `skills/list` (or \
             `resources/list`) shows the skills it may read, and each skill entry lists \
             its files",
            crate::escape::escape_control(uri, 256, false)
        )
    } else {
        format!(
            "no resource `{}` is served to this client; `resources/list` and \
             `resources/templates/list` show what it may read (a URI that two of its skills \
             publish is served by neither)",
            crate::escape::escape_control(uri, 256, false)
        )
    };
    ErrorData::invalid_params(message, data)
}

/// The longest requested URI echoed back in an error's `data`.
const MAX_ECHOED_URI: usize = 2048;

/// Where a served skill's files are read from.
#[derive(Debug, Clone)]
enum Origin {
    Builtin {
        manifest: &'static str,
        component: Option<(String, &'static [u8])>,
    },
    /// The install's folder, relative to the data dir.
    Installed(String),
    /// A local development folder (from the operator's settings).
    Local(PathBuf),
}

/// One skill as served over MCP: its SEP-2640 entry and where its files are.
#[derive(Debug, Clone)]
pub(crate) struct ServedSkill {
    /// The `skills/list` entry.
    pub entry: McpSkill,
    origin: Origin,
    /// The generated `SKILL.md`, when the skill has none of its own.
    generated: Option<Vec<u8>>,
}

/// A file of a skill: its path in the skill folder, size, `sha256:` digest.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    path: String,
    size: u64,
    digest: String,
}

impl ServedSkill {
    /// Builds the entry of a visible skill: lists its files and reads (or
    /// generates) its `SKILL.md`. An error says why the skill cannot be
    /// served as an MCP skill.
    pub(crate) fn new(data: &Dir, info: &SkillInfo) -> Result<ServedSkill, String> {
        let name = &info.entry.name;
        if !servable_name(name) {
            return Err(format!(
                "skill `{name}` is not served as an MCP skill: its name must be 1 to 64 of \
                 [a-z0-9-] without leading, trailing or double `-` (Agent Skills rules); \
                 it is still served as a prompt"
            ));
        }
        let manifest = info
            .manifest
            .as_ref()
            .ok_or_else(|| format!("skill `{name}` has no readable manifest"))?;
        let (origin, mut files) = match info.entry.source {
            SkillSource::Builtin => {
                let b = builtin_skills()
                    .iter()
                    .find(|b| b.name == name.as_str())
                    .ok_or_else(|| format!("built-in skill `{name}` is missing"))?;
                let mut files = vec![listed(MANIFEST_FILE, b.manifest.as_bytes())];
                let component = manifest.component.as_ref().map(|c| {
                    let c = c.trim_start_matches("./").to_string();
                    files.push(listed(&c, b.component));
                    (c, b.component)
                });
                let origin = Origin::Builtin {
                    manifest: b.manifest,
                    component,
                };
                (origin, files)
            }
            SkillSource::Managed => {
                let rel = format!("skills/{name}/{}", info.entry.version);
                let dir = data
                    .open_dir(&rel)
                    .map_err(|e| format!("cannot open the install of `{name}`: {e}"))?;
                let files = match statement_files(&dir, &info.entry.digest)? {
                    Some(files) => files,
                    None => walk(&dir)?,
                };
                (Origin::Installed(rel), files)
            }
            SkillSource::Local => {
                let path = info
                    .entry
                    .path
                    .clone()
                    .ok_or_else(|| format!("local skill `{name}` has no folder"))?;
                let dir = open_local(&path)?;
                (Origin::Local(path), walk(&dir)?)
            }
        };
        if files.len() > SKILL_FILE_LIMIT
            || files.iter().map(|f| f.size).sum::<u64>() > SKILL_BYTE_LIMIT
        {
            return Err(format!(
                "skill `{name}` has more than {SKILL_FILE_LIMIT} files or {SKILL_BYTE_LIMIT} \
                 bytes, more than MCP hosts need to load"
            ));
        }
        let mut served = ServedSkill {
            entry: McpSkill::new(
                skill_md_uri(name),
                SkillFrontmatter::new(name.clone(), manifest.description.clone()),
                SkillResources::Dynamic,
            ),
            origin,
            generated: None,
        };
        let frontmatter = match files.iter().find(|f| f.path == SKILL_MD).cloned() {
            Some(own) => {
                let bytes = served.read_listed(data, &own)?;
                let text = std::str::from_utf8(&bytes)
                    .map_err(|_| format!("skill `{name}`: SKILL.md is not UTF-8"))?;
                let fm =
                    frontmatter_of(text).map_err(|e| format!("skill `{name}`: SKILL.md {e}"))?;
                // A skill with scripts: its instructions say "run"; the
                // agent is told which tool runs them. Served (and listed)
                // with the note, so its size and digest are what is read.
                if manifest.script_set().is_some() {
                    let noted = format!("{text}{}", instructions_note(name)).into_bytes();
                    files.retain(|f| f.path != SKILL_MD);
                    files.push(listed(SKILL_MD, &noted));
                    served.generated = Some(noted);
                }
                fm
            }
            None => {
                let fm = generated_frontmatter(manifest);
                let bytes = generated_skill_md(manifest, &fm)?;
                files.push(listed(SKILL_MD, &bytes));
                served.generated = Some(bytes);
                fm
            }
        };
        let mut resources: Vec<SkillResource> = files
            .iter()
            .map(|f| SkillResource::new(file_uri(name, &f.path), f.digest.clone(), f.size))
            .collect();
        resources.sort_by(|a, b| a.uri.cmp(&b.uri));
        served.entry.frontmatter = frontmatter;
        served.entry.resources = SkillResources::Files(resources);
        served
            .entry
            .validate()
            .map_err(|e| format!("skill `{name}` is not a valid MCP skill: {e}"))?;
        Ok(served)
    }

    /// The skill's name.
    pub(crate) fn name(&self) -> &str {
        self.entry.name()
    }

    /// The `resources/list` entry of the skill's `SKILL.md`.
    pub(crate) fn resource(&self) -> Resource {
        let mut r = Resource::new(&self.entry.uri, self.name())
            .with_description(&self.entry.frontmatter.description)
            .with_mime_type(MARKDOWN);
        if let Some(f) = self.listed(&self.entry.uri) {
            r = r.with_size(f.size);
        }
        r
    }

    fn listed(&self, uri: &str) -> Option<&SkillResource> {
        match &self.entry.resources {
            SkillResources::Files(files) => files.iter().find(|f| f.uri == uri),
            _ => None,
        }
    }

    /// `resources/read` of one of the skill's files, by its exact listed
    /// URI; `None` when the skill lists no such file.
    pub(crate) fn read(&self, data: &Dir, uri: &str) -> Option<Result<ReadResourceResult, String>> {
        let file = self.listed(uri)?;
        let path = self.path_of(uri)?;
        let listed = Listed {
            path,
            size: file.size,
            digest: file.digest.clone(),
        };
        Some(self.read_listed(data, &listed).map(|bytes| {
            let mime = mime_type_of(&listed.path);
            let text = mime
                .is_some_and(is_textual)
                .then_some(&bytes)
                .filter(|b| !b.contains(&0))
                .and_then(|b| std::str::from_utf8(b).ok());
            let contents = match text {
                Some(t) => ResourceContents::text(t, uri),
                None => ResourceContents::blob(
                    base64::engine::general_purpose::STANDARD.encode(&bytes),
                    uri,
                ),
            };
            let contents = match mime {
                Some(m) => contents.with_mime_type(m),
                None => contents,
            };
            ReadResourceResult::new(vec![contents])
        }))
    }

    /// The path in the skill folder of a listed URI.
    fn path_of(&self, uri: &str) -> Option<String> {
        let encoded = uri
            .strip_prefix(SCHEME)?
            .strip_prefix(self.name())?
            .strip_prefix('/')?;
        let bytes: Vec<u8> = percent_decode(encoded)?;
        let path = String::from_utf8(bytes).ok()?;
        (file_uri(self.name(), &path) == uri).then_some(path)
    }

    /// Reads a listed file and checks it against its size and digest.
    fn read_listed(&self, data: &Dir, file: &Listed) -> Result<Vec<u8>, String> {
        let name = self.name();
        let bytes = match (&self.origin, &self.generated) {
            (_, Some(md)) if file.path == SKILL_MD => md.clone(),
            (Origin::Builtin { manifest, .. }, _) if file.path == MANIFEST_FILE => {
                manifest.as_bytes().to_vec()
            }
            (Origin::Builtin { component, .. }, _) => match component {
                Some((path, bytes)) if *path == file.path => bytes.to_vec(),
                _ => return Err(format!("built-in skill `{name}` has no `{}`", file.path)),
            },
            (Origin::Installed(rel), _) => data
                .open_dir(rel)
                .and_then(|d| read_capped(&d, &file.path, file.size))
                .map_err(|e| format!("cannot read `{}` of skill `{name}`: {e}", file.path))?,
            (Origin::Local(path), _) => read_capped(&open_local(path)?, &file.path, file.size)
                .map_err(|e| format!("cannot read `{}` of skill `{name}`: {e}", file.path))?,
        };
        if bytes.len() as u64 != file.size || sha256_digest(&bytes) != file.digest {
            return Err(format!(
                "`{}` of skill `{name}` changed since it was listed; list the skill again \
                 (`skills/get`) and read the new version",
                file.path
            ));
        }
        Ok(bytes)
    }
}

fn listed(path: &str, bytes: &[u8]) -> Listed {
    Listed {
        path: path.to_string(),
        size: bytes.len() as u64,
        digest: sha256_digest(bytes),
    }
}

fn open_local(path: &std::path::Path) -> Result<Dir, String> {
    Dir::open_ambient_dir(path, cap_std::ambient_authority())
        .map_err(|e| format!("cannot open the local skill folder {}: {e}", path.display()))
}

/// Reads `path` in `dir`, at most one byte more than `size` (a file that
/// grew is then refused by the digest check, without reading all of it).
fn read_capped(dir: &Dir, path: &str, size: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    dir.open(path)?
        .take(size.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The files of an install from the signed statement kept with it; `None`
/// for an install made before statements were kept. The statement must
/// be the one recorded at install (`digest`, its hex sha256).
fn statement_files(dir: &Dir, digest: &str) -> Result<Option<Vec<Listed>>, String> {
    let bytes = match dir.read(STATEMENT_PATH) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read the install's statement: {e}")),
    };
    if sha256_digest(&bytes) != format!("sha256:{digest}") {
        return Err(format!(
            "the install's {STATEMENT_PATH} is not the statement recorded at install; \
             reinstall the skill"
        ));
    }
    let statement = Statement::from_canonical_bytes(&bytes)
        .map_err(|e| format!("the install's {STATEMENT_PATH}: {e}"))?;
    Ok(Some(
        statement
            .files
            .into_iter()
            .map(|f| Listed {
                path: f.path,
                size: f.size,
                digest: format!("sha256:{}", f.sha256),
            })
            .collect(),
    ))
}

/// Every file a bundle of this folder would hold (see
/// [`crate::bundle::is_packed`]), hashed, sorted by path. A symlink, special
/// file or non-UTF-8 name is an error, as when packing.
fn walk(root: &Dir) -> Result<Vec<Listed>, String> {
    fn visit(
        dir: &Dir,
        prefix: &str,
        out: &mut Vec<Listed>,
        bytes: &mut u64,
    ) -> Result<(), String> {
        let mut entries = dir
            .entries()
            .and_then(|e| e.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot list `{prefix}`: {e}"))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e
                .file_name()
                .into_string()
                .map_err(|n| format!("file name {n:?} is not UTF-8"))?;
            let path = format!("{prefix}{name}");
            let ty = e.file_type().map_err(|err| format!("`{path}`: {err}"))?;
            if ty.is_dir() {
                if is_packed(&name, true) {
                    let sub = dir
                        .open_dir(&name)
                        .map_err(|err| format!("cannot open `{path}`: {err}"))?;
                    visit(&sub, &format!("{path}/"), out, bytes)?;
                }
            } else if ty.is_file() {
                if !is_packed(&name, false) {
                    continue;
                }
                if out.len() >= SKILL_FILE_LIMIT {
                    return Err(format!("more than {SKILL_FILE_LIMIT} files"));
                }
                let mut data = Vec::new();
                e.open()
                    .and_then(|f| {
                        f.take(SKILL_BYTE_LIMIT.saturating_sub(*bytes) + 1)
                            .read_to_end(&mut data)
                    })
                    .map_err(|err| format!("cannot read `{path}`: {err}"))?;
                *bytes += data.len() as u64;
                if *bytes > SKILL_BYTE_LIMIT {
                    return Err(format!("more than {SKILL_BYTE_LIMIT} bytes of files"));
                }
                out.push(listed(&path, &data));
            } else {
                return Err(format!(
                    "`{path}` is a symlink or special file; a skill holds only regular files"
                ));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    visit(root, "", &mut out, &mut 0)?;
    Ok(out)
}

/// The frontmatter of a `SKILL.md`: the YAML between the leading `---`
/// lines, as JSON, with string `name` and `description`.
pub(crate) fn frontmatter_of(text: &str) -> Result<SkillFrontmatter, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(|l| l.trim_end_matches(['\r', '\n'])) != Some("---") {
        return Err("does not start with a `---` frontmatter block".into());
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut end = start;
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        end += line.len();
    }
    if !closed {
        return Err("frontmatter has no closing `---`".into());
    }
    let yaml = crate::skill::manifest::parse_yaml(&text[start..end])
        .map_err(|e| format!("frontmatter is not valid YAML: {e}"))?;
    let Value::Object(mut map) =
        serde_json::to_value(yaml).map_err(|e| format!("frontmatter is not a JSON object: {e}"))?
    else {
        return Err("frontmatter is not a mapping".into());
    };
    let mut take = |key: &str| match map.remove(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(format!("frontmatter has no `{key}` text")),
    };
    let name = take("name")?;
    let description = take("description")?;
    let mut fm = SkillFrontmatter::new(name, description);
    fm.extra = map;
    Ok(fm)
}

/// The frontmatter of the `SKILL.md` generated for a skill without one:
/// `name`, `description`, the Agent Skills `license`, `compatibility`,
/// `metadata` (with the version) and `allowed-tools`.
pub(crate) fn generated_frontmatter(m: &SkillManifest) -> SkillFrontmatter {
    let mut fm = SkillFrontmatter::new(m.name.clone(), m.description.clone());
    let mut extra = JsonObject::new();
    if let Some(l) = &m.license {
        extra.insert("license".into(), l.clone().into());
    }
    if let Some(c) = &m.compatibility {
        extra.insert("compatibility".into(), c.clone().into());
    }
    let mut metadata: JsonObject = m
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    metadata
        .entry("version")
        .or_insert_with(|| m.version.to_string().into());
    extra.insert("metadata".into(), Value::Object(metadata));
    if !m.tool_names.is_empty() {
        extra.insert("allowed-tools".into(), m.tool_names.join(" ").into());
    }
    fm.extra = extra;
    fm
}

/// The `SKILL.md` of a skill without one: `fm` as YAML frontmatter, then
/// the description, the instructions and each tool with its description
/// and input schema.
pub(crate) fn generated_skill_md(
    m: &SkillManifest,
    fm: &SkillFrontmatter,
) -> Result<Vec<u8>, String> {
    let yaml = serde_yaml::to_string(fm)
        .map_err(|e| format!("skill `{}`: cannot write its frontmatter: {e}", m.name))?;
    let mut md = format!(
        "---\n{yaml}---\n\n# {}\n\n{}\n",
        m.name,
        m.description.trim()
    );
    if !m.instructions.trim().is_empty() {
        md.push_str(&format!("\n## Instructions\n\n{}\n", m.instructions.trim()));
    }
    if m.script_set().is_some() {
        md.push_str(&instructions_note(&m.name));
    }
    if !m.tools.is_empty() {
        md.push_str("\n## Tools\n");
        for t in &m.tools {
            let schema = t
                .input_schema
                .clone()
                .unwrap_or_else(crate::skill::schema::default_args_schema);
            let schema = serde_json::to_string_pretty(&schema).unwrap_or_default();
            md.push_str(&format!(
                "\n### `{}`\n\n{}\n\n{}\n\nInput schema:\n\n```json\n{schema}\n```\n",
                t.name,
                t.description.trim(),
                if t.requires_confirmation() {
                    "Needs confirmation: a call waits until the operator approves it."
                } else {
                    "Runs without confirmation."
                },
            ));
        }
    }
    Ok(md.into_bytes())
}

/// The text of a skill's prompt: its instructions, else its description.
pub(crate) fn prompt_text(m: &SkillManifest) -> String {
    let text = if m.instructions.trim().is_empty() {
        m.description.clone()
    } else {
        m.instructions.clone()
    };
    match m.script_set() {
        Some(_) => format!("{text}{}", instructions_note(&m.name)),
        None => text,
    }
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Whether a file of this type may go out as `text` (if it is also UTF-8
/// without NUL); anything else is a base64 `blob`.
fn is_textual(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/toml"
                | "application/x-sh"
                | "image/svg+xml"
        )
}

/// The MIME type of a file by its extension; `None` when unknown.
fn mime_type_of(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    Some(match ext.as_deref()? {
        "md" | "markdown" => MARKDOWN,
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "xml" => "application/xml",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "py" => "text/x-python",
        "rs" => "text/x-rust",
        "wit" => "text/plain",
        "sh" => "application/x-sh",
        "wasm" => "application/wasm",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> SkillManifest {
        SkillManifest::parse(
            r#"
name: greeter
version: 1.2.0
description: Greets people.
instructions: Use demo.greet to greet someone.
license: MIT
tool_names: [demo.greet, demo.forget]
component: greeter.wasm
tools:
  - name: demo.greet
    description: Greets someone by name.
    read_only: true
    input_schema:
      type: object
      properties:
        name: {type: string}
  - name: demo.forget
    description: Forgets someone.
"#,
        )
        .expect("manifest")
    }

    #[test]
    fn generated_skill_md_has_the_entry_frontmatter_instructions_and_tools() {
        let m = manifest();
        let fm = generated_frontmatter(&m);
        let md = String::from_utf8(generated_skill_md(&m, &fm).expect("md")).expect("utf-8");
        assert!(md.starts_with("---\nname: greeter\n"), "{md}");
        // The file's frontmatter is exactly the entry's.
        assert_eq!(frontmatter_of(&md).expect("frontmatter"), fm);
        assert_eq!(fm.extra["license"], "MIT");
        assert_eq!(fm.extra["metadata"]["version"], "1.2.0");
        assert_eq!(fm.extra["allowed-tools"], "demo.greet demo.forget");
        assert!(md.contains("## Instructions\n\nUse demo.greet"), "{md}");
        assert!(
            md.contains("### `demo.greet`\n\nGreets someone by name."),
            "{md}"
        );
        assert!(md.contains("\"name\": {"), "the input schema: {md}");
        // A tool without a schema shows the default one; a mutating tool
        // says it needs confirmation.
        let forget = &md[md.find("### `demo.forget`").expect("forget")..];
        assert!(forget.contains("Needs confirmation"), "{forget}");
        assert!(forget.contains("```json"), "{forget}");
    }

    #[test]
    fn frontmatter_of_refuses_what_is_not_frontmatter() {
        assert!(frontmatter_of("# no frontmatter\n").is_err());
        assert!(frontmatter_of("---\nname: a\n").is_err(), "unclosed");
        assert!(
            frontmatter_of("---\nname: a\n---\n").is_err(),
            "no description"
        );
        let fm = frontmatter_of("\u{feff}---\r\nname: a\ndescription: d\nx: [1]\n---\nbody")
            .expect("ok");
        assert_eq!((fm.name.as_str(), fm.description.as_str()), ("a", "d"));
        assert_eq!(fm.extra["x"], serde_json::json!([1]));
    }

    #[test]
    fn uris_name_their_skill_and_encode_paths() {
        assert_eq!(skill_md_uri("text-tools"), "skill://text-tools/SKILL.md");
        assert_eq!(
            skill_of_uri("skill://text-tools/SKILL.md"),
            Some("text-tools")
        );
        assert_eq!(
            skill_of_uri("skill://text-tools/a/b.md"),
            Some("text-tools")
        );
        for bad in [
            "skill://text-tools",
            "skill://text-tools/",
            "skill://Text-Tools/SKILL.md",
            "skill://text_tools/SKILL.md",
            "file:///etc/passwd",
            "skill:///SKILL.md",
        ] {
            assert_eq!(skill_of_uri(bad), None, "{bad}");
        }
        assert_eq!(
            file_uri("a", "refs/my notes%.md"),
            "skill://a/refs/my%20notes%25.md"
        );
        // Names skill.yaml allows but the Agent Skills rules do not.
        for (name, ok) in [
            ("a-b", true),
            ("a.b", false),
            ("a_b", false),
            ("a--b", false),
            ("-a", false),
            ("a-", false),
        ] {
            assert_eq!(servable_name(name), ok, "{name}");
        }
    }

    #[test]
    fn reads_resolve_only_exact_listed_uris() {
        let served = ServedSkill {
            entry: McpSkill::new(
                skill_md_uri("a"),
                SkillFrontmatter::new("a", "d"),
                SkillResources::Files(vec![
                    SkillResource::from_bytes(skill_md_uri("a"), b"x"),
                    SkillResource::from_bytes(file_uri("a", "refs/my notes.md"), b"y"),
                ]),
            ),
            origin: Origin::Local(PathBuf::from("unused")),
            generated: None,
        };
        assert_eq!(
            served
                .path_of(&file_uri("a", "refs/my notes.md"))
                .as_deref(),
            Some("refs/my notes.md")
        );
        // Another spelling of a listed file, or a path that leaves the
        // skill, is not listed.
        let data = Dir::open_ambient_dir(".", cap_std::ambient_authority()).expect("dir");
        for uri in [
            "skill://a/refs/my notes.md",
            "skill://a/refs/../SKILL.md",
            "skill://a/./SKILL.md",
            "skill://a/../b/SKILL.md",
        ] {
            assert!(served.read(&data, uri).is_none(), "{uri}");
        }
    }

    #[test]
    fn statement_files_come_from_the_recorded_statement() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        // No statement kept: the caller lists the folder instead.
        assert_eq!(statement_files(&dir, "00").expect("ok"), None);
        let statement = Statement::new(
            "a",
            "1.0.0".parse().expect("version"),
            None,
            vec![crate::bundle::FileEntry {
                path: "skill.yaml".into(),
                size: 3,
                sha256: "ab".repeat(32),
            }],
        );
        let bytes = statement.to_canonical_bytes();
        dir.create_dir_all(".skillhost").expect("mkdir");
        dir.write(STATEMENT_PATH, &bytes).expect("write");
        let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
        let files = statement_files(&dir, &digest).expect("ok").expect("some");
        assert_eq!(
            files,
            vec![Listed {
                path: "skill.yaml".into(),
                size: 3,
                digest: format!("sha256:{}", "ab".repeat(32)),
            }]
        );
        // A statement that is not the recorded one is refused.
        let err = statement_files(&dir, &"00".repeat(32)).expect_err("refused");
        assert!(err.contains("reinstall"), "{err}");
    }

    #[test]
    fn walks_list_what_a_bundle_packs() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        std::fs::create_dir_all(root.join("refs")).expect("mkdir");
        std::fs::create_dir_all(root.join("target")).expect("mkdir");
        std::fs::write(root.join("skill.yaml"), "x").expect("write");
        std::fs::write(root.join("refs/guide.md"), "guide").expect("write");
        std::fs::write(root.join("target/out.wasm"), "built").expect("write");
        std::fs::write(root.join("notes.tmp"), "tmp").expect("write");
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).expect("dir");
        let files = walk(&dir).expect("walk");
        assert_eq!(
            files,
            vec![
                listed("refs/guide.md", b"guide"),
                listed("skill.yaml", b"x")
            ]
        );
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/passwd", root.join("link")).expect("symlink");
            let err = walk(&dir).expect_err("a symlink");
            assert!(err.contains("`link` is a symlink"), "{err}");
        }
    }

    #[test]
    fn pages_follow_the_cursor() {
        let items: Vec<String> = (0..(PAGE_SIZE + 3)).map(|i| format!("s{i:03}")).collect();
        let (first, next) = page(items.clone(), |s| s.as_str(), None);
        assert_eq!(first.len(), PAGE_SIZE);
        let next = next.expect("a next page");
        let (second, last) = page(items, |s| s.as_str(), Some(&next));
        assert_eq!(second.len(), 3);
        assert_eq!(last, None);
        assert!(second.iter().all(|s| *s > next));
    }

    #[test]
    fn mime_types_and_text() {
        assert_eq!(mime_type_of("SKILL.md"), Some(MARKDOWN));
        assert_eq!(mime_type_of("a/b.WASM"), Some("application/wasm"));
        assert_eq!(mime_type_of("skill.yaml"), Some("application/yaml"));
        assert_eq!(mime_type_of("LICENSE"), None);
        assert!(is_textual("application/yaml") && !is_textual("application/wasm"));
    }

    #[test]
    fn unknown_uris_are_echoed_in_data_unless_too_long() {
        let e = unknown_uri("skill://nope/SKILL.md");
        assert_eq!(e.code.0, -32602);
        assert_eq!(
            e.data,
            Some(serde_json::json!({"uri": "skill://nope/SKILL.md"}))
        );
        let long = format!("skill://{}", "x".repeat(MAX_ECHOED_URI));
        assert_eq!(unknown_uri(&long).data, None);
    }
}
