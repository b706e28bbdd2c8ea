//! The command lines of the interpreters and launchers the policy knows,
//! read the way each program reads them, to find arguments that run code
//! written in the command line itself (or read from stdin, which the host
//! writes), and the command a launcher would start.
//!
//! Each reader walks the options up to the point where the program stops
//! reading its own options — the script, the module, the package or
//! command it launches, or `--` — and leaves the rest to the program it
//! runs. An option a reader does not know may or may not take the next
//! argument as its value; both readings are checked, so a value option
//! added in a later release cannot hide an inline-code flag behind it.

use super::{Checker, Problem, RUN_A_FILE};

/// How deep the policy follows a launcher into the command it launches
/// (`npx uv run python …`). Real servers need two levels at most; the
/// bound keeps a crafted chain from making the check recurse without end.
pub(super) const MAX_LAUNCH_DEPTH: usize = 4;

/// How many options unknown to a reader one command line may have. Each
/// may double the readings checked (it may or may not take a value); the
/// bound keeps that at 2^8 readings of one short command line at worst.
pub(super) const MAX_UNKNOWN_OPTIONS: usize = 8;

/// The verdict on a command line.
pub(super) type Verdict = Result<(), Problem>;

fn refuse(arg: impl Into<String>, why: impl Into<String>) -> Verdict {
    refuse_with(arg, why, RUN_A_FILE)
}

/// A refusal whose advice is `fix` rather than [`RUN_A_FILE`].
fn refuse_with(arg: impl Into<String>, why: impl Into<String>, fix: &'static str) -> Verdict {
    Err(Problem::Arg {
        arg: Some(arg.into()),
        why: why.into(),
        fix,
        via: None,
    })
}

fn refuse_without_arg(why: impl Into<String>) -> Verdict {
    Err(Problem::Arg {
        arg: None,
        why: why.into(),
        fix: RUN_A_FILE,
        via: None,
    })
}

/// Names `program` as the one a launcher would run in a refusal of its
/// arguments (the innermost program, when launchers nest).
pub(super) fn via(program: &str, verdict: Verdict) -> Verdict {
    verdict.map_err(|p| match p {
        Problem::Arg {
            arg,
            why,
            fix,
            via: None,
        } => Problem::Arg {
            arg,
            why,
            fix,
            via: Some(program.to_owned()),
        },
        other => other,
    })
}

const PY_INLINE: &str = "runs inline code (python -c: the program is on the command line)";
const PY_NO_SCRIPT: &str =
    "has no script to run, so python would read its program from stdin (which the host writes)";
const STDIN_PROGRAM: &str = "reads the program from stdin (which the host writes)";
const INTERACTIVE: &str = "opens an interactive prompt that reads code from stdin";
const JS_INLINE: &str = "runs inline code (--eval/--print: the program is on the command line)";
const JS_NO_SCRIPT: &str =
    "has no script to run, so it would read its program from stdin (which the host writes)";
const DEBUGGER: &str =
    "opens a debugger port through which anyone who reaches it runs code in the server";
const REMOVE_IT: &str = "remove it";
const ENV_FILE: &str = "loads environment variables (NODE_OPTIONS, LD_PRELOAD and the like) from a file, around the `env` policy";
const SET_ENV: &str = "set the variables the server needs in `env` instead";
const DATA_URL: &str = "is inline code (a data: or blob: URL)";
const PRELOAD_URL: &str = "preloads code from a URL (data: is inline code, http: is remote code)";
const PRELOAD_A_FILE: &str = "preload a file or a package instead";
const SHELL_INLINE: &str = "runs an inline command line (sh -c)";
const SHELL_STDIN: &str = "reads commands from stdin (which the host writes)";
const SHELL_NO_SCRIPT: &str =
    "has no script to run, so the shell would read commands from stdin (which the host writes)";
const NPX_CALL: &str = "runs a shell command line (npm exec --call)";
const NPX_NO_COMMAND: &str = "has no command to run, so npm exec would open a shell reading commands from stdin (which the host writes)";
const EVAL_SUBCOMMAND: &str = "runs inline code given on the command line";
const TOO_MANY_UNKNOWN: &str = "comes after too many options the policy does not know to tell which argument is the program; drop some, or write them as --option=value";

/// The interpreters and launchers the policy reads the arguments of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `python`, `python3`, `python3.12`, `pypy3`, …
    Python,
    /// `node`, `nodejs`, `node22`, …
    Node,
    Bun,
    Deno,
    /// `npx` (npm's `exec` with its own option handling).
    Npx,
    /// `npm` (only `npm exec`/`npm x` launch a command).
    Npm,
    Bunx,
    /// `uvx` (= `uv tool run`).
    Uvx,
    Uv,
    /// POSIX-style shells: `sh`, `bash`, `dash`, `zsh`, `ksh`, `mksh`,
    /// `ash`, `yash`, `csh`, `tcsh`.
    Shell,
    Fish,
}

/// Whether `name` is a Python interpreter's file name: `python`, `pypy`,
/// optionally followed by a version (`3`, `3.12`) and a build suffix
/// (`t` free-threaded, `d` debug, `m`).
pub(super) fn is_python_name(name: &str) -> bool {
    ["python", "pypy"].iter().any(|p| {
        name.strip_prefix(p).is_some_and(|rest| {
            let rest = rest.strip_suffix(['t', 'd', 'm']).unwrap_or(rest);
            rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        })
    })
}

fn is_node_name(name: &str) -> bool {
    name == "nodejs"
        || name
            .strip_prefix("node")
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
}

/// The kind of the program whose file name is `name`, if the policy reads
/// its arguments.
pub(super) fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        _ if is_python_name(name) => Kind::Python,
        _ if is_node_name(name) => Kind::Node,
        "bun" => Kind::Bun,
        "deno" => Kind::Deno,
        "npx" => Kind::Npx,
        "npm" => Kind::Npm,
        "bunx" => Kind::Bunx,
        "uvx" => Kind::Uvx,
        "uv" => Kind::Uv,
        "sh" | "bash" | "rbash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "yash" | "csh"
        | "tcsh" => Kind::Shell,
        "fish" => Kind::Fish,
        _ => return None,
    })
}

