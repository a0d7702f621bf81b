// The greedy decode step's lm_head: the exact argmax of logits = W · RMSNorm(h) over the
// vocabulary (W bf16 [rows, 2048]), reading an int8 copy of W (half the bytes) plus the few
// bf16 rows that could hold the maximum.
//
// Why the result is exact. For every row j the screen computes an estimate a_j from the int8
// copy and a bound b_j with |logit_j − a_j| ≤ b_j, logit_j being what gemv_norm_bf16 computes
// for row j, its f32 rounding included. T = max_j (a_j − b_j) is at most the largest logit. A row
// with a_j + b_j < T lies below that logit, so it is neither the argmax nor tied with it. The
// rescore computes the exact logit of every other row (the candidates) with gemv_norm_bf16's
// expression in its order, so the same bits, and takes their argmax, lowest index on ties: the
// argmax of the full logits.
//
// The int8 copy (lm_head_screen_prepare, once at load), per row j:
//   s_j = max|w_j| / 127, q_j = round(w_j / s_j) in [−127, 127],
//   c_j = ‖w_j − s_j q_j‖₂ + 1e-4 ‖w_j‖₂ (rounded up): the copy's error, plus a margin for the
//         exact dot's f32 rounding that is ~100× its worst case (≤ ~20 roundings of 2⁻²⁴ each on
//         Σ|w_i x_i| ≤ ‖w‖₂‖x‖₂);
//   C2 = max_j s_j ‖q_j‖₂ (one number for the whole matrix).
// Each step (lm_head_screen): x = bf16(RMSNorm(h)) exactly as gemv_norm_bf16 stages it, written
// in 16-bit fixed point p_i = round(x_i / sx), sx = max|x| / 32512, and split into two int8
// digits p = 256·hi + lo. S_j = Σ q_ji p_i is an exact integer (dp4a), a_j = s_j · sx · S_j, and
//   |logit_j − a_j| ≤ c_j ‖x_I‖₂ + 0.52 s_j ‖x_O‖₁ + s_j ‖q_j‖₂ ‖x − sx·p‖₂ + (4 roundings of a_j)
//                   ≤ c_j ‖x_I‖₂ + 0.52 s_j ‖x_O‖₁ + C2 ‖x − sx·p‖₂ + 1e-6 |a_j| = b_j
// by Cauchy–Schwarz, where O are x's outlier columns (|x_i| > 6 rms(x); hidden states can have a
// few huge ones, and ‖x‖₂ would then loosen every row's bound) and I the others: on O, each
// |w_i − s_j q_i| ≤ s_j / 2 (+ f32 slack), and the exact dot's rounding margin is 1e-4 |w_i| ≤
// 0.013 s_j per unit of |x_i| (|w_i| ≤ 127 s_j). The norms of x are taken 1e-4 high to cover their own
// rounding.
//
// Geometry: both kernels 2 × SMs blocks of 256 threads. The screen streams rows like the bf16
// GEMVs (gemv.cu): warp g of G takes the row pairs g, g + G, ... (4 KB each, the bf16 GEMVs'
// request), two in flight in its own ring (copy engine) with the rows' (s_j, c_j); dynamic shared
// memory 72.25 KB. The rescore gives each warp a run of rows: it reads their upper bounds
// a_j + b_j, and fetches and multiplies the candidates' bf16 rows; its last block (by ticket)
// writes the token and zeroes the words for the next step.
//
// The sampled step's variant (lm_head_rescore_topk) needs the top k logits (k ≤ 64, the sampler's
// top_k) instead of the maximum. The screen also leaves each block's max_j (a_j − b_j) in
// block_keys; these are lower bounds of distinct rows' logits, so with T_k the k-th largest of
// them at least k rows have a logit ≥ T_k, and a row with a_j + b_j < T_k lies below all k: not
// among the top k, ties included. The rescore writes every other row's exact logit (as above)
// and −∞ for the rest, so the sampler (sample_topk.cu) over that row finds the top k of the full
// logits, bit for bit.
//
// words (u32 [8], zero at allocation): [0] T as an ordered key, [1] the rescore's ticket,
// [2] candidates counted this step, [3] the previous step's candidate count, [4..6) the best
// (exact logit, row) as a u64 key, [6] C2's bits.

