//! Every limit of the host, each with the reason for its value: the
//! resource limits of one sandboxed call and the policy that caps them;
//! the outbound HTTP limits of a call; the HTTP front's connection limits; the limits on sessions, streams,
//! pending approvals and stored arguments; skill scripts and the in-memory
//! filesystem they write to.
//!
//! Every default lives here, so changing one limit is a one-line change.

use std::time::Duration;

/// Default linear-memory cap per call: 64 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;

/// Default wall-clock deadline per call: 10 s. It covers CPU time (through
/// epoch interruption) and time blocked in WASI (through an outer timeout).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default fuel per call: 10¹⁰ units (about one unit per WebAssembly
/// instruction).
///
/// Measured on the 2-core reference machine (release-built plugins, see the
/// issue notes): `text.word_count` over 1 MiB of text consumes 8.4 × 10⁷
/// fuel, `json.query` into a 20 000-item document 1.1 × 10⁸, and
/// `text.regex_replace` of `[a-z]+` over 1 MiB (200 000 matches) 5.9 × 10⁸;
/// a short `text.word_count` about 7 × 10³. A tight loop burns about
/// 6.4 × 10⁹ fuel per second. 10¹⁰ leaves a 17× margin over the heaviest
/// legitimate example while a runaway loop ends by fuel in about 1.6 s,
/// well before the 10 s wall clock: CPU-bound runaways end by fuel
/// (deterministic, independent of machine load), blocked ones by the
/// deadline.
pub const DEFAULT_FUEL: u64 = 10_000_000_000;

/// Default cap on the JSON a tool may return: 1 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;

/// Default cap on what a call may write to stdout, and separately to stderr:
/// 1 MiB each. A component writing more is stopped with `output-too-large`.
pub const DEFAULT_MAX_STDIO_BYTES: u64 = 1 << 20;

/// Default cap on bytes a component may pass to host imports in one call
/// (log messages, `invoke` arguments, config keys): 8 MiB.
pub const DEFAULT_MAX_HOSTWARD_BYTES: u64 = 8 << 20;

/// The most a policy allows for each limit unless the embedder raises it.
pub const CEILING_MEMORY_BYTES: u64 = 1 << 30;
/// See [`CEILING_MEMORY_BYTES`].
pub const CEILING_TIMEOUT: Duration = Duration::from_secs(300);
/// See [`CEILING_MEMORY_BYTES`].
pub const CEILING_FUEL: u64 = 100_000_000_000;

/// Default number of instances that may run at once: 256. Each call in
/// flight holds one slot of the engine's pooling allocator, which reserves
/// address space (not memory) for every slot's memories and tables when the
/// engine is built, so the count is fixed then. 256 is more calls than a
/// machine of a few cores runs at once; one more call gets `busy` at once
/// rather than waiting for a slot. `SandboxBuilder::max_instances` changes
/// it.
pub const DEFAULT_MAX_INSTANCES: u32 = 256;

/// Default WebAssembly stack per call: 512 KiB, wasmtime's own default.
/// The CPython and StarlingMonkey interpreters of Python and JavaScript
/// skills run within it (their guests' tests do), and a runaway recursion
/// ends with a `stack` trap after at most this much.
/// `SandboxBuilder::max_wasm_stack` changes it.
pub const DEFAULT_MAX_WASM_STACK: usize = 512 << 10;

/// Native stack a call's fiber has over its WebAssembly stack: 1 MiB, for
/// the host functions a guest calls (WASI, outbound HTTP, logging), which
/// run on the same fiber.
pub const HOST_STACK_HEADROOM: usize = 1 << 20;

/// Default epoch tick: 1 ms. It is how often a CPU-bound guest checks its
/// deadline and yields the worker thread to other calls, so it bounds both
/// how far past its deadline a runaway runs and how long it keeps a thread
/// from others; the ticker thread wakes once per tick.
/// `SandboxBuilder::epoch_tick` changes it.
pub const DEFAULT_EPOCH_TICK: Duration = Duration::from_millis(1);

/// The shortest epoch tick a builder accepts: 100 µs, at which the ticker
/// already wakes 10 000 times a second for a gain in deadline precision no
/// call can see.
pub const MIN_EPOCH_TICK: Duration = Duration::from_micros(100);

/// How long an HTTP client has to send a request head: 10 s. A slow
/// client on a good network sends a head in milliseconds; one that takes
/// longer is holding a connection (and a file descriptor) open on purpose.
/// In hyper it also bounds how long a keep-alive connection may wait for
/// its next request. `serve --header-timeout-secs` changes it.
pub const HTTP_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an HTTP request's body may take, from the handler's first
/// read, beyond the time its size explains at
/// [`HTTP_BODY_MIN_BYTES_PER_SEC`]: 10 s, as for a head. A client sends a
/// body right after its head; one that stops sending holds a connection
/// (and, unauthenticated, a place in its address's cap) on purpose, and
/// is cut with 408. `serve --body-timeout-secs` changes it.
pub const HTTP_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The slowest an HTTP request's body may arrive: 1 KiB a second, each
/// KiB earning it one more second past [`HTTP_BODY_READ_TIMEOUT`]. The
/// slowest mobile link sends several times that, so a 25 MiB bundle
/// upload over it arrives; a client that trickles a byte now and then to
/// hold a connection is cut. `serve --body-min-bytes-per-sec` changes it.
pub const HTTP_BODY_MIN_BYTES_PER_SEC: u64 = 1024;

/// How long an HTTP connection may send and receive nothing while no
/// request is being handled: 60 s, four times the 15 s keep-alive pings of
/// an idle MCP event stream, so a listening client is never cut but one
/// that stopped reading is. `serve --idle-timeout-secs` changes it.
pub const HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stopping HTTP server waits for its `subscriptions/listen`
/// streams to write their final result (the 2026-07-28 graceful teardown)
/// before it ends every session: 1 s. Writing one small message takes
/// microseconds; a client that stopped reading must not hold the stop up.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub const HTTP_LISTEN_FINAL_RESULT_WAIT: Duration = Duration::from_secs(1);

/// HTTP connections open at once, from every peer: 4096, well under the
/// open-file limit `serve` raises itself to (the rest is for MCP servers'
/// pipes, the database and the compiled-code cache). Over it a connection
/// is closed at once. `serve --max-connections` changes it.
pub const HTTP_MAX_CONNECTIONS: usize = 4096;

