//! The client side of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, installed by
//! `tests/peers/install.sh`) against skillhost's MCP client.
//!
//! For each suite (protocol revision 2025-11-25 and 2026-07-28) the client
//! scenarios are listed with `conformance list --client --spec-version V`;
//! every one that is not in `tests/conformance/client-baseline.json` (the
//! scenarios that do not apply to a tools client, each with its reason) is
//! run as
//!
//! ```text
//! conformance client --command <conformance_client> --scenario S --spec-version V
//! ```
//!
//! where `conformance_client` (`tests/src/bin/conformance_client.rs`) is a
//! tools client built on `skillhost-mcp`'s public API. A run passes when
//! the CLI exits 0 and reports `OVERALL: PASSED` with every counted check
//! passed.
//!
//! `initialize` is not part of the 2026-07-28 suite (the suite marks it
//! removed in that revision: there is no `initialize` handshake any more).
//! It is run there anyway with `--force`: its mock server is legacy-only,
//! so at the 2026-07-28 wire it checks that the client, probing with the
//! modern handshake first, still falls back to `initialize`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use skillhost_e2e::peers;

/// The suites: protocol revisions, as `--spec-version` takes them.
const SUITES: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// Scenarios run in a suite they are not listed in (with `--force`).
const FORCED: [(&str, &str); 1] = [("2026-07-28", "initialize")];

/// Scenarios that must be run (and pass) in every suite.
const REQUIRED: [&str; 2] = ["initialize", "tools_call"];

/// The CLI's own bound on the client process, per scenario.
const CLIENT_TIMEOUT_MS: u64 = 30_000;

/// Our bound on one CLI run (mock server, client, checks).
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// One baseline entry.
#[derive(Debug)]
struct Skip {
    suite: String,
    scenario: String,
    reason: String,
}

fn baseline_path() -> PathBuf {
    peers::repo_root()
        .join("tests")
        .join("conformance")
        .join("client-baseline.json")
}

fn load_baseline() -> Vec<Skip> {
    let path = baseline_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let entries: Vec<Value> = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a JSON array: {e}", path.display()));
    entries
        .iter()
        .map(|e| {
            let field = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or_else(|| panic!("baseline entry without a {k:?}: {e}"))
                    .to_string()
            };
            Skip {
                suite: field("suite"),
                scenario: field("scenario"),
                reason: field("reason"),
            }
        })
        .collect()
}

/// What one CLI run printed and how it ended.
struct Run {
    status: Option<i32>,
    timed_out: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Run {
    fn output(&self) -> String {
        format!(
            "exit status {:?}{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            if self.timed_out {
                format!(" (killed after {RUN_TIMEOUT:?})")
            } else {
                String::new()
            },
            self.stdout,
            self.stderr
        )
    }
}

