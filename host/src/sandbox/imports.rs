//! Which imports a skill component may have, checked from the component's
//! bytes before anything is compiled: a component asking for more than
//! this is refused at load, never at call time, and never costs a
//! compilation.
//!
//! The policy fits what real toolchains emit. CPython (componentize-py)
//! and the JS engines link `wasi:filesystem` and `wasi:sockets` whether or
//! not the skill opens a file; StarlingMonkey links `wasi:http`. So these
//! are linked for every component, and what they reach is decided per call
//! by the skill's approved permissions ([`Capabilities`]):
//!
//! | import | without the permission | with it |
//! |---|---|---|
//! | `wasi:filesystem` | an empty, read-only filesystem (no preopens) | `permissions.assets`: the skill's assets at `/assets`, read-only |
//! | `wasi:http` | every request refused, recorded as an `outbound` event | `permissions.network`: requests to the approved origins |
//! | `wasi:sockets` | every operation refused (`access-denied`) | never: network goes through `wasi:http` only |
//!
//! Anything outside WASI 0.2 and the `skillhost:plugin` 0.1 interfaces is
//! refused at load.

/// What a component may reach beyond computing, as its skill declares and
/// the operator approved. `Capabilities::default()` is nothing: no network,
/// no assets. A component is linked to `wasi:http` and `wasi:filesystem`
/// either way; without a capability they refuse every request and show an
/// empty filesystem.
///
/// ```
/// let caps = skillhost::Capabilities { network: true, ..Default::default() };
/// assert!(!caps.assets);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// `wasi:http` requests go out (`permissions.network`), each still
    /// checked against the call's [`Outbound`](crate::Outbound).
    pub network: bool,
    /// `wasi:filesystem` shows the call's assets folder at `/assets`,
    /// read-only (`permissions.assets`).
    pub assets: bool,
}

/// Interfaces a component may import, without version. `wasi:http`,
/// `wasi:filesystem` and `wasi:sockets` are linked to implementations that
/// refuse what the skill's permissions do not grant (see the module docs).
const ALLOWED_IMPORTS: &[&str] = &[
    "skillhost:plugin/types",
    "skillhost:plugin/host",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:http/outgoing-handler",
    "wasi:http/types",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// The export every skill component must have, without version.
pub(crate) const TOOLS_EXPORT: &str = "skillhost:plugin/tools";

/// Splits `ns:pkg/iface@1.2.3` into `ns:pkg/iface` and `1.2.3`.
fn split_version(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (name, None),
    }
}

/// The newest `skillhost:plugin` version this host implements (`wit/skill.wit`).
const PLUGIN_PATCH: u64 = 2;

/// Whether `version` is in the line this host implements for the package:
/// WASI 0.2.x, and skillhost:plugin 0.1.x up to the version the host
/// implements (a component built against a newer one may import functions
/// this host lacks).
fn supported_version(interface: &str, version: Option<&str>) -> bool {
    let Some(v) = version.and_then(|v| semver::Version::parse(v).ok()) else {
        return false;
    };
    if interface.starts_with("wasi:") {
        v.major == 0 && v.minor == 2
    } else {
        v.major == 0 && v.minor == 1 && v.patch <= PLUGIN_PATCH && v.pre.is_empty()
    }
}

/// The top-level import and export names of a component, read from its
/// bytes without compiling it (nested modules and components are skipped
/// whole).
struct Surface {
    imports: Vec<String>,
    exports: Vec<String>,
}

fn surface(wasm: &[u8]) -> Result<Surface, String> {
    use wasmparser::{Chunk, Parser, Payload};
    let mut parser = Parser::new(0);
    let mut pos = 0usize;
    let mut out = Surface {
        imports: Vec::new(),
        exports: Vec::new(),
    };
    loop {
        let rest = wasm.get(pos..).unwrap_or_default();
        let (consumed, payload) = match parser.parse(rest, true) {
            Ok(Chunk::Parsed { consumed, payload }) => (consumed, payload),
            Ok(Chunk::NeedMoreData(_)) => return Err("invalid component: it is truncated".into()),
            Err(e) => return Err(format!("invalid component: {e}")),
        };
        pos = pos.saturating_add(consumed);
        match payload {
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                if unchecked_range.end > wasm.len() {
                    return Err(
                        "invalid component: it is truncated (a nested module ends past the end)"
                            .into(),
                    );
                }
                pos = unchecked_range.end;
            }
            Payload::ComponentImportSection(reader) => {
                for import in reader {
                    let import = import.map_err(|e| format!("invalid import: {e}"))?;
                    out.imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(|e| format!("invalid export: {e}"))?;
                    out.exports.push(export.name.name.to_string());
                }
            }
            Payload::End(_) => return Ok(out),
            _ => {}
        }
    }
}