/// HTTP connections open at once from one peer address: 256, more than
/// any MCP client opens (a handful) and than a busy gateway keeps alive,
/// so one peer cannot take the whole budget. `serve
/// --max-connections-per-peer` changes it.
pub const HTTP_MAX_CONNECTIONS_PER_PEER: usize = 256;

/// MCP sessions (legacy era) open at once on an HTTP server: 1024. An idle
/// session costs tens of KiB (see `benches/sessions.rs`); this bounds them
/// to tens of MiB. Over it a new session is refused with 503.
pub const MCP_MAX_SESSIONS: usize = 1024;

/// MCP sessions open at once for one caller (a persona, or the operator):
/// 64, far more than the clients of one persona keep, so one caller cannot
/// take the whole budget.
pub const MCP_MAX_SESSIONS_PER_CALLER: usize = 64;

/// How long an MCP session may see no request before it ends: 10 minutes,
/// longer than any client waits between calls in a conversation; a client
/// that comes back later starts a new session.
pub const MCP_SESSION_IDLE: Duration = Duration::from_secs(600);

/// Listening streams (legacy GET streams, 2026-07-28 `subscriptions/listen`)
/// open at once on an HTTP server: 2048. An idle stream costs a connection
/// and a parked task, no timer: one watcher wakes them all on a change.
pub const MCP_MAX_LISTEN_STREAMS: usize = 2048;

/// Listening streams one caller (a persona, or the operator) may hold open
/// at once, of both eras together: 32. A client listens on one stream per
/// legacy session or subscription, a few per persona; and each stream
/// holds a connection, so one caller must not come near the 256 that its
/// address may hold (`HTTP_MAX_CONNECTIONS_PER_PEER`), which `/healthz`,
/// the console and `/api` share with it. Over it a stream is refused with
/// 503. `serve --max-listen-streams-per-caller` changes it.
pub const MCP_MAX_LISTEN_STREAMS_PER_CALLER: usize = 32;

/// How long a call waiting for approval may be approved by default: 15
/// minutes. Long enough for an operator to notice the queue and decide; a
/// call left longer is one whose agent has moved on, and approving it then
/// would act on a stale request. `approval_ttl_secs` in `settings.json`
/// changes it.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(900);

/// The longest `approval_ttl_secs` a data dir accepts: 30 days. Past that an
/// approval is for a request nobody waits for, and the expiry (the call's
/// time plus it, in milliseconds) stays far inside the clock's range.
pub const MAX_APPROVAL_TTL: Duration = Duration::from_secs(30 * 86_400);

/// The longest time a `serve` flag accepts (`--header-timeout-secs`,
/// `--body-timeout-secs`, `--idle-timeout-secs`, `--session-idle-secs`,
/// `--grace-secs`): one week.
/// Longer is no different in practice from never, and a deadline far enough
/// out no longer fits the clock: the time now plus it would overflow.
pub const SERVE_MAX_SECS: u64 = 7 * 86_400;

/// The fastest minimum rate `serve --body-min-bytes-per-sec` accepts: 1 GiB
/// a second, more than a host's network delivers; a higher minimum would
/// cut every body that is not already in the server's buffers.
pub const SERVE_MAX_BYTES_PER_SEC: u64 = 1 << 30;

/// The largest count a `serve` flag accepts (`--max-connections` and the
/// other caps on connections, sessions and streams): 1 048 576, Linux's
/// default ceiling on one process's open files (`fs.nr_open`). Each
/// connection or stream holds at least one, so a larger cap could never be
/// reached.
pub const SERVE_MAX_COUNT: usize = 1 << 20;

/// The largest arguments (as JSON text) a call that waits for approval may
/// have: 64 KiB. They are kept in the database until decided and listed to
/// the operator in full; a tool that takes more takes a ref. Beyond it the
/// call is refused, not queued.
pub const MAX_WAITING_ARGS_BYTES: usize = 64 << 10;

/// The largest arguments (as JSON text) kept with a run when the operator
/// records every call's arguments (`record_arguments`): 64 KiB, as for a
/// waiting call. Bigger ones are recorded as their size alone, so a
/// caller cannot grow the database by a large body per call.
pub const RECORDED_ARGS_MAX_BYTES: usize = 64 << 10;

/// Calls one caller (a persona, or the operator) may have waiting for
/// approval at once: 32, more than an operator reviews in one sitting.
/// Beyond it the call is refused, not queued, so a caller cannot fill the
/// database or the operator's queue.
pub const MAX_PENDING_PER_CALLER: usize = 32;

/// Longest reason an operator may give when denying a call: 500
/// characters, a few sentences. The reason reaches the run's error (what
/// the agent reads), its `approval` event and the console; a longer text
/// is refused, not cut, so nobody's words are silently lost.
pub const DENY_REASON_MAX_CHARS: usize = 500;

/// Events of one run a run's detail reads (its `approval`, `outbound`,
/// `question_*` events…): 200. A run makes at most
/// `DEFAULT_OUTBOUND_MAX_REQUESTS` (64) outbound requests unless its skill
/// asks for more, and a few decisions: every event of an ordinary run, and
/// a page that stays small for a pathological one.
pub const RUN_DETAIL_MAX_EVENTS: usize = 200;

/// Longest tool name a call may name: 512 bytes. A tool's own name is at
/// most 128 characters (`valid_tool_name`, and MCP's own advice for tool
/// names), behind a server or skill prefix of at most a few dozen: a longer
/// name can name no tool. Whoever sent it (a client, or a guest through
/// `host.invoke`, which may have read it from anywhere) gets a refusal
/// saying so, and the run records the name cut to its first 128 characters,
/// so a 200,000-byte name never fills a record.
pub const MAX_CALLED_TOOL_NAME_BYTES: usize = 512;

/// Runs a run's detail lists as invoked by it: 100. `host.invoke` nests
/// at most `MAX_INVOKE_DEPTH` deep, but a guest may invoke in a loop.
pub const RUN_DETAIL_MAX_CHILDREN: usize = 100;

