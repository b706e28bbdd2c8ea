//! The data dir's sealing key (`secrets.key`, 32 random bytes, mode 0600):
//! what the host seals before the database sees it (skill secrets; on a
//! database replicas share, the MCP servers' configuration too) is sealed
//! with ChaCha20-Poly1305 under it, bound to what it belongs to (the
//! associated data).
//!
//! Replicas sharing a database must share this key: the database records
//! its fingerprint (a digest that tells keys apart and reveals nothing of
//! them) the first time anything is sealed, and a replica whose key file is
//! missing or different is refused with what to do, instead of making its
//! own key and sealing what the others cannot open.

use aws_lc_rs::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use sha2::{Digest, Sha256};

use super::Store;
use super::data_dir::{create_private_once, read_private};
use super::db::{self, params};

/// Name of the key file secrets are sealed under, in the data dir.
pub const SECRETS_KEY_FILE: &str = "secrets.key";

/// Length of the key, in bytes.
const KEY_LEN: usize = 32;

/// A sealed value as stored: the nonce and the ciphertext with its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sealed {
    /// The AEAD nonce, fresh for every seal.
    pub nonce: Vec<u8>,
    /// Ciphertext and tag.
    pub sealed: Vec<u8>,
}

/// The data dir's sealing key, read from its file.
pub(crate) struct SealingKey {
    key: LessSafeKey,
    fingerprint: String,
}

impl SealingKey {
    /// Reads the key file, making it (random, 0600) when it is missing and
    /// `may_create`.
    pub fn load(dir: &cap_std::fs::Dir, may_create: bool) -> anyhow::Result<SealingKey> {
        let bytes = match read_private(dir, SECRETS_KEY_FILE)? {
            Some(b) => b,
            None if !may_create => anyhow::bail!(
                "this data dir has no `{SECRETS_KEY_FILE}`, and the database's secrets are \
                 sealed under one: copy `{SECRETS_KEY_FILE}` from another replica's data dir \
                 (mode 0600)"
            ),
            None => {
                let mut key = [0u8; KEY_LEN];
                getrandom::fill(&mut key)
                    .map_err(|e| anyhow::anyhow!("cannot read random bytes: {e}"))?;
                create_private_once(dir, SECRETS_KEY_FILE, &key)
                    .map_err(|e| anyhow::anyhow!("cannot write `{SECRETS_KEY_FILE}`: {e}"))?;
                // Another process may have made it first: use what is there.
                read_private(dir, SECRETS_KEY_FILE)?.ok_or_else(|| {
                    anyhow::anyhow!("`{SECRETS_KEY_FILE}` vanished while it was made")
                })?
            }
        };
        if bytes.len() != KEY_LEN {
            anyhow::bail!(
                "`{SECRETS_KEY_FILE}` in the data dir is not a {KEY_LEN}-byte key; secrets sealed \
                 under it cannot be opened (restore it from a backup, or remove it and set every \
                 secret again)"
            );
        }
        let mut digest = Sha256::new();
        digest.update(b"skillhost sealing key fingerprint\0");
        digest.update(&bytes);
        let fingerprint = hex::encode(&digest.finalize()[..8]);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| anyhow::anyhow!("`{SECRETS_KEY_FILE}` is not a usable key"))?;
        Ok(SealingKey {
            key: LessSafeKey::new(key),
            fingerprint,
        })
    }

    /// The data dir's key, checked against the fingerprint the database
    /// recorded (recorded now when none is). Made when missing only if
    /// the database has none recorded: on a database whose values are
    /// sealed already, a missing key file is an error, never a new key.
    pub fn checked(dir: &cap_std::fs::Dir, store: &Store) -> anyhow::Result<SealingKey> {
        let recorded = store.sealing_fingerprint()?;
        let key = SealingKey::load(dir, recorded.is_none())?;
        store.check_sealing_key(&key)?;
        Ok(key)
    }

    /// What tells this key from another (16 hex digits of a digest of it,
    /// which reveals nothing of the key).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Seals `plain`, bound to `aad`, under a fresh random nonce.
    pub fn seal(&self, aad: &[u8], plain: &[u8]) -> anyhow::Result<Sealed> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce)
            .map_err(|e| anyhow::anyhow!("cannot read random bytes: {e}"))?;
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut sealed,
            )
            .map_err(|_| anyhow::anyhow!("cannot seal"))?;
        Ok(Sealed {
            nonce: nonce.to_vec(),
            sealed,
        })
    }

    /// Opens what [`SealingKey::seal`] sealed with the same `aad`; `None`
    /// when it does not open (another key, other associated data, or
    /// altered bytes).
    pub fn open(&self, aad: &[u8], sealed: &Sealed) -> Option<Vec<u8>> {
        let nonce = Nonce::try_assume_unique_for_key(&sealed.nonce).ok()?;
        let mut bytes = sealed.sealed.clone();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad), &mut bytes)
            .ok()?;
        Some(plain.to_vec())
    }
}

