//! Skill secrets: set by the operator (`skillhost secrets set SKILL NAME`,
//! the value from standard input), sealed with ChaCha20-Poly1305 under a
//! key file in the data dir (`secrets.key`, mode 0600) before they reach
//! the database, opened only to become a header of a request to one of the
//! secret's origins. A value never reaches a log, an event, an error, a
//! metric or a response: events name the secret, never its value, and
//! every value is added to the redaction list of everything recorded.
//!
//! A secret is bound to the identity of the skill it was set for: another
//! skill installed later under the same name does not get it.

use std::sync::Arc;

use super::{Host, HostInner, lock};
use crate::error::{CatalogError, StateError};
use crate::limits::MAX_SECRET_BYTES;
use crate::registry::catalog::SkillIdentity;
use crate::skill::manifest::SecretDecl;
use crate::state::runs::{HostEvent, now_ms};
use crate::state::sealing::{SECRETS_KEY_FILE, Sealed, SealingKey};
use crate::state::secrets::{SealedSecret, SecretInfo};

/// What a sealed value is bound to: moving it to another skill, name or
/// identity in the database makes it unopenable.
fn aad(skill: &str, name: &str, identity: &str) -> Vec<u8> {
    format!("skillhost-secret\0{skill}\0{name}\0{identity}").into_bytes()
}

/// Checks a secret value: not empty, at most [`MAX_SECRET_BYTES`], and
/// only characters a header value may carry (printable ASCII, space, tab).
/// The message never repeats the value.
fn check_value(value: &str) -> Result<(), CatalogError> {
    if value.is_empty() {
        return Err(CatalogError::Refused("the secret value is empty".into()));
    }
    if value.len() > MAX_SECRET_BYTES {
        return Err(CatalogError::Refused(format!(
            "the secret value is {} bytes, more than the {MAX_SECRET_BYTES} allowed",
            value.len()
        )));
    }
    if let Some(at) = value
        .bytes()
        .position(|c| !(c == b'\t' || (0x20..0x7f).contains(&c)))
    {
        return Err(CatalogError::Refused(format!(
            "the secret value has a character a header cannot carry at byte {at} (only \
             printable ASCII, spaces and tabs; a trailing newline from standard input is removed)"
        )));
    }
    Ok(())
}

/// # Skill secrets
///
/// Values a skill's outbound requests carry, sealed in the state.
impl Host {
    /// Sets (or replaces) the secret `name` of skill `skill` to `value`.
    /// The skill must declare it (in its effective or held version); the
    /// value is sealed before it is stored and is never shown again. An
    /// audit event (`secret_set`) names the skill and the secret.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.set_secret("weather", "api_token", "tok-123")?;
    /// # Ok(()) }
    /// ```
    pub fn set_secret(&self, skill: &str, name: &str, value: &str) -> Result<(), CatalogError> {
        let identity = self.declaring_identity(skill, name)?;
        check_value(value)?;
        let key = self.inner.sealing_key().map_err(StateError::from)?;
        let Sealed { nonce, sealed } = key
            .seal(&aad(skill, name, &identity.stored()), value.as_bytes())
            .map_err(StateError::from)?;
        lock(&self.inner.store).put_secret(
            skill,
            name,
            &SealedSecret {
                identity: identity.stored(),
                nonce,
                sealed,
            },
        )?;
        self.inner.changed();
        self.secret_event("secret_set", skill, name);
        Ok(())
    }