/// Longest line (one JSON-RPC message) `serve --stdio` reads from its
/// client: 16 MiB, the MCP SDK's own default, far above any call's
/// arguments a tool needs. A longer line is a broken or hostile client: it
/// is dropped as it is read (and logged), never buffered whole.
pub const MCP_STDIO_MAX_LINE_BYTES: usize = 16 << 20;

/// Largest declared body the HTTP lane (a plain sessionless `tools/call`
/// answered without rmcp's per-request service) reads before it decides
/// whether the request is its own: 64 KiB, far above an agent's usual call
/// and small enough to read whole on the way. A bigger call goes to rmcp,
/// which reads it under its own limit.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub const MCP_HTTP_LANE_MAX_BODY_BYTES: usize = 64 << 10;

/// Most core instances one call's component may create: 128. A Rust
/// component makes about four; the standard Python toolchain's output
/// (componentize-py, CPython with its WASI adapters) makes 38, and
/// JavaScript components (StarlingMonkey, QuickJS) a few dozen. Three
/// times the largest, and still a bound: each instance costs host memory,
/// and the pool's totals are shared by every call at once.
pub const MAX_CALL_INSTANCES: usize = 128;

/// Most tables one call's component may create: 128, one per core
/// instance at most in the toolchains above.
pub const MAX_CALL_TABLES: usize = 128;

/// Most linear memories one call's component may create: 16. A Rust
/// component has one; interpreter-based guests a few (the interpreter,
/// its adapters). Each is a reserved slot of the pooling allocator.
pub const MAX_CALL_MEMORIES: usize = 16;

/// Bytes at the start of a pooled linear memory the sandbox's reset (without
/// the pagemap scan, the default) restores in place after a call, rather
/// than handing them back to the kernel: 0. Without the scan the reset
/// restores the whole prefix whether the guest wrote it or not, and drops
/// the rest with `madvise`; measured with the sandbox bench when the scan
/// became the default, keeping 1 MiB resident without it was the slowest
/// setting of those tried (`variant_memory_keep_resident_*` in
/// `benches/sandbox.rs` measures it again).
pub const MEMORY_KEEP_RESIDENT: usize = 0;

/// Bytes of a pooled table the reset without the pagemap scan restores in
/// place: 64 KiB, the value the sandbox used before, with and without the
/// scan (not measured again without it: `variant_table_keep_resident_*` in
/// `benches/sandbox.rs` compares 0, 4 KiB and 64 KiB).
pub const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// With the pagemap scan (`SandboxBuilder::pagemap_scan`), at most this
/// much of a linear memory's written pages is restored in place: 1 MiB.
/// The scan restores only what the guest wrote; measured with the sandbox
/// bench when the scan was the default: fresh-call p50 60 µs → 15 µs.
pub const PAGEMAP_MEMORY_KEEP_RESIDENT: usize = 1 << 20;

/// With the pagemap scan, at most this much of a table's written pages is
/// restored in place: 64 KiB, more than the tables of a Rust or
/// interpreter guest fill.
pub const PAGEMAP_TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Instantiations at least this long get a spare instance made ahead of
/// the next call (see the sandbox's `spare` module): 50 µs. A Rust guest
/// instantiates in 5-10 µs, so a spare would only move that work to
/// another task (and on `serve --stdio`'s one thread, add the hand-off);
/// the standard Python and JavaScript toolchains' output takes 200 µs to
/// 1 ms, time the call no longer waits for.
pub const SPARE_MIN_INSTANTIATE: std::time::Duration = std::time::Duration::from_micros(50);

/// Most spare instances a sandbox holds or is making at once: 8. Each
/// holds an instance slot of the pool (of the 256 by default) and its
/// memory's written pages (some MiB for a Python guest) while it waits;
/// eight skills served hot covers an agent's working set, and the rest
/// instantiate on their call as before.
pub const MAX_SPARE_INSTANCES: usize = 8;

/// Largest table (of function references) a guest may grow one to:
/// 100,000 elements. Tables cost host memory per element, and no
/// toolchain's output comes near it.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Most entries a call's host resource table may hold (streams,
/// pollables, requests): 4,096. A legitimate skill needs a handful; a
/// hostile one could otherwise create millions and grow host memory.
pub const MAX_RESOURCE_HANDLES: usize = 4096;

/// Most resources one MCP session may watch with `resources/subscribe`:
/// 256. A client watches the few documents it has open; past this a
/// session would grow host memory and the work done on every change.
pub const MCP_MAX_RESOURCE_SUBSCRIPTIONS: usize = 256;

/// Most content blocks one `result: content` tool result may hold: 64. A
/// result is a handful of blocks (text, an image, a resource); the output
/// cap bounds their bytes, this their count.
pub const MAX_CONTENT_BLOCKS: usize = 64;