/// Checks `args` as the arguments of a program of kind `k`.
pub(super) fn check(cx: &Checker<'_>, k: Kind, args: &[String], depth: usize) -> Verdict {
    let mut budget = MAX_UNKNOWN_OPTIONS;
    match k {
        Kind::Python => python(cx, args, depth),
        Kind::Node => node(args, &mut budget),
        Kind::Bun => bun(cx, args, depth, &mut budget),
        Kind::Deno => deno(cx, args, depth, &mut budget),
        Kind::Npx => npx(cx, args, 0, depth, &mut budget),
        Kind::Npm => npm(cx, args, depth, &mut budget),
        Kind::Bunx => bunx(cx, args, depth, &mut budget),
        Kind::Uvx => uvx(cx, args, depth, &mut budget),
        Kind::Uv => uv(cx, args, depth, &mut budget),
        Kind::Shell => shell(args),
        Kind::Fish => fish(args),
    }
}

// ---------------------------------------------------------------- helpers

/// `--name=value` → (`--name`, `value`); `-x=value` likewise.
fn split_eq(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (arg, None),
    }
}

/// Whether `path` names the program's own stdin rather than a file.
fn is_stdin_path(path: &str) -> bool {
    let fd_path = |rest: &str| {
        rest.split_once("/fd/").is_some_and(|(who, fd)| {
            (who == "self" || who == "thread-self" || who.bytes().all(|b| b.is_ascii_digit()))
                && !fd.is_empty()
        })
    };
    path == "/dev/stdin"
        || path
            .strip_prefix("/dev/fd/")
            .is_some_and(|fd| !fd.is_empty())
        || path.strip_prefix("/proc/").is_some_and(fd_path)
}

/// The scheme of a URL-looking argument (`data:…` → `data`), lowercased;
/// `None` for paths, package names and one-letter "schemes" (Windows
/// drive letters).
fn url_scheme(arg: &str) -> Option<String> {
    let (scheme, _) = arg.split_once(':')?;
    let mut bytes = scheme.bytes();
    let first = bytes.next()?;
    (scheme.len() > 1
        && first.is_ascii_alphabetic()
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b)))
    .then(|| scheme.to_ascii_lowercase())
}

/// Whether `arg` is code written inline as a URL.
fn is_inline_url(arg: &str) -> bool {
    matches!(
        url_scheme(arg).as_deref(),
        Some("data" | "blob" | "javascript")
    )
}

/// A script argument: a file (or, for the JavaScript runtimes, a URL),
/// not stdin and not inline code.
fn script(arg: &str) -> Verdict {
    if arg == "-" || is_stdin_path(arg) {
        refuse(arg, STDIN_PROGRAM)
    } else if is_inline_url(arg) {
        refuse(arg, DATA_URL)
    } else {
        Ok(())
    }
}

/// Whether `budget` allows one more unknown option; else the refusal.
fn spend(budget: &mut usize, arg: &str) -> Verdict {
    if *budget == 0 {
        return refuse(arg, TOO_MANY_UNKNOWN);
    }
    *budget -= 1;
    Ok(())
}

/// `name@version` → `name` (a scoped `@scope/name@1` keeps its scope).
fn strip_version(spec: &str) -> &str {
    let from = usize::from(spec.starts_with('@'));
    match spec[from..].find('@') {
        Some(at) => &spec[..from + at],
        None => spec,
    }
}

/// How a launcher reads the command it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// npx, bunx, `bun run`, `deno x`: a bare name is a program found on
    /// `PATH` (or `node_modules/.bin`) or a package's command; an absolute
    /// path is run as a program; any other spec (`@scope/pkg`,
    /// `user/repo`, `./folder`, a URL) is a package.
    Npm,
    /// `uv run`: a bare name is a program found on `PATH` or in the
    /// project's environment; a path is run as a program.
    Command,
    /// uvx: a package, or uv's own Python (`python`, `python@3.12`).
    Packages,
}

/// The command a launcher starts. An interpreter the policy knows is read
/// with its grammar, wherever it comes from (`npx node@20 -e …` installs
/// node and runs it); a path, or a name the launcher would find on
/// `PATH`, must pass the policy as if it were the server's command; any
/// other name or spec is a package, which is what launchers are for.
fn launched(
    cx: &Checker<'_>,
    command: &str,
    rest: &[String],
    depth: usize,
    reach: Reach,
) -> Verdict {
    if command == "-" {
        return refuse(command, STDIN_PROGRAM);
    }
    let base = strip_version(command);
    if reach == Reach::Packages && (is_python_name(base) || matches!(base, "cpython" | "graalpy")) {
        // uv's own interpreter: its arguments, not the allowlist, decide.
        return via(base, python(cx, rest, depth + 1));
    }
    if command.starts_with('/') {
        return cx.launch(command, rest, depth + 1);
    }
    if !base.contains(['/', ':', '\\']) {
        if kind(base).is_some() || (reach != Reach::Packages && cx.on_path(base)) {
            return cx.launch(base, rest, depth + 1);
        }
        return Ok(());
    }
    if reach == Reach::Command {
        // A relative path, which `uv run` runs from the server's folder.
        return cx.launch(command, rest, depth + 1);
    }
    Ok(())
}

// ----------------------------------------------------------------- python

/// Python modules that run code given on their command line or read from
/// stdin (a prompt, a debugger, a timer of statements), or that run
/// another program named on their command line, around this check.
const PYTHON_CODE_MODULES: &[&str] = &[
    "asyncio", "code", "cProfile", "idlelib", "IPython", "pdb", "profile", "runpy", "timeit",
    "trace",
];

/// CPython's command line: single-letter options that may be clustered
/// (`-IBc`); `-c` ends the options with the program as its value (the rest
/// of the cluster, or the next argument); `-m` likewise with a module; `-W`
/// and `-X` take a value the same way; the first other argument is the
/// script; `-` (or nothing) reads the program from stdin.
fn python(cx: &Checker<'_>, args: &[String], depth: usize) -> Verdict {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "-" {
            return refuse(a, STDIN_PROGRAM);
        }
        if a == "--" {
            return match args.get(i + 1) {
                Some(s) => script(s),
                None => refuse(a, PY_NO_SCRIPT),
            };
        }
        if let Some(long) = a.strip_prefix("--") {
            // --help, --version and the like print and exit; an unknown
            // long option stops python before it runs anything.
            i += if long == "check-hash-based-pycs" {
                2
            } else {
                1
            };
            continue;
        }
        let Some(cluster) = a.strip_prefix('-') else {
            return script(a);
        };
        let mut next = i + 1;
        for (at, letter) in cluster.char_indices() {
            let rest = &cluster[at + letter.len_utf8()..];
            match letter {
                'c' => return refuse(a, PY_INLINE),
                'i' => return refuse(a, INTERACTIVE),
                'm' => {
                    let (module, after) = if rest.is_empty() {
                        match args.get(i + 1) {
                            Some(m) => (m.as_str(), i + 2),
                            // "Argument expected for the -m option": python stops.
                            None => return Ok(()),
                        }
                    } else {
                        (rest, i + 1)
                    };
                    return python_module(cx, module, &args[after..], depth);
                }
                'W' | 'X' => {
                    if rest.is_empty() {
                        next = i + 2;
                    }
                    break;
                }
                _ => {}
            }
        }
        i = next;
    }
    refuse_without_arg(PY_NO_SCRIPT)
}

