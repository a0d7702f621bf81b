//! The model's operations on the GPU, one module per kind, each with its `.cu` file(s) beside it
//! and a test against the CPU reference (run on the GPU machine: `--include-ignored`).

pub mod attention;
pub mod embed;
pub mod gdn;
pub mod gemv_q;
pub mod linear;
pub mod lm_head;
pub mod lora;
pub mod moe;
pub mod norm;
pub mod sample;
pub mod vision;

#[cfg(test)]
pub mod testutil;

/// Temporary device memory for one forward call of up to `max_tokens` tokens, shared by all ops.
/// Each buffer holds `max_tokens * SCRATCH_WIDTH` f32; an op may reinterpret one as i32 or bf16.
/// Ops document which buffers they use; the caller's buffers (inputs/outputs) are never scratch.
pub struct Scratch {
    pub max_tokens: usize,
    pub bufs: Vec<crate::runtime::DevBuf>,
    /// Bytes 0..4: the counter with which a kernel's last block finds out it is last (see
    /// `moe_route_decode`), zero between launches (that last block sets it back); 8..16: a grid
    /// barrier's arrival count, u64, only growing (`moe_decode_block`); then two of common.cuh's
    /// `LoraOnce` (a fused LoRA site's u, computed once for the grid): the MoE kernel's (past its
    /// barrier count, where the kernel finds it) and the in-projection GEMVs' (`lora_once`).
    tickets: crate::runtime::DevBuf,
}

pub const SCRATCH_WIDTH: usize = 8192;
/// Bytes of lora.cuh's `LoraOnce` (a count, then u f32 [8][LORA_FUSED_RANKS]).
const LORA_ONCE_BYTES: usize = 16 + 8 * crate::ops::lora::FUSED_RANKS * 4;
pub const SCRATCH_BUFS: usize = 6;

impl Scratch {
    pub fn new(gpu: &crate::runtime::Gpu, max_tokens: usize) -> anyhow::Result<Self> {
        let bufs =
            (0..SCRATCH_BUFS).map(|_| gpu.alloc(max_tokens * SCRATCH_WIDTH * 4)).collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Scratch { max_tokens, bufs, tickets: gpu.alloc(16 + 2 * LORA_ONCE_BYTES)? })
    }

    /// Device address of the in-projection GEMVs' `LoraOnce` (lora.cuh).
    pub fn lora_once(&self) -> crate::runtime::DevPtr {
        self.tickets.ptr() + (16 + LORA_ONCE_BYTES) as crate::runtime::DevPtr
    }

    /// Device address of the ticket counter.
    pub fn ticket(&self) -> crate::runtime::DevPtr {
        self.tickets.ptr()
    }

    /// Device address of a grid barrier's arrival count (u64).
    pub fn grid_barrier(&self) -> crate::runtime::DevPtr {
        self.tickets.ptr() + 8
    }

    /// Device address of scratch buffer `i`.
    pub fn ptr(&self, i: usize) -> crate::runtime::DevPtr {
        self.bufs[i].ptr()
    }
}
