// The decode step's end of a layer for one token in one persistent kernel: the mixer's output
// projection (out_proj / o_proj) and the whole MoE block,
//   h += W_o · y;   h += Σ_slot w_slot · down_e(silu(gate_e·x) ∘ up_e·x),   x = RMSNorm(h)·w1p,
// routing included. It gives the very bits of gemv_bf16 (accumulate) → moe_route_decode →
// moe_gate_up_gemv → moe_down_gemv (the same expressions in the same order), without their
// three kernel boundaries: the phases meet at grid barriers, and what does not depend on the
// previous kernel or on the routing (W_o's rows, the router rows, the shared expert's rows) is
// requested before anything is waited for. Launched with PDL (moe.rs), so those requests overlap
// the kernel before it (the GDN step, the attention combine).
//
// Grid: blocks of 256 threads, all resident at once (grid_barrier needs that), at least 64 (W ≥
// 512 warps: each shared (gate, up) pair is a warp's first). Hopper (moe.rs): 2 blocks on every
// SM, at least 257 (one router row each; 2112 warps ≥ 2048 columns). Elsewhere (the consumer
// cards' 99 KB of shared memory a block): one block an SM, and a warp also takes the columns
// c + W, c + 2W, ... in phases 0 and 3 and a block the router rows b + G, b + 2G, ... in phase 1,
// their rows read from global memory as they come (not requested ahead); the int4 kernel there
// has 16 warps a block (moe_decode_block_int4_wide16, MoeDecodeShared16). gw = blockIdx.x·8 +
// warp is a warp's index among W = 8·gridDim.x (2112 on the H200; ·16 with 16 warps).
//  0. Warp gw < 2048 owns output column c = gw throughout. Before pdl_wait it requests W_o's row c
//     (8 KB, into its ring), the shared expert's down row of c (phase 3) and, warp 0 of block
//     b < 257, router row b. Then h[c] += W_o[c] · y, summed like gemv_tiles_4096; a warp whose
//     first (gate, up) row pair is the shared expert's (gw < 512) requests it.
//  barrier
//  1. x = RMSNorm(h) is staged (each block does it itself); block b's warp 0 writes logits[b];
//     the block arrives at the barrier, and while the others come, the shared pairs' warps
//     write act[8][gw] = silu(gate · x) · (up · x).
//  barrier
//  2. Every block routes the token itself from the logits (route_token: the same bits in every
//     block). Then the routed (gate, up) row pairs (pair 512 + q is q = slot·512 + i; warp gw
//     takes pairs gw, gw + W, ... past the shared ones) stream through each warp's 2-row
//     cp.async ring. Writes act [8, 512].
//  barrier
//  3. Warp gw < 2048, column c: its 8 routed down rows (1 KB each, requested before the barrier)
//     against act staged in shared memory; h[c] += Σ_slot w_slot (down_slot[c] · act_slot), summed
//     like moe_down_gemv: slots in 3 groups of 3, each group over the warp, then the groups.
//
// Arguments: w_o bf16 [2048, 4096], y bf16 [4096] (the mixer's gated output); router bf16
// [257, 2048]; gate_up bf16 [257, 1024, 2048]; down bf16 [257, 2048, 512]; h f32 [2048] (read,
// then added to); w1p f32 [2048] (the post-attention norm, 1 + w); logits f32 [257], act f32
// [9, 512] (scratch, written); arrivals u64 (grid_barrier's count, a multiple of the grid between
// launches); lora: a device array of one LoRA output-projection site, or null (phase 0 adds its
// term).

// What moe_decode_head reads in a row format besides bf16 (moe_decode_block_q; the bf16 kernel
// passes none and instantiates with common.cuh's Bf16Only): W_o (w_o: its rows in the gate/up format GU, its
// columns maybe in tiled value-head order, y_tile_r; 1: in order), and the shared expert
// (shared: its rows appended to the routed experts' buffers gate_up and down as expert
// SHARED_EXPERT, gate/up in GU, down in DN).
// moe_decode_block_lora's scratch lx (f32; FUSED_MOE_SCRATCH in lora.rs), in act's buffer past
// its [9, 512] (derived, not an argument: one register pair fewer under the 96-register cap):
#define LX_BASE (SLOTS * EXPERT_DIM)
#define LX_UP (TOP_K * PAIRS)              // the routed pairs' gate sums [4096], the up sums from here
#define LX_U_GU (2 * TOP_K * PAIRS)        // u_gu [8, r ≤ 32]
#define LX_U_DOWN (LX_U_GU + TOP_K * 32)   // u_down [8, r ≤ 32]
#define LX_U_SD (LX_U_DOWN + TOP_K * 32)   // u_sd [r ≤ 32]
#define LX_U_R (LX_U_SD + 32)              // the router site's u [Σr ≤ 32]
#define LX_U_SH (LX_U_R + 32)              // the shared gate|up site's u [Σr ≤ 32]
#define LX_SH (LX_U_SH + 32)               // the shared pairs' gate sums [512], then up sums [512]

// Whether a (gate, up) pair of rows in format GU fits a warp's ring (bf16 pairs: moe_decode_head
// checks).
template <typename GU>
__device__ constexpr bool pair_fits(int ring_bytes) {
    if constexpr (HasRows<GU>::value) return 2 * GU::row_bytes(HIDDEN) <= ring_bytes;
    else return true;
}

struct HeadRows {
    int w_o, y_tile_r, shared;
    const unsigned char* gate_up;
    const unsigned char* down;
};

