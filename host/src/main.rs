//! The `skillhost` binary: the command line (`cli`), built on the
//! library's public API only.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
