// moe_probe: the routed phase of moe_decode_block in isolation, as it is and restructured
// (bench/NOTES.md, issue 5 session 7). Not part of solo: a standalone program for the GPU machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/moe_probe bench/probes/moe_probe.cu
//   /tmp/moe_probe
// Each case is one kernel of 2 × SMs blocks of 256 threads, captured 120 times into a CUDA graph,
// each launch over its own 8 random experts of a 16 GB pool (cold L2); best of 5 graph launches
// divided by 120. An expert is 6 MB: (gate, up) rows [1024][2048], then down (2 MB), read either
// as the checkpoint has it ([2048][512]: row c = output column c) or as if transposed
// ([512][2048]: row i = what intermediate i adds to every output column). x and act are f32.
//   plain:  a contiguous 50.3 MB matrix through the same 2-row rings, for scale;
//   pairs:  only the routed (gate, up) rows (33.5 MB);
//   routed: moe_decode_block's phases 2 and 3 (96 registers): warp gw takes (gate, up) pairs
//           gw, gw + W, ... through a 2-row ring (act[p] = silu(g)·u), then requests its 8 down
//           rows of column c = gw (1 KB each), a grid barrier, act staged, down_e[c] · act_e;
//   fused:  no grid barrier: warp gw takes pairs gw, gw + W, ... as 3-row groups (gate, up,
//           downᵀ row) through the same ring; after a pair's act each lane adds act · downᵀ[i]
//           at its 64 columns to a partial, and at the end each block adds its partial to the
//           output with global float atomics (fused_cluster: first summed over a cluster).
// The results and what they say: bench/NOTES.md, "Issue 5, session 7".
#include <vector>

#include "probe.cuh"

#define EXPERT_ELEMS (3ll << 20)  // 6 MB of bf16
#define DOWN_OFFSET (2ll << 20)   // down after the 1024 (gate, up) rows
#define PAIRS 4096                // 8 experts × 512

// w (8 bf16) · x (8 f32)
__device__ __forceinline__ float dot8(uint4 w, const float* x) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __bfloat1622float2(h[i]);
        s += f.x * x[2 * i] + f.y * x[2 * i + 1];
    }
    return s;
}

// 8 bf16 → f32.
__device__ __forceinline__ void unpack8(uint4 w, float out[8]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __bfloat1622float2(h[i]);
        out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
}

// A 4 KB row into a warp's slot: lane l copies pieces j·256 + 8l; one commit group.
__device__ __forceinline__ void request_row(bf16* dst, const bf16* src) {
    const int lane = threadIdx.x & 31;
    if (src) {
#pragma unroll
        for (int j = 0; j < 8; j++) cp_async16(dst + j * 256 + lane * 8, src + j * 256 + lane * 8);
    }
    commit();
}

__device__ __forceinline__ float row_dot(const bf16* row, const float (&x)[8][8]) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) acc += dot8(*reinterpret_cast<const uint4*>(row + j * 256 + lane * 8), x[j]);
    return warp_sum(acc);
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }

// x (f32 [2048], from global) into shared memory, every load in flight at once.
__device__ __forceinline__ void stage_x(const float* __restrict__ xg, float* xs) {
    float4 v[2];
#pragma unroll
    for (int q = 0; q < 2; q++) v[q] = reinterpret_cast<const float4*>(xg)[threadIdx.x + 256 * q];
#pragma unroll
    for (int q = 0; q < 2; q++) reinterpret_cast<float4*>(xs)[threadIdx.x + 256 * q] = v[q];
    __syncthreads();
}

__device__ __forceinline__ void lane_x(const float* xs, float (&x)[8][8]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int t = 0; t < 8; t++) x[j][t] = xs[j * 256 + lane * 8 + t];
}

