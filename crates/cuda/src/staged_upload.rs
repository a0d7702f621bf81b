//! Loading weights at the host's pace: host bytes go to the GPU through a ring of page-locked
//! (pinned) staging buffers. Several threads fill one slot from the checkpoint's memory map —
//! the read from the page cache — while the copy engine moves the slot before it, so the read
//! and the DMA overlap and no byte passes through pageable memory twice. (The plain
//! `Gpu::upload` copies from pageable memory synchronously: the driver stages it again, and the
//! host waits for each copy; 1.4–2.3 GB/s for the checkpoint slices in bench/RESULTS.md.)
//!
//! Device buffers come from `Gpu::alloc`, ordered on the model's stream before the copies; the
//! copies are asynchronous on that stream, so a buffer is complete once `finish` (or any later
//! synchronisation of the stream) returns.

use crate::runtime::{DevBuf, Gpu};
use anyhow::{anyhow, Result};
use cudarc::driver::{result, sys};

/// Bytes per staging slot, and slots in the ring (3 × 64 MiB pinned).
const SLOT_BYTES: usize = 64 << 20;
const SLOTS: usize = 3;
/// Pieces of a slot filled by one thread each (at least this many bytes a piece).
const FILL_PIECE: usize = 4 << 20;

struct Slot {
    pinned: *mut u8,
    /// Recorded after the slot's last copy; the slot may be refilled once it has completed.
    copied: sys::CUevent,
    in_flight: bool,
}

/// The ring of staging slots; `upload` as many buffers as needed, then `finish`.
pub struct StagedUpload<'g> {
    gpu: &'g Gpu,
    slots: Vec<Slot>,
    next: usize,
    /// Bytes copied so far.
    pub bytes: usize,
}

// SAFETY: the pinned slots are plain host memory owned by this value, written only by `upload`
// (which waits for a slot's copy before refilling it).
unsafe impl Send for StagedUpload<'_> {}

impl<'g> StagedUpload<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Self> {
        gpu.ctx.bind_to_thread().map_err(|e| anyhow!("staged upload: {e:?}"))?;
        let mut up = StagedUpload { gpu, slots: Vec::with_capacity(SLOTS), next: 0, bytes: 0 };
        for _ in 0..SLOTS {
            // SAFETY: a fresh page-locked allocation (flags 0: portable defaults), freed in Drop.
            let pinned = unsafe { result::malloc_host(SLOT_BYTES, 0) }
                .map_err(|e| anyhow!("cannot allocate {SLOT_BYTES} bytes of pinned host memory: {e:?}"))?
                as *mut u8;
            let copied = match result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING) {
                Ok(e) => e,
                Err(e) => {
                    // SAFETY: allocated just above, not yet in the ring (Drop would not free it).
                    let _ = unsafe { result::free_host(pinned as *mut std::ffi::c_void) };
                    return Err(anyhow!("cannot create a CUDA event: {e:?}"));
                }
            };
            up.slots.push(Slot { pinned, copied, in_flight: false });
        }
        Ok(up)
    }

    /// A new device buffer holding the concatenation of `parts`.
    pub fn upload(&mut self, parts: &[&[u8]]) -> Result<DevBuf> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let buf = self.gpu.alloc(total)?;
        let dst = buf.ptr();
        let mut offset = 0;
        while offset < total {
            let len = SLOT_BYTES.min(total - offset);
            let slot = &mut self.slots[self.next];
            self.next = (self.next + 1) % SLOTS;
            if slot.in_flight {
                // SAFETY: `copied` is a live event, recorded after this slot's last copy.
                unsafe { result::event::synchronize(slot.copied) }.map_err(|e| anyhow!("upload: {e:?}"))?;
                slot.in_flight = false;
            }
            // SAFETY: the slot holds SLOT_BYTES ≥ len bytes and no copy reads it now (waited above).
            let staged = unsafe { std::slice::from_raw_parts_mut(slot.pinned, len) };
            fill(staged, parts, offset);
            // SAFETY: `dst + offset .. + len` lies in `buf` (total bytes); the slot stays allocated
            // and untouched until its event says the copy is done (or Drop synchronises).
            unsafe {
                result::memcpy_htod_async(dst + offset as u64, &*staged, self.gpu.stream.cu_stream())
                    .map_err(|e| anyhow!("upload: {e:?}"))?;
                result::event::record(slot.copied, self.gpu.stream.cu_stream())
                    .map_err(|e| anyhow!("upload: {e:?}"))?;
            }
            slot.in_flight = true;
            offset += len;
        }
        self.bytes += total;
        Ok(buf)
    }

    /// Waits for every copy.
    pub fn finish(self) -> Result<()> {
        self.gpu.sync()
    }
}

