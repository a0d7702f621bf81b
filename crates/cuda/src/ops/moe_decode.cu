// The decode step's whole MoE block (model-spec §3.3) for one token in one persistent kernel:
//   h += Σ_slot w_slot · down_e(silu(gate_e·x) ∘ up_e·x),   x = RMSNorm(h)·w1p,
// routing included. It gives the very bits of moe_route_decode → moe_gate_up_gemv →
// moe_down_gemv (the same expressions in the same order), without their two kernel boundaries:
// the phases meet at grid barriers, and what does not depend on the routing (the router rows,
// the shared expert's rows) is requested before anything is waited for.
//
// Grid: 2 blocks of 256 threads on every SM, all resident at once (grid_barrier needs that), and
// at least 257 blocks (one router row each; 2112 warps ≥ 2048 columns): GPUs with 129 SMs or more.
// gw = blockIdx.x·8 + warp is a warp's index among W = 8·gridDim.x (2112 on the H200).
//  1. Block b's warp 0 takes router row b; every warp fetches the shared expert's down row of its
//     output column (phase 3) and, after x = RMSNorm(h) is staged (each block does it itself),
//     requests its first (gate, up) row pair if that is the shared expert's. Writes logits [257].
//  barrier
//  2. Every block routes the token itself from the logits (route_token: the same bits in every
//     block). Then the 4608 (gate, up) row pairs, shared expert first (pair p < 512: its pair p;
//     pair 512 + q: the routed pair q = slot·512 + i): warp gw takes pairs gw, gw + W, ... and
//     streams their rows through a 2-row cp.async ring. Writes act [9, 512].
//  barrier
//  3. Warp gw < 2048 takes output column c = gw: its 8 routed down rows (1 KB each, requested
//     before the barrier) against act staged in shared memory; h[c] += Σ_slot w_slot (down_slot[c] · act_slot), summed like
//     moe_down_gemv: slots in 3 groups of 3, each group over the warp, then the groups.
//
// Arguments: router bf16 [257, 2048]; gate_up bf16 [257, 1024, 2048]; down bf16 [257, 2048, 512];
// h f32 [2048] (read, then added to); w1p f32 [2048] (the post-attention norm, 1 + w);
// logits f32 [257], act f32 [9, 512] (scratch, written); arrivals u64 (grid_barrier's count,
// a multiple of the grid between launches); stamps: null, or i64 [11] where block 0 notes its clock at
// each phase mark (the moe_decode_phases test).

#define MOE_WARPS 8
#define PAIRS (EXPERT_DIM)             // (gate, up) row pairs per expert
#define TOTAL_PAIRS (SLOTS * PAIRS)  // 4608

struct MoeDecodeShared {
    bf16 ring[MOE_WARPS][2][HIDDEN];            // per warp 2 rows of 4 KB (phase 3: its 8 down rows)
    bf16 shared_down[MOE_WARPS][EXPERT_DIM];    // the shared expert's down row of the warp's column
    float xs[HIDDEN];                           // x = RMSNorm(h), bf16-rounded
    float act[SLOTS][EXPERT_DIM];               // phase 3 (phase 1: warp 0's router row)
    float red[32];
    int ids[SLOTS];
    float weights[SLOTS];
};
static_assert(sizeof(MoeDecodeShared) == 100552, "MOE_DECODE_SHARED in moe.rs");

// All blocks of the grid (every one resident) meet here. Writes before it are visible to every
// block after it (read them from L2: __ldcg). `arrivals` (u64) only ever grows: barrier k of a
// launch waits until it reaches base + k·gridDim.x, base being its value when the launch began
// (every launch has the same grid). One release-add per block, no reset, no read-back of the add.
__device__ __forceinline__ void grid_barrier(unsigned long long* arrivals, unsigned long long target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(arrivals) : "memory");
        unsigned long long now;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(now) : "l"(arrivals) : "memory");
        } while (now < target);
    }
    __syncthreads();
}

// Row `src` (HIDDEN bf16) into `dst` (shared), one commit group: lane l copies pieces j·256 + 8l.
__device__ __forceinline__ void request_row(bf16* dst, const bf16* __restrict__ src) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < HIDDEN / 256; j++) cp_async16(dst + j * 256 + lane * 8, src + j * 256 + lane * 8, true);
    cp_async_commit();
}

