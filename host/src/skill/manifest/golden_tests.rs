//! Golden tests of manifest parsing, in the manner of Spin's
//! `crates/manifest/tests/ui`.
//!
//! Every input in `golden/` (beside this file) is parsed: `NAME.yaml` as a
//! `skill.yaml` with [`SkillManifest::parse`], `NAME.md` as a `SKILL.md` with
//! [`SkillManifest::parse_skill_md`]. The outcome is compared with the file
//! next to it: `NAME.json` (the manifest, `serde_json::to_string_pretty`,
//! then a newline) when it parses, `NAME.err` (`err.to_string()`, then a
//! newline) when it does not. Inputs are read as bytes and decoded lossily,
//! so binary junk can be an input too.
//!
//! `BLESS=1 cargo test -p skillhost --lib golden` (re)writes the expected
//! files; read every changed one before committing it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{ManifestError, SkillManifest};

/// The folder of golden cases.
fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/skill/manifest/golden")
}

fn blessing() -> bool {
    std::env::var_os("BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Which parser an input goes to, by its extension.
#[derive(Clone, Copy)]
enum Kind {
    SkillYaml,
    SkillMd,
}

impl Kind {
    fn of(path: &Path) -> Option<Kind> {
        match path.extension()?.to_str()? {
            "yaml" => Some(Kind::SkillYaml),
            "md" => Some(Kind::SkillMd),
            _ => None,
        }
    }

    fn parse(self, text: &str) -> Result<SkillManifest, ManifestError> {
        match self {
            Kind::SkillYaml => SkillManifest::parse(text),
            Kind::SkillMd => SkillManifest::parse_skill_md(text),
        }
    }
}

/// The golden text of an outcome and the extension of the file holding it.
fn render(outcome: &Result<SkillManifest, ManifestError>) -> (&'static str, String) {
    match outcome {
        Ok(m) => (
            "json",
            serde_json::to_string_pretty(m).expect("a manifest serializes") + "\n",
        ),
        Err(e) => ("err", format!("{e}\n")),
    }
}

/// A line diff of `expected` against `actual` (longest common subsequence),
/// `-` for expected lines missing, `+` for actual lines not expected.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        for l in &a {
            let _ = writeln!(out, "-{l}");
        }
        for l in &b {
            let _ = writeln!(out, "+{l}");
        }
        return out;
    }
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            let _ = writeln!(out, " {}", a[i]);
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "+{}", b[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "-{}", a[i]);
            i += 1;
        }
    }
    if expected.ends_with('\n') != actual.ends_with('\n') {
        out.push_str("(the files differ in their final newline)\n");
    }
    out
}

/// Checks (or blesses) one input; returns a description of the mismatch.
fn check_case(input: &Path, kind: Kind, bless: bool) -> Option<String> {
    let bytes = std::fs::read(input).expect("read input");
    let text = String::from_utf8_lossy(&bytes);
    let (ext, actual) = render(&kind.parse(&text));
    let expected_path = input.with_extension(ext);
    let other_path = input.with_extension(if ext == "json" { "err" } else { "json" });
    let shown = |p: &Path| {
        p.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
            .unwrap_or(p)
            .display()
            .to_string()
    };
    if bless {
        if std::fs::read_to_string(&expected_path).ok().as_deref() != Some(actual.as_str()) {
            std::fs::write(&expected_path, &actual).expect("write expected file");
            eprintln!("blessed {}", shown(&expected_path));
        }
        if other_path.exists() {
            std::fs::remove_file(&other_path).expect("remove stale expected file");
            eprintln!("removed {}", shown(&other_path));
        }
        return None;
    }
    let mut problems = String::new();
    if other_path.exists() {
        let _ = writeln!(
            problems,
            "{} exists, but the input {} (expected only {})",
            shown(&other_path),
            if ext == "json" { "parses" } else { "fails" },
            shown(&expected_path),
        );
    }
    match std::fs::read_to_string(&expected_path) {
        Err(_) => {
            let _ = writeln!(
                problems,
                "{} is missing; the actual outcome is:\n{actual}",
                shown(&expected_path)
            );
        }
        Ok(expected) if expected != actual => {
            let _ = writeln!(
                problems,
                "{} differs (- expected, + actual):\n{}",
                shown(&expected_path),
                diff(&expected, &actual)
            );
        }
        Ok(_) => {}
    }
    (!problems.is_empty()).then(|| format!("== {}\n{problems}", shown(input)))
}

