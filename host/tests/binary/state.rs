//! Durable state end to end: the `skillhost` binary against one data dir
//! from several processes at once, under kill -9, and across restarts
//! (personas, grants, skill enablement, runs, approvals, refs).

use crate::common;
use common::{skillhost, stderr, stdout};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use skillhost_test_plugins as art;

/// Arguments of `text.regex_replace` used throughout, and its result.
const REGEX_ARGS: &str = r##"{"text":"a1 b22","pattern":"[0-9]+","replacement":"#"}"##;

fn regex_result() -> Value {
    json!({"text": "a# b#", "replacements": 2})
}

/// Fails if SQLite (or file-lock) contention reached the operator: a
/// command must wait for another process, never fail because of it.
fn assert_no_contention(args: &[&str], o: &Output) {
    let err = stderr(o).to_lowercase();
    for w in ["database is locked", "busy", "locked", "lock the"] {
        assert!(
            !err.contains(w),
            "`skillhost {}` hit contention ({w:?}): {err}",
            args.join(" ")
        );
    }
}

/// Runs a command that must succeed; returns its stdout.
fn ok(data: &Path, args: &[&str]) -> String {
    let o = skillhost(data, args);
    assert_no_contention(args, &o);
    assert!(
        o.status.success(),
        "`skillhost {}` exited {:?}: {}",
        args.join(" "),
        o.status.code(),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs a command that must succeed and print JSON.
fn ok_json(data: &Path, args: &[&str]) -> Value {
    let out = ok(data, args);
    serde_json::from_str(&out).unwrap_or_else(|e| {
        panic!(
            "`skillhost {}` printed no JSON ({e}): {out}",
            args.join(" ")
        )
    })
}

/// Runs a command that must exit `code` with one of `words` on stderr;
/// returns stderr.
fn fails(data: &Path, args: &[&str], code: i32, words: &[&str]) -> String {
    let o = skillhost(data, args);
    assert_no_contention(args, &o);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "`skillhost {}`: stdout {} stderr {err}",
        args.join(" "),
        stdout(&o)
    );
    assert!(
        words.iter().any(|w| err.contains(w)),
        "`skillhost {}`: none of {words:?} in: {err}",
        args.join(" ")
    );
    err
}

/// A child process that is SIGKILLed (if still running) and reaped when
/// dropped, so no test leaves a process behind, even when it panics.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(data: &Path, args: &[&str]) -> Reaped {
    Reaped(
        common::command(data, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn skillhost"),
    )
}

/// Starts `skillhost ARGS`, SIGKILLs it after `delay` and reaps it.
/// Returns whether it was still running when killed.
fn kill_after(data: &Path, args: &[&str], delay: Duration) -> bool {
    let mut child = spawn(data, args);
    std::thread::sleep(delay);
    let running = child.0.try_wait().expect("try_wait").is_none();
    let _ = child.0.kill(); // SIGKILL
    let status = child.0.wait().expect("reap the killed child");
    running && status.code().is_none()
}

/// A small deterministic pseudo-random sequence (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Joins a scoped thread, re-raising its panic with its own message.
fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Adds a stdio MCP server whose command does not exist: it is never
/// started by anything these tests do (it stays disabled).
fn add_server(data: &Path, name: &str) {
    ok(
        data,
        &[
            "mcp",
            "add",
            name,
            "--",
            "/nonexistent/skillhost-state-test-server",
        ],
    );
}

/// A data dir in `work` whose `text-tools` is a trusted local folder
/// (shadowing the built-in) in which `text.regex_replace` is not
/// read_only, so it requires confirmation.
fn confirm_data_dir(work: &Path) -> PathBuf {
    let skill = work.join("text-tools");
    std::fs::create_dir(&skill).unwrap();
    let manifest =
        std::fs::read_to_string(Path::new(art::TEXT_TOOLS_DIR).join("skill.yaml")).unwrap();
    let at = manifest
        .find("- name: text.regex_replace")
        .expect("regex_replace in the manifest");
    let ro = at
        + manifest[at..]
            .find("read_only: true")
            .expect("regex_replace is read_only");
    let manifest = format!(
        "{}read_only: false{}",
        &manifest[..ro],
        &manifest[ro + "read_only: true".len()..]
    );
    std::fs::write(skill.join("skill.yaml"), &manifest).unwrap();
    let component = skillhost::SkillManifest::parse(&manifest)
        .expect("valid manifest")
        .component
        .expect("component path");
    std::fs::copy(art::TEXT_TOOLS_WASM_PATH, skill.join(component)).unwrap();
    let data = work.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(
        data.join("settings.json"),
        json!({ "skill_dirs": [skill] }).to_string(),
    )
    .unwrap();
    ok(&data, &["skills", "trust", "text-tools"]);
    let specs = ok_json(&data, &["tools", "list", "--json"]);
    let spec = specs
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "text.regex_replace")
        .expect("regex_replace registered");
    assert_eq!(spec["requires_confirmation"], true, "{spec}");
    data
}

