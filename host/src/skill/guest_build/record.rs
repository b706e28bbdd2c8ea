//! What a build of a skill's guest was made from: the digest of each
//! source file the toolchain reads, recorded by `skillhost build` in a
//! custom section of the component it writes (`skillhost:build`), so
//! `check` and `pack` can tell a component older than its sources, and a
//! build cache can hand back the component of identical sources.
//!
//! The sources are the files the language's toolchain reads from the skill
//! folder (see [`GuestLanguage::reads`]): never the component itself, the
//! manifest, assets, build output or hidden files. A component built some
//! other way carries no record; its age is then judged by modification
//! times.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::GuestLanguage;
use crate::limits::{MAX_BUILD_SOURCE_FILES, MAX_BUILD_SOURCE_FILES_RECORDED};

/// Name of the custom section in which `skillhost build` records a
/// component's [`BuildRecord`].
pub const BUILD_RECORD_SECTION: &str = "skillhost:build";

/// Folders of a skill that no toolchain reads as sources: build output,
/// dependencies installed beside the sources, caches, assets.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "__pycache__", "assets"];

/// What `skillhost build` recorded in a component: the sources it was
/// built from and the toolchain that built it.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("app.py"), "print(1)").unwrap();
/// let sources = skillhost::SourceDigest::of(dir.path(), skillhost::GuestLanguage::Python).unwrap();
/// let record = skillhost::BuildRecord::new(&sources, "componentize-py 0.25.1");
/// let component = record.append_to(b"\0asm\x0d\0\x01\0".to_vec());
/// assert_eq!(skillhost::BuildRecord::read(&component), Some(record));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// The digest of every source together (`sha256:` and 64 hex digits).
    pub sources: String,
    /// Each source's digest (16 hex digits), by its path in the folder
    /// (`/`-separated); empty when there were more than
    /// `MAX_BUILD_SOURCE_FILES_RECORDED` sources.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The toolchain and its version (`componentize-py 0.25.1`).
    pub toolchain: String,
    /// For a Python or JS build, the digest of everything it read: the
    /// language, the toolchain and its version, the WIT and SDK of the
    /// `skillhost` that built it, the sources (the build cache's key). A
    /// build finding the component in place with the key it would record
    /// leaves it as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The sources of a skill's guest, read from its folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDigest {
    /// The digest of every source together (`sha256:…`).
    pub all: String,
    /// Each source's sha256 (hex), by its `/`-separated path.
    pub files: BTreeMap<String, String>,
}

/// How a skill folder's component stands against its sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// Built from the sources as they are now (by its record, or, without
    /// one, no source is newer than it).
    Fresh,
    /// A source changed since the component was built; `changed` names
    /// the sources that differ, were added or were removed (at most a few).
    Stale {
        /// Paths in the folder, `/`-separated.
        changed: Vec<String>,
    },
    /// The folder has no guest sources to compare with (a prebuilt
    /// component, or no language's files).
    NoSources,
}

impl SourceDigest {
    /// Reads the sources `language`'s toolchain builds from in `dir`.
    ///
    /// Fails on a folder that cannot be read or that holds more than
    /// `MAX_BUILD_SOURCE_FILES` sources.
    pub fn of(dir: &Path, language: GuestLanguage) -> std::io::Result<SourceDigest> {
        let mut paths = Vec::new();
        collect(dir, dir, language, 0, &mut paths)?;
        paths.sort();
        let mut all = Sha256::new();
        let mut files = BTreeMap::new();
        for (rel, path) in paths {
            let bytes = std::fs::read(&path)?;
            let digest = hex::encode(Sha256::digest(&bytes));
            // Length-prefixed, so no two lists of files hash alike.
            all.update((rel.len() as u64).to_le_bytes());
            all.update(rel.as_bytes());
            all.update(hex::decode(&digest).unwrap_or_default());
            files.insert(rel, digest);
        }
        Ok(SourceDigest {
            all: format!("sha256:{}", hex::encode(all.finalize())),
            files,
        })
    }
}

