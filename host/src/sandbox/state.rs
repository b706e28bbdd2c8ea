//! Per-call store state: WASI context, resource limiter, captured stdio,
//! host-ward byte accounting. A fresh one is made for every call.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::invoke::{Invoker, RefReader};
use super::outbound::{OutboundHooks, OutboundRecord};
use super::outcome::TrapReason;
use crate::limits::{
    Limits, MAX_CALL_INSTANCES, MAX_CALL_MEMORIES, MAX_CALL_TABLES, MAX_RESOURCE_HANDLES,
    MAX_TABLE_ELEMENTS,
};

/// A trap the host raised on purpose, carried through wasmtime's error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{detail}")]
pub(crate) struct HostTrap {
    pub reason: TrapReason,
    pub detail: String,
}

impl HostTrap {
    pub fn new(reason: TrapReason, detail: impl Into<String>) -> HostTrap {
        HostTrap {
            reason,
            detail: detail.into(),
        }
    }
}

/// Enforces the memory and table caps and remembers a denial, so the trap
/// it causes is reported as `memory` whatever the guest does next.
pub(crate) struct CallLimiter {
    memory_cap: usize,
    pub memory_denied: Option<usize>,
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.memory_denied = Some(desired);
            return Err(HostTrap::new(
                TrapReason::Memory,
                format!(
                    "memory cap of {} MiB reached (growing from {} to {} bytes)",
                    self.memory_cap >> 20,
                    current,
                    desired
                ),
            )
            .into());
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Err(HostTrap::new(
                TrapReason::Memory,
                format!("table of {desired} elements exceeds the cap of {MAX_TABLE_ELEMENTS}"),
            )
            .into());
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_CALL_INSTANCES
    }
    fn tables(&self) -> usize {
        MAX_CALL_TABLES
    }
    fn memories(&self) -> usize {
        MAX_CALL_MEMORIES
    }
}

/// The most one write to stdout or stderr may pass at once: 64 MiB.
const MAX_STDIO_WRITE: usize = 64 << 20;

/// What a captured stream has seen.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    pub kept: Vec<u8>,
    pub total: u64,
    pub exceeded: bool,
}

/// stdout or stderr of one call: keeps the first `kept` bytes
/// ([`KEPT_STDIO_BYTES`](crate::limits::KEPT_STDIO_BYTES) for a tool call), counts the rest, and traps the
/// guest once `cap` bytes are passed.
#[derive(Clone)]
pub(crate) struct CapturedOutput {
    name: &'static str,
    cap: u64,
    kept: usize,
    capture: Arc<Mutex<Capture>>,
}

