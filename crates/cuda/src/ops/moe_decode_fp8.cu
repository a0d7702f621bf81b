// The decode step's fused MoE kernel for FP8 weights (moe_decode.cu's moe_decode_block, in the FP8
// checkpoint's format; its helpers in moe_decode.cuh).
//
// moe_decode_block_fp8: the same kernel for FP8 weights (e4m3 with f32 scales per 128×128 block,
// w = q · s): W_o e4m3 [2048, 4096] with scales [16, 32]; gate_up e4m3 [257, 1024, 2048] with
// scales [257, 8, 16] (per expert 4 block rows of gate, then 4 of up); down e4m3 [257, 2048, 512]
// with scales [257, 16, 4]. The router stays bf16. Same phases, barriers and work split as
// moe_decode_block; what differs is the row format: lane l owns the 16-byte pieces
// j·512 + 16·l (16 weights each, inside one 128-column block whose scale multiplies the piece's
// dot), and a gate/up row is 2 KB, so phase 2 keeps 4 rows in flight per warp (8 KB, as the bf16
// form's 2).

// This lane's x values for FP8 rows of HIDDEN: columns j·512 + 16·lane .. +16.
struct LaneX8 {
    __half2 v[HIDDEN / 512][8];
    __device__ __forceinline__ void load(const float* xs) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int j = 0; j < HIDDEN / 512; j++) {
            float f[16];
            load16(xs + j * 512 + lane * 16, f);
            to_x16(f, v[j]);
        }
    }
};

// An FP8 row of HIDDEN (`bytes`, shared, 2 KB) into `dst`, one commit group: lane l copies pieces j·512 + 16l.
__device__ __forceinline__ void request_row_fp8(unsigned char* dst, const unsigned char* __restrict__ src) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < HIDDEN / 512; j++) cp_async16(dst + j * 512 + lane * 16, src + j * 512 + lane * 16, true);
    cp_async_commit();
}

// A gate or up FP8 row (as request_row_fp8 left it) · x; `scale_row` is the row's 16 block scales.
__device__ __forceinline__ float expert_row_dot_fp8(const unsigned char* row, const float* __restrict__ scale_row,
                                                    const LaneX8& x) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < HIDDEN / 512; j++)
        acc += __ldg(scale_row + 4 * j + (lane >> 3)) *
               dot16_fp8(*reinterpret_cast<const uint4*>(row + j * 512 + lane * 16), x.v[j]);
    return warp_sum(acc) * FP8_X_UNSCALE;
}

__device__ __forceinline__ const unsigned char* gate_row_fp8(const unsigned char* gate_up, int expert, int i) {
    return gate_up + ((size_t)expert * 2 * EXPERT_DIM + i) * HIDDEN;
}
// The 16 scales of gate/up row i (0..1023: gate rows, then up rows) of an expert.
__device__ __forceinline__ const float* gate_scales(const float* s, int expert, int i) {
    return s + ((size_t)expert * (2 * EXPERT_DIM / 128) + i / 128) * (HIDDEN / 128);
}

#define FP8_RING 4  // gate/up rows in flight per warp in phase 2

