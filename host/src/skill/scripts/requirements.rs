//! A skill's Python packages: the names it declares and the lock pack
//! writes (`.packages/python.lock`, beside the wheels in `.packages/wheels/`;
//! ordinary files of the skill folder, so signed with the bundle).
//!
//! The lock has one line per package, `NAME==VERSION WHEEL sha256:HEX`
//! (the wheel's file name under `.packages/wheels/` and its digest),
//! then `drop-native` for a package whose native files are left out;
//! `#` starts a comment.

use super::package_error::PackageError;

/// Where pack writes the lock, relative to the skill folder.
pub const LOCK_PATH: &str = ".packages/python.lock";

/// Where pack puts the wheels the lock names, relative to the skill folder.
pub const WHEELS_DIR: &str = ".packages/wheels";

/// Whether `name` is a Python distribution name (PEP 508: letters,
/// digits, `.`, `_`, `-`, starting and ending with a letter or digit; at
/// most 128 characters here).
///
/// ```
/// use skillhost::valid_package_name;
/// assert!(valid_package_name("pypdf"));
/// assert!(valid_package_name("et-xmlfile"));
/// assert!(!valid_package_name("../x"));
/// assert!(!valid_package_name("-x"));
/// ```
pub fn valid_package_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
}

/// A name in PEP 503's normal form: lower case, runs of `-_.` as one `-`.
///
/// ```
/// assert_eq!(skillhost::normalize_package_name("Et_XmlFile"), "et-xmlfile");
/// ```
pub fn normalize_package_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// One pinned package of a lock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pin {
    /// The package's normalized name.
    pub name: String,
    /// Its exact version.
    pub version: String,
    /// The wheel's file name under `.packages/wheels/`.
    pub wheel: String,
    /// The wheel's sha256, hex.
    pub sha256: String,
    /// Whether its native files are left out (`scripts.python.drop_native`).
    pub drop_native: bool,
}

/// A package lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    /// The pins, by name.
    pub pins: Vec<Pin>,
}

impl Lock {
    /// Reads a lock's text; an error names the line and what is wrong.
    ///
    /// ```
    /// let lock = skillhost::PackageLock::parse(&format!(
    ///     "# comment\npypdf==5.1.0 pypdf-5.1.0-py3-none-any.whl sha256:{}\n", "a".repeat(64))).unwrap();
    /// assert_eq!(lock.pins[0].version, "5.1.0");
    /// assert!(skillhost::PackageLock::parse("pypdf>=5\n").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Lock, PackageError> {
        let mut pins: Vec<Pin> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let bad =
                |what: &str| PackageError::lock(format!("{LOCK_PATH} line {}: {what}", i + 1));
            let mut words = line.split_whitespace();
            let (Some(pin), Some(wheel), Some(hash), flag, None) = (
                words.next(),
                words.next(),
                words.next(),
                words.next(),
                words.next(),
            ) else {
                return Err(bad(
                    "expected `NAME==VERSION WHEEL sha256:HEX [drop-native]`",
                ));
            };
            let drop_native = match flag {
                None => false,
                Some("drop-native") => true,
                Some(other) => {
                    return Err(bad(&format!(
                        "`{}` is not `drop-native`",
                        other.escape_debug()
                    )));
                }
            };
            let (name, version) = pin
                .split_once("==")
                .ok_or_else(|| bad("a package is pinned with `==`"))?;
            if !valid_package_name(name) {
                return Err(bad(&format!(
                    "`{}` is not a package name",
                    name.escape_debug()
                )));
            }
            let version_ok = !version.is_empty()
                && version.len() <= 64
                && version
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b".+!-_".contains(&c));
            if !version_ok {
                return Err(bad(&format!(
                    "`{}` is not a version",
                    version.escape_debug()
                )));
            }
            let wheel_ok = wheel.ends_with(".whl")
                && wheel.len() <= 255
                && !wheel.starts_with('.')
                && wheel
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"._-+!".contains(&c));
            if !wheel_ok {
                return Err(bad(&format!(
                    "`{}` is not a wheel's file name",
                    wheel.escape_debug()
                )));
            }
            let sha256 = hash
                .strip_prefix("sha256:")
                .filter(|h| h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit()))
                .ok_or_else(|| bad("the hash is `sha256:` and 64 hex digits"))?;
            let name = normalize_package_name(name);
            if pins.iter().any(|p| p.name == name) {
                return Err(bad(&format!("`{name}` is pinned twice")));
            }
            pins.push(Pin {
                name,
                version: version.to_string(),
                wheel: wheel.to_string(),
                sha256: sha256.to_ascii_lowercase(),
                drop_native,
            });
        }
        pins.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Lock { pins })
    }

    /// The lock's text, one pin a line in name order.
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "# Python packages of this skill's scripts, written by `skillhost pack`: pure-Python\n\
             # wheels under .packages/wheels/, checked again at install. Do not edit.\n",
        );
        for p in &self.pins {
            out.push_str(&format!(
                "{}=={} {} sha256:{}{}\n",
                p.name,
                p.version,
                p.wheel,
                p.sha256,
                if p.drop_native { " drop-native" } else { "" }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_read_back_and_refuse_what_is_not_a_pin() {
        let hash = "0".repeat(64);
        let text = format!(
            "defusedxml==0.7.1 defusedxml-0.7.1-py2.py3-none-any.whl sha256:{hash}\n\
             PyPDF==5.1.0 pypdf-5.1.0-py3-none-any.whl sha256:{hash}\n\
             pyyaml==6.0.4 pyyaml-6.0.4-cp314-cp314-linux_x86_64.whl sha256:{hash} drop-native\n"
        );
        let lock = Lock::parse(&text).unwrap();
        assert_eq!(lock.pins[1].name, "pypdf");
        assert!(lock.pins[2].drop_native && !lock.pins[1].drop_native);
        assert_eq!(Lock::parse(&lock.to_text()).unwrap(), lock);
        for (bad, why) in [
            ("pypdf>=5 x.whl sha256:00", "pinned with `==`"),
            (
                &format!("pypdf==5 ../x.whl sha256:{hash}") as &str,
                "wheel's file name",
            ),
            (
                &format!("pypdf==5 x.tar.gz sha256:{hash}"),
                "wheel's file name",
            ),
            ("pypdf==5 x.whl md5:00", "sha256"),
            (
                &format!("a==1 a.whl sha256:{hash}\nA==2 a.whl sha256:{hash}"),
                "pinned twice",
            ),
            ("pypdf==5", "expected"),
        ] {
            let err = Lock::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains("line "), "{err}");
        }
    }
}
