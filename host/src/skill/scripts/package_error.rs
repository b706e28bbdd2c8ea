//! What goes wrong with a skill's Python packages, by kind: the room
//! above (`check`, `pack`, install) tells a requirement the author wrote
//! from a wheel it must refuse or a file it could not read.

/// The kind of a [`PackageError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageErrorKind {
    /// A requirement line or an environment marker cannot be read.
    Requirement,
    /// The lock file is malformed, or does not match the requirements or
    /// the wheels beside it.
    Lock,
    /// A wheel is refused: its name, native code, a `.pth` file, a path
    /// that escapes, a RECORD mismatch.
    Wheel,
    /// The requirements cannot be satisfied from the wheels given.
    Unresolved,
    /// The skill's manifest cannot be read.
    Manifest,
    /// A file or folder could not be read or written.
    Io,
}

/// Why a skill's Python packages cannot be resolved, checked or
/// unpacked; the message names the requirement, package, wheel or file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PackageError {
    kind: PackageErrorKind,
    message: String,
}

impl PackageError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: PackageErrorKind, message: impl Into<String>) -> PackageError {
        PackageError {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong, by kind.
    pub fn kind(&self) -> PackageErrorKind {
        self.kind
    }

    pub(crate) fn requirement(message: impl Into<String>) -> PackageError {
        PackageError::new(PackageErrorKind::Requirement, message)
    }

    pub(crate) fn lock(message: impl Into<String>) -> PackageError {
        PackageError::new(PackageErrorKind::Lock, message)
    }

    pub(crate) fn wheel(message: impl Into<String>) -> PackageError {
        PackageError::new(PackageErrorKind::Wheel, message)
    }

    pub(crate) fn unresolved(message: impl Into<String>) -> PackageError {
        PackageError::new(PackageErrorKind::Unresolved, message)
    }

    pub(crate) fn io(message: impl Into<String>) -> PackageError {
        PackageError::new(PackageErrorKind::Io, message)
    }
}

#[cfg(test)]
mod tests {
    use super::PackageErrorKind;
    use crate::skill::scripts::requirements::Lock;
    use crate::skill::scripts::resolve::{Requirement, marker_holds};
    use crate::skill::scripts::wheel::check_wheel;

    #[test]
    fn each_refusal_says_its_kind() {
        let kind = |r: Result<(), super::PackageError>| r.map_err(|e| e.kind()).err();
        assert_eq!(
            kind(Requirement::parse("pypdf >=").map(drop)),
            Some(PackageErrorKind::Requirement)
        );
        assert_eq!(
            kind(marker_holds("nonsense_var == '1'", None).map(drop)),
            Some(PackageErrorKind::Requirement)
        );
        assert_eq!(
            kind(Lock::parse("pypdf==5").map(drop)),
            Some(PackageErrorKind::Lock)
        );
        assert_eq!(
            kind(check_wheel("demo-1.0-py3-none-any.whl", b"not a zip", false).map(drop)),
            Some(PackageErrorKind::Wheel)
        );
    }
}