/// `python -m MODULE REST…`: the module runs with the rest as its
/// arguments.
fn python_module(cx: &Checker<'_>, module: &str, rest: &[String], depth: usize) -> Verdict {
    let top = module.split('.').next().unwrap_or(module);
    if PYTHON_CODE_MODULES.contains(&top) {
        return refuse_with(
            module,
            "is a module that runs code given on its command line or read from stdin, or another program around this check",
            "run the server's own module or script instead",
        );
    }
    if top == "uv" && module == "uv" {
        let mut budget = MAX_UNKNOWN_OPTIONS;
        return uv(cx, rest, depth + 1, &mut budget);
    }
    Ok(())
}

// ---------------------------------------------------------- option walker

/// What the options read so far say about the positional argument.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Mode {
    /// `uv run --module`: the positional is a Python module.
    module: bool,
    /// `uv run --script`: the positional is a script file.
    script: bool,
    /// node: an option that makes the script optional (`--run`, `--test`).
    entry: bool,
    /// This reading gave an unknown option the next argument as its value:
    /// if it then finds no script, the program would refuse to start
    /// rather than read stdin, so only inline code found is refused.
    forked: bool,
}

/// One way of reading a command line's options: where the first
/// positional argument is (`None`: there is none), and the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reading {
    at: Option<usize>,
    mode: Mode,
}

/// The option syntax of one program.
struct Syntax {
    /// Whether option `name` takes the next argument as its value (unless
    /// its value follows `=`).
    takes_value: fn(&str) -> bool,
    /// Whether option `name` is known to take no value.
    is_flag: fn(&str) -> bool,
    /// Refuses a dangerous option: the argument as written, the option's
    /// name, and its value if it has one.
    check: fn(&str, &str, Option<&str>) -> Verdict,
    /// What option `name` says about the positional.
    mark: fn(&str, &mut Mode),
    /// Whether single-dash options cluster (`-qm`); a value letter then
    /// takes the rest of the cluster, or the next argument.
    clusters: bool,
}

fn no_mark(_: &str, _: &mut Mode) {}

/// Reads options from argument `i` up to the first positional argument or
/// `--` (after which the next argument is the positional), adding every
/// reading to `out`: an option the syntax does not know, followed by an
/// argument that is not an option, is read both as a flag and as taking
/// that argument as its value.
fn walk(
    args: &[String],
    mut i: usize,
    syntax: &Syntax,
    mut mode: Mode,
    budget: &mut usize,
    out: &mut Vec<Reading>,
) -> Result<(), Problem> {
    loop {
        let Some(a) = args.get(i) else {
            out.push(Reading { at: None, mode });
            return Ok(());
        };
        if a == "--" {
            out.push(Reading {
                at: (i + 1 < args.len()).then_some(i + 1),
                mode,
            });
            return Ok(());
        }
        if a == "-" || !a.starts_with('-') {
            out.push(Reading { at: Some(i), mode });
            return Ok(());
        }
        let next_is_operand = args.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        let mut next = i + 1;
        let mut unknown = false;
        if syntax.clusters && !a.starts_with("--") && a.len() > 2 && !a.contains('=') {
            // `-qm`, `-NR`, `-pfoo`: letter by letter.
            let cluster = &a[1..];
            for (at, letter) in cluster.char_indices() {
                let name = format!("-{letter}");
                (syntax.check)(a, &name, None)?;
                (syntax.mark)(&name, &mut mode);
                let rest = &cluster[at + letter.len_utf8()..];
                if (syntax.takes_value)(&name) {
                    if rest.is_empty() {
                        (syntax.check)(a, &name, args.get(i + 1).map(String::as_str))?;
                        next = i + 2;
                    } else {
                        (syntax.check)(a, &name, Some(rest))?;
                    }
                    break;
                }
                if !(syntax.is_flag)(&name) {
                    unknown = rest.is_empty();
                }
            }
        } else {
            let (name, value) = split_eq(a);
            (syntax.check)(a, name, value)?;
            (syntax.mark)(name, &mut mode);
            if (syntax.takes_value)(name) && value.is_none() {
                (syntax.check)(a, name, args.get(i + 1).map(String::as_str))?;
                next = i + 2;
            } else if value.is_none() && !(syntax.is_flag)(name) {
                unknown = true;
            }
        }
        if unknown && next_is_operand {
            spend(budget, a)?;
            let forked = Mode {
                forked: true,
                ..mode
            };
            walk(args, i + 2, syntax, forked, budget, out)?;
        }
        i = next;
    }
}

/// Every reading of the options of `args` from `i`.
fn readings(
    args: &[String],
    i: usize,
    syntax: &Syntax,
    budget: &mut usize,
) -> Result<Vec<Reading>, Problem> {
    let mut out = Vec::new();
    walk(args, i, syntax, Mode::default(), budget, &mut out)?;
    Ok(out)
}

// ------------------------------------------------------------------- node

/// Node's options that take a value (`--name value` or `--name=value`),
/// from the option tables of node 20 and 22. An option neither here nor
/// in [`NODE_FLAGS`] is read both ways.
const NODE_VALUE: &[&str] = &[
    "-C",
    "-e",
    "-p",
    "-r",
    "--allow-fs-read",
    "--allow-fs-write",
    "--build-snapshot-config",
    "--conditions",
    "--cpu-prof-dir",
    "--cpu-prof-interval",
    "--cpu-prof-name",
    "--debug-port",
    "--diagnostic-dir",
    "--disable-proto",
    "--disable-warning",
    "--dns-result-order",
    "--env-file",
    "--env-file-if-exists",
    "--eval",
    "--experimental-config-file",
    "--experimental-default-type",
    "--experimental-loader",
    "--experimental-policy",
    "--experimental-sea-config",
    "--experimental-test-isolation",
    "--heap-prof-dir",
    "--heap-prof-interval",
    "--heap-prof-name",
    "--heapsnapshot-near-heap-limit",
    "--heapsnapshot-signal",
    "--icu-data-dir",
    "--import",
    "--input-type",
    "--inspect-port",
    "--inspect-publish-uid",
    "--loader",
    "--localstorage-file",
    "--max-http-header-size",
    "--max-old-space-size-percentage",
    "--network-family-autoselection-attempt-timeout",
    "--openssl-config",
    "--policy-integrity",
    "--redirect-warnings",
    "--report-dir",
    "--report-directory",
    "--report-filename",
    "--report-signal",
    "--require",
    "--run",
    "--secure-heap",
    "--secure-heap-min",
    "--security-revert",
    "--security-reverts",
    "--snapshot-blob",
    "--stack-trace-limit",
    "--test-concurrency",
    "--test-coverage-branches",
    "--test-coverage-exclude",
    "--test-coverage-functions",
    "--test-coverage-include",
    "--test-coverage-lines",
    "--test-name-pattern",
    "--test-reporter",
    "--test-reporter-destination",
    "--test-shard",
    "--test-skip-pattern",
    "--test-timeout",
    "--title",
    "--tls-cipher-list",
    "--tls-keylog",
    "--trace-event-categories",
    "--trace-event-file-pattern",
    "--trace-require-module",
    "--unhandled-rejections",
    "--use-largepages",
    "--v8-pool-size",
    "--watch-kill-signal",
    "--watch-path",
];

