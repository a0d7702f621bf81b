// MoE routing (the formulas: crates/cpu/src/moe.rs): softmax over 256 experts, top-8, renormalise; the shared
// expert's sigmoid gate; and, for prefill, grouping the (token, expert) pairs by expert on the
// device (counting sort) so the grouped GEMMs in moe_experts.cu can run without a host readback.
// The slots and `route_token` (one token's routing) are in common.cuh: moe_decode.cu routes too.

// Rows per grouped-GEMM tile: must equal GEMM_BM in moe_experts.cu and TILE_ROWS in moe.rs.
#define GEMM_BM 128

// Prefill: one warp (block) per token. logits [T, ROUTER_ROWS] f32 (the router product), ids
// [T, 9] i32, weights [T, 9] f32, counts as in route_token.
extern "C" __global__ void __launch_bounds__(32)
    moe_route(const float* __restrict__ logits, int T, int* __restrict__ ids, float* __restrict__ weights,
              int* __restrict__ counts) {
    pdl_wait();
    const int t = blockIdx.x;
    if (t >= T) return;
    route_token(logits + (size_t)t * ROUTER_ROWS, ids + t * SLOTS, weights + t * SLOTS, counts);
}

// Decode, the whole router in one kernel, for `gridDim.y` ≤ 8 tokens (1 in the decode step's
// four-kernel form, more in the multi-token step): block row y takes token y, logits[y] = router ·
// RMSNorm(h[y]) (GemvTile: 16 rows per block, 17 blocks for the 257 rows, each block normalising
// h[y] itself), block (0, y) also writes the normalised x[y] for the expert kernels, and the last
// block of the grid to finish (a ticket counter, left at 0 again) routes every token (warp t,
// token t): ids [t, 9], weights [t, 9].
//   router bf16 [257, 2048]; h f32 [tokens, 2048]; w1p f32 [2048] (post-attention norm, 1 + w);
//   logits f32 [tokens, 257] (scratch); x bf16 [tokens, 2048]; ticket i32 [1], zero between launches.
extern "C" __global__ void __launch_bounds__(256)
    moe_route_decode(const bf16* __restrict__ router, const float* __restrict__ h, const float* __restrict__ w1p,
                     float eps, float* __restrict__ logits, bf16* __restrict__ x, int* __restrict__ ids,
                     float* __restrict__ weights, int* __restrict__ ticket) {
    __shared__ __align__(16) float xs[HIDDEN];
    __shared__ float red[32];
    __shared__ bool last;
    const int t = blockIdx.y, tokens = gridDim.y;
    GemvTile<HIDDEN> tile;
    tile.load(router, ROUTER_ROWS);
    pdl_wait();
    stage_rms_norm(h + (size_t)t * HIDDEN, w1p, eps, xs, red);
    if (blockIdx.x == 0)  // exact: xs is bf16-rounded
        for (int i = threadIdx.x; i < HIDDEN; i += blockDim.x) x[(size_t)t * HIDDEN + i] = __float2bfloat16(xs[i]);
#pragma unroll
    for (int r = 0; r < GemvTile<HIDDEN>::ROWS_PER_WARP; r++) {
        const float v = tile.dot(r, xs);
        if ((threadIdx.x & 31) == 0 && tile.row(r) < ROUTER_ROWS) logits[t * ROUTER_ROWS + tile.row(r)] = v;
    }
    // The last block in sees every block's logits: each publishes its writes before taking a ticket.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(ticket, 1) == gridDim.x * gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    pdl_trigger();
    const int warp = threadIdx.x >> 5;
    if (warp < tokens) route_token(logits + warp * ROUTER_ROWS, ids + warp * SLOTS, weights + warp * SLOTS, nullptr);
    if (threadIdx.x == 0) *ticket = 0;
}

// One block of 288 threads (9 warps >= 257 experts). From the routed counts (the shared expert
// has all T tokens) builds the grouping:
//   offsets[e]: first row of expert e in the permuted order (rows = (token, slot) pairs);
//   cursor[e] = offsets[e] (moe_permute's fill pointers);
//   tiles[i] = (expert, first row, end row, 0) for every GEMM_BM-row tile of every expert;
//   *total_tiles: how many (the grouped GEMMs' grids are sized for the worst case, the rest exit).
extern "C" __global__ void __launch_bounds__(288)
    moe_plan(const int* __restrict__ counts, int T, int* __restrict__ offsets, int* __restrict__ cursor,
             int4* __restrict__ tiles, int* __restrict__ total_tiles) {
    pdl_wait();
    __shared__ int cnt[288], ntile[288], row_off[288], tile_off[288];
    const int e = threadIdx.x, lane = e & 31;
    const int c = e < EXPERTS ? counts[e] : (e == SHARED_EXPERT ? T : 0);
    cnt[e] = c;
    ntile[e] = (c + GEMM_BM - 1) / GEMM_BM;
    __syncthreads();
    if (e < 32) {  // each lane scans 9 consecutive experts, then a warp scan across lanes
        const int base = lane * 9;
        int rows = 0, tl = 0;
#pragma unroll
        for (int i = 0; i < 9; i++) {
            rows += cnt[base + i];
            tl += ntile[base + i];
        }
        int ir = rows, it = tl;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int a = __shfl_up_sync(0xffffffffu, ir, o), b = __shfl_up_sync(0xffffffffu, it, o);
            if (lane >= o) {
                ir += a;
                it += b;
            }
        }
        int er = ir - rows, et = it - tl;
#pragma unroll
        for (int i = 0; i < 9; i++) {
            row_off[base + i] = er;
            tile_off[base + i] = et;
            er += cnt[base + i];
            et += ntile[base + i];
        }
        if (lane == 31) *total_tiles = et;
    }
    __syncthreads();
    if (e <= SHARED_EXPERT) {
        offsets[e] = row_off[e];
        cursor[e] = row_off[e];
        const int end = row_off[e] + cnt[e];
        for (int j = 0; j < ntile[e]; j++) {
            const int r0 = row_off[e] + j * GEMM_BM;
            tiles[tile_off[e] + j] = make_int4(e, r0, min(r0 + GEMM_BM, end), 0);
        }
    }
}

// One thread per (token, slot) pair a = t*9 + k: perm[row] = a, grouped by expert. Routed pairs
// take the next row of their expert (atomic; the order within an expert does not change any
// result), the shared expert's rows are in token order.
extern "C" __global__ void moe_permute(const int* __restrict__ ids, int T, const int* __restrict__ offsets,
                                       int* __restrict__ cursor, int* __restrict__ perm) {
    pdl_wait();
    const int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= T * SLOTS) return;
    const int t = a / SLOTS, k = a % SLOTS;
    const int row = k == TOP_K ? offsets[SHARED_EXPERT] + t : atomicAdd(&cursor[ids[a]], 1);
    perm[row] = a;
}