/// Longest wait for a call's progress and log forwarders to send what they
/// hold before its MCP response goes out: 2 s. They hold it in memory, so
/// only a stuck client connection takes longer, and the response is not
/// held for that.
pub const MCP_NOTICE_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Longest log line passed on (a skill's `host.log`, an MCP server's
/// `notifications/message`), in bytes: 4 KiB, a line for a person to read;
/// longer ones are cut.
pub const MAX_LOG_MESSAGE_BYTES: usize = 4096;

/// Longest `host.elicit` message, in bytes: 4 KiB (a question for a person;
/// longer is refused, not cut, so that the user sees what the skill meant).
pub const MAX_ELICIT_MESSAGE_BYTES: usize = 4096;

/// Longest `host.elicit` form schema, in bytes: 64 KiB (a form of a few
/// dozen fields with their enums and titles).
pub const MAX_ELICIT_SCHEMA_BYTES: usize = 64 << 10;

/// How long the registry snapshot (skills, personas, grants, servers) and
/// the persona tokens are used without asking the database whether another
/// process changed them:
/// 1 ms. A change made in this process applies to the next call; one made
/// by another process (a CLI revoking a grant) within this, far below the
/// time a client takes to send its next call, while a busy host asks the
/// database once per millisecond instead of twice per call.
/// (On a database replicas share, while the change feed listens, its
/// notifications tell instead; see [`FEED_RECHECK`].)
pub const REGISTRY_RECHECK: std::time::Duration = std::time::Duration::from_millis(1);

/// On a database replicas share, while the replica's change feed listens:
/// how long the registry snapshot and the persona tokens are used without
/// asking the database, when no notification came: 1 s. The feed's
/// notifications mark a change at once (within the time one takes to
/// arrive, well under a millisecond on a local network), so a busy
/// replica sends the database no query per call; this bounds how stale a
/// replica can be if the feed's connection stalls without closing, to the
/// one second a change may take to reach every replica.
pub const FEED_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a replica waiting for another's lock on a shared document
/// (an HTTP server's OAuth sign-in being refreshed) asks again: refreshes
/// take one round trip to an authorization server, tens of milliseconds,
/// and a waiter needs the new tokens soon after, not at once.
pub const DOCUMENT_LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Most runs and events queued for the writer thread before a call that
/// records one waits for room: 16 384 (about 16 MiB of queued rows). The
/// writer commits at least every 2 ms while writes arrive, so the queue
/// holds only what arrives within one commit; it fills only when the
/// disk cannot keep up, and then the calls slow to the disk's pace instead
/// of the process growing without bound. A `kill -9` loses at most this
/// queue and the batch being committed (in practice the last few
/// milliseconds' calls), and only records of read-only calls: those of
/// calls that mutate data or needed confirmation are durable before their
/// answer.
pub const MAX_QUEUED_WRITES: usize = 16_384;

/// How many times a PostgreSQL transaction that conflicted with a
/// concurrent one (a serialization failure or deadlock, which replicas
/// sharing one database cause) is run again before its error is returned.
/// Conflicts are rare and clear within a few tries; a bound keeps a
/// pathological one from looping.
pub const DB_TRANSACTION_ATTEMPTS: u32 = 8;

/// Longest wait to connect to a PostgreSQL server: a server that is down
/// or unreachable fails the command (or the start of `serve`) with its
/// address rather than hanging.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub const DB_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait for one PostgreSQL query's answer. Host queries take
/// milliseconds; one that takes this long means the server or the network
/// is stuck, and the caller gets an error instead of waiting forever.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub const DB_QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a replica's change feed (its `LISTEN` connection to
/// PostgreSQL) waits before connecting again after losing the server.
/// While it is away the replica asks the database on every check instead,
/// so this only bounds how soon it goes back to asking less.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub const DB_FEED_RETRY: Duration = Duration::from_millis(500);

/// How long a replica's lease on an approved call it runs lasts; it renews
/// it every third of this while the call runs. A replica that dies
/// (kill -9, a lost machine) stops renewing, and another replica marks the
/// run `interrupted` once the lease has expired: this bounds how long such
/// a run shows `running`, while a replica that is merely slow (a stalled
/// disk, a busy CPU) has two renewals' worth of slack.
pub const RUN_LEASE: Duration = Duration::from_secs(6);

/// Most questions one `host.ask` puts at once: 8 (a form, a completion
/// and the roots, with room to spare; a client shows them one by one).
pub const MAX_ASK_REQUESTS: usize = 8;

/// Longest `host.ask` sampling request, in bytes: 64 KiB (a few messages
/// of context for the client's model; the client bills its user for it).
pub const MAX_SAMPLE_REQUEST_BYTES: usize = 64 << 10;

/// Largest answer one question takes, in bytes: 256 KiB (a form's fields,
/// a model's reply, a list of roots); a larger answer is refused, not cut.
pub const MAX_INPUT_ANSWER_BYTES: usize = 256 << 10;

/// Longest `requestState` the front hands out or takes back, in bytes:
/// 1 MiB. It carries the answers given in earlier rounds of a call (each at
/// most [`MAX_INPUT_ANSWER_BYTES`]), signed; a larger one is refused.
pub const MAX_REQUEST_STATE_BYTES: usize = 1 << 20;

/// How long a `requestState` is good for: 10 minutes, a person's time to
/// answer a form (an expired one is refused: call again from the start).
pub const REQUEST_STATE_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// Longest progress message kept, in bytes: 1 KiB (a status line; longer
/// ones are cut).
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;

/// Most progress reports and log lines one call passes to its caller: 256.
/// A progress bar needs a few dozen and a chatty skill a few hundred lines;
/// past this a loop of `host.progress` or `host.log` would flood the
/// caller's MCP stream, so the rest are dropped (the host's log says so).
pub const MAX_CALL_NOTICES: usize = 256;

/// How much of a call's stdout and of its stderr is kept for the log and
/// the result: 16 KiB each (the rest is counted, not kept). Enough for a
/// panic message or a traceback; a flood costs nothing.
pub const KEPT_STDIO_BYTES: usize = 16 << 10;

/// Longest value of a skill secret, in bytes: API tokens and keys are a few
/// hundred bytes; a header value beyond this is refused by most servers,
/// and the value is kept (sealed) in the database.
pub const MAX_SECRET_BYTES: usize = 8 << 10;

/// Most network origins a skill may list: a page an operator can read
/// before approving it.
pub const MAX_ORIGINS: usize = 64;

/// Most secrets a skill may declare: each is a value an operator keeps.
pub const MAX_SECRETS: usize = 16;

/// Outbound HTTP requests one call may make: 64. A tool that calls an API
/// makes a handful (a search and a few fetches, a paginated listing); more
/// than this is a loop, a crawl or an exfiltration attempt, and each
/// request is an audit event. Beyond it every request is refused.
pub const DEFAULT_OUTBOUND_MAX_REQUESTS: u32 = 64;

/// Outbound requests one call may have in flight at once: 8, what a
/// browser opens per origin; enough to fetch a page of results in
/// parallel, few enough that one call cannot hold hundreds of sockets.
pub const DEFAULT_OUTBOUND_MAX_CONCURRENT: u32 = 8;

/// Largest request body a call may send: 1 MiB. API calls send JSON
/// queries and small documents; uploading more is not what a tool call
/// is for, and it would all pass through guest memory first.
pub const DEFAULT_OUTBOUND_MAX_REQUEST_BODY_BYTES: u64 = 1 << 20;

/// Largest response body a call may receive per request: 8 MiB, the same
/// as the bytes it may pass to the host, and an eighth of the default
/// memory cap, so a huge or endless response ends by this limit rather
/// than by the guest running out of memory.
pub const DEFAULT_OUTBOUND_MAX_RESPONSE_BODY_BYTES: u64 = 8 << 20;

/// How long one outbound request may take, from the guest's `handle` to
/// the end of the response body: 10 s, never beyond the call's own
/// deadline. A slow API answers in seconds; a server that drips bytes
/// must not hold the call (and its instance slot) to the end.
pub const DEFAULT_OUTBOUND_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest response head (headers) per request: 64 KiB, eight times what
/// common servers and proxies send or accept (8 KiB), so legitimate
/// responses pass and a header flood ends early.
pub const DEFAULT_OUTBOUND_MAX_RESPONSE_HEADER_BYTES: u64 = 64 << 10;

/// Longest method an outbound request may have, in bytes: 32. Every
/// method in IANA's registry fits (the longest, `UPDATEREDIRECTREF`, has
/// 17 bytes). The method is kept in the audit record of every request,
/// allowed or refused, so it must be small: eight refused requests with
/// 200,000-byte methods made one run's record 1.6 MB. A longer method is
/// refused before anything is recorded of it.
pub const MAX_OUTBOUND_METHOD_BYTES: usize = 32;

/// Longest host name of an outbound request, in bytes: 253, the longest a
/// DNS name can be written (RFC 1035; an IPv6 literal is shorter). A
/// longer one cannot be resolved anyway; the host is kept in the audit
/// record of every request (as its origin), so a longer one is refused
/// before anything is recorded of it.
pub const MAX_OUTBOUND_HOST_BYTES: usize = 253;

/// The outbound HTTP limits of one call; each refusal names its field as
/// an [`OutboundLimit`](crate::OutboundLimit).
///
/// `OutboundLimits::default()` is: 64 requests, 8 at once, 1 MiB request
/// bodies, 8 MiB response bodies, 64 KiB response heads, 10 s per request.
///
/// ```
/// let l = skillhost::OutboundLimits::default();
/// assert_eq!((l.max_requests, l.max_concurrent), (64, 8));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboundLimits {
    /// Requests per call, allowed or refused.
    pub max_requests: u32,
    /// Requests in flight at once (until the response body ends or is dropped).
    pub max_concurrent: u32,
    /// Largest request body, in bytes.
    pub max_request_body_bytes: u64,
    /// Largest response body, in bytes.
    pub max_response_body_bytes: u64,
    /// Largest response head, in bytes.
    pub max_response_header_bytes: u64,
    /// Longest request, from `handle` to the end of the response body;
    /// never beyond the call's deadline.
    pub request_timeout: Duration,
}