#define SCREEN_WARPS 8
#define SCREEN_ROWS 2                          // consecutive rows per request: 4 KB, as in gemv.cu
#define SCREEN_DEPTH 2                         // requests in flight per warp
#define SCREEN_PIECES (HIDDEN / (32 * 16))     // 16-byte pieces per lane and row: 4
#define FIXED_POINT_MAX 32512.f                // |p| ≤ 127 · 256, so hi fits in an int8
#define OUTLIER_RMS 6.f                        // x_i beyond 6 rms(x) is an outlier (the set O)

// The copy engine (cp.async.bulk, completing on an mbarrier): the screen's rows arrive through
// it, one request per 4 KB (a step 0.4 % faster than with 16-byte cp.async from every lane,
// bench/RESULTS.md). Both are sm_90: the portable form copies 16 bytes from every lane.
#if SOLO_HOPPER
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
    } while (!done);
}
#endif

// Floats as u32 keys that order like the floats (for atomicMax); 0 is below every key.
__device__ __forceinline__ unsigned ordered_key(float f) {
    const unsigned b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// One warp per row: the int8 copy and its bounds (see the top). q int8 [rows, 2048],
// coef f32 [rows (padded to even), 2] = (s_j, c_j), words[6] = C2 (atomic max over the rows).
extern "C" __global__ void __launch_bounds__(256)
    lm_head_screen_prepare(const bf16* __restrict__ w, int rows, signed char* __restrict__ q,
                           float2* __restrict__ coef, unsigned* __restrict__ words) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= rows) return;
    float v[64];  // this lane's columns j·256 + lane·8 + k
#pragma unroll
    for (int j = 0; j < 8; j++) unpack8(*reinterpret_cast<const uint4*>(w + (size_t)row * HIDDEN + j * 256 + lane * 8), v + 8 * j);
    float amax = 0.f;
#pragma unroll
    for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(v[i]));
    amax = warp_max(amax);
    const float s = amax / 127.f;
    double rr = 0.0, ww = 0.0, qq = 0.0;  // ‖w − s·q‖², ‖w‖², ‖s·q‖², exact enough in f64
#pragma unroll
    for (int j = 0; j < 8; j++) {
        unsigned packed[2] = {0u, 0u};
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float x = v[8 * j + k];
            const int qi = amax > 0.f ? max(-127, min(127, __float2int_rn(x / s))) : 0;
            const double sq = (double)s * (double)qi, r = (double)x - sq;
            rr += r * r;
            ww += (double)x * x;
            qq += sq * sq;
            packed[k >> 2] |= ((unsigned)qi & 0xffu) << (8 * (k & 3));
        }
        *reinterpret_cast<uint2*>(q + (size_t)row * HIDDEN + j * 256 + lane * 8) = make_uint2(packed[0], packed[1]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        rr += __shfl_xor_sync(0xffffffffu, rr, o);
        ww += __shfl_xor_sync(0xffffffffu, ww, o);
        qq += __shfl_xor_sync(0xffffffffu, qq, o);
    }
    if (lane == 0) {
        const double c = (sqrt(rr) + 1e-4 * sqrt(ww)) * (1.0 + 1e-6);
        coef[row] = make_float2(s, __double2float_ru(c));
        atomicMax(words + 6, __float_as_uint(__double2float_ru(sqrt(qq) * (1.0 + 1e-6))));  // ≥ 0: bits order
    }
}