/// The run id (`run_` + 17 letters and digits) in a message.
fn run_id_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| {
            w.strip_prefix("run_")
                .is_some_and(|h| h.len() == 17 && h.bytes().all(|b| b.is_ascii_alphanumeric()))
        })
        .map(str::to_string)
}

/// Calls `text.regex_replace` (as `persona`, or the operator), which must
/// stop in waiting_approval: exit 3, the run id on stderr. Returns the id.
fn call_waiting(data: &Path, persona: Option<&str>) -> String {
    let mut args = vec!["call", "text.regex_replace", "--args", REGEX_ARGS];
    if let Some(p) = persona {
        args.extend(["--persona", p]);
    }
    let o = skillhost(data, &args);
    assert_no_contention(&args, &o);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "stdout: {}", stdout(&o));
    assert!(err.contains("waiting_approval"), "{err}");
    run_id_in(&err).unwrap_or_else(|| panic!("no run id in: {err}"))
}

/// The database, opened directly.
fn db(data: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(data.join("skillhost.db")).expect("open skillhost.db")
}

/// `PRAGMA integrity_check` is `ok` and no foreign key dangles.
fn assert_db_intact(data: &Path) {
    let conn = db(data);
    let check: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(check, ["ok"], "integrity_check");
    let dangling = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .count();
    assert_eq!(dangling, 0, "rows with dangling foreign keys");
}

/// Every MCP server's `allowed_persona_ids`, from `mcp list --json`.
fn mcp_lists(data: &Path) -> BTreeMap<String, Vec<String>> {
    ok_json(data, &["mcp", "list", "--json"])
        .as_array()
        .expect("mcp list is an array")
        .iter()
        .map(|s| {
            let list = s["allowed_persona_ids"]
                .as_array()
                .expect("allowed_persona_ids")
                .iter()
                .map(|p| p.as_str().unwrap().to_string())
                .collect();
            (s["name"].as_str().unwrap().to_string(), list)
        })
        .collect()
}

fn persona_ids(data: &Path) -> BTreeSet<String> {
    ok_json(data, &["personas", "list", "--json"])
        .as_array()
        .expect("personas list is an array")
        .iter()
        .map(|p| p["id"].as_str().expect("id").to_string())
        .collect()
}

/// `grants show P --json` as (MCP server → (global, authorized), skill →
/// granted).
type Grants = (BTreeMap<String, (bool, bool)>, BTreeMap<String, bool>);

fn grants(data: &Path, persona: &str) -> Grants {
    let g = ok_json(data, &["grants", "show", persona, "--json"]);
    assert_eq!(g["persona"], persona, "{g}");
    let mcp = g["mcp"]
        .as_array()
        .expect("mcp")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                (
                    s["global"].as_bool().unwrap(),
                    s["authorized"].as_bool().unwrap(),
                ),
            )
        })
        .collect();
    let skills = g["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["granted"].as_bool().unwrap(),
            )
        })
        .collect();
    (mcp, skills)
}

