//! The `skillhost` binary: the command line (`cli`), built on the
//! library's public API only.

mod cli;

/// The allocator of the binary: mimalloc, not the C library's. A served
/// call allocates and frees many small objects on whichever worker thread
/// runs it (request, JSON, the run record); under load, glibc's arenas
/// spent about 10 % of `serve --http`'s time in malloc, free and their
/// consolidation, and the server's CPU time per call fell by about that
/// much with mimalloc (see BENCHMARKS.md). Built without transparent huge
/// pages (`no_thp`): with them an idle `serve` held 10 MiB more (2 MiB
/// pages of which a few bytes were used) and gave memory back only in
/// 2 MiB pieces.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