// A contiguous stream of the same bytes (50.3 MB) through the same ring, for scale.
__global__ void __launch_bounds__(256) plain(const bf16* __restrict__ m, int rows, float* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int W = gridDim.x * 8, gw = blockIdx.x * 8 + warp;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * 2 * 2048;
    auto row = [&](int k) -> const bf16* { return gw + k * W < rows ? m + (long long)(gw + k * W) * 2048 : nullptr; };
    const int n = (rows - 1 - gw) / W + 1;
    request_row(ring, row(0));
    request_row(ring + 2048, row(1));
    float x[8][8];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int t = 0; t < 8; t++) x[j][t] = t & 1 ? 0.25f : 0.5f;
    float acc = 0.f;
    for (int k = 0; k < n; k++) {
        wait_groups<1>();
        bf16* slot = ring + (k & 1) * 2048;
        acc += row_dot(slot, x);
        request_row(slot, k + 2 < n ? row(k + 2) : nullptr);
    }
    if (lane == 0) out[gw] = acc;
}

// Row k of warp gw's stream of routed (gate, up) pairs gw, gw + W, ...: pair gw + (k / 2)·W,
// gate (k even) or up; null past the last.
__device__ __forceinline__ const bf16* pair_row(const bf16* pool, const int* experts, int gw, int W, int k) {
    const int p = gw + (k >> 1) * W;
    if (p >= PAIRS) return nullptr;
    return pool + experts[p / 512] * EXPERT_ELEMS + (long long)(p % 512 + (k & 1) * 512) * 2048;
}

// The (gate, up) pairs only. REAL_X = false: constant weights, x never staged; true: x staged in
// shared memory, each lane's 64 values in registers (moe_decode_block). EARLY: a row is read out
// of its slot into registers and the slot refilled before the dot, not after the dot and sum.
template <bool REAL_X, bool EARLY>
__global__ void __launch_bounds__(256) pairs(const bf16* __restrict__ pool, const int* __restrict__ experts,
                                             const float* __restrict__ xg, float* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ __align__(16) float xs[2048];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int W = gridDim.x * 8, gw = blockIdx.x * 8 + warp;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * 2 * 2048;
    const int n = 2 * ((PAIRS - 1 - gw) / W + 1);
    request_row(ring, pair_row(pool, experts, gw, W, 0));
    request_row(ring + 2048, pair_row(pool, experts, gw, W, 1));
    float x[8][8];
    if (REAL_X) {
        stage_x(xg, xs);
        lane_x(xs, x);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int t = 0; t < 8; t++) x[j][t] = t & 1 ? 0.25f : 0.5f;
    }
    float g = 0.f, acc = 0.f;
    for (int k = 0; k < n; k++) {
        wait_groups<1>();
        bf16* slot = ring + (k & 1) * 2048;
        const bf16* next = k + 2 < n ? pair_row(pool, experts, gw, W, k + 2) : nullptr;
        float v;
        if (EARLY) {
            uint4 w[8];
#pragma unroll
            for (int j = 0; j < 8; j++) w[j] = *reinterpret_cast<const uint4*>(slot + j * 256 + lane * 8);
            request_row(slot, next);
            float a = 0.f;
#pragma unroll
            for (int j = 0; j < 8; j++) a += dot8(w[j], x[j]);
            v = warp_sum(a);
        } else {
            v = row_dot(slot, x);
            request_row(slot, next);
        }
        if (k & 1) acc += silu(g) * v;
        else g = v;
    }
    if (lane == 0) out[gw] = acc;
}

