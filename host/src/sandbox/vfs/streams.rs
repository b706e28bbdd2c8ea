//! `wasi:io` streams over the files of the in-memory filesystem: reading a
//! read-only file (slices of its bytes, no copy), reading and writing a
//! scratch file. A write is taken whole or refused (over a cap: the
//! stream's last operation failed, `filesystem-error-code` says
//! `insufficient-space`); none is cut short.

use bytes::Bytes;
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{InputStream, OutputStream, StreamError, StreamResult};

use super::Errno;
use super::scratch::Handle;
use crate::limits::MAX_FILE_READ_BYTES;

/// What a stream's failed operation carries, for
/// `filesystem-error-code`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("filesystem error: {0:?}")]
pub(crate) struct StreamFsError(pub Errno);

fn failed(e: Errno) -> StreamError {
    StreamError::LastOperationFailed(wasmtime::Error::new(StreamFsError(e)))
}

/// How much one `check-write` allows: a large write goes through whole in
/// one `write` (the caps, not the stream, decide).
const WRITE_ALLOWANCE: usize = 1 << 30;

/// Reads a read-only file from an offset.
pub(crate) struct RoReader {
    data: Bytes,
    pos: usize,
}

impl RoReader {
    pub fn new(data: Bytes, offset: u64) -> RoReader {
        let pos = usize::try_from(offset).unwrap_or(usize::MAX);
        RoReader { data, pos }
    }
}

#[wasmtime_wasi_io::async_trait]
impl Pollable for RoReader {
    async fn ready(&mut self) {}
}

impl InputStream for RoReader {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.pos >= self.data.len() {
            return Err(StreamError::Closed);
        }
        let end = self
            .pos
            .saturating_add(size.min(MAX_FILE_READ_BYTES))
            .min(self.data.len());
        let out = self.data.slice(self.pos..end);
        self.pos = end;
        Ok(out)
    }
}

/// Reads a scratch file from an offset.
pub(crate) struct ScratchReader {
    file: Handle,
    pos: u64,
}

impl ScratchReader {
    pub fn new(file: Handle, offset: u64) -> ScratchReader {
        ScratchReader { file, pos: offset }
    }
}

#[wasmtime_wasi_io::async_trait]
impl Pollable for ScratchReader {
    async fn ready(&mut self) {}
}

impl InputStream for ScratchReader {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let bytes = self
            .file
            .scratch()
            .read(self.file.id(), self.pos, size.min(MAX_FILE_READ_BYTES))
            .map_err(failed)?;
        if bytes.is_empty() && size > 0 {
            return Err(StreamError::Closed);
        }
        self.pos = self.pos.saturating_add(bytes.len() as u64);
        Ok(bytes)
    }
}

/// Writes a scratch file at an offset, or at its end.
pub(crate) struct ScratchWriter {
    file: Handle,
    /// Where the next write goes; `None`: at the end (append).
    pos: Option<u64>,
}

impl ScratchWriter {
    /// Writes from `offset`; `None` appends.
    pub fn new(file: Handle, offset: Option<u64>) -> ScratchWriter {
        ScratchWriter { file, pos: offset }
    }
}

#[wasmtime_wasi_io::async_trait]
impl Pollable for ScratchWriter {
    async fn ready(&mut self) {}
}

impl OutputStream for ScratchWriter {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let end = self
            .file
            .scratch()
            .write(self.file.id(), self.pos, &bytes)
            .map_err(failed)?;
        if self.pos.is_some() {
            self.pos = Some(end);
        }
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_ALLOWANCE)
    }
}
