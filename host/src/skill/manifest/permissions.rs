//! `permissions` in `skill.yaml`: what a skill may reach beyond computing.
//! Each is inside the signed statement (the manifest is a signed file), so
//! it cannot change without a new signature, and none is in force until an
//! operator approved it (`skillhost skills approve NAME`).
//!
//! ```yaml
//! permissions:
//!   network:                        # origins, in the style of Spin's allowed_outbound_hosts
//!     - https://api.example.com
//!     - https://*.example.org:8443
//!   secrets:
//!     - name: api_token
//!       origins: [https://api.example.com]
//!       header: Authorization      # the default
//!       format: "Bearer {value}"   # the default
//!   assets: true                    # read the skill's own assets/ folder
//!   sampling: true                  # ask the caller's model for completions (host.ask)
//!   roots: true                     # ask the caller's client for its roots (host.ask)
//! ```

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::limits::{MAX_ORIGINS, MAX_SECRETS};
use crate::sandbox::OriginPattern;

/// Longest secret name accepted.
const MAX_SECRET_NAME: usize = 64;

/// Header names a secret may not be sent as: they frame the request or
/// belong to the connection, and the host sets them itself.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
    "expect",
];

/// What a skill asks for beyond computing. The default asks for nothing.
///
/// ```
/// let m = skillhost::SkillManifest::parse(r#"
/// name: weather
/// version: 1.0.0
/// description: Reads the weather.
/// component: weather.wasm
/// tool_names: [weather.now]
/// tools:
///   - {name: weather.now, description: The weather now., read_only: true}
/// permissions:
///   network: [https://api.example.com]
///   secrets:
///     - name: api_token
///       origins: [https://api.example.com]
/// "#).unwrap();
/// let p = &m.permissions;
/// assert_eq!(p.network, vec!["https://api.example.com".to_string()]);
/// assert_eq!(p.secrets[0].header, "authorization");
/// assert!(!p.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "`permissions` as a mapping of `network`, `secrets`, `assets`, `sampling` and `roots`"
)]
pub struct Permissions {
    /// Origins the component may send HTTP requests to (`scheme://host`,
    /// `*.` for any subdomain, an explicit `:port` or `:*`). Canonical after
    /// parsing (lower case, explicit port).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
    /// Named secrets the host adds to requests to their origins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretDecl>,
    /// Whether the component may read the skill's own `assets/` folder.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub assets: bool,
    /// Whether the component may ask the calling client's model for
    /// completions (`host.ask` with a `sample` question: MCP
    /// `sampling/createMessage`, which the client's user pays for).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sampling: bool,
    /// Whether the component may ask the calling client for its roots
    /// (`host.ask` with a `roots` question: MCP `roots/list`, the folders
    /// the user works in).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub roots: bool,
    /// The skill's scripts, derived by the host from its folder (the
    /// scripts folder's files and the package lock), never written by the
    /// author: approving it lets exactly these files run; any change to
    /// them waits for approval again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scripts: Option<ScriptsPermission>,
}

/// `permissions.scripts`: what an operator approves for a skill's
/// scripts.
///
/// ```
/// let p = skillhost::ScriptsPermission { digest: "ab".repeat(32), scripts: vec!["scripts/a.py".into()], packages: vec![] };
/// let mut wants = skillhost::Permissions::default();
/// wants.scripts = Some(p);
/// assert!(wants.beyond(&Default::default())[0].starts_with("scripts abababababab"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptsPermission {
    /// sha256 over every file of the scripts folder and the package lock
    /// and wheels (`ScriptSet::digest`).
    pub digest: String,
    /// The scripts an agent may name.
    pub scripts: Vec<String>,
    /// The packages the lock pins, `name==version`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
}

/// One secret a skill declares: the host keeps its value and adds it as a
/// header to requests going to `origins`; the component never sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a secret in `permissions.secrets` as a mapping of `name`, `origins`, `header` and `format`"
)]
pub struct SecretDecl {
    /// The secret's name (`[a-z0-9_]{1,64}`), as `skillhost secrets set`
    /// takes it.
    pub name: String,
    /// Origins the value may be sent to; each must be one of `network`.
    pub origins: Vec<String>,
    /// The header carrying the value (lower case after parsing).
    #[serde(default = "default_header")]
    pub header: String,
    /// The header's value, with `{value}` where the secret goes.
    #[serde(default = "default_format")]
    pub format: String,
}

fn default_header() -> String {
    "authorization".into()
}

fn default_format() -> String {
    "Bearer {value}".into()
}