/// Runs the conformance CLI with `args` in its own process group, bounded
/// by [`RUN_TIMEOUT`]; the group is killed when the run ends either way.
fn conformance(args: &[&str]) -> Run {
    let (program, base) = peers::conformance_cmd();
    let mut cmd = Command::new(&program);
    cmd.args(&base)
        .args(args)
        .current_dir(std::env::temp_dir())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = peers::spawn_in_own_group(&mut cmd)
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let out = child.stdout.take().expect("piped stdout");
    let err = child.stderr.take().expect("piped stderr");
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = read_all(Box::new(out));
    let err = read_all(Box::new(err));
    let mut guard = peers::GroupGuard::new(child);
    let mut timed_out = false;
    let status = loop {
        let child = guard.child().expect("the guard holds the child");
        if let Some(status) = child.try_wait().expect("wait for the conformance CLI") {
            break status.code();
        }
        if started.elapsed() > RUN_TIMEOUT {
            timed_out = true;
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Kills whatever the run left in its group (the client, if the CLI
    // itself was killed) and reaps the CLI, so the pipes close.
    let left = guard.kill();
    assert!(
        left.is_empty(),
        "processes left in the conformance run's group: {left:?}"
    );
    Run {
        status,
        timed_out,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed: started.elapsed(),
    }
}

/// The client scenarios of `suite`, from `conformance list`.
fn list_scenarios(suite: &str) -> BTreeSet<String> {
    let run = conformance(&["list", "--client", "--spec-version", suite]);
    assert_eq!(
        run.status,
        Some(0),
        "conformance list failed\n{}",
        run.output()
    );
    let names: BTreeSet<String> = run
        .stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .map(|l| l.split(" [").next().unwrap_or(l).trim().to_string())
        .collect();
    assert!(
        names.contains("tools_call"),
        "no client scenarios parsed from\n{}",
        run.output()
    );
    names
}

/// Why a run did not pass, or `None` when it passed: exit code 0, the
/// scenario actually ran (not skipped), `OVERALL: PASSED`, and
/// `Passed: N/N, 0 failed, 0 warnings` with N > 0.
fn judge(run: &Run) -> Option<String> {
    if run.timed_out {
        return Some("the run did not finish in time".into());
    }
    if run.status != Some(0) {
        return Some(format!("the CLI exited with {:?}", run.status));
    }
    let all = format!("{}\n{}", run.stdout, run.stderr);
    if all.contains("SKIPPED: scenario") {
        return Some("the CLI skipped the scenario".into());
    }
    if !all.contains("OVERALL: PASSED") {
        return Some("no `OVERALL: PASSED` in the output".into());
    }
    let Some(line) = all.lines().find(|l| l.starts_with("Passed: ")) else {
        return Some("no `Passed:` line in the output".into());
    };
    // "Passed: 2/2, 0 failed, 0 warnings"
    let counts: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match counts.as_slice() {
        [passed, total, 0, 0] if passed == total && *total > 0 => None,
        _ => Some(format!("unexpected result line {line:?}")),
    }
}

fn client_command() -> String {
    let client = Path::new(env!("CARGO_BIN_EXE_conformance_client"));
    let client = client.to_str().expect("UTF-8 path").to_string();
    // The CLI splits the command on spaces.
    assert!(
        !client.contains(char::is_whitespace),
        "the conformance client's path has whitespace: {client:?}"
    );
    client
}

/// How many scenarios run at once.
const WORKERS: usize = 3;

/// One scenario's line of the summary, and its failure if it failed.
struct Outcome {
    summary: String,
    failure: Option<String>,
}

/// Runs one scenario of the plan against `client` (once more if it fails),
/// and gives its summary line and its failure, if it failed.
fn run_scenario(client: &str, suite: &str, scenario: &str, forced: bool) -> Outcome {
    let timeout = CLIENT_TIMEOUT_MS.to_string();
    let mut args = vec![
        "client",
        "--command",
        client,
        "--scenario",
        scenario,
        "--spec-version",
        suite,
        "--timeout",
        &timeout,
    ];
    if forced {
        args.push("--force");
    }
    let mut run = conformance(&args);
    let mut verdict = judge(&run);
    // The suite's mock servers and timing checks are sensitive to a loaded
    // 2-core machine: a failing scenario gets one more run, and fails the
    // test only if it fails again (both outputs are kept).
    if let Some(first) = verdict.clone() {
        let first_output = run.output();
        run = conformance(&args);
        verdict = judge(&run).map(|again| {
            format!("{again} (and on the first run: {first})\n--- first run:\n{first_output}")
        });
        if verdict.is_none() {
            println!(
                "{suite} {scenario}: passed on the second run; first run: {first}\n{first_output}"
            );
        }
    }
    let summary = format!(
        "{suite} {scenario}{}: {} ({:.1} s)",
        if forced { " (forced)" } else { "" },
        verdict.as_deref().unwrap_or("passed"),
        run.elapsed.as_secs_f64()
    );
    let failure = verdict.map(|why| {
        format!(
            "=== {suite} {scenario}: {why}\n$ conformance {}\n{}",
            args.join(" "),
            run.output()
        )
    });
    Outcome { summary, failure }
}

#[test]
fn client_scenarios_pass_or_are_baselined() {
    let client = client_command();
    let baseline = load_baseline();

    let suites: BTreeMap<&str, BTreeSet<String>> =
        SUITES.iter().map(|s| (*s, list_scenarios(s))).collect();

    // The baseline cannot rot: every entry names a suite and a scenario of
    // that suite, once, with a reason; and it never covers a scenario that
    // must run.
    let mut seen = BTreeSet::new();
    for skip in &baseline {
        let Some(names) = suites.get(skip.suite.as_str()) else {
            panic!("baseline entry for an unknown suite: {skip:?}");
        };
        assert!(
            names.contains(&skip.scenario),
            "baseline entry for a scenario the {} suite does not have: {skip:?}; suite: {names:?}",
            skip.suite
        );
        assert!(
            seen.insert((skip.suite.clone(), skip.scenario.clone())),
            "duplicate baseline entry: {skip:?}"
        );
        assert!(
            !REQUIRED.contains(&skip.scenario.as_str()),
            "{} must run, it cannot be baselined: {skip:?}",
            skip.scenario
        );
        assert!(skip.reason.len() >= 20, "give a real reason: {skip:?}");
    }

    // What to run: (suite, scenario, forced).
    let mut plan: Vec<(&str, String, bool)> = Vec::new();
    for (suite, names) in &suites {
        for name in names {
            if !seen.contains(&(suite.to_string(), name.clone())) {
                plan.push((suite, name.clone(), false));
            }
        }
        for (s, name) in FORCED {
            if s == *suite {
                assert!(
                    !names.contains(name),
                    "{name} is now part of the {suite} suite: drop it from FORCED"
                );
                plan.push((suite, name.to_string(), true));
            }
        }
        for name in REQUIRED {
            assert!(
                plan.iter().any(|(s, n, _)| s == suite && n == name),
                "{name} is not run in the {suite} suite"
            );
        }
    }

    let started = Instant::now();
    // Each scenario is its own CLI process with its own mock server on a
    // port of its own, so they run on [`WORKERS`] threads, each taking every
    // WORKERS-th of the plan; outcomes are reported in the plan's order.
    let mut outcomes: Vec<(usize, Outcome)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|first| {
                let (client, plan) = (&client, &plan);
                scope.spawn(move || {
                    let mine = plan.iter().enumerate().skip(first).step_by(WORKERS);
                    mine.map(|(index, (suite, scenario, forced))| {
                        (index, run_scenario(client, suite, scenario, *forced))
                    })
                    .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a scenario's worker panicked"))
            .collect()
    });
    outcomes.sort_by_key(|(index, _)| *index);
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    for (_, outcome) in outcomes {
        summary.push(outcome.summary);
        failures.extend(outcome.failure);
    }
    for skip in &baseline {
        summary.push(format!(
            "{} {}: baseline ({})",
            skip.suite,
            skip.scenario,
            skip.reason.split(':').next().unwrap_or("")
        ));
    }
    println!(
        "conformance client scenarios ({} run in {:.1} s):\n  {}",
        plan.len(),
        started.elapsed().as_secs_f64(),
        summary.join("\n  ")
    );
    assert!(
        failures.is_empty(),
        "{} of {} conformance runs failed:\n\n{}",
        failures.len(),
        plan.len(),
        failures.join("\n\n")
    );
}
