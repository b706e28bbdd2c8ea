//! Running the `skillhost` binary against a temp data dir, shared by the
//! CLI-level test files.

#![allow(dead_code)]

#[path = "../../../../tests/peers/database.rs"]
pub mod database;
pub mod oidc;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// `skillhost --data-dir DATA ARGS…` with no log or data-dir settings
/// inherited from the environment, ready to run or spawn. A data dir the
/// test made is made private first (0700, as the host makes its own): the
/// host warns on every command about one others can read (tested on its
/// own in `attack::private_files`).
pub fn command(data: &Path, args: &[&str]) -> Command {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(data)
        && meta.is_dir()
        && meta.permissions().mode() & 0o077 != 0
    {
        let _ = std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700));
    }
    raw_command(data, args)
}

/// [`command`] without touching the data dir's mode.
pub fn raw_command(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    cmd.arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_DATA");
    with_database(&mut cmd, data);
    with_shared_builds(&mut cmd);
    cmd
}

/// The build target folder of this test binary (`target/`).
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_skillhost"))
        .ancestors()
        .nth(2)
        .expect("the binary is in target/<profile>/")
        .to_path_buf()
}

/// Points what `cmd` builds and compiles at the caches the whole test run
/// shares, so each guest is built and each component compiled once per
/// run, not once per test: Rust guests in the target folder the build
/// scripts built the plugins in (`wasm-plugins`), Python and JavaScript
/// components in a build cache (`SKILLHOST_BUILD_CACHE`), compiled code in
/// the suites' compile cache (`SKILLHOST_COMPILE_CACHE`). A test about
/// the data dir's own compile cache removes the last.
pub fn with_shared_builds(cmd: &mut Command) {
    let target = target_dir();
    cmd.env("CARGO_TARGET_DIR", target.join("wasm-plugins"))
        .env(skillhost::BUILD_CACHE_ENV, target.join("test-build-cache"))
        .env(
            skillhost::COMPILE_CACHE_ENV,
            skillhost_test_plugins::COMPILE_CACHE_DIR,
        );
}

// --- the test matrix -------------------------------------------------------

thread_local! {
    /// The PostgreSQL database of the test running on this thread, in the
    /// `postgres` variant of [`on_each_database!`].
    static TEST_DATABASE: std::cell::RefCell<Option<std::sync::Arc<database::TestDatabase>>> =
        const { std::cell::RefCell::new(None) };
}

/// The database of each data dir a `postgres` variant used (a data dir's
/// first command comes from the test's own thread; later ones, from any
/// thread, find it here).
static DATA_DIR_DATABASES: std::sync::Mutex<
    Vec<(PathBuf, std::sync::Arc<database::TestDatabase>)>,
> = std::sync::Mutex::new(Vec::new());

/// Points `cmd` (a `skillhost` on `data`, or a client that starts one) at
/// the test's PostgreSQL database, in a `postgres` variant.
pub fn with_database(cmd: &mut Command, data: &Path) {
    let mut known = DATA_DIR_DATABASES.lock().unwrap_or_else(|e| e.into_inner());
    let db = match known.iter().find(|(d, _)| d == data) {
        Some((_, db)) => Some(db.clone()),
        None => TEST_DATABASE.with(|t| t.borrow().clone()).inspect(|db| {
            known.push((data.to_path_buf(), db.clone()));
        }),
    };
    match db {
        Some(db) => cmd.env("SKILLHOST_DATABASE", &db.url),
        None => cmd.env_remove("SKILLHOST_DATABASE"),
    };
}

/// A free loopback port (bound, then released for the next process to
/// take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The PostgreSQL database the data dir `data` runs on in a `postgres`
/// variant (`None` on SQLite).
pub fn database_of(data: &Path) -> Option<std::sync::Arc<database::TestDatabase>> {
    DATA_DIR_DATABASES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(d, _)| d == data)
        .map(|(_, db)| db.clone())
}

/// The MCP servers' configuration as stored for the data dir `data`: its
/// `mcp_servers.json` on SQLite; on PostgreSQL, the database's shared
/// document (see [`sealed_document`]).
pub fn stored_mcp_config(data: &Path) -> String {
    match database_of(data) {
        None => std::fs::read_to_string(data.join("mcp_servers.json")).expect("mcp_servers.json"),
        Some(db) => sealed_document(&db, &data.join("secrets.key"), "mcp_servers")
            .expect("the shared MCP configuration"),
    }
}

/// The document `name` of `db`'s `sealed_documents`, opened here with the
/// key in `key_file` (independently of the host: ChaCha20-Poly1305, the
/// document's name as associated data); `None` when there is none.
pub fn sealed_document(db: &database::TestDatabase, key_file: &Path, name: &str) -> Option<String> {
    assert!(
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_:-.".contains(c)),
        "{name}"
    );
    let row = db.sql(&format!(
        "SELECT encode(nonce, 'hex') || '|' || encode(sealed, 'hex') FROM sealed_documents \
         WHERE name = '{name}'"
    ));
    let (nonce, sealed) = row.split_once('|')?;
    let key = std::fs::read(key_file).expect("secrets.key");
    let key = aws_lc_rs::aead::LessSafeKey::new(
        aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::CHACHA20_POLY1305, &key).expect("key"),
    );
    let nonce =
        aws_lc_rs::aead::Nonce::try_assume_unique_for_key(&hex::decode(nonce).expect("hex"))
            .expect("nonce");
    let mut bytes = hex::decode(sealed).expect("hex");
    let aad = format!("skillhost-document\0{name}");
    let plain = key
        .open_in_place(
            nonce,
            aws_lc_rs::aead::Aad::from(aad.as_bytes()),
            &mut bytes,
        )
        .expect("the document opens under the data dir's key");
    Some(String::from_utf8(plain.to_vec()).expect("UTF-8"))
}

