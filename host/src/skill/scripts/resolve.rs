//! Pack-time resolution of a skill's Python requirements against a folder
//! of wheels the author fetched (`skillhost pack --wheels DIR`): the
//! highest version of each package that satisfies every requirement on it
//! and has a wheel the sandbox can run, its own requirements followed
//! (markers evaluated for the sandbox's CPython 3.14 on WASI, extras
//! followed). Nothing is fetched: a package missing from the folder is an
//! error naming the command that fetches it.

use super::package_error::PackageError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::requirements::{Lock, Pin, normalize_package_name, valid_package_name};
use super::wheel::{CheckedWheel, WheelName, check_wheel};

/// The command that fetches a package's wheel for the sandbox.
fn fetch_hint(name: &str, dir: &Path) -> String {
    format!(
        "pip download --only-binary=:all: --platform any --python-version 3.14 --implementation \
         py --abi none --no-deps -d {} {name}",
        dir.display()
    )
}

/// One requirement line, read: `name[extras] specifiers ; marker`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The normalized name.
    pub name: String,
    /// Extras asked for.
    pub extras: Vec<String>,
    /// `(op, version)` pairs, all of which must hold.
    pub specifiers: Vec<(String, String)>,
    /// The marker, if any (evaluated for the sandbox).
    pub marker: Option<String>,
}

impl Requirement {
    /// Reads one requirement (PEP 508, without URLs).
    ///
    /// ```
    /// let r = skillhost::Requirement::parse("PyPDF[crypto] >=5, <8 ; python_version >= '3.9'").unwrap();
    /// assert_eq!(r.name, "pypdf");
    /// assert_eq!(r.extras, vec!["crypto".to_string()]);
    /// assert_eq!(r.specifiers.len(), 2);
    /// ```
    pub fn parse(line: &str) -> Result<Requirement, PackageError> {
        let (main, marker) = match line.split_once(';') {
            Some((m, k)) => (m.trim(), Some(k.trim().to_string())),
            None => (line.trim(), None),
        };
        if main.contains("://") || main.contains(" @ ") || main.starts_with('-') {
            return Err(PackageError::requirement(format!(
                "`{line}`: only package names with versions are taken (no URLs, paths or options)"
            )));
        }
        let end = main
            .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
            .unwrap_or(main.len());
        let (name, mut rest) = main.split_at(end);
        if !valid_package_name(name) {
            return Err(PackageError::requirement(format!(
                "`{line}`: `{name}` is not a package name"
            )));
        }
        let mut extras = Vec::new();
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('[') {
            let (inner, after) = r
                .split_once(']')
                .ok_or_else(|| PackageError::requirement(format!("`{line}`: an unclosed `[`")))?;
            extras = inner
                .split(',')
                .map(|e| normalize_package_name(e.trim()))
                .filter(|e| !e.is_empty())
                .collect();
            rest = after;
        }
        let rest = rest.trim().trim_start_matches('(').trim_end_matches(')');
        let mut specifiers = Vec::new();
        for spec in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let op_len = spec
                .find(|c: char| !"<>=!~".contains(c))
                .unwrap_or(spec.len());
            let (op, version) = spec.split_at(op_len);
            if !["==", "!=", "<=", ">=", "<", ">", "~=", "==="].contains(&op)
                || version.trim().is_empty()
            {
                return Err(PackageError::requirement(format!(
                    "`{line}`: `{spec}` is not a version specifier"
                )));
            }
            specifiers.push((op.to_string(), version.trim().to_string()));
        }
        Ok(Requirement {
            name: normalize_package_name(name),
            extras,
            specifiers,
            marker,
        })
    }

    /// Whether `version` satisfies every specifier.
    pub fn allows(&self, version: &str) -> bool {
        self.specifiers
            .iter()
            .all(|(op, v)| satisfies(version, op, v))
    }
}

/// Reads a requirements file: one requirement a line, `#` comments.
pub fn parse_requirements(text: &str) -> Result<Vec<Requirement>, PackageError> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i, l.split(" #").next().unwrap_or_default().trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            Requirement::parse(l)
                .map_err(|e| PackageError::requirement(format!("line {}: {e}", i + 1)))
        })
        .collect()
}

