//! Which personas may use an MCP server: the grant toggle as pure functions.
//!
//! Each MCP server config has `allowed_persona_ids`; the entry `"*"`
//! ([`GLOBAL_ALL`]) grants the server to every persona, present and future.
//! The UI toggles one checkbox at a time (a persona, or `*`), and a persona's
//! own grants page reads and writes one persona across all servers. Every
//! rule of that contract lives here, in functions with no I/O:
//!
//! * [`next_allowed_persona_ids`]: one checkbox toggled on one server;
//! * [`toggle_grant`]: the same, telling also whether the server just became
//!   global (so the caller must clear its per-persona overrides);
//! * [`persona_grants_put`]: one persona's grants written across servers;
//! * [`persona_grants_get`]: one persona's grants read across servers.
//!
//! The contract, rule by rule:
//!
//! * checking `*` makes the list exactly `["*"]`; unchecking `*` makes it `[]`;
//! * on a global list (`["*"]`), checking a persona keeps it `["*"]`;
//!   unchecking a persona expands it to every *existing* persona except that
//!   one, sorted (future personas are off until `*` is checked again);
//! * `*` never coexists with persona ids: a list holding both is read as
//!   `["*"]`, and a toggle that makes a list global makes [`toggle_grant`]
//!   return [`GrantChange::Global`], so the caller knows to clear any per-persona
//!   override it stores elsewhere for that server;
//! * otherwise checking a persona adds it and unchecking removes it; the
//!   list stays sorted and deduplicated;
//! * a persona's PUT never touches a global server; its GET shows a global
//!   server as `global: true, authorized: true`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use skillhost_mcp::GLOBAL_ALL;

/// Whether the list holds `*` (a list holding `*` with persona ids is global too).
fn is_global(list: &[String]) -> bool {
    list.iter().any(|p| p == GLOBAL_ALL)
}

/// The canonical form of a list: `["*"]` if it holds `*` at all, else its
/// non-empty persona ids sorted and deduplicated.
fn normalise(list: &[String]) -> Vec<String> {
    if is_global(list) {
        return vec![GLOBAL_ALL.to_string()];
    }
    persona_ids(list)
}