impl Default for OutboundLimits {
    fn default() -> Self {
        OutboundLimits {
            max_requests: DEFAULT_OUTBOUND_MAX_REQUESTS,
            max_concurrent: DEFAULT_OUTBOUND_MAX_CONCURRENT,
            max_request_body_bytes: DEFAULT_OUTBOUND_MAX_REQUEST_BODY_BYTES,
            max_response_body_bytes: DEFAULT_OUTBOUND_MAX_RESPONSE_BODY_BYTES,
            max_response_header_bytes: DEFAULT_OUTBOUND_MAX_RESPONSE_HEADER_BYTES,
            request_timeout: DEFAULT_OUTBOUND_REQUEST_TIMEOUT,
        }
    }
}

/// The limits one call runs under.
///
/// `Limits::default()` is: 64 MiB memory, 10 s deadline, 10¹⁰ fuel,
/// 1 MiB output, 1 MiB each of stdout and stderr, 8 MiB host-ward bytes,
/// [`OutboundLimits::default()`].
///
/// ```
/// use skillhost::Limits;
/// let limits = Limits::default();
/// assert_eq!(limits.memory_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel units; roughly one per WebAssembly instruction.
    pub fuel: u64,
    /// Linear memory cap, in bytes, across all memories of the instance.
    pub memory_bytes: u64,
    /// Wall-clock deadline.
    pub timeout: Duration,
    /// Largest output JSON accepted from the tool, in bytes.
    pub max_output_bytes: u64,
    /// Largest stdout (and, separately, stderr) a call may write, in bytes.
    pub max_stdio_bytes: u64,
    /// Largest total of bytes passed to host imports in one call.
    pub max_hostward_bytes: u64,
    /// Outbound HTTP limits (only for a component with network access).
    pub outbound: OutboundLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: DEFAULT_FUEL,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stdio_bytes: DEFAULT_MAX_STDIO_BYTES,
            max_hostward_bytes: DEFAULT_MAX_HOSTWARD_BYTES,
            outbound: OutboundLimits::default(),
        }
    }
}

/// A request to change some limits for one call; `None` keeps the default.
///
/// ```
/// use skillhost::LimitsRequest;
/// let req = LimitsRequest { fuel: Some(1_000), ..Default::default() };
/// assert_eq!(req.memory_bytes, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsRequest {
    /// Fuel units.
    pub fuel: Option<u64>,
    /// Memory cap in bytes.
    pub memory_bytes: Option<u64>,
    /// Deadline in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// What a host allows: the defaults every call gets and the ceiling no
/// request may exceed.
///
/// `LimitsPolicy::default()` has [`Limits::default()`] as defaults and
/// 1 GiB memory, 300 s and 10¹¹ fuel as ceilings.
///
/// ```
/// use skillhost::{LimitsPolicy, LimitsRequest};
/// let policy = LimitsPolicy::default();
/// let limits = policy.resolve(&LimitsRequest { timeout_ms: Some(500), ..Default::default() }).unwrap();
/// assert_eq!(limits.timeout.as_millis(), 500);
/// assert!(policy.resolve(&LimitsRequest { fuel: Some(0), ..Default::default() }).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsPolicy {
    /// Limits of a call that requests nothing.
    pub defaults: Limits,
    /// Largest memory a call may request, in bytes.
    pub max_memory_bytes: u64,
    /// Longest deadline a call may request.
    pub max_timeout: Duration,
    /// Most fuel a call may request.
    pub max_fuel: u64,
}

impl Default for LimitsPolicy {
    fn default() -> Self {
        LimitsPolicy {
            defaults: Limits::default(),
            max_memory_bytes: CEILING_MEMORY_BYTES,
            max_timeout: CEILING_TIMEOUT,
            max_fuel: CEILING_FUEL,
        }
    }
}