/// Node's options that take no value (node 20 and 22), and the V8 options
/// it passes on (which never take the next argument).
const NODE_FLAGS: &[&str] = &[
    "-c",
    "-h",
    "-i",
    "-v",
    "--abort-on-uncaught-exception",
    "--addons",
    "--allow-addons",
    "--allow-child-process",
    "--allow-wasi",
    "--allow-worker",
    "--build-snapshot",
    "--check",
    "--completion-bash",
    "--cpu-prof",
    "--debug-arraybuffer-allocations",
    "--deprecation",
    "--disable-sigusr1",
    "--disable-wasm-trap-handler",
    "--disallow-code-generation-from-strings",
    "--enable-etw-stack-walking",
    "--enable-fips",
    "--enable-network-family-autoselection",
    "--enable-source-maps",
    "--entry-url",
    "--experimental-addon-modules",
    "--experimental-async-context-frame",
    "--experimental-default-config-file",
    "--experimental-detect-module",
    "--experimental-eventsource",
    "--experimental-fetch",
    "--experimental-global-customevent",
    "--experimental-global-navigator",
    "--experimental-global-webcrypto",
    "--experimental-import-meta-resolve",
    "--experimental-inspector-network-resource",
    "--experimental-json-modules",
    "--experimental-modules",
    "--experimental-network-imports",
    "--experimental-network-inspection",
    "--experimental-permission",
    "--experimental-print-required-tla",
    "--experimental-repl-await",
    "--experimental-report",
    "--experimental-require-module",
    "--experimental-shadow-realm",
    "--experimental-sqlite",
    "--experimental-strip-types",
    "--experimental-test-coverage",
    "--experimental-test-module-mocks",
    "--experimental-test-snapshots",
    "--experimental-top-level-await",
    "--experimental-transform-types",
    "--experimental-vm-modules",
    "--experimental-wasi-unstable-preview1",
    "--experimental-wasm-modules",
    "--experimental-webstorage",
    "--experimental-websocket",
    "--experimental-worker",
    "--experimental-worker-inspection",
    "--expose-gc",
    "--expose-internals",
    "--extra-info-on-fatal-exception",
    "--force-async-hooks-checks",
    "--force-context-aware",
    "--force-fips",
    "--force-node-api-uncaught-exceptions-policy",
    "--frozen-intrinsics",
    "--global-search-paths",
    "--harmony-shadow-realm",
    "--heap-prof",
    "--help",
    "--huge-max-old-generation-size",
    "--insecure-http-parser",
    "--interpreted-frames-native-stack",
    "--jitless",
    "--max-old-space-size",
    "--max-semi-space-size",
    "--napi-modules",
    "--network-family-autoselection",
    "--no-addons",
    "--no-deprecation",
    "--no-experimental-detect-module",
    "--no-experimental-fetch",
    "--no-experimental-global-customevent",
    "--no-experimental-global-webcrypto",
    "--no-experimental-repl-await",
    "--no-experimental-require-module",
    "--no-extra-info-on-fatal-exception",
    "--no-force-async-hooks-checks",
    "--no-global-search-paths",
    "--no-network-family-autoselection",
    "--no-warnings",
    "--node-memory-debug",
    "--node-snapshot",
    "--openssl-legacy-provider",
    "--openssl-shared-config",
    "--pending-deprecation",
    "--perf-basic-prof",
    "--perf-basic-prof-only-functions",
    "--perf-prof",
    "--perf-prof-unwinding-info",
    "--permission",
    "--preserve-symlinks",
    "--preserve-symlinks-main",
    "--prof",
    "--prof-process",
    "--report-compact",
    "--report-exclude-env",
    "--report-exclude-network",
    "--report-on-fatalerror",
    "--report-on-signal",
    "--report-uncaught-exception",
    "--test",
    "--test-force-exit",
    "--test-only",
    "--test-udp-no-try-send",
    "--test-update-snapshots",
    "--throw-deprecation",
    "--tls-max-v1.2",
    "--tls-max-v1.3",
    "--tls-min-v1.0",
    "--tls-min-v1.1",
    "--tls-min-v1.2",
    "--tls-min-v1.3",
    "--trace-atomics-wait",
    "--trace-deprecation",
    "--trace-env",
    "--trace-env-js-stack",
    "--trace-env-native-stack",
    "--trace-exit",
    "--trace-promises",
    "--trace-sigint",
    "--trace-sync-io",
    "--trace-tls",
    "--trace-uncaught",
    "--trace-warnings",
    "--track-heap-objects",
    "--use-bundled-ca",
    "--use-env-proxy",
    "--use-openssl-ca",
    "--use-system-ca",
    "--v8-options",
    "--verify-base-objects",
    "--version",
    "--warnings",
    "--watch",
    "--watch-preserve-output",
    "--zero-fill-buffers",
];

/// Options after which node needs no script: they print and exit, run
/// tests or a `package.json` script, or only check syntax.
const NODE_ENTRY: &[&str] = &[
    "-c",
    "-h",
    "-v",
    "--check",
    "--completion-bash",
    "--help",
    "--prof-process",
    "--run",
    "--test",
    "--v8-options",
    "--version",
];

/// Node's (and bun's, deno's) options that load a module before the
/// script.
fn is_preload(name: &str) -> bool {
    matches!(
        name,
        "-r" | "--require" | "--import" | "--loader" | "--experimental-loader" | "--preload"
    )
}

/// Whether a module to preload is given as a URL that is not a file or a
/// built-in module: inline (`data:`) or remote (`http:`) code.
fn is_remote_or_inline(spec: &str) -> bool {
    url_scheme(spec).is_some_and(|s| s != "file" && s != "node")
}