// This lane's x values (f32, from shared memory): the 8 pieces j·256 + 8·lane .. +8 it multiplies
// in every gate/up row. Held in registers: re-read from shared memory for every row, x would
// cost twice the weights' shared-memory traffic.
struct LaneX {
    float v[HIDDEN / 256][8];
    __device__ __forceinline__ void load(const float* xs) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int j = 0; j < HIDDEN / 256; j++) {
            const float4 a = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8);
            const float4 b = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8 + 4);
            v[j][0] = a.x, v[j][1] = a.y, v[j][2] = a.z, v[j][3] = a.w;
            v[j][4] = b.x, v[j][5] = b.y, v[j][6] = b.z, v[j][7] = b.w;
        }
    }
};

// A gate or up row (shared, as request_row left it) · x, summed like moe_gate_up_gemv: each lane
// its pieces in order with dot8, then the warp. Each lane reads only what it copied.
__device__ __forceinline__ float expert_row_dot(const bf16* row, const LaneX& x) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < HIDDEN / 256; j++) acc += dot8(*reinterpret_cast<const uint4*>(row + j * 256 + lane * 8), x.v[j]);
    return warp_sum(acc);
}

// A router row · xs, summed like GemvTile::dot (moe_route_decode).
__device__ __forceinline__ float router_row_dot(const bf16* row, const float* xs) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < HIDDEN / 256; j++) {
        const int col = j * 256 + lane * 8;
        acc += dot_piece(*reinterpret_cast<const uint4*>(row + col), *reinterpret_cast<const float4*>(xs + col),
                         *reinterpret_cast<const float4*>(xs + col + 4));
    }
    return warp_sum(acc);
}

__device__ __forceinline__ const bf16* gate_row(const bf16* gate_up, int expert, int i) {
    return gate_up + ((size_t)expert * 2 * EXPERT_DIM + i) * HIDDEN;
}