// The screen: upper[j] = a_j + b_j for every row, words[0] = max over the grid of a_j − b_j and
// block_keys[block] = the max over the block's rows (as ordered keys). h f32 [2048] the residual
// stream, w1p f32 [2048] the final norm.
extern "C" __global__ void __launch_bounds__(256)
    lm_head_screen(const signed char* __restrict__ q, const float2* __restrict__ coef, const float* __restrict__ h,
                   const float* __restrict__ w1p, float eps, int rows, float* __restrict__ upper,
                   unsigned* __restrict__ words, unsigned* __restrict__ block_keys) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    __shared__ unsigned block_key;
    constexpr int UNIT = SCREEN_ROWS * HIDDEN;  // bytes of one request
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool lead = lane == 0;
    signed char* ring = reinterpret_cast<signed char*>(smem) + warp * SCREEN_DEPTH * UNIT;  // [DEPTH][ROWS][2048]
    float* xs = reinterpret_cast<float*>(smem + SCREEN_WARPS * SCREEN_DEPTH * UNIT);      // f32 [2048]
    float2* cring = reinterpret_cast<float2*>(xs + HIDDEN) + warp * SCREEN_DEPTH * SCREEN_ROWS;  // [DEPTH][ROWS]
    const int units = (rows + SCREEN_ROWS - 1) / SCREEN_ROWS;
    const int first = blockIdx.x * SCREEN_WARPS + warp, stride = gridDim.x * SCREEN_WARPS;

    // Unit u (rows u·ROWS ..) into ring slot d by the copy engine, the rows' (s, c) into
    // cring[d] (coef is padded to whole units), both completing on bar[d]. The portable form:
    // every lane copies its 16-byte pieces, one commit group a request (empty past the end, so
    // that the group of slot d is always the older of the two in flight).
#if SOLO_HOPPER
    __shared__ unsigned long long bars[SCREEN_WARPS][SCREEN_DEPTH];
    unsigned long long* bar = bars[warp];
    if (lead)
        for (int d = 0; d < SCREEN_DEPTH; d++) mbar_init(bar + d);
    __syncwarp();
#endif
    auto request = [&](int u, int d) {
#if SOLO_HOPPER
        if (lead && u < units) {
            const unsigned bytes = (unsigned)min(SCREEN_ROWS, rows - u * SCREEN_ROWS) * HIDDEN;
            mbar_expect(bar + d, bytes + 16);
            bulk_copy(ring + d * UNIT, q + (size_t)u * UNIT, bytes, bar + d);
            bulk_copy(cring + d * SCREEN_ROWS, coef + u * SCREEN_ROWS, 16, bar + d);
        }
#else
        if (u < units) {
            const int pieces = min(SCREEN_ROWS, rows - u * SCREEN_ROWS) * HIDDEN / 16;
            for (int p = lane; p < pieces; p += 32) cp_async16(ring + d * UNIT + p * 16, q + (size_t)u * UNIT + p * 16, true);
            if (lead) cp_async16(cring + d * SCREEN_ROWS, coef + u * SCREEN_ROWS, true);
        }
        cp_async_commit();
#endif
    };
    // Slot d's (fill)-th request has landed, for the whole warp.
    auto wait_slot = [&](int d, int fill) {
#if SOLO_HOPPER
        mbar_wait(bar + d, fill & 1);
#else
        cp_async_wait<SCREEN_DEPTH - 1>();
        __syncwarp();
#endif
    };
#pragma unroll
    for (int d = 0; d < SCREEN_DEPTH; d++) request(first + d * stride, d);
    pdl_wait();
    pdl_trigger();
    if (threadIdx.x == 0) block_key = 0u;
    stage_rms_norm(h, w1p, eps, xs, red);

    // x's fixed-point scale and the two norms of the bound (every block computes the same bits).
    float ax = 0.f, ss = 0.f;
