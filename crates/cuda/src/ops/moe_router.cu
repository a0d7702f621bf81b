// MoE routing (model-spec §3.3): softmax over 256 experts, top-8, renormalise; the shared
// expert's sigmoid gate; and, for prefill, grouping the (token, expert) pairs by expert on the
// device (counting sort) so the grouped GEMMs in moe_experts.cu can run without a host readback.
//
// Every token gets SLOTS = 9 (expert, weight) pairs: 8 routed, then the shared expert (index 256
// in the fused expert tensors) with weight sigmoid(x . w_sg).

#define SLOTS (TOP_K + 1)
#define SHARED_EXPERT EXPERTS
// Rows per grouped-GEMM tile: must equal GEMM_BM in moe_experts.cu and TILE_ROWS in moe.rs.
#define GEMM_BM 64

// One block per token, one thread per expert.
//   logits [T, 256] f32 (router output); x [T, 2048] bf16; w_sg [2048] bf16 (shared_expert_gate)
//   ids [T, 9] i32, weights [T, 9] f32; counts [257] i32 or null: per-expert token counts are
//   added to it (prefill grouping; the caller zeroes it).
// Top-8 is taken over the softmax probabilities, ties to the lower expert index, and the kept
// probabilities are summed in selection order: exactly solo_cpu::moe::route.
extern "C" __global__ void __launch_bounds__(EXPERTS)
    moe_route(const float* __restrict__ logits, const bf16* __restrict__ x, const bf16* __restrict__ w_sg, int T,
              int* __restrict__ ids, float* __restrict__ weights, int* __restrict__ counts) {
    pdl_trigger();
    pdl_wait();
    __shared__ float red[32];
    __shared__ float p[EXPERTS];
    const int t = blockIdx.x, e = threadIdx.x, lane = e & 31, warp = e >> 5;
    if (t >= T) return;

    const float lg = logits[(size_t)t * EXPERTS + e];
    float mx = warp_max(lg);
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = red[0];
#pragma unroll
    for (int i = 1; i < EXPERTS / 32; i++) mx = fmaxf(mx, red[i]);
    const float ex = expf(lg - mx);
    const float sum = block_sum(ex, red);  // starts with a barrier: red[] reads above are done
    p[e] = ex / sum;

    float xv[8], wv[8];
    load8(x + (size_t)t * HIDDEN + e * 8, xv);
    load8(w_sg + e * 8, wv);
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) dot += xv[i] * wv[i];
    const float sg = block_sum(dot, red);  // its barriers also publish p[]

    if (warp == 0) {
        float v[EXPERTS / 32];
#pragma unroll
        for (int i = 0; i < EXPERTS / 32; i++) v[i] = p[lane + 32 * i];
        float sel_w[TOP_K];
        int sel_e[TOP_K];
#pragma unroll
        for (int k = 0; k < TOP_K; k++) {
            float bv = -1.f;  // below every probability; taken entries are set to it
            int bi = 0x7fffffff;
#pragma unroll
            for (int i = 0; i < EXPERTS / 32; i++) {
                if (v[i] > bv) {  // ascending index within the lane: ties keep the lower one
                    bv = v[i];
                    bi = lane + 32 * i;
                }
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
                const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (ov > bv || (ov == bv && oi < bi)) {
                    bv = ov;
                    bi = oi;
                }
            }
#pragma unroll
            for (int i = 0; i < EXPERTS / 32; i++)
                if (bi == lane + 32 * i) v[i] = -1.f;
            sel_w[k] = bv;
            sel_e[k] = bi;
        }
        float total = 0.f;
#pragma unroll
        for (int k = 0; k < TOP_K; k++) total += sel_w[k];
#pragma unroll
        for (int k = 0; k < TOP_K; k++) {
            if (lane == k) {
                ids[(size_t)t * SLOTS + k] = sel_e[k];
                weights[(size_t)t * SLOTS + k] = sel_w[k] / total;
                if (counts) atomicAdd(&counts[sel_e[k]], 1);
            }
        }
        if (lane == 0) {
            ids[(size_t)t * SLOTS + TOP_K] = SHARED_EXPERT;
            weights[(size_t)t * SLOTS + TOP_K] = 1.f / (1.f + expf(-sg));
        }
    }
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
    pdl_trigger();
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
    pdl_trigger();
    pdl_wait();
    const int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= T * SLOTS) return;
    const int t = a / SLOTS, k = a % SLOTS;
    const int row = k == TOP_K ? offsets[SHARED_EXPERT] + t : atomicAdd(&cursor[ids[a]], 1);
    perm[row] = a;
}
