//! Where in a manifest's file an error is. The YAML reader's errors are
//! rewritten to name the field first and the line and column last
//! (`` `tools[0].read_only`: invalid type: string "yes", expected a
//! boolean (line 9, column 16) ``); a validation problem, which names its
//! field (`` `tools[0].name`: … ``), gets the line and column of that
//! field's value, found by walking the text again to it. Lines count from
//! the top of the file: a `SKILL.md` front matter starts on its second.

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::ManifestError;

/// Which file a manifest was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ManifestFile {
    /// `skill.yaml`: the YAML is the whole file.
    SkillYaml,
    /// `SKILL.md`: the YAML is its front matter, after the first `---`.
    SkillMd,
}

impl ManifestFile {
    /// The file's name.
    pub(super) fn name(self) -> &'static str {
        match self {
            ManifestFile::SkillYaml => super::MANIFEST_FILE,
            ManifestFile::SkillMd => super::AGENT_SKILL_FILE,
        }
    }

    /// How many lines of the file come before the YAML.
    fn lines_before(self) -> usize {
        match self {
            ManifestFile::SkillYaml => 0,
            ManifestFile::SkillMd => 1,
        }
    }

    /// The YAML reader's error as this file's: `FILE: `PATH`: WHAT (line
    /// L, column C)`, with whichever of the field and the place it knows.
    pub(super) fn syntax(self, e: &serde_yaml::Error) -> String {
        let text = e.to_string();
        let (bare, place) = match e.location() {
            Some(at) => (
                text.replacen(
                    &format!(" at line {} column {}", at.line(), at.column()),
                    "",
                    1,
                ),
                Some((at.line() + self.lines_before(), at.column())),
            ),
            None => (text, None),
        };
        // serde_yaml writes the field's path first (`tools[0].read_only: …`),
        // except for the document itself.
        let (path, what) = match bare.split_once(": ") {
            Some((path, what)) if is_path(path) => (Some(path), what),
            _ => (None, bare.as_str()),
        };
        let mut out = format!("{}: ", self.name());
        if let Some(path) = path {
            out.push_str(&format!("`{path}`: "));
        }
        out.push_str(what);
        if let Some((line, column)) = place {
            out.push_str(&format!(" (line {line}, column {column})"));
        }
        out
    }

    /// An error reading the parsed YAML as a manifest, which knows the path
    /// of its field but not where it is: `FILE: `PATH`: WHAT (line L,
    /// column C)`, the place that of the field's value in `yaml`.
    pub(super) fn typed(
        self,
        yaml: &str,
        e: &serde_path_to_error::Error<serde_yaml::Error>,
    ) -> String {
        use serde_path_to_error::Segment;
        let steps: Option<Vec<Step<'_>>> = e
            .path()
            .iter()
            .map(|s| match s {
                Segment::Seq { index } => Some(Step::Index(*index)),
                Segment::Map { key } => Some(Step::Key(key)),
                Segment::Enum { .. } | Segment::Unknown => None,
            })
            .collect();
        let mut out = format!("{}: ", self.name());
        if e.path().iter().next().is_some() {
            out.push_str(&format!("`{}`: ", e.path()));
        }
        out.push_str(&e.inner().to_string());
        if let Some((line, column)) = steps.and_then(|s| position_of(yaml, &s)) {
            out.push_str(&format!(
                " (line {}, column {column})",
                line + self.lines_before()
            ));
        }
        out
    }
}

/// Whether `s` reads as a field's path (`tools[0].read_only`).
fn is_path(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.[]".contains(c))
}

