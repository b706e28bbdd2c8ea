//! Bearer tokens for the HTTP front: one token per client, each bound to
//! one persona (`skillhost tokens add --persona P`), and the admin token in
//! the data dir (`admin_token`), which acts as the operator.
//!
//! Only a token's sha256 is stored; the token itself is shown once, when it
//! is made. Removing a persona removes its tokens (`ON DELETE CASCADE`).

use std::io::Write as _;

use base64::Engine as _;
use cap_std::fs::{Dir, OpenOptions};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::state::{Store, now};

/// Every token starts with this.
pub const TOKEN_PREFIX: &str = "skh_";

/// File name of the admin token in the data dir (mode 0600).
pub const ADMIN_TOKEN_FILE: &str = "admin_token";

/// How many characters of a token (after [`TOKEN_PREFIX`]) `tokens list`
/// shows to tell tokens apart.
const SHOWN_CHARS: usize = 6;

/// One stored persona token, as listed: never the token itself.
///
/// ```
/// let t = skillhost::TokenInfo {
///     id: 1, prefix: "skh_AbCdEf".into(), persona: "support".into(),
///     label: "laptop".into(), created_at: 0,
/// };
/// assert_eq!(serde_json::to_value(&t).unwrap()["persona"], "support");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// The id `tokens remove` takes.
    pub id: i64,
    /// The token's first characters, to recognise it.
    pub prefix: String,
    /// The persona the token acts as.
    pub persona: String,
    /// The operator's label.
    pub label: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// A new random token: [`TOKEN_PREFIX`] and 32 random bytes in unpadded
/// base64url (47 characters in all).
///
/// ```
/// let t = skillhost::new_token().unwrap();
/// assert!(t.starts_with("skh_") && t.len() == 47);
/// ```
pub fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot read random bytes for a token: {e}"))?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// The sha256 of a token, the form it is stored and compared in.
///
/// ```
/// assert_eq!(skillhost::token_digest("skh_x").len(), 32);
/// ```
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether `token` has the shape of a token (prefix, base64url, length):
/// anything else is refused before any lookup.
pub(crate) fn well_formed(token: &str) -> bool {
    token.len() == 47
        && token.starts_with(TOKEN_PREFIX)
        && token[TOKEN_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Store {
    /// Stores a token's digest for `persona` and returns its row.
    pub fn add_token(
        &self,
        token: &str,
        persona: &str,
        label: &str,
    ) -> rusqlite::Result<TokenInfo> {
        let prefix: String = token
            .chars()
            .take(TOKEN_PREFIX.len() + SHOWN_CHARS)
            .collect();
        let created_at = now();
        self.conn().execute(
            "INSERT INTO api_tokens (digest, prefix, persona, label, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                hex::encode(token_digest(token)),
                prefix,
                persona,
                label,
                created_at
            ],
        )?;
        Ok(TokenInfo {
            id: self.conn().last_insert_rowid(),
            prefix,
            persona: persona.to_string(),
            label: label.to_string(),
            created_at,
        })
    }

    /// Every persona token, by id.
    pub fn tokens(&self) -> rusqlite::Result<Vec<TokenInfo>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, prefix, persona, label, created_at FROM api_tokens ORDER BY id",
        )?;
        stmt.query_map([], |r| {
            Ok(TokenInfo {
                id: r.get(0)?,
                prefix: r.get(1)?,
                persona: r.get(2)?,
                label: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?
        .collect()
    }

    /// Removes a token by id; false if there was none.
    pub fn remove_token(&self, id: i64) -> rusqlite::Result<bool> {
        let n = self
            .conn()
            .execute("DELETE FROM api_tokens WHERE id = ?1", params![id])?;
        Ok(n == 1)
    }

    /// The persona of the token with this digest, if any.
    pub fn token_persona(&self, digest: &[u8; 32]) -> rusqlite::Result<Option<String>> {
        self.conn()
            .prepare_cached("SELECT persona FROM api_tokens WHERE digest = ?1")?
            .query_row(params![hex::encode(digest)], |r| r.get(0))
            .optional()
    }
}

/// Reads the admin token from the data dir, creating it (mode 0600,
/// written to a temporary file and linked into place, so a reader never
/// sees half a token and two processes starting at once agree) when it is
/// missing. Returns the token.
pub(crate) fn admin_token(dir: &Dir) -> anyhow::Result<String> {
    if let Some(t) = read_admin_token(dir)? {
        return Ok(t);
    }
    let token = new_token()?;
    let tmp = format!(".{ADMIN_TOKEN_FILE}.tmp-{}", std::process::id());
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let _ = dir.remove_file(&tmp);
    let written = (|| -> std::io::Result<()> {
        let mut f = dir.open_with(&tmp, &opts)?;
        f.write_all(token.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        dir.hard_link(&tmp, dir, ADMIN_TOKEN_FILE)
    })();
    let _ = dir.remove_file(&tmp);
    match written {
        Ok(()) => Ok(token),
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_admin_token(dir)?
            .ok_or_else(|| anyhow::anyhow!("the admin token file vanished while it was made")),
        Err(e) => Err(anyhow::anyhow!(
            "cannot write the admin token file `{ADMIN_TOKEN_FILE}` in the data dir: {e}"
        )),
    }
}

fn read_admin_token(dir: &Dir) -> anyhow::Result<Option<String>> {
    let text = match dir.read_to_string(ADMIN_TOKEN_FILE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!(
            "cannot read the admin token file `{ADMIN_TOKEN_FILE}` in the data dir: {e}"
        ),
    };
    #[cfg(unix)]
    {
        use cap_std::fs::PermissionsExt;
        let mode = dir
            .metadata(ADMIN_TOKEN_FILE)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "the admin token file `{ADMIN_TOKEN_FILE}` in the data dir is readable by other \
                 users (mode {:o}): run `chmod 600` on it, or delete it to get a new token",
                mode & 0o777
            );
        }
    }
    let token = text.trim();
    if !well_formed(token) {
        anyhow::bail!(
            "the admin token file `{ADMIN_TOKEN_FILE}` in the data dir does not hold a token: \
             delete it and start `skillhost serve --http` again to get a new one"
        );
    }
    Ok(Some(token.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_well_formed() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a, b);
        assert!(well_formed(&a), "{a}");
        assert!(!well_formed("skh_short"));
        assert!(!well_formed(&a.replace("skh_", "xyz_")));
    }

    #[test]
    fn admin_token_is_made_once_with_mode_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let a = admin_token(&dir).unwrap();
        let b = admin_token(&dir).unwrap();
        assert_eq!(a, b);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(tmp.path().join(ADMIN_TOKEN_FILE)).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        }
        std::fs::write(tmp.path().join(ADMIN_TOKEN_FILE), "garbage").unwrap();
        let e = admin_token(&dir).unwrap_err().to_string();
        assert!(e.contains("delete it"), "{e}");
    }

    #[test]
    fn tokens_follow_their_persona() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        s.add_persona("p", "").unwrap();
        let t = new_token().unwrap();
        let info = s.add_token(&t, "p", "laptop").unwrap();
        assert!(t.starts_with(&info.prefix));
        assert_eq!(
            s.token_persona(&token_digest(&t)).unwrap().as_deref(),
            Some("p")
        );
        assert!(s.add_token(&new_token().unwrap(), "nobody", "").is_err());
        s.remove_persona("p").unwrap();
        assert_eq!(s.token_persona(&token_digest(&t)).unwrap(), None);
        assert!(s.tokens().unwrap().is_empty());
    }
}
