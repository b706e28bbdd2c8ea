//! Which imports a skill component may have. Checked before anything is
//! instantiated: a component asking for more than this is refused at load,
//! never at call time.

use wasmtime::Engine;
use wasmtime::component::Component;

/// What a component may reach beyond computing, as its skill declares and
/// the operator approved. `Capabilities::default()` is nothing: no network,
/// no assets.
///
/// ```
/// let caps = skillhost::Capabilities { network: true, ..Default::default() };
/// assert!(!caps.assets);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// May import `wasi:http/outgoing-handler` and `wasi:http/types`
    /// (`permissions.network`); each request is still checked against the
    /// call's [`Outbound`](crate::Outbound).
    pub network: bool,
    /// May import `wasi:filesystem/types` and `wasi:filesystem/preopens`
    /// (`permissions.assets`), to read the call's assets folder at
    /// `/assets`, read-only.
    pub assets: bool,
}

/// Interfaces a component may import only with `network`.
const NETWORK_IMPORTS: &[&str] = &["wasi:http/outgoing-handler", "wasi:http/types"];

/// Interfaces a component may import only with `assets`.
const ASSETS_IMPORTS: &[&str] = &["wasi:filesystem/types", "wasi:filesystem/preopens"];

/// Interfaces a component may import, without version, whatever its
/// capabilities. `wasi:http` and `wasi:filesystem` are allowed (and
/// linked) only with a capability; everything else, `wasi:sockets`
/// included, is refused and never linked.
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

/// Whether `version` is in the line this host implements for the package:
/// WASI 0.2.x and skillhost:plugin 0.1.x.
fn supported_version(interface: &str, version: Option<&str>) -> bool {
    let Some(v) = version.and_then(|v| semver::Version::parse(v).ok()) else {
        return false;
    };
    if interface.starts_with("wasi:") {
        v.major == 0 && v.minor == 2
    } else {
        v.major == 0 && v.minor == 1
    }
}

/// Returns every import of `component` the sandbox does not provide with
/// `caps` (naming the missing permission for those a capability would
/// allow), or the missing `tools` export.
pub(crate) fn check(
    engine: &Engine,
    component: &Component,
    caps: Capabilities,
) -> Result<(), String> {
    let ty = component.component_type();
    let mut refused: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (name, _) in ty.imports(engine) {
        let (iface, version) = split_version(name);
        let supported = supported_version(iface, version);
        if ALLOWED_IMPORTS.contains(&iface) && supported {
            continue;
        }
        let gated = if NETWORK_IMPORTS.contains(&iface) {
            Some((caps.network, "permissions.network"))
        } else if ASSETS_IMPORTS.contains(&iface) {
            Some((caps.assets, "permissions.assets"))
        } else {
            None
        };
        match gated {
            Some((true, _)) if supported => {}
            Some((false, permission)) if supported => missing.push(format!(
                "the component imports `{name}` but the skill declares no `{permission}`"
            )),
            _ => refused.push(name.to_string()),
        }
    }
    missing.sort();
    missing.dedup();
    refused.sort();
    refused.dedup();
    let mut reasons = missing;
    if !refused.is_empty() {
        reasons.push(format!(
            "the component imports {} which the sandbox does not provide \
             (allowed: the skillhost:plugin host interface, and WASI 0.2 clocks, random, io and \
             cli environment/exit/stdio/terminal; http with `permissions.network`, filesystem \
             with `permissions.assets`; never sockets)",
            refused
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !reasons.is_empty() {
        return Err(format!("refused before running: {}", reasons.join("; ")));
    }
    let exports_tools = ty.exports(engine).any(|(name, _)| {
        let (iface, version) = split_version(name);
        iface == TOOLS_EXPORT && supported_version(iface, version)
    });
    if !exports_tools {
        return Err(format!(
            "the component does not export `{TOOLS_EXPORT}@0.1.x`; build it against the \
             skillhost:plugin WIT world `skill` (the skillhost-guest SDK does this)"
        ));
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
        assert!(!supported_version("skillhost:plugin/host", Some("1.0.0")));
    }
}
