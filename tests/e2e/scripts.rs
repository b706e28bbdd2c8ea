//! Skill scripts in the sandbox: the built-in Python runtime running real
//! scripts the tests write into a skill folder, with the standard library
//! at call time, files in and out, and the hostile scripts of the issue
//! (each a typed outcome, the next call fine, nothing written to disk).
//!
//! The runtime is built by `host/build.rs` with componentize-py; without
//! it these tests say so and pass, unless `SKILLHOST_TEST_REQUIRE_SCRIPTS`
//! is set (as CI sets it), when they fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use skillhost::{
    CallError, CallFailure, CallOptions, Limits, SandboxBuilder, ScratchLimit, ScriptRequest,
    ScriptRun, ScriptRuntime, ScriptRuntimeError, SkillFiles, ToolError, TrapReason,
};

/// The environment variable that makes a missing runtime a failure.
const REQUIRE: &str = "SKILLHOST_TEST_REQUIRE_SCRIPTS";

/// The runtime, loaded once for the whole test binary through the suites'
/// compiled-code cache; `None` (the test returns early) when this build
/// has none and `SKILLHOST_TEST_REQUIRE_SCRIPTS` is not set.
fn runtime() -> Option<ScriptRuntime> {
    static RUNTIME: OnceLock<Result<ScriptRuntime, ScriptRuntimeError>> = OnceLock::new();
    let loaded = RUNTIME.get_or_init(|| {
        let sandbox = SandboxBuilder::new()
            .cache_dir(skillhost_test_plugins::COMPILE_CACHE_DIR)
            .build()
            .expect("sandbox");
        sandbox.script_runtime()
    });
    match loaded {
        Ok(rt) => Some(rt.clone()),
        Err(ScriptRuntimeError::NotBuilt { message }) => {
            assert!(
                std::env::var_os(REQUIRE).is_none(),
                "{REQUIRE} is set but this build has no script runtime: {message}"
            );
            eprintln!("skipped: {message}");
            None
        }
        Err(e) => panic!("the script runtime does not load: {e}"),
    }
}

/// A skill folder the test writes its scripts into.
struct SkillDir {
    dir: tempfile::TempDir,
}

impl SkillDir {
    fn new(files: &[(&str, &str)]) -> SkillDir {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("SKILL.md"),
            "---\nname: probe\ndescription: scripts the tests run\n---\nRun the scripts.\n",
        )
        .unwrap();
        let me = SkillDir { dir };
        for (path, text) in files {
            me.write(path, text);
        }
        me
    }

    fn write(&self, path: &str, text: &str) {
        let p = self.dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn files(&self) -> Arc<SkillFiles> {
        SkillFiles::from_dir(self.path()).expect("skill files")
    }
}

/// Options for a script call: the script defaults, or smaller ones.
fn opts() -> CallOptions {
    CallOptions {
        limits: skillhost::LimitsPolicy::default().script_limits(),
        ..Default::default()
    }
}

fn opts_with(f: impl FnOnce(&mut Limits)) -> CallOptions {
    let mut o = opts();
    f(&mut o.limits);
    o
}

fn request(files: &Arc<SkillFiles>, script: &str, args: &[&str]) -> ScriptRequest {
    ScriptRequest {
        skill: files.clone(),
        script: script.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        stdin: Vec::new(),
        inputs: Vec::new(),
    }
}

async fn run(rt: &ScriptRuntime, req: ScriptRequest) -> ScriptRun {
    run_with(rt, req, opts()).await
}

async fn run_with(rt: &ScriptRuntime, req: ScriptRequest, o: CallOptions) -> ScriptRun {
    let script = req.script.clone();
    match rt.run(req, o).await {
        Ok(r) => r,
        Err(e) => panic!("{script}: {e}\nstderr: {}", e.stderr),
    }
}

async fn fails(rt: &ScriptRuntime, req: ScriptRequest, o: CallOptions) -> CallError {
    let script = req.script.clone();
    match rt.run(req, o).await {
        Ok(r) => panic!("{script} ran: {r:?}"),
        Err(e) => e,
    }
}

/// The JSON document a probe script printed last.
fn json_of(run: &ScriptRun) -> Value {
    let line = run.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", run.stdout, run.stderr))
}

/// After a hostile script, an ordinary one runs as it always does.
async fn next_call_is_fine(rt: &ScriptRuntime) {
    let skill = SkillDir::new(&[("scripts/ok.py", "print('still fine')\n")]);
    let r = run(rt, request(&skill.files(), "scripts/ok.py", &[])).await;
    assert_eq!((r.exit_code, r.stdout.as_str()), (0, "still fine\n"));
}

