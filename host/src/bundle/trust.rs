//! Publisher keys: ed25519 key pairs, their file formats and key ids.
//!
//! File formats (both UTF-8 text, one line each):
//! - `NAME.key` (secret, written mode 0600, never printed):
//!   `skillhost-secret-key-v1 <key-id> <base64 of the 32-byte ed25519 seed>`
//! - `NAME.pub`: `skillhost-public-key-v1 <key-id> <base64 of the 32-byte public key>`
//!
//! The key id is the first 16 hex digits of the sha256 of the public key.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use sha2::{Digest, Sha256};

const SECRET_TAG: &str = "skillhost-secret-key-v1";
const PUBLIC_TAG: &str = "skillhost-public-key-v1";

/// A key file that could not be read or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

/// A publisher's public key.
///
/// ```
/// let (secret, public) = skillhost::SecretKey::generate().unwrap();
/// let parsed = skillhost::PublicKey::parse(&public.to_file_text()).unwrap();
/// assert_eq!(parsed.key_id(), public.key_id());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.key_id())
    }
}

/// Key id of raw public key bytes.
fn key_id_of(bytes: &[u8; 32]) -> String {
    hex::encode(&Sha256::digest(bytes)[..8])
}

impl PublicKey {
    /// The key id: 16 hex digits.
    ///
    /// ```
    /// let (_, p) = skillhost::SecretKey::generate().unwrap();
    /// assert_eq!(p.key_id().len(), 16);
    /// ```
    pub fn key_id(&self) -> String {
        key_id_of(self.key.as_bytes())
    }

    /// Base64 of the 32 key bytes.
    ///
    /// ```
    /// let (_, p) = skillhost::SecretKey::generate().unwrap();
    /// assert_eq!(p.to_base64().len(), 44);
    /// ```
    pub fn to_base64(&self) -> String {
        B64.encode(self.key.as_bytes())
    }

    /// Parses base64 key bytes.
    ///
    /// ```
    /// let (_, p) = skillhost::SecretKey::generate().unwrap();
    /// assert_eq!(skillhost::PublicKey::from_base64(&p.to_base64()).unwrap(), p);
    /// ```
    pub fn from_base64(text: &str) -> Result<PublicKey, KeyError> {
        let bytes = B64
            .decode(text.trim())
            .map_err(|e| KeyError(format!("public key is not base64: {e}")))?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError(format!("public key has {} bytes, expected 32", bytes.len())))?;
        let key = VerifyingKey::from_bytes(&arr)
            .map_err(|e| KeyError(format!("not an ed25519 public key: {e}")))?;
        Ok(PublicKey { key })
    }

    /// The `.pub` file text.
    ///
    /// ```
    /// let (_, p) = skillhost::SecretKey::generate().unwrap();
    /// assert!(p.to_file_text().starts_with("skillhost-public-key-v1 "));
    /// ```
    pub fn to_file_text(&self) -> String {
        format!("{PUBLIC_TAG} {} {}\n", self.key_id(), self.to_base64())
    }

    /// Parses `.pub` file text, checking the key id it states.
    ///
    /// ```
    /// assert!(skillhost::PublicKey::parse("garbage").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let mut parts = text.split_whitespace();
        let (Some(tag), Some(id), Some(b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(KeyError(format!(
                "not a skillhost public key file: expected `{PUBLIC_TAG} <key-id> <base64>`"
            )));
        };
        if tag != PUBLIC_TAG {
            return Err(KeyError(format!(
                "not a skillhost public key file: starts with `{}`",
                tag.escape_debug()
            )));
        }
        let key = PublicKey::from_base64(b64)?;
        if key.key_id() != id {
            return Err(KeyError(format!(
                "the key id `{}` does not match the key (expected {})",
                id.escape_debug(),
                key.key_id()
            )));
        }
        Ok(key)
    }

    /// Reads a `.pub` file.
    ///
    /// ```no_run
    /// let key = skillhost::PublicKey::read(std::path::Path::new("alice.pub")).unwrap();
    /// ```
    pub fn read(path: &Path) -> Result<PublicKey, KeyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KeyError(format!("cannot read {}: {e}", path.display())))?;
        PublicKey::parse(&text).map_err(|KeyError(m)| KeyError(format!("{}: {m}", path.display())))
    }

    /// Verifies a signature over `message`.
    ///
    /// ```
    /// let (s, p) = skillhost::SecretKey::generate().unwrap();
    /// let sig = s.sign(b"hello");
    /// assert!(p.verify(b"hello", &sig).is_ok());
    /// assert!(p.verify(b"hellO", &sig).is_err());
    /// ```
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), KeyError> {
        let sig =
            Signature::from_slice(signature).map_err(|_| KeyError("malformed signature".into()))?;
        self.key.verify(message, &sig).map_err(|_| {
            KeyError(format!(
                "signature does not verify with key {}",
                self.key_id()
            ))
        })
    }
}