/// A version's release numbers and whether it is a pre-release.
fn release(v: &str) -> (Vec<u64>, bool) {
    let v = v.trim().trim_start_matches('v');
    let v = v.split('+').next().unwrap_or(v);
    let mut nums = Vec::new();
    let mut pre = false;
    for part in v.split('.') {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            pre |= !part.starts_with("post");
            break;
        }
        nums.push(digits.parse().unwrap_or(0));
        if digits.len() != part.len() {
            pre |= !part[digits.len()..].starts_with("post");
            break;
        }
    }
    while nums.len() > 1 && nums.last() == Some(&0) {
        nums.pop();
    }
    (nums, pre)
}

/// Compares two versions by their release numbers.
fn compare(a: &str, b: &str) -> std::cmp::Ordering {
    release(a).0.cmp(&release(b).0)
}

fn satisfies(version: &str, op: &str, spec: &str) -> bool {
    use std::cmp::Ordering::*;
    if let Some(prefix) = spec.strip_suffix(".*") {
        let (have, _) = release(version);
        let (want, _) = release(prefix);
        let matches = have.len() >= want.len() && have[..want.len()] == want[..];
        return if op == "!=" { !matches } else { matches };
    }
    let ord = compare(version, spec);
    match op {
        "==" | "===" => ord == Equal,
        "!=" => ord != Equal,
        "<" => ord == Less,
        "<=" => ord != Greater,
        ">" => ord == Greater,
        ">=" => ord != Less,
        "~=" => {
            // As written (`~=5.1.0` is `>=5.1.0, ==5.1.*`): zeros count.
            let want: Vec<u64> = spec.split('.').map_while(|p| p.parse().ok()).collect();
            let prefix = &want[..want.len().saturating_sub(1).max(1)];
            let mut have = release(version).0;
            have.resize(have.len().max(prefix.len()), 0);
            ord != Less && have.starts_with(prefix)
        }
        _ => false,
    }
}

/// The sandbox's environment for markers.
fn marker_var(name: &str, extra: Option<&str>) -> Option<String> {
    Some(match name {
        "python_version" => "3.14".into(),
        "python_full_version" => "3.14.0".into(),
        "sys_platform" => "wasi".into(),
        "platform_system" => "".into(),
        "os_name" => "posix".into(),
        "implementation_name" => "cpython".into(),
        "platform_python_implementation" => "CPython".into(),
        "platform_machine" => "wasm32".into(),
        "platform_release" | "platform_version" => "".into(),
        "implementation_version" => "3.14.0".into(),
        "extra" => extra.unwrap_or("").into(),
        _ => return None,
    })
}

/// Evaluates a PEP 508 marker for the sandbox, with `extra` the extra
/// being resolved (if any).
pub fn marker_holds(marker: &str, extra: Option<&str>) -> Result<bool, PackageError> {
    let tokens = tokenize(marker)?;
    let mut pos = 0;
    let v = parse_or(&tokens, &mut pos, extra)?;
    if pos != tokens.len() {
        return Err(PackageError::requirement(format!(
            "the marker `{marker}` does not parse"
        )));
    }
    Ok(v)
}

fn tokenize(s: &str) -> Result<Vec<String>, PackageError> {
    let mut out = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            out.push(c.to_string());
            i += 1;
        } else if c == '"' || c == '\'' {
            let end = b[i + 1..].iter().position(|x| *x == c).ok_or_else(|| {
                PackageError::requirement(format!("an unclosed quote in the marker `{s}`"))
            })?;
            out.push(format!(
                "\"{}",
                b[i + 1..i + 1 + end].iter().collect::<String>()
            ));
            i += end + 2;
        } else if "<>=!~".contains(c) {
            let mut op = String::new();
            while i < b.len() && "<>=!~".contains(b[i]) {
                op.push(b[i]);
                i += 1;
            }
            out.push(op);
        } else {
            let mut w = String::new();
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '.') {
                w.push(b[i]);
                i += 1;
            }
            if w.is_empty() {
                return Err(PackageError::requirement(format!(
                    "`{c}` in the marker `{s}`"
                )));
            }
            out.push(w);
        }
    }
    Ok(out)
}