extern "C" __global__ void __launch_bounds__(256, 2)
    moe_decode_block(const bf16* __restrict__ router, const bf16* __restrict__ gate_up, const bf16* __restrict__ down,
                     float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ logits,
                     float* __restrict__ act, unsigned long long* __restrict__ arrivals,
                     long long* __restrict__ stamps) {
#define STAMP(i) if (stamps && blockIdx.x == 0 && threadIdx.x == 0) stamps[i] = clock64();
    STAMP(0)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    MoeDecodeShared& s = *reinterpret_cast<MoeDecodeShared*>(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * MOE_WARPS, gw = blockIdx.x * MOE_WARPS + warp;
    bf16* ring = s.ring[warp][0];
    bf16* ring1 = s.ring[warp][1];

    // ---- 1. routing. The (gate, up) pairs are numbered shared expert first: pair p < 512 is the
    // shared expert's row pair p, pair 512 + q the routed one q = slot·512 + i; warp gw takes
    // pairs gw, gw + W, ... The shared ones need no routing: requested before the barrier.
    const bf16* shared_down = down + (size_t)SHARED_EXPERT * HIDDEN * EXPERT_DIM;
    pdl_wait();
    // The barrier count at this launch's start: the last launch is done, so a multiple of G (a
    // block that starts late may already see some of this launch's arrivals: rounded down).
    unsigned long long base;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(base) : "l"(arrivals) : "memory");
    base -= base % G;
    // In flight first: the router row and the down row this warp needs in phase 3 (h's loads in
    // stage_rms_norm follow them; the shared pairs, larger, only after the norm).
    bf16* router_row = reinterpret_cast<bf16*>(&s.act[0][0]);  // act is staged only in phase 3
    if (warp == 0 && blockIdx.x < ROUTER_ROWS) request_row(router_row, router + (size_t)blockIdx.x * HIDDEN);
    else cp_async_commit();
    if (gw < HIDDEN) {
#pragma unroll
        for (int j = 0; j < EXPERT_DIM / 256; j++)
            cp_async16(&s.shared_down[warp][j * 256 + lane * 8], shared_down + (size_t)gw * EXPERT_DIM + j * 256 + lane * 8,
                       true);
    }
    cp_async_commit();
    STAMP(1)
    stage_rms_norm(h, w1p, eps, s.xs, s.red);
    STAMP(2)
    const int n = 2 * ((TOTAL_PAIRS - 1 - gw) / W + 1);  // this warp's rows: k = 2m + (0 gate, 1 up) of pair gw + m·W
    const bool shared_first = gw < PAIRS;
    if (shared_first) {
        request_row(ring, gate_row(gate_up, SHARED_EXPERT, gw));
        request_row(ring1, gate_row(gate_up, SHARED_EXPERT, gw) + (size_t)EXPERT_DIM * HIDDEN);
    }
    if (warp == 0 && blockIdx.x < ROUTER_ROWS) {
        cp_async_wait_pending(shared_first ? 2 : 0);  // the router row (and the shared down row)
        STAMP(3)
        const float v = router_row_dot(router_row, s.xs);
        if (lane == 0) logits[blockIdx.x] = v;
    }
    STAMP(4)
    grid_barrier(arrivals, base + G);
    STAMP(5)

    // ---- 2. the experts' gate/up
    if (warp == 0) route_token(logits, s.ids, s.weights, nullptr);
    __syncthreads();
    STAMP(6)
    {
        auto row = [&](int k) {
            const int p = gw + (k >> 1) * W;
            const int expert = p < PAIRS ? SHARED_EXPERT : s.ids[(p - PAIRS) / PAIRS];
            return gate_row(gate_up, expert, p % PAIRS) + (size_t)(k & 1) * EXPERT_DIM * HIDDEN;
        };
        if (!shared_first) {
            request_row(ring, row(0));
            request_row(ring1, row(1));  // n >= 2: every warp has a pair (W < TOTAL_PAIRS)
        }
        LaneX x;
        x.load(s.xs);
        float g = 0.f;
        for (int k = 0; k < n; k++) {
            cp_async_wait<1>();  // row k has landed (row k + 1 may still be in flight)
            bf16* slot_k = (k & 1) ? ring1 : ring;
            const float v = expert_row_dot(slot_k, x);
            if (k + 2 < n) request_row(slot_k, row(k + 2));  // each lane overwrites only its own pieces
            else cp_async_commit();
            if (k & 1) {
                const int p = gw + (k >> 1) * W;
                if (lane == 0) act[p < PAIRS ? TOP_K * EXPERT_DIM + p : p - PAIRS] = silu(g) * v;
            } else {
                g = v;
            }
        }
    }
    // Phase 3's routed down rows (the routing is known, the ring is free): in flight through the
    // barrier.
    bf16(*rows)[EXPERT_DIM] = reinterpret_cast<bf16(*)[EXPERT_DIM]>(ring);  // [8][512]
    const int c = gw;  // this warp's output column
    if (c < HIDDEN) {
#pragma unroll
        for (int slot = 0; slot < TOP_K; slot++) {
            const bf16* src = down + ((size_t)s.ids[slot] * HIDDEN + c) * EXPERT_DIM;
#pragma unroll
            for (int j = 0; j < EXPERT_DIM / 256; j++)
                cp_async16(&rows[slot][j * 256 + lane * 8], src + j * 256 + lane * 8, true);
        }
    }
    cp_async_commit();
    const float old = c < HIDDEN && lane == 0 ? h[c] : 0.f;  // only this warp writes h[c], in phase 3
    STAMP(7)
    grid_barrier(arrivals, base + 2 * G);
    STAMP(8)

    // ---- 3. down, weighted over the slots, added to h
    pdl_trigger();
    {  // act → shared memory: every load in flight at once (a rolled loop pays an L2 trip a step)
        constexpr int N = SLOTS * EXPERT_DIM / 4, PER = (N + 255) / 256;
        float4 v[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int i = threadIdx.x + k * 256;
            if (i < N) v[k] = __ldcg(reinterpret_cast<const float4*>(act) + i);
        }
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int i = threadIdx.x + k * 256;
            if (i < N) reinterpret_cast<float4*>(&s.act[0][0])[i] = v[k];
        }
    }
    __syncthreads();
    STAMP(9)
    if (c < HIDDEN) {
        cp_async_wait<0>();
        float sum = 0.f;
#pragma unroll
        for (int group = 0; group < 3; group++) {
            float acc = 0.f;
#pragma unroll
            for (int slot = 3 * group; slot < 3 * group + 3; slot++) {
                const bf16* w = slot < TOP_K ? rows[slot] : s.shared_down[warp];
                float part = 0.f;
#pragma unroll
                for (int j = 0; j < EXPERT_DIM / 256; j++) {
                    const float* a = &s.act[slot][j * 256 + lane * 8];
                    const float4 a0 = *reinterpret_cast<const float4*>(a), a1 = *reinterpret_cast<const float4*>(a + 4);
                    const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                    part += dot8(*reinterpret_cast<const uint4*>(w + j * 256 + lane * 8), av);
                }
                acc += s.weights[slot] * part;
            }
            sum += warp_sum(acc);
        }
        if (lane == 0) h[c] = old + sum;
    }
    STAMP(10)
}