/// A limit request outside what the policy allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit `{name}` = {requested} is not allowed: it must be between 1 and {max} {unit}")]
pub struct LimitError {
    /// Which limit.
    pub name: &'static str,
    /// What was asked.
    pub requested: u64,
    /// The policy's ceiling.
    pub max: u64,
    /// The unit of both numbers.
    pub unit: &'static str,
}

impl LimitsPolicy {
    /// Applies a request to the defaults. Zero, or more than the ceiling, is
    /// an error naming the limit: limits fail closed, never silently clamped.
    ///
    /// ```
    /// use skillhost::{LimitsPolicy, LimitsRequest};
    /// let err = LimitsPolicy::default()
    ///     .resolve(&LimitsRequest { memory_bytes: Some(u64::MAX), ..Default::default() })
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("memory"));
    /// ```
    pub fn resolve(&self, request: &LimitsRequest) -> Result<Limits, LimitError> {
        fn check(
            name: &'static str,
            v: u64,
            max: u64,
            unit: &'static str,
        ) -> Result<u64, LimitError> {
            if v == 0 || v > max {
                Err(LimitError {
                    name,
                    requested: v,
                    max,
                    unit,
                })
            } else {
                Ok(v)
            }
        }
        let mut limits = self.defaults;
        if let Some(fuel) = request.fuel {
            limits.fuel = check("fuel", fuel, self.max_fuel, "units")?;
        }
        if let Some(mem) = request.memory_bytes {
            limits.memory_bytes = check("memory", mem, self.max_memory_bytes, "bytes")?;
        }
        if let Some(ms) = request.timeout_ms {
            let max_ms = u64::try_from(self.max_timeout.as_millis()).unwrap_or(u64::MAX);
            limits.timeout = Duration::from_millis(check("timeout", ms, max_ms, "ms")?);
        }
        Ok(limits)
    }
}

impl LimitsPolicy {
    /// The limits of a script call that asks for nothing: the script
    /// defaults ([`DEFAULT_SCRIPT_FUEL`], [`DEFAULT_SCRIPT_MEMORY_BYTES`],
    /// [`DEFAULT_SCRIPT_TIMEOUT`]), each capped by this policy's ceiling;
    /// the other limits are a tool call's.
    ///
    /// ```
    /// let mut policy = skillhost::LimitsPolicy::default();
    /// assert_eq!(policy.script_limits().memory_bytes, 256 << 20);
    /// policy.max_memory_bytes = 128 << 20;
    /// assert_eq!(policy.script_limits().memory_bytes, 128 << 20);
    /// ```
    pub fn script_limits(&self) -> Limits {
        Limits {
            fuel: DEFAULT_SCRIPT_FUEL.min(self.max_fuel),
            memory_bytes: DEFAULT_SCRIPT_MEMORY_BYTES.min(self.max_memory_bytes),
            timeout: DEFAULT_SCRIPT_TIMEOUT.min(self.max_timeout),
            ..self.defaults
        }
    }

    /// The limits of byte-compiling a skill's scripts and packages at
    /// install ([`ScriptRuntime::compile`](crate::ScriptRuntime::compile)):
    /// a script's, with this policy's ceilings of fuel and time. It runs
    /// once per install, not per call, and a package of a few hundred
    /// files needs several times a script's fuel (pypdf's 61 files took
    /// 4.9 × 10⁹, 3 s on the shared 2-core machine).
    ///
    /// ```
    /// let policy = skillhost::LimitsPolicy::default();
    /// assert_eq!(policy.compile_limits().fuel, policy.max_fuel);
    /// ```
    pub fn compile_limits(&self) -> Limits {
        Limits {
            fuel: self.max_fuel,
            timeout: self.max_timeout,
            ..self.script_limits()
        }
    }

    /// Applies a script's request to [`script_limits`](Self::script_limits),
    /// as [`resolve`](Self::resolve) does to the tool defaults.
    ///
    /// ```
    /// use skillhost::{LimitsPolicy, LimitsRequest};
    /// let l = LimitsPolicy::default()
    ///     .resolve_script(&LimitsRequest { timeout_ms: Some(5_000), ..Default::default() })
    ///     .unwrap();
    /// assert_eq!((l.timeout.as_secs(), l.fuel), (5, 60_000_000_000));
    /// ```
    pub fn resolve_script(&self, request: &LimitsRequest) -> Result<Limits, LimitError> {
        LimitsPolicy {
            defaults: self.script_limits(),
            ..*self
        }
        .resolve(request)
    }
}

/// Largest access token the HTTP front verifies (`front_oauth`): real JWTs
/// are a few KiB; a bigger one is refused before any parsing.
pub const MAX_ACCESS_TOKEN_BYTES: usize = 16 * 1024;

/// Largest authorization-server answer the HTTP front reads (metadata, key
/// set, introspection): such documents are a few KiB.
pub const MAX_AUTH_METADATA_BYTES: usize = 256 * 1024;

/// The most of a refused HTTP request's body the front reads before it
/// answers (so the connection stays usable for the client's next request,
/// e.g. fetching the metadata a 401 names): 64 KiB, more than any MCP
/// request a client sends before it has a token; a bigger body gets the
/// refusal with `Connection: close`.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub const REFUSED_BODY_DRAIN_BYTES: usize = 64 << 10;

/// How long the front waits for a refused request's body: 2 s, a slow
/// client's body on a loaded link; a slower one gets `Connection: close`.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub const REFUSED_BODY_DRAIN_TIME: Duration = Duration::from_secs(2);

/// How long a console sign-in lasts: a working day. The admin token is
/// asked again after it; a session is ended sooner by signing out or by
/// the server's restart (sessions live in memory only).
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// Console sessions open at once: a few operators with a few browsers
/// each. Beyond it the oldest session ends, so a script signing in over
/// and over cannot grow the server's memory.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_MAX_SESSIONS: usize = 64;

/// How often a console page's live stream looks for a change in the
/// approval queue (one cheap indexed count per look and stream): the
/// queue shows a new waiting call within this plus the page's fetch.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_LIVE_POLL: Duration = Duration::from_millis(400);

/// Console live streams open at once, across sessions: each polls the
/// database, so they are capped apart from MCP's listening streams.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_MAX_LIVE_STREAMS: usize = 32;

