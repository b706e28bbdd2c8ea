//! Signed skill bundles: packing a skill folder into a reproducible zip
//! with a signed statement, and opening one defensively.
//!
//! A bundle is a zip holding the skill folder's files at its root plus
//! `.skillhost/statement.json` (the canonical [`Statement`]) and, when
//! signed, `.skillhost/signature`.

mod archive;
pub(crate) mod install;
mod pack;
mod statement;
pub(crate) mod trust;
mod upload;

use std::collections::BTreeMap;

use base64::Engine as _;
use sha2::{Digest, Sha256};

pub(crate) use pack::is_packed;
pub use pack::{PackError, pack_dir};
pub use statement::{FileEntry, SIGNATURE_PATH, STATEMENT_FORMAT, STATEMENT_PATH, Statement};
pub use upload::BundleUpload;

use crate::bundle::trust::PublicKey;

/// Largest archive accepted: 25 MiB.
pub const MAX_ARCHIVE_BYTES: u64 = 25 << 20;
/// Largest total of inflated bytes accepted: 25 MiB, counted while
/// inflating, never taken from the declared sizes.
pub const MAX_EXTRACTED_BYTES: u64 = 25 << 20;
/// Most entries (files and folders) accepted.
pub const MAX_ENTRIES: usize = 500;

/// A bundle that was refused, naming the entry where there is one.
///
/// ```
/// let err = skillhost::open_bundle(b"not a zip", |_| None).unwrap_err();
/// assert!(err.to_string().starts_with("bundle: not a valid zip archive"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bundle{}: {message}", entry.as_ref().map(|e| format!(" entry `{e}`")).unwrap_or_default())]
pub struct BundleError {
    /// The offending entry, if one.
    pub entry: Option<String>,
    /// What was wrong.
    pub message: String,
}

impl BundleError {
    pub(crate) fn archive(message: impl Into<String>) -> BundleError {
        BundleError {
            entry: None,
            message: message.into(),
        }
    }
    pub(crate) fn entry(entry: &str, message: &str) -> BundleError {
        BundleError {
            entry: Some(entry.to_string()),
            message: message.to_string(),
        }
    }
}

/// Who signed a bundle, as far as this host can tell.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Signer {
    /// No signature.
    Unsigned,
    /// Signed by a key this host does not know: the signature cannot be
    /// checked, so the bundle counts as untrusted.
    Unknown {
        /// The key id the statement names.
        key_id: String,
    },
    /// Signed by a trusted key, and the signature verifies.
    Trusted {
        /// The key id.
        key_id: String,
    },
}

impl Signer {
    /// The key id, if the statement names one.
    ///
    /// ```
    /// assert_eq!(skillhost::Signer::Unsigned.key_id(), None);
    /// ```
    pub fn key_id(&self) -> Option<&str> {
        match self {
            Signer::Unsigned => None,
            Signer::Unknown { key_id } | Signer::Trusted { key_id } => Some(key_id),
        }
    }
}

/// A bundle whose archive, statement and (if the key is known) signature
/// all check out.
#[derive(Debug, Clone)]
pub struct OpenedBundle {
    /// The signed statement.
    pub statement: Statement,
    /// Hex sha256 of the statement bytes: the bundle's identity.
    pub digest: String,
    /// Who signed it.
    pub signer: Signer,
    /// The skill's files (not the `.skillhost/` ones), sorted by path.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Opens a bundle: checks the archive entry by entry, that the statement
/// lists exactly the files present with their sizes and digests, and the
/// signature when `trusted_key` knows the signer's key id.
///
/// ```no_run
/// let bytes = std::fs::read("greeter.skill").unwrap();
/// let b = skillhost::open_bundle(&bytes, |_key_id| None).unwrap();
/// println!("{} {}", b.statement.name, b.statement.version);
/// ```
pub fn open_bundle(
    bytes: &[u8],
    trusted_key: impl Fn(&str) -> Option<PublicKey>,
) -> Result<OpenedBundle, BundleError> {
    let entries = archive::read_archive(bytes)?;
    let mut files = BTreeMap::new();
    let mut statement_bytes = None;
    let mut signature = None;
    for f in entries {
        match f.path.as_str() {
            STATEMENT_PATH => statement_bytes = Some(f.data),
            SIGNATURE_PATH => signature = Some(f.data),
            p if p.starts_with(".skillhost/") => {
                return Err(BundleError::entry(p, "unexpected file in `.skillhost/`"));
            }
            _ => {
                files.insert(f.path, f.data);
            }
        }
    }
    let statement_bytes = statement_bytes.ok_or_else(|| {
        BundleError::archive(format!("no `{STATEMENT_PATH}`: not a skillhost bundle"))
    })?;
    let statement = Statement::from_canonical_bytes(&statement_bytes)
        .map_err(|m| BundleError::entry(STATEMENT_PATH, &m))?;
    let listed: BTreeMap<&str, &FileEntry> = statement
        .files
        .iter()
        .map(|f| (f.path.as_str(), f))
        .collect();
    if listed.len() != statement.files.len() {
        return Err(BundleError::entry(STATEMENT_PATH, "lists a file twice"));
    }
    for (path, data) in &files {
        let Some(entry) = listed.get(path.as_str()) else {
            return Err(BundleError::entry(
                path,
                "is not listed in the signed statement",
            ));
        };
        if entry.size != data.len() as u64 {
            return Err(BundleError::entry(
                path,
                &format!(
                    "is {} bytes but the statement says {}",
                    data.len(),
                    entry.size
                ),
            ));
        }
        if hex::encode(Sha256::digest(data)) != entry.sha256 {
            return Err(BundleError::entry(
                path,
                "sha256 does not match the signed statement",
            ));
        }
    }
    if let Some(missing) = listed.keys().find(|p| !files.contains_key(**p)) {
        return Err(BundleError::entry(
            missing,
            "is listed in the signed statement but missing from the archive",
        ));
    }
    let signer = match (&statement.signer, signature) {
        (None, None) => Signer::Unsigned,
        (None, Some(_)) => {
            return Err(BundleError::entry(
                SIGNATURE_PATH,
                "a signature without a signer in the statement",
            ));
        }
        (Some(id), None) => {
            return Err(BundleError::entry(
                STATEMENT_PATH,
                &format!("names signer `{id}` but the bundle has no signature"),
            ));
        }
        (Some(id), Some(sig_text)) => match trusted_key(id) {
            None => Signer::Unknown { key_id: id.clone() },
            Some(key) => {
                let text = String::from_utf8_lossy(&sig_text);
                let sig = base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|_| BundleError::entry(SIGNATURE_PATH, "is not base64"))?;
                key.verify(&statement_bytes, &sig)
                    .map_err(|e| BundleError::entry(SIGNATURE_PATH, &format!("invalid: {e}")))?;
                Signer::Trusted { key_id: id.clone() }
            }
        },
    };
    Ok(OpenedBundle {
        digest: hex::encode(Sha256::digest(&statement_bytes)),
        statement,
        signer,
        files,
    })
}
