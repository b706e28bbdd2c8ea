//! `skillhost pack`: a skill folder into a byte-for-byte reproducible,
//! signed bundle.

use std::io::{Cursor, Write};
use std::path::Path;

use base64::Engine as _;
use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::statement::{FileEntry, SIGNATURE_PATH, STATEMENT_PATH, Statement};
use super::{MAX_ARCHIVE_BYTES, MAX_ENTRIES, MAX_EXTRACTED_BYTES};
use crate::bundle::trust::SecretKey;
use crate::skill::manifest::SkillManifest;

/// Folders never packed: build output and version control.
const EXCLUDED_DIRS: &[&str] = &[
    "target",
    ".git",
    ".hg",
    ".svn",
    ".jj",
    ".skillhost",
    "node_modules",
    ".venv",
    "__pycache__",
    // A skill's packages unpacked for its own runs: the bundle carries
    // the wheels (`.packages/`), unpacked again at install.
    ".python",
];
/// Files never packed.
const EXCLUDED_FILES: &[&str] = &[".gitignore", ".gitattributes", ".DS_Store"];

/// Why a folder could not be packed.
#[derive(Debug, thiserror::Error)]
#[error("pack {dir}: {message}")]
pub struct PackError {
    /// The skill folder.
    pub dir: String,
    /// What was wrong.
    pub message: String,
}

/// Whether a folder entry named `name` is part of a skill's files (what a
/// bundle packs): build output, version control and editor litter are not.
pub(crate) fn is_packed(name: &str, is_dir: bool) -> bool {
    if is_dir {
        !EXCLUDED_DIRS.contains(&name)
    } else {
        !EXCLUDED_FILES.contains(&name) && !name.ends_with(".tmp")
    }
}

fn collect(
    root: &Path,
    rel: &str,
    out: &mut Vec<(String, Vec<u8>)>,
    fail: &dyn Fn(String) -> PackError,
) -> Result<(), PackError> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e
            .file_name()
            .into_string()
            .map_err(|n| fail(format!("file name {n:?} is not UTF-8")))?;
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let ty = e
            .file_type()
            .map_err(|err| fail(format!("{path}: {err}")))?;
        if ty.is_symlink() {
            return Err(fail(format!(
                "`{path}` is a symlink; bundles hold only regular files"
            )));
        }
        if ty.is_dir() {
            if is_packed(&name, true) {
                collect(root, &path, out, fail)?;
            }
        } else if ty.is_file() {
            if !is_packed(&name, false) {
                continue;
            }
            let data = std::fs::read(e.path())
                .map_err(|err| fail(format!("cannot read {path}: {err}")))?;
            out.push((path, data));
        } else {
            return Err(fail(format!("`{path}` is not a regular file")));
        }
    }
    Ok(())
}

/// Packs a skill folder. The zip is reproducible: entries sorted, fixed
/// timestamps and permissions, deflate at a fixed level. Returns the bundle
/// bytes and the statement that was signed (unsigned when `key` is `None`).
///
/// ```no_run
/// let key = skillhost::SecretKey::read(std::path::Path::new("alice.key")).unwrap();
/// let (bytes, statement) = skillhost::pack_dir(std::path::Path::new("plugins/text-tools"), Some(&key)).unwrap();
/// std::fs::write("text-tools.skill", bytes).unwrap();
/// ```
pub fn pack_dir(dir: &Path, key: Option<&SecretKey>) -> Result<(Vec<u8>, Statement), PackError> {
    let fail = |message: String| PackError {
        dir: dir.display().to_string(),
        message,
    };
    let manifest = SkillManifest::load_dir(dir).map_err(|e| fail(e.to_string()))?;
    if let Some(c) = &manifest.component
        && !dir.join(c).is_file()
    {
        return Err(fail(format!(
            "component `{c}` not found; run `skillhost build {}` first",
            dir.display()
        )));
    }
    if let Some(c) = &manifest.component {
        let excluded = Path::new(c)
            .components()
            .filter_map(|p| p.as_os_str().to_str())
            .find(|part| EXCLUDED_DIRS.contains(part));
        if let Some(folder) = excluded {
            return Err(fail(format!(
                "component `{c}` is inside `{folder}/`, which bundles never hold: \
                 name a path outside it in skill.yaml (`skillhost build` copies it there)"
            )));
        }
    }
    // The scripts' packages: the lock and wheels in `.packages/` checked
    // again (or requirements without a lock refused, naming `--wheels`).
    crate::skill::scripts::packages::prepare(dir, None).map_err(|e| fail(e.to_string()))?;
    let mut files = Vec::new();
    collect(dir, "", &mut files, &fail)?;
    if files.len() + 2 > MAX_ENTRIES {
        return Err(fail(format!(
            "{} files, over the bundle limit of {MAX_ENTRIES}",
            files.len()
        )));
    }
    let total: u64 = files.iter().map(|(_, d)| d.len() as u64).sum();
    if total > MAX_EXTRACTED_BYTES {
        return Err(fail(format!(
            "{total} bytes of files, over the bundle limit of {MAX_EXTRACTED_BYTES}"
        )));
    }
    let entries = files
        .iter()
        .map(|(p, d)| FileEntry {
            path: p.clone(),
            size: d.len() as u64,
            sha256: hex::encode(Sha256::digest(d)),
        })
        .collect();
    let statement = Statement::new(
        &manifest.name,
        manifest.version.clone(),
        key.map(|k| k.public().key_id()),
        entries,
    );
    let statement_bytes = statement.to_canonical_bytes();
    let mut all: Vec<(String, Vec<u8>)> = files;
    all.push((STATEMENT_PATH.to_string(), statement_bytes.clone()));
    if let Some(k) = key {
        let sig = base64::engine::general_purpose::STANDARD.encode(k.sign(&statement_bytes));
        all.push((SIGNATURE_PATH.to_string(), format!("{sig}\n").into_bytes()));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));

    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::default())
        .unix_permissions(0o644);
    for (path, data) in &all {
        zip.start_file(path.as_str(), options)
            .map_err(|e| fail(format!("zip: {e}")))?;
        zip.write_all(data).map_err(|e| fail(format!("zip: {e}")))?;
    }
    let bytes = zip
        .finish()
        .map_err(|e| fail(format!("zip: {e}")))?
        .into_inner();
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(fail(format!(
            "the bundle is {} bytes, over the limit of {MAX_ARCHIVE_BYTES}",
            bytes.len()
        )));
    }
    Ok((bytes, statement))
}
