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
