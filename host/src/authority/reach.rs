//! What each ready skill may reach beyond computing, as approved: its
//! network origins with the secret headers bound to them (values opened
//! from the store), and its assets folder. Built with every registry
//! snapshot, so an approval, a secret set or removed, or an upgrade takes
//! effect on the next call; the secret values join the redaction list.

use std::collections::HashMap;
use std::sync::Arc;

use super::HostInner;
use crate::registry::Registry;
use crate::sandbox::{Outbound, SecretHeader, SecretValue};
use crate::skill::ASSETS_DIR;
use crate::state::runs::HostEvent;

/// One skill's reach for its calls.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    /// Outbound HTTP policy; `None` when the skill lists no origin.
    pub outbound: Option<Arc<Outbound>>,
    /// Its assets folder, when it declares `permissions.assets` (read at
    /// its first call, then shared by the calls of this registry).
    pub assets: Option<Arc<crate::AssetsFolder>>,
    /// The questions beyond forms it may ask its caller's client
    /// (`permissions.sampling`, `permissions.roots`).
    pub client: crate::ClientReach,
}

impl HostInner {
    /// Every ready skill's reach, and every secret value it holds (for
    /// redaction). A secret that cannot be opened or made a header is left
    /// out with a warning (its skill's requests go without it).
    pub(crate) fn build_reach(&self, reg: &Registry) -> (HashMap<String, Arc<Reach>>, Vec<String>) {
        let mut out = HashMap::new();
        let mut values = Vec::new();
        for (name, info) in &reg.skills {
            if !info.state.registers_tools() {
                continue;
            }
            let e = &info.entry;
            let p = &e.permissions;
            if p.is_empty() {
                continue;
            }
            let identity = e.identity();
            let mut secrets = Vec::new();
            for d in &p.secrets {
                let value = match self.secret_value(name, &d.name, &identity) {
                    Ok(Some(v)) => v,
                    Ok(None) => continue,
                    Err(err) => {
                        tracing::warn!(skill = %name, secret = %d.name, "cannot open a secret: {err:#}");
                        continue;
                    }
                };
                let header = d.header_value(&value);
                values.push(value);
                let (Ok(header_name), Ok(header_value)) = (
                    http::HeaderName::from_bytes(d.header.as_bytes()),
                    SecretValue::new(&header),
                ) else {
                    tracing::warn!(skill = %name, secret = %d.name, "a secret does not make a valid header; left out");
                    continue;
                };
                values.push(header);
                secrets.push(SecretHeader {
                    secret: d.name.clone(),
                    origins: d
                        .origins
                        .iter()
                        .filter_map(|o| crate::sandbox::OriginPattern::parse(o).ok())
                        .collect(),
                    header: header_name,
                    value: header_value,
                });
            }
            let allowed = p.origins();
            let reach = Reach {
                outbound: (!allowed.is_empty()).then(|| Arc::new(Outbound { allowed, secrets })),
                assets: p
                    .assets
                    .then(|| {
                        e.path
                            .as_ref()
                            .map(|dir| crate::AssetsFolder::new(dir.join(ASSETS_DIR)))
                    })
                    .flatten(),
                client: crate::ClientReach {
                    sampling: p.sampling,
                    roots: p.roots,
                },
            };
            out.insert(name.clone(), Arc::new(reach));
        }
        (out, values)
    }

    /// Records what a skill's call sent and received: one audit event
    /// (`outbound`) per request, naming the method, origin, status, bytes,
    /// duration and outcome (never a path, header or body), and the
    /// outbound metrics. The method and origin are the guest's (bounded by
    /// the send hook, which records an invalid one as `(invalid)`): like
    /// the detail, they are redacted where every event is (`emit`), so a
    /// secret an API echoed back and the guest used as a method or a host
    /// name is not kept.
    pub(crate) fn record_outbound(
        &self,
        skill: &str,
        run_id: &str,
        persona: Option<&str>,
        tool: &str,
        records: &[crate::sandbox::OutboundRecord],
    ) {
        for r in records {
            self.metrics.record_outbound(skill, r);
            let detail = serde_json::to_value(r).unwrap_or_default();
            self.emit(HostEvent {
                at_ms: crate::state::runs::now_ms(),
                kind: "outbound".into(),
                run_id: Some(run_id.to_string()),
                persona: persona.map(str::to_string),
                tool: Some(tool.to_string()),
                server: Some(format!("skill:{skill}")),
                outcome: None,
                duration_ms: Some(i64::try_from(r.duration.as_millis()).unwrap_or(i64::MAX)),
                detail,
            });
        }
    }
}