#pragma unroll
    for (int k = 0; k < HIDDEN / 256; k++) {
        const float v = xs[threadIdx.x + k * 256];
        ax = fmaxf(ax, fabsf(v));
        ss += v * v;
    }
    const float amax = block_max(ax, red);
    const float sx = amax / FIXED_POINT_MAX, inv = amax > 0.f ? FIXED_POINT_MAX / amax : 0.f;
    const float outlier = OUTLIER_RMS * sqrtf(block_sum(ss, red) / HIDDEN);
    float es = 0.f, in2 = 0.f, out1 = 0.f;
#pragma unroll
    for (int k = 0; k < HIDDEN / 256; k++) {
        const float v = xs[threadIdx.x + k * 256];
        const float e = fmaf(-rintf(v * inv), sx, v);
        es += e * e;
        if (fabsf(v) > outlier) out1 += fabsf(v);
        else in2 += v * v;
    }
    const float nx = sqrtf(block_sum(in2, red)) * 1.0001f;  // ‖x_I‖₂
    const float n1 = block_sum(out1, red) * 1.0001f;        // ‖x_O‖₁
    const float ne = sqrtf(block_sum(es, red)) * 1.0001f;
    const float c2 = __uint_as_float(__ldcg(words + 6));

    // This lane's columns j·512 + lane·16 + 4m + k as int8 digits, four to a word.
    int hi[SCREEN_PIECES * 4], lo[SCREEN_PIECES * 4];
#pragma unroll
    for (int j = 0; j < SCREEN_PIECES; j++)
#pragma unroll
        for (int m = 0; m < 4; m++) {
            unsigned ph = 0u, pl = 0u;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int p = (int)rintf(xs[j * 512 + lane * 16 + 4 * m + k] * inv);
                const int l = ((p + 128) & 255) - 128;
                ph |= ((unsigned)((p - l) >> 8) & 0xffu) << (8 * k);
                pl |= ((unsigned)l & 0xffu) << (8 * k);
            }
            hi[4 * j + m] = (int)ph;
            lo[4 * j + m] = (int)pl;
        }

    float best = -INFINITY;  // the largest a_j − b_j of this warp's rows (lane 0)
    for (int n0 = 0; first + n0 * stride < units; n0 += SCREEN_DEPTH) {
#pragma unroll
        for (int d = 0; d < SCREEN_DEPTH; d++) {
            const int u = first + (n0 + d) * stride;
            if (u >= units) break;
            wait_slot(d, n0 / SCREEN_DEPTH);
            // Per row, two chains per digit (integer sums: any order gives the same S).
            int hs[SCREEN_ROWS], ls[SCREEN_ROWS];
#pragma unroll
            for (int k = 0; k < SCREEN_ROWS; k++) {
                int sh[2] = {0, 0}, sl[2] = {0, 0};
#pragma unroll
                for (int j = 0; j < SCREEN_PIECES; j++) {
                    const int4 v = *reinterpret_cast<const int4*>(ring + d * UNIT + k * HIDDEN + j * 512 + lane * 16);
                    sh[0] = __dp4a(v.x, hi[4 * j], sh[0]);
                    sl[0] = __dp4a(v.x, lo[4 * j], sl[0]);
                    sh[1] = __dp4a(v.y, hi[4 * j + 1], sh[1]);
                    sl[1] = __dp4a(v.y, lo[4 * j + 1], sl[1]);
                    sh[0] = __dp4a(v.z, hi[4 * j + 2], sh[0]);
                    sl[0] = __dp4a(v.z, lo[4 * j + 2], sl[0]);
                    sh[1] = __dp4a(v.w, hi[4 * j + 3], sh[1]);
                    sl[1] = __dp4a(v.w, lo[4 * j + 3], sl[1]);
                }
                hs[k] = __reduce_add_sync(0xffffffffu, sh[0] + sh[1]);
                ls[k] = __reduce_add_sync(0xffffffffu, sl[0] + sl[1]);
            }
            // Slot d is read: refill it now, so the epilogue does not delay the next request.
            float2 c[SCREEN_ROWS];
            if (lead) {
#pragma unroll
                for (int k = 0; k < SCREEN_ROWS; k++) c[k] = cring[d * SCREEN_ROWS + k];
            }
            request(u + SCREEN_DEPTH * stride, d);
            if (lead) {
#pragma unroll
                for (int k = 0; k < SCREEN_ROWS; k++) {
                    const int r = u * SCREEN_ROWS + k;
                    if (r >= rows) break;
                    // 256·hs + ls in f32: exact products, one rounding (no cancellation can
                    // grow it: |ls| < 2^25, and (float)hs is exact below 2^24)
                    const float a = fmaf((float)hs[k], 256.f, (float)ls[k]) * (c[k].x * sx);
                    const float b = fmaf(c[k].y, nx, fmaf(0.52f * c[k].x, n1, c2 * ne)) * 1.0001f + 1e-6f * fabsf(a);
                    upper[r] = a + b;
                    best = fmaxf(best, a - b);
                }
            }
        }
    }
    if (lead) atomicMax(&block_key, ordered_key(best));
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicMax(words, block_key);
        block_keys[blockIdx.x] = block_key;
    }
}