/// Debugger options: node's, bun's and deno's.
fn is_debugger(name: &str) -> bool {
    matches!(
        name,
        "--inspect"
            | "--inspect-brk"
            | "--inspect-wait"
            | "--inspect-brk-node"
            | "--inspect-port"
            | "--debug-port"
            | "--debug"
            | "--debug-brk"
    )
}

/// A node-style inline-code option: `-e`, `-p`, `--eval`, `--print`, and
/// any short cluster with `e` or `p` in it (`-pe` is node's alias for
/// print and eval; other clusters are refused by node, or by the policy).
fn is_js_inline(name: &str) -> bool {
    matches!(name, "-e" | "-p" | "--eval" | "--print")
        || name
            .strip_prefix('-')
            .is_some_and(|c| !c.starts_with('-') && c.contains(['e', 'p']))
}

/// The checks node, bun and deno share: inline code, a prompt, a
/// debugger, an env file, and preloads or other values that are inline or
/// remote code.
fn js_check(arg: &str, name: &str, value: Option<&str>) -> Verdict {
    if is_js_inline(name) {
        return refuse(arg, JS_INLINE);
    }
    if matches!(name, "-i" | "--interactive") {
        return refuse(arg, INTERACTIVE);
    }
    if is_debugger(name) {
        return refuse_with(arg, DEBUGGER, REMOVE_IT);
    }
    if matches!(name, "--env-file" | "--env-file-if-exists" | "--env") {
        return refuse_with(arg, ENV_FILE, SET_ENV);
    }
    match value {
        Some(v) if is_preload(name) && is_remote_or_inline(v) => {
            refuse_with(v, PRELOAD_URL, PRELOAD_A_FILE)
        }
        Some(v) if is_inline_url(v) => refuse(v, DATA_URL),
        _ => Ok(()),
    }
}

const NODE: Syntax = Syntax {
    takes_value: |n| NODE_VALUE.contains(&n),
    is_flag: |n| NODE_FLAGS.contains(&n),
    check: js_check,
    mark: |n, m| m.entry |= NODE_ENTRY.contains(&n),
    clusters: false,
};

/// Node's command line: options up to the script (or `--`, after which
/// the next argument is the script); the rest belongs to the script.
fn node(args: &[String], budget: &mut usize) -> Verdict {
    for r in readings(args, 0, &NODE, budget)? {
        match r.at {
            Some(at) => script(&args[at])?,
            None if r.mode.entry || r.mode.forked => {}
            None => refuse_without_arg(JS_NO_SCRIPT)?,
        }
    }
    Ok(())
}

// -------------------------------------------------------------------- bun

/// Bun's options that take a value (`bun --help`, `bun run --help`).
const BUN_VALUE: &[&str] = &[
    "-d",
    "-e",
    "-F",
    "-l",
    "-p",
    "-r",
    "-u",
    "--conditions",
    "--console-depth",
    "--cpu-prof-dir",
    "--cpu-prof-name",
    "--cwd",
    "--define",
    "--dns-result-order",
    "--drop",
    "--elide-lines",
    "--env-file",
    "--eval",
    "--extension-order",
    "--fetch-preconnect",
    "--filter",
    "--import",
    "--install",
    "--jsx-factory",
    "--jsx-fragment",
    "--jsx-import-source",
    "--jsx-runtime",
    "--loader",
    "--main-fields",
    "--max-http-header-size",
    "--origin",
    "--port",
    "--preload",
    "--print",
    "--require",
    "--shell",
    "--title",
    "--tsconfig-override",
    "--unhandled-rejections",
    "--user-agent",
];

/// Bun's options that take no value.
const BUN_FLAGS: &[&str] = &[
    "-b",
    "-h",
    "-i",
    "-v",
    "--bun",
    "--cpu-prof",
    "--expose-gc",
    "--help",
    "--hot",
    "--if-present",
    "--ignore-dce-annotations",
    "--jsx-side-effects",
    "--no-addons",
    "--no-clear-screen",
    "--no-deprecation",
    "--no-env-file",
    "--no-install",
    "--no-macros",
    "--prefer-latest",
    "--prefer-offline",
    "--preserve-symlinks",
    "--preserve-symlinks-main",
    "--redis-preconnect",
    "--revision",
    "--silent",
    "--smol",
    "--sql-preconnect",
    "--throw-deprecation",
    "--use-bundled-ca",
    "--use-openssl-ca",
    "--use-system-ca",
    "--version",
    "--watch",
    "--workspaces",
    "--zero-fill-buffers",
];

/// Bun's subcommands that do not start a server from the command line
/// (they install, build, test files or print).
const BUN_OTHER_COMMANDS: &[&str] = &[
    "a",
    "add",
    "audit",
    "build",
    "c",
    "completions",
    "create",
    "help",
    "i",
    "info",
    "init",
    "install",
    "link",
    "outdated",
    "patch",
    "patch-commit",
    "pm",
    "publish",
    "remove",
    "rm",
    "test",
    "unlink",
    "update",
    "upgrade",
    "why",
];

const BUN: Syntax = Syntax {
    takes_value: |n| BUN_VALUE.contains(&n),
    is_flag: |n| BUN_FLAGS.contains(&n),
    check: |a, n, v| {
        // bun's `-i` installs packages on the fly; its `--inspect*` take
        // their value after `=` only.
        if n == "-i" {
            return Ok(());
        }
        if n.starts_with("--inspect") {
            return refuse_with(a, DEBUGGER, REMOVE_IT);
        }
        js_check(a, n, v)
    },
    mark: no_mark,
    clusters: true,
};

/// `bun [options] <file | script | subcommand> …`.
fn bun(cx: &Checker<'_>, args: &[String], depth: usize, budget: &mut usize) -> Verdict {
    for r in readings(args, 0, &BUN, budget)? {
        // bun alone prints its help.
        let Some(at) = r.at else { continue };
        let rest = &args[at + 1..];
        match args[at].as_str() {
            "run" => {
                for t in readings(args, at + 1, &BUN, budget)? {
                    // `bun run` alone lists the package's scripts.
                    if let Some(t) = t.at {
                        bun_target(cx, &args[t], &args[t + 1..], depth)?;
                    }
                }
            }
            "x" => bunx(cx, rest, depth, budget)?,
            "exec" => refuse("exec", "runs a shell command line (bun exec)")?,
            "repl" => refuse("repl", INTERACTIVE)?,
            c if BUN_OTHER_COMMANDS.contains(&c) => {}
            target => bun_target(cx, target, rest, depth)?,
        }
    }
    Ok(())
}