fn parse_or(t: &[String], pos: &mut usize, extra: Option<&str>) -> Result<bool, PackageError> {
    let mut v = parse_and(t, pos, extra)?;
    while t.get(*pos).is_some_and(|w| w == "or") {
        *pos += 1;
        let r = parse_and(t, pos, extra)?;
        v = v || r;
    }
    Ok(v)
}

fn parse_and(t: &[String], pos: &mut usize, extra: Option<&str>) -> Result<bool, PackageError> {
    let mut v = parse_atom(t, pos, extra)?;
    while t.get(*pos).is_some_and(|w| w == "and") {
        *pos += 1;
        let r = parse_atom(t, pos, extra)?;
        v = v && r;
    }
    Ok(v)
}

fn parse_atom(t: &[String], pos: &mut usize, extra: Option<&str>) -> Result<bool, PackageError> {
    if t.get(*pos).is_some_and(|w| w == "(") {
        *pos += 1;
        let v = parse_or(t, pos, extra)?;
        if t.get(*pos).is_none_or(|w| w != ")") {
            return Err(PackageError::requirement("an unclosed `(` in a marker"));
        }
        *pos += 1;
        return Ok(v);
    }
    let value = |w: &String| -> Result<(String, bool), PackageError> {
        match w.strip_prefix('"') {
            Some(lit) => Ok((lit.to_string(), false)),
            None => marker_var(w, extra).map(|v| (v, true)).ok_or_else(|| {
                PackageError::requirement(format!("`{w}` is not a marker variable"))
            }),
        }
    };
    let left = t
        .get(*pos)
        .ok_or_else(|| PackageError::requirement("a marker ends too early"))?;
    let mut op = t
        .get(*pos + 1)
        .ok_or_else(|| PackageError::requirement("a marker ends too early"))?
        .clone();
    let mut skip = 3;
    if op == "not" && t.get(*pos + 2).is_some_and(|w| w == "in") {
        op = "not in".into();
        skip = 4;
    }
    let right = t
        .get(*pos + skip - 1)
        .ok_or_else(|| PackageError::requirement("a marker ends too early"))?;
    let (l, _) = value(left)?;
    let (r, _) = value(right)?;
    *pos += skip;
    let (l, r) = if left == "extra" || right == "extra" {
        (normalize_package_name(&l), normalize_package_name(&r))
    } else {
        (l, r)
    };
    let versions = [
        "python_version",
        "python_full_version",
        "implementation_version",
    ];
    let is_version = versions.contains(&left.as_str()) || versions.contains(&right.as_str());
    Ok(match op.as_str() {
        "in" => r.contains(&l),
        "not in" => !r.contains(&l),
        "==" if !is_version => l == r,
        "!=" if !is_version => l != r,
        op if is_version => satisfies(&l, op, &r),
        _ => l == r,
    })
}

/// One resolved package: its pin and its checked wheel.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The lock line.
    pub pin: Pin,
    /// The wheel's bytes.
    pub bytes: Vec<u8>,
    /// The wheel, checked.
    pub wheel: CheckedWheel,
}