// The rescores' shared parts. The lane's x, as GemvStream::run holds it (columns
// j·256 + lane·8 ..+8), staged by the whole block.
__device__ __forceinline__ void stage_lane_x(const float* h, const float* w1p, float eps, float* xs, float* red,
                                             float4 xa[8], float4 xb[8]) {
    stage_rms_norm(h, w1p, eps, xs, red);
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        xa[j] = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8);
        xb[j] = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8 + 4);
    }
}

// Row `row`'s exact logit, gemv_norm_bf16's expression in its order (the whole warp; every lane
// gets it).
__device__ __forceinline__ float exact_logit(const bf16* w, int row, const float4 xa[8], const float4 xb[8]) {
    const int lane = threadIdx.x & 31;
    uint4 wv[8];
#pragma unroll
    for (int j = 0; j < 8; j++) wv[j] = load_weights16(w + (size_t)row * HIDDEN + j * 256 + lane * 8);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) acc += dot_piece(wv[j], xa[j], xb[j]);
    return warp_sum(acc);
}

// Each warp's run of rows: a multiple of 32, the grid's warps covering `rows` once.
__device__ __forceinline__ int rows_per_warp(int rows) {
    const int warps = gridDim.x * SCREEN_WARPS;
    return ((rows + warps - 1) / warps + 31) & ~31;
}

// Adds this lane's candidate count, then: is this block the last one in? Each block publishes
// its atomics before taking a ticket, so the last one sees every candidate. Every thread calls
// it; every thread gets the answer.
__device__ __forceinline__ bool last_block_in(unsigned* words, unsigned found) {
    if ((threadIdx.x & 31) == 0 && found) atomicAdd(words + 2, found);
    __threadfence();
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) last = atomicAdd(words + 1, 1u) == gridDim.x - 1;
    __syncthreads();
    return last;
}

// The last block's thread 0 ends the step: the candidate count into words[3], the screen's
// threshold and the tickets zeroed for the next step.
__device__ __forceinline__ void end_step(unsigned* words) {
    words[3] = atomicExch(words + 2, 0u);
    words[0] = 0u;
    words[1] = 0u;
}