/// The persona ids proper of a list (neither `*` nor empty), sorted and
/// deduplicated.
fn persona_ids(list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = list
        .iter()
        .filter(|p| !p.is_empty() && *p != GLOBAL_ALL)
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The next `allowed_persona_ids` of a server after one checkbox is toggled.
///
/// `current` is the server's list, `persona_id` the checkbox (a persona id,
/// or `"*"` for "every persona"), `checked` its new state, and
/// `existing_personas` every persona that exists now (used only to expand a
/// global list when one persona is unchecked).
///
/// The result is always canonical: either exactly `["*"]`, or persona ids
/// sorted and deduplicated with no `*` and no empty id. The rules:
///
/// | current         | toggle            | result                                              |
/// |-----------------|-------------------|-----------------------------------------------------|
/// | any             | check `*`         | `["*"]`                                             |
/// | any             | uncheck `*`       | `[]`                                                |
/// | `["*"]`         | check `p`         | `["*"]`                                             |
/// | `["*"]`         | uncheck `p`       | every existing persona but `p`, sorted              |
/// | persona ids     | check `p`         | the ids plus `p`                                    |
/// | persona ids     | uncheck `p`       | the ids less `p` (unchanged if `p` was not there)   |
///
/// Edge cases, decided:
///
/// * **Malformed `current`** (`*` together with persona ids, as a hand-edited
///   file could hold): read as `["*"]`, which is what it grants. Duplicates,
///   disorder and empty ids in `current` are dropped from the result.
/// * **Expanding from `*`** keeps only ids of `existing_personas` (itself
///   sorted, deduplicated, and stripped of `*` and empty ids), whatever else
///   the caller knows of.
/// * **Persona ids outside `existing_personas`** on a non-global list are
///   neither added nor dropped specially: checking one adds it, and ids
///   already listed stay (removing a deleted persona is not this function's
///   business).
/// * **Empty `persona_id`**: the function is total; there is no checkbox for
///   an empty id, so the toggle does nothing and the result is `current` in
///   canonical form. Callers that take ids from a request should reject an
///   empty id before calling, with their own message.
///
/// ```
/// use skillhost::next_allowed_persona_ids;
/// let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<String>>();
/// let existing = v(&["ana", "bob", "cy"]);
///
/// // Checking a persona adds it, sorted.
/// assert_eq!(next_allowed_persona_ids(&v(&["cy"]), "ana", true, &existing), v(&["ana", "cy"]));
/// // Checking `*` grants every persona; unchecking it grants none.
/// assert_eq!(next_allowed_persona_ids(&v(&["ana"]), "*", true, &existing), v(&["*"]));
/// assert_eq!(next_allowed_persona_ids(&v(&["*"]), "*", false, &existing), v(&[]));
/// // A global list stays global when a persona is checked...
/// assert_eq!(next_allowed_persona_ids(&v(&["*"]), "bob", true, &existing), v(&["*"]));
/// // ...and expands to every other existing persona when one is unchecked.
/// assert_eq!(next_allowed_persona_ids(&v(&["*"]), "bob", false, &existing), v(&["ana", "cy"]));
/// ```
pub fn next_allowed_persona_ids(
    current: &[String],
    persona_id: &str,
    checked: bool,
    existing_personas: &[String],
) -> Vec<String> {
    if persona_id.is_empty() {
        return normalise(current);
    }
    if persona_id == GLOBAL_ALL {
        return if checked {
            vec![GLOBAL_ALL.to_string()]
        } else {
            Vec::new()
        };
    }
    if is_global(current) {
        if checked {
            return vec![GLOBAL_ALL.to_string()];
        }
        let mut out = persona_ids(existing_personas);
        out.retain(|p| p != persona_id);
        return out;
    }
    let mut out = normalise(current);
    match (
        out.binary_search_by(|p| p.as_str().cmp(persona_id)),
        checked,
    ) {
        (Err(at), true) => out.insert(at, persona_id.to_string()),
        (Ok(at), false) => {
            out.remove(at);
        }
        (Ok(_), true) | (Err(_), false) => {}
    }
    out
}

/// What a toggle did to a server's grant, for callers that keep state beside
/// the list (such as per-persona tool overrides for that server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantChange {
    /// The list became `["*"]` from something else: the caller must clear
    /// every per-persona override it stores for this server, since `*` never
    /// coexists with per-persona entries.
    Global(Vec<String>),
    /// Any other outcome, including a global list that stayed global. The
    /// list is the server's new `allowed_persona_ids`.
    Listed(Vec<String>),
}

impl GrantChange {
    /// The server's new `allowed_persona_ids`, whichever the outcome.
    ///
    /// ```
    /// let c = skillhost::toggle_grant(&[], "*", true, &[]);
    /// assert_eq!(c.allowed_persona_ids(), ["*".to_string()]);
    /// ```
    pub fn allowed_persona_ids(&self) -> &[String] {
        match self {
            GrantChange::Global(v) | GrantChange::Listed(v) => v,
        }
    }

    /// Whether the caller must clear the per-persona overrides it stores for
    /// this server (the toggle made the server global).
    ///
    /// ```
    /// let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    /// assert!(skillhost::toggle_grant(&v(&["ana"]), "*", true, &[]).clears_per_persona_entries());
    /// // Already global: nothing per-persona can be left to clear.
    /// assert!(!skillhost::toggle_grant(&v(&["*"]), "*", true, &[]).clears_per_persona_entries());
    /// ```
    pub fn clears_per_persona_entries(&self) -> bool {
        matches!(self, GrantChange::Global(_))
    }

    /// The new list, by value.
    ///
    /// ```
    /// let c = skillhost::toggle_grant(&[], "ana", true, &[]);
    /// assert_eq!(c.into_allowed_persona_ids(), vec!["ana".to_string()]);
    /// ```
    pub fn into_allowed_persona_ids(self) -> Vec<String> {
        match self {
            GrantChange::Global(v) | GrantChange::Listed(v) => v,
        }
    }
}

