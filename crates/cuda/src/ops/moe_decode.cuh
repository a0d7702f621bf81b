// What the MoE kernels of moe_decode.cu (the fused decode step's) and moe_gemv_q.cu (their
// four-kernel form) share: the fused kernel's shared memory and grid barrier, and the expert rows'
// copies and dots (bf16, and the 4- to 8-bit row formats of common.cuh).

#define MOE_WARPS 8
#define PAIRS (EXPERT_DIM)             // (gate, up) row pairs per expert
#define TOTAL_PAIRS (SLOTS * PAIRS)  // 4608

struct MoeDecodeShared {
    bf16 ring[MOE_WARPS][2][HIDDEN];            // per warp 2 rows of 4 KB (phase 0: its W_o row; 3: its 8 down rows)
    bf16 shared_down[MOE_WARPS][EXPERT_DIM];    // the shared expert's down row of the warp's column
    float xs[HIDDEN];                           // x = RMSNorm(h), bf16-rounded (phase 0: y, bf16 [4096])
    float act[SLOTS][EXPERT_DIM];               // phase 3 (phase 1: warp 0's router row)
    float red[32];
    int ids[SLOTS];
    float weights[SLOTS];
};
static_assert(sizeof(MoeDecodeShared) == 100552, "MOE_DECODE_SHARED in moe.rs");

// moe_decode_block_int4_wide16's (16 warps a block, one block an SM on the consumer cards): a
// 4 KB ring a warp (phase 2: 3 int4 gate/up rows; phase 3: its column's 8 routed down rows and
// the shared one); W_o's rows and the shared (gate, up) pairs are read from global memory.
struct MoeDecodeShared16 {
    bf16 ring[2 * MOE_WARPS][1][HIDDEN];
    float xs[HIDDEN];
    float act[SLOTS][EXPERT_DIM];
    float red[32];
    int ids[SLOTS];
    float weights[SLOTS];
};
static_assert(sizeof(MoeDecodeShared16) == 92360, "MOE_DECODE_SHARED_16 in moe.rs");

// A block's warps, from its shared memory's layout.
template <typename S>
__host__ __device__ constexpr int shared_warps() {
    return sizeof(S::ring) / sizeof(S::ring[0]);
}

// Phase 3's act [9, 512] (f32, global, written by every block before the barrier) into shared
// memory: every load in flight at once (a rolled loop pays an L2 trip a step). Ends synced.
template <typename S>
__device__ __forceinline__ void stage_act(S& s, const float* __restrict__ act) {
    constexpr int T = 32 * shared_warps<S>(), N = SLOTS * EXPERT_DIM / 4, PER = (N + T - 1) / T;
    float4 v[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const int i = threadIdx.x + k * T;
        if (i < N) v[k] = __ldcg(reinterpret_cast<const float4*>(act) + i);
    }
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const int i = threadIdx.x + k * T;
        if (i < N) reinterpret_cast<float4*>(&s.act[0][0])[i] = v[k];
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

// A row of `bytes` (a multiple of 16) into `dst` (shared), one commit group: lane l copies the
// pieces l, l + 32, ...
template <int BYTES>
__device__ __forceinline__ void request_row_bytes(unsigned char* dst, const unsigned char* __restrict__ src) {
    const int lane = threadIdx.x & 31;
    constexpr int P = BYTES / 16;
#pragma unroll
    for (int k = 0; k < (P + 31) / 32; k++) {
        const int p = lane + 32 * k;
        if (p < P) cp_async16(dst + p * 16, src + p * 16, true);
    }
    cp_async_commit();
}

// A lane's piece of a down row · act: its 16 columns (lane · 16 ..) of `row` (landed, the warp
// synced) times a, the slot's activations at those columns (f32). The caller sums the lanes.
template <typename F>
__device__ __forceinline__ float down_lane_dot_q(const unsigned char* row, int lane, const float (&a)[16]) {
    __half2 ah[8];
    to_x16(a, ah);
    float asum = 0.f;
#pragma unroll
    for (int i = 0; i < 16; i++) asum += a[i];
    return format_dot<F, 2>(row, EXPERT_DIM, lane * 16, ah, asum);
}

// A gate or up row (landed, and the warp synced) · x.
template <typename F>
__device__ __forceinline__ float expert_row_dot_q(const unsigned char* row, const LaneX4& x) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) acc += format_dot<F, 4>(row, HIDDEN, j * 1024 + lane * 32, x.v[j], x.sum[j]);
    return warp_sum(acc);
}

template <typename F>
__device__ __forceinline__ const unsigned char* gate_row_q(const unsigned char* gate_up, int expert, int i) {
    return gate_up + ((size_t)expert * 2 * EXPERT_DIM + i) * F::row_bytes(HIDDEN);
}


// The 8 routed down rows of column c (ids: the slots' experts) into `rows` (8 rows of
// DN::row_bytes(512)), one commit group.
template <typename DN>
__device__ __forceinline__ void request_down_rows(unsigned char* rows, const unsigned char* __restrict__ down,
                                                  const int* ids, int c) {
    constexpr int ROW = DN::row_bytes(EXPERT_DIM), P = ROW / 16;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < (TOP_K * P + 31) / 32; m++) {
        const int q = lane + 32 * m, slot = q / P, piece = q % P;
        if (q < TOP_K * P) cp_async16(rows + slot * ROW + piece * 16, down + ((size_t)ids[slot] * HIDDEN + c) * ROW + piece * 16, true);
    }
    cp_async_commit();
}