impl Store {
    /// The fingerprint of the key this database's sealed values are sealed
    /// under, recorded by the first process that sealed one.
    pub(crate) fn sealing_fingerprint(&self) -> db::Result<Option<String>> {
        self.db.query_opt(
            "SELECT fingerprint FROM sealing_key WHERE id = 1",
            params![],
            |r| r.get(0),
        )
    }

    /// Checks that `key` is the key this database's sealed values are
    /// sealed under, recording its fingerprint when none is recorded yet
    /// (two processes recording at once agree: the first insert wins).
    pub(crate) fn check_sealing_key(&self, key: &SealingKey) -> anyhow::Result<()> {
        self.db.execute(
            "INSERT INTO sealing_key (id, fingerprint, recorded_at) VALUES (1, ?1, ?2)
             ON CONFLICT (id) DO NOTHING",
            params![key.fingerprint(), super::now()],
        )?;
        match self.sealing_fingerprint()? {
            Some(f) if f == key.fingerprint() => Ok(()),
            Some(f) => anyhow::bail!(
                "this data dir's `{SECRETS_KEY_FILE}` (fingerprint {}) is not the key the \
                 database's secrets are sealed under (fingerprint {f}): every replica needs the \
                 same key; copy `{SECRETS_KEY_FILE}` from another replica's data dir (mode 0600)",
                key.fingerprint()
            ),
            None => anyhow::bail!("the sealing key's fingerprint vanished after it was recorded"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> (tempfile::TempDir, cap_std::fs::Dir) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
            .expect("dir");
        (tmp, dir)
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_binding() {
        let (tmp, dir) = temp_dir();
        assert!(
            SealingKey::load(&dir, false).is_err(),
            "not made unless asked"
        );
        let key = SealingKey::load(&dir, true).expect("key");
        let again = SealingKey::load(&dir, false).expect("same key");
        assert_eq!(key.fingerprint(), again.fingerprint());
        let sealed = key.seal(b"w\0t", b"tok-123").expect("seal");
        assert!(!sealed.sealed.windows(7).any(|w| w == b"tok-123"));
        assert_eq!(
            again.open(b"w\0t", &sealed).as_deref(),
            Some(&b"tok-123"[..])
        );
        assert_eq!(again.open(b"w\0u", &sealed), None, "bound to its data");
        let mut altered = sealed.clone();
        altered.sealed[0] ^= 1;
        assert_eq!(again.open(b"w\0t", &altered), None, "altered bytes");
        let (_tmp2, other_dir) = temp_dir();
        let other = SealingKey::load(&other_dir, true).expect("other key");
        assert_ne!(other.fingerprint(), key.fingerprint());
        assert_eq!(other.open(b"w\0t", &sealed), None, "another key");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(tmp.path().join(SECRETS_KEY_FILE))
            .expect("key file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_database_accepts_only_the_key_it_first_saw() {
        let (tmp, dir) = temp_dir();
        let store = Store::open_sqlite(tmp.path()).expect("store");
        assert_eq!(store.sealing_fingerprint().expect("read"), None);
        let key = SealingKey::load(&dir, true).expect("key");
        store.check_sealing_key(&key).expect("first key recorded");
        store.check_sealing_key(&key).expect("and accepted again");
        let (_tmp2, other_dir) = temp_dir();
        let other = SealingKey::load(&other_dir, true).expect("other key");
        let e = store.check_sealing_key(&other).expect_err("another key");
        let e = e.to_string();
        assert!(
            e.contains(other.fingerprint()) && e.contains(key.fingerprint()),
            "{e}"
        );
        assert!(e.contains("copy `secrets.key`"), "{e}");
        assert_eq!(
            store.sealing_fingerprint().expect("read").as_deref(),
            Some(key.fingerprint())
        );
    }
}
