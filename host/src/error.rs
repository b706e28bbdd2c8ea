//! Typed errors at the [`Host`](crate::Host) boundary.
//!
//! Every fallible `Host` method returns the error of its operation family:
//! [`PersonaError`] (personas, grants, a persona's tools), [`CatalogError`]
//! (skills: install, uninstall, enable, trust, publisher keys),
//! [`ApprovalError`] (approve, deny), [`ServerError`] (MCP servers),
//! [`RefError`] (input refs), [`TokenError`] (bearer tokens), and
//! [`StateError`] for a read of the host's state that can fail only because
//! the state cannot be read. Each variant says what a front must do
//! differently; the message says what was wrong and what to do.
//!
//! A front maps [`HostError::kind`] once (the CLI to an exit code, the HTTP
//! API to a status, the MCP front to a JSON-RPC error code) and never
//! re-reads state to tell a "no such thing" from a conflict. Inside the host,
//! mechanisms use `anyhow` with context; it stops here.

/// What kind of refusal or failure an error is: the one thing a front needs
/// to choose its answer.
///
/// ```
/// use skillhost::{ErrorKind, HostError, PersonaError};
/// let e = PersonaError::NotFound("there is no persona `ana`".into());
/// assert_eq!(e.kind(), ErrorKind::NotFound);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request is malformed or names something in a form the host
    /// refuses (an invalid id, a configuration that does not validate, a
    /// bundle that fails its checks).
    Invalid,
    /// What the request names does not exist.
    NotFound,
    /// The request conflicts with the current state: it exists already,
    /// was decided already, or expired.
    Conflict,
    /// An MCP server the request needs could not be reached.
    Unreachable,
    /// The host's own state could not be read or written (a damaged or
    /// unreachable data dir); retrying the same request will not help
    /// until that is mended.
    Internal,
}

impl ErrorKind {
    /// The HTTP status an error of this kind answers with on the host's
    /// own HTTP fronts (the console's pages), and for an embedder's:
    /// 400, 404, 409, 502 or 500.
    ///
    /// ```
    /// use skillhost::ErrorKind;
    /// assert_eq!(ErrorKind::NotFound.http_status(), 404);
    /// assert_eq!(ErrorKind::Unreachable.http_status(), 502);
    /// ```
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::Invalid => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::Unreachable => 502,
            ErrorKind::Internal => 500,
        }
    }
}

/// An error at the [`Host`](crate::Host) boundary.
///
/// ```
/// use skillhost::{ErrorKind, HostError};
/// fn status(e: &dyn HostError) -> u16 {
///     match e.kind() {
///         ErrorKind::Invalid => 400,
///         ErrorKind::NotFound => 404,
///         ErrorKind::Conflict => 409,
///         ErrorKind::Unreachable => 502,
///         ErrorKind::Internal => 500,
///     }
/// }
/// assert_eq!(status(&skillhost::RefError::NotFound("no ref".into())), 404);
/// ```
pub trait HostError: std::error::Error + Send + Sync + 'static {
    /// The kind of this error.
    fn kind(&self) -> ErrorKind;
}

/// The host's state could not be read or written: the database or a file
/// of the data dir. The message names what and where.
///
/// ```
/// use skillhost::{ErrorKind, HostError, StateError};
/// let e = StateError::from(anyhow::anyhow!("cannot open data/skillhost.db"));
/// assert_eq!(e.kind(), ErrorKind::Internal);
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct StateError(anyhow::Error);

impl From<anyhow::Error> for StateError {
    fn from(e: anyhow::Error) -> StateError {
        StateError(e)
    }
}

impl From<crate::state::db::DbError> for StateError {
    fn from(e: crate::state::db::DbError) -> StateError {
        StateError(anyhow::Error::new(e).context("the host's database"))
    }
}

impl From<std::io::Error> for StateError {
    fn from(e: std::io::Error) -> StateError {
        StateError(e.into())
    }
}

impl HostError for StateError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Internal
    }
}

