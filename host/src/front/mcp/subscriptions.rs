//! `resources/subscribe`: the resources a session watches. Each URI is
//! kept with a stamp of the skill that serves it (name, version, digest);
//! when the caller's skills change, every watched URI whose stamp changed
//! gets `notifications/resources/updated`. A session watches at most
//! [`MCP_MAX_RESOURCE_SUBSCRIPTIONS`] URIs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::limits::MCP_MAX_RESOURCE_SUBSCRIPTIONS;
use crate::registry::SkillInfo;

/// The URIs one session watches, with the stamp each had when last seen.
#[derive(Debug, Default, Clone)]
pub(super) struct Subscriptions(Arc<Mutex<BTreeMap<String, Option<u64>>>>);

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Option<u64>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches `uri` (again: no change); refused past the cap.
    pub fn add(&self, uri: &str, stamp: Option<u64>) -> Result<(), String> {
        let mut subs = self.lock();
        if !subs.contains_key(uri) && subs.len() >= MCP_MAX_RESOURCE_SUBSCRIPTIONS {
            return Err(format!(
                "this session already watches {MCP_MAX_RESOURCE_SUBSCRIPTIONS} resources; \
                 unsubscribe from one first"
            ));
        }
        subs.insert(uri.to_string(), stamp);
        Ok(())
    }

    /// Stops watching `uri` (not watched: nothing happens).
    pub fn remove(&self, uri: &str) {
        self.lock().remove(uri);
    }

    /// The watched URIs whose stamp differs from `stamp(uri)` now; their
    /// stamps are updated.
    pub fn changed(&self, stamp: impl Fn(&str) -> Option<u64>) -> Vec<String> {
        let mut subs = self.lock();
        let mut out = Vec::new();
        for (uri, last) in subs.iter_mut() {
            let now = stamp(uri);
            if now != *last {
                *last = now;
                out.push(uri.clone());
            }
        }
        out
    }
}

/// A stamp of the skill serving `uri` among `all`: its `skill://` files or
/// what it publishes; `None` when no skill serves it.
pub(super) fn stamp(all: &[SkillInfo], uri: &str) -> Option<u64> {
    let skill = match super::skills::skill_of_uri(uri) {
        Some(name) => all.iter().find(|s| s.entry.name == name)?,
        None => match super::resources::find(all, uri)? {
            super::resources::Target::File(s, _) | super::resources::Target::Template(s, _, _) => s,
        },
    };
    Some(super::skills::fingerprint(std::slice::from_ref(skill)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_reported_once_and_the_count_is_capped() {
        let s = Subscriptions::default();
        s.add("x://a", Some(1)).unwrap();
        s.add("x://b", None).unwrap();
        assert_eq!(
            s.changed(|u| if u == "x://a" { Some(2) } else { None }),
            vec!["x://a"]
        );
        assert!(
            s.changed(|u| if u == "x://a" { Some(2) } else { None })
                .is_empty()
        );
        s.remove("x://a");
        assert!(s.changed(|_| Some(9)).contains(&"x://b".to_string()));
        for i in 0..MCP_MAX_RESOURCE_SUBSCRIPTIONS {
            let _ = s.add(&format!("x://{i}"), None);
        }
        assert!(
            s.add("x://one-more", None)
                .unwrap_err()
                .contains("already watches")
        );
        // Watching a URI again is not a new subscription.
        s.add("x://b", None).unwrap();
    }
}