// Phases 0 and 1 of moe_decode_block, which its 4- to 8-bit forms share (the router bf16 in
// all): h[c] += W_o[c] · y (hc keeps it), the router logits, and the shared expert's (gate, up)
// pair into act[8]; `base` is the barrier count at the launch's start. W_o is bf16 [2048, 4096]
// and the shared expert bf16 (shared_gate_up [1024, 2048], gate rows then up rows; shared_down
// [2048, 512]), or either in rows as `q` says. Returns past the second barrier, with x =
// RMSNorm(h) staged in s.xs and, for shared rows, the shared expert's down row of column c in
// s.shared_down. S: the block's shared memory, MoeDecodeShared (8 warps) or MoeDecodeShared16 (16
// warps, WIDE; its 4 KB rings take no W_o row and no bf16 (gate, up) pair: those are read from
// global memory, and phase 3 requests the shared down row).
template <typename S, typename GU, typename DN, bool WIDE, bool OUT_LORA>
__device__ __forceinline__ void moe_decode_head(S& s, const bf16* __restrict__ w_o, HeadRows q,
                                                const bf16* __restrict__ y, const bf16* __restrict__ router,
                                                const bf16* __restrict__ shared_gate_up,
                                                const bf16* __restrict__ shared_down, float* __restrict__ h,
                                                const float* __restrict__ w1p, float eps, float* __restrict__ logits,
                                                float* __restrict__ act, unsigned long long* __restrict__ arrivals,
                                                const LoraSite* const* __restrict__ lora,
                                                const LoraMoe* __restrict__ moe_lora, float& hc,
                                                unsigned long long& base) {
    constexpr int NW = shared_warps<S>(), RING_BYTES = sizeof(S::ring[0]);
    constexpr bool SMALL = RING_BYTES < 2 * HIDDEN * 2;
    static_assert(WIDE || !SMALL, "the 16-warp form is a wide one");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * NW, gw = blockIdx.x * NW + warp;
    const int c = gw;  // this warp's output column (phases 0 and 3), if < HIDDEN
    bf16* ring = s.ring[warp][0];
    bf16* ring1 = s.ring[warp][SMALL ? 0 : 1];  // (used where !SMALL)
    hc = 0.f;

    // ---- 0. weights first, three commit groups per thread: W_o's row c (8 KB bf16, filling the
    // warp's ring), the router row (warp 0 of a block b < 257: row b, into act, which is staged
    // only in phase 3), the shared expert's down row of column c (phase 3). None depends on an
    // earlier kernel: requested before pdl_wait, they stream while the kernel before runs.
    // (SMALL: the first and third groups are empty.)
    const bool rows = HasRows<GU>::value && q.w_o != 0;
    const bool shared_rows = HasRows<GU>::value && q.shared != 0;
    if constexpr (SMALL) {
        cp_async_commit();
    } else {
        if constexpr (HasRows<GU>::value) {
            constexpr int ROW = GU::row_bytes(MIXER_OUT);
            static_assert(ROW <= 2 * HIDDEN * 2, "a W_o row fits the ring");
            if (rows && c < HIDDEN)
                request_row_bytes<ROW>(reinterpret_cast<unsigned char*>(ring),
                                       reinterpret_cast<const unsigned char*>(w_o) + (size_t)c * ROW);
        }
        if (!rows || c >= HIDDEN) {
            if (c < HIDDEN) {
#pragma unroll
                for (int j = 0; j < MIXER_OUT / 256; j++)
                    cp_async16(ring + j * 256 + lane * 8, w_o + (size_t)c * MIXER_OUT + j * 256 + lane * 8, true);
            }
            cp_async_commit();
        }
    }
    bf16* router_row = reinterpret_cast<bf16*>(&s.act[0][0]);
    if (warp == 0 && blockIdx.x < ROUTER_ROWS) request_row(router_row, router + (size_t)blockIdx.x * HIDDEN);
    else cp_async_commit();
    if constexpr (SMALL) {
        cp_async_commit();
    } else {
        if constexpr (HasRows<DN>::value) {
            constexpr int ROW = DN::row_bytes(EXPERT_DIM);
            static_assert(ROW <= EXPERT_DIM * 2, "a down row fits shared_down");
            if (shared_rows && c < HIDDEN)
                request_row_bytes<ROW>(reinterpret_cast<unsigned char*>(s.shared_down[warp]),
                                       q.down + ((size_t)SHARED_EXPERT * HIDDEN + c) * ROW);
            else if (shared_rows) cp_async_commit();
        }
        if (!shared_rows) {
            if (c < HIDDEN) {
#pragma unroll
                for (int j = 0; j < EXPERT_DIM / 256; j++)
                    cp_async16(&s.shared_down[warp][j * 256 + lane * 8],
                               shared_down + (size_t)c * EXPERT_DIM + j * 256 + lane * 8, true);
            }
            cp_async_commit();
        }
    }
    pdl_wait();
    base = launch_base(arrivals, G);
    // y → shared memory (bf16, in xs's 8 KB, in W_o's column order), then h[c] += W_o[c] · y:
    // bf16 rows each lane its 16 pieces j·256 + 8·lane in order with dot_piece, then the warp
    // (GemvTile<4096>::dot's order); rows in a format as w_o_row_dot takes them. hc keeps h[c]
    // for phase 3 (only this warp writes it).
    {
        uint4* ys = reinterpret_cast<uint4*>(s.xs);
        constexpr int YP = MIXER_OUT / 8 / (32 * NW);  // y's 16-byte pieces a thread stages
        uint4 yv[YP];
#pragma unroll
        for (int k = 0; k < YP; k++)
            yv[k] = __ldcg(reinterpret_cast<const uint4*>(y) + tiled_piece(threadIdx.x + k * 32 * NW, q.y_tile_r));
        const float old = !SMALL && c < HIDDEN && lane == 0 ? __ldcg(h + c) : 0.f;
#pragma unroll
        for (int k = 0; k < YP; k++) ys[threadIdx.x + k * 32 * NW] = yv[k];
        __syncthreads();
        // W_o's row (in the ring, or for a later column in global memory) · y
        auto w_o_dot = [&](const bf16* row) {
            if constexpr (HasRows<GU>::value) {
                if (rows) return w_o_row_dot<GU>(reinterpret_cast<const unsigned char*>(row), ys);
            }
            float acc = 0.f;
#pragma unroll
            for (int j = 0; j < MIXER_OUT / 256; j++) {
                float yv[8];
                unpack8(ys[j * 32 + lane], yv);
                acc += dot_piece(*reinterpret_cast<const uint4*>(row + j * 256 + lane * 8),
                                 make_float4(yv[0], yv[1], yv[2], yv[3]), make_float4(yv[4], yv[5], yv[6], yv[7]));
            }
            return warp_sum(acc);
        };
        if (!SMALL && c < HIDDEN) {
            cp_async_wait<2>();  // W_o's row (the router and shared down rows may still be in flight)
            __syncwarp();        // (rows: lanes read pieces other lanes copied)
            hc = old + w_o_dot(ring);
            if (lane == 0) h[c] = hc;
        }
        // (a LoRA adapter's output site: u = A y once for the grid, lora.cuh's LoraOnce past
        // the barrier count; warp gw < rank_sum takes row gw, 8 KB from L2)
        if (OUT_LORA && lora != nullptr) {
            LoraOnce* once = reinterpret_cast<LoraOnce*>(arrivals + 1);
            // (its launch's start kept in s.ids, free until the routing: registers; thread 0
            // alone waits)
            if (threadIdx.x == 0) *reinterpret_cast<unsigned long long*>(s.ids) = launch_base(&once->count, G);
            const LoraSite* site = lora[0];
            if (site != nullptr && gw < site->rank_sum) {
                const bf16* row[1] = {site->a + (size_t)gw * MIXER_OUT};
                float v[1];
                lora_rows_dot<MIXER_OUT, 1, 2>(row, reinterpret_cast<const bf16*>(s.xs), v);
                if (lane == 0) once->u[gw] = v[0];
            }
            grid_arrive(&once->count);
        }
        // WIDE (a grid of fewer than 2048 warps): the warp's later columns c + W, c + 2W, ...,
        // their rows read from global memory (SMALL: column c's too).
        for (int c2 = SMALL ? c : c + W; WIDE && c2 < HIDDEN; c2 += W) {
            const bf16* row = w_o + (size_t)c2 * MIXER_OUT;
            if constexpr (HasRows<GU>::value) {
                if (rows)
                    row = reinterpret_cast<const bf16*>(reinterpret_cast<const unsigned char*>(w_o) +
                                                        (size_t)c2 * GU::row_bytes(MIXER_OUT));
            }
            const float v = (lane == 0 ? __ldcg(h + c2) : 0.f) + w_o_dot(row);
            if (lane == 0) h[c2] = v;
            if (c2 == c) hc = v;
        }
    }
    // A LoRA adapter's term of the output projection (`lora`, else null; bf16 only, y in order,
    // rank_sum ≤ 32): u = A y, computed once for the grid above, into s.red, then h[c] += s ·
    // B[c] · u.
    if (OUT_LORA && lora != nullptr) {
        LoraOnce* once = reinterpret_cast<LoraOnce*>(arrivals + 1);
        grid_wait(&once->count, threadIdx.x == 0 ? *reinterpret_cast<unsigned long long*>(s.ids) + G : 0);
        if (threadIdx.x < 32) s.red[threadIdx.x] = __ldcg(once->u + threadIdx.x);
        __syncthreads();
        if (c < HIDDEN) {
            hc += lora_term(lora, s.red, c, 0);
            if (lane == 0) h[c] = hc;
        }
        for (int c2 = c + W; WIDE && c2 < HIDDEN; c2 += W) {
            const float t = lora_term(lora, s.red, c2, 0);
            if (lane == 0) h[c2] = __ldcg(h + c2) + t;
        }
    }
    // The ring is free again: a warp whose first (gate, up) pair is the shared expert's (pair gw <
    // 512) requests it now; it needs no routing and is taken before the routing (phase 1).
    // (SMALL: a pair of rows in a format where it fits the ring; a bf16 pair is read from global
    // memory.)
    const bool shared_first = gw < PAIRS;
    constexpr bool ROWS_FIT = pair_fits<GU>(RING_BYTES);
    static_assert(SMALL || ROWS_FIT, "a (gate, up) pair fits the ring");
    const bool pair_in_ring = shared_first && (shared_rows ? ROWS_FIT : !SMALL);
    if constexpr (HasRows<GU>::value && ROWS_FIT) {
        constexpr int ROW = GU::row_bytes(HIDDEN);
        unsigned char* r = reinterpret_cast<unsigned char*>(ring);
        if (shared_first && shared_rows) {
            request_row_bytes<ROW>(r, gate_row_q<GU>(q.gate_up, SHARED_EXPERT, gw));
            request_row_bytes<ROW>(r + ROW, gate_row_q<GU>(q.gate_up, SHARED_EXPERT, gw + EXPERT_DIM));
        }
    }
    if (!SMALL && shared_first && !shared_rows) {
        request_row(ring, shared_gate_up + (size_t)gw * HIDDEN);
        request_row(ring1, shared_gate_up + (size_t)(gw + EXPERT_DIM) * HIDDEN);
    }
    grid_barrier(arrivals, base + G);

    // ---- 1. router logits; the shared expert's (gate, up) pair while the barrier completes.
    stage_rms_norm<32 * NW>(h, w1p, eps, s.xs, s.red);  // h from L2 (other blocks wrote it)
    // an adapter's router and shared expert sites (moe_lora, else null): their u = A x, a row a
    // warp (block j's warp 1: the router's row j, warp 2: the shared expert's), into lx before
    // the block arrives; the terms are added past the barrier (moe_decode_block_lora)
    const LoraSite* router_lora = moe_lora != nullptr ? moe_lora->router : nullptr;
    const LoraSite* shared_lora = moe_lora != nullptr ? moe_lora->shared : nullptr;
    float* lx = act + LX_BASE;
    if (warp == 1 && router_lora != nullptr && blockIdx.x < router_lora->rank_sum) {
        const float v = router_row_dot(router_lora->a + (size_t)blockIdx.x * HIDDEN, s.xs);
        if (lane == 0) lx[LX_U_R + blockIdx.x] = v;
    }
    if (warp == 2 && shared_lora != nullptr && blockIdx.x < shared_lora->rank_sum) {
        const float v = router_row_dot(shared_lora->a + (size_t)blockIdx.x * HIDDEN, s.xs);
        if (lane == 0) lx[LX_U_SH + blockIdx.x] = v;
    }
    if (warp == 0 && blockIdx.x < ROUTER_ROWS) {
        cp_async_wait_pending(pair_in_ring ? 2 : 0);  // the router row (and the shared down row)
        const float v = router_row_dot(router_row, s.xs);
        if (lane == 0) logits[blockIdx.x] = v;
    }
    // (WIDE, a grid of fewer than 257 blocks: block b's warp w also takes router rows b + k·G,
    // k ≡ w mod NW, k > 0, from global memory)
    for (int k = warp == 0 ? NW : warp, r = blockIdx.x + k * G; WIDE && r < ROUTER_ROWS; k += NW, r += NW * G) {
        const float v = router_row_dot(router + (size_t)r * HIDDEN, s.xs);
        if (lane == 0) logits[r] = v;
    }
    grid_arrive(arrivals);
    // a shared pair's sums: its activation, or with the shared expert adapted its sums into lx
    // (moe_decode_block_lora finishes it)
    auto shared_pair = [&](float g, float u) {
        if (lane != 0) return;
        if (shared_lora != nullptr) lx[LX_SH + gw] = g, lx[LX_SH + PAIRS + gw] = u;
        else act[TOP_K * EXPERT_DIM + gw] = silu(g) * u;
    };
    // The (gate, up) pairs are numbered shared expert first: pair p < 512 is the shared expert's
    // row pair p, pair 512 + q the routed one q = slot·512 + i; warp gw takes pairs gw, gw + W, ...
    // (rows k = 2m + (0 gate, 1 up) of pair gw + m·W); a shared pair is always a warp's first.
    if constexpr (HasRows<GU>::value) {
        if (shared_first && shared_rows) {
            // as moe_gate_up_gemv_q takes a routed pair (the same bits)
            const unsigned char* r = ROWS_FIT ? reinterpret_cast<const unsigned char*>(ring)
                                              : gate_row_q<GU>(q.gate_up, SHARED_EXPERT, gw);
            const unsigned char* r_up = ROWS_FIT ? r + GU::row_bytes(HIDDEN)
                                                 : gate_row_q<GU>(q.gate_up, SHARED_EXPERT, gw + EXPERT_DIM);
            LaneX4 x;
            x.load(s.xs);
            cp_async_wait<0>();
            __syncwarp();  // (lanes read pieces other lanes copied)
            shared_pair(expert_row_dot_q<GU>(r, x), expert_row_dot_q<GU>(r_up, x));
        }
    }
    if (shared_first && !shared_rows) {
        LaneX x;
        x.load(s.xs);
        cp_async_wait<0>();
        shared_pair(expert_row_dot(SMALL ? shared_gate_up + (size_t)gw * HIDDEN : ring, x),
                    expert_row_dot(SMALL ? shared_gate_up + (size_t)(gw + EXPERT_DIM) * HIDDEN : ring1, x));
    }
    grid_wait(arrivals, base + 2 * G);
}