/// Declares a family of errors: each variant but `State` carries the
/// message and has the kind given; `State` wraps a [`StateError`].
macro_rules! family {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $kind:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, thiserror::Error)]
        pub enum $name {
            $( $(#[$vmeta])* #[error("{0}")] $variant(String), )*
            /// The host's state could not be read or written.
            #[error(transparent)]
            State(#[from] StateError),
        }

        impl HostError for $name {
            fn kind(&self) -> ErrorKind {
                match self {
                    $( $name::$variant(_) => ErrorKind::$kind, )*
                    $name::State(_) => ErrorKind::Internal,
                }
            }
        }

        impl From<crate::state::db::DbError> for $name {
            fn from(e: crate::state::db::DbError) -> $name {
                $name::State(e.into())
            }
        }

        impl From<anyhow::Error> for $name {
            fn from(e: anyhow::Error) -> $name {
                $name::State(e.into())
            }
        }
    };
}

family! {
    /// Why an operation on personas or their grants (or a persona's tools)
    /// was refused.
    ///
    /// ```
    /// use skillhost::{ErrorKind, HostError, PersonaError};
    /// assert_eq!(PersonaError::Invalid("bad id".into()).kind(), ErrorKind::Invalid);
    /// ```
    pub enum PersonaError {
        /// The persona id is not one the host accepts.
        Invalid => Invalid,
        /// No persona has that id, or the skill or server to grant does not
        /// exist.
        NotFound => NotFound,
    }
}

family! {
    /// Why an operation on the skill catalog was refused: install,
    /// uninstall, verify, enable, disable, trust, publisher keys.
    ///
    /// ```
    /// use skillhost::{CatalogError, ErrorKind, HostError};
    /// assert_eq!(CatalogError::Conflict("installed already".into()).kind(), ErrorKind::Conflict);
    /// ```
    pub enum CatalogError {
        /// The bundle, key or request fails the host's checks (unreadable,
        /// badly signed, untrusted, a rollback, a component that does not
        /// load, …); nothing was changed.
        Refused => Invalid,
        /// No skill, installed version or key of that name.
        NotFound => NotFound,
        /// This name and version is installed already.
        Conflict => Conflict,
    }
}

family! {
    /// Why a run could not be approved or denied.
    ///
    /// ```
    /// use skillhost::{ApprovalError, ErrorKind, HostError};
    /// assert_eq!(ApprovalError::Decided("run x was denied".into()).kind(), ErrorKind::Conflict);
    /// ```
    pub enum ApprovalError {
        /// There is no run of that id.
        NotFound => NotFound,
        /// The run does not wait for approval: approved, denied or expired
        /// already (by someone else meanwhile, perhaps), or it never asked.
        Decided => Conflict,
        /// The answer is not one this caller may give: a client answering
        /// where client-side approval is off, or a resume state that is
        /// forged, another caller's, used already or expired.
        Refused => Invalid,
        /// The decision's own input is malformed: a denial's reason too
        /// long or holding control characters. Nothing was decided.
        Invalid => Invalid,
    }
}

family! {
    /// Why an operation on an MCP server's configuration or a query of the
    /// server was refused.
    ///
    /// ```
    /// use skillhost::{ErrorKind, HostError, ServerError};
    /// assert_eq!(ServerError::Unreachable("no answer".into()).kind(), ErrorKind::Unreachable);
    /// ```
    pub enum ServerError {
        /// No server of that name is configured.
        NotFound => NotFound,
        /// A server of that name is configured already.
        Conflict => Conflict,
        /// The server's configuration is not valid.
        Invalid => Invalid,
        /// The server is configured but disabled.
        Disabled => Conflict,
        /// The server could not be reached (connect or `tools/list` failed).
        Unreachable => Unreachable,
    }
}

family! {
    /// Why an input ref could not be stored, listed or removed.
    ///
    /// ```
    /// use skillhost::{ErrorKind, HostError, RefError};
    /// assert_eq!(RefError::Invalid("too large".into()).kind(), ErrorKind::Invalid);
    /// ```
    pub enum RefError {
        /// The content or id is refused (over the size limit, not a ref id).
        Invalid => Invalid,
        /// There is no ref of that id.
        NotFound => NotFound,
    }
}

family! {
    /// Why a bearer token could not be made, listed or removed.
    ///
    /// ```
    /// use skillhost::{ErrorKind, HostError, TokenError};
    /// assert_eq!(TokenError::NotFound("no token 3".into()).kind(), ErrorKind::NotFound);
    /// ```
    pub enum TokenError {
        /// The persona or token named does not exist.
        NotFound => NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_errors_are_internal_in_every_family() {
        let e = || StateError::from(anyhow::anyhow!("disk"));
        assert_eq!(PersonaError::from(e()).kind(), ErrorKind::Internal);
        assert_eq!(CatalogError::from(e()).kind(), ErrorKind::Internal);
        assert_eq!(ApprovalError::from(e()).kind(), ErrorKind::Internal);
        assert_eq!(ServerError::from(e()).kind(), ErrorKind::Internal);
        assert_eq!(RefError::from(e()).kind(), ErrorKind::Internal);
        assert_eq!(TokenError::from(e()).kind(), ErrorKind::Internal);
        assert_eq!(PersonaError::from(e()).to_string(), "disk");
    }

    #[test]
    fn messages_are_the_variants_text() {
        let e = ApprovalError::Decided("run r was denied; call the tool again".into());
        assert_eq!(e.to_string(), "run r was denied; call the tool again");
        assert_eq!(e.kind(), ErrorKind::Conflict);
    }
}