impl BuildRecord {
    /// The record of a build of `sources` by `toolchain`.
    pub fn new(sources: &SourceDigest, toolchain: &str) -> BuildRecord {
        let files = if sources.files.len() <= MAX_BUILD_SOURCE_FILES_RECORDED {
            sources
                .files
                .iter()
                .map(|(k, v)| (k.clone(), v.chars().take(16).collect()))
                .collect()
        } else {
            BTreeMap::new()
        };
        BuildRecord {
            sources: sources.all.clone(),
            files,
            toolchain: toolchain.to_string(),
            key: None,
        }
    }

    /// `component` with this record appended as its last custom section.
    pub fn append_to(&self, mut component: Vec<u8>) -> Vec<u8> {
        use wasm_encoder::Section as _;
        let data = serde_json::to_vec(self).unwrap_or_default();
        wasm_encoder::CustomSection {
            name: BUILD_RECORD_SECTION.into(),
            data: data.into(),
        }
        .append_to(&mut component);
        component
    }

    /// The record of a component's bytes: its last `skillhost:build`
    /// section that parses, or `None`.
    pub fn read(component: &[u8]) -> Option<BuildRecord> {
        let mut found = None;
        for payload in wasmparser::Parser::new(0).parse_all(component) {
            if let wasmparser::Payload::CustomSection(c) = payload.ok()?
                && c.name() == BUILD_RECORD_SECTION
                && let Ok(r) = serde_json::from_slice::<BuildRecord>(c.data())
            {
                found = Some(r);
            }
        }
        found
    }

    /// The sources that differ between this record and `now` (changed,
    /// added or removed), at most `limit`; empty when the record lists no
    /// files (it then only tells that something differs).
    pub fn changed(&self, now: &SourceDigest, limit: usize) -> Vec<String> {
        let mut out: Vec<String> = now
            .files
            .iter()
            .filter(|(path, digest)| {
                self.files
                    .get(*path)
                    .is_none_or(|short| !digest.starts_with(short.as_str()))
            })
            .map(|(p, _)| p.clone())
            .chain(
                self.files
                    .keys()
                    .filter(|p| !now.files.contains_key(*p))
                    .map(|p| format!("{p} (removed)")),
            )
            .collect();
        out.truncate(limit);
        out
    }
}

/// How the component at `component` stands against the sources of the
/// skill folder `dir` (see [`Freshness`]).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("app.py"), "print(1)").unwrap();
/// let sources = skillhost::SourceDigest::of(dir.path(), skillhost::GuestLanguage::Python).unwrap();
/// let wasm = skillhost::BuildRecord::new(&sources, "componentize-py").append_to(b"\0asm\x0d\0\x01\0".to_vec());
/// std::fs::write(dir.path().join("app.wasm"), wasm).unwrap();
/// let path = dir.path().join("app.wasm");
/// assert_eq!(skillhost::freshness(dir.path(), &path).unwrap(), skillhost::Freshness::Fresh);
/// std::fs::write(dir.path().join("app.py"), "print(2)").unwrap();
/// assert!(matches!(skillhost::freshness(dir.path(), &path).unwrap(), skillhost::Freshness::Stale { .. }));
/// ```
pub fn freshness(dir: &Path, component: &Path) -> std::io::Result<Freshness> {
    let Some(language) = GuestLanguage::of(dir) else {
        return Ok(Freshness::NoSources);
    };
    let sources = SourceDigest::of(dir, language)?;
    if sources.files.is_empty() {
        return Ok(Freshness::NoSources);
    }
    let bytes = std::fs::read(component)?;
    if let Some(record) = BuildRecord::read(&bytes) {
        if record.sources == sources.all {
            return Ok(Freshness::Fresh);
        }
        return Ok(Freshness::Stale {
            changed: record.changed(&sources, 5),
        });
    }
    // No record: a source modified after the component was written.
    let built = std::fs::metadata(component)?.modified()?;
    let mut newer = Vec::new();
    for rel in sources.files.keys() {
        let modified = std::fs::metadata(dir.join(rel))?.modified()?;
        if modified > built {
            newer.push(rel.clone());
        }
    }
    if newer.is_empty() {
        Ok(Freshness::Fresh)
    } else {
        newer.truncate(5);
        Ok(Freshness::Stale { changed: newer })
    }
}

