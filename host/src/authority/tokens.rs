//! The host's bearer tokens (see `crate::state::tokens`).

use super::{Host, lock};
use crate::state::tokens::{TokenInfo, new_token, token_digest, well_formed};

impl Host {
    /// Makes a new token for `persona` and returns it with its row. The
    /// token is only ever returned here: the host keeps its sha256.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// let (token, info) = host.add_token("support", "laptop")?;
    /// println!("{token} (id {})", info.id);
    /// # Ok(()) }
    /// ```
    pub fn add_token(&self, persona: &str, label: &str) -> anyhow::Result<(String, TokenInfo)> {
        let store = lock(&self.inner.store);
        if !store.persona_exists(persona)? {
            anyhow::bail!(
                "there is no persona `{persona}` (`skillhost personas add {persona}` creates it, \
                 `skillhost personas list` shows them)"
            );
        }
        let token = new_token()?;
        let info = store.add_token(&token, persona, label)?;
        Ok((token, info))
    }

    /// Every persona token (never the tokens themselves), by id.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// for t in host.tokens()? { println!("{} {} {}", t.id, t.prefix, t.persona); }
    /// # Ok(()) }
    /// ```
    pub fn tokens(&self) -> anyhow::Result<Vec<TokenInfo>> {
        Ok(lock(&self.inner.store).tokens()?)
    }

    /// Removes (revokes) a token by id.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// host.remove_token(3)?;
    /// # Ok(()) }
    /// ```
    pub fn remove_token(&self, id: i64) -> anyhow::Result<()> {
        if !lock(&self.inner.store).remove_token(id)? {
            anyhow::bail!("there is no token {id} (`skillhost tokens list` shows them)");
        }
        Ok(())
    }

    /// The persona a presented token acts as; `None` for a token that is
    /// malformed, unknown or revoked.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> anyhow::Result<()> {
    /// assert_eq!(host.token_persona("skh_not-a-token")?, None);
    /// # Ok(()) }
    /// ```
    pub fn token_persona(&self, token: &str) -> anyhow::Result<Option<String>> {
        if !well_formed(token) {
            return Ok(None);
        }
        Ok(lock(&self.inner.store).token_persona(&token_digest(token))?)
    }

    /// The admin token (created in the data dir, mode 0600, when missing).
    pub(crate) fn admin_token(&self) -> anyhow::Result<String> {
        crate::state::tokens::admin_token(&self.inner.data.dir)
    }
}
