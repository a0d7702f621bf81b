// What both kernels of stream_probe.cu share: the synthetic decode step (its links, in
// constant memory), error checks, the row dot, the routing and the weight fill. Not part of solo.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
typedef __nv_bfloat16 bf16;

#define CK(x)                                                                 \
    do {                                                                      \
        cudaError_t e = (x);                                                  \
        if (e != cudaSuccess) {                                               \
            printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));   \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

// The step: the model's decode step at batch 1 in bf16, every matrix read as 4 KB rows (2,048
// bf16) dotted with an f32 x, as in session 8's step probe (git show 1fb7a2e:bench/probes/
// step_probe.cu). Per layer six links, each needing every output of the link before:
//   0 in-projection          12,352 rows
//   1 GDN step                  512 rows
//   2 W_o                     4,096 rows
//   3 router + shared gate/up 1,280 rows   outputs 0..15 are the router logits
//   4 shared down               512 rows   + the routed (gate, up) of the top-8 experts of link
//                                           3's logits: 8 × 1,024 rows (addresses known only
//                                           once link 3 is complete)
//   5 routed down                          8 × 512 rows of the same experts
// then the lm_head (LM rows; 71,936 makes the step 5.38 GB, today's bf16 step after the screen;
// 248,320, the full head, is session 8's 6.10 GB step). 240 dependencies.
// The experts: 16 a layer of 1,536 rows (6.3 MB each), top-8 of 16 logits. The model has 256 a
// layer; 16 keep the allocation at ~7.4 GB while every step still reads 5.4 GB, far past the
// 50 MB L2, so every step is cold.
constexpr int ROW = 2048;  // bf16 in a 4 KB row
constexpr int ROW_BYTES = ROW * 2;
constexpr int LAYERS = 40;
constexpr int PER_LAYER = 6;
constexpr int NLINKS = LAYERS * PER_LAYER + 1;
constexpr int EXPERTS = 16;
constexpr int EXPERT_ROWS = 1536;  // (gate, up) 1,024 rows, then down 512
constexpr int ROUTER = 3;          // the link (within a layer) whose first 16 outputs are the logits
constexpr int LM_MAX = 248320;
constexpr int YMAX = LM_MAX;  // the longest output of a link
constexpr int LAYER_ROWS[PER_LAYER] = {12352, 512, 4096, 1280, 512, 0};
constexpr int LAYER_ROUTED[PER_LAYER] = {0, 0, 0, 0, 1, 2};

struct Link {
    const bf16* w;     // static rows [rows][2048]
    int rows;          // static rows (0: none)
    int routed;        // 0: none; 1: routed (gate, up), 8 × 1,024 rows; 2: routed down, 8 × 512
    int in_rows;       // outputs of the link before: x[c] = softsign(y[c % in_rows])
    const bf16* pool;  // routed: the layer's experts [16][1536][2048]
    float* logits;     // link 3 writes its first 256 outputs here; links 4 and 5 route from it
};
__constant__ Link c_links[NLINKS];

__host__ __device__ __forceinline__ int routed_rows(int kind) { return kind == 1 ? 8 * 1024 : kind == 2 ? 8 * 512 : 0; }

// The weight row of routed row p of a layer's link (kind 1 or 2), given its 8 experts.
__device__ __forceinline__ long long routed_row(int kind, const int* experts, int p) {
    return kind == 1 ? (long long)experts[p >> 10] * EXPERT_ROWS + (p & 1023)
                     : (long long)experts[p >> 9] * EXPERT_ROWS + 1024 + (p & 511);
}

__device__ __forceinline__ float softsign(float v) { return __fdividef(v, 1.f + fabsf(v)); }

// Link 0's input, 2,048 times: changes with every step (epoch), so that a link that read its
// input before it was complete would see the step before's values and give other logits.
__device__ __forceinline__ float x0_of(unsigned epoch) { return 0.25f + 0.125f * (float)(epoch & 3); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The row at `slot` (in shared memory) · x, where lane holds x[j * 256 + lane * 8 + i] at
// x[j * 8 + i]. Both kernels use this one function, so their logits agree bit for bit.
__device__ __forceinline__ float slot_dot(const bf16* slot, const float (&x)[64], int lane) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};  // four chains, not one of 64 dependent FMAs
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const uint4 w = *reinterpret_cast<const uint4*>(slot + j * 256 + lane * 8);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __bfloat1622float2(h[i]);
            acc[i] = fmaf(f.x, x[j * 8 + 2 * i], fmaf(f.y, x[j * 8 + 2 * i + 1], acc[i]));
        }
    }
    return warp_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

// x staged in shared memory (xs[c] for c < 2048) into one lane's registers, in slot_dot's order.
__device__ __forceinline__ void load_x(float (&x)[64], const float* xs, int lane) {
#pragma unroll
    for (int j = 0; j < 16; j++)
        *reinterpret_cast<float4*>(&x[4 * j]) = *reinterpret_cast<const float4*>(&xs[(j >> 1) * 256 + lane * 8 + (j & 1) * 4]);
}

// The top 8 of 16 logits, largest first, the lower index on ties (one thread).
__host__ __device__ inline void top8_of16(const float* v, int* out) {
    unsigned taken = 0;
    for (int k = 0; k < 8; k++) {
        int at = -1;
        for (int i = 0; i < 16; i++)
            if (!((taken >> i) & 1) && (at < 0 || v[i] > v[at])) at = i;
        taken |= 1u << at;
        out[k] = at;
    }
}

// Weights: bf16 in ±1/64 from a hash of the index.
__global__ void fill(bf16* p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)(i * 2654435761ull) ^ (unsigned)(i >> 29);
        h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12;
        p[i] = __float2bfloat16(((h & 0xffff) / 65536.f - 0.5f) / 32.f);
    }
}