// 96 registers (256 threads, 2 blocks per SM: 49,152 of the SM's 65,536) leave room for the block
// of the kernel before (GDN step 128 × 80, attention combine 256 × 64) to finish beside them
// while this kernel's weights stream in (PDL); at the default 110 they would wait for it.
//
// moe_decode_block_lora: the same with a LoRA adapter of the MoE block (`ml`, lora.cuh's
// LoraMoe; lx: f32 scratch past act, the LX_ layout above):
//  1. warps of the first blocks compute the router site's and the shared gate|up site's u = A x
//     (a row each) into lx; the shared pairs' sums go to lx (not yet act);
//  barrier
//  2. each block adds the router's term to its own copy of the logits and routes from it; the
//     shared pairs finish with their term; the routed pairs' (gate, up) sums go to lx; 8·r_gu
//     warps (those with one routed pair first) compute u_gu[slot][k] = A_gu[e_slot][k] · x;
//  barrier (with routed gate/up adapters)
//  2b. each warp finishes its routed pairs: act = silu(g + s · B_g[e][i] · u) · (v + s ·
//     B_u[e][i] · u);
//  barrier
//  3. as above, and the warps past the 2048 columns compute u_down[slot][k] = A_down[e_slot][k]
//     · act[slot] and the shared expert's u_sd[k] = A_sd[k] · act[8];
//  barrier (with down adapters)
//  3b. h[c] += the down sum + s · Σ_slot w_slot · B_down[e_slot][c] · u_down[slot] + w_8 · s ·
//     B_sd[c] · u_sd.
template <bool LX, bool WIDE, bool OUT_LORA>
__device__ __forceinline__ void moe_decode_block_bf16(
    const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
    const bf16* __restrict__ gate_up, const bf16* __restrict__ down, float* __restrict__ h,
    const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
    unsigned long long* __restrict__ arrivals, const LoraSite* const* __restrict__ lora,
    const LoraMoe* __restrict__ ml) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    MoeDecodeShared& s = *reinterpret_cast<MoeDecodeShared*>(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * MOE_WARPS, gw = blockIdx.x * MOE_WARPS + warp;
    const int c = gw;  // this warp's output column (phases 0 and 3), if < HIDDEN
    bf16* ring = s.ring[warp][0];
    bf16* ring1 = s.ring[warp][1];

    float hc;
    unsigned long long base;
    moe_decode_head<MoeDecodeShared, Bf16Only, Bf16Only, WIDE, OUT_LORA>(s, w_o, HeadRows{0, 1, 0, nullptr, nullptr}, y, router, gate_row(gate_up, SHARED_EXPERT, 0), down + (size_t)SHARED_EXPERT * HIDDEN * EXPERT_DIM,
                    h, w1p, eps, logits, act, arrivals, lora, ml, hc, base);
    float* lx = act + LX_BASE;  // (LX only)
    const bool shared_first = gw < PAIRS;
    const int n = 2 * ((TOTAL_PAIRS - 1 - gw) / W + 1);
    const int k0 = shared_first ? 2 : 0;  // every warp has at least 2 routed rows (W < 4096)

    // ---- 2. the routed experts' gate/up
    if constexpr (LX) {
        // the adapter's router term: every block adds it to its own copy of the logits
        // (s.act is free until phase 3), then routes from it
        if (ml->router != nullptr) {
            float* own = &s.act[0][0];
            for (int b = threadIdx.x; b < ROUTER_ROWS; b += 256)
                own[b] = __ldcg(logits + b) + lora_site_term<true>(ml->router, lx + LX_U_R, b);
            __syncthreads();
            if (warp == 0) route_token<true>(own, s.ids, s.weights, nullptr);
        } else if (warp == 0) {
            route_token(logits, s.ids, s.weights, nullptr);
        }
        // the shared pair this warp took in phase 1: its sums with the adapter's term
        if (ml->shared != nullptr && shared_first) {
            const float g = lx[LX_SH + gw] + lora_site_term<true>(ml->shared, lx + LX_U_SH, gw);
            const float u = lx[LX_SH + PAIRS + gw] + lora_site_term<true>(ml->shared, lx + LX_U_SH, EXPERT_DIM + gw);
            if (lane == 0) act[TOP_K * EXPERT_DIM + gw] = silu(g) * u;
        }
    } else {
        if (warp == 0) route_token(logits, s.ids, s.weights, nullptr);
    }
    __syncthreads();
    {
        auto row = [&](int k) {
            const int p = gw + (k >> 1) * W - PAIRS;  // k past the shared pair: a routed pair
            return gate_row(gate_up, s.ids[p / PAIRS], p % PAIRS) + (size_t)(k & 1) * EXPERT_DIM * HIDDEN;
        };
        request_row(ring, row(k0));
        request_row(ring1, row(k0 + 1));
        LaneX x;  // (not kept across the routing: registers)
        x.load(s.xs);
        float g = 0.f;
        for (int k = k0; k < n; k++) {
            cp_async_wait<1>();  // row k has landed (row k + 1 may still be in flight)
            bf16* slot_k = (k & 1) ? ring1 : ring;
            const float v = expert_row_dot(slot_k, x);
            if (k + 2 < n) request_row(slot_k, row(k + 2));  // each lane overwrites only its own pieces
            else cp_async_commit();
            if (k & 1) {
                const int q = gw + (k >> 1) * W - PAIRS;
                if (lane == 0) {
                    if constexpr (LX) lx[q] = g, lx[LX_UP + q] = v;
                    else act[q] = silu(g) * v;
                }
            } else {
                g = v;
            }
        }
    }
    if constexpr (LX) {
        // first by the warps with one routed pair here (their first pair was the shared expert's,
        // in phase 1, and their third is past the 4608: gw in [4608 − 2W, 512)), then the last
        const int r = ml->rank_gu, light0 = max(TOTAL_PAIRS - 2 * W, 0);
        const int j = gw < light0 ? -1 : gw < PAIRS ? gw - light0 : PAIRS - light0 + (W - 1 - gw);
        if (j >= 0 && j < TOP_K * r) {
            const float v = router_row_dot(ml->a_gu + ((size_t)s.ids[j / r] * r + j % r) * HIDDEN, s.xs);
            if (lane == 0) lx[LX_U_GU + j] = v;
        }
    }
    // Phase 3's routed down rows (the routing is known, the ring is free): in flight through the
    // barrier.
    bf16(*rows)[EXPERT_DIM] = reinterpret_cast<bf16(*)[EXPERT_DIM]>(ring);  // [8][512]
    // (WIDE) the 8 routed down rows of column cc and the shared expert's into the ring and
    // s.shared_down[warp], one commit group; each lane copies the pieces it reads
    auto request_down = [&](int cc) {
#pragma unroll
        for (int slot = 0; slot < SLOTS; slot++) {
            const bf16* src = down + ((size_t)(slot < TOP_K ? s.ids[slot] : SHARED_EXPERT) * HIDDEN + cc) * EXPERT_DIM;
            bf16* dst = slot < TOP_K ? rows[slot] : s.shared_down[warp];
#pragma unroll
            for (int j = 0; j < EXPERT_DIM / 256; j++) cp_async16(dst + j * 256 + lane * 8, src + j * 256 + lane * 8, true);
        }
        cp_async_commit();
    };
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
    if constexpr (LX) {
        // ---- 2b. the adapter's term into this warp's pairs (u_gu from L2)
        const int r = ml->rank_gu;
        if (r > 0) grid_barrier(arrivals, base + 3 * G);
        for (int k = k0; k < n; k += 2) {
            const int q = gw + (k >> 1) * W - PAIRS, slot = q / PAIRS, i = q % PAIRS;
            float tg = 0.f, tu = 0.f;
            if (lane < r) {
                const float u = __ldcg(lx + LX_U_GU + slot * r + lane);
                const bf16* b = ml->b_gu + ((size_t)s.ids[slot] * 2 * EXPERT_DIM + i) * r + lane;
                tg = __bfloat162float(b[0]) * u;
                tu = __bfloat162float(b[(size_t)EXPERT_DIM * r]) * u;
            }
            tg = warp_sum(tg);
            tu = warp_sum(tu);
            if (lane == 0) act[q] = silu(lx[q] + ml->scale_gu * tg) * (lx[LX_UP + q] + ml->scale_gu * tu);
        }
    }
    // (the head's two barriers, and 2b's with routed gate/up adapters)
    grid_barrier(arrivals, base + (LX && ml->rank_gu > 0 ? 4 : 3) * G);

    // ---- 3. down, weighted over the slots, added to h
    pdl_trigger();
    stage_act(s, act);
    if constexpr (LX) {
        // u_down, then u_sd, by the warps past the 2048 columns (idle in phase 3)
        const int r = ml->rank_down, rs = ml->rank_sd;
        for (int j = gw - HIDDEN; j >= 0 && j < TOP_K * r + rs; j += W - HIDDEN) {
            const bool routed = j < TOP_K * r;
            const int slot = routed ? j / r : TOP_K;
            const bf16* a = (routed ? ml->a_down + ((size_t)s.ids[slot] * r + j % r) * EXPERT_DIM
                                    : ml->a_sd + (size_t)(j - TOP_K * r) * EXPERT_DIM) + lane * 16;
            float acc = dot8(*reinterpret_cast<const uint4*>(a), &s.act[slot][lane * 16]) +
                        dot8(*reinterpret_cast<const uint4*>(a + 8), &s.act[slot][lane * 16 + 8]);
            acc = warp_sum(acc);
            if (lane == 0) lx[routed ? LX_U_DOWN + j : LX_U_SD + j - TOP_K * r] = acc;
        }
    }
    // a column's sum over the slots, its rows in the ring and s.shared_down[warp]
    auto down_sum = [&]() {
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
        return sum;
    };
    float sum = 0.f;
    if (c < HIDDEN) {
        cp_async_wait<0>();
        sum = down_sum();
    }
    if constexpr (WIDE) {
        // the warp's later columns, their rows requested as they come
        for (int c2 = c + W; c2 < HIDDEN; c2 += W) {
            request_down(c2);
            cp_async_wait<0>();
            const float v = down_sum();
            if (lane == 0) h[c2] = __ldcg(h + c2) + v;
        }
    }
    if constexpr (LX) {
        // ---- 3b. the adapter's down terms (u_down, u_sd from L2)
        const int r = ml->rank_down, rs = ml->rank_sd;
        if (r > 0 || rs > 0) grid_barrier(arrivals, base + (ml->rank_gu > 0 ? 5 : 4) * G);
        if (c < HIDDEN && (r > 0 || rs > 0)) {
            float t = 0.f;
            for (int j = lane; j < TOP_K * r; j += 32) {
                const int slot = j / r;
                const bf16* b = ml->b_down + ((size_t)s.ids[slot] * HIDDEN + c) * r + j % r;
                t += s.weights[slot] * __bfloat162float(*b) * __ldcg(lx + LX_U_DOWN + j);
            }
            const float sd = lane < rs ? __bfloat162float(ml->b_sd[(size_t)c * rs + lane]) * __ldcg(lx + LX_U_SD + lane) : 0.f;
            sum += ml->scale_down * warp_sum(t) + s.weights[TOP_K] * ml->scale_sd * warp_sum(sd);
        }
    }
    if (c < HIDDEN && lane == 0) h[c] = hc + sum;
}