impl Drop for StagedUpload<'_> {
    fn drop(&mut self) {
        // No copy may still read a slot when it is freed (an error path may skip `finish`).
        let _ = self.gpu.sync();
        for slot in &self.slots {
            // SAFETY: each was created/allocated once in `new` and is released once here.
            unsafe {
                let _ = result::event::destroy(slot.copied);
                let _ = result::free_host(slot.pinned as *mut std::ffi::c_void);
            }
        }
    }
}

/// `staged` ← bytes `offset .. offset + staged.len()` of the concatenation of `parts`, in pieces
/// of ≥ FILL_PIECE bytes on as many threads (each piece may span several parts).
fn fill(staged: &mut [u8], parts: &[&[u8]], offset: usize) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(16);
    let piece = staged.len().div_ceil(threads).max(FILL_PIECE);
    if staged.len() <= piece {
        copy_range(staged, parts, offset);
        return;
    }
    std::thread::scope(|scope| {
        for (i, chunk) in staged.chunks_mut(piece).enumerate() {
            scope.spawn(move || copy_range(chunk, parts, offset + i * piece));
        }
    });
}

/// `out` ← bytes `offset .. offset + out.len()` of the concatenation of `parts`.
fn copy_range(out: &mut [u8], parts: &[&[u8]], mut offset: usize) {
    let mut written = 0;
    for part in parts {
        if written == out.len() {
            break;
        }
        if offset >= part.len() {
            offset -= part.len();
            continue;
        }
        let n = (part.len() - offset).min(out.len() - written);
        out[written..written + n].copy_from_slice(&part[offset..offset + n]);
        written += n;
        offset = 0;
    }
    debug_assert_eq!(written, out.len(), "the parts end before the range");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_range_reads_across_parts() {
        let (a, b, c): (Vec<u8>, Vec<u8>, Vec<u8>) = ((0..5).collect(), (5..6).collect(), (6..20).collect());
        let parts: [&[u8]; 4] = [&a, &[], &b, &c];
        for offset in 0..20 {
            for len in 0..=20 - offset {
                let mut out = vec![0u8; len];
                copy_range(&mut out, &parts, offset);
                assert_eq!(out, (offset as u8..(offset + len) as u8).collect::<Vec<u8>>(), "offset {offset} len {len}");
            }
        }
    }

    #[test]
    fn fill_in_pieces_equals_one_copy() {
        let a: Vec<u8> = (0..3 * FILL_PIECE + 12_345).map(|i| (i * 7 % 251) as u8).collect();
        let b: Vec<u8> = (0..FILL_PIECE / 3).map(|i| (i % 13) as u8).collect();
        let parts: [&[u8]; 2] = [&a, &b];
        let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
        let offset = 1_000_001;
        let mut out = vec![0u8; whole.len() - offset - 17];
        fill(&mut out, &parts, offset);
        assert!(out == whole[offset..offset + out.len()]);
    }

    /// GPU: buffers of several slots and of none, each read back byte for byte.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn staged_uploads_arrive_byte_for_byte() {
        let gpu = Gpu::new().unwrap();
        let big: Vec<u8> = (0..2 * SLOT_BYTES + 4_099).map(|i| (i * 31 % 253) as u8).collect();
        let small: Vec<u8> = (0..1_000).map(|i| i as u8).collect();
        let mut up = StagedUpload::new(&gpu).unwrap();
        let cases: Vec<Vec<&[u8]>> =
            vec![vec![&big[..], &small[..]], vec![&small[..]], vec![&[], &small[..77]], vec![&big[5..]]];
        let bufs: Vec<DevBuf> = cases.iter().map(|parts| up.upload(parts).unwrap()).collect();
        assert_eq!(up.bytes, cases.iter().flatten().map(|p| p.len()).sum::<usize>());
        up.finish().unwrap();
        for (parts, buf) in cases.iter().zip(&bufs) {
            let want: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            assert!(gpu.download(buf.ptr(), want.len()).unwrap() == want, "a buffer of {} bytes", want.len());
        }
    }
}