impl CapturedOutput {
    pub fn new(name: &'static str, cap: u64, kept: usize) -> CapturedOutput {
        CapturedOutput {
            name,
            cap,
            kept,
            capture: Arc::default(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Capture> {
        // A poisoned lock only means a writer panicked mid-append; the bytes
        // are still a valid prefix.
        self.capture.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append(&self, bytes: &[u8]) -> Result<(), HostTrap> {
        let mut c = self.lock();
        c.total = c.total.saturating_add(bytes.len() as u64);
        if c.total > self.cap {
            c.exceeded = true;
            return Err(HostTrap::new(
                TrapReason::OutputTooLarge,
                format!("{} exceeded its cap of {} bytes", self.name, self.cap),
            ));
        }
        let room = self.kept.saturating_sub(c.kept.len());
        let take = room.min(bytes.len());
        c.kept.extend_from_slice(&bytes[..take]);
        Ok(())
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes).map_err(|t| StreamError::Trap(t.into()))
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Room up to one byte past the cap: a guest's write is taken whole
        // (CPython's unbuffered stdout, as componentize-py builds it, drops
        // what a short write leaves), and one more byte traps.
        let total = self.lock().total;
        let room = self.cap.saturating_sub(total).saturating_add(1);
        Ok(usize::try_from(room)
            .unwrap_or(usize::MAX)
            .min(MAX_STDIO_WRITE))
    }
}

impl AsyncWrite for CapturedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(
            self.append(buf)
                .map(|()| buf.len())
                .map_err(|t| std::io::Error::other(t.detail)),
        )
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// stdin of one call: the bytes its binding gives (none for a tool call,
/// the request's for a script), read once. A spare's stdin gets its
/// call's bytes at rebind, before the guest reads it.
#[derive(Clone, Default)]
pub(crate) struct CallStdin(Arc<Mutex<Bytes>>);

impl CallStdin {
    fn lock(&self) -> MutexGuard<'_, Bytes> {
        // Bytes are replaced whole; a panic cannot leave them half-written.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `bytes` what is left to read.
    pub fn set(&self, bytes: Bytes) {
        *self.lock() = bytes;
    }

    fn take(&self, size: usize) -> Bytes {
        let mut left = self.lock();
        let n = size.min(left.len());
        left.split_to(n)
    }
}

impl IsTerminal for CallStdin {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdinStream for CallStdin {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn wasmtime_wasi::p2::InputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CallStdin {
    async fn ready(&mut self) {}
}

impl wasmtime_wasi::p2::InputStream for CallStdin {
    fn read(&mut self, size: usize) -> Result<Bytes, StreamError> {
        let bytes = self.take(size);
        if bytes.is_empty() && size > 0 {
            return Err(StreamError::Closed);
        }
        Ok(bytes)
    }
}

impl tokio::io::AsyncRead for CallStdin {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let bytes = self.take(buf.remaining());
        buf.put_slice(&bytes);
        Poll::Ready(Ok(()))
    }
}

/// Who is calling and what they may reach through the `host` interface.
#[derive(Clone)]
pub(crate) struct CallIdentity {
    /// `name@version` of the skill.
    pub skill: Arc<str>,
    /// The tool being called.
    pub tool: Arc<str>,
}

/// The state of one store: one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: CallLimiter,
    pub stdout: CapturedOutput,
    pub stderr: CapturedOutput,
    /// What the guest reads on stdin (the binding's).
    stdin: CallStdin,
    /// The call this store serves.
    pub call: CallBinding,
    pub limits: Limits,
    pub hostward_bytes: u64,
    /// How many imports of the `host` interface the guest called.
    pub host_calls: u32,
    /// The first deliberate trap a host function raised.
    pub host_trap: Option<HostTrap>,
    /// Keeps the epoch ticker running while this call's store lives.
    pub ticking: Option<super::ticker::Ticking>,
    /// `wasi:http` state.
    http: wasmtime_wasi_http::WasiHttpCtx,
    /// Why the call stopped at a question, once it did.
    pub ask_stop: Option<super::AskStop>,
    /// How many `host.elicit` questions the call asked (they are keyed
    /// `elicit-1`, `elicit-2`, … in order).
    pub elicits: u32,
}

/// Where a call's assets folder is, read-only, in the guest: `/assets`.
pub(crate) const ASSETS_GUEST_PATH: &str = "/assets";

/// What a call may reach beyond computing: set from the component's
/// capabilities and the call's options.
pub(crate) struct CallReach {
    /// The send hook: the call's allowed origins, or none (every request
    /// refused) for a component without network access.
    pub outbound: OutboundHooks,
    /// The call's filesystem: its assets at [`ASSETS_GUEST_PATH`], or a
    /// script's layers and scratch folder; empty by default.
    pub fs: super::vfs::Vfs,
    /// Secret values redacted from the guest's log lines and stdio.
    pub redact: Arc<[String]>,
    /// Where progress reports and log lines go besides the host's log.
    pub notices: super::Notices,
    /// Who answers `host.ask` and `host.elicit`; `None`: nobody can be
    /// asked.
    pub ask: Option<Arc<dyn super::Asker>>,
    /// Which questions beyond forms the skill may ask.
    pub client_reach: super::ClientReach,
}

/// What ties a store to one call: who calls, by when, what it may read
/// and reach. A fresh store is made with it; a spare store (made ahead of
/// its call, see the `spare` module) is given it before the guest runs.
pub(crate) struct CallBinding {
    /// The skill and tool.
    pub identity: CallIdentity,
    /// When the call must end.
    pub deadline: Instant,
    /// Values `host.config` reads.
    pub config: Arc<BTreeMap<String, String>>,
    /// What `host.invoke` reaches.
    pub invoker: Option<Arc<dyn Invoker>>,
    /// Invoke depth of the call.
    pub depth: u32,
    /// What `host.read-ref` reads.
    pub refs: Option<Arc<dyn RefReader>>,
    /// What the call may reach beyond computing.
    pub reach: CallReach,
    /// What the guest reads on stdin (nothing for a tool call).
    pub stdin: Bytes,
}

impl CallState {
    /// A store's state for `binding` under `limits`, keeping `kept` bytes
    /// of stdout and of stderr.
    pub fn new(limits: Limits, binding: CallBinding, kept: usize) -> CallState {
        let stdout = CapturedOutput::new("stdout", limits.max_stdio_bytes, kept);
        let stderr = CapturedOutput::new("stderr", limits.max_stdio_bytes, kept);
        let stdin = CallStdin::default();
        stdin.set(binding.stdin.clone());
        // Deny by default: no env, no args, stdin the binding's (empty for
        // a tool call), stdout and stderr captured, and no sockets: no TCP,
        // no UDP, no name lookup, no address allowed (wasmtime-wasi's
        // defaults, which every socket call checks). The filesystem is the
        // binding's (`vfs/`).
        let mut builder = WasiCtx::builder();
        builder
            .stdin(stdin.clone())
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_blocking_current_thread(false);
        let wasi = builder.build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCE_HANDLES);
        CallState {
            wasi,
            table,
            limiter: CallLimiter {
                memory_cap: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
                memory_denied: None,
            },
            stdout,
            stderr,
            stdin,
            call: binding,
            limits,
            hostward_bytes: 0,
            host_calls: 0,
            host_trap: None,
            ticking: None,
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            ask_stop: None,
            elicits: 0,
        }
    }

    /// Gives a spare store (made ahead of its call, see the `spare`
    /// module) the call it serves, its filesystem with it (the spare's
    /// guest never asked for its own). The limits are the spare's own,
    /// equal to the call's.
    pub fn rebind(&mut self, binding: CallBinding) {
        self.stdin.set(binding.stdin.clone());
        self.call = binding;
    }

    /// The filesystem's view of this store.
    pub fn vfs(&mut self) -> super::vfs::VfsView<'_> {
        super::vfs::VfsView {
            fs: &mut self.call.reach.fs,
            table: &mut self.table,
        }
    }

    /// The records of the outbound requests made so far.
    pub fn outbound_records(&self) -> Vec<OutboundRecord> {
        self.call.reach.outbound.records()
    }

    /// Counts bytes the guest passes to the host; traps past the cap.
    /// Every import of the `host` interface calls it first, so it also
    /// counts them.
    pub fn charge_hostward(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.host_calls = self.host_calls.saturating_add(1);
        self.hostward_bytes = self.hostward_bytes.saturating_add(bytes as u64);
        if self.hostward_bytes > self.limits.max_hostward_bytes {
            let trap = HostTrap::new(
                TrapReason::OutputTooLarge,
                format!(
                    "the component passed more than {} bytes to host imports in one call",
                    self.limits.max_hostward_bytes
                ),
            );
            self.host_trap.get_or_insert(trap.clone());
            return Err(trap.into());
        }
        Ok(())
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_io::IoView for CallState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl wasmtime_wasi_http::WasiHttpView for CallState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.call.reach.outbound,
        }
    }
}