/// Why a component's surface was not accepted.
pub(crate) enum SurfaceError {
    /// The bytes do not parse as a component.
    Malformed(String),
    /// Imports the sandbox does not provide, or no `tools` export.
    Refused(String),
}

/// Checks the imports and exports of the component in `wasm` before it is
/// compiled: every import must be one the sandbox links (see the module
/// docs), and `skillhost:plugin/tools@0.1.x` must be exported.
pub(crate) fn check(wasm: &[u8]) -> Result<(), SurfaceError> {
    let surface = surface(wasm).map_err(SurfaceError::Malformed)?;
    if let Some(refused) = refused_imports(&surface, |iface| ALLOWED_IMPORTS.contains(&iface)) {
        return Err(SurfaceError::Refused(format!(
            "refused before compiling: the component imports {refused} which the sandbox does \
             not provide (allowed: the skillhost:plugin 0.1 host interface and WASI 0.2 io, \
             clocks, random, cli, filesystem, http and sockets; what filesystem, http and \
             sockets reach is decided by the skill's approved permissions)"
        )));
    }
    let exports_tools = surface.exports.iter().any(|name| {
        let (iface, version) = split_version(name);
        iface == TOOLS_EXPORT && supported_version(iface, version)
    });
    if !exports_tools {
        return Err(SurfaceError::Refused(format!(
            "the component does not export `{TOOLS_EXPORT}@0.1.x`; build it against the \
             skillhost:plugin WIT world `skill` (`skillhost new` sets this up)"
        )));
    }
    Ok(())
}

/// The imports of `surface` whose interface `allowed` refuses, or whose
/// version the sandbox does not link, each in backticks, sorted and
/// without repeats, joined for a message; `None` when there are none.
fn refused_imports(surface: &Surface, allowed: impl Fn(&str) -> bool) -> Option<String> {
    let mut refused: Vec<&str> = surface
        .imports
        .iter()
        .map(String::as_str)
        .filter(|name| {
            let (iface, version) = split_version(name);
            !(allowed(iface) && supported_version(iface, version))
        })
        .collect();
    refused.sort_unstable();
    refused.dedup();
    (!refused.is_empty()).then(|| {
        refused
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// The export the script runtime must have, without version.
pub(crate) const SCRIPT_RUNNER_EXPORT: &str = "skillhost:script/runner";

/// Checks the script runtime's surface (`runtime/wit/script.wit`) before it
/// is compiled: WASI 0.2 imports only (not even the `skillhost:plugin` host
/// interface: a script reaches nothing a skill's `host` gives), and the
/// `runner` export.
pub(crate) fn check_script_runtime(wasm: &[u8]) -> Result<(), SurfaceError> {
    let surface = surface(wasm).map_err(SurfaceError::Malformed)?;
    if let Some(refused) = refused_imports(&surface, |iface| {
        iface.starts_with("wasi:") && ALLOWED_IMPORTS.contains(&iface)
    }) {
        return Err(SurfaceError::Refused(format!(
            "the script runtime imports {refused}, which it may not (WASI 0.2 only)"
        )));
    }
    let exports_runner = surface.exports.iter().any(|name| {
        let (iface, version) = split_version(name);
        iface == SCRIPT_RUNNER_EXPORT && version == Some("0.1.0")
    });
    if !exports_runner {
        return Err(SurfaceError::Refused(format!(
            "the script runtime does not export `{SCRIPT_RUNNER_EXPORT}@0.1.0`"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_must_be_in_the_supported_line() {
        assert!(supported_version("wasi:io/streams", Some("0.2.6")));
        assert!(!supported_version("wasi:io/streams", Some("0.3.0")));
        assert!(!supported_version("wasi:io/streams", None));
        assert!(supported_version("skillhost:plugin/host", Some("0.1.0")));
        assert!(supported_version("skillhost:plugin/host", Some("0.1.2")));
        assert!(!supported_version("skillhost:plugin/host", Some("0.1.3")));
        assert!(!supported_version("skillhost:plugin/host", Some("1.0.0")));
    }

    #[test]
    fn the_script_runtime_check_refuses_a_skill_component() {
        for b in crate::builtin_skills() {
            assert!(check(b.component).is_ok());
            match check_script_runtime(b.component) {
                Err(SurfaceError::Refused(m)) => assert!(
                    m.contains("skillhost:plugin") || m.contains(SCRIPT_RUNNER_EXPORT),
                    "{m}"
                ),
                _ => panic!("{} passed as the script runtime", b.name),
            }
        }
    }

    #[test]
    fn garbage_and_truncation_are_malformed_not_a_panic() {
        let header = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        assert!(matches!(
            check(&header),
            Err(SurfaceError::Malformed(_)) | Err(SurfaceError::Refused(_))
        ));
        let mut bad = header.to_vec();
        bad.extend_from_slice(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(matches!(check(&bad), Err(SurfaceError::Malformed(_))));
    }
}