extern "C" __global__ void __maxnreg__(96)
    moe_decode_block(const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
                     const bf16* __restrict__ gate_up, const bf16* __restrict__ down, float* __restrict__ h,
                     const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
                     unsigned long long* __restrict__ arrivals, const LoraSite* const* __restrict__ lora,
                     const LoraMoe* __restrict__ ml) {
    (void)lora, (void)ml;  // (moe_decode_block_lora's signature: moe.rs launches any of them)
    moe_decode_block_bf16<false, false, false>(w_o, y, router, gate_up, down, h, w1p, eps, logits, act, arrivals, nullptr, nullptr);
}

// moe_decode_block with a LoRA adapter of the output projection (`lora`, the mixers' adapters):
// its own instance, so that the plain one keeps every register (the site's u = A y computed once
// for the grid, moe_decode_head).
extern "C" __global__ void __maxnreg__(96)
    moe_decode_block_out_lora(const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
                              const bf16* __restrict__ gate_up, const bf16* __restrict__ down, float* __restrict__ h,
                              const float* __restrict__ w1p, float eps, float* __restrict__ logits,
                              float* __restrict__ act, unsigned long long* __restrict__ arrivals,
                              const LoraSite* const* __restrict__ lora, const LoraMoe* __restrict__ ml) {
    (void)ml;
    moe_decode_block_bf16<false, false, true>(w_o, y, router, gate_up, down, h, w1p, eps, logits, act, arrivals, lora, nullptr);
}