// moe_decode_block's phases 2 and 3, 96 registers. NO_DOWN: (gate, up) and the barrier only.
// DOWN_CONTIG: the 8 down rows of column c read from one contiguous 16.8 MB region (row c at
// c · 8 KB) instead of 8 experts' matrices (timing only).
template <bool NO_DOWN, bool DOWN_CONTIG = false>
__global__ void __maxnreg__(96) routed(const bf16* __restrict__ pool, const int* __restrict__ experts,
                                       const float* __restrict__ xg, float* __restrict__ act, float* __restrict__ out,
                                       unsigned long long* arrivals) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ __align__(16) float xs[2048];
    __shared__ __align__(16) float acts[4096];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * 8, gw = blockIdx.x * 8 + warp, c = gw;
    unsigned long long base;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(base) : "l"(arrivals) : "memory");
    base -= base % G;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * 2 * 2048;
    const int n = 2 * ((PAIRS - 1 - gw) / W + 1);
    request_row(ring, pair_row(pool, experts, gw, W, 0));
    request_row(ring + 2048, pair_row(pool, experts, gw, W, 1));
    stage_x(xg, xs);
    float g = 0.f;
    {
        float x[8][8];
        lane_x(xs, x);
        for (int k = 0; k < n; k++) {
            wait_groups<1>();
            bf16* slot = ring + (k & 1) * 2048;
            const float v = row_dot(slot, x);
            request_row(slot, k + 2 < n ? pair_row(pool, experts, gw, W, k + 2) : nullptr);
            if (k & 1) {
                if (lane == 0) act[gw + (k >> 1) * W] = silu(g) * v;
            } else {
                g = v;
            }
        }
    }
    bf16* rows = ring;  // [8][512]: the down rows of column c
    if (!NO_DOWN && c < 2048) {
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const bf16* src = DOWN_CONTIG ? pool + (long long)(experts[0] % 2700) * EXPERT_ELEMS + ((long long)c * 8 + e) * 512
                                          : pool + experts[e] * EXPERT_ELEMS + DOWN_OFFSET + (long long)c * 512;
#pragma unroll
            for (int j = 0; j < 2; j++) cp_async16(rows + e * 512 + j * 256 + lane * 8, src + j * 256 + lane * 8);
        }
    }
    commit();
    grid_barrier(arrivals, base + G);
    if (NO_DOWN) {
        if (lane == 0 && c < 2048) out[c] = g;
        return;
    }
    {  // act → shared memory, every load in flight at once
        float4 v[4];
#pragma unroll
        for (int q = 0; q < 4; q++) v[q] = __ldcg(reinterpret_cast<const float4*>(act) + threadIdx.x + 256 * q);
#pragma unroll
        for (int q = 0; q < 4; q++) reinterpret_cast<float4*>(acts)[threadIdx.x + 256 * q] = v[q];
    }
    __syncthreads();
    if (c < 2048) {
        wait_groups<0>();
        float sum = 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int j = 0; j < 2; j++)
                sum += dot8(*reinterpret_cast<const uint4*>(rows + e * 512 + j * 256 + lane * 8), acts + e * 512 + j * 256 + lane * 8);
        sum = warp_sum(sum);
        if (lane == 0) out[c] = sum;
    }
}

// Row k of warp gw's stream of 3-row groups (gate row i, up row i, downᵀ row i of pair
// p = gw + (k / 3)·W); null past the last pair. ADJACENT: the expert laid out as 512 groups of
// 12 KB (a load-time relayout), so a pair's 3 rows are one contiguous run.
template <bool ADJACENT = false>
__device__ __forceinline__ const bf16* group_row(const bf16* pool, const int* experts, int gw, int W, int k) {
    const int p = gw + (k / 3) * W;
    if (p >= PAIRS) return nullptr;
    const bf16* e = pool + experts[p / 512] * EXPERT_ELEMS;
    const int part = k % 3, i = p % 512;
    if (ADJACENT) return e + (long long)(3 * i + part) * 2048;
    return part == 2 ? e + DOWN_OFFSET + (long long)i * 2048 : e + (long long)(i + part * 512) * 2048;
}