/// How much of a waiting call's arguments the approval queue shows
/// before folding the rest under "show all" (the page stays readable
/// with 64 KiB arguments, `MAX_WAITING_ARGS_BYTES`).
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_ARGS_PREVIEW_CHARS: usize = 600;

/// Verified bundles the console keeps for an install the operator has not
/// confirmed yet (one per session; the oldest goes beyond it): each may be
/// up to 25 MiB (`MAX_ARCHIVE_BYTES`), in a temporary file of the data dir
/// (an open file with no name), not in memory.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_MAX_UPLOADS: usize = 4;

/// Bundle uploads the console reads at once: 2. An operator uploads one
/// bundle at a time; each upload being read holds a file and, while it is
/// verified, the bundle in memory (up to 25 MiB), so this bounds both.
/// One more is refused at once, saying so.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_MAX_CONCURRENT_UPLOADS: usize = 2;

/// The most an upload's `csrf` part may hold: 256 bytes (the token is 64
/// hex digits). It is read before the bundle, so a longer one is refused
/// without reading on.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_CSRF_PART_BYTES: usize = 256;

/// Wrong console sign-ins one peer address may try within a
/// [`CONSOLE_SIGN_IN_WINDOW`]: 10, room for an operator's typos. Past it
/// every sign-in from that address is refused unchecked (the right token
/// too: the admin token is not guessed through the throttle) until the
/// window ends, and those refusals are counted in one audit event instead
/// of a row each.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_SIGN_IN_ATTEMPTS: u32 = 10;

/// The window of [`CONSOLE_SIGN_IN_ATTEMPTS`]: 60 s, short enough that an
/// operator who mistyped waits a minute at most.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_SIGN_IN_WINDOW: Duration = Duration::from_secs(60);

/// Peer addresses the sign-in throttle counts apart: 1024, more than ever
/// reach a console. Past it the others share one count, so addresses made
/// up by the thousand neither grow memory nor escape the throttle.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_SIGN_IN_PEERS: usize = 1024;

/// The most form bytes a console POST may send (a sign-in token, a
/// reason, a CSRF token): anything longer is not a console form.
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub const CONSOLE_MAX_FORM_BYTES: usize = 16 << 10;

/// The most source files `skillhost build` reads from a skill folder to
/// record and compare what a component was built from: 10 000. A skill's
/// own sources are a handful of files (a vendored SDK adds a few); a folder
/// past this is not a skill's sources (a checked-in virtualenv, say) and
/// its build is not recorded.
pub const MAX_BUILD_SOURCE_FILES: usize = 10_000;

/// Up to how many source files a build record lists one by one (so
/// `check` can name the file that changed): 256. Past it the record keeps
/// only the digest of all of them, so a component grows by a few KiB at
/// most.
pub const MAX_BUILD_SOURCE_FILES_RECORDED: usize = 256;

// --- skill scripts and the in-memory filesystem ------------------------------

/// Default fuel of a script call: 6 × 10¹⁰ units, about 10 s of CPU at a
/// tight loop's 6.4 × 10⁹ a second. Reading a PDF form's fields with pypdf
/// took 5.9 × 10⁸ (its byte-code compiled ahead), so this is a hundred
/// times that: room for real documents, while a runaway script still ends
/// by fuel. Capped by the policy's ceiling (`CEILING_FUEL`, 10¹¹).
pub const DEFAULT_SCRIPT_FUEL: u64 = 60_000_000_000;

/// Default memory of a script call: 256 MiB. The pypdf form read fits in
/// 48 MiB; parsing a 20 MB PDF or a large workbook into Python objects
/// needs a few hundred. Capped by the policy's ceiling
/// (`CEILING_MEMORY_BYTES`, 1 GiB).
pub const DEFAULT_SCRIPT_MEMORY_BYTES: u64 = 256 << 20;

/// Default deadline of a script call: 60 s, the default fuel at a loaded
/// machine's pace (byte-compiling pypdf's 61 files, 4.9 × 10⁹ fuel, took
/// 3 s on the shared 2-core machine). Capped by the policy's ceiling
/// (`CEILING_TIMEOUT`, 300 s).
pub const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of a script's stdout (and, apart, its stderr) a call keeps:
/// 256 KiB. A script's stdout *is* its answer (a report, a JSON document);
/// the 16 KiB a tool call keeps (`KEPT_STDIO_BYTES`) cuts real reports.
/// Past it the rest is counted, and the flood cap stays the call's
/// `max_stdio_bytes`.
pub const SCRIPT_STDOUT_KEPT_BYTES: usize = 256 << 10;

/// Most arguments a script call passes: 64, more than any command line a
/// skill's instructions give.
pub const MAX_SCRIPT_ARGS: usize = 64;

/// Longest argument of a script call: 4 KiB, a long path or a paragraph.
/// Text beyond it belongs in stdin or a file.
pub const MAX_SCRIPT_ARG_BYTES: usize = 4 << 10;

/// Largest stdin of a script call: 1 MiB of piped text; a document is an
/// input file.
pub const MAX_SCRIPT_STDIN_BYTES: usize = 1 << 20;

/// Most input files of a script call: 32, a handful of documents.
pub const MAX_SCRIPT_INPUT_FILES: usize = 32;

/// Largest total of a script call's input files: 64 MiB, one ref blob's
/// cap. They are placed in the scratch folder, so they count against
/// [`MAX_SCRATCH_BYTES`] too.
pub const MAX_SCRIPT_INPUT_BYTES: u64 = 64 << 20;

/// Deepest name of a script call's input file: 16 folders. Real inputs
/// are a file or an unpacked document's parts a few folders deep; the
/// scratch folder's own cap ([`MAX_SCRATCH_DEPTH`]) leaves the script room
/// to nest its own folders below them.
pub const MAX_SCRIPT_INPUT_DEPTH: usize = 16;

/// Largest output file of a script call whose UTF-8 text is also put in
/// the result (an embedded resource beside its link): 16 KiB, a small
/// JSON or CSV document an agent reads at once.
pub const SCRIPT_INLINE_TEXT_BYTES: u64 = 16 << 10;

/// Most output text one script call puts in its result inline, all files
/// together: 64 KiB; past it, files come back by link only.
pub const SCRIPT_INLINE_TEXT_TOTAL_BYTES: u64 = 64 << 10;