impl Permissions {
    /// Whether the skill asks for nothing.
    ///
    /// ```
    /// assert!(skillhost::Permissions::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.network.is_empty()
            && self.secrets.is_empty()
            && !self.assets
            && !self.sampling
            && !self.roots
            && self.scripts.is_none()
    }

    /// The parsed network origins (every one parses: the manifest was
    /// validated).
    pub fn origins(&self) -> Vec<OriginPattern> {
        self.network
            .iter()
            .filter_map(|o| OriginPattern::parse(o).ok())
            .collect()
    }

    /// The set as canonical JSON: what an operator approves and what
    /// [`Permissions::digest`] hashes.
    ///
    /// ```
    /// assert_eq!(skillhost::Permissions::default().canonical_json(), "{}");
    /// ```
    pub fn canonical_json(&self) -> String {
        let mut c = self.clone();
        c.network.sort();
        c.network.dedup();
        c.secrets.sort_by(|a, b| a.name.cmp(&b.name));
        for s in &mut c.secrets {
            s.origins.sort();
            s.origins.dedup();
        }
        serde_json::to_string(&c).unwrap_or_default()
    }

    /// sha256 of [`Permissions::canonical_json`], hex: names exactly one
    /// set, so an approval of what was shown cannot approve something else.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.canonical_json().as_bytes()))
    }

    /// What this set asks for beyond `approved`, one line each (`network
    /// https://x:443`, `secret api_token`, `assets`); empty when `approved`
    /// covers it.
    ///
    /// ```
    /// let mut wants = skillhost::Permissions::default();
    /// wants.assets = true;
    /// assert_eq!(wants.beyond(&Default::default()), vec!["assets".to_string()]);
    /// assert!(wants.beyond(&wants).is_empty());
    /// ```
    pub fn beyond(&self, approved: &Permissions) -> Vec<String> {
        let mut more = Vec::new();
        let have: BTreeSet<&str> = approved.network.iter().map(String::as_str).collect();
        for o in &self.network {
            if !have.contains(o.as_str()) {
                more.push(format!("network {o}"));
            }
        }
        for s in &self.secrets {
            let covered = approved.secrets.iter().any(|a| {
                a.name == s.name
                    && a.header == s.header
                    && a.format == s.format
                    && s.origins.iter().all(|o| a.origins.contains(o))
            });
            if !covered {
                more.push(format!(
                    "secret {} as `{}` to {}",
                    s.name,
                    s.header,
                    s.origins.join(", ")
                ));
            }
        }
        if self.assets && !approved.assets {
            more.push("assets".into());
        }
        if self.sampling && !approved.sampling {
            more.push("sampling".into());
        }
        if self.roots && !approved.roots {
            more.push("roots".into());
        }
        if let Some(s) = &self.scripts
            && approved.scripts.as_ref().map(|a| &a.digest) != Some(&s.digest)
        {
            let mut line = format!(
                "scripts {} ({})",
                s.digest.get(..12).unwrap_or(&s.digest),
                s.scripts.join(", ")
            );
            if !s.packages.is_empty() {
                line.push_str(&format!("; packages {}", s.packages.join(", ")));
            }
            more.push(line);
        }
        more
    }

    /// Checks the set and puts every origin in canonical form; every
    /// problem is pushed to `problems`, naming the field.
    pub(crate) fn validate(&mut self, problems: &mut Vec<String>) {
        if self.scripts.is_some() {
            problems.push(
                "`permissions.scripts`: derived by the host from the skill's scripts folder; \
                 remove it (the operator approves the scripts as they are)"
                    .into(),
            );
        }
        if self.network.len() > MAX_ORIGINS {
            problems.push(format!(
                "`permissions.network`: {} origins, more than the {MAX_ORIGINS} allowed",
                self.network.len()
            ));
        }
        for (i, o) in self.network.iter_mut().enumerate() {
            match OriginPattern::parse(o) {
                Ok(p) => *o = p.to_string(),
                Err(e) => problems.push(format!("`permissions.network[{i}]`: {e}")),
            }
        }
        if self.secrets.len() > MAX_SECRETS {
            problems.push(format!(
                "`permissions.secrets`: {} secrets, more than the {MAX_SECRETS} allowed",
                self.secrets.len()
            ));
        }
        let network: BTreeSet<String> = self.network.iter().cloned().collect();
        let mut names = BTreeSet::new();
        for (i, s) in self.secrets.iter_mut().enumerate() {
            let at = format!("`permissions.secrets[{i}]");
            let valid_name = !s.name.is_empty()
                && s.name.len() <= MAX_SECRET_NAME
                && s.name
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_');
            if !valid_name {
                problems.push(format!(
                    "{at}.name`: `{}` must be 1 to {MAX_SECRET_NAME} characters of [a-z0-9_]",
                    s.name.escape_debug()
                ));
            } else if !names.insert(s.name.clone()) {
                problems.push(format!("{at}.name`: secret `{}` is declared twice", s.name));
            }
            if s.origins.is_empty() {
                problems.push(format!(
                    "{at}.origins`: empty; name the origins the secret may be sent to"
                ));
            }
            for (j, o) in s.origins.iter_mut().enumerate() {
                match OriginPattern::parse(o) {
                    Ok(p) => {
                        *o = p.to_string();
                        if !network.contains(o.as_str()) {
                            problems.push(format!(
                                "{at}.origins[{j}]`: `{o}` is not in `permissions.network`; \
                                 a secret goes only where the skill may send requests"
                            ));
                        }
                    }
                    Err(e) => problems.push(format!("{at}.origins[{j}]`: {e}")),
                }
            }
            s.header = s.header.to_ascii_lowercase();
            let token = !s.header.is_empty()
                && s.header.len() <= 64
                && s.header
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c));
            if !token {
                problems.push(format!(
                    "{at}.header`: `{}` is not an HTTP header name",
                    s.header.escape_debug()
                ));
            } else if RESERVED_HEADERS.contains(&s.header.as_str())
                || s.header.starts_with("proxy-")
            {
                problems.push(format!(
                    "{at}.header`: `{}` frames the request; the host sets it itself",
                    s.header
                ));
            }
            let slots = s.format.matches("{value}").count();
            let printable = s
                .format
                .bytes()
                .all(|c| c == b'\t' || (0x20..0x7f).contains(&c));
            if slots != 1 {
                problems.push(format!(
                    "{at}.format`: must contain `{{value}}` exactly once (found {slots})"
                ));
            }
            if !printable || s.format.len() > 256 {
                problems.push(format!(
                    "{at}.format`: must be at most 256 printable ASCII characters"
                ));
            }
        }
    }
}

impl SecretDecl {
    /// The header value for `value`: `format` with `{value}` replaced.
    pub(crate) fn header_value(&self, value: &str) -> String {
        self.format.replacen("{value}", value, 1)
    }
}
