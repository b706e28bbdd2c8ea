//! Bearer tokens: one token per client, each bound to one persona
//! (`skillhost tokens add --persona P`), and the admin token in the data
//! dir (`admin_token`), which acts as the operator.
//!
//! Only a token's sha256 is stored (`crate::state::tokens`); the token
//! itself is shown once, when it is made.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

use super::{Host, HostInner, lock};
use crate::error::{StateError, TokenError};
use crate::state::data_dir::{create_private_once, read_private};
use crate::state::tokens::TokenInfo;

/// Every token starts with this.
pub const TOKEN_PREFIX: &str = "skh_";

/// File name of the admin token in the data dir (mode 0600).
pub const ADMIN_TOKEN_FILE: &str = "admin_token";

/// How many characters of a token (after [`TOKEN_PREFIX`]) `tokens list`
/// shows to tell tokens apart.
const SHOWN_CHARS: usize = 6;

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

/// # Tokens
///
/// Bearer tokens that name a persona (or the operator).
impl Host {
    /// Makes a new token for `persona` and returns it with its row. The
    /// token is only ever returned here: the host keeps its sha256.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::TokenError> {
    /// let (token, info) = host.add_token("support", "laptop")?;
    /// println!("{token} (id {})", info.id);
    /// # Ok(()) }
    /// ```
    pub fn add_token(&self, persona: &str, label: &str) -> Result<(String, TokenInfo), TokenError> {
        let store = lock(&self.inner.store);
        if !store.persona_exists(persona)? {
            return Err(TokenError::NotFound(format!(
                "there is no persona `{persona}` (`skillhost personas add {persona}` creates it, \
                 `skillhost personas list` shows them)"
            )));
        }
        let token = new_token()?;
        let prefix: String = token
            .chars()
            .take(TOKEN_PREFIX.len() + SHOWN_CHARS)
            .collect();
        let info = store.add_token(&token_digest(&token), &prefix, persona, label)?;
        drop(store);
        self.inner.changed();
        Ok((token, info))
    }

    /// Every persona token (never the tokens themselves), by id.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for t in host.tokens()? { println!("{} {} {}", t.id, t.prefix, t.persona); }
    /// # Ok(()) }
    /// ```
    pub fn tokens(&self) -> Result<Vec<TokenInfo>, StateError> {
        Ok(lock(&self.inner.store).tokens()?)
    }

    /// Removes (revokes) a token by id.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::TokenError> {
    /// host.remove_token(3)?;
    /// # Ok(()) }
    /// ```
    pub fn remove_token(&self, id: i64) -> Result<(), TokenError> {
        let removed = lock(&self.inner.store).remove_token(id)?;
        // Whatever happened, this process reads the tokens afresh.
        self.inner.changed();
        if !removed {
            return Err(TokenError::NotFound(format!(
                "there is no token {id} (`skillhost tokens list` shows them)"
            )));
        }
        Ok(())
    }

    /// The persona a presented token acts as; `None` for a token that is
    /// malformed, unknown or revoked.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// assert_eq!(host.token_persona("skh_not-a-token")?, None);
    /// # Ok(()) }
    /// ```
    pub fn token_persona(&self, token: &str) -> Result<Option<String>, StateError> {
        if !well_formed(token) {
            return Ok(None);
        }
        self.token_digest_persona(&token_digest(token))
    }

    /// The persona the token whose sha256 is `digest` acts as; `None` once
    /// it is removed (or its persona). A stream opened with the token
    /// asks this again on every change, without keeping the token itself.
    pub(crate) fn token_digest_persona(
        &self,
        digest: &[u8; 32],
    ) -> Result<Option<String>, StateError> {
        let personas = self.inner.token_personas()?;
        Ok(personas.get(&hex::encode(digest)).cloned())
    }

    /// The admin token (created in the data dir, mode 0600, when missing):
    /// for the operator's own clients, never to be shown or logged.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// let token = host.admin_token()?;
    /// # Ok(()) }
    /// ```
    pub fn admin_token(&self) -> Result<String, StateError> {
        Ok(admin_token(&self.inner.data.dir)?)
    }
}

/// The persona tokens as a serving host last read them: looked up in
/// memory, the database asked at most once per
/// [`REGISTRY_RECHECK`](crate::limits::REGISTRY_RECHECK) whether they
/// changed (their generation, bumped by triggers in any process; on a
/// database replicas share, only when the change feed says so), and
/// dropped at once on a change made through this host.
#[derive(Default)]
pub(crate) struct TokenSnapshot {
    generation: Option<i64>,
    pub(crate) checked_at: Option<Instant>,
    feed_epoch: Option<u64>,
    personas: Arc<HashMap<String, String>>,
}

impl HostInner {
    /// Every token's persona by the token's sha256 (hex), from the snapshot
    /// (see [`TokenSnapshot`]): the same map until the tokens change, so
    /// the change watcher tells a change by the pointer.
    pub(super) fn token_personas(&self) -> anyhow::Result<Arc<HashMap<String, String>>> {
        {
            let snap = lock(&self.tokens);
            if self.still_fresh(snap.checked_at, snap.feed_epoch) {
                return Ok(snap.personas.clone());
            }
        }
        // The epoch before the database (see `registry`).
        let epoch = self.feed_epoch();
        // Lock order: the store, then the snapshot.
        let store = lock(&self.store);
        let generation = store.token_generation()?;
        let mut snap = lock(&self.tokens);
        if snap.generation != Some(generation) {
            snap.personas = Arc::new(store.token_personas()?);
            snap.generation = Some(generation);
        }
        snap.checked_at = Some(Instant::now());
        snap.feed_epoch = epoch;
        Ok(snap.personas.clone())
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
    let created = create_private_once(dir, ADMIN_TOKEN_FILE, format!("{token}\n").as_bytes())
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot write the admin token file `{ADMIN_TOKEN_FILE}` in the data dir: {e}"
            )
        })?;
    if created {
        return Ok(token);
    }
    // Another process made it first: use theirs.
    read_admin_token(dir)?
        .ok_or_else(|| anyhow::anyhow!("the admin token file vanished while it was made"))
}

fn read_admin_token(dir: &Dir) -> anyhow::Result<Option<String>> {
    let Some(bytes) = read_private(dir, ADMIN_TOKEN_FILE).map_err(|e| {
        anyhow::anyhow!("the admin token file: {e:#}; or delete it to get a new token")
    })?
    else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
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
}