// The routed phase as one stream of 3-row groups (gate, up, downᵀ row), no grid barrier.
// PARTIAL: 0 = the downᵀ row only dotted with x like the others (wrong, timing only: the bytes
// without the adds); 1 = added to the block's partial in shared memory (atomics, at
// (8j + t)·32 + lane for column j·256 + 8·lane + t, so a warp's adds hit 32 banks); 3 = as 0,
// and no partial added to the output at the end either (each warp stores its a). (Partials in
// registers: fused_cluster below, with clusters of 1.)
template <int PARTIAL, bool ADJACENT = false>
__global__ void __launch_bounds__(256, 2) fused(const bf16* __restrict__ pool, const int* __restrict__ experts,
                                                const float* __restrict__ xg, float* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ __align__(16) float xs[2048];
    __shared__ __align__(16) float partial[2048];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int W = gridDim.x * 8, gw = blockIdx.x * 8 + warp;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * 2 * 2048;
    auto row = [&](int k) { return group_row<ADJACENT>(pool, experts, gw, W, k); };
    const int n = 3 * ((PAIRS - 1 - gw) / W + 1);
    request_row(ring, row(0));
    request_row(ring + 2048, row(1));
    for (int i = threadIdx.x; i < 2048; i += 256) partial[i] = 0.f;
    stage_x(xg, xs);
    float g = 0.f, a = 0.f;
    float x[8][8];
    lane_x(xs, x);
    for (int k = 0; k < n; k++) {
        wait_groups<1>();
        bf16* slot = ring + (k & 1) * 2048;
        if (PARTIAL == 1 && k % 3 == 2) {  // (PARTIAL 0 and 3: every row dotted)
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float w[8];
                unpack8(*reinterpret_cast<const uint4*>(slot + j * 256 + lane * 8), w);
#pragma unroll
                for (int t = 0; t < 8; t++) atomicAdd(&partial[(j * 8 + t) * 32 + lane], a * w[t]);
            }
        } else {
            const float v = row_dot(slot, x);
            if (k % 3 == 0) g = v;
            else a = silu(g) * v + (PARTIAL != 1 ? a : 0.f);
        }
        request_row(slot, k + 2 < n ? row(k + 2) : nullptr);
    }
    if (PARTIAL == 0 && lane == 0) partial[gw % 2048] += a;
    if (PARTIAL == 3) {
        if (lane == 0) out[gw % 2048] = a;
        return;
    }
    __syncthreads();
    for (int i = threadIdx.x * 4; i < 2048; i += 1024) {
        const float4 v = *reinterpret_cast<const float4*>(partial + i);
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(out + i), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                     : "memory");
    }
}

// The routed phase as one stream of 3-row groups, reduced through thread-block clusters of CL
// blocks (CL = 1: each block alone) before the output atomics. Each lane keeps its 64 columns'
// partial in registers (x read from shared memory for every row, to leave room); the block's 8
// warps meet in the ring; then cluster rank r sums columns [r·2048/CL, +2048/CL) of the CL
// blocks' partials through distributed shared memory and either (DETERMINISTIC = false) adds
// them to the output with float atomics (2048 · 264 / CL adds), or (true) stores them to its
// cluster's slot, and after a grid barrier column owner c sums the 264 / CL slots in order.
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ float4 ld_cluster4(const float* p, unsigned rank) {
    const unsigned local = (unsigned)__cvta_generic_to_shared(p);
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote) : "memory");
    return v;
}