extern "C" __global__ void __maxnreg__(96)
    moe_decode_block_lora(const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
                          const bf16* __restrict__ gate_up, const bf16* __restrict__ down, float* __restrict__ h,
                          const float* __restrict__ w1p, float eps, float* __restrict__ logits,
                          float* __restrict__ act, unsigned long long* __restrict__ arrivals,
                          const LoraSite* const* __restrict__ lora, const LoraMoe* __restrict__ ml) {
    moe_decode_block_bf16<true, false, true>(w_o, y, router, gate_up, down, h, w1p, eps, logits, act, arrivals, lora, ml);
}

// moe_decode_block for a grid of fewer than 2048 warps (one block an SM: the consumer cards;
// no PDL there, so no kernel before it to leave registers for).
extern "C" __global__ void __maxnreg__(128)
    moe_decode_block_wide(const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
                          const bf16* __restrict__ gate_up, const bf16* __restrict__ down, float* __restrict__ h,
                          const float* __restrict__ w1p, float eps, float* __restrict__ logits,
                          float* __restrict__ act, unsigned long long* __restrict__ arrivals,
                          const LoraSite* const* __restrict__ lora, const LoraMoe* __restrict__ ml) {
    (void)ml;
    moe_decode_block_bf16<false, true, true>(w_o, y, router, gate_up, down, h, w1p, eps, logits, act, arrivals, lora, nullptr);
}