/// A publisher's secret key. Its `Debug` never shows the key.
///
/// ```
/// let (secret, _) = skillhost::SecretKey::generate().unwrap();
/// assert!(format!("{secret:?}").contains("redacted"));
/// ```
pub struct SecretKey {
    key: SigningKey,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey({}, redacted)", self.public().key_id())
    }
}

impl SecretKey {
    /// A fresh key pair from the operating system's random source.
    ///
    /// ```
    /// let (secret, public) = skillhost::SecretKey::generate().unwrap();
    /// assert_eq!(secret.public(), public);
    /// ```
    pub fn generate() -> Result<(SecretKey, PublicKey), KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| KeyError(format!("no randomness available: {e}")))?;
        let key = SigningKey::from_bytes(&seed);
        let secret = SecretKey { key };
        let public = secret.public();
        Ok((secret, public))
    }

    /// The public half.
    ///
    /// ```
    /// let (s, _) = skillhost::SecretKey::generate().unwrap();
    /// println!("{}", s.public().key_id());
    /// ```
    pub fn public(&self) -> PublicKey {
        PublicKey {
            key: self.key.verifying_key(),
        }
    }

    /// Signs `message`; returns the 64-byte signature.
    ///
    /// ```
    /// let (s, _) = skillhost::SecretKey::generate().unwrap();
    /// assert_eq!(s.sign(b"x").len(), 64);
    /// ```
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.key.sign(message).to_bytes().to_vec()
    }

    /// The `.key` file text. Handle with care.
    ///
    /// ```
    /// let (s, _) = skillhost::SecretKey::generate().unwrap();
    /// let again = skillhost::SecretKey::parse(&s.to_file_text()).unwrap();
    /// assert_eq!(again.public(), s.public());
    /// ```
    pub fn to_file_text(&self) -> String {
        format!(
            "{SECRET_TAG} {} {}\n",
            self.public().key_id(),
            B64.encode(self.key.to_bytes())
        )
    }

    /// Parses `.key` file text. Errors never echo the file's content.
    ///
    /// ```
    /// let err = skillhost::SecretKey::parse("skillhost-secret-key-v1 x notbase64").unwrap_err();
    /// assert!(!err.to_string().contains("notbase64"));
    /// ```
    pub fn parse(text: &str) -> Result<SecretKey, KeyError> {
        let mut parts = text.split_whitespace();
        let (Some(tag), Some(id), Some(b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(KeyError(format!(
                "not a skillhost secret key file: expected `{SECRET_TAG} <key-id> <base64>`"
            )));
        };
        if tag != SECRET_TAG {
            return Err(KeyError("not a skillhost secret key file".into()));
        }
        let bytes = B64
            .decode(b64)
            .map_err(|_| KeyError("the secret key is not valid base64".into()))?;
        let seed: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError("the secret key must be 32 bytes".into()))?;
        let secret = SecretKey {
            key: SigningKey::from_bytes(&seed),
        };
        if secret.public().key_id() != id {
            return Err(KeyError(
                "the key id in the secret key file does not match the key".into(),
            ));
        }
        Ok(secret)
    }

    /// Reads a `.key` file.
    ///
    /// ```no_run
    /// let key = skillhost::SecretKey::read(std::path::Path::new("alice.key")).unwrap();
    /// ```
    pub fn read(path: &Path) -> Result<SecretKey, KeyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KeyError(format!("cannot read {}: {e}", path.display())))?;
        SecretKey::parse(&text).map_err(|KeyError(m)| KeyError(format!("{}: {m}", path.display())))
    }

    /// Writes `NAME.key` (mode 0600, refusing to overwrite) and `NAME.pub`.
    ///
    /// ```no_run
    /// let (s, _) = skillhost::SecretKey::generate().unwrap();
    /// s.write_pair(std::path::Path::new("alice")).unwrap();
    /// ```
    pub fn write_pair(
        &self,
        base: &Path,
    ) -> Result<(std::path::PathBuf, std::path::PathBuf), KeyError> {
        use std::io::Write;
        let key_path = base.with_extension("key");
        let pub_path = base.with_extension("pub");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts
            .open(&key_path)
            .map_err(|e| KeyError(format!("cannot create {}: {e}", key_path.display())))?;
        f.write_all(self.to_file_text().as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| KeyError(format!("cannot write {}: {e}", key_path.display())))?;
        std::fs::write(&pub_path, self.public().to_file_text())
            .map_err(|e| KeyError(format!("cannot write {}: {e}", pub_path.display())))?;
        Ok((key_path, pub_path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tampered_key_ids_are_refused() {
        let (s, p) = SecretKey::generate().unwrap();
        let text = p.to_file_text().replace(&p.key_id(), "0000000000000000");
        assert!(
            PublicKey::parse(&text)
                .unwrap_err()
                .to_string()
                .contains("does not match")
        );
        let text = s.to_file_text().replace(&p.key_id(), "0000000000000000");
        assert!(SecretKey::parse(&text).is_err());
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let (s, _) = SecretKey::generate().unwrap();
        let secret_b64 = B64.encode(s.key.to_bytes());
        assert!(!format!("{s:?}").contains(&secret_b64));
    }
}
