//! The signed statement: one canonical JSON document listing the skill's
//! name, version, signer and every file with its size and sha256.

use serde::{Deserialize, Serialize};

/// Version of the statement format.
pub const STATEMENT_FORMAT: u32 = 1;

/// Where the statement lives inside a bundle.
pub const STATEMENT_PATH: &str = ".skillhost/statement.json";
/// Where the signature (base64 of the 64-byte ed25519 signature over the
/// statement's exact bytes) lives inside a bundle. Absent when unsigned.
pub const SIGNATURE_PATH: &str = ".skillhost/signature";

/// One file of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Path inside the skill folder, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Hex sha256.
    pub sha256: String,
}

/// What a publisher signs.
///
/// ```
/// use skillhost::{Statement, FileEntry};
/// let s = Statement::new("greeter", "1.0.0".parse().unwrap(), None, vec![
///     FileEntry { path: "skill.yaml".into(), size: 3, sha256: "ab".into() },
/// ]);
/// let bytes = s.to_canonical_bytes();
/// assert_eq!(Statement::from_canonical_bytes(&bytes).unwrap(), s);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// [`STATEMENT_FORMAT`].
    pub format: u32,
    /// The skill's name, as in its manifest; signed with the rest.
    pub name: String,
    /// Skill version.
    pub version: semver::Version,
    /// Key id of the signer; `None` for an unsigned bundle.
    pub signer: Option<String>,
    /// Every file, sorted by path.
    pub files: Vec<FileEntry>,
}

impl Statement {
    /// A statement with files sorted by path.
    ///
    /// ```
    /// let s = skillhost::Statement::new("a", "0.1.0".parse().unwrap(), Some("k".into()), vec![]);
    /// assert_eq!(s.format, 1);
    /// ```
    pub fn new(
        name: &str,
        version: semver::Version,
        signer: Option<String>,
        mut files: Vec<FileEntry>,
    ) -> Statement {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Statement {
            format: STATEMENT_FORMAT,
            name: name.into(),
            version,
            signer,
            files,
        }
    }

    /// The canonical bytes: compact JSON, fields in declaration order,
    /// files sorted by path, a final newline.
    ///
    /// ```
    /// let s = skillhost::Statement::new("a", "0.1.0".parse().unwrap(), None, vec![]);
    /// assert!(s.to_canonical_bytes().starts_with(br#"{"format":1,"name":"a""#));
    /// ```
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        let mut sorted = self.clone();
        sorted.files.sort_by(|a, b| a.path.cmp(&b.path));
        // Serializing plain strings, numbers and a Vec cannot fail.
        let mut out = serde_json::to_vec(&sorted).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Parses a statement and insists it is in canonical form: an edited or
    /// re-serialized statement is refused even before signatures are checked.
    ///
    /// ```
    /// assert!(skillhost::Statement::from_canonical_bytes(b"{ \"format\": 1 }").is_err());
    /// ```
    pub fn from_canonical_bytes(bytes: &[u8]) -> Result<Statement, String> {
        let s: Statement =
            serde_json::from_slice(bytes).map_err(|e| format!("malformed statement: {e}"))?;
        if s.format != STATEMENT_FORMAT {
            return Err(format!(
                "statement format {} is not supported (this host reads format {STATEMENT_FORMAT})",
                s.format
            ));
        }
        if s.to_canonical_bytes() != bytes {
            return Err("the statement is not in canonical form (edited after signing?)".into());
        }
        Ok(s)
    }
}
