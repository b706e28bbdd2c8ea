//! Environment variables that make a stdio server's runtime load or run
//! code named in the variable itself.
//!
//! A server entry's `env` is configuration, so an attacker who can write
//! one entry (an imported file, a stolen admin token, a pasted snippet)
//! could otherwise run anything through an allowed launcher:
//! `python3 server.py` with `PYTHONPATH` pointing at a `sitecustomize.py`,
//! `node server.js` with `NODE_OPTIONS=--require …`, any program with
//! `LD_PRELOAD`, or `PATH` choosing which binary `python3` is. Such a
//! variable is refused unless the operator names it in the server's
//! `allow_env`.
//!
//! Names are compared exactly, as Linux does (a look-alike in another case
//! is a different variable there, which nothing reads), except for npm's
//! configuration variables, which npm itself reads in any case.

/// How a rule matches a variable name.
#[derive(Debug, Clone, Copy)]
enum Match {
    /// This exact name.
    Exact(&'static str),
    /// Every name starting with this.
    Prefix(&'static str),
    /// `npm_config_<key>`, in any case (npm lowercases what it reads).
    NpmConfig(&'static str),
}

/// One refused variable (or family) and why, as a clause that completes
/// "`env` sets NAME, …".
struct Rule {
    name: Match,
    why: &'static str,
}

const LOADER_LIBRARY: &str = "which the dynamic loader reads: LD_PRELOAD and LD_AUDIT load a library of its choosing into the server, LD_LIBRARY_PATH replaces the libraries it links";
const NODE_PRELOAD: &str = "which passes options such as --require or --import (code loaded before the server) to every node process";
const MODULE_FOLDERS: &str = "which adds folders the runtime loads modules from";
const NPM_SHELL: &str = "which names the shell npm and npx run command lines with";
const NPM_CONFIG_FILE: &str =
    "which makes npm and npx read their configuration (node-options included) from another file";
const NPM_PROGRAM: &str = "which names a program npm runs while it installs packages";
const JVM_OPTIONS: &str =
    "which passes options such as -javaagent (code loaded into the JVM) to every java process";
const GIT_PROGRAM: &str = "which names a program git runs";
const GIT_CONFIG: &str = "which sets git configuration, which can name programs git runs (core.sshCommand, core.fsmonitor)";
const SHELL_OPTIONS: &str = "which turns on shell options (such as xtrace, which expands PS4 and runs the commands in it) in every bash";

/// The refused variables. Each is read by a runtime or tool an MCP server
/// commonly is or starts (the loader, the launchers on the default
/// allowlist, shells, git) and makes it load or run code the variable
/// names.
const RULES: &[Rule] = &[
    // The dynamic loader (every program).
    Rule {
        name: Match::Prefix("LD_"),
        why: LOADER_LIBRARY,
    },
    Rule {
        name: Match::Prefix("DYLD_"),
        why: "which the macOS dynamic loader reads: DYLD_INSERT_LIBRARIES loads a library of its choosing into the server",
    },
    Rule {
        name: Match::Exact("GCONV_PATH"),
        why: "which makes the C library load character-set converters (shared libraries) from the folder it names",
    },
    Rule {
        name: Match::Exact("PATH"),
        why: "which decides which program a bare command name such as `python3` runs (the server gets the host's PATH)",
    },
    // Node, npm, npx.
    Rule {
        name: Match::Exact("NODE_OPTIONS"),
        why: NODE_PRELOAD,
    },
    Rule {
        name: Match::Exact("NODE_PATH"),
        why: MODULE_FOLDERS,
    },
    Rule {
        name: Match::Exact("NODE_REPL_EXTERNAL_MODULE"),
        why: "which makes node run the module it names instead of its prompt",
    },
    Rule {
        name: Match::NpmConfig("node_options"),
        why: NODE_PRELOAD,
    },
    Rule {
        name: Match::NpmConfig("script_shell"),
        why: NPM_SHELL,
    },
    Rule {
        name: Match::NpmConfig("shell"),
        why: NPM_SHELL,
    },
    Rule {
        name: Match::NpmConfig("call"),
        why: "which makes npx run a shell command line",
    },
    Rule {
        name: Match::NpmConfig("userconfig"),
        why: NPM_CONFIG_FILE,
    },
    Rule {
        name: Match::NpmConfig("globalconfig"),
        why: NPM_CONFIG_FILE,
    },
    Rule {
        name: Match::NpmConfig("git"),
        why: NPM_PROGRAM,
    },
    Rule {
        name: Match::NpmConfig("node_gyp"),
        why: NPM_PROGRAM,
    },
    // Deno.
    Rule {
        name: Match::Exact("DENO_DIR"),
        why: "which names the folder deno loads cached, compiled modules from",
    },
    // Python, uv.
    Rule {
        name: Match::Exact("PYTHONSTARTUP"),
        why: "which names a file python runs before its interactive prompt",
    },
    Rule {
        name: Match::Exact("PYTHONPATH"),
        why: "which adds folders python imports modules from (a `sitecustomize.py` there runs at start)",
    },
    Rule {
        name: Match::Exact("PYTHONHOME"),
        why: "which moves python's standard library, much of which runs at start",
    },
    Rule {
        name: Match::Exact("PYTHONINSPECT"),
        why: "which makes python read more code from stdin after the script",
    },
    Rule {
        name: Match::Exact("PYTHONEXECUTABLE"),
        why: "which changes the program python reports as itself and starts again (macOS)",
    },
    Rule {
        name: Match::Exact("PYTHONUSERBASE"),
        why: "which moves python's user site folder, whose `.pth` files run at start",
    },
    Rule {
        name: Match::Exact("PYTHONPLATLIBDIR"),
        why: "which moves the folder python loads its platform modules from",
    },
    Rule {
        name: Match::Exact("PYTHONBREAKPOINT"),
        why: "which names a function python imports and calls at every breakpoint()",
    },
    Rule {
        name: Match::Exact("PYTHONPYCACHEPREFIX"),
        why: "which names the folder python loads compiled bytecode from",
    },
    Rule {
        name: Match::Exact("UV_PYTHON"),
        why: "which names the interpreter uv runs (a path runs that program)",
    },
    Rule {
        name: Match::Exact("UV_ENV_FILE"),
        why: "which makes uv load environment variables (these included) from a file",
    },
    // Ruby, Perl, the JVM.
    Rule {
        name: Match::Exact("RUBYOPT"),
        why: "which passes options such as -r (require a library) to every ruby process",
    },
    Rule {
        name: Match::Exact("RUBYLIB"),
        why: MODULE_FOLDERS,
    },
    Rule {
        name: Match::Exact("PERL5OPT"),
        why: "which passes options such as -M (load a module) to every perl process",
    },
    Rule {
        name: Match::Exact("PERL5LIB"),
        why: MODULE_FOLDERS,
    },
    Rule {
        name: Match::Exact("PERLLIB"),
        why: MODULE_FOLDERS,
    },
    Rule {
        name: Match::Exact("PERL5DB"),
        why: "which is perl code the debugger runs",
    },
    Rule {
        name: Match::Exact("JAVA_TOOL_OPTIONS"),
        why: JVM_OPTIONS,
    },
    Rule {
        name: Match::Exact("_JAVA_OPTIONS"),
        why: JVM_OPTIONS,
    },
    Rule {
        name: Match::Exact("JDK_JAVA_OPTIONS"),
        why: JVM_OPTIONS,
    },
    Rule {
        name: Match::Exact("CLASSPATH"),
        why: "which adds places the JVM loads classes from",
    },
    // Shells.
    Rule {
        name: Match::Exact("BASH_ENV"),
        why: "which names a file bash runs before every script",
    },
    Rule {
        name: Match::Exact("ENV"),
        why: "which names a file sh runs when it starts",
    },
    Rule {
        name: Match::Prefix("BASH_FUNC_"),
        why: "which defines shell functions that replace commands in every bash the server starts",
    },
    Rule {
        name: Match::Exact("SHELLOPTS"),
        why: SHELL_OPTIONS,
    },
    Rule {
        name: Match::Exact("BASHOPTS"),
        why: SHELL_OPTIONS,
    },
    Rule {
        name: Match::Exact("PS4"),
        why: "which bash expands, running the commands in it, while it traces",
    },
    // git (the reference git MCP server runs it).
    Rule {
        name: Match::Exact("GIT_SSH"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_SSH_COMMAND"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_ASKPASS"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("SSH_ASKPASS"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_EXTERNAL_DIFF"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_PAGER"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_EDITOR"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_PROXY_COMMAND"),
        why: GIT_PROGRAM,
    },
    Rule {
        name: Match::Exact("GIT_EXEC_PATH"),
        why: "which names the folder git runs its subcommands from",
    },
    Rule {
        name: Match::Exact("GIT_CONFIG_PARAMETERS"),
        why: GIT_CONFIG,
    },
    Rule {
        name: Match::Exact("GIT_CONFIG_COUNT"),
        why: GIT_CONFIG,
    },
    Rule {
        name: Match::Exact("GIT_CONFIG_GLOBAL"),
        why: GIT_CONFIG,
    },
    Rule {
        name: Match::Exact("GIT_CONFIG_SYSTEM"),
        why: GIT_CONFIG,
    },
    Rule {
        name: Match::Exact("GIT_TEMPLATE_DIR"),
        why: "which names the hooks (programs) git copies into new repositories",
    },
];

/// Whether two variable names are the same variable on this platform:
/// exactly equal, except on Windows, whose environment ignores case.
fn same_name(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

impl Match {
    fn matches(self, name: &str) -> bool {
        match self {
            Match::Exact(n) => same_name(name, n),
            Match::Prefix(p) => {
                name.len() > p.len() && name.is_char_boundary(p.len()) && {
                    let (head, _) = name.split_at(p.len());
                    same_name(head, p)
                }
            }
            Match::NpmConfig(key) => {
                const PREFIX: &str = "npm_config_";
                name.len() == PREFIX.len() + key.len() && name.is_char_boundary(PREFIX.len()) && {
                    let (head, tail) = name.split_at(PREFIX.len());
                    head.eq_ignore_ascii_case(PREFIX) && tail.eq_ignore_ascii_case(key)
                }
            }
        }
    }
}

/// Why the environment variable `name` makes a server's runtime load or
/// run code, as a clause completing "`env` sets NAME, …"; `None` for a
/// variable the stdio policy lets a server entry set freely.
///
/// ```
/// assert!(skillhost_mcp::code_loading_env("LD_PRELOAD").is_some());
/// assert!(skillhost_mcp::code_loading_env("NODE_OPTIONS").is_some());
/// assert!(skillhost_mcp::code_loading_env("NPM_CONFIG_NODE_OPTIONS").is_some());
/// assert!(skillhost_mcp::code_loading_env("GITHUB_TOKEN").is_none());
/// // Linux compares names exactly: nothing reads `ld_preload`.
/// assert!(skillhost_mcp::code_loading_env("ld_preload").is_none());
/// ```
pub fn code_loading_env(name: &str) -> Option<&'static str> {
    RULES.iter().find(|r| r.name.matches(name)).map(|r| r.why)
}

/// The refusal of a server entry's environment: the first variable of
/// `names` that loads code and that `allow_env` does not list, named with
/// what it does and how to allow it.
pub(crate) fn refuse_env<'a>(
    names: impl IntoIterator<Item = &'a String>,
    allow_env: &[String],
) -> Result<(), String> {
    for name in names {
        if let Some(why) = code_loading_env(name)
            && !allow_env.iter().any(|a| a == name)
        {
            return Err(format!(
                "`env` sets {name}, {why}; remove it, or, if you trust this server with it, list {name:?} in the server's `allow_env`"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_exact_names() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "DYLD_INSERT_LIBRARIES",
            "PATH",
            "npm_config_node_options",
            "NPM_CONFIG_NODE_OPTIONS",
            "Npm_Config_Script_Shell",
            "BASH_FUNC_ls%%",
            "PYTHONSTARTUP",
            "_JAVA_OPTIONS",
        ] {
            assert!(code_loading_env(name).is_some(), "{name}");
        }
        for name in [
            "LD_",
            "LD",
            "PATHEXT",
            "MY_PATH",
            "path",
            "npm_config_registry",
            "npm_config_node_options_x",
            "PYTHONUNBUFFERED",
            "NODE_ENV",
            "HOME",
            "É_LD_PRELOAD",
        ] {
            assert!(code_loading_env(name).is_none(), "{name}");
        }
    }

    #[test]
    fn allow_env_lets_exactly_the_named_variable_through() {
        let env = ["A".to_string(), "PYTHONPATH".to_string()];
        let e = refuse_env(&env, &[]).unwrap_err();
        assert!(
            e.starts_with("`env` sets PYTHONPATH, which adds folders"),
            "{e}"
        );
        assert!(e.contains("`allow_env`"), "{e}");
        assert!(refuse_env(&env, &["PYTHONPATH".into()]).is_ok());
        assert!(refuse_env(&env, &["pythonpath".into()]).is_err());
    }
}