/// Resolves `requirements` against the wheels in `dir`; `drop_native`
/// names the packages whose native parts may be dropped.
pub fn resolve(
    requirements: &[Requirement],
    dir: &Path,
    drop_native: &[String],
) -> Result<Vec<Resolved>, PackageError> {
    let drop: BTreeSet<String> = drop_native
        .iter()
        .map(|n| normalize_package_name(n))
        .collect();
    let mut available: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut sdists: BTreeSet<String> = BTreeSet::new();
    let entries = std::fs::read_dir(dir).map_err(|e| {
        PackageError::unresolved(format!(
            "cannot read the wheels folder {}: {e}",
            dir.display()
        ))
    })?;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        match WheelName::parse(&file) {
            Ok(w) => available
                .entry(w.name.clone())
                .or_default()
                .push((w.version, file)),
            Err(_) if file.ends_with(".tar.gz") || file.ends_with(".zip") => {
                let stem = file.rsplit_once('-').map_or(file.as_str(), |(n, _)| n);
                sdists.insert(normalize_package_name(stem));
            }
            Err(_) => {}
        }
    }
    let mut chosen: BTreeMap<String, Resolved> = BTreeMap::new();
    let mut asked: BTreeMap<String, Vec<Requirement>> = BTreeMap::new();
    let mut queue: Vec<(Requirement, Option<String>)> =
        requirements.iter().cloned().map(|r| (r, None)).collect();
    let mut steps = 0;
    while let Some((req, extra)) = queue.pop() {
        steps += 1;
        if steps > 10_000 {
            return Err(PackageError::unresolved(
                "the requirements do not settle: pin the packages' versions",
            ));
        }
        if let Some(m) = &req.marker
            && !marker_holds(m, extra.as_deref())?
        {
            continue;
        }
        asked.entry(req.name.clone()).or_default().push(req.clone());
        if let Some(done) = chosen.get(&req.name) {
            if !req.allows(&done.pin.version) {
                return Err(PackageError::unresolved(format!(
                    "{} {} was chosen, but another requirement asks for `{}{}`: pin a version \
                     that satisfies both",
                    req.name,
                    done.pin.version,
                    req.name,
                    req.specifiers
                        .iter()
                        .map(|(o, v)| format!("{o}{v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                )));
            }
            for x in &req.extras {
                follow(&done.wheel, Some(x), &mut queue)?;
            }
            continue;
        }
        let all = &asked[&req.name];
        let mut candidates: Vec<&(String, String)> = available
            .get(&req.name)
            .map(|v| {
                v.iter()
                    .filter(|(ver, _)| all.iter().all(|r| r.allows(ver)))
                    .collect()
            })
            .unwrap_or_default();
        candidates.sort_by(|a, b| compare(&b.0, &a.0));
        let dropping = drop.contains(&req.name);
        let Some((version, file)) = candidates.into_iter().find(|(ver, file)| {
            (!release(ver).1 || req.specifiers.iter().any(|(o, _)| o == "=="))
                && (dropping || WheelName::parse(file).is_ok_and(|w| w.pure))
        }) else {
            if sdists.contains(&req.name) && !available.contains_key(&req.name) {
                return Err(PackageError::unresolved(format!(
                    "{}: the wheels folder has only its source distribution; building it would \
                     run its setup code, so only wheels are taken",
                    req.name
                )));
            }
            if available.contains_key(&req.name) {
                return Err(PackageError::unresolved(format!(
                    "{} has no pure-Python wheel{} in {}: the sandbox runs pure Python only (a \
                     package whose native part is optional may be let in with \
                     `scripts.python.drop_native: [{}]`)",
                    req.name,
                    if req.specifiers.is_empty() {
                        String::new()
                    } else {
                        " of a version asked for".into()
                    },
                    dir.display(),
                    req.name
                )));
            }
            return Err(PackageError::unresolved(format!(
                "{} is required but {} has no wheel of it: fetch it with `{}`",
                req.name,
                dir.display(),
                fetch_hint(&req.name, dir)
            )));
        };
        let bytes = std::fs::read(dir.join(file)).map_err(|e| {
            PackageError::unresolved(format!("cannot read {}: {e}", dir.join(file).display()))
        })?;
        let wheel = check_wheel(file, &bytes, dropping)?;
        follow(&wheel, None, &mut queue)?;
        for x in &req.extras {
            follow(&wheel, Some(x), &mut queue)?;
        }
        chosen.insert(
            req.name.clone(),
            Resolved {
                pin: Pin {
                    name: req.name.clone(),
                    version: version.clone(),
                    wheel: file.clone(),
                    sha256: hex::encode(Sha256::digest(&bytes)),
                    drop_native: dropping,
                },
                bytes,
                wheel,
            },
        );
    }
    Ok(chosen.into_values().collect())
}

/// Queues a wheel's requirements (those of `extra`, or its own).
fn follow(
    wheel: &CheckedWheel,
    extra: Option<&str>,
    queue: &mut Vec<(Requirement, Option<String>)>,
) -> Result<(), PackageError> {
    for line in &wheel.requires {
        let r = Requirement::parse(line).map_err(|e| {
            PackageError::unresolved(format!("{} {}: {e}", wheel.name.name, wheel.name.version))
        })?;
        let for_extra = r.marker.as_deref().is_some_and(|m| m.contains("extra"));
        if for_extra != extra.is_some() {
            continue;
        }
        queue.push((r, extra.map(str::to_string)));
    }
    Ok(())
}

/// The lock of a resolution.
pub fn lock_of(resolved: &[Resolved]) -> Lock {
    Lock {
        pins: resolved.iter().map(|r| r.pin.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_for_the_sandbox() {
        for (m, extra, want) in [
            ("python_version < '3.11'", None, false),
            ("python_version >= \"3.9\"", None, true),
            ("sys_platform == 'win32' or os_name == 'posix'", None, true),
            ("platform_python_implementation == 'PyPy'", None, false),
            (
                "(python_version >= '3.8') and extra == 'crypto'",
                Some("crypto"),
                true,
            ),
            ("extra == 'crypto'", None, false),
            ("'wasi' in sys_platform", None, true),
            ("sys_platform not in 'win32 darwin'", None, true),
        ] {
            assert_eq!(marker_holds(m, extra).unwrap(), want, "{m}");
        }
        assert!(marker_holds("nonsense_var == '1'", None).is_err());
    }

    #[test]
    fn specifiers() {
        for (v, op, s, want) in [
            ("5.1.0", ">=", "5", true),
            ("5.1.0", "<", "5.1", false),
            ("5.1.0", "==", "5.1", true),
            ("5.1.3", "~=", "5.1.0", true),
            ("5.2.0", "~=", "5.1.0", false),
            ("5.2.0", "~=", "5.1", true),
            ("3.14.0", "==", "3.14.*", true),
            ("2.0.0", "!=", "2.0", false),
        ] {
            assert_eq!(satisfies(v, op, s), want, "{v} {op} {s}");
        }
        assert!(Requirement::parse("x @ https://evil/x.whl").is_err());
        assert!(Requirement::parse("-e .").is_err());
        assert_eq!(
            parse_requirements("# c\npypdf>=5  # why\n\nPyYAML\n")
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn resolution_follows_requirements_and_refuses_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let write =
            |file: &str, bytes: Vec<u8>| std::fs::write(dir.path().join(file), bytes).unwrap();
        // demo 1.0 requires other>=1 (see the wheel helper).
        write(
            "demo-1.0-py3-none-any.whl",
            super::super::wheel::tests::wheel(&[("demo/__init__.py", b"")], None, true),
        );
        let missing = resolve(&parse_requirements("demo").unwrap(), dir.path(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("other is required") && missing.contains("pip download"),
            "{missing}"
        );
        write(
            "other-1.2-cp314-cp314-manylinux_2_17_x86_64.whl",
            super::super::wheel::tests::wheel(&[("other/__init__.py", b"")], None, false),
        );
        let native = resolve(&parse_requirements("demo").unwrap(), dir.path(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            native.contains("other has no pure-Python wheel"),
            "{native}"
        );
        write("sdistonly-1.0.tar.gz", Vec::new());
        let sdist = resolve(&parse_requirements("sdistonly").unwrap(), dir.path(), &[])
            .unwrap_err()
            .to_string();
        assert!(sdist.contains("setup code"), "{sdist}");
        let ok = resolve(
            &parse_requirements("demo").unwrap(),
            dir.path(),
            &["other".into()],
        )
        .unwrap();
        let names: Vec<(&str, &str)> = ok
            .iter()
            .map(|r| (r.pin.name.as_str(), r.pin.version.as_str()))
            .collect();
        assert_eq!(names, vec![("demo", "1.0"), ("other", "1.2")]);
        assert!(ok[1].pin.drop_native);
        let conflict = resolve(
            &parse_requirements("demo\nother<1").unwrap(),
            dir.path(),
            &["other".into()],
        );
        assert!(conflict.is_err());
    }
}