extern "C" __global__ void __maxnreg__(96)
    moe_decode_block_fp8(const unsigned char* __restrict__ w_o, const float* __restrict__ w_o_scales,
                         const bf16* __restrict__ y, const bf16* __restrict__ router,
                         const unsigned char* __restrict__ gate_up, const float* __restrict__ gate_up_scales,
                         const unsigned char* __restrict__ down, const float* __restrict__ down_scales,
                         float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ logits,
                         float* __restrict__ act, unsigned long long* __restrict__ arrivals) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    MoeDecodeShared& s = *reinterpret_cast<MoeDecodeShared*>(smem_raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int G = gridDim.x, W = G * MOE_WARPS, gw = blockIdx.x * MOE_WARPS + warp;
    const int c = gw;  // this warp's output column (phases 0 and 3), if < HIDDEN
    unsigned char* ring = reinterpret_cast<unsigned char*>(s.ring[warp][0]);  // 8 KB: FP8_RING rows of 2 KB
    unsigned char* shared_down = reinterpret_cast<unsigned char*>(s.shared_down[warp]);  // 512 bytes used

    // ---- 0. weights first: W_o's row c (4 KB), the router row (bf16, warp 0 of block b < 257),
    // the shared expert's down row of column c (512 bytes).
    if (c < HIDDEN) {
#pragma unroll
        for (int j = 0; j < MIXER_OUT / 512; j++)
            cp_async16(ring + j * 512 + lane * 16, w_o + (size_t)c * MIXER_OUT + j * 512 + lane * 16, true);
    }
    cp_async_commit();
    bf16* router_row = reinterpret_cast<bf16*>(&s.act[0][0]);
    if (warp == 0 && blockIdx.x < ROUTER_ROWS) request_row(router_row, router + (size_t)blockIdx.x * HIDDEN);
    else cp_async_commit();
    if (c < HIDDEN)
        cp_async16(shared_down + lane * 16, down + ((size_t)SHARED_EXPERT * HIDDEN + c) * EXPERT_DIM + lane * 16, true);
    cp_async_commit();
    float wo_s[MIXER_OUT / 512];  // W_o row c's scales for this lane's pieces
    if (c < HIDDEN) {
#pragma unroll
        for (int j = 0; j < MIXER_OUT / 512; j++) wo_s[j] = __ldg(w_o_scales + (c / 128) * (MIXER_OUT / 128) + 4 * j + (lane >> 3));
    }
    pdl_wait();
    const unsigned long long base = launch_base(arrivals, G);
    float hc = 0.f;
    {
        uint4* ys = reinterpret_cast<uint4*>(s.xs);
        const uint4 y0 = __ldcg(reinterpret_cast<const uint4*>(y) + threadIdx.x);
        const uint4 y1 = __ldcg(reinterpret_cast<const uint4*>(y) + threadIdx.x + 256);
        const float old = c < HIDDEN && lane == 0 ? __ldcg(h + c) : 0.f;
        ys[threadIdx.x] = y0;
        ys[threadIdx.x + 256] = y1;
        __syncthreads();
        if (c < HIDDEN) {
            cp_async_wait<2>();  // W_o's row
            float acc = 0.f;
#pragma unroll
            for (int j = 0; j < MIXER_OUT / 512; j++) {
                float yv[16];
                unpack8(ys[j * 64 + 2 * lane], yv);
                unpack8(ys[j * 64 + 2 * lane + 1], yv + 8);
                __half2 yh[8];
                to_x16(yv, yh);
                acc += wo_s[j] * dot16_fp8(*reinterpret_cast<const uint4*>(ring + j * 512 + lane * 16), yh);
            }
            hc = old + warp_sum(acc) * FP8_X_UNSCALE;
            if (lane == 0) h[c] = hc;
        }
    }
    const bool shared_first = gw < PAIRS;
    if (shared_first) {
        request_row_fp8(ring, gate_row_fp8(gate_up, SHARED_EXPERT, gw));
        request_row_fp8(ring + HIDDEN, gate_row_fp8(gate_up, SHARED_EXPERT, gw + EXPERT_DIM));
    }
    grid_barrier(arrivals, base + G);

    // ---- 1. router logits; the shared expert's (gate, up) pair while the barrier completes.
    stage_rms_norm(h, w1p, eps, s.xs, s.red);
    if (warp == 0 && blockIdx.x < ROUTER_ROWS) {
        cp_async_wait_pending(shared_first ? 2 : 0);
        const float v = router_row_dot(router_row, s.xs);
        if (lane == 0) logits[blockIdx.x] = v;
    }
    grid_arrive(arrivals);
    const int n = 2 * ((TOTAL_PAIRS - 1 - gw) / W + 1);
    if (shared_first) {
        LaneX8 x;
        x.load(s.xs);
        cp_async_wait<0>();
        const float g = expert_row_dot_fp8(ring, gate_scales(gate_up_scales, SHARED_EXPERT, gw), x);
        const float u = expert_row_dot_fp8(ring + HIDDEN, gate_scales(gate_up_scales, SHARED_EXPERT, gw + EXPERT_DIM), x);
        if (lane == 0) act[TOP_K * EXPERT_DIM + gw] = silu(g) * u;
    }
    grid_wait(arrivals, base + 2 * G);

    // ---- 2. the routed experts' gate/up, FP8_RING rows in flight
    if (warp == 0) route_token(logits, s.ids, s.weights, nullptr);
    __syncthreads();
    {
        // row k of this warp: pair gw + (k >> 1)·W past the shared ones, gate (k even) or up
        auto expert_of = [&](int k) { return s.ids[(gw + (k >> 1) * W - PAIRS) / PAIRS]; };
        auto index_of = [&](int k) { return (gw + (k >> 1) * W - PAIRS) % PAIRS + (k & 1) * EXPERT_DIM; };
        const int k0 = shared_first ? 2 : 0;
#pragma unroll
        for (int q = 0; q < FP8_RING; q++) {
            if (k0 + q < n) request_row_fp8(ring + q * HIDDEN, gate_row_fp8(gate_up, expert_of(k0 + q), index_of(k0 + q)));
            else cp_async_commit();
        }
        LaneX8 x;
        x.load(s.xs);
        float g = 0.f;
        for (int k = k0; k < n; k++) {
            cp_async_wait<FP8_RING - 1>();  // row k has landed
            unsigned char* slot_k = ring + ((k - k0) & (FP8_RING - 1)) * HIDDEN;
            const float v = expert_row_dot_fp8(slot_k, gate_scales(gate_up_scales, expert_of(k), index_of(k)), x);
            if (k + FP8_RING < n)
                request_row_fp8(slot_k, gate_row_fp8(gate_up, expert_of(k + FP8_RING), index_of(k + FP8_RING)));
            else cp_async_commit();
            if (k & 1) {
                if (lane == 0) act[gw + (k >> 1) * W - PAIRS] = silu(g) * v;
            } else {
                g = v;
            }
        }
    }
    // Phase 3's routed down rows (512 bytes each), in flight through the barrier.
    float down_s[SLOTS];
    if (c < HIDDEN) {
#pragma unroll
        for (int slot = 0; slot < TOP_K; slot++) {
            cp_async16(ring + slot * EXPERT_DIM + lane * 16,
                       down + ((size_t)s.ids[slot] * HIDDEN + c) * EXPERT_DIM + lane * 16, true);
        }
#pragma unroll
        for (int slot = 0; slot < SLOTS; slot++) {
            const int e = slot < TOP_K ? s.ids[slot] : SHARED_EXPERT;
            down_s[slot] = __ldg(down_scales + ((size_t)e * (HIDDEN / 128) + c / 128) * (EXPERT_DIM / 128) + (lane >> 3));
        }
    }
    cp_async_commit();
    grid_barrier(arrivals, base + 3 * G);

    // ---- 3. down, weighted over the slots, added to h
    pdl_trigger();
    stage_act(s, act);
    if (c < HIDDEN) {
        cp_async_wait<0>();
        float acc = 0.f;
#pragma unroll
        for (int slot = 0; slot < SLOTS; slot++) {
            const unsigned char* w = slot < TOP_K ? ring + slot * EXPERT_DIM : shared_down;
            float a[16];
            load16(&s.act[slot][lane * 16], a);
            __half2 ah[8];
            to_x16(a, ah);
            acc += s.weights[slot] * (down_s[slot] * dot16_fp8(*reinterpret_cast<const uint4*>(w + lane * 16), ah));
        }
        acc = warp_sum(acc) * FP8_X_UNSCALE;
        if (lane == 0) h[c] = hc + acc;
    }
}