/// The `postgres` variant's database for the test `test` on this thread,
/// until the guard is dropped; `None` (the variant skips, saying why)
/// without a test server.
pub fn use_postgres(test: &str) -> Option<PostgresGuard> {
    let db = std::sync::Arc::new(database::fresh(test)?);
    TEST_DATABASE.with(|t| *t.borrow_mut() = Some(db.clone()));
    Some(PostgresGuard(db))
}

/// Ends a `postgres` variant: forgets its data dirs and drops its
/// database.
pub struct PostgresGuard(std::sync::Arc<database::TestDatabase>);

impl Drop for PostgresGuard {
    fn drop(&mut self) {
        TEST_DATABASE.with(|t| *t.borrow_mut() = None);
        let mut known = DATA_DIR_DATABASES.lock().unwrap_or_else(|e| e.into_inner());
        let used = known
            .iter()
            .any(|(_, db)| std::sync::Arc::ptr_eq(db, &self.0));
        known.retain(|(_, db)| !std::sync::Arc::ptr_eq(db, &self.0));
        drop(known);
        // A variant whose hosts all ran on SQLite would pass for nothing.
        assert!(
            used || std::thread::panicking(),
            "the postgres variant started no skillhost on its database"
        );
    }
}

/// A test run on each database the host keeps its state in (the test
/// matrix): `NAME::sqlite` on the data dir's SQLite file, `NAME::postgres`
/// on a fresh PostgreSQL database that every `skillhost` the test starts
/// (through [`command`], [`run_python_client`]) uses (skipped, saying why,
/// without a test server).
#[macro_export]
macro_rules! on_each_database {
    ($(#[$attr:meta])* fn $name:ident() $body:block) => {
        mod $name {
            use super::*;

            fn body() $body

            $(#[$attr])*
            fn sqlite() {
                body()
            }

            $(#[$attr])*
            fn postgres() {
                if let Some(_db) = common::use_postgres(stringify!($name)) {
                    body()
                }
            }
        }
    };
    ($(#[$attr:meta])* async fn $name:ident() $body:block) => {
        mod $name {
            use super::*;

            async fn body() $body

            $(#[$attr])*
            async fn sqlite() {
                body().await
            }

            $(#[$attr])*
            async fn postgres() {
                if let Some(_db) = common::use_postgres(stringify!($name)) {
                    body().await
                }
            }
        }
    };
}

/// Runs `skillhost --data-dir DATA ARGS…` (see [`command`]) to the end.
pub fn skillhost(data: &Path, args: &[&str]) -> Output {
    command(data, args).output().expect("run skillhost")
}

/// Runs each of `steps` (arguments to `skillhost`) in turn, failing the
/// test with the step and its stderr on the first that fails.
pub fn run_all(data: &Path, steps: &[&[&str]]) {
    for args in steps {
        let o = skillhost(data, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
}

/// The process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The process's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A copy of the folder `from` at `to`, without `__pycache__` (a fixture
/// a native python3 ran in may hold one).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read the folder") {
        let e = e.expect("entry");
        let p = e.path();
        if e.file_type().expect("type").is_dir() {
            if !p.ends_with("__pycache__") {
                copy_tree(&p, &to.join(e.file_name()));
            }
        } else {
            std::fs::copy(&p, to.join(e.file_name())).expect("copy");
        }
    }
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate sits in the repository")
        .to_path_buf()
}

/// The peers' Python (with the MCP SDK): `SKILLHOST_TEST_PYTHON`, else the
/// venv `tests/peers/install.sh` makes.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SKILLHOST_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let p = repo().join("target/peers/venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh",
        p.display()
    );
    p
}

/// A skill folder at `dir/name` holding the plugin at `plugin`'s manifest
/// (edited by `edit`) and its built component `wasm`.
pub fn skill_folder(
    dir: &Path,
    name: &str,
    plugin: &str,
    wasm: &str,
    edit: &dyn Fn(String) -> String,
) {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).expect("mkdir");
    let manifest =
        edit(std::fs::read_to_string(Path::new(plugin).join("skill.yaml")).expect("manifest"));
    std::fs::write(folder.join("skill.yaml"), &manifest).expect("write manifest");
    let component = skillhost::SkillManifest::parse(&manifest)
        .expect("valid manifest")
        .component
        .expect("component path");
    std::fs::copy(wasm, folder.join(component)).expect("copy component");
}

/// text-tools' manifest with `text.regex_replace` marked as changing data,
/// so a call needs confirmation.
pub fn regex_replace_mutates(manifest: String) -> String {
    let at = manifest
        .find("- name: text.regex_replace")
        .expect("regex_replace");
    let ro = at + manifest[at..].find("read_only: true").expect("read_only");
    format!(
        "{}read_only: false{}",
        &manifest[..ro],
        &manifest[ro + 15..]
    )
}

/// A `skillhost serve --http 127.0.0.1:0` child, killed (by its own pid)
/// when dropped, e.g. when a test fails before it stops the server.
pub struct HttpServer {
    /// The child process.
    pub child: Child,
    /// The port it listens on.
    pub port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `skillhost serve --http 127.0.0.1:0 --grace-secs GRACE` on
/// `data` and waits (at most 60 s) for the address it prints.
#[allow(dead_code)]
pub fn start_http(data: &Path, grace_secs: u64) -> HttpServer {
    start_http_with(data, grace_secs, &[])
}

/// [`start_http`] with more arguments for `serve`.
pub fn start_http_with(data: &Path, grace_secs: u64, extra: &[&str]) -> HttpServer {
    let grace = grace_secs.to_string();
    let mut args = vec!["serve", "--http", "127.0.0.1:0", "--grace-secs", &grace];
    args.extend_from_slice(extra);
    let mut child = command(data, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start skillhost serve --http");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("listening on http://") {
                let _ = tx.send(addr.to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server prints its address within 60 s");
    let port = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    HttpServer { child, port }
}

/// Runs `tests/peers/SCRIPT` (a Python MCP SDK client) with the skillhost
/// binary, `data` and `persona` and `mode` as its arguments; asserts it
/// succeeded and returns the JSON of its last stdout line.
pub fn run_python_client(
    script: &str,
    data: &Path,
    persona: &str,
    mode: &str,
) -> serde_json::Value {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/peers").join(script))
        .arg(env!("CARGO_BIN_EXE_skillhost"))
        .arg(data)
        .arg(persona)
        .arg(mode);
    with_database(&mut cmd, data);
    let o = cmd.output().expect("run the Python client");
    assert!(
        o.status.success(),
        "client failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"))
}

/// Runs `tests/peers/SCRIPT ARGS…` (an MCP Python SDK client) with the
/// peers' Python; asserts it succeeded and returns the JSON of its last
/// stdout line.
pub fn python_peer(script: &str, args: &[&str]) -> serde_json::Value {
    let o = Command::new(python())
        .arg(repo().join("tests/peers").join(script))
        .args(args)
        .output()
        .expect("run the Python client");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "client failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"))
}

/// A bundle of a json-tools copy at `version`, signed by `key` (packed in
/// a folder under `work`).
pub fn json_tools_bundle(work: &Path, key: &skillhost::SecretKey, version: &str) -> Vec<u8> {
    use skillhost_test_plugins as art;
    let dir = work.join(format!("json-tools-{version}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let manifest = std::fs::read_to_string(Path::new(art::JSON_TOOLS_DIR).join("skill.yaml"))
        .expect("manifest")
        .replace("version: 0.1.0", &format!("version: {version}"));
    std::fs::write(dir.join("skill.yaml"), manifest).expect("write manifest");
    std::fs::copy(art::JSON_TOOLS_WASM_PATH, dir.join("json_tools.wasm")).expect("copy wasm");
    skillhost::pack_dir(&dir, Some(key)).expect("pack").0
}

/// A data dir `WORK/data` whose settings list local skill folders under
/// `WORK/skills`: text-tools (with `text.regex_replace` marked as mutating,
/// so it needs confirmation) and, with `hostile`, the hostile skill.
/// Nothing is trusted or granted yet.
pub fn local_skills_data(work: &Path, hostile: bool) -> PathBuf {
    use skillhost_test_plugins as art;
    let skills = work.join("skills");
    skill_folder(
        &skills,
        "text-tools",
        art::TEXT_TOOLS_DIR,
        art::TEXT_TOOLS_WASM_PATH,
        &regex_replace_mutates,
    );
    let mut dirs = vec![skills.join("text-tools")];
    if hostile {
        skill_folder(
            &skills,
            "hostile",
            art::HOSTILE_DIR,
            art::HOSTILE_WASM_PATH,
            &|m| m,
        );
        dirs.push(skills.join("hostile"));
    }
    let data = work.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("settings.json"),
        serde_json::json!({ "skill_dirs": dirs }).to_string(),
    )
    .expect("settings");
    data
}

/// Copies the folders of the conformance fixtures' prompt and resource files
/// (`prompt/`, `resource/`) into the skill folder `dir`: a skill naming a
/// file it does not have fails to load.
pub fn copy_fixture_files(dir: &Path) {
    let src = Path::new(skillhost_test_plugins::CONFORMANCE_FIXTURES_DIR);
    for sub in ["prompt", "resource"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
        for entry in std::fs::read_dir(src.join(sub)).expect("a fixture folder") {
            let entry = entry.expect("an entry");
            std::fs::copy(entry.path(), dir.join(sub).join(entry.file_name()))
                .expect("copy a fixture file");
        }
    }
}
