//! An attacker looking for what an earlier call left in its instance's
//! memory. `residue.fill` writes a marker over memory grown well past the
//! component's initial size, over a block of its heap and over half its
//! stack; `residue.scan`, in a later call (for another persona), grows
//! memory to the size the fill's had and reads every word of it, counting
//! the marker's words.
//! The host's suite (`tests/e2e/sandbox.rs`) expects none: every call gets a
//! fresh instance whose memory holds the component's image and zeros.
//!
//! The marker is position dependent (each word is a hash of the seed and of
//! the word's address), so the scan's own copies of a marker value (on its
//! stack, in its locals) never match where they lie, and no byte of the
//! component's image or of the call's arguments can look like one.

use std::arch::wasm32;
use std::hint::black_box;

use serde::{Deserialize, Serialize};
use skillhost_guest::{ToolError, skill};

/// A WebAssembly page.
const PAGE: usize = 65_536;
/// Bytes of heap `fill` allocates and marks.
const HEAP_BYTES: usize = 1 << 20;
/// Words in one marked stack frame (32 KiB).
const FRAME_WORDS: usize = 4096;
/// Marked stack frames, nested: 512 KiB of the 1 MiB stack.
const FRAMES: u32 = 16;

#[derive(Deserialize)]
struct Args {
    /// Chooses the marker; the same in both calls.
    seed: u64,
    /// MiB to grow memory by.
    mib: u32,
    /// `fill` only: once filled, reports progress and waits this long
    /// before it returns, so the caller can act on the instance's memory
    /// while the instance still holds it (push it out to swap).
    #[serde(default)]
    pause_ms: u64,
}

/// The marker's word at `addr`: never zero, so fresh memory never holds it.
fn marker(seed: u64, addr: usize) -> u64 {
    // splitmix64 of the seed and the address.
    let mut z = seed ^ (addr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    if z == 0 { 1 } else { z }
}

/// Grows memory by `mib` MiB; the first byte of the new part.
fn grow(mib: u32) -> Result<usize, ToolError> {
    let pages = (mib as usize) << 20 >> 16;
    let old = wasm32::memory_grow(0, pages);
    if old == usize::MAX {
        return Err(ToolError::Failed(format!(
            "memory.grow by {mib} MiB refused"
        )));
    }
    Ok(old * PAGE)
}

/// Writes the marker over `words` words from `start`.
///
/// # Safety
/// `start..start + 8 * words` must be memory this call owns.
unsafe fn mark(seed: u64, start: usize, words: usize) {
    for i in 0..words {
        let addr = start + i * 8;
        // SAFETY: the caller owns the range.
        unsafe {
            std::ptr::with_exposed_provenance_mut::<u64>(addr).write_volatile(marker(seed, addr))
        };
    }
}

/// Marks a 32 KiB frame of the stack, then `depth - 1` more below it.
#[inline(never)]
fn mark_stack(seed: u64, depth: u32) -> u64 {
    let mut frame = [0u64; FRAME_WORDS];
    let start = frame.as_mut_ptr() as usize;
    // SAFETY: `frame` is this frame's, `FRAME_WORDS` long.
    unsafe { mark(seed, start, FRAME_WORDS) };
    let below = if depth > 1 {
        mark_stack(seed, depth - 1)
    } else {
        0
    };
    black_box(&frame);
    below.wrapping_add(1)
}

#[derive(Serialize)]
struct Filled {
    /// The memory's size once filled.
    memory_bytes: usize,
    /// Words marked.
    marked_words: usize,
    /// Marker words the scan finds right after: all the marked ones but
    /// those the scan's own stack frames overwrote. Proves the scan sees
    /// the marker where it lies.
    found_words: usize,
}

fn fill(args: Args) -> Result<Filled, ToolError> {
    let grown = grow(args.mib)?;
    let grown_words = ((args.mib as usize) << 20) / 8;
    // SAFETY: the grown pages belong to no allocation: this call made them.
    unsafe { mark(args.seed, grown, grown_words) };
    let mut heap = vec![0u64; HEAP_BYTES / 8];
    let start = heap.as_mut_ptr() as usize;
    // SAFETY: `heap` is this call's, `HEAP_BYTES` long.
    unsafe { mark(args.seed, start, heap.len()) };
    black_box(&heap);
    black_box(mark_stack(args.seed, FRAMES));
    let found = look(args.seed);
    if args.pause_ms > 0 {
        skillhost_guest::progress(1.0, Some(1.0), Some("filled"));
        std::thread::sleep(std::time::Duration::from_millis(args.pause_ms));
    }
    Ok(Filled {
        memory_bytes: wasm32::memory_size(0) * PAGE,
        marked_words: grown_words + heap.len() + FRAME_WORDS * FRAMES as usize,
        found_words: found.marker_words,
    })
}

#[derive(Serialize)]
struct Found {
    /// The memory's size when scanned.
    memory_bytes: usize,
    /// Bytes read: all of memory but its first word (address 0).
    scanned_bytes: usize,
    /// Words holding the marker where it was written.
    marker_words: usize,
    /// 64 KiB pages holding at least one of them.
    marker_pages: usize,
    /// The lowest address holding one.
    first_marker_at: Option<usize>,
}

fn scan(args: Args) -> Result<Found, ToolError> {
    // Grow to at least `mib` MiB in all, to cover what the fill had.
    let want = (args.mib as usize) << 20;
    let have = wasm32::memory_size(0) * PAGE;
    if want > have {
        let pages = (want - have).div_ceil(PAGE);
        if wasm32::memory_grow(0, pages) == usize::MAX {
            return Err(ToolError::Failed(format!(
                "memory.grow to {} MiB refused",
                args.mib
            )));
        }
    }
    Ok(look(args.seed))
}

/// Reads every word of memory but the first, counting the marker's.
fn look(seed: u64) -> Found {
    let size = wasm32::memory_size(0) * PAGE;
    let (mut words, mut pages, mut first) = (0, 0, None);
    let mut last_page = usize::MAX;
    // Word 0 is the null address, which no call can write.
    let mut addr = 8;
    while addr < size {
        // SAFETY: in bounds of linear memory; only read, never kept.
        let w = unsafe { std::ptr::with_exposed_provenance::<u64>(addr).read_volatile() };
        if w == marker(seed, addr) {
            words += 1;
            first.get_or_insert(addr);
            if addr / PAGE != last_page {
                last_page = addr / PAGE;
                pages += 1;
            }
        }
        addr += 8;
    }
    Found {
        memory_bytes: size,
        scanned_bytes: size - 8,
        marker_words: words,
        marker_pages: pages,
        first_marker_at: first,
    }
}

skill! {
    "residue.fill" => fill,
    "residue.scan" => scan,
}