// ---------------------------------------------------------------------------------------------
// moe_decode_block_int4 and its GGUF forms: the routed experts in a 4- to 8-bit row format
// (common.cuh's "4- to 8-bit expert rows": int4 for GPTQ/AWQ/compressed-tensors; Q4_K, Q5_K,
// Q6_K, Q8_0 for GGUF files; gate/up rows of F::row_bytes(2048) bytes, down rows of
// F::row_bytes(512)), the router bf16. W_o and the shared expert are bf16 (the GPTQ-Int4
// release's shape), or where the launch says so in the experts' formats: w_o_rows (an
// all-linear int4 recipe's W_o; a GGUF file's out_proj and o_proj, the GDN's columns maybe in
// tiled order: y_tile_r) and shared_rows (a GGUF file's shared expert, appended to the routed
// ones' buffers). Phases 0 and 1 are moe_decode_head's; phase 2 streams the routed gate/up rows
// (a warp's rows requested up to GU::RING at once in its 8 KB ring); phase 3 reads the 8 routed
// down rows and the shared one. Lane l owns columns j·1024 + 32l .. +32 of a gate/up row (j = 0,
// 1) and 16l .. +16 of a down row; the lanes copy a row's 16-byte pieces round-robin, so every
// lane reads after a __syncwarp.