template <int CL, bool DETERMINISTIC>
__global__ void __launch_bounds__(256, 2) fused_cluster(const bf16* __restrict__ pool, const int* __restrict__ experts,
                                                        const float* __restrict__ xg, float* __restrict__ slots,
                                                        float* __restrict__ out, unsigned long long* arrivals) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ __align__(16) float xs[2048];
    __shared__ __align__(16) float bpart[2048];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * 8, gw = blockIdx.x * 8 + warp;
    unsigned long long base;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(base) : "l"(arrivals) : "memory");
    base -= base % G;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * 2 * 2048;
    auto row = [&](int k) { return group_row(pool, experts, gw, W, k); };
    const int n = 3 * ((PAIRS - 1 - gw) / W + 1);
    request_row(ring, row(0));
    request_row(ring + 2048, row(1));
    stage_x(xg, xs);
    float part[8][8];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int t = 0; t < 8; t++) part[j][t] = 0.f;
    float g = 0.f, a = 0.f;
    for (int k = 0; k < n; k++) {
        wait_groups<1>();
        bf16* slot = ring + (k & 1) * 2048;
        if (k % 3 == 2) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float w[8];
                unpack8(*reinterpret_cast<const uint4*>(slot + j * 256 + lane * 8), w);
#pragma unroll
                for (int t = 0; t < 8; t++) part[j][t] += a * w[t];
            }
        } else {
            float acc = 0.f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float4 x0 = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8);
                const float4 x1 = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8 + 4);
                const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
                acc += dot8(*reinterpret_cast<const uint4*>(slot + j * 256 + lane * 8), xv);
            }
            const float v = warp_sum(acc);
            if (k % 3 == 0) g = v;
            else a = silu(g) * v;
        }
        request_row(slot, k + 2 < n ? row(k + 2) : nullptr);
    }
    wait_groups<0>();
    __syncthreads();
    float* mine = reinterpret_cast<float*>(smem) + warp * 2048;
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int t = 0; t < 8; t += 4)
            *reinterpret_cast<float4*>(mine + j * 256 + lane * 8 + t) = make_float4(part[j][t], part[j][t + 1], part[j][t + 2], part[j][t + 3]);
    __syncthreads();
    for (int i = threadIdx.x * 4; i < 2048; i += 1024) {
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < 8; w++) {
            const float4 v = *reinterpret_cast<const float4*>(reinterpret_cast<float*>(smem) + w * 2048 + i);
            sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
        }
        *reinterpret_cast<float4*>(bpart + i) = sum;
    }
    cluster_sync_all();
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    constexpr int COLS = 2048 / CL;  // this block's columns
    const int cluster = blockIdx.x / CL;
    for (int i = threadIdx.x * 4; i < COLS; i += 1024) {
        const int col = rank * COLS + i;
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int r = 0; r < CL; r++) {
            const float4 v = ld_cluster4(bpart + col, r);
            sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
        }
        if (DETERMINISTIC)
            *reinterpret_cast<float4*>(slots + (size_t)cluster * 2048 + col) = sum;
        else
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(out + col), "f"(sum.x), "f"(sum.y), "f"(sum.z),
                         "f"(sum.w)
                         : "memory");
    }
    cluster_sync_all();  // no block leaves while another reads its partial
    if (DETERMINISTIC) {
        grid_barrier(arrivals, base + G);
        const int c = gw;
        if (c < 2048 && lane < 1) {
            float sum = 0.f;
            for (int q = 0; q < G / CL; q++) sum += __ldcg(slots + (size_t)q * 2048 + c);
            out[c] = sum;
        }
    }
}

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t pool_bytes = 16ull << 30;
    const int n_experts = (int)(pool_bytes / (6ull << 20));
    bf16* pool;
    CK(cudaMalloc(&pool, pool_bytes));
    CK(cudaMemset(pool, 0x3c, pool_bytes));
    float *x, *act, *out;
    CK(cudaMalloc(&x, 2048 * 4));
    CK(cudaMemset(x, 0, 2048 * 4));
    CK(cudaMalloc(&act, 4096 * 4));
    CK(cudaMalloc(&out, 2048 * 4));
    unsigned long long* arrivals;
    CK(cudaMalloc(&arrivals, 8));
    CK(cudaMemset(arrivals, 0, 8));
    const int L = PROBE_LAUNCHES;
    int* experts;
    CK(cudaMalloc(&experts, L * 8 * sizeof(int)));
    std::vector<int> chosen(L * 8);
    srand(1);
    for (int& e : chosen) e = rand() % n_experts;
    CK(cudaMemcpy(experts, chosen.data(), chosen.size() * sizeof(int), cudaMemcpyHostToDevice));
    const int ring_bytes = 8 * 2 * 4096;
    auto ring_smem = [&](auto kernel) { CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ring_bytes)); };
    ring_smem(plain);
    ring_smem(pairs<false, false>), ring_smem(pairs<true, false>), ring_smem(pairs<true, true>);
    ring_smem(routed<false>), ring_smem(routed<true>), ring_smem(routed<false, true>);
    ring_smem(fused<0>), ring_smem(fused<1>), ring_smem(fused<3>), ring_smem(fused<0, true>), ring_smem(fused<1, true>);
    ring_smem(fused_cluster<1, false>), ring_smem(fused_cluster<8, false>), ring_smem(fused_cluster<8, true>);
    ring_smem(fused_cluster<4, false>), ring_smem(fused_cluster<4, true>);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float* slots;  // fused_cluster's deterministic form: a slot of 2048 per cluster
    CK(cudaMalloc(&slots, 2048 * 4 * 300));
    const int G = 2 * sms;
    // A launch of G blocks of 256 in clusters of cl (attr: where the cluster attribute is kept).
    auto cluster_config = [&](int cl, cudaLaunchAttribute* attr) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(G);
        cfg.blockDim = dim3(256);
        cfg.dynamicSmemBytes = ring_bytes;
        cfg.stream = st;
        attr->id = cudaLaunchAttributeClusterDimension;
        attr->val.clusterDim.x = cl;
        attr->val.clusterDim.y = 1;
        attr->val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        return cfg;
    };
    auto launch_cluster = [&](auto kernel, int cl, int i) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = cluster_config(cl, &attr);
        CK(cudaLaunchKernelEx(&cfg, kernel, (const bf16*)pool, (const int*)(experts + 8 * i), (const float*)x, slots, out, arrivals));
    };
    // The deterministic form's grid barrier needs every cluster resident at once.
    auto all_resident = [&](auto kernel, int cl) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = cluster_config(cl, &attr);
        int clusters = 0;
        CK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
        printf("  clusters of %d: %d resident at once, %d needed\n", cl, clusters, G / cl);
        return clusters * cl >= G;
    };
    auto timeit = [&](const char* name, double mb, auto launch) { time_graph(st, name, mb, launch); };
    const double mb = 8 * 6.29, gate_up_mb = 8 * 4.19;
    const int* ex = experts;

    timeit("plain: contiguous 50.3 MB", mb, [&](int i) {
        plain<<<G, 256, ring_bytes, st>>>(pool + (long long)i * (pool_bytes / 2 / L / 4096) * 2048, 12288, out);
    });
    timeit("pairs: constant weights", gate_up_mb, [&](int i) { pairs<false, false><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("pairs: real x", gate_up_mb, [&](int i) { pairs<true, false><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("pairs: real x, early refill", gate_up_mb, [&](int i) { pairs<true, true><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("routed: (gate, up) + barrier", gate_up_mb, [&](int i) {
        routed<true><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, act, out, arrivals);
    });
    timeit("routed: as in solo", mb, [&](int i) { routed<false><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, act, out, arrivals); });
    timeit("routed: down rows from one contiguous region", mb, [&](int i) {
        routed<false, true><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, act, out, arrivals);
    });
    timeit("fused: down^T dotted, not added (timing only)", mb, [&](int i) { fused<0><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("fused: not added, no output atomics (timing only)", mb, [&](int i) { fused<3><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("fused, adjacent rows: not added (timing only)", mb, [&](int i) { fused<0, true><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("fused: shared-memory atomics", mb, [&](int i) { fused<1><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("fused, adjacent rows: shared-memory atomics", mb, [&](int i) { fused<1, true><<<G, 256, ring_bytes, st>>>(pool, ex + 8 * i, x, out); });
    timeit("fused: partials in registers, atomics", mb, [&](int i) { launch_cluster(fused_cluster<1, false>, 1, i); });
    timeit("fused: partials in registers, clusters of 8, atomics", mb, [&](int i) { launch_cluster(fused_cluster<8, false>, 8, i); });
    if (all_resident(fused_cluster<8, true>, 8))
        timeit("fused: partials in registers, clusters of 8, deterministic", mb, [&](int i) { launch_cluster(fused_cluster<8, true>, 8, i); });
    timeit("fused: partials in registers, clusters of 4, atomics", mb, [&](int i) { launch_cluster(fused_cluster<4, false>, 4, i); });
    if (all_resident(fused_cluster<4, true>, 4))
        timeit("fused: partials in registers, clusters of 4, deterministic", mb, [&](int i) { launch_cluster(fused_cluster<4, true>, 4, i); });
    CK(cudaDeviceSynchronize());
    return 0;
}
