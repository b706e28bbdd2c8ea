//! The author's path in each language, as a new author runs it: `new`,
//! `build`, `check`, `keygen`, `pack`, `trust add`, `install`, `call`. The
//! Python and JavaScript toolchains are the pinned ones
//! tests/peers/install.sh puts in target/peers. And what `build` says when
//! a toolchain or the wasm target is missing.

use crate::common;
use common::{copy_tree, repo, skillhost, stderr};

use std::path::{Path, PathBuf};
use std::process::Output;

fn componentize_py() -> PathBuf {
    repo().join("target/peers/venv/bin/componentize-py")
}

fn componentize_js() -> PathBuf {
    repo().join("target/peers/node/node_modules/.bin/componentize-js")
}

/// `skillhost` with the guest toolchains of target/peers.
fn run_with_toolchains(data: &Path, args: &[&str]) -> Output {
    common::command(data, args)
        .env("SKILLHOST_COMPONENTIZE_PY", componentize_py())
        .env("SKILLHOST_COMPONENTIZE_JS", componentize_js())
        .output()
        .expect("run skillhost")
}

/// From nothing to a signed, installed skill answering a call.
fn author_path(lang: &str) {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let w = |p: &str| work.path().join(p).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let o = run_with_toolchains(&data, args);
        assert!(o.status.success(), "{lang} {args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let name = format!("hello-{lang}");
    let stem = name.replace('-', "_");
    run(&["new", &name, "--lang", lang, "--dir", &w("")]);
    let dir = w(&name);
    // Nothing in the folder names a path of this machine.
    let root = repo().display().to_string();
    for entry in walk(Path::new(&dir)) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(
            !text.contains(&root) && !text.contains(work.path().to_str().unwrap()),
            "{} names a local path",
            entry.display()
        );
    }
    run(&["build", &dir]);
    assert!(run(&["check", &dir]).contains("1/1 examples passed"));
    sources_and_component_stay_in_step(lang, Path::new(&dir), &data);
    run(&["keygen", "--out", &w("alice")]);
    run(&[
        "pack",
        &dir,
        "--key",
        &w("alice.key"),
        "--out",
        &w("s.skill"),
    ]);
    run(&["trust", "add", &w("alice.pub"), "--name", "alice"]);
    assert!(run(&["install", &w("s.skill")]).contains(&format!("installed {name}@0.1.0")));
    let out = run(&[
        "call",
        &format!("{stem}.greet"),
        "--args",
        r#"{"name":"Ada"}"#,
    ]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        serde_json::json!({"greeting": "Hello, Ada!"})
    );
    // A blank name is the skill's own InvalidInput, named as such.
    let o = run_with_toolchains(
        &data,
        &[
            "call",
            &format!("{stem}.greet"),
            "--args",
            r#"{"name":" "}"#,
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("invalid-input") && stderr(&o).contains("field `name`"),
        "{}",
        stderr(&o)
    );
}

/// A rebuild of unchanged sources gives the same component (for Python
/// and JavaScript, from the build cache); a source edited after the build
/// makes `check` and `pack` refuse the component, naming the file and
/// `skillhost build`, until the sources are as built again.
fn sources_and_component_stay_in_step(lang: &str, dir: &Path, data: &Path) {
    let d = dir.to_str().unwrap();
    let component = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "wasm"))
        .expect("the built component");
    let built = std::fs::read(&component).unwrap();
    // Without a build cache too: the component in place is the build of
    // these sources (its record says so), so it stays as it is.
    let o = common::command(data, &["-v", "build", d])
        .env("SKILLHOST_COMPONENTIZE_PY", componentize_py())
        .env("SKILLHOST_COMPONENTIZE_JS", componentize_js())
        .env_remove(skillhost::BUILD_CACHE_ENV)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    if lang != "rust" {
        assert!(
            stderr(&o).contains("is up to date with its sources"),
            "the rebuild ran the toolchain again: {}",
            stderr(&o)
        );
    }
    assert!(
        std::fs::read(&component).unwrap() == built,
        "a rebuild of unchanged sources changed the component"
    );
    // --force builds again (here from the run's build cache).
    let o = run_with_toolchains(data, &["-v", "build", "--force", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    if lang != "rust" {
        assert!(
            !stderr(&o).contains("is up to date") && stderr(&o).contains("was built before"),
            "{}",
            stderr(&o)
        );
    }
    let source = dir.join(match lang {
        "python" => "app.py",
        "js" => "app.js",
        _ => "src/lib.rs",
    });
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(&source, format!("{text}\n// edited\n")).unwrap();
    let edited = source
        .strip_prefix(dir)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    for args in [
        vec!["check", d],
        vec!["pack", d, "--no-check", "--out", "/dev/null"],
    ] {
        let o = run_with_toolchains(data, &args);
        assert!(!o.status.success(), "{args:?} took a stale component");
        let out = format!("{}{}", common::stdout(&o), stderr(&o));
        assert!(
            out.contains("is older than its sources")
                && out.contains(&format!("({edited} changed since it was built)"))
                && out.contains(&format!("run `skillhost build {d}` first")),
            "{args:?}: {out}"
        );
    }
    std::fs::write(&source, text).unwrap();
    let o = run_with_toolchains(data, &["check", d]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if !p.ends_with("target") && !p.ends_with("node_modules") {
                out.extend(walk(&p));
            }
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn python_author_path() {
    author_path("python");
}

/// A Python tool's warm-up call that fails fails the build, naming the
/// tool and the skill's own message; nothing is placed.
#[test]
fn a_failing_python_warm_up_fails_the_build_naming_the_tool() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let dir = work.path().join("cold-start");
    let o = run_with_toolchains(
        &data,
        &[
            "new",
            "cold-start",
            "--lang",
            "python",
            "--dir",
            work.path().to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let app = dir.join("app.py");
    let text = std::fs::read_to_string(&app).unwrap();
    assert!(text.contains(r#"warm_up=[{"name": "Ada"}]"#), "{text}");
    std::fs::write(
        &app,
        text.replace(r#"warm_up=[{"name": "Ada"}]"#, r#"warm_up=[{"name": " "}]"#),
    )
    .unwrap();
    let o = run_with_toolchains(&data, &["build", dir.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(r#"warm-up of `cold_start.greet` with {"name": " "} failed"#)
            && err.contains("field `name`: must not be blank"),
        "{err}"
    );
    assert!(!dir.join("cold_start.wasm").exists());
}

#[test]
fn javascript_author_path() {
    author_path("js");
}

#[test]
fn rust_skill_vendors_its_sdk_and_names_no_local_path() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let o = skillhost(
        &data,
        &["new", "vendored", "--dir", work.path().to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = work.path().join("vendored");
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains(r#"path = "sdk/skillhost-guest""#), "{cargo}");
    for f in [
        "sdk/skillhost-guest/Cargo.toml",
        "sdk/skillhost-guest/src/lib.rs",
        "sdk/wit/skill.wit",
        "rust-toolchain.toml",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let toolchain = std::fs::read_to_string(dir.join("rust-toolchain.toml")).unwrap();
    let pinned = std::fs::read_to_string(repo().join("rust-toolchain.toml")).unwrap();
    let channel = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("channel"))
            .map(str::to_string)
    };
    assert_eq!(channel(&toolchain), channel(&pinned), "{toolchain}");
    assert!(toolchain.contains("wasm32-wasip2"), "{toolchain}");
    let sdk = std::fs::read_to_string(dir.join("sdk/skillhost-guest/Cargo.toml")).unwrap();
    assert!(!sdk.contains(".workspace"), "{sdk}");
    assert!(sdk.contains("rust-version = \"1.95\""), "{sdk}");
    assert!(sdk.contains("version = \"0.1.0\""), "{sdk}");
    let root = repo().display().to_string();
    for entry in walk(&dir) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(&root), "{} names {root}", entry.display());
    }
}

#[test]
fn build_names_the_missing_toolchain_and_how_to_install_it() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let empty_path = work.path().join("bin");
    std::fs::create_dir_all(&empty_path).unwrap();
    for (lang, words) in [
        ("python", "pip install componentize-py==0.25.1"),
        (
            "js",
            "npm install --save-dev @bytecodealliance/componentize-js@0.23.0",
        ),
    ] {
        let name = format!("missing-{lang}");
        let o = skillhost(
            &data,
            &[
                "new",
                &name,
                "--lang",
                lang,
                "--dir",
                work.path().to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let o = common::command(&data, &["build", work.path().join(&name).to_str().unwrap()])
            .env_remove("SKILLHOST_COMPONENTIZE_PY")
            .env_remove("SKILLHOST_COMPONENTIZE_JS")
            .env("PATH", &empty_path)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains(words), "{lang}: {}", stderr(&o));
        // Nothing half-built is left behind.
        let left: Vec<_> = std::fs::read_dir(work.path().join(&name))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".wasm"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // componentize-js found, but no Node.js to run it: said as such, not
    // as the shell's "env: node: No such file or directory".
    let o = common::command(
        &data,
        &["build", work.path().join("missing-js").to_str().unwrap()],
    )
    .env("SKILLHOST_COMPONENTIZE_JS", componentize_js())
    .env("PATH", &empty_path)
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Node.js (`node`, which runs componentize-js) is not installed")
            && stderr(&o).contains("Node.js 20 or later"),
        "{}",
        stderr(&o)
    );
    // A Rust toolchain without the wasm32-wasip2 target: said before cargo
    // runs, with the command that adds it.
    let o = skillhost(
        &data,
        &["new", "no-target", "--dir", work.path().to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let sysroot = work.path().join("sysroot");
    std::fs::create_dir_all(sysroot.join("lib/rustlib/x86_64-unknown-linux-gnu")).unwrap();
    let fake = work.path().join("fake-rustc");
    std::fs::write(&fake, format!("#!/bin/sh\necho {}\n", sysroot.display())).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = common::command(
        &data,
        &["build", work.path().join("no-target").to_str().unwrap()],
    )
    .env("RUSTC", &fake)
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rustup target add wasm32-wasip2"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn install_compiles_once_and_no_call_pays_compilation() {
    // `install` compiles and caches the component; the calls after it,
    // each a new process, take it from the cache. (A Rust component: the
    // cache does not care about the guest's language, and a Python one
    // would spend a minute of CI compiling what this proves in seconds.)
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let bundle = work.path().join("json.skill");
    // plugins/json-tools with the component the test artifacts built from it.
    let skill = work.path().join("json-tools");
    std::fs::create_dir(&skill).unwrap();
    std::fs::copy(
        Path::new(skillhost_test_plugins::JSON_TOOLS_DIR).join("skill.yaml"),
        skill.join("skill.yaml"),
    )
    .unwrap();
    std::fs::copy(
        skillhost_test_plugins::JSON_TOOLS_WASM_PATH,
        skill.join("json_tools.wasm"),
    )
    .unwrap();
    let o = run_with_toolchains(
        &work.path().join("pack-data"),
        &[
            "pack",
            skill.to_str().unwrap(),
            "--no-check",
            "--out",
            bundle.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = common::command(
        &data,
        &[
            "-v",
            "install",
            bundle.to_str().unwrap(),
            "--allow-untrusted",
            "--replace-builtin",
        ],
    )
    .env_remove(skillhost::COMPILE_CACHE_ENV)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("compiled the component"),
        "{}",
        stderr(&o)
    );
    let cached = || -> Vec<_> {
        std::fs::read_dir(data.join("cache/components"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .map(|e| (e.file_name(), e.metadata().unwrap().modified().unwrap()))
            .collect()
    };
    let after_install = cached();
    assert_eq!(after_install.len(), 1, "{after_install:?}");
    let o = skillhost(&data, &["skills", "trust", "json-tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for _ in 0..2 {
        let o = common::command(
            &data,
            &[
                "-vv",
                "call",
                "json.query",
                "--args",
                r#"{"document":{"a":[1,2]},"pointer":"/a/1"}"#,
            ],
        )
        .env_remove(skillhost::COMPILE_CACHE_ENV)
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            !stderr(&o).contains("compiled the component"),
            "{}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("took the compiled component from the cache"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(cached(), after_install);
}

#[test]
fn sources_add_list_remove_without_editing_settings() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let run = |args: &[&str]| {
        let o = skillhost(&data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let o = skillhost(
        &data,
        &["new", "local-one", "--dir", work.path().to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = work.path().join("local-one");
    assert!(run(&["sources", "list"]).contains("no local skill folders"));
    // Refused, each with a message naming what was wrong, nothing written.
    for (arg, words) in [
        (work.path().join("nowhere"), "no folder"),
        (work.path().join("data"), "not a skill folder"),
    ] {
        let o = skillhost(&data, &["sources", "add", arg.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains(words), "{}", stderr(&o));
    }
    assert!(run(&["sources", "list"]).contains("no local skill folders"));
    // Added through a relative-looking path with `..`: stored absolute.
    let roundabout = dir.join("..").join("local-one");
    let added = run(&["sources", "add", roundabout.to_str().unwrap()]);
    let canonical = dir.canonicalize().unwrap();
    assert!(added.contains(canonical.to_str().unwrap()), "{added}");
    let o = skillhost(&data, &["sources", "add", dir.to_str().unwrap()]);
    assert!(stderr(&o).contains("a source already"), "{}", stderr(&o));
    let listed: Vec<PathBuf> = serde_json::from_str(&run(&["sources", "list", "--json"])).unwrap();
    assert_eq!(listed, vec![canonical.clone()]);
    // Its skill is listed (local, untrusted) without a restart.
    let skills = run(&["skills", "list", "--json"]);
    assert!(skills.contains("\"local-one\""), "{skills}");
    let settings = std::fs::read_to_string(data.join("settings.json")).unwrap();
    assert!(settings.contains("skill_dirs"), "{settings}");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(data.join("settings.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Removed; removing again says it is not a source.
    run(&["sources", "remove", dir.to_str().unwrap()]);
    let o = skillhost(&data, &["sources", "remove", dir.to_str().unwrap()]);
    assert!(stderr(&o).contains("is not a source"), "{}", stderr(&o));
    assert!(!run(&["skills", "list", "--json"]).contains("\"local-one\""));
    // The folder itself is untouched.
    assert!(dir.join("skill.yaml").is_file());
}

/// A new skill of `lang` named `name` in `work`, and its folder.
fn new_skill(work: &Path, data: &Path, name: &str, lang: &str) -> PathBuf {
    let o = run_with_toolchains(
        data,
        &["new", name, "--lang", lang, "--dir", work.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    work.join(name)
}

/// `skillhost build DIR` that fails: its one line on stderr, which names
/// none of the toolchain's insides (a Node.js or Rust stack, the build's
/// scratch folder).
fn failed_build(data: &Path, dir: &Path) -> String {
    let o = run_with_toolchains(data, &["build", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "more than one line: {err}"
    );
    for inside in [
        "    at ",
        "Stack backtrace",
        "skillhost-build-",
        "componentize.js",
        "site-packages",
    ] {
        assert!(!err.contains(inside), "{inside:?} in {err}");
    }
    err
}

/// A syntax error in app.js, and one in a module it imports, name the file,
/// the line and column and what is wrong.
#[test]
fn a_javascript_build_error_names_file_line_and_message() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let dir = new_skill(work.path(), &data, "broken-js", "js");
    let app = std::fs::read_to_string(dir.join("app.js")).unwrap();
    let (line, _) = app
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("function") || l.contains("=>"))
        .expect("a function in the template");
    let mut broken: Vec<String> = app.lines().map(str::to_string).collect();
    broken.insert(line, "const oops = (1 + ;".into());
    std::fs::write(dir.join("app.js"), broken.join("\n")).unwrap();
    let err = failed_build(&data, &dir);
    assert!(
        err.contains(&format!("app.js:{}:", line + 1)) && err.contains("Unexpected token"),
        "{err}"
    );

    // Fixed, but a module it imports is broken.
    std::fs::write(
        dir.join("app.js"),
        format!("import {{ shout }} from \"./helper.js\";\n{app}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("helper.js"),
        "export function shout(s) {\n  return { text: s.toUpperCase() ;\n}\n",
    )
    .unwrap();
    let err = failed_build(&data, &dir);
    assert!(
        err.contains("helper.js:2:") && err.contains("SyntaxError"),
        "{err}"
    );
    assert!(!dir.join("broken_js.wasm").exists());
}

/// A syntax error in a module app.py imports, and an import of a package
/// the skill does not have, name the file, the line and what is wrong, in
/// one line (not the toolchain's Rust backtrace).
#[test]
fn a_python_build_error_names_file_line_and_message() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let dir = new_skill(work.path(), &data, "broken-py", "python");
    let app = std::fs::read_to_string(dir.join("app.py")).unwrap();
    let at = app
        .find("import skillhost\n")
        .expect("the template imports the SDK");
    let lines_before = app[..at].lines().count();
    std::fs::write(
        dir.join("app.py"),
        format!("{}import helper\n{}", &app[..at], &app[at..]),
    )
    .unwrap();
    std::fs::write(dir.join("helper.py"), "def shout(s:\n    return s\n").unwrap();
    let err = failed_build(&data, &dir);
    assert!(
        err.contains("helper.py:1:") && err.contains("SyntaxError"),
        "{err}"
    );

    std::fs::remove_file(dir.join("helper.py")).unwrap();
    std::fs::write(
        dir.join("app.py"),
        format!("{}import tabulate\n{}", &app[..at], &app[at..]),
    )
    .unwrap();
    let err = failed_build(&data, &dir);
    assert!(
        err.contains(&format!("app.py:{}:", lines_before + 1))
            && err.contains("ModuleNotFoundError: No module named 'tabulate'"),
        "{err}"
    );
    assert!(!dir.join("broken_py.wasm").exists());
}

/// docs/writing-a-skill.md, "Using packages", for Python: a pure-Python
/// package vendored into the skill's `vendor/` folder (here `h11`, copied
/// from the test peers' Python as `pip install --target vendor` would put
/// it: the tests reach no package index) is imported, built in and called;
/// a native extension module in the folder is refused before anything is
/// built, naming the file.
#[test]
fn a_python_skill_uses_a_vendored_pure_python_package() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let dir = new_skill(work.path(), &data, "vendored-py", "python");
    let site = std::fs::read_dir(repo().join("target/peers/venv/lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("h11").is_dir())
        .expect("h11 in the peers' Python");
    copy_tree(&site.join("h11"), &dir.join("vendor/h11"));
    let app = std::fs::read_to_string(dir.join("app.py")).unwrap();
    let app = app
        .replacen("import skillhost\n", "import h11\n\nimport skillhost\n", 1)
        .replacen(
            r#"    return {"greeting": f"Hello, {args.name}!"}"#,
            r#"    request = h11.Request(method="GET", target=f"/hello/{args.name}", headers=[("Host", "x")])
    sent = h11.Connection(h11.CLIENT).send(request)
    return {"greeting": f"Hello, {args.name}!", "request": sent.decode().splitlines()[0]}"#,
            1,
        );
    assert!(app.contains("h11.Connection"), "{app}");
    std::fs::write(dir.join("app.py"), app).unwrap();
    let yaml = std::fs::read_to_string(dir.join("skill.yaml"))
        .unwrap()
        .replace(
            "greeting: {type: string}",
            "greeting: {type: string}\n        request: {type: string}",
        )
        .replace(
            r#"output: {greeting: "Hello, world!"}"#,
            r#"output: {greeting: "Hello, world!", request: "GET /hello/world HTTP/1.1"}"#,
        );
    std::fs::write(dir.join("skill.yaml"), yaml).unwrap();
    let d = dir.to_str().unwrap();
    for args in [vec!["build", d], vec!["check", d]] {
        let o = run_with_toolchains(&data, &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = run_with_toolchains(
        &data,
        &[
            "call",
            "--skill",
            d,
            "vendored_py.greet",
            "--args",
            r#"{"name": "Ada"}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["request"], "GET /hello/Ada HTTP/1.1", "{out}");

    // A native extension for this machine cannot load in the component.
    let native = dir.join("vendor/h11/_speedups.cpython-311-x86_64-linux-gnu.so");
    std::fs::write(&native, b"\x7fELF\x02\x01\x01\0rest of a shared object").unwrap();
    let err = failed_build(&data, &dir);
    assert!(
        err.contains("vendor/h11/_speedups.cpython-311-x86_64-linux-gnu.so")
            && err.contains("native extension"),
        "{err}"
    );
}

/// docs/writing-a-skill.md, "Using packages", for JavaScript: a package
/// from `node_modules` (here one written there, as `npm install` would
/// put it) bundled with the skill's handlers into one module by a bundler
/// (rolldown, which tests/peers/install.sh installs with componentize-js's
/// tools) before `skillhost build`.
#[test]
fn a_javascript_skill_uses_a_bundled_package() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let dir = new_skill(work.path(), &data, "bundled-js", "js");
    let package = dir.join("node_modules/shout-case");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(
        package.join("package.json"),
        r#"{"name": "shout-case", "version": "1.0.0", "type": "module", "main": "index.js"}"#,
    )
    .unwrap();
    std::fs::write(
        package.join("index.js"),
        "export function shout(s) {\n  return s.toUpperCase() + \"!\";\n}\n",
    )
    .unwrap();
    let app = std::fs::read_to_string(dir.join("app.js")).unwrap();
    let handlers = app
        .replace("\"./skillhost.js\"", "\"../skillhost.js\"")
        .replacen(
            "import {",
            "import { shout } from \"shout-case\";\nimport {",
            1,
        )
        .replace(
            "return { greeting: `Hello, ${name}!` };",
            "return { greeting: `Hello, ${name}!`, loud: shout(name) };",
        );
    assert!(handlers.contains("shout(name)"), "{handlers}");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/app.js"), handlers).unwrap();
    let yaml = std::fs::read_to_string(dir.join("skill.yaml"))
        .unwrap()
        .replace(
            "greeting: {type: string}",
            "greeting: {type: string}\n        loud: {type: string}",
        )
        .replace(
            r#"output: {greeting: "Hello, world!"}"#,
            r#"output: {greeting: "Hello, world!", loud: "WORLD!"}"#,
        );
    std::fs::write(dir.join("skill.yaml"), yaml).unwrap();
    // npx rolldown src/app.js --file app.js --format esm
    let peers = repo().join("target/peers/node/node_modules");
    let o = std::process::Command::new(peers.join("node/bin/node"))
        .arg(peers.join("rolldown/bin/cli.mjs"))
        .args(["src/app.js", "--file", "app.js", "--format", "esm"])
        .current_dir(&dir)
        .output()
        .expect("run rolldown");
    assert!(o.status.success(), "{}", stderr(&o));
    let bundled = std::fs::read_to_string(dir.join("app.js")).unwrap();
    assert!(
        bundled.contains("toUpperCase") && !bundled.contains("from \"shout-case\""),
        "{bundled}"
    );
    let d = dir.to_str().unwrap();
    for args in [vec!["build", d], vec!["check", d]] {
        let o = run_with_toolchains(&data, &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = run_with_toolchains(
        &data,
        &[
            "call",
            "--skill",
            d,
            "bundled_js.greet",
            "--args",
            r#"{"name": "Ada"}"#,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out["loud"], "ADA!", "{out}");
}