// The rescore: the exact logit of every row whose upper bound reaches T, their argmax into
// out (i32, the next step's token id). w bf16 [rows, 2048], upper f32 [rows] (the screen's).
extern "C" __global__ void __launch_bounds__(256)
    lm_head_rescore(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p, float eps,
                    int rows, const float* __restrict__ upper, unsigned* __restrict__ words, int* __restrict__ out) {
    __shared__ __align__(16) float xs[HIDDEN];
    __shared__ float red[32];
    pdl_wait();
    pdl_trigger();
    float4 xa[8], xb[8];
    stage_lane_x(h, w1p, eps, xs, red, xa, xb);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned t = __ldcg(words);
    unsigned long long* best = reinterpret_cast<unsigned long long*>(words + 4);
    const int per = rows_per_warp(rows);
    const int r0 = (blockIdx.x * SCREEN_WARPS + warp) * per, r1 = min(rows, r0 + per);
    unsigned found = 0;
    for (int base = r0; base < r1; base += 128) {
        float u[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = base + 32 * i + lane;
            u[i] = r < r1 ? __ldcg(upper + r) : -INFINITY;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = base + 32 * i + lane;
            unsigned m = __ballot_sync(0xffffffffu, r < r1 && ordered_key(u[i]) >= t);
            while (m) {
                const int row = base + 32 * i + __ffs(m) - 1;
                m &= m - 1;
                const float acc = exact_logit(w, row, xa, xb);
                if (lane == 0) {
                    // ties: the larger key is the lower row
                    atomicMax(best, ((unsigned long long)ordered_key(acc) << 32) | (0xffffffffu - (unsigned)row));
                    found++;
                }
            }
        }
    }
    if (last_block_in(words, found) && threadIdx.x == 0) {
        __threadfence();
        const unsigned long long b = atomicExch(best, 0ull);
        *out = b ? (int)(0xffffffffu - (unsigned)b) : 0;  // no candidate only if the logits are NaN
        end_step(words);
    }
}

// The sampled step's rescore (see the top): logits f32 [rows] = the exact logit of every row that
// could be among the top k, −∞ elsewhere; k = params->top_k clamped to 1..64, 1 when greedy (as
// the sampler takes them). block_keys u32 [nkeys ≤ 512] (the screen's).
extern "C" __global__ void __launch_bounds__(256)
    lm_head_rescore_topk(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p,
                         float eps, int rows, const float* __restrict__ upper, const unsigned* __restrict__ block_keys,
                         int nkeys, const SamplingParams* __restrict__ params, unsigned* __restrict__ words,
                         float* __restrict__ logits) {
    __shared__ __align__(16) float xs[HIDDEN];
    __shared__ float red[32];
    __shared__ unsigned keys[512];
    __shared__ unsigned t;
    pdl_wait();
    pdl_trigger();
    const bool greedy = !(params->temperature > 0.f);
    const int k = greedy ? 1 : max(1, min(params->top_k, 64));
    if (threadIdx.x == 0) t = 0u;  // below every key (every row a candidate) if k > nkeys
    for (int i = threadIdx.x; i < nkeys; i += blockDim.x) keys[i] = __ldcg(block_keys + i);
    __syncthreads();
    // T_k: the key with fewer than k keys above it and at least k at or above it.
    for (int i = threadIdx.x; i < nkeys; i += blockDim.x) {
        int above = 0, at_or_above = 0;
        for (int j = 0; j < nkeys; j++) {
            above += keys[j] > keys[i];
            at_or_above += keys[j] >= keys[i];
        }
        if (above < k && k <= at_or_above) t = keys[i];  // equal keys write the same value
    }
    float4 xa[8], xb[8];
    stage_lane_x(h, w1p, eps, xs, red, xa, xb);  // its __syncthreads publish t
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int per = rows_per_warp(rows);
    const int r0 = (blockIdx.x * SCREEN_WARPS + warp) * per, r1 = min(rows, r0 + per);
    unsigned found = 0;
    for (int base = r0; base < r1; base += 32) {
        const int r = base + lane;
        const bool candidate = r < r1 && ordered_key(__ldcg(upper + r)) >= t;
        if (r < r1 && !candidate) logits[r] = -INFINITY;
        unsigned m = __ballot_sync(0xffffffffu, candidate);
        while (m) {
            const int row = base + __ffs(m) - 1;
            m &= m - 1;
            const float acc = exact_logit(w, row, xa, xb);
            if (lane == 0) {
                logits[row] = acc;
                found++;
            }
        }
    }
    if (last_block_in(words, found) && threadIdx.x == 0) {
        __threadfence();
        end_step(words);
    }
}