/// Largest file a script made that `resources/read` of its
/// `skillhost://refs/ID` link serves: 16 MiB, which base64 makes about
/// 21 MiB of one JSON-RPC answer; a larger one is passed on by its ref.
pub const MAX_SERVED_REF_BYTES: u64 = 16 << 20;

/// Largest wheel a skill's scripts may carry: 16 MiB. The largest pure
/// wheels scripts use (openpyxl, 250 KB; pypdf, 420 KB) are far below it;
/// the bundle's own 25 MB cap bounds them all together.
pub const MAX_WHEEL_BYTES: u64 = 16 << 20;

/// Most files in one wheel: 2,000 (openpyxl, among the largest, has 195).
pub const MAX_WHEEL_FILES: usize = 2_000;

/// Most bytes one wheel unpacks to: 64 MiB, the sandbox's cap on a skill
/// folder read for its scripts (`MAX_SKILL_TREE_BYTES`).
pub const MAX_WHEEL_UNPACKED_BYTES: u64 = 64 << 20;

/// Most files a script may leave under `out/`: 64. More is an error that
/// names the cap (write an archive instead).
pub const MAX_SCRIPT_OUTPUT_FILES: usize = 64;

/// Largest total of the files a script leaves under `out/`: 64 MiB, one
/// ref blob's cap; more is an error that names the cap.
pub const MAX_SCRIPT_OUTPUT_BYTES: u64 = 64 << 20;

/// Largest total of the file bytes in one script call's scratch folder:
/// 256 MiB, a document, its unpacked XML and the result several times
/// over. The scratch folder is host memory: a sparse write counts its
/// logical size (`seek(2**40); write(b"1")` is refused before anything is
/// allocated). Past it the script's write fails with `ENOSPC`.
pub const MAX_SCRATCH_BYTES: u64 = 256 << 20;

/// Most files and folders in one script call's scratch folder: 4096. An
/// unpacked presentation has hundreds of parts; ten thousand tiny files is
/// the attack (each costs host memory and a directory entry). Past it the
/// script's create fails with `ENOSPC`.
pub const MAX_SCRATCH_FILES: usize = 4096;

/// Longest name of a file or folder in the scratch folder: 255 bytes,
/// Linux's `NAME_MAX`. Past it a create fails with `ENAMETOOLONG`.
pub const MAX_SCRATCH_NAME_BYTES: usize = 255;

/// Longest path in the scratch folder, from its root: 1024 bytes, a path a
/// person can still read. Past it a create fails with `ENAMETOOLONG`.
pub const MAX_SCRATCH_PATH_BYTES: usize = 1024;

/// Deepest folder nesting in the scratch folder: 32 levels. Real layouts
/// are a handful deep; deeper is a loop. Past it a create fails with
/// `ENOSPC`.
pub const MAX_SCRATCH_DEPTH: usize = 32;

/// Scratch bytes all script calls in flight may hold together: 1 GiB. Each
/// call reserves its scratch cap ([`MAX_SCRATCH_BYTES`]) before it starts,
/// so four run at once at the default cap and a fifth is `busy` rather
/// than taking host memory the host may not have.
pub const MAX_SCRATCH_BYTES_IN_FLIGHT: u64 = 1 << 30;

/// Largest folder (a skill's, or its `assets/`) read into a read-only
/// layer of the in-memory filesystem: 64 MiB. A bundle extracts to at most
/// 25 MiB; its Python packages, unpacked from their wheels at install,
/// and their byte-code add to that (pypdf, openpyxl and their
/// dependencies unpack to about 15 MiB). The layer is host memory, shared
/// by the skill's calls.
pub const MAX_SKILL_TREE_BYTES: u64 = 64 << 20;

/// Most files and folders in a read-only layer read from a folder: 4096.
/// A bundle holds at most 500 entries; its packages unpack to a few hundred
/// more (pypdf, openpyxl and their dependencies: 309 files).
pub const MAX_SKILL_TREE_FILES: usize = 4096;

/// Deepest folder nesting of a read-only layer read from a folder: 32, as
/// for the scratch folder ([`MAX_SCRATCH_DEPTH`]). A symbolic link to a
/// folder above it would nest without end.
pub const MAX_SKILL_TREE_DEPTH: usize = 32;

/// Most bytes one `read` of a file returns through `wasi:filesystem`:
/// 1 MiB. A guest asks for what it wants to read next; the host copies
/// at most this much into a new buffer per call, whatever length it asks.
pub const MAX_FILE_READ_BYTES: usize = 1 << 20;

/// How much of a guest toolchain's output (stdout and stderr, each) a
/// build keeps to say why it failed: its last 256 KiB. What names the
/// failure (a Python traceback, a JS engine's message) is near its end; a
/// toolchain printing without end costs the host no more than this.
pub const MAX_BUILD_OUTPUT_BYTES: usize = 256 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_absurd_requests_fail_closed() {
        let p = LimitsPolicy::default();
        for req in [
            LimitsRequest {
                fuel: Some(0),
                ..Default::default()
            },
            LimitsRequest {
                memory_bytes: Some(0),
                ..Default::default()
            },
            LimitsRequest {
                timeout_ms: Some(0),
                ..Default::default()
            },
            LimitsRequest {
                fuel: Some(u64::MAX),
                ..Default::default()
            },
            LimitsRequest {
                memory_bytes: Some(CEILING_MEMORY_BYTES + 1),
                ..Default::default()
            },
            LimitsRequest {
                timeout_ms: Some(300_001),
                ..Default::default()
            },
        ] {
            assert!(p.resolve(&req).is_err(), "{req:?} was accepted");
        }
    }

    #[test]
    fn requests_within_policy_apply() {
        let p = LimitsPolicy::default();
        let l = p
            .resolve(&LimitsRequest {
                fuel: Some(5),
                memory_bytes: Some(1 << 20),
                timeout_ms: Some(7),
            })
            .unwrap();
        assert_eq!(
            (l.fuel, l.memory_bytes, l.timeout),
            (5, 1 << 20, Duration::from_millis(7))
        );
        assert_eq!(l.max_output_bytes, DEFAULT_MAX_OUTPUT_BYTES);
    }
}