#[test]
fn golden_manifests() {
    let dir = cases_dir();
    let bless = blessing();
    let mut inputs: Vec<(PathBuf, Kind)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter_map(|p| Kind::of(&p).map(|k| (p, k)))
        .collect();
    inputs.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        inputs.len() >= 30,
        "only {} golden inputs in {}",
        inputs.len(),
        dir.display()
    );

    let mut failures: Vec<String> = inputs
        .iter()
        .filter_map(|(p, k)| check_case(p, *k, bless))
        .collect();

    // Expected files whose input is gone are stale.
    let mut expected: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read cases")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "err")))
        .collect();
    expected.sort();
    for p in expected {
        let has_input = ["yaml", "md"]
            .iter()
            .any(|ext| p.with_extension(ext).exists());
        if !has_input {
            if bless {
                std::fs::remove_file(&p).expect("remove orphan expected file");
                eprintln!("removed orphan {}", p.display());
            } else {
                failures.push(format!(
                    "== {}\nno input `.yaml` or `.md` next to it\n",
                    p.display()
                ));
            }
        }
    }

    assert!(
        failures.is_empty(),
        "{} of {} golden manifest cases do not match; if the new output is right, \
         rerun with BLESS=1 and read every changed file:\n\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
}

/// A manifest over the 1 MiB limit, generated rather than committed.
#[test]
fn huge_manifests_are_refused() {
    let limit = 1usize << 20;
    let head = "name: huge\nversion: 1.0.0\ndescription: d\ninstructions: |\n";
    let line = "  All work and no play makes a manifest a dull manifest.\n";
    let mut yaml = String::from(head);
    while yaml.len() <= limit {
        yaml.push_str(line);
    }
    let err = SkillManifest::parse(&yaml).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "skill.yaml: {} bytes is larger than the {limit}-byte limit",
            yaml.len()
        )
    );

    // One byte under the limit still parses: the limit is on size, not on
    // what the text says.
    let mut yaml = String::from(head);
    while yaml.len() + line.len() < limit {
        yaml.push_str(line);
    }
    let pad = limit - 1 - yaml.len() - "  \n".len();
    yaml.push_str(&format!("  {}\n", "x".repeat(pad)));
    assert_eq!(yaml.len(), limit - 1);
    let m = SkillManifest::parse(&yaml).expect("just under the limit");
    assert!(m.instructions.len() > limit / 10 * 9);

    let mut md = String::from("---\nname: huge\ndescription: d\n---\n");
    while md.len() <= limit {
        md.push_str("All work and no play makes a SKILL.md a dull SKILL.md.\n");
    }
    let err = SkillManifest::parse_skill_md(&md).unwrap_err().to_string();
    assert_eq!(err, format!("SKILL.md: larger than the {limit}-byte limit"));
}

/// Aliases that expand a small manifest into a huge value are refused
/// before the value is built: serde_yaml's own limit counts alias uses, not
/// what they expand to.
#[test]
fn alias_expansion_is_bounded() {
    let head = "name: q\nversion: 1.0.0\ndescription: d\nmetadata:\n  a: &a ";
    // Quadratic: an anchored list of 200,000 items used 150,000 times, 850
    // KB of text for 3 * 10^10 values.
    let mut yaml = format!("{head}[{}]\n  b: [", "x,".repeat(200_000));
    yaml.push_str(&"*a,".repeat(150_000));
    yaml.push_str("]\n");
    assert!(yaml.len() < 1 << 20);
    let err = SkillManifest::parse(&yaml).unwrap_err().to_string();
    assert!(
        err.contains("expands to more than 262144 YAML values"),
        "{err}"
    );
    // Few values, much text: a 500 KB string used a thousand times.
    let mut yaml = format!("{head}{}\n  b: [", "x".repeat(500_000));
    yaml.push_str(&"*a,".repeat(1000));
    yaml.push_str("]\n");
    let err = SkillManifest::parse(&yaml).unwrap_err().to_string();
    assert!(
        err.contains("expands to more than 2097152 bytes of text"),
        "{err}"
    );
    // The same in a SKILL.md front matter.
    let md = format!("---\n{}---\nBody.\n", &yaml[yaml.find("name").unwrap()..]);
    let err = SkillManifest::parse_skill_md(&md).unwrap_err().to_string();
    assert!(err.contains("bytes of text"), "{err}");
}