impl GuestLanguage {
    /// Whether the toolchain of this language reads the file `rel` (a
    /// `/`-separated path in the skill folder) as a source: for Rust every
    /// file but the manifest, documents and components; for Python its
    /// modules; for JavaScript what `skillhost build` stages (`.js`,
    /// `.mjs`, `.json`).
    pub fn reads(self, rel: &str) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        if matches!(ext, "wasm" | "tmp" | "skill") {
            return false;
        }
        match self {
            GuestLanguage::Rust => {
                !matches!(name, "skill.yaml" | "SKILL.md") && !matches!(ext, "md")
            }
            GuestLanguage::Python => ext == "py",
            GuestLanguage::JavaScript => {
                matches!(ext, "js" | "mjs" | "json") && name != "package-lock.json"
            }
        }
    }
}

fn collect(
    root: &Path,
    dir: &Path,
    language: GuestLanguage,
    depth: usize,
    out: &mut Vec<(String, PathBuf)>,
) -> std::io::Result<()> {
    if depth > 16 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        // Not followed: a link is not a source of this folder.
        let ty = entry.file_type()?;
        let path = entry.path();
        if ty.is_dir() {
            if !SKIPPED_DIRS.contains(&&*name) {
                collect(root, &path, language, depth + 1, out)?;
            }
        } else if ty.is_file() {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if language.reads(&rel) {
                if out.len() >= MAX_BUILD_SOURCE_FILES {
                    return Err(std::io::Error::other(format!(
                        "more than {MAX_BUILD_SOURCE_FILES} source files"
                    )));
                }
                out.push((rel, path));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(dir: &Path) -> SourceDigest {
        SourceDigest::of(dir, GuestLanguage::Python).unwrap()
    }

    #[test]
    fn the_digest_follows_sources_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("app.py"), "a").unwrap();
        std::fs::create_dir(d.path().join("lib")).unwrap();
        std::fs::write(d.path().join("lib/util.py"), "b").unwrap();
        let first = py(d.path());
        assert_eq!(
            first.files.keys().collect::<Vec<_>>(),
            ["app.py", "lib/util.py"]
        );
        // Neither the manifest, a component, assets nor caches count.
        std::fs::write(d.path().join("skill.yaml"), "name: x").unwrap();
        std::fs::write(d.path().join("app.wasm"), "x").unwrap();
        std::fs::create_dir(d.path().join("__pycache__")).unwrap();
        std::fs::write(d.path().join("__pycache__/app.py"), "x").unwrap();
        std::fs::create_dir(d.path().join(".venv")).unwrap();
        std::fs::write(d.path().join(".venv/x.py"), "x").unwrap();
        assert_eq!(py(d.path()), first);
        // A module's change, and a rename, do.
        std::fs::write(d.path().join("lib/util.py"), "c").unwrap();
        let changed = py(d.path());
        assert_ne!(changed.all, first.all);
        std::fs::rename(d.path().join("lib/util.py"), d.path().join("lib/u.py")).unwrap();
        let record = BuildRecord::new(&changed, "t");
        let now = py(d.path());
        assert_eq!(
            record.changed(&now, 5),
            vec!["lib/u.py".to_string(), "lib/util.py (removed)".to_string()]
        );
    }

    #[test]
    fn a_record_survives_a_component_and_the_last_one_counts() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("app.js"), "x").unwrap();
        let s = SourceDigest::of(d.path(), GuestLanguage::JavaScript).unwrap();
        let old = BuildRecord::new(&s, "old");
        let new = BuildRecord::new(&s, "new");
        let bytes = new.append_to(old.append_to(b"\0asm\x0d\0\x01\0".to_vec()));
        assert_eq!(BuildRecord::read(&bytes), Some(new));
        assert_eq!(BuildRecord::read(b"\0asm\x0d\0\x01\0"), None);
        assert_eq!(BuildRecord::read(b"garbage"), None);
    }

    #[test]
    fn what_each_language_reads() {
        use GuestLanguage::*;
        assert!(
            Rust.reads("src/lib.rs") && Rust.reads("Cargo.lock") && Rust.reads("sdk/wit/skill.wit")
        );
        assert!(!Rust.reads("skill.yaml") && !Rust.reads("README.md") && !Rust.reads("x.wasm"));
        assert!(Python.reads("app.py") && !Python.reads("app.js") && !Python.reads("notes.txt"));
        assert!(JavaScript.reads("app.mjs") && JavaScript.reads("package.json"));
        assert!(!JavaScript.reads("package-lock.json") && !JavaScript.reads("app.py"));
    }
}
