// Shared by every solo kernel file (pasted in front of each by kernels.rs).
// Conventions: weights bf16 row-major [out, in]; activations between kernels f32 unless a
// kernel's comment says bf16 (inputs of matrix products are bf16); all accumulation in f32.
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

// NVRTC has no system headers: the fixed-width types and INFINITY kernels use.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef long long int64_t;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// The real model's widths (model-spec §1). Kernels may rely on them; the CUDA backend refuses
// checkpoints with other widths.
#define HIDDEN 2048
#define VOCAB 248320
#define ATTN_HEADS 16
#define KV_HEADS 2
#define HEAD_DIM 256
#define ROTARY_DIM 64
#define GDN_K_HEADS 16
#define GDN_V_HEADS 32
#define GDN_HEAD_DIM 128
#define GDN_CONV_DIM 8192
#define GDN_KERNEL 4
#define EXPERTS 256
#define TOP_K 8
#define EXPERT_DIM 512

// Programmatic dependent launch (runtime.rs launches every kernel with it). Every kernel starts
// with pdl_trigger() (the next kernel may be scheduled now; it still waits for this one) and
// calls pdl_wait() — which returns once the previous kernel has finished and its writes are
// visible — before it touches anything but weights, on every path through the kernel. Work that
// only reads weights (a GEMV's weight loads) may go between the two, overlapping the previous
// kernel's tail. Without PDL both are no-ops.
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block; `scratch` holds 32 floats. Every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(v);
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }
__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + __expf(-x)); }

// 8 bf16 from one 16-byte load, widened to f32.
__device__ __forceinline__ void load8(const bf16* p, float out[8]) {
    uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

// Asynchronous global → shared copies (sm_80+), completed by commit/wait groups. A 16-byte copy
// with valid = false writes 16 zero bytes instead (out-of-range rows of a tile).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const int n = valid ? 16 : 0;  // 0 source bytes: the 16 destination bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Tensor-core fragments for mma.sync m16n8k16 (bf16 in, f32 accumulate).
// d += a * b for a 16x16 (row-major) by 16x8 (column-major) bf16 tile, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices from shared memory (lane i gives the row address of matrix i/8): lane
// (g, tq) receives elements (g, 2tq) and (g, 2tq+1) of each, the mma fragment layout.
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, const bf16* p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