/// Personas, MCP grants, skill grants and the database agree with each
/// other: what `grants show` says of each listed persona is what the
/// server lists and the grant table hold, no grant names a persona that
/// does not exist, and `*` never coexists with persona ids.
fn assert_coherent(data: &Path) {
    assert_db_intact(data);
    let ids = persona_ids(data);
    let lists = mcp_lists(data);
    for (server, list) in &lists {
        if list.iter().any(|p| p == "*") {
            assert_eq!(list, &["*"], "{server}: `*` with persona ids");
        }
        for p in list {
            assert!(
                p == "*" || ids.contains(p),
                "{server} is granted to {p:?}, which is not a persona ({ids:?})"
            );
        }
    }
    let rows: BTreeSet<(String, String)> = db(data)
        .prepare("SELECT persona, skill FROM skill_grants")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (p, s) in &rows {
        assert!(ids.contains(p), "skill {s} granted to missing persona {p}");
    }
    for id in &ids {
        let (mcp, skills) = grants(data, id);
        assert_eq!(
            mcp.keys().collect::<Vec<_>>(),
            lists.keys().collect::<Vec<_>>(),
            "{id}: grants show lists other servers than mcp list"
        );
        for (server, (global, authorized)) in &mcp {
            let list = &lists[server];
            let is_global = list.iter().any(|p| p == "*");
            assert_eq!(*global, is_global, "{id} on {server}: {list:?}");
            assert_eq!(
                *authorized,
                is_global || list.contains(id),
                "{id} on {server}: {list:?}"
            );
        }
        for (skill, granted) in &skills {
            assert_eq!(
                *granted,
                rows.contains(&(id.clone(), skill.clone())),
                "{id} / {skill}: grants show disagrees with the grant table"
            );
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Every listed ref has its complete blob (size and sha256 as listed, and
/// as `expected`), and the refs folder holds nothing else: no temp file,
/// no unlisted blob. Returns the listed ids.
fn assert_refs_complete(data: &Path, expected: &[u8]) -> Vec<String> {
    let refs = ok_json(data, &["refs", "list", "--json"]);
    let want = sha256_hex(expected);
    let mut ids = Vec::new();
    for r in refs.as_array().expect("refs list is an array") {
        let id = r["ref_id"].as_str().expect("ref_id").to_string();
        assert!(!id.starts_with('.'), "a temp blob is listed: {r}");
        let blob = std::fs::read(data.join("refs").join(&id))
            .unwrap_or_else(|e| panic!("listed ref {id} has no blob: {e}"));
        assert_eq!(r["size"], blob.len() as u64, "{r}");
        assert_eq!(r["sha256"], sha256_hex(&blob), "{r}");
        assert_eq!(
            r["sha256"], want,
            "listed ref {id} is not the file added: {r}"
        );
        ids.push(id);
    }
    // `refs list` opened the host, which sweeps leftovers.
    for e in std::fs::read_dir(data.join("refs")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        // The lock that keeps one process's cleanup off another's add.
        if name == ".lock" {
            continue;
        }
        assert!(
            ids.contains(&name),
            "refs/ holds {name:?}, which is not a listed ref ({ids:?})"
        );
    }
    ids
}

/// A file of `mib` MiB of varied bytes.
fn big_file(dir: &Path, mib: usize) -> (PathBuf, Vec<u8>) {
    let mut bytes = Vec::with_capacity(mib << 20);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while bytes.len() < mib << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let path = dir.join("big.bin");
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

// ---- 1. Concurrency: no lost update, no contention error -----------------

#[test]
fn concurrent_persona_and_grant_changes_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    add_server(data, "srv_a");
    add_server(data, "srv_b");
    let ids: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
    let barrier = Barrier::new(2);

    // Two processes at a time add personas (interleaved halves), after both
    // tried to add the same one.
    let shared: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2usize)
            .map(|t| {
                let (ids, barrier) = (&ids, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let o = skillhost(data, &["personas", "add", "shared"]);
                    for id in ids.iter().skip(t).step_by(2) {
                        ok(
                            data,
                            &[
                                "personas",
                                "add",
                                id,
                                "--description",
                                &format!("thread {t}"),
                            ],
                        );
                    }
                    o
                })
            })
            .collect();
        handles.into_iter().map(join).collect()
    });
    for o in &shared {
        assert_no_contention(&["personas", "add", "shared"], o);
    }
    let won: Vec<&Output> = shared.iter().filter(|o| o.status.success()).collect();
    assert_eq!(won.len(), 1, "exactly one `personas add shared` wins");
    let lost = shared.iter().find(|o| !o.status.success()).unwrap();
    assert_eq!(lost.status.code(), Some(1));
    assert!(stderr(lost).contains("already exists"), "{}", stderr(lost));
    let mut all: BTreeSet<String> = ids.iter().cloned().collect();
    all.insert("shared".into());
    assert_eq!(persona_ids(data), all);

    // Two processes at a time grant every persona a skill and an MCP
    // server: different skills and servers, the same personas (in opposite
    // orders), so both write the same grant table and the same
    // mcp_servers.json.
    std::thread::scope(|s| {
        let a = s.spawn(|| {
            barrier.wait();
            for id in &ids {
                ok(data, &["grants", "skill", id, "text-tools", "on"]);
                ok(data, &["grants", "mcp", id, "srv_a", "on"]);
            }
        });
        let b = s.spawn(|| {
            barrier.wait();
            for id in ids.iter().rev() {
                ok(data, &["grants", "mcp", id, "srv_b", "on"]);
                ok(data, &["grants", "skill", id, "json-tools", "on"]);
            }
        });
        join(a);
        join(b);
    });
    let lists = mcp_lists(data);
    assert_eq!(lists["srv_a"], ids, "srv_a lost a grant");
    assert_eq!(lists["srv_b"], ids, "srv_b lost a grant");

    // Two processes at a time revoke srv_a and text-tools, each from its
    // half.
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2usize)
            .map(|t| {
                let (ids, barrier) = (&ids, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for id in ids.iter().skip(t).step_by(2) {
                        ok(data, &["grants", "mcp", id, "srv_a", "off"]);
                        ok(data, &["grants", "skill", id, "text-tools", "off"]);
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(join);
    });

    // Every grant and every revocation is there, seen by new processes.
    let lists = mcp_lists(data);
    assert!(lists["srv_a"].is_empty(), "srv_a kept {:?}", lists["srv_a"]);
    assert_eq!(lists["srv_b"], ids, "srv_b lost a grant");
    for id in &ids {
        let (mcp, skills) = grants(data, id);
        assert_eq!(mcp["srv_a"], (false, false), "{id}");
        assert_eq!(mcp["srv_b"], (false, true), "{id}");
        assert!(skills["json-tools"], "{id}");
        assert!(!skills["text-tools"], "{id}");
    }
    let (mcp, skills) = grants(data, "shared");
    assert!(mcp.values().all(|&(_, a)| !a) && skills.values().all(|&g| !g));
    assert_coherent(data);
}

/// A second process that merely opens the data dir (any command) while
/// `refs add` writes a big file must not break the add: every add
/// succeeds and leaves a complete, listed blob.
#[test]
fn refs_add_survives_other_processes_opening_the_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (file, bytes) = big_file(tmp.path(), 8);
    ok(&data, &["personas", "list"]);
    let file = file.to_str().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let failures: Vec<String> = std::thread::scope(|s| {
        let opener = s.spawn(|| {
            for _ in 0..300 {
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                ok(&data, &["personas", "list"]);
            }
        });
        let mut failures = Vec::new();
        for _ in 0..4 {
            let o = skillhost(&data, &["refs", "add", file]);
            if !o.status.success() {
                failures.push(stderr(&o));
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        join(opener);
        failures
    });
    let listed = assert_refs_complete(&data, &bytes);
    assert!(
        failures.is_empty(),
        "{} of 4 `refs add` failed while another process opened the data dir \
         ({} ref(s) listed): {failures:?}",
        failures.len(),
        listed.len()
    );
    assert_eq!(listed.len(), 4);
}

// ---- 2. kill -9 ------------------------------------------------------------

#[test]
fn kill_9_during_persona_and_grant_writes_leaves_a_consistent_state() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path();
    add_server(data, "srv");
    let base: Vec<String> = (0..6).map(|i| format!("base{i}")).collect();
    for id in &base {
        ok(data, &["personas", "add", id]);
    }
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut killed = 0;
    for i in 0..30usize {
        let target = &base[i % base.len()];
        let on = if (i / 6) % 2 == 0 { "on" } else { "off" };
        let fresh = format!("k{i:02}");
        let older = format!("k{:02}", i.saturating_sub(3));
        let args: Vec<&str> = match i % 6 {
            0 => vec!["personas", "add", &fresh, "--description", "killed?"],
            1 => vec!["grants", "skill", target, "text-tools", on],
            2 => vec!["grants", "mcp", target, "srv", on],
            3 => vec!["personas", "remove", &older],
            4 => vec![
                "skills",
                if on == "on" { "disable" } else { "enable" },
                "json-tools",
            ],
            _ => vec!["grants", "mcp", "*", "srv", on],
        };
        let delay = Duration::from_millis(rng.below(70));
        if kill_after(data, &args, delay) {
            killed += 1;
        }
    }
    eprintln!("{killed} of 30 writers were killed mid-run");
    assert_coherent(data);
    // The state is still fully usable.
    ok(data, &["personas", "add", "after"]);
    ok(data, &["grants", "skill", "after", "text-tools", "on"]);
    ok(data, &["grants", "mcp", "after", "srv", "on"]);
    ok(data, &["skills", "enable", "json-tools"]);
    let (mcp, skills) = grants(data, "after");
    assert!(mcp["srv"].1 && skills["text-tools"]);
    for id in &base {
        ok(data, &["personas", "remove", id]);
    }
    assert_coherent(data);
    assert!(persona_ids(data).iter().all(|p| !base.contains(p)));
}

#[test]
fn kill_9_during_refs_add_leaves_no_partial_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (file, bytes) = big_file(tmp.path(), 16);
    let file = file.to_str().unwrap();
    // How long one add takes here, to spread the kills over it.
    let start = Instant::now();
    ok(&data, &["refs", "add", file]);
    let full = start.elapsed();
    let mut killed = 0;
    for j in 0..10u32 {
        if kill_after(&data, &["refs", "add", file], full * j / 9) {
            killed += 1;
        }
        // A partial blob left by this kill is never listed, and the next
        // process cleans it up.
        assert_refs_complete(&data, &bytes);
    }
    eprintln!("{killed} of 10 `refs add` killed mid-run (one takes {full:?})");
    assert_db_intact(&data);
    let listed = assert_refs_complete(&data, &bytes);
    assert!(!listed.is_empty());
    // Still usable: add, remove.
    let id = ok(&data, &["refs", "add", file]).trim().to_string();
    ok(&data, &["refs", "remove", &id]);
    assert_eq!(assert_refs_complete(&data, &bytes).len(), listed.len());
}