    /// The secrets set, of one skill or of all: names only, never values.
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::StateError> {
    /// for s in host.secrets(Some("weather"))? { println!("{} {}", s.skill, s.name); }
    /// # Ok(()) }
    /// ```
    pub fn secrets(&self, skill: Option<&str>) -> Result<Vec<SecretInfo>, StateError> {
        Ok(lock(&self.inner.store).secret_infos(skill)?)
    }

    /// Removes the secret `name` of `skill` (an audit event,
    /// `secret_removed`).
    ///
    /// ```no_run
    /// # fn f(host: skillhost::Host) -> Result<(), skillhost::CatalogError> {
    /// host.remove_secret("weather", "api_token")?;
    /// # Ok(()) }
    /// ```
    pub fn remove_secret(&self, skill: &str, name: &str) -> Result<(), CatalogError> {
        if !lock(&self.inner.store).remove_secret(skill, name)? {
            return Err(CatalogError::NotFound(format!(
                "skill `{skill}` has no secret `{name}` set (`skillhost secrets list {skill}`)"
            )));
        }
        self.inner.changed();
        self.secret_event("secret_removed", skill, name);
        Ok(())
    }

    /// The identity of the skill `skill` that declares secret `name` (its
    /// effective version, or a held one waiting for approval).
    fn declaring_identity(&self, skill: &str, name: &str) -> Result<SkillIdentity, CatalogError> {
        let reg = self.inner.registry()?;
        let Some(info) = reg.skills.get(skill) else {
            return Err(CatalogError::NotFound(format!(
                "no skill named `{skill}` (see `skillhost skills list`)"
            )));
        };
        let e = &info.entry;
        let declared = |decls: &[SecretDecl]| decls.iter().any(|d| d.name == name);
        if declared(&e.permissions.secrets)
            || e.held
                .as_ref()
                .is_some_and(|h| declared(&h.permissions.secrets))
        {
            return Ok(e.identity());
        }
        let mut names: Vec<&str> = e
            .permissions
            .secrets
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        names.sort();
        Err(CatalogError::Refused(format!(
            "skill `{skill}` declares no secret `{}` ({})",
            crate::escape::escape_control(name, 80, false),
            if names.is_empty() {
                "it declares none".to_string()
            } else {
                format!("it declares: {}", names.join(", "))
            }
        )))
    }

    fn secret_event(&self, kind: &str, skill: &str, name: &str) {
        self.inner.emit(HostEvent {
            at_ms: now_ms(),
            kind: kind.into(),
            run_id: None,
            persona: None,
            tool: None,
            server: Some(format!("skill:{skill}")),
            outcome: None,
            duration_ms: None,
            detail: serde_json::json!({ "skill": skill, "secret": name }),
        });
    }
}

impl HostInner {
    /// Opens the value of secret `name` of `skill` for `identity`; `None`
    /// when it is not set, was set for another identity, or does not open.
    pub(crate) fn secret_value(
        &self,
        skill: &str,
        name: &str,
        identity: &SkillIdentity,
    ) -> anyhow::Result<Option<String>> {
        let Some(sealed) = lock(&self.store).sealed_secret(skill, name)? else {
            return Ok(None);
        };
        if sealed.identity != identity.stored() {
            return Ok(None);
        }
        let key = self.sealing_key()?;
        let Some(plain) = key.open(
            &aad(skill, name, &sealed.identity),
            &Sealed {
                nonce: sealed.nonce,
                sealed: sealed.sealed,
            },
        ) else {
            tracing::warn!(
                skill,
                secret = name,
                "a stored secret does not open under `{SECRETS_KEY_FILE}`"
            );
            return Ok(None);
        };
        Ok(String::from_utf8(plain).ok())
    }

    /// The data dir's sealing key, checked once against the fingerprint
    /// the database recorded (recording it when none is: see
    /// `state/sealing.rs`). On a database whose values are sealed already,
    /// a missing key file is an error, never a new key.
    pub(crate) fn sealing_key(&self) -> anyhow::Result<Arc<SealingKey>> {
        if let Some(key) = self.sealing.get() {
            return Ok(key.clone());
        }
        let key = SealingKey::checked(&self.data.dir, &lock(&self.store))?;
        Ok(self.sealing.get_or_init(|| Arc::new(key)).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_a_header_cannot_carry_are_refused_without_repeating_them() {
        assert!(check_value("Bearer-ok token").is_ok());
        for bad in ["", "a\r\nX-Evil: 1", "tok\u{0}", "é"] {
            let e = check_value(bad).expect_err(bad);
            if !bad.is_empty() {
                assert!(!e.to_string().contains(bad), "{e}");
            }
        }
        assert!(check_value(&"x".repeat(MAX_SECRET_BYTES + 1)).is_err());
    }
}