impl ManifestError {
    /// Each problem of an `Invalid` error with the line and column of the
    /// field it names in `yaml` (the text of `file` the manifest was read
    /// from); a problem naming no field found there is left as it is.
    pub(super) fn located(self, yaml: &str, file: ManifestFile) -> ManifestError {
        let ManifestError::Invalid {
            file: name,
            skill,
            problems,
        } = self
        else {
            return self;
        };
        let problems = problems
            .into_iter()
            .map(|p| {
                let field = p
                    .strip_prefix('`')
                    .and_then(|rest| rest.split_once('`'))
                    .map(|(field, _)| field)
                    .filter(|f| is_path(f));
                // A SKILL.md's tools are its `allowed-tools`.
                let field = field.map(|f| match (file, f) {
                    (ManifestFile::SkillMd, "tool_names") => "allowed-tools",
                    _ => f,
                });
                match field.and_then(|f| position(yaml, f)) {
                    Some((line, column)) => {
                        format!("{p} (line {}, column {column})", line + file.lines_before())
                    }
                    None => p,
                }
            })
            .collect();
        ManifestError::Invalid {
            file: name,
            skill,
            problems,
        }
    }
}

/// Where the field at `path` is in `yaml` (the text of `file`), as
/// ` (line L, column C)`; empty when it is not found.
pub(super) fn place(yaml: &str, file: ManifestFile, path: &str) -> String {
    match position(yaml, path) {
        Some((line, column)) => format!(" (line {}, column {column})", line + file.lines_before()),
        None => String::new(),
    }
}

/// One step of a field's path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The steps of `tools[0].input_schema`; `None` when it is not a path.
fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while !rest.is_empty() {
            let (index, after) = rest.split_once(']')?;
            out.push(Step::Index(index.parse().ok()?));
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The line and column of the value at `path` in `yaml`, if it is there.
fn position(yaml: &str, path: &str) -> Option<(usize, usize)> {
    position_of(yaml, &steps(path)?)
}

/// The line and column of the value at `steps` in `yaml`, if it is there
/// (the document itself for no steps).
fn position_of(yaml: &str, steps: &[Step<'_>]) -> Option<(usize, usize)> {
    match Find(steps).deserialize(serde_yaml::Deserializer::from_str(yaml)) {
        Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| (l.line(), l.column())),
        _ => None,
    }
}

/// What [`Find`] stops with at the value it looks for, so that the
/// reader's error carries that value's place.
const FOUND: &str = "\u{0}found the field";

/// Walks a YAML document down `0` and stops with [`FOUND`] at the value
/// there; passes over everything else.
struct Find<'s, 'a>(&'s [Step<'a>]);

impl<'de> DeserializeSeed<'de> for Find<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.0.is_empty() {
            // Stopped from inside the reader's read of the value, so the
            // error carries that value's place.
            d.deserialize_any(Here)
        } else {
            d.deserialize_any(self)
        }
    }
}

/// Stops with [`FOUND`] at whatever value it is handed.
struct Here;

impl Here {
    fn found<T, E: serde::de::Error>(self) -> Result<T, E> {
        Err(E::custom(FOUND))
    }
}

impl<'de> Visitor<'de> for Here {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.found()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.found()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.found()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.found()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.found()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.found()
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.found()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.found()
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.found()
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.found()
    }
}

impl<'de> Visitor<'de> for Find<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Step::Index(want), rest)) = self.0.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut i = 0;
        loop {
            if i == *want {
                seq.next_element_seed(Find(rest))?;
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Step::Key(want), rest)) = self.0.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        while let Some(key) = map.next_key::<serde_yaml::Value>()? {
            if key.as_str() == Some(want) {
                map.next_value_seed(Find(rest))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_steps() {
        assert_eq!(
            steps("permissions.secrets[2].origins[0]").unwrap(),
            [
                Step::Key("permissions"),
                Step::Key("secrets"),
                Step::Index(2),
                Step::Key("origins"),
                Step::Index(0)
            ]
        );
        assert_eq!(steps("a[x]"), None);
    }

    #[test]
    fn a_field_is_found_where_it_is() {
        let yaml = "name: x\ntools:\n  - name: a\n  - name: b\n    read_only: true\n";
        assert_eq!(position(yaml, "tools[1].read_only"), Some((5, 16)));
        assert_eq!(position(yaml, "tools[1].name"), Some((4, 11)));
        assert_eq!(position(yaml, "name"), Some((1, 7)));
        assert_eq!(position(yaml, "tools[2]"), None);
        assert_eq!(position(yaml, "nothing.here"), None);
    }
}