// Rows of a format in flight per warp in phase 2 (a ring of RING_BYTES: 8 KB, or 16 warps' 4 KB).
template <typename F, int RING_BYTES>
__host__ __device__ constexpr int gate_up_ring() {
    return RING_BYTES / F::row_bytes(HIDDEN) < 6 ? RING_BYTES / F::row_bytes(HIDDEN) : 6;
}

// S: the block's shared memory (MoeDecodeShared, 8 warps; MoeDecodeShared16, 16 warps, WIDE: the
// 4 KB ring holds phase 3's shared down row beside the 8 routed ones).
template <typename S, typename GU, typename DN, bool WIDE>
__device__ __forceinline__ void moe_decode_block_q(const bf16* __restrict__ w_o, const bf16* __restrict__ y,
                                                   const bf16* __restrict__ router,
                                                   const unsigned char* __restrict__ gate_up,
                                                   const unsigned char* __restrict__ down,
                                                   const bf16* __restrict__ shared_gate_up,
                                                   const bf16* __restrict__ shared_down, float* __restrict__ h,
                                                   const float* __restrict__ w1p, float eps,
                                                   float* __restrict__ logits, float* __restrict__ act,
                                                   unsigned long long* __restrict__ arrivals, int w_o_rows,
                                                   int y_tile_r, int shared_rows) {
    constexpr int NW = shared_warps<S>(), RING_BYTES = sizeof(S::ring[0]);
    constexpr bool SMALL = RING_BYTES < 2 * HIDDEN * 2;
    constexpr int GU_ROW = GU::row_bytes(HIDDEN), DOWN_ROW = DN::row_bytes(EXPERT_DIM), RING = gate_up_ring<GU, RING_BYTES>();
    // (the shared expert's down row: in DN, or bf16)
    constexpr int SH_ROW = DOWN_ROW > EXPERT_DIM * 2 ? DOWN_ROW : EXPERT_DIM * 2;
    static_assert(TOP_K * DOWN_ROW + (SMALL ? SH_ROW : 0) <= RING_BYTES, "the down rows fit the ring");
    extern __shared__ __align__(16) unsigned char smem_raw[];
    S& s = *reinterpret_cast<S*>(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * NW, gw = blockIdx.x * NW + warp;
    const int c = gw;  // this warp's output column (phase 3), if < HIDDEN
    unsigned char* ring = reinterpret_cast<unsigned char*>(s.ring[warp][0]);

    float hc;
    unsigned long long base;
    moe_decode_head<S, GU, DN, WIDE, false>(s, w_o, HeadRows{w_o_rows, y_tile_r, shared_rows, gate_up, down}, y, router, shared_gate_up,
                            shared_down, h, w1p, eps, logits, act, arrivals, nullptr, nullptr, hc, base);
    const bool shared_first = gw < PAIRS;
    const int n = 2 * ((TOTAL_PAIRS - 1 - gw) / W + 1);

    // ---- 2. the routed experts' gate/up
    if (warp == 0) route_token(logits, s.ids, s.weights, nullptr);
    __syncthreads();
    {
        auto expert_of = [&](int k) { return s.ids[(gw + (k >> 1) * W - PAIRS) / PAIRS]; };
        auto index_of = [&](int k) { return (gw + (k >> 1) * W - PAIRS) % PAIRS + (k & 1) * EXPERT_DIM; };
        const int k0 = shared_first ? 2 : 0;
#pragma unroll
        for (int q = 0; q < RING; q++) {
            if (k0 + q < n)
                request_row_bytes<GU_ROW>(ring + q * GU_ROW, gate_row_q<GU>(gate_up, expert_of(k0 + q), index_of(k0 + q)));
            else cp_async_commit();
        }
        LaneX4 x;
        x.load(s.xs);
        float g = 0.f;
        for (int k = k0; k < n; k++) {
            cp_async_wait<RING - 1>();  // row k has landed
            __syncwarp();               // (lanes read pieces other lanes copied)
            unsigned char* slot_k = ring + ((k - k0) % RING) * GU_ROW;
            const float v = expert_row_dot_q<GU>(slot_k, x);
            __syncwarp();  // every lane is done with the slot before it is refilled
            if (k + RING < n)
                request_row_bytes<GU_ROW>(slot_k, gate_row_q<GU>(gate_up, expert_of(k + RING), index_of(k + RING)));
            else cp_async_commit();
            if (k & 1) {
                if (lane == 0) act[gw + (k >> 1) * W - PAIRS] = silu(g) * v;
            } else {
                g = v;
            }
        }
    }
    // Phase 3's routed down rows, in flight through the barrier (SMALL: and the shared expert's,
    // behind them).
    // (where the shared expert's down row of column c is: shared memory, or for SMALL the ring)
    const unsigned char* first_shared;
    if constexpr (SMALL) first_shared = ring + TOP_K * DOWN_ROW;
    else first_shared = reinterpret_cast<const unsigned char*>(s.shared_down[warp]);
    if (c < HIDDEN) request_down_rows<DN>(ring, down, s.ids, c);
    else cp_async_commit();
    if constexpr (SMALL) {
        if (c < HIDDEN && shared_rows)
            request_row_bytes<DOWN_ROW>(ring + TOP_K * DOWN_ROW, down + ((size_t)SHARED_EXPERT * HIDDEN + c) * DOWN_ROW);
        else if (c < HIDDEN)
            request_row_bytes<EXPERT_DIM * 2>(ring + TOP_K * DOWN_ROW,
                                              reinterpret_cast<const unsigned char*>(shared_down + (size_t)c * EXPERT_DIM));
        else cp_async_commit();
    }
    grid_barrier(arrivals, base + 3 * G);

    // ---- 3. down, weighted over the slots, added to h
    pdl_trigger();
    stage_act(s, act);
    // column c's sum over the slots: its routed rows at routed(slot), the shared one at sh
    // (shared or global memory)
    auto down_sum = [&](auto routed, const unsigned char* sh) {
        float acc = 0.f;
#pragma unroll
        for (int slot = 0; slot < SLOTS; slot++) {
            float a[16];
            load16(&s.act[slot][lane * 16], a);
            float part;
            if (slot < TOP_K) {
                part = down_lane_dot_q<DN>(routed(slot), lane, a);
            } else if (shared_rows) {
                part = down_lane_dot_q<DN>(sh, lane, a);
            } else {
                const bf16* w = reinterpret_cast<const bf16*>(sh) + lane * 16;
                part = dot8(*reinterpret_cast<const uint4*>(w), a) + dot8(*reinterpret_cast<const uint4*>(w + 8), a + 8);
            }
            acc += s.weights[slot] * part;
        }
        return warp_sum(acc);
    };
    if (c < HIDDEN) {
        cp_async_wait<0>();
        __syncwarp();
        const float acc = down_sum([&](int slot) -> const unsigned char* { return ring + slot * DOWN_ROW; }, first_shared);
        if (lane == 0) h[c] = hc + acc;
    }
    // (WIDE: the warp's later columns, their rows from global memory)
    for (int c2 = c + W; WIDE && c2 < HIDDEN; c2 += W) {
        const unsigned char* sh = shared_rows ? down + ((size_t)SHARED_EXPERT * HIDDEN + c2) * DOWN_ROW
                                              : reinterpret_cast<const unsigned char*>(shared_down + (size_t)c2 * EXPERT_DIM);
        const float acc = down_sum(
            [&](int slot) -> const unsigned char* { return down + ((size_t)s.ids[slot] * HIDDEN + c2) * DOWN_ROW; }, sh);
        if (lane == 0) h[c2] = __ldcg(h + c2) + acc;
    }
}

// The fused kernel's instances: int4 (GPTQ, AWQ, compressed-tensors), and the (gate and up, down)
// formats llama.cpp's k-quant mixes give: Q4_K_M (Q4_K, Q4_K or Q6_K), Q4_K_S (Q4_K, Q4_K or
// Q5_K), Q5_K_M (Q5_K, Q5_K or Q6_K), Q5_K_S (Q5_K, Q5_K), Q6_K (Q6_K, Q6_K), Q8_0 (Q8_0, Q8_0).
// (each instance written out: kernels.rs checks the launchers against these signatures as written)
extern "C" __global__ void __maxnreg__(96) moe_decode_block_int4(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Int4Format, Int4Format, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q4k_q4k(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q4KFormat, Q4KFormat, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q4k_q5k(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q4KFormat, Q5KFormat, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q4k_q6k(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q4KFormat, Q6KFormat, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q5k_q5k(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q5KFormat, Q5KFormat, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q5k_q6k(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q5KFormat, Q6KFormat, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q6k_q6k(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q6KFormat, Q6KFormat, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(96) moe_decode_block_q8_0_q8_0(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q8Format, Q8Format, false>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}

// The same for a grid of fewer than 2048 warps (one block an SM: the consumer cards; no PDL
// there, so no kernel before it to leave registers for).
extern "C" __global__ void __maxnreg__(128) moe_decode_block_int4_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Int4Format, Int4Format, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q4k_q4k_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q4KFormat, Q4KFormat, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q4k_q5k_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q4KFormat, Q5KFormat, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q4k_q6k_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q4KFormat, Q6KFormat, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q5k_q5k_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q5KFormat, Q5KFormat, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q5k_q6k_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q5KFormat, Q6KFormat, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q6k_q6k_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q6KFormat, Q6KFormat, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
extern "C" __global__ void __maxnreg__(128) moe_decode_block_q8_0_q8_0_wide(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared, Q8Format, Q8Format, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}

// The int4 form with 16 warps a block (MoeDecodeShared16; one block an SM of the consumer cards):
// twice the warps of moe_decode_block_int4_wide to hide the rows' round trips and the
// dequantisation, each with half the columns.
extern "C" __global__ void __launch_bounds__(512, 1) moe_decode_block_int4_wide16(
        const bf16* __restrict__ w_o, const bf16* __restrict__ y, const bf16* __restrict__ router,
        const unsigned char* __restrict__ gate_up, const unsigned char* __restrict__ down,
        const bf16* __restrict__ shared_gate_up, const bf16* __restrict__ shared_down, float* __restrict__ h,
        const float* __restrict__ w1p, float eps, float* __restrict__ logits, float* __restrict__ act,
        unsigned long long* __restrict__ arrivals, int w_o_rows, int y_tile_r, int shared_rows) {
    moe_decode_block_q<MoeDecodeShared16, Int4Format, Int4Format, true>(w_o, y, router, gate_up, down, shared_gate_up, shared_down, h, w1p, eps, logits, act, arrivals, w_o_rows, y_tile_r, shared_rows);
}