/// [`next_allowed_persona_ids`], telling also whether the server has just
/// become global, in which case the caller must clear any per-persona
/// override it stores elsewhere for this server.
///
/// A list that is already global (including a malformed one holding `*` and
/// persona ids) does not count as "just became global": its per-persona
/// overrides were already meaningless and were cleared when it became global.
/// A caller that wants to clean up after a malformed file can check the
/// input itself.
///
/// ```
/// use skillhost::{GrantChange, toggle_grant};
/// let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<String>>();
/// let change = toggle_grant(&v(&["ana", "bob"]), "*", true, &v(&["ana", "bob"]));
/// assert_eq!(change, GrantChange::Global(v(&["*"])));
/// let change = toggle_grant(&v(&["ana"]), "bob", true, &v(&["ana", "bob"]));
/// assert_eq!(change, GrantChange::Listed(v(&["ana", "bob"])));
/// ```
pub fn toggle_grant(
    current: &[String],
    persona_id: &str,
    checked: bool,
    existing_personas: &[String],
) -> GrantChange {
    let next = next_allowed_persona_ids(current, persona_id, checked, existing_personas);
    if is_global(&next) && !is_global(current) {
        GrantChange::Global(next)
    } else {
        GrantChange::Listed(next)
    }
}

/// Applies one persona's grants PUT (server name → authorized) to every server.
///
/// `servers` are `(name, allowed_persona_ids)` pairs; the result has the same
/// servers in the same order. A server is returned exactly as given when:
///
/// * it is global (its list holds `*`): a per-persona PUT can never take a
///   persona out of a global server, nor change it in any other way;
/// * `wanted` does not mention it.
///
/// Every other server gets [`next_allowed_persona_ids`] for `persona_id`.
/// Names in `wanted` that match no server are ignored. If `persona_id` is
/// empty or `"*"` (not a persona), every server is returned as given: a
/// per-persona PUT cannot grant or revoke globally.
///
/// ```
/// use std::collections::BTreeMap;
/// use skillhost::persona_grants_put;
/// let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<String>>();
/// let servers = vec![
///     ("fs".to_string(), v(&["bob"])),
///     ("web".to_string(), v(&["*"])),
///     ("git".to_string(), v(&["ana"])),
/// ];
/// let wanted = BTreeMap::from([
///     ("fs".to_string(), true),
///     ("web".to_string(), false), // global: skipped
///     ("git".to_string(), false),
/// ]);
/// let out = persona_grants_put(&servers, "ana", &wanted, &v(&["ana", "bob"]));
/// assert_eq!(out, vec![
///     ("fs".to_string(), v(&["ana", "bob"])),
///     ("web".to_string(), v(&["*"])),
///     ("git".to_string(), v(&[])),
/// ]);
/// ```
pub fn persona_grants_put(
    servers: &[(String, Vec<String>)],
    persona_id: &str,
    wanted: &BTreeMap<String, bool>,
    existing_personas: &[String],
) -> Vec<(String, Vec<String>)> {
    let is_persona = !persona_id.is_empty() && persona_id != GLOBAL_ALL;
    servers
        .iter()
        .map(|(name, allowed)| {
            let next = match wanted.get(name) {
                Some(&authorized) if is_persona && !is_global(allowed) => {
                    next_allowed_persona_ids(allowed, persona_id, authorized, existing_personas)
                }
                _ => allowed.clone(),
            };
            (name.clone(), next)
        })
        .collect()
}

/// One server as a persona's grants GET shows it.
///
/// Serialised as `{"name": "...", "global": bool, "authorized": bool}`.
///
/// ```
/// let view = skillhost::PersonaGrantView { name: "web".into(), global: true, authorized: true };
/// assert_eq!(
///     serde_json::to_value(&view).unwrap_or_default(),
///     serde_json::json!({"name": "web", "global": true, "authorized": true}),
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonaGrantView {
    /// The server's name.
    pub name: String,
    /// Whether the server is granted to every persona (`*`).
    pub global: bool,
    /// Whether this persona may use the server: always true when `global`.
    pub authorized: bool,
}