// ---------------------------------------------------------------------------
// What a script sees and gives back.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argv_stdin_stdout_and_exit_codes_are_a_python3_processs() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[
        (
            "scripts/echo.py",
            r#""""Prints what a process sees."""
import json, os, sys
if __name__ == "__main__":
    data = sys.stdin.read()
    print(json.dumps({
        "argv": sys.argv, "file": __file__, "name": __name__, "cwd": os.getcwd(),
        "stdin": data, "path0": sys.path[0], "env": dict(os.environ),
        "tmp": __import__("tempfile").gettempdir(),
    }))
    print("to stderr", file=sys.stderr)
"#,
        ),
        (
            "scripts/code.py",
            "import sys\nsys.exit(int(sys.argv[1]))\n",
        ),
        (
            "scripts/message.py",
            "import sys\nsys.exit('bad input: ' + sys.argv[1])\n",
        ),
        (
            "scripts/raises.py",
            "def inner():\n    raise ValueError('no such form')\n\ninner()\n",
        ),
        (
            "scripts/hard_exit.py",
            "import os\nprint('before', flush=True)\nos._exit(5)\n",
        ),
        ("scripts/syntax.py", "def broken(:\n    pass\n"),
    ]);
    let files = skill.files();
    let mut req = request(&files, "scripts/echo.py", &["form.pdf", "--flag", "é ü"]);
    req.stdin = "line one\nline two\n".into();
    let r = run(&rt, req).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "to stderr\n");
    let seen = json_of(&r);
    assert_eq!(
        seen["argv"],
        serde_json::json!(["/skill/scripts/echo.py", "form.pdf", "--flag", "é ü"])
    );
    assert_eq!(seen["file"], "/skill/scripts/echo.py");
    assert_eq!(seen["name"], "__main__");
    assert_eq!(seen["cwd"], "/scratch");
    assert_eq!(seen["stdin"], "line one\nline two\n");
    assert_eq!(seen["path0"], "/skill/scripts");
    assert_eq!(seen["env"], serde_json::json!({"TMPDIR": "/scratch/.tmp"}));
    assert_eq!(seen["tmp"], "/scratch/.tmp");

    for (arg, code) in [("0", 0), ("3", 3), ("255", 255), ("256", 0), ("-1", 255)] {
        let r = run(&rt, request(&files, "scripts/code.py", &[arg])).await;
        assert_eq!(r.exit_code, code, "sys.exit({arg})");
    }
    let r = run(&rt, request(&files, "scripts/message.py", &["x"])).await;
    assert_eq!((r.exit_code, r.stderr.as_str()), (1, "bad input: x\n"));
    let r = run(&rt, request(&files, "scripts/raises.py", &[])).await;
    assert_eq!(r.exit_code, 1);
    assert!(
        r.stderr
            .starts_with("Traceback (most recent call last):\n  File \"/skill/scripts/raises.py\""),
        "the traceback starts at the script, as python3's does: {}",
        r.stderr
    );
    assert!(
        r.stderr.ends_with("ValueError: no such form\n"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("runpy"), "{}", r.stderr);
    // WASI 0.2's exit carries success or failure, not a code.
    let r = run(&rt, request(&files, "scripts/hard_exit.py", &[])).await;
    assert_eq!((r.exit_code, r.stdout.as_str()), (1, "before\n"));
    let r = run(&rt, request(&files, "scripts/syntax.py", &[])).await;
    assert_eq!(r.exit_code, 1);
    assert!(r.stderr.contains("SyntaxError"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_library_is_there_at_call_time() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[(
        "scripts/stdlib.py",
        r#"import argparse, csv, dataclasses, io, json, pathlib, re, sqlite3, tempfile, zipfile
import xml.dom.minidom, xml.etree.ElementTree as ET
# Beyond the runtime's warm set: loaded from /python now.
import decimal, difflib, email.message, fractions, html.parser, statistics, tomllib
import unicodedata, string, textwrap, hashlib, base64, datetime, zoneinfo, gzip, shutil

p = argparse.ArgumentParser(prog="stdlib")
p.add_argument("--n", type=int, default=3)
args = p.parse_args()

@dataclasses.dataclass
class Row:
    name: str
    score: float

rows = [Row("a", 1.5), Row("b", 2.5)]
buf = io.StringIO()
w = csv.writer(buf)
for r in rows:
    w.writerow([r.name, r.score])
doc = xml.dom.minidom.parseString("<a><b>x</b></a>")
tree = ET.fromstring("<r><i>1</i><i>2</i></r>")
db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(args.n)])
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write("temp")
with zipfile.ZipFile("out/archive.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("inside.txt", "zipped " * 100)
with zipfile.ZipFile("out/archive.zip") as z:
    unzipped = z.read("inside.txt").decode()
pathlib.Path("out/dir").mkdir(parents=True)
pathlib.Path("out/dir/note.txt").write_text("note")
shutil.copy("out/dir/note.txt", "out/copy.txt")
print(json.dumps({
    "csv": buf.getvalue(),
    "xml": doc.documentElement.firstChild.firstChild.data,
    "et": sum(int(i.text) for i in tree.iter("i")),
    "sql": db.execute("select count(*) from t").fetchone()[0],
    "tmp": f.name.startswith("/scratch/.tmp/"),
    "zip": len(unzipped),
    "re": re.sub(r"\d+", "@", "a1b22"),
    "dec": str(decimal.Decimal("1.1") + decimal.Decimal("2.2")),
    "frac": str(fractions.Fraction(1, 3) * 3),
    "diff": len(list(difflib.unified_diff(["a"], ["b"]))),
    "mean": statistics.mean([1, 2, 3]),
    "toml": tomllib.loads("x = 1")["x"],
    "uni": unicodedata.name("é"),
    "sha": hashlib.sha256(b"x").hexdigest()[:8],
    "gz": len(gzip.compress(b"x" * 1000)) < 100,
}))
"#,
    )]);
    let r = run(
        &rt,
        request(&skill.files(), "scripts/stdlib.py", &["--n", "4"]),
    )
    .await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let v = json_of(&r);
    assert_eq!(v["csv"], "a,1.5\r\nb,2.5\r\n");
    assert_eq!(v["xml"], "x");
    assert_eq!(v["et"], 3);
    assert_eq!(v["sql"], 4);
    assert_eq!(v["tmp"], true);
    assert_eq!(v["zip"], 700);
    assert_eq!(v["re"], "a@b@");
    assert_eq!(v["dec"], "3.3");
    assert_eq!(v["frac"], "1");
    assert_eq!(v["mean"], 2);
    assert_eq!(v["toml"], 1);
    assert_eq!(v["uni"], "LATIN SMALL LETTER E WITH ACUTE");
    assert_eq!(v["sha"], "2d711642");
    assert_eq!(v["gz"], true);
    let names: Vec<&str> = r.outputs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["archive.zip", "copy.txt", "dir/note.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_files_go_in_and_out_files_come_back() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[
        (
            "scripts/convert.py",
            r#"import json, os, sys
from helpers import upper          # the script's own folder is first on sys.path
import vendored                    # the skill's packages, from /skill/.python
src, dst = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f:
    text = f.read()
os.makedirs(os.path.dirname(dst), exist_ok=True)
with open(dst, "w", encoding="utf-8") as f:
    f.write(upper(text))
with open("out/raw.bin", "wb") as f:
    f.write(open("in/data.bin", "rb").read()[::-1])
print(json.dumps({"listing": sorted(os.listdir(".")), "in": sorted(os.listdir("in")),
                  "vendored": vendored.VERSION}))
"#,
        ),
        (
            "scripts/helpers.py",
            "def upper(s):\n    return s.upper()\n",
        ),
        (".python/vendored/__init__.py", "VERSION = '1.2.3'\n"),
    ]);
    let mut req = request(
        &skill.files(),
        "scripts/convert.py",
        &["in/letter.txt", "out/sub/LETTER.txt"],
    );
    req.inputs = vec![
        (
            "in/letter.txt".into(),
            Bytes::from_static("dear naïve reader\n".as_bytes()),
        ),
        ("in/data.bin".into(), Bytes::from_static(&[0, 1, 2, 255])),
    ];
    let r = run(&rt, req).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let v = json_of(&r);
    assert_eq!(v["listing"], serde_json::json!([".tmp", "in", "out"]));
    assert_eq!(v["in"], serde_json::json!(["data.bin", "letter.txt"]));
    assert_eq!(v["vendored"], "1.2.3");
    assert_eq!(
        r.outputs,
        vec![
            ("raw.bin".to_string(), Bytes::from_static(&[255, 2, 1, 0])),
            (
                "sub/LETTER.txt".to_string(),
                Bytes::from_static("DEAR NAÏVE READER\n".as_bytes())
            ),
        ]
    );
    assert_eq!(r.scratch_limit, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_checked_before_anything_runs() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[
        ("scripts/ok.py", "print('ok')\n"),
        ("scripts/init-artifact.sh", "#!/bin/bash\nnpm install\n"),
        ("scripts/build.js", "console.log(1)\n"),
        ("scripts/tool.rb", "puts 1\n"),
    ]);
    let files = skill.files();
    let invalid = |e: CallError| match e.failure {
        CallFailure::Tool {
            error: ToolError::InvalidInput(m),
        } => m,
        other => panic!("not invalid-input: {other:?}"),
    };
    for (script, says) in [
        (
            "scripts/init-artifact.sh",
            "is a shell script (bash): the sandbox runs Python only",
        ),
        ("scripts/build.js", "is a JavaScript file"),
        ("scripts/tool.rb", "needs Ruby"),
        (
            "scripts/missing.py",
            "the skill has no script `scripts/missing.py`",
        ),
        ("../escape.py", "script `../escape.py`"),
        ("/skill/scripts/ok.py", "script `/skill/scripts/ok.py`"),
        ("SKILL.md", "is not a Python script"),
    ] {
        let m = invalid(fails(&rt, request(&files, script, &[]), opts()).await);
        assert!(m.contains(says), "{script}: {m}");
    }
    let too_many: Vec<String> = (0..=skillhost::MAX_SCRIPT_ARGS)
        .map(|i| i.to_string())
        .collect();
    let mut req = request(&files, "scripts/ok.py", &[]);
    req.args = too_many;
    assert!(invalid(fails(&rt, req, opts()).await).contains("arguments, over the cap of 64"));
    let mut req = request(&files, "scripts/ok.py", &[]);
    req.stdin = vec![b'x'; skillhost::MAX_SCRIPT_STDIN_BYTES + 1];
    assert!(invalid(fails(&rt, req, opts()).await).contains("stdin is"));
    let long = "n".repeat(4000);
    for name in [
        "../x",
        "/etc/passwd",
        "a\nb",
        "a\0b",
        long.as_str(),
        "out/x",
        "report\u{202e}fdp.exe",
        ".tmp/y",
        "a//b",
        "",
    ] {
        let mut req = request(&files, "scripts/ok.py", &[]);
        req.inputs = vec![(name.into(), Bytes::from_static(b"x"))];
        let m = invalid(fails(&rt, req, opts()).await);
        assert!(m.contains("input file"), "{name:?}: {m}");
    }
    let mut req = request(&files, "scripts/ok.py", &[]);
    req.inputs = vec![
        ("a.txt".into(), Bytes::from_static(b"1")),
        ("a.txt".into(), Bytes::from_static(b"2")),
    ];
    assert!(invalid(fails(&rt, req, opts()).await).contains("already there"));
    next_call_is_fine(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_code_compiled_at_install_is_used_and_kept_as_an_archive() {
    let Some(rt) = runtime() else { return };
    // A module big enough that compiling it shows in the fuel.
    let mut big = String::from("TABLE = {\n");
    for i in 0..3000 {
        big.push_str(&format!("    'k{i}': [{i}, '{i}', ({i}, {i})],\n"));
    }
    big.push_str("}\n");
    let skill = SkillDir::new(&[
        ("scripts/use.py", "import table\nprint(len(table.TABLE))\n"),
        ("scripts/table.py", &big),
        ("scripts/broken.py", "def (:\n"),
    ]);
    let files = skill.files();
    let cold = run(&rt, request(&files, "scripts/use.py", &[])).await;
    assert_eq!(
        (cold.exit_code, cold.stdout.as_str()),
        (0, "3000\n"),
        "{}",
        cold.stderr
    );
    let pyc = rt
        .compile(&files)
        .await
        .unwrap_or_else(|e| panic!("compile: {e}\n{}", e.stderr));
    assert_eq!(
        pyc.paths(),
        [
            "scripts/table.cpython-314.pyc",
            "scripts/use.cpython-314.pyc"
        ]
    );
    assert_eq!(pyc.failed().len(), 1);
    assert_eq!(pyc.failed()[0].0, "scripts/broken.py");
    assert!(
        pyc.failed()[0].1.contains("SyntaxError"),
        "{:?}",
        pyc.failed()
    );
    let archive = pyc.to_archive();
    let back = skillhost::PycTree::from_archive(&archive).unwrap();
    assert_eq!(back.paths(), pyc.paths());
    let warm = run(&rt, request(&files.with_pyc(&back), "scripts/use.py", &[])).await;
    assert_eq!((warm.exit_code, warm.stdout.as_str()), (0, "3000\n"));
    assert!(
        warm.fuel_consumed * 2 < cold.fuel_consumed,
        "the byte-code is used: {} fuel with it, {} without",
        warm.fuel_consumed,
        cold.fuel_consumed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_in_instances_made_ahead_and_leave_nothing_to_the_next() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[(
        "scripts/mark.py",
        r#"import json, os, sys
seen = {"marked": hasattr(sys, "_skillhost_mark"), "env": dict(os.environ),
        "files": sorted(os.listdir("."))}
print(json.dumps(seen))
sys._skillhost_mark = True
os.environ["LEAK"] = "1"
open("left.txt", "w").write("x")
json.dumps = None
"#,
    )]);
    let files = skill.files();
    let used = rt.spares_used();
    for round in 0..3 {
        for _ in 0..200 {
            if rt.spare_ready() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let r = run(&rt, request(&files, "scripts/mark.py", &[])).await;
        assert_eq!(r.exit_code, 0, "{}", r.stderr);
        let v = json_of(&r);
        assert_eq!(v["marked"], false, "round {round}");
        assert_eq!(v["env"], serde_json::json!({"TMPDIR": "/scratch/.tmp"}));
        assert_eq!(v["files"], serde_json::json!([".tmp", "out"]));
    }
    assert!(rt.spares_used() > used, "no call ran in a spare");
}

// ---------------------------------------------------------------------------
// Hostile scripts.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_ends_by_fuel_and_a_sleeper_by_the_deadline() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[
        ("scripts/spin.py", "while True:\n    pass\n"),
        ("scripts/sleep.py", "import time\ntime.sleep(3600)\n"),
        (
            "scripts/recurse.py",
            "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n",
        ),
    ]);
    let files = skill.files();
    let e = fails(
        &rt,
        request(&files, "scripts/spin.py", &[]),
        opts_with(|l| l.fuel = 2_000_000_000),
    )
    .await;
    assert_eq!(e.trap_reason(), Some(TrapReason::Fuel), "{e}");
    let started = std::time::Instant::now();
    let e = fails(
        &rt,
        request(&files, "scripts/sleep.py", &[]),
        opts_with(|l| l.timeout = std::time::Duration::from_secs(2)),
    )
    .await;
    assert_eq!(e.trap_reason(), Some(TrapReason::Deadline), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // A runaway recursion past any limit the script sets: CPython's own
    // guard, or the sandbox's caps (CPython 3.14 keeps Python frames in
    // its heap: the memory cap ends it).
    match rt
        .run(request(&files, "scripts/recurse.py", &[]), opts())
        .await
    {
        Ok(r) => {
            assert_eq!(r.exit_code, 1);
            assert!(r.stderr.contains("RecursionError"), "{}", r.stderr);
        }
        Err(e) => assert!(
            matches!(
                e.trap_reason(),
                Some(TrapReason::Stack | TrapReason::Memory)
            ),
            "{e}"
        ),
    }
    next_call_is_fine(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_ends_at_the_memory_cap() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[(
        "scripts/bomb.py",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n",
    )]);
    let e = fails(
        &rt,
        request(&skill.files(), "scripts/bomb.py", &[]),
        opts_with(|l| l.memory_bytes = 128 << 20),
    )
    .await;
    assert_eq!(e.trap_reason(), Some(TrapReason::Memory), "{e}");
    next_call_is_fine(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_sockets_threads_and_native_code_are_refused_by_name() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[(
        "scripts/escape.py",
        r#"import json, os
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = "ran"
    except BaseException as e:
        out[name] = f"{type(e).__name__}: {e}"
import subprocess
attempt("subprocess.run", lambda: subprocess.run(["ls", "/"]))
attempt("subprocess.Popen", lambda: subprocess.Popen(["sh", "-c", "id"]))
attempt("subprocess.check_output", lambda: subprocess.check_output("id", shell=True))
attempt("os.system", lambda: os.system("id"))
attempt("os.popen", lambda: os.popen("id"))
attempt("os.execv", lambda: os.execv("/bin/sh", ["sh"]))
attempt("os.fork", lambda: os.fork())
out["hasattr fork"] = hasattr(os, "fork")
attempt("import ctypes", lambda: __import__("ctypes"))
attempt("ctypes.util", lambda: __import__("ctypes.util"))
import socket
attempt("socket.socket", lambda: socket.socket())
attempt("create_connection", lambda: socket.create_connection(("127.0.0.1", 22)))
attempt("getaddrinfo", lambda: socket.getaddrinfo("example.com", 443))
import urllib.request
attempt("urlopen", lambda: urllib.request.urlopen("http://127.0.0.1:9/", timeout=1))
import threading
attempt("thread", lambda: threading.Thread(target=print).start())
attempt("multiprocessing", lambda: __import__("multiprocessing").Process(target=print).start())
print(json.dumps(out))
"#,
    )]);
    let r = run(&rt, request(&skill.files(), "scripts/escape.py", &[])).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    // No program it asked for runs as a child of this process.
    let started: Vec<String> = children()
        .into_iter()
        .filter(|cmd| {
            ["ls\0/", "sh\0-c\0id", "id"]
                .iter()
                .any(|c| cmd.starts_with(c))
        })
        .collect();
    assert!(started.is_empty(), "started: {started:?}");
    let v = json_of(&r);
    let says = |k: &str| {
        v[k].as_str()
            .unwrap_or_else(|| panic!("{k}: {v}"))
            .to_string()
    };
    for k in [
        "subprocess.run",
        "subprocess.Popen",
        "subprocess.check_output",
        "os.system",
        "os.popen",
        "os.execv",
    ] {
        let m = says(k);
        assert!(
            m.starts_with("SandboxRefusal: ")
                && m.contains("not available in the skillhost sandbox")
                && m.contains("cannot start other programs"),
            "{k}: {m}"
        );
    }
    let fork = says("os.fork");
    assert!(
        fork.starts_with("AttributeError: ") && fork.contains("skillhost sandbox"),
        "{fork}"
    );
    assert_eq!(v["hasattr fork"], false);
    for k in ["import ctypes", "ctypes.util"] {
        let m = says(k);
        assert!(
            m.starts_with("ModuleNotFoundError: ") && m.contains("native code (ctypes)"),
            "{k}: {m}"
        );
    }
    for k in ["socket.socket", "create_connection", "getaddrinfo"] {
        let m = says(k);
        assert!(
            m.starts_with("SandboxRefusal: ") && m.contains("no sockets"),
            "{k}: {m}"
        );
    }
    let url = says("urlopen");
    assert!(
        url.starts_with("URLError: ") && url.contains("skillhost sandbox"),
        "{url}"
    );
    assert!(
        says("thread").contains("can't start new thread"),
        "{}",
        says("thread")
    );
    assert_ne!(says("multiprocessing"), "ran");
    next_call_is_fine(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_files_and_environment_are_not_there() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[(
        "scripts/snoop.py",
        r#"import json, os, sys
out = {"environ": dict(os.environ), "root": None}
for p in ["/etc/passwd", "/proc/self/environ", "/proc/self/cmdline", "/home", "../../etc/passwd",
          "/skill/../etc/passwd", "/scratch/../../etc/passwd", "/python/../etc/passwd"]:
    try:
        with open(p, "rb") as f:
            out[p] = f.read(100).decode("latin-1")
    except OSError as e:
        out[p] = type(e).__name__
try:
    out["root"] = os.listdir("/")
except OSError as e:
    out["root"] = type(e).__name__
out["argv_host"] = [a for a in sys.argv if "tmp" in a]
print(json.dumps(out))
"#,
    )]);
    let r = run(&rt, request(&skill.files(), "scripts/snoop.py", &[])).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let v = json_of(&r);
    assert_eq!(v["environ"], serde_json::json!({"TMPDIR": "/scratch/.tmp"}));
    for (k, seen) in v.as_object().unwrap() {
        if k.starts_with('/') || k.starts_with("..") {
            assert!(
                matches!(
                    seen.as_str(),
                    Some("FileNotFoundError" | "PermissionError" | "IsADirectoryError")
                ),
                "{k} read: {seen}"
            );
        }
    }
    assert!(v["root"].is_string(), "`/` listed: {}", v["root"]);
    assert!(!r.stdout.contains("root:x:0:0"));
    assert!(!r.stdout.contains(&skill.path().display().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skill_folder_is_read_only_and_a_symlink_out_refuses_it() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[
        (
            "scripts/deface.py",
            r#"import json, os, shutil
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = "done"
    except OSError as e:
        out[name] = type(e).__name__
attempt("write", lambda: open("/skill/scripts/deface.py", "w").write("x"))
attempt("create", lambda: open("/skill/new.txt", "w"))
attempt("append", lambda: open("/skill/SKILL.md", "a").write("x"))
attempt("mkdir", lambda: os.mkdir("/skill/dir"))
attempt("remove", lambda: os.remove("/skill/SKILL.md"))
attempt("rename", lambda: os.rename("/skill/SKILL.md", "/skill/x.md"))
attempt("move out", lambda: shutil.move("/skill/SKILL.md", "/scratch/x.md"))
attempt("chmod", lambda: os.utime("/skill/SKILL.md", (0, 0)))
attempt("symlink", lambda: os.symlink("/etc/passwd", "/scratch/link"))
attempt("stdlib", lambda: open("/python/os.py", "a").write("x"))
print(json.dumps(out))
"#,
        ),
        ("data/table.csv", "a,b\n"),
    ]);
    let before = tree_of(skill.path());
    let r = run(&rt, request(&skill.files(), "scripts/deface.py", &[])).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let v = json_of(&r);
    // `move out` too: the copy into the scratch folder works, removing
    // the source does not.
    for (k, seen) in v.as_object().unwrap() {
        assert_eq!(seen, "PermissionError", "{k}: {v}");
    }
    assert_eq!(tree_of(skill.path()), before, "the skill folder changed");

    // A symbolic link out of the folder: its scripts are refused, naming it.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        skill.path().join("data/leak.txt"),
    )
    .unwrap();
    match SkillFiles::from_dir(skill.path()) {
        Err(ScriptRuntimeError::SymlinkOut { path, .. }) => assert_eq!(path, "data/leak.txt"),
        other => panic!("not refused: {other:?}"),
    }
    std::fs::remove_file(skill.path().join("data/leak.txt")).unwrap();
    std::os::unix::fs::symlink("table.csv", skill.path().join("data/alias.csv")).unwrap();
    let files = skill.files();
    assert!(
        files.has_file("data/alias.csv"),
        "a link inside is read as its file"
    );
    next_call_is_fine(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scratch_caps_end_in_enospc_naming_the_cap() {
    let Some(rt) = runtime() else { return };
    let token = format!("skillhost-flood-{}", std::process::id());
    let skill = SkillDir::new(&[
        (
            "scripts/many.py",
            r#"import errno, json, os, sys
made = 0
try:
    os.makedirs("many", exist_ok=True)
    for i in range(10000):
        with open(f"many/{sys.argv[1]}-{i}", "w") as f:
            f.write("x")
        made += 1
except OSError as e:
    print(json.dumps({"made": made, "errno": errno.errorcode.get(e.errno)}))
    sys.exit(2)
"#,
        ),
        (
            "scripts/big.py",
            r#"import errno, json, sys
chunk = b"\0" * (1 << 20)
written = 0
try:
    with open(f"{sys.argv[1]}.bin", "wb") as f:
        for _ in range(1024):
            f.write(chunk)
            written += len(chunk)
except OSError as e:
    print(json.dumps({"written": written, "errno": errno.errorcode.get(e.errno)}))
    sys.exit(3)
"#,
        ),
        (
            "scripts/sparse.py",
            r#"import errno, json, os, sys
out = {}
fd = os.open(f"{sys.argv[1]}.sparse", os.O_WRONLY | os.O_CREAT)
try:
    os.pwrite(fd, b"1", 1 << 40)
except OSError as e:
    out["pwrite"] = errno.errorcode.get(e.errno)
try:
    os.ftruncate(fd, 1 << 40)
except OSError as e:
    out["truncate"] = errno.errorcode.get(e.errno)
try:
    with open(f"{sys.argv[1]}.seek", "wb") as f:
        f.seek(1 << 40)
        f.write(b"1")
except OSError as e:
    out["seek"] = errno.errorcode.get(e.errno)
out["size"] = os.fstat(fd).st_size
print(json.dumps(out))
"#,
        ),
        (
            "scripts/names.py",
            r#"import errno, json, os
out = {}
for label, name in [("newline", "a\nb"), ("nul", "a\0b"), ("long", "n" * 4000),
                    ("bidi", "out/report\u202efdp.exe"),
                    ("dotdot", "../escaped.txt"), ("deep", "/".join(["d"] * 40))]:
    try:
        if label == "deep":
            os.makedirs(name)
        else:
            open(name, "w").write("x")
        out[label] = "made"
    except (OSError, ValueError) as e:
        out[label] = [type(e).__name__, errno.errorcode.get(getattr(e, "errno", None))]
print(json.dumps(out))
"#,
        ),
    ]);
    let files = skill.files();
    let r = run(&rt, request(&files, "scripts/many.py", &[&token])).await;
    assert_eq!(r.exit_code, 2, "{}", r.stderr);
    let v = json_of(&r);
    assert_eq!(v["errno"], "ENOSPC", "{v}");
    // The folders `out`, `.tmp` and `many` count too.
    assert_eq!(v["made"], skillhost::MAX_SCRATCH_FILES - 3);
    assert_eq!(
        r.scratch_limit,
        Some(ScratchLimit::Files {
            cap: skillhost::MAX_SCRATCH_FILES as u64
        })
    );

    let r = run(&rt, request(&files, "scripts/big.py", &[&token])).await;
    assert_eq!(r.exit_code, 3, "{}", r.stderr);
    let v = json_of(&r);
    // A write through a stream fails as EIO: componentize-py's preview1
    // adapter reports every stream failure so; the cap is the host's to
    // name (below), and a `pwrite` or a create gets ENOSPC.
    assert_eq!(v["errno"], "EIO", "{v}");
    assert_eq!(v["written"], skillhost::MAX_SCRATCH_BYTES);
    assert_eq!(
        r.scratch_limit,
        Some(ScratchLimit::Bytes {
            cap: skillhost::MAX_SCRATCH_BYTES
        })
    );

    let r = run(&rt, request(&files, "scripts/sparse.py", &[&token])).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    assert_eq!(
        json_of(&r),
        serde_json::json!({"pwrite": "ENOSPC", "truncate": "ENOSPC", "seek": "EIO", "size": 0})
    );

    let r = run(&rt, request(&files, "scripts/names.py", &[])).await;
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let v = json_of(&r);
    assert_eq!(
        v,
        serde_json::json!({
            "newline": ["OSError", "EINVAL"],
            "bidi": ["OSError", "EINVAL"],
            "nul": ["ValueError", null],
            "long": ["OSError", "ENAMETOOLONG"],
            "dotdot": ["PermissionError", "EPERM"],
            "deep": ["OSError", "ENOSPC"],
        })
    );
    assert_eq!(r.scratch_limit, Some(ScratchLimit::NameCharacters));

    nothing_named(&token);
    next_call_is_fine(&rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_output_ends_at_its_cap_and_too_many_results_are_named() {
    let Some(rt) = runtime() else { return };
    let skill = SkillDir::new(&[
        (
            "scripts/flood.py",
            "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n",
        ),
        ("scripts/report.py", "print('r' * (300 << 10))\n"),
        (
            "scripts/results.py",
            "for i in range(65):\n    open(f'out/r{i:02}.txt', 'w').write(str(i))\n",
        ),
        (
            "scripts/secret.py",
            "import sys\nprint('token is', sys.argv[1])\n",
        ),
    ]);
    let files = skill.files();
    let e = fails(&rt, request(&files, "scripts/flood.py", &[]), opts()).await;
    assert_eq!(e.trap_reason(), Some(TrapReason::OutputTooLarge), "{e}");
    assert!(e.to_string().contains("stdout"), "{e}");

    let r = run(&rt, request(&files, "scripts/report.py", &[])).await;
    assert!(r.stdout_truncated, "{} bytes", r.stdout.len());
    assert_eq!(r.stdout.len(), skillhost::SCRIPT_STDOUT_KEPT_BYTES);

    let e = fails(&rt, request(&files, "scripts/results.py", &[]), opts()).await;
    assert_eq!(e.trap_reason(), Some(TrapReason::OutputTooLarge), "{e}");
    assert!(
        e.to_string()
            .contains("65 files under out/, over the cap of 64"),
        "{e}"
    );

    let secret = "sk-live-0123456789";
    let mut o = opts();
    o.redact = Arc::from(vec![secret.to_string()]);
    let r = run_with(&rt, request(&files, "scripts/secret.py", &[secret]), o).await;
    assert_eq!(r.stdout, "token is [redacted]\n");
    next_call_is_fine(&rt).await;
}

// ---------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------

/// Every file under `dir` with its bytes.
fn tree_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// The command lines (NUL-separated) of this process's children.
fn children() -> Vec<String> {
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let path = p.path();
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        let parent = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        if parent == Some(me) {
            out.push(std::fs::read_to_string(path.join("cmdline")).unwrap_or_default());
        }
    }
    out
}

/// Asserts that nothing whose name holds `token` is in the temp folder
/// (the scripts named what they wrote with it), nor in the working folder.
fn nothing_named(token: &str) {
    let mut found = BTreeSet::new();
    for root in [std::env::temp_dir(), std::env::current_dir().unwrap()] {
        let mut stack = vec![(root, 0)];
        while let Some((d, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if e.file_name().to_string_lossy().contains(token) {
                    found.insert(p.clone());
                }
                if depth < 6 && e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    stack.push((p, depth + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "written to the host's disk: {found:?}");
}