/// What `bun run` runs: a file, a `package.json` script, or a program from
/// `node_modules/.bin` or `PATH`.
fn bun_target(cx: &Checker<'_>, target: &str, rest: &[String], depth: usize) -> Verdict {
    script(target)?;
    if target.contains('/') || target.contains('.') {
        return Ok(()); // a file
    }
    launched(cx, target, rest, depth, Reach::Npm)
}

// ------------------------------------------------------------------- deno

/// Deno's options that take a separate value (those with optional values
/// take them only after `=`).
const DENO_VALUE: &[&str] = &[
    "-c",
    "-L",
    "--cert",
    "--conditions",
    "--config",
    "--env",
    "--env-file",
    "--ext",
    "--import-map",
    "--location",
    "--lock",
    "--log-level",
    "--preload",
    "--require",
    "--seed",
];

/// Whether `name` is a deno option known to take no separate value.
fn deno_flag(name: &str) -> bool {
    const FLAGS: &[&str] = &[
        "-A",
        "-E",
        "-I",
        "-N",
        "-P",
        "-q",
        "-R",
        "-r",
        "-S",
        "-W",
        "-h",
        "-V",
        "--cached-only",
        "--check",
        "--frozen",
        "--help",
        "--hmr",
        "--node-modules-dir",
        "--permission-set",
        "--quiet",
        "--reload",
        "--unsafely-ignore-certificate-errors",
        "--v8-flags",
        "--vendor",
        "--version",
        "--watch",
        "--watch-exclude",
        "--watch-hmr",
    ];
    FLAGS.contains(&name)
        || ["--allow-", "--deny-", "--no-", "--unstable"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// Deno's subcommands that do not run code from the command line.
const DENO_OTHER_COMMANDS: &[&str] = &[
    "add",
    "approve-scripts",
    "bench",
    "bundle",
    "check",
    "clean",
    "compile",
    "completions",
    "coverage",
    "doc",
    "fmt",
    "help",
    "info",
    "init",
    "install",
    "jupyter",
    "lint",
    "lsp",
    "outdated",
    "publish",
    "remove",
    "test",
    "types",
    "uninstall",
    "update",
    "upgrade",
];

const DENO: Syntax = Syntax {
    takes_value: |n| DENO_VALUE.contains(&n),
    is_flag: deno_flag,
    check: js_check,
    mark: no_mark,
    clusters: true,
};

/// `deno [options] <subcommand | script> …`.
fn deno(cx: &Checker<'_>, args: &[String], depth: usize, budget: &mut usize) -> Verdict {
    for r in readings(args, 0, &DENO, budget)? {
        let Some(at) = r.at else {
            if r.mode.forked {
                continue;
            }
            // `deno` alone opens its prompt on stdin.
            return refuse_without_arg(JS_NO_SCRIPT);
        };
        let sub = args[at].as_str();
        match sub {
            "eval" => refuse(sub, EVAL_SUBCOMMAND)?,
            "repl" => refuse(sub, INTERACTIVE)?,
            "task" => {
                if let Some(a) = args[at + 1..].iter().find(|a| split_eq(a).0 == "--eval") {
                    refuse(a, "runs an inline task command line (deno task --eval)")?;
                }
            }
            "run" | "serve" => {
                for t in readings(args, at + 1, &DENO, budget)? {
                    match t.at {
                        Some(t) => script(&args[t])?,
                        None if t.mode.forked => {}
                        None => refuse(sub, JS_NO_SCRIPT)?,
                    }
                }
            }
            "x" => {
                for t in readings(args, at + 1, &DENO, budget)? {
                    if let Some(t) = t.at {
                        launched(cx, &args[t], &args[t + 1..], depth, Reach::Npm)?;
                    }
                }
            }
            c if DENO_OTHER_COMMANDS.contains(&c) => {}
            target => script(target)?,
        }
    }
    Ok(())
}

// -------------------------------------------------------------------- npx

/// npm's configuration keys that take no value (npm 11's switches), which
/// npx does not give the next argument to when it looks for the command.
const NPM_SWITCHES: &[&str] = &[
    "all",
    "allow-same-version",
    "audit",
    "bin-links",
    "browser",
    "bypass-2fa",
    "color",
    "commit-hooks",
    "dangerously-allow-all-scripts",
    "description",
    "dev",
    "diff-ignore-all-space",
    "diff-name-only",
    "diff-no-prefix",
    "diff-text",
    "dry-run",
    "engine-strict",
    "expect-results",
    "force",
    "foreground-scripts",
    "format-package-lock",
    "fund",
    "git-tag-version",
    "global",
    "global-style",
    "h",
    "help",
    "if-present",
    "ignore-scripts",
    "include-attestations",
    "include-staged",
    "include-workspace-root",
    "init-private",
    "install-links",
    "json",
    "legacy-bundling",
    "legacy-peer-deps",
    "link",
    "long",
    "no-install",
    "offline",
    "omit-lockfile-registry-resolved",
    "optional",
    "package-lock",
    "package-lock-only",
    "packages-all",
    "parseable",
    "prefer-dedupe",
    "prefer-offline",
    "prefer-online",
    "production",
    "progress",
    "provenance",
    "q",
    "quiet",
    "read-only",
    "rebuild-bundle",
    "save",
    "save-bundle",
    "save-dev",
    "save-exact",
    "save-optional",
    "save-peer",
    "save-prod",
    "shrinkwrap",
    "sign-git-commit",
    "sign-git-tag",
    "strict-allow-scripts",
    "strict-peer-deps",
    "strict-ssl",
    "timing",
    "unicode",
    "update-notifier",
    "usage",
    "v",
    "version",
    "versions",
    "workspaces",
    "workspaces-update",
    "yes",
];

/// npm configuration keys that take a value, which both npx and npm's own
/// parser give the next argument to.
const NPM_VALUE_KEYS: &[&str] = &[
    "before",
    "ca",
    "cache",
    "cafile",
    "cert",
    "fetch-retries",
    "fetch-timeout",
    "https-proxy",
    "include",
    "install-strategy",
    "key",
    "location",
    "loglevel",
    "message",
    "noproxy",
    "omit",
    "package",
    "prefix",
    "proxy",
    "registry",
    "tag",
    "workspace",
];

/// npm's shorthands as npx expands them before it looks for the command:
/// the key each stands for, and whether the expansion carries its own
/// value (`-s` is `--loglevel silent`).
fn npm_shorthand(key: &str) -> Option<(&'static str, bool)> {
    Some(match key {
        "y" => ("yes", false),
        "n" | "no" => ("no-yes", false),
        "c" => ("call", false),
        "p" => ("package", false),
        "w" => ("workspace", false),
        "C" => ("prefix", false),
        "L" => ("location", false),
        "m" => ("message", false),
        "reg" => ("registry", false),
        "enjoy-by" => ("before", false),
        "local" => ("no-global", false),
        "ws" => ("workspaces", false),
        "iwr" => ("include-workspace-root", false),
        "f" => ("force", false),
        "g" => ("global", false),
        "a" => ("all", false),
        "l" => ("long", false),
        "porcelain" => ("parseable", false),
        "readonly" => ("read-only", false),
        "desc" => ("description", false),
        "h" | "H" | "?" => ("usage", false),
        "v" => ("version", false),
        "S" => ("save", false),
        "B" => ("save-bundle", false),
        "D" => ("save-dev", false),
        "E" => ("save-exact", false),
        "O" => ("save-optional", false),
        "P" => ("save-prod", false),
        "d" | "dd" | "ddd" | "q" | "quiet" | "s" | "silent" | "verbose" => ("loglevel", true),
        _ => return None,
    })
}

/// npm configuration keys that make npx run code the command line names.
const NPM_DANGEROUS: &[&str] = &[
    "call",
    "node-options",
    "script-shell",
    "shell",
    "userconfig",
    "globalconfig",
    "git",
    "node-gyp",
];

/// What the npm configuration key `key` does if it runs code: also when it
/// abbreviates such a key (npm's parser accepts `--node-opt` for
/// `--node-options`) and is no key of its own.
fn npm_dangerous(key: &str) -> Option<&'static str> {
    let full = if NPM_DANGEROUS.contains(&key) {
        key
    } else if key.len() >= 3 && !NPM_SWITCHES.contains(&key) && !NPM_VALUE_KEYS.contains(&key) {
        NPM_DANGEROUS.iter().find(|d| d.starts_with(key))?
    } else {
        return None;
    };
    Some(match full {
        "call" => NPX_CALL,
        "node-options" => "passes options such as --require (code loaded first) to node",
        "script-shell" | "shell" => "names the shell npx runs command lines with",
        "userconfig" | "globalconfig" => {
            "makes npx read its configuration (node-options included) from another file"
        }
        _ => "names a program npm runs while it installs packages",
    })
}

/// Refuses an npm option that runs code, in any of the forms npm reads:
/// any number of dashes, `=`-joined or not, a shorthand, an abbreviation,
/// or a single-dash cluster npm expands letter by letter (`-yc` is
/// `--yes --call`).
fn npm_check(arg: &str) -> Result<(&str, bool), Problem> {
    let (raw, _) = split_eq(arg.trim_start_matches('-'));
    if !arg.starts_with("--")
        && raw.len() > 1
        && raw.bytes().all(|b| b.is_ascii_alphabetic())
        && raw.contains('c')
    {
        refuse(arg, NPX_CALL)?;
    }
    let (key, carries_value) = npm_shorthand(raw).unwrap_or((raw, false));
    if let Some(why) = npm_dangerous(key).or_else(|| npm_dangerous(raw)) {
        refuse(arg, why)?;
    }
    Ok((key, carries_value))
}

/// npx's command line from argument `i`: npm options up to the first
/// positional argument or `--`, which is the command; the rest belongs to
/// the command. npx gives an option that is not a switch the next
/// argument as its value unless that starts with `-`, while npm's own
/// parser, which reads the line again, treats unknown options and
/// `--no-<switch>` as flags: where the two disagree, both readings are
/// checked.
fn npx(
    cx: &Checker<'_>,
    args: &[String],
    mut i: usize,
    depth: usize,
    budget: &mut usize,
) -> Verdict {
    while let Some(a) = args.get(i) {
        if a == "--" {
            return match args.get(i + 1) {
                Some(c) => launched(cx, c, &args[i + 2..], depth, Reach::Npm),
                None => refuse(a, NPX_NO_COMMAND),
            };
        }
        if !a.starts_with('-') {
            return launched(cx, a, &args[i + 1..], depth, Reach::Npm);
        }
        let (key, carries_value) = npm_check(a)?;
        let has_value = carries_value || a.contains('=');
        let next_is_operand = args.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        if has_value || NPM_SWITCHES.contains(&key) {
            i += 1;
        } else if NPM_VALUE_KEYS.contains(&key) || matches!(key, "call" | "package") {
            i += 2;
        } else if next_is_operand {
            // npx: the next argument is this option's value; npm: it is
            // the command.
            spend(budget, a)?;
            npx(cx, args, i + 2, depth, budget)?;
            i += 1;
        } else {
            i += 1;
        }
    }
    refuse_without_arg(NPX_NO_COMMAND)
}

/// `npm …`: only `npm exec`/`npm x` launch a command (read as npx); npm's
/// options that run code are refused wherever they are before the
/// subcommand.
fn npm(cx: &Checker<'_>, args: &[String], depth: usize, budget: &mut usize) -> Verdict {
    for (i, a) in args.iter().enumerate() {
        if !a.starts_with('-') {
            return match a.as_str() {
                "exec" | "x" => npx(cx, &args[i + 1..], 0, depth, budget),
                _ => Ok(()),
            };
        }
        npm_check(a)?;
    }
    Ok(())
}

// ------------------------------------------------------------------- bunx

const BUNX: Syntax = Syntax {
    takes_value: |n| matches!(n, "-p" | "--package"),
    is_flag: |n| {
        matches!(
            n,
            "-b" | "-h"
                | "-v"
                | "--bun"
                | "--help"
                | "--no-install"
                | "--revision"
                | "--silent"
                | "--verbose"
                | "--version"
        )
    },
    check: |_, _, _| Ok(()),
    mark: no_mark,
    clusters: false,
};

/// `bunx [options] <package[@version]> …` (also `bun x`).
fn bunx(cx: &Checker<'_>, args: &[String], depth: usize, budget: &mut usize) -> Verdict {
    for r in readings(args, 0, &BUNX, budget)? {
        // bunx alone prints its usage.
        if let Some(at) = r.at {
            launched(cx, &args[at], &args[at + 1..], depth, Reach::Npm)?;
        }
    }
    Ok(())
}

// --------------------------------------------------------------------- uv

/// uv's options (global, and of `run` and `tool run`) that take a value.
const UV_VALUE: &[&str] = &[
    "-b",
    "-c",
    "-C",
    "-f",
    "-i",
    "-p",
    "-P",
    "--allow-insecure-host",
    "--build-constraints",
    "--cache-dir",
    "--color",
    "--config-file",
    "--config-setting",
    "--config-settings-package",
    "--constraints",
    "--default-index",
    "--directory",
    "--exclude-newer",
    "--exclude-newer-package",
    "--extra",
    "--extra-index-url",
    "--find-links",
    "--fork-strategy",
    "--from",
    "--group",
    "--index",
    "--index-strategy",
    "--index-url",
    "--keyring-provider",
    "--link-mode",
    "--no-binary-package",
    "--no-build-isolation-package",
    "--no-build-package",
    "--no-extra",
    "--no-group",
    "--no-sources-package",
    "--only-group",
    "--overrides",
    "--package",
    "--prerelease",
    "--project",
    "--python",
    "--python-platform",
    "--python-preference",
    "--refresh-package",
    "--reinstall-package",
    "--resolution",
    "--torch-backend",
    "--upgrade-package",
    "--with",
    "--with-editable",
    "--with-requirements",
];

/// uv's options that take no value.
const UV_FLAGS: &[&str] = &[
    "-h",
    "-m",
    "-n",
    "-q",
    "-s",
    "-U",
    "-v",
    "-V",
    "--active",
    "--all-extras",
    "--all-groups",
    "--all-packages",
    "--compile-bytecode",
    "--dev",
    "--exact",
    "--frozen",
    "--gui-script",
    "--help",
    "--inexact",
    "--isolated",
    "--locked",
    "--managed-python",
    "--module",
    "--native-tls",
    "--no-active",
    "--no-binary",
    "--no-build",
    "--no-build-isolation",
    "--no-cache",
    "--no-config",
    "--no-default-groups",
    "--no-dev",
    "--no-editable",
    "--no-env-file",
    "--no-index",
    "--no-managed-python",
    "--no-progress",
    "--no-project",
    "--no-python-downloads",
    "--no-sources",
    "--no-sync",
    "--offline",
    "--only-dev",
    "--preview",
    "--quiet",
    "--refresh",
    "--reinstall",
    "--script",
    "--upgrade",
    "--verbose",
    "--version",
];

const UV: Syntax = Syntax {
    takes_value: |n| UV_VALUE.contains(&n),
    is_flag: |n| UV_FLAGS.contains(&n),
    check: |a, n, _| {
        if n == "--env-file" {
            return refuse_with(a, ENV_FILE, SET_ENV);
        }
        Ok(())
    },
    mark: |n, m| match n {
        "-m" | "--module" => m.module = true,
        "-s" | "--script" | "--gui-script" => m.script = true,
        _ => {}
    },
    clusters: true,
};

/// `uv run`'s options: uv's, and `-c` refused — it is python's inline
/// code, which `uv run` does not take (`uv run python -c` is read as
/// python's).
const UV_RUN: Syntax = Syntax {
    check: |a, n, v| {
        if n == "-c" {
            return refuse(
                a,
                "is python's inline-code option, which `uv run` does not take",
            );
        }
        (UV.check)(a, n, v)
    },
    ..UV
};

/// `uv [options] <subcommand> …`: `run` and `tool run` launch a command;
/// the other subcommands manage projects and tools.
fn uv(cx: &Checker<'_>, args: &[String], depth: usize, budget: &mut usize) -> Verdict {
    for r in readings(args, 0, &UV, budget)? {
        let Some(at) = r.at else { continue };
        match args[at].as_str() {
            "run" => {
                for run in readings(args, at + 1, &UV_RUN, budget)? {
                    if let Some(c) = run.at {
                        uv_run(cx, args, c, run.mode, depth)?;
                    }
                }
            }
            "tool" => {
                for t in readings(args, at + 1, &UV, budget)? {
                    if let Some(t) = t.at.filter(|&t| args[t] == "run") {
                        uvx(cx, &args[t + 1..], depth, budget)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The command of `uv run`: a module (`--module`), a script, a remote
/// script, python itself, or a command.
fn uv_run(cx: &Checker<'_>, args: &[String], at: usize, mode: Mode, depth: usize) -> Verdict {
    let command = args[at].as_str();
    let rest = &args[at + 1..];
    if command == "-" {
        return refuse(command, STDIN_PROGRAM);
    }
    if mode.module {
        return python_module(cx, command, rest, depth);
    }
    if mode.script || command.ends_with(".py") || command.ends_with(".pyw") {
        return script(command);
    }
    if matches!(url_scheme(command).as_deref(), Some("http" | "https")) {
        return Ok(()); // a remote script: a package by another name
    }
    if is_python_name(command) {
        return via(command, python(cx, rest, depth + 1));
    }
    launched(cx, command, rest, depth, Reach::Command)
}

/// `uvx [options] <package | python> …` (= `uv tool run`).
fn uvx(cx: &Checker<'_>, args: &[String], depth: usize, budget: &mut usize) -> Verdict {
    for r in readings(args, 0, &UV, budget)? {
        // uvx alone lists the installed tools.
        if let Some(at) = r.at {
            launched(cx, &args[at], &args[at + 1..], depth, Reach::Packages)?;
        }
    }
    Ok(())
}

// ----------------------------------------------------------------- shells

/// A POSIX-style shell: option clusters after `-` or `+` up to the script;
/// `-c` runs a command line, `-s` and `-i` read commands from stdin, `-o`
/// and `-O` take the next argument; `-` or `--` ends the options. No
/// script means commands from stdin.
fn shell(args: &[String]) -> Verdict {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "-" || a == "--" {
            return match args.get(i + 1) {
                Some(s) => script(s),
                None => refuse(a, SHELL_NO_SCRIPT),
            };
        }
        if let Some(long) = a.strip_prefix("--") {
            i += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            continue;
        }
        let Some(cluster) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            return script(a);
        };
        let mut next = i + 1;
        for letter in cluster.chars() {
            match letter {
                'c' => return refuse(a, SHELL_INLINE),
                's' => return refuse(a, SHELL_STDIN),
                'i' => return refuse(a, INTERACTIVE),
                'o' | 'O' => next += 1,
                _ => {}
            }
        }
        i = next;
    }
    refuse_without_arg(SHELL_NO_SCRIPT)
}

/// fish: `-c`/`--command` and `-C`/`--init-command` run command lines,
/// `-i` reads from stdin; no script means commands from stdin.
fn fish(args: &[String]) -> Verdict {
    for a in args {
        let (name, _) = split_eq(a);
        if matches!(name, "--command" | "--init-command")
            || name
                .strip_prefix('-')
                .is_some_and(|c| !c.starts_with('-') && c.contains(['c', 'C']))
        {
            return refuse(a, SHELL_INLINE);
        }
        if matches!(name, "-i" | "--interactive") {
            return refuse(a, INTERACTIVE);
        }
        if !a.starts_with('-') {
            return script(a);
        }
    }
    refuse_without_arg(SHELL_NO_SCRIPT)
}