#[test]
fn kill_9_during_calls_and_approvals_keeps_runs_coherent() {
    let tmp = tempfile::tempdir().unwrap();
    let data = confirm_data_dir(tmp.path());
    // Compile the component once so later approvals are quick.
    ok(
        &data,
        &["call", "--yes", "text.regex_replace", "--args", REGEX_ARGS],
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // kill -9 during calls that stop in waiting_approval.
    for _ in 0..10 {
        let delay = Duration::from_millis(rng.below(60));
        kill_after(
            &data,
            &["call", "text.regex_replace", "--args", REGEX_ARGS],
            delay,
        );
    }
    assert_db_intact(&data);
    let runs = ok_json(&data, &["runs", "list", "--json", "--limit", "100"]);
    for r in runs.as_array().unwrap() {
        if r["outcome"] == "waiting_approval" {
            assert_eq!(r["approval"], "pending", "{r}");
        }
        if r["approval"] == "pending" {
            assert_eq!(r["outcome"], "waiting_approval", "{r}");
            assert_eq!(
                r["args"],
                serde_json::from_str::<Value>(REGEX_ARGS).unwrap(),
                "{r}"
            );
        }
    }
    // Every pending run the kills left behind can be approved, once.
    let pending = ok_json(&data, &["runs", "list", "--pending", "--json"]);
    eprintln!(
        "{} run(s) left waiting_approval by killed calls",
        pending.as_array().unwrap().len()
    );
    for r in pending.as_array().unwrap() {
        let id = r["run_id"].as_str().unwrap();
        let out: Value = serde_json::from_str(&ok(&data, &["runs", "approve", id])).unwrap();
        assert_eq!(out, regex_result());
    }

    // kill -9 during `runs approve`: afterwards the run either still waits
    // (approve now runs it) or was approved (approve again is refused);
    // never approvable twice.
    let (mut before, mut after, mut stuck) = (0, 0, 0);
    for _ in 0..8 {
        let id = call_waiting(&data, None);
        let delay = Duration::from_millis(rng.below(60));
        kill_after(&data, &["runs", "approve", &id], delay);
        let run = ok_json(&data, &["runs", "show", &id, "--json"]);
        match run["approval"].as_str() {
            Some("pending") => {
                before += 1;
                assert_eq!(run["outcome"], "waiting_approval", "{run}");
                let out: Value =
                    serde_json::from_str(&ok(&data, &["runs", "approve", &id])).unwrap();
                assert_eq!(out, regex_result());
            }
            Some("approved") => {
                after += 1;
                // Killed after the decision: it ran, or was killed while
                // running; the next process to open the data dir marks
                // that run interrupted, so none is left `running`.
                match run["outcome"].as_str() {
                    Some("ok") => {}
                    Some("interrupted") => {
                        stuck += 1;
                        assert!(
                            run["error"]
                                .as_str()
                                .is_some_and(|e| e.contains("interrupted")),
                            "{run}"
                        );
                    }
                    _ => panic!("unexpected outcome after a killed approval: {run}"),
                }
            }
            _ => panic!("unexpected state after a killed approval: {run}"),
        }
        fails(&data, &["runs", "approve", &id], 1, &["already approved"]);
    }
    eprintln!(
        "killed approvals: {before} before the decision, {after} after ({stuck} marked interrupted)"
    );
    assert_db_intact(&data);
    assert!(
        ok_json(&data, &["runs", "list", "--pending", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
}

// ---- 3. Persistence across processes ---------------------------------------

#[test]
fn state_survives_separate_invocations() {
    let tmp = tempfile::tempdir().unwrap();
    let data = confirm_data_dir(tmp.path());
    add_server(&data, "srv");
    ok(
        &data,
        &["personas", "add", "ana", "--description", "support"],
    );
    ok(&data, &["personas", "add", "bob"]);
    ok(&data, &["grants", "skill", "ana", "text-tools", "on"]);
    ok(&data, &["grants", "mcp", "ana", "srv", "on"]);
    ok(&data, &["skills", "disable", "json-tools"]);
    let out = ok_json(
        &data,
        &[
            "call",
            "--persona",
            "ana",
            "text.word_count",
            "--args",
            r#"{"text":"one two"}"#,
        ],
    );
    assert_eq!(out["words"], 2);
    let pending_id = call_waiting(&data, Some("ana"));

    // Each check below is a new process.
    let personas = ok_json(&data, &["personas", "list", "--json"]);
    assert_eq!(personas[0]["id"], "ana");
    assert_eq!(personas[0]["description"], "support");
    assert_eq!(personas[1]["id"], "bob");
    let (mcp, skills) = grants(&data, "ana");
    assert_eq!(mcp["srv"], (false, true));
    assert!(skills["text-tools"]);
    assert!(!skills["json-tools"]);
    let (mcp, skills) = grants(&data, "bob");
    assert_eq!(mcp["srv"], (false, false));
    assert!(skills.values().all(|g| !g));
    let list = ok_json(&data, &["skills", "list", "--json"]);
    let json_tools = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "json-tools")
        .expect("json-tools listed");
    assert_eq!(json_tools["enabled"], false, "{json_tools}");
    let o = skillhost(
        &data,
        &[
            "call",
            "json.query",
            "--args",
            r#"{"document":{},"pointer":""}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "a disabled skill was called");
    assert!(stderr(&o).contains("disabled"), "{}", stderr(&o));

    // The operator's refused call is a run too, newest first.
    let all = ok_json(&data, &["runs", "list", "--json"]);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[0]["tool"], "json.query", "{}", all[0]);
    assert!(all[0]["persona"].is_null(), "{}", all[0]);
    assert_eq!(all[0]["outcome"], "error", "{}", all[0]);
    let runs = ok_json(&data, &["runs", "list", "--persona", "ana", "--json"]);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for r in runs {
        for key in [
            "run_id",
            "persona",
            "tool",
            "server",
            "outcome",
            "duration_ms",
        ] {
            assert!(r.get(key).is_some(), "run without {key}: {r}");
        }
        assert_eq!(r["persona"], "ana", "{r}");
        assert_eq!(r["server"], "skill:text-tools", "{r}");
    }
    // Newest first.
    assert_eq!(runs[0]["run_id"], pending_id.as_str());
    assert_eq!(runs[0]["tool"], "text.regex_replace");
    assert_eq!(runs[0]["outcome"], "waiting_approval");
    assert_eq!(runs[1]["tool"], "text.word_count");
    assert_eq!(runs[1]["outcome"], "ok");
    assert!(runs[1]["duration_ms"].as_i64().is_some(), "{}", runs[1]);
    let pending = ok_json(&data, &["runs", "list", "--pending", "--json"]);
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["run_id"], pending_id.as_str());
    let by_operator = ok_json(&data, &["runs", "list", "--persona", "operator", "--json"]);
    assert_eq!(by_operator.as_array().unwrap().len(), 1, "{by_operator}");
    assert_eq!(by_operator[0]["run_id"], all[0]["run_id"]);

    // The database is in WAL mode and intact.
    let mode: String = db(&data)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_db_intact(&data);

    // The pending approval is approved by yet another process.
    let out: Value = serde_json::from_str(&ok(&data, &["runs", "approve", &pending_id])).unwrap();
    assert_eq!(out, regex_result());
    let run = ok_json(&data, &["runs", "show", &pending_id, "--json"]);
    assert_eq!(run["outcome"], "ok", "{run}");
    assert_eq!(run["approval"], "approved", "{run}");
    ok(&data, &["skills", "enable", "json-tools"]);
    let out = ok_json(
        &data,
        &[
            "call",
            "json.query",
            "--args",
            r#"{"document":{"a":1},"pointer":"/a"}"#,
        ],
    );
    assert_eq!(out, 1);
    assert_coherent(&data);
}

// ---- 4. Confirmation through the CLI ---------------------------------------

#[test]
fn confirmation_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let data = confirm_data_dir(tmp.path());

    // Stops in waiting_approval with exit 3; the run id is on stderr.
    let id = call_waiting(&data, None);
    let run = ok_json(&data, &["runs", "show", &id, "--json"]);
    assert_eq!(run["outcome"], "waiting_approval", "{run}");
    assert_eq!(run["approval"], "pending", "{run}");
    // Approve executes it and prints the result.
    let out: Value = serde_json::from_str(&ok(&data, &["runs", "approve", &id])).unwrap();
    assert_eq!(out, regex_result());
    let run = ok_json(&data, &["runs", "show", &id, "--json"]);
    assert_eq!(run["outcome"], "ok", "{run}");
    assert_eq!(run["approval"], "approved", "{run}");
    assert!(run["duration_ms"].as_i64().is_some(), "{run}");
    // Approving again is refused, clearly.
    let err = fails(&data, &["runs", "approve", &id], 1, &["already approved"]);
    assert!(err.contains(&id), "{err}");
    fails(&data, &["runs", "deny", &id], 1, &["already approved"]);

    // Denied with a reason: approve is refused later; the reason is in
    // the run's error and its approval event. A reason too long is
    // refused with nothing decided.
    let denied = call_waiting(&data, None);
    let long = "x".repeat(501);
    fails(
        &data,
        &["runs", "deny", &denied, "--reason", &long],
        1,
        &["501 characters", "nothing was decided"],
    );
    let run = ok_json(&data, &["runs", "show", &denied, "--json"]);
    assert_eq!(run["approval"], "pending", "{run}");
    let out = ok(
        &data,
        &["runs", "deny", &denied, "--reason", "not on a Friday"],
    );
    assert!(out.contains(&denied), "{out}");
    fails(&data, &["runs", "approve", &denied], 1, &["denied"]);
    let run = ok_json(&data, &["runs", "show", &denied, "--json"]);
    assert_eq!(run["outcome"], "denied", "{run}");
    assert_eq!(run["approval"], "denied", "{run}");
    assert_eq!(
        run["error"], "denied (operator:cli): not on a Friday",
        "{run}"
    );
    let events = run["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{run}");
    assert_eq!(events[0]["kind"], "approval", "{run}");
    assert_eq!(events[0]["detail"]["reason"], "not on a Friday", "{run}");
    assert_eq!(events[0]["detail"]["decided_by"], "operator:cli", "{run}");
    let text = ok(&data, &["runs", "show", &denied]);
    assert!(
        text.contains("event") && text.contains("not on a Friday"),
        "{text}"
    );

    // Unknown run: a clear error.
    fails(
        &data,
        &["runs", "approve", "run_000000000000000000000000"],
        1,
        &["no run"],
    );

    // Two processes approve the same run at once: it runs exactly once.
    let raced = call_waiting(&data, None);
    let barrier = Barrier::new(2);
    let outputs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    skillhost(&data, &["runs", "approve", &raced])
                })
            })
            .collect();
        handles.into_iter().map(join).collect()
    });
    let winners: Vec<&Output> = outputs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one approval wins: {:?}",
        outputs.iter().map(stderr).collect::<Vec<_>>()
    );
    let loser = outputs.iter().find(|o| !o.status.success()).unwrap();
    assert_no_contention(&["runs", "approve", &raced], loser);
    assert_eq!(loser.status.code(), Some(1));
    assert!(
        ["already approved", "decided by someone else"]
            .iter()
            .any(|w| stderr(loser).contains(w)),
        "{}",
        stderr(loser)
    );

    // --yes runs directly.
    let report = ok_json(
        &data,
        &[
            "call",
            "--yes",
            "--json",
            "text.regex_replace",
            "--args",
            REGEX_ARGS,
        ],
    );
    assert_eq!(report["outcome"], "ok", "{report}");
    assert_eq!(report["output"], regex_result(), "{report}");
    let yes_id = report["run_id"].as_str().expect("run_id").to_string();
    let run = ok_json(&data, &["runs", "show", &yes_id, "--json"]);
    assert_eq!(run["outcome"], "ok", "{run}");
    assert_ne!(run["approval"], "pending", "{run}");
    let out = ok_json(
        &data,
        &["call", "-y", "text.regex_replace", "--args", REGEX_ARGS],
    );
    assert_eq!(out, regex_result());

    // Nothing is left waiting.
    assert!(
        ok_json(&data, &["runs", "list", "--pending", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
}

// ---- 5. why ------------------------------------------------------------------

fn why(data: &Path, persona: &str, tool: &str) -> Value {
    let report = ok_json(data, &["why", "--persona", persona, tool, "--json"]);
    assert_eq!(report["persona"], persona);
    assert_eq!(report["tool"], tool);
    report
}

#[test]
fn why_names_the_first_broken_link() {
    let tmp = tempfile::tempdir().unwrap();
    let data = confirm_data_dir(tmp.path());
    add_server(&data, "srv");
    let tool = "text.regex_replace";

    // No such persona.
    let r = why(&data, "bob", tool);
    assert_eq!(r["first_broken"], "grants", "{r}");
    assert!(r["verdict"].as_str().unwrap().contains("no persona"), "{r}");

    // Not granted: says so and how to grant.
    ok(&data, &["personas", "add", "bob"]);
    let r = why(&data, "bob", tool);
    assert_eq!(r["first_broken"], "grants", "{r}");
    let verdict = r["verdict"].as_str().unwrap();
    assert!(verdict.contains("not granted"), "{verdict}");
    assert!(
        verdict.contains("skillhost grants skill bob text-tools on"),
        "{verdict}"
    );
    // The text form leads with the same verdict.
    let text = ok(&data, &["why", "--persona", "bob", tool]);
    assert_eq!(text.lines().next().unwrap(), verdict);

    // A disabled skill is named before the missing grant.
    ok(&data, &["skills", "disable", "text-tools"]);
    let r = why(&data, "bob", tool);
    assert_eq!(r["first_broken"], "server", "{r}");
    assert!(r["verdict"].as_str().unwrap().contains("disabled"), "{r}");
    ok(&data, &["skills", "enable", "text-tools"]);

    // Granted: ok.
    ok(&data, &["grants", "skill", "bob", "text-tools", "on"]);
    let r = why(&data, "bob", tool);
    assert!(r["first_broken"].is_null(), "{r}");
    assert_eq!(r["verdict"], "`bob` can use `text.regex_replace`");

    // A run stuck in waiting_approval is named.
    let id = call_waiting(&data, Some("bob"));
    let r = why(&data, "bob", tool);
    assert_eq!(r["first_broken"], "approvals", "{r}");
    let verdict = r["verdict"].as_str().unwrap();
    assert!(verdict.contains(&id), "{verdict}");
    assert!(verdict.contains("waiting_approval"), "{verdict}");
    assert_eq!(r["pending"][0]["run_id"], id.as_str(), "{r}");
    ok(&data, &["runs", "approve", &id]);
    let r = why(&data, "bob", tool);
    assert!(r["first_broken"].is_null(), "{r}");
    assert_eq!(r["recent_runs"][0]["run_id"], id.as_str(), "{r}");
    assert_eq!(r["recent_runs"][0]["outcome"], "ok", "{r}");

    // An MCP tool: the disabled server comes first, not the grant.
    let r = why(&data, "bob", "srv.anything");
    assert_eq!(r["first_broken"], "server", "{r}");
    assert!(r["verdict"].as_str().unwrap().contains("disabled"), "{r}");
    let grant = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "grants")
        .expect("grants step");
    assert_eq!(grant["ok"], false, "{grant}");
    ok(&data, &["grants", "mcp", "bob", "srv", "on"]);
    let r = why(&data, "bob", "srv.anything");
    let grant = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "grants")
        .expect("grants step");
    assert_eq!(grant["ok"], true, "{grant}");
}