/// One persona's grants across servers, in the order of `servers`.
///
/// A global server (its list holds `*`) shows `global: true, authorized:
/// true`; any other shows `global: false` and whether `persona_id` is
/// listed. An empty `persona_id` is authorized only on global servers.
///
/// ```
/// use skillhost::{PersonaGrantView, persona_grants_get};
/// let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<String>>();
/// let servers = vec![("web".to_string(), v(&["*"])), ("fs".to_string(), v(&["bob"]))];
/// assert_eq!(persona_grants_get(&servers, "ana"), vec![
///     PersonaGrantView { name: "web".into(), global: true, authorized: true },
///     PersonaGrantView { name: "fs".into(), global: false, authorized: false },
/// ]);
/// ```
pub fn persona_grants_get(
    servers: &[(String, Vec<String>)],
    persona_id: &str,
) -> Vec<PersonaGrantView> {
    servers
        .iter()
        .map(|(name, allowed)| {
            let global = is_global(allowed);
            PersonaGrantView {
                name: name.clone(),
                global,
                authorized: global
                    || (!persona_id.is_empty() && allowed.iter().any(|p| p == persona_id)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One table row: current list, checkbox, checked, existing personas,
    /// expected list.
    type Row = (
        &'static [&'static str],
        &'static str,
        bool,
        &'static [&'static str],
        &'static [&'static str],
    );
    /// One `toggle_grant` row: current, checkbox, checked, expected
    /// `Global(..)` list, expected `Listed(..)` list.
    type ChangeRow = (
        &'static [&'static str],
        &'static str,
        bool,
        Option<&'static [&'static str]>,
        Option<&'static [&'static str]>,
    );

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    /// Whether `persona` may use a server with this list.
    fn authorized(list: &[String], persona: &str) -> bool {
        is_global(list) || list.iter().any(|p| p == persona)
    }

    /// The result is canonical: `["*"]`, or sorted, deduplicated, non-empty
    /// persona ids without `*`.
    fn assert_canonical(list: &[String]) {
        if is_global(list) {
            assert_eq!(list, ["*"], "`*` coexists with other entries: {list:?}");
        } else {
            assert!(
                list.windows(2).all(|w| w[0] < w[1]),
                "not sorted/deduplicated: {list:?}"
            );
            assert!(list.iter().all(|p| !p.is_empty()), "empty id in {list:?}");
        }
    }

    // ---- The full table -------------------------------------------------

    /// Every current state × every action × both sets of existing personas,
    /// with the expected list written out.
    #[test]
    fn full_table() {
        const ALL3: &[&str] = &["p1", "p2", "p3"];
        const ONLY1: &[&str] = &["p1"];
        #[rustfmt::skip]
        let table: &[Row] = &[
            // current        persona checked existing  expected
            // -- [] --
            (&[],             "*",  true,  ALL3,  &["*"]),
            (&[],             "*",  false, ALL3,  &[]),
            (&[],             "p1", true,  ALL3,  &["p1"]),
            (&[],             "p1", false, ALL3,  &[]),
            (&[],             "p3", true,  ALL3,  &["p3"]),
            (&[],             "p3", false, ALL3,  &[]),
            (&[],             "*",  true,  ONLY1, &["*"]),
            (&[],             "*",  false, ONLY1, &[]),
            (&[],             "p1", true,  ONLY1, &["p1"]),
            (&[],             "p1", false, ONLY1, &[]),
            (&[],             "p3", true,  ONLY1, &["p3"]),
            (&[],             "p3", false, ONLY1, &[]),
            // -- [p1] --
            (&["p1"],         "*",  true,  ALL3,  &["*"]),
            (&["p1"],         "*",  false, ALL3,  &[]),
            (&["p1"],         "p1", true,  ALL3,  &["p1"]),
            (&["p1"],         "p1", false, ALL3,  &[]),
            (&["p1"],         "p3", true,  ALL3,  &["p1", "p3"]),
            (&["p1"],         "p3", false, ALL3,  &["p1"]),
            (&["p1"],         "*",  true,  ONLY1, &["*"]),
            (&["p1"],         "*",  false, ONLY1, &[]),
            (&["p1"],         "p1", true,  ONLY1, &["p1"]),
            (&["p1"],         "p1", false, ONLY1, &[]),
            (&["p1"],         "p3", true,  ONLY1, &["p1", "p3"]),
            (&["p1"],         "p3", false, ONLY1, &["p1"]),
            // -- [p1, p2] --
            (&["p1", "p2"],   "*",  true,  ALL3,  &["*"]),
            (&["p1", "p2"],   "*",  false, ALL3,  &[]),
            (&["p1", "p2"],   "p1", true,  ALL3,  &["p1", "p2"]),
            (&["p1", "p2"],   "p1", false, ALL3,  &["p2"]),
            (&["p1", "p2"],   "p3", true,  ALL3,  &["p1", "p2", "p3"]),
            (&["p1", "p2"],   "p3", false, ALL3,  &["p1", "p2"]),
            (&["p1", "p2"],   "*",  true,  ONLY1, &["*"]),
            (&["p1", "p2"],   "*",  false, ONLY1, &[]),
            (&["p1", "p2"],   "p1", true,  ONLY1, &["p1", "p2"]),
            (&["p1", "p2"],   "p1", false, ONLY1, &["p2"]),
            (&["p1", "p2"],   "p3", true,  ONLY1, &["p1", "p2", "p3"]),
            (&["p1", "p2"],   "p3", false, ONLY1, &["p1", "p2"]),
            // -- [*] --
            (&["*"],          "*",  true,  ALL3,  &["*"]),
            (&["*"],          "*",  false, ALL3,  &[]),
            (&["*"],          "p1", true,  ALL3,  &["*"]),
            (&["*"],          "p1", false, ALL3,  &["p2", "p3"]),
            (&["*"],          "p3", true,  ALL3,  &["*"]),
            (&["*"],          "p3", false, ALL3,  &["p1", "p2"]),
            (&["*"],          "*",  true,  ONLY1, &["*"]),
            (&["*"],          "*",  false, ONLY1, &[]),
            (&["*"],          "p1", true,  ONLY1, &["*"]),
            (&["*"],          "p1", false, ONLY1, &[]),
            (&["*"],          "p3", true,  ONLY1, &["*"]),
            (&["*"],          "p3", false, ONLY1, &["p1"]),
            // -- malformed [*, p1]: read as [*] --
            (&["*", "p1"],    "*",  true,  ALL3,  &["*"]),
            (&["*", "p1"],    "*",  false, ALL3,  &[]),
            (&["*", "p1"],    "p1", true,  ALL3,  &["*"]),
            (&["*", "p1"],    "p1", false, ALL3,  &["p2", "p3"]),
            (&["*", "p1"],    "p3", true,  ALL3,  &["*"]),
            (&["*", "p1"],    "p3", false, ALL3,  &["p1", "p2"]),
            (&["*", "p1"],    "*",  true,  ONLY1, &["*"]),
            (&["*", "p1"],    "*",  false, ONLY1, &[]),
            (&["*", "p1"],    "p1", true,  ONLY1, &["*"]),
            (&["*", "p1"],    "p1", false, ONLY1, &[]),
            (&["*", "p1"],    "p3", true,  ONLY1, &["*"]),
            (&["*", "p1"],    "p3", false, ONLY1, &["p1"]),
        ];
        assert_eq!(table.len(), 5 * 6 * 2);
        for &(current, persona, checked, existing, expected) in table {
            let got = next_allowed_persona_ids(&v(current), persona, checked, &v(existing));
            assert_eq!(
                got,
                v(expected),
                "current {current:?}, {} {persona}, existing {existing:?}",
                if checked { "check" } else { "uncheck" },
            );
        }
    }

    /// Edge cases beyond the table, each with its expected list.
    #[test]
    fn edge_cases() {
        let existing = v(&["p1", "p2", "p3"]);
        #[rustfmt::skip]
        let table: &[Row] = &[
            // Empty persona id: no checkbox, list returned canonical.
            (&["p2", "p1"],        "",   true,  &["p1"], &["p1", "p2"]),
            (&["p2", "p1"],        "",   false, &["p1"], &["p1", "p2"]),
            (&["*", "p1"],         "",   false, &["p1"], &["*"]),
            (&[],                  "",   true,  &["p1"], &[]),
            // Unsorted, duplicated, empty entries in `current` are cleaned.
            (&["p3", "p1", "p3"],  "p2", true,  &["p1"], &["p1", "p2", "p3"]),
            (&["p2", "", "p2"],    "p2", false, &["p1"], &[]),
            // A malformed list with `*` last, or twice, is still global.
            (&["p1", "*"],         "p2", true,  &["p1"], &["*"]),
            (&["*", "*"],          "p2", false, &["p1", "p2"], &["p1"]),
            // Expanding keeps only existing personas, cleaned of `*`, "" and duplicates.
            (&["*"],               "p2", false, &["p3", "*", "", "p1", "p3", "p2"], &["p1", "p3"]),
            (&["*"],               "p1", false, &[], &[]),
            // Stale ids (not existing) on a listed server stay put.
            (&["gone", "p1"],      "p1", false, &["p1"], &["gone"]),
        ];
        for &(current, persona, checked, existing, expected) in table {
            let got = next_allowed_persona_ids(&v(current), persona, checked, &v(existing));
            assert_eq!(
                got,
                v(expected),
                "current {current:?}, {persona:?} {checked}"
            );
        }
        // The checkbox value for `*` is literal: a persona id differing only in
        // spacing is an ordinary persona.
        assert_eq!(
            next_allowed_persona_ids(&[], " *", true, &existing),
            v(&[" *"])
        );
    }

    #[test]
    fn toggle_grant_reports_becoming_global() {
        let existing = v(&["p1", "p2"]);
        #[rustfmt::skip]
        let table: &[ChangeRow] = &[
            // current         persona checked  Global(..)     Listed(..)
            (&[],              "*",  true,  Some(&["*"]), None),
            (&["p1"],          "*",  true,  Some(&["*"]), None),
            (&["*"],           "*",  true,  None,         Some(&["*"])),
            (&["*", "p1"],     "*",  true,  None,         Some(&["*"])),
            (&["*"],           "p1", true,  None,         Some(&["*"])),
            (&["*"],           "p1", false, None,         Some(&["p2"])),
            (&["p1"],          "*",  false, None,         Some(&[])),
            (&["p1"],          "p2", true,  None,         Some(&["p1", "p2"])),
        ];
        for &(current, persona, checked, global, listed) in table {
            let got = toggle_grant(&v(current), persona, checked, &existing);
            let want = match (global, listed) {
                (Some(g), None) => GrantChange::Global(v(g)),
                (None, Some(l)) => GrantChange::Listed(v(l)),
                _ => panic!("bad table row"),
            };
            assert_eq!(got, want, "current {current:?}, {persona} {checked}");
            assert_eq!(got.clears_per_persona_entries(), global.is_some());
        }
    }

    #[test]
    fn put_table() {
        let existing = v(&["p1", "p2", "p3"]);
        let servers = vec![
            ("a".to_string(), v(&["p2"])),
            ("b".to_string(), v(&["*"])),
            ("c".to_string(), v(&["p1", "p2"])),
            ("d".to_string(), v(&["*", "p2"])),
            ("e".to_string(), v(&["p3", "p1"])),
        ];
        let wanted = BTreeMap::from([
            ("a".to_string(), true),
            ("b".to_string(), false),
            ("c".to_string(), false),
            ("d".to_string(), false),
            ("zz".to_string(), true),
        ]);
        assert_eq!(
            persona_grants_put(&servers, "p1", &wanted, &existing),
            vec![
                ("a".to_string(), v(&["p1", "p2"])),
                ("b".to_string(), v(&["*"])),
                ("c".to_string(), v(&["p2"])),
                ("d".to_string(), v(&["*", "p2"])), // global (malformed): as given
                ("e".to_string(), v(&["p3", "p1"])), // not in `wanted`: as given
            ]
        );
        // `*` and "" are not personas: a per-persona PUT with them changes nothing.
        let all = BTreeMap::from([
            ("a".to_string(), true),
            ("c".to_string(), false),
            ("e".to_string(), true),
        ]);
        assert_eq!(persona_grants_put(&servers, "*", &all, &existing), servers);
        assert_eq!(persona_grants_put(&servers, "", &all, &existing), servers);
    }

    #[test]
    fn get_table() {
        let servers = vec![
            ("a".to_string(), v(&["p2"])),
            ("b".to_string(), v(&["*"])),
            ("c".to_string(), v(&["p1", "p2"])),
            ("d".to_string(), v(&["*", "p2"])),
            ("e".to_string(), v(&[])),
        ];
        let view = |name: &str, global, authorized| PersonaGrantView {
            name: name.to_string(),
            global,
            authorized,
        };
        assert_eq!(
            persona_grants_get(&servers, "p1"),
            vec![
                view("a", false, false),
                view("b", true, true),
                view("c", false, true),
                view("d", true, true),
                view("e", false, false),
            ]
        );
        assert_eq!(
            persona_grants_get(&servers, ""),
            vec![
                view("a", false, false),
                view("b", true, true),
                view("c", false, false),
                view("d", true, true),
                view("e", false, false),
            ]
        );
        let json =
            serde_json::to_value(persona_grants_get(&servers[1..2], "p1")).expect("serialisable");
        assert_eq!(
            json,
            serde_json::json!([{"name": "b", "global": true, "authorized": true}])
        );
    }

    // ---- Property tests -------------------------------------------------

    /// Persona ids drawn from a small pool (so collisions are common), with
    /// `*` and the empty id among them.
    fn any_id() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => "p[1-6]".prop_map(String::from),
            1 => Just(GLOBAL_ALL.to_string()),
            1 => Just(String::new()),
        ]
    }

    /// A persona id proper: not `*`, not empty.
    fn persona() -> impl Strategy<Value = String> {
        "p[1-6]".prop_map(String::from)
    }

    /// Any list, malformed ones included.
    fn any_list() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(any_id(), 0..8)
    }

    /// A list as a valid config holds it: `["*"]` or distinct persona ids.
    fn valid_list() -> impl Strategy<Value = Vec<String>> {
        prop_oneof![
            1 => Just(v(&["*"])),
            3 => prop::collection::btree_set(persona(), 0..6)
                .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
        ]
    }

    /// Existing personas as a caller may pass them: unsorted, duplicated,
    /// with the odd `*` or empty id.
    fn existing() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(any_id(), 0..7)
    }

    fn action() -> impl Strategy<Value = (String, bool)> {
        (any_id(), any::<bool>())
    }

    fn servers() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
        prop::collection::vec(("s[a-f]".prop_map(String::from), any_list()), 0..8)
    }

    fn wanted() -> impl Strategy<Value = BTreeMap<String, bool>> {
        prop::collection::btree_map("s[a-h]".prop_map(String::from), any::<bool>(), 0..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The result is always canonical, whatever the input.
        #[test]
        fn prop_output_canonical(
            current in any_list(), (p, checked) in action(), ex in existing(),
        ) {
            assert_canonical(&next_allowed_persona_ids(&current, &p, checked, &ex));
        }

        /// `check *` gives exactly `[*]`; `uncheck *` gives `[]`.
        #[test]
        fn prop_star(current in any_list(), ex in existing()) {
            prop_assert_eq!(next_allowed_persona_ids(&current, "*", true, &ex), v(&["*"]));
            prop_assert_eq!(next_allowed_persona_ids(&current, "*", false, &ex), Vec::<String>::new());
        }

        /// After `check p` the persona is authorized; every other persona keeps
        /// its status.
        #[test]
        fn prop_check_authorizes(
            current in any_list(), p in persona(), ex in existing(), other in persona(),
        ) {
            let next = next_allowed_persona_ids(&current, &p, true, &ex);
            prop_assert!(authorized(&next, &p));
            if other != p {
                prop_assert_eq!(authorized(&next, &other), authorized(&current, &other));
            }
        }

        /// After `uncheck p` the persona is not authorized; every other existing
        /// persona keeps its status; a persona that does not exist keeps it on
        /// a listed server and loses it when a global server expands.
        #[test]
        fn prop_uncheck_revokes(
            current in any_list(), p in persona(), ex in existing(), other in persona(),
        ) {
            let next = next_allowed_persona_ids(&current, &p, false, &ex);
            prop_assert!(!authorized(&next, &p));
            prop_assert!(!is_global(&next));
            if other != p {
                let before = authorized(&current, &other);
                let after = authorized(&next, &other);
                if ex.contains(&other) || !is_global(&current) {
                    prop_assert_eq!(after, before);
                } else {
                    prop_assert!(!after, "future persona {} kept on expansion", other);
                }
            }
        }

        /// Expanding a global list gives exactly the other existing personas.
        #[test]
        fn prop_expand_is_existing_minus_p(p in persona(), ex in existing()) {
            let next = next_allowed_persona_ids(&v(&["*"]), &p, false, &ex);
            let mut want: Vec<String> = ex
                .iter()
                .filter(|q| **q != p && *q != "*" && !q.is_empty())
                .cloned()
                .collect();
            want.sort();
            want.dedup();
            prop_assert_eq!(next, want);
        }

        /// Applying the same toggle twice equals applying it once.
        #[test]
        fn prop_idempotent(current in any_list(), (p, checked) in action(), ex in existing()) {
            let once = next_allowed_persona_ids(&current, &p, checked, &ex);
            let twice = next_allowed_persona_ids(&once, &p, checked, &ex);
            prop_assert_eq!(twice, once);
        }

        /// An empty persona id changes nothing but the form: a canonical list
        /// comes back equal, and the result is a fixed point.
        #[test]
        fn prop_empty_id_noop(current in valid_list(), checked in any::<bool>(), ex in existing()) {
            prop_assert_eq!(next_allowed_persona_ids(&current, "", checked, &ex), current);
        }

        /// On a listed server, toggles of two different personas commute.
        #[test]
        fn prop_listed_toggles_commute(
            current in prop::collection::btree_set(persona(), 0..6),
            (p, cp) in (persona(), any::<bool>()),
            (q, cq) in (persona(), any::<bool>()),
            ex in existing(),
        ) {
            prop_assume!(p != q);
            let current: Vec<String> = current.into_iter().collect();
            let pq = next_allowed_persona_ids(
                &next_allowed_persona_ids(&current, &p, cp, &ex), &q, cq, &ex);
            let qp = next_allowed_persona_ids(
                &next_allowed_persona_ids(&current, &q, cq, &ex), &p, cp, &ex);
            prop_assert_eq!(pq, qp);
        }

        /// Random sequences of toggles: every step keeps the invariants, and the
        /// last toggle of each persona decides its status unless a later `*`
        /// toggle overrides it.
        #[test]
        fn prop_sequences(
            start in any_list(),
            actions in prop::collection::vec(action(), 0..40),
            ex in existing(),
        ) {
            let mut list = start;
            for (p, checked) in &actions {
                let next = next_allowed_persona_ids(&list, p, *checked, &ex);
                assert_canonical(&next);
                match (p.as_str(), *checked) {
                    ("", _) => prop_assert_eq!(&next, &normalise(&list)),
                    ("*", true) => prop_assert_eq!(&next, &v(&["*"])),
                    ("*", false) => prop_assert!(next.is_empty()),
                    (p, true) => prop_assert!(authorized(&next, p)),
                    (p, false) => prop_assert!(!authorized(&next, p)),
                }
                list = next;
            }
        }

        /// `toggle_grant` returns the same list and flags exactly the toggles
        /// that make a non-global server global.
        #[test]
        fn prop_toggle_grant(current in any_list(), (p, checked) in action(), ex in existing()) {
            let change = toggle_grant(&current, &p, checked, &ex);
            let next = next_allowed_persona_ids(&current, &p, checked, &ex);
            prop_assert_eq!(change.allowed_persona_ids(), next.as_slice());
            prop_assert_eq!(
                change.clears_per_persona_entries(),
                !is_global(&current) && p == "*" && checked
            );
        }

        /// `persona_grants_put` keeps names and order, never changes a global
        /// server or an unmentioned one, and leaves the persona authorized
        /// exactly as wanted elsewhere, other personas' status untouched.
        #[test]
        fn prop_put(
            servers in servers(), p in persona(), wanted in wanted(), ex in existing(),
            other in persona(),
        ) {
            let out = persona_grants_put(&servers, &p, &wanted, &ex);
            prop_assert_eq!(out.len(), servers.len());
            for ((name, before), (out_name, after)) in servers.iter().zip(&out) {
                prop_assert_eq!(name, out_name);
                match wanted.get(name) {
                    _ if is_global(before) => prop_assert_eq!(after, before),
                    None => prop_assert_eq!(after, before),
                    Some(&w) => {
                        assert_canonical(after);
                        prop_assert_eq!(authorized(after, &p), w);
                        if other != p {
                            prop_assert_eq!(authorized(after, &other), authorized(before, &other));
                        }
                    }
                }
            }
        }

        /// `persona_grants_get` shows global servers as global and authorized,
        /// others as listed; after a PUT it shows what was wanted, except on
        /// global servers, which stay authorized.
        #[test]
        fn prop_get(servers in servers(), p in persona(), wanted in wanted(), ex in existing()) {
            let views = persona_grants_get(&servers, &p);
            prop_assert_eq!(views.len(), servers.len());
            for ((name, allowed), view) in servers.iter().zip(&views) {
                prop_assert_eq!(&view.name, name);
                prop_assert_eq!(view.global, is_global(allowed));
                prop_assert_eq!(view.authorized, authorized(allowed, &p));
                if view.global {
                    prop_assert!(view.authorized);
                }
            }
            let after = persona_grants_get(&persona_grants_put(&servers, &p, &wanted, &ex), &p);
            for (view, before) in after.iter().zip(&views) {
                match wanted.get(&view.name) {
                    _ if before.global => prop_assert_eq!(view, before),
                    None => prop_assert_eq!(view, before),
                    Some(&w) => {
                        prop_assert!(!view.global);
                        prop_assert_eq!(view.authorized, w);
                    }
                }
            }
        }
    }
}
