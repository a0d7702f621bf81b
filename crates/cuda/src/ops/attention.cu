// Gated attention, steps 3-5 (the formulas: crates/cpu/src/attention.rs): causal GQA softmax attention over the KV cache,
// then o * sigmoid(gate).
//
// A "row" is one (token, query head) pair. The 8 query heads that share a KV head are consecutive
// rows, so a block reads every key and value it needs from one KV head, once, for all 8 heads.
// A warp owns 16 rows (2 tokens x 8 heads) and computes S = Q K^T and O += P V with
// mma.sync m16n8k16 (bf16 inputs, f32 accumulators); the softmax is online, in f32
// (FlashAttention-2). The visible positions 0 .. pos+T-1 are cut into `splits` equal chunks
// (split-K): a block handles one (row tile, KV head, chunk) and writes unnormalised partials;
// attn_combine merges the chunks, normalises and applies the output gate.
//
// The start position lives on the device (`pos`), so launch shapes never depend on it: chunks
// past the visible length are empty and their blocks exit at once.

#define GROUP (ATTN_HEADS / KV_HEADS)
// Shared-memory row stride in bf16 (528 bytes): the 8 rows a fragment load touches fall in
// distinct banks, for 4-byte loads and for ldmatrix alike.
#define KV_STRIDE (HEAD_DIM + 8)
// Softmax scale 1/sqrt(256) in log2 units: scores are kept as s * log2(e) / 16 and exp2'd.
#define SCALE_LOG2 (0.0625f * 1.4426950408889634f)
#define NEG_INF __int_as_float(0xff800000)

// Positions per split-K chunk: `visible` positions in `splits` chunks, rounded up to `align`
// (the key tile), so every chunk starts on a tile boundary. attn_combine recomputes it.
__device__ __forceinline__ int split_chunk(int visible, int splits, int align) {
    const int c = (visible + splits - 1) / splits;
    return (c + align - 1) / align * align;
}

// One block: WARPS warps = 16*WARPS rows = 2*WARPS tokens of one KV head's 8 query heads, over one
// chunk of positions, in key tiles of BC positions, double-buffered with cp.async.
//   q [T, 16, 256] bf16; kc, vc [max_seq, 2, 256] bf16 (the cache, already holding rows pos..pos+T-1)
//   part_o [splits, T*16, 256] f32: unnormalised output; part_ml [splits, T*16, 2] f32: (max in
//   log2 units, sum of exponentials). Row index = t*16 + query head.
// Shared memory: (16*WARPS + 4*BC) * KV_STRIDE * 2 bytes.
//
// EARLY (the decode kernel, launched with PDL right behind qk_norm_rope): the kernel calls
// pdl_wait() itself, after requesting its first key tile if the tile lies wholly before pos —
// rows earlier steps wrote, so it streams while qk_norm_rope runs. (pos itself was written by
// the previous step's advance_position.)
template <int WARPS, int BC, bool EARLY = false>
__device__ __forceinline__ void attend(const bf16* __restrict__ q, const bf16* __restrict__ kc,
                                       const bf16* __restrict__ vc, const int* __restrict__ pos_ptr, int T,
                                       int splits, float* __restrict__ part_o, float* __restrict__ part_ml,
                                       int tile) {
    constexpr int ROWS = 16 * WARPS;
    constexpr int TOK = ROWS / GROUP;
    constexpr int NT = BC / 8;  // 8-position column tiles of S
    constexpr int THREADS = 32 * WARPS;
    constexpr int CHUNKS = HEAD_DIM / 8;  // 16-byte pieces of one 256-dim row
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // [ROWS][KV_STRIDE]
    bf16* Ks = Qs + ROWS * KV_STRIDE;              // [2][BC][KV_STRIDE]
    bf16* Vs = Ks + 2 * BC * KV_STRIDE;            // [2][BC][KV_STRIDE]

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, tq = lane & 3;
    const int t0 = tile * TOK, kh = blockIdx.y, split = blockIdx.z;
    if (t0 >= T) return;
    const int pos = *pos_ptr;
    const int visible = pos + T;
    const int chunk = split_chunk(visible, splits, BC);
    const int lo = split * chunk;
    // Positions this block needs: its chunk, cut at what its last token may see.
    const int hi = min(min(lo + chunk, visible), pos + min(t0 + TOK, T));
    if (lo >= hi) return;

    // Thread tid copies the 16-byte column `col` of rows r0, r0 + RSTEP, ... of each tile: the
    // addresses advance by constants, so a row costs its two copies and a bounds test.
    constexpr int RSTEP = THREADS / CHUNKS;
    const int r0 = tid / CHUNKS, col = (tid % CHUNKS) * 8;
    const bf16* k_col = kc + kh * HEAD_DIM + col;
    const bf16* v_col = vc + kh * HEAD_DIM + col;
    auto load_kv = [&](int p0, int buf) {
        bf16* kd = Ks + (buf * BC + r0) * KV_STRIDE + col;
        bf16* vd = Vs + (buf * BC + r0) * KV_STRIDE + col;
        const size_t first = (size_t)(p0 + r0) * KV_HEADS * HEAD_DIM;
#pragma unroll
        for (int i = 0; i < BC / RSTEP; i++) {
            const bool ok = p0 + r0 + i * RSTEP < hi;  // beyond: zeros (never NaN garbage: P = 0 times V must stay 0)
            const size_t off = ok ? first + (size_t)i * RSTEP * KV_HEADS * HEAD_DIM : 0;
            cp_async16(kd + i * RSTEP * KV_STRIDE, k_col + off, ok);
            cp_async16(vd + i * RSTEP * KV_STRIDE, v_col + off, ok);
        }
    };
    const bool early_tile = EARLY && lo + BC <= pos;
    if (early_tile) load_kv(lo, 0);
    if constexpr (EARLY) pdl_wait();
    for (int c = tid; c < ROWS * CHUNKS; c += THREADS) {
        const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
        const int t = t0 + r / GROUP;
        const bf16* src = q + ((size_t)min(t, T - 1) * ATTN_HEADS + kh * GROUP + r % GROUP) * HEAD_DIM + col;
        cp_async16(Qs + r * KV_STRIDE + col, src, t < T);
    }

    // This thread's two rows: g (token ta) and g + 8 (token tb), query head kh*8 + g.
    const int ta = t0 + 2 * warp, tb = ta + 1;
    const int lim_a = ta < T ? min(hi, pos + ta + 1) : 0;  // positions < lim are visible
    const int lim_b = tb < T ? min(hi, pos + tb + 1) : 0;
    const int lim_warp = max(lim_a, lim_b);

    float o[HEAD_DIM / 8][4];
#pragma unroll
    for (int n = 0; n < HEAD_DIM / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_a = NEG_INF, m_b = NEG_INF, l_a = 0.f, l_b = 0.f;

    const int ntiles = (hi - lo + BC - 1) / BC;
    if (!early_tile) load_kv(lo, 0);
    cp_async_commit();
    for (int j = 0; j < ntiles; j++) {
        const int buf = j & 1;
        if (j + 1 < ntiles) load_kv(lo + (j + 1) * BC, buf ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int p0 = lo + j * BC;
        if (p0 < lim_warp) {  // warp-uniform: skip tiles wholly in this warp's causal future
            const bf16* Kt = Ks + buf * BC * KV_STRIDE;
            const bf16* Vt = Vs + buf * BC * KV_STRIDE;
            float s[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
            // ldmatrix row addresses. Q (A operand): matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15)
            // in a0..a3 order. K (B operand, two 8-position column tiles per load): matrices
            // (positions 0-7: k 0-7, k 8-15 | positions 8-15: k 0-7, k 8-15) = b0, b1 of tile n, n+1.
            const bf16* qa = Qs + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * KV_STRIDE + (lane >> 4) * 8;
            const bf16* kb = Kt + ((lane & 7) + (lane >> 4) * 8) * KV_STRIDE + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int kk = 0; kk < HEAD_DIM / 16; kk++) {
                uint32_t a0, a1, a2, a3;
                ldmatrix_x4(a0, a1, a2, a3, qa + kk * 16);
#pragma unroll
                for (int n = 0; n < NT; n += 2) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4(b0, b1, b2, b3, kb + n * 8 * KV_STRIDE + kk * 16);
                    mma_bf16(s[n], a0, a1, a2, a3, b0, b1);
                    mma_bf16(s[n + 1], a0, a1, a2, a3, b2, b3);
                }
            }
            // Scale, mask, running max.
            float mx_a = NEG_INF, mx_b = NEG_INF;
#pragma unroll
            for (int n = 0; n < NT; n++) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int p = p0 + n * 8 + 2 * tq + e;
                    s[n][e] = p < lim_a ? s[n][e] * SCALE_LOG2 : NEG_INF;
                    s[n][2 + e] = p < lim_b ? s[n][2 + e] * SCALE_LOG2 : NEG_INF;
                    mx_a = fmaxf(mx_a, s[n][e]);
                    mx_b = fmaxf(mx_b, s[n][2 + e]);
                }
            }
            mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
            mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
            mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
            mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
            const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
            // A row with nothing visible yet keeps max -inf; subtract 0 then (exp2(-inf) = 0).
            const float use_a = mn_a == NEG_INF ? 0.f : mn_a, use_b = mn_b == NEG_INF ? 0.f : mn_b;
            // Rescale only when a row's max grew (after the first tiles, rarely): otherwise the
            // factors are exactly 1 (or 0 on rows that are still all zeros), so skipping keeps the bits.
            if (__any_sync(0xffffffffu, mn_a > m_a || mn_b > m_b)) {
                const float al_a = exp2f(m_a - use_a), al_b = exp2f(m_b - use_b);
                l_a *= al_a;
                l_b *= al_b;
#pragma unroll
                for (int n = 0; n < HEAD_DIM / 8; n++) {
                    o[n][0] *= al_a;
                    o[n][1] *= al_a;
                    o[n][2] *= al_b;
                    o[n][3] *= al_b;
                }
            }
            m_a = mn_a;
            m_b = mn_b;
#pragma unroll
            for (int n = 0; n < NT; n++) {
                s[n][0] = exp2f(s[n][0] - use_a);
                s[n][1] = exp2f(s[n][1] - use_a);
                s[n][2] = exp2f(s[n][2] - use_b);
                s[n][3] = exp2f(s[n][3] - use_b);
                l_a += s[n][0] + s[n][1];
                l_b += s[n][2] + s[n][3];
            }
            // O += P V: P (rows x 16 positions) from the S accumulators, V^T fragments via ldmatrix.trans.
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                const uint32_t a0 = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
                const uint32_t a1 = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
                const uint32_t a2 = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                const uint32_t a3 = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                const bf16* vrow = Vt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * KV_STRIDE + (lane >> 4) * 8;
#pragma unroll
                for (int np = 0; np < HEAD_DIM / 16; np++) {
                    uint32_t b0, b1, b2, b3;
                    ldmatrix_x4_trans(b0, b1, b2, b3, vrow + np * 16);
                    mma_bf16(o[2 * np], a0, a1, a2, a3, b0, b1);
                    mma_bf16(o[2 * np + 1], a0, a1, a2, a3, b2, b3);
                }
            }
        }
        __syncthreads();  // the buffer is refilled two tiles later
    }

    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    const size_t rows_total = (size_t)T * ATTN_HEADS;
    const int head = kh * GROUP + g;
    if (ta < T) {
        const size_t row = (size_t)split * rows_total + (size_t)ta * ATTN_HEADS + head;
        float* dst = part_o + row * HEAD_DIM + 2 * tq;
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; n++) *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][0], o[n][1]);
        if (tq == 0) *reinterpret_cast<float2*>(part_ml + row * 2) = make_float2(m_a, l_a);
    }
    if (tb < T) {
        const size_t row = (size_t)split * rows_total + (size_t)tb * ATTN_HEADS + head;
        float* dst = part_o + row * HEAD_DIM + 2 * tq;
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; n++) *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[n][2], o[n][3]);
        if (tq == 0) *reinterpret_cast<float2*>(part_ml + row * 2) = make_float2(m_b, l_b);
    }
}

// Prefill: 8 warps = 16 tokens per block, key tiles of 64. Grid (ceil(T/16), 2, splits), 256 threads,
// 202,752 bytes of shared memory.
extern "C" __global__ void __launch_bounds__(256, 1)
    attn_prefill(const bf16* __restrict__ q, const bf16* __restrict__ kc, const bf16* __restrict__ vc,
                 const int* __restrict__ pos, int T, int splits, float* __restrict__ part_o,
                 float* __restrict__ part_ml) {
    pdl_wait();
    attend<8, 64>(q, kc, vc, pos, T, splits, part_o, part_ml, blockIdx.x);
}

// Prefill's form for 99 KB of shared memory (the consumer cards): 4 warps = 8 tokens per block,
// key tiles of 32. Grid (ceil(T/8), 2, splits), 128 threads, 101,376 bytes of shared memory.
extern "C" __global__ void __launch_bounds__(128, 1)
    attn_prefill_small(const bf16* __restrict__ q, const bf16* __restrict__ kc, const bf16* __restrict__ vc,
                       const int* __restrict__ pos, int T, int splits, float* __restrict__ part_o,
                       float* __restrict__ part_ml) {
    pdl_wait();
    attend<4, 32>(q, kc, vc, pos, T, splits, part_o, part_ml, blockIdx.x);
}

// Decode (and short chunks): 1 warp = 2 tokens per block, key tiles of 32. Grid (ceil(T/2), 2, splits),
// 32 threads, 76,032 bytes of shared memory (up to 3 blocks per SM).
extern "C" __global__ void __launch_bounds__(32)
    attn_decode(const bf16* __restrict__ q, const bf16* __restrict__ kc, const bf16* __restrict__ vc,
                const int* __restrict__ pos, int T, int splits, float* __restrict__ part_o,
                float* __restrict__ part_ml) {
    attend<1, 32, true>(q, kc, vc, pos, T, splits, part_o, part_ml, blockIdx.x);  // pdl_wait() inside
}

// attn_decode for one token of each of n sequences (the batched decode step): blockIdx.x = s
// attends with q row s (q [n, 16, 256]) over its own cache (k_caches[s], v_caches[s]) at its own
// position (pos[s]), writing the partials of its own attn_decode launch at
// part_o + s·splits·16·256 and part_ml + s·splits·16·2: the same blocks, so the same bits.
// Grid (n, 2, splits), as attn_decode's for one token.
extern "C" __global__ void __launch_bounds__(32)
    attn_decode_batch(const bf16* __restrict__ q, const bf16* const* __restrict__ k_caches,
                      const bf16* const* __restrict__ v_caches, const int* __restrict__ pos, int splits,
                      float* __restrict__ part_o, float* __restrict__ part_ml) {
    const int s = blockIdx.x;
    const size_t rows = (size_t)splits * ATTN_HEADS;
    attend<1, 32, true>(q + (size_t)s * ATTN_HEADS * HEAD_DIM, k_caches[s], v_caches[s], pos + s, 1, splits,
                        part_o + s * rows * HEAD_DIM, part_ml + s * rows * 2, 0);
}

// Merges the split-K partials of one row (token t, query head h), normalises, multiplies by
// sigmoid(gate) and writes bf16 for o_proj. 256 threads: thread s first takes chunk s's (max,
// sum) (splits <= 256), then warp w the chunks w, w + 8, ... and the 8 warps meet in shared
// memory: no serial walk over the chunks. Every dim sums its chunks in the same order in both
// forms, so they give the same bits:
//   attn_combine: grid T*16, a block per row, each lane 8 of its 256 dims (a warp reads a
//     chunk's whole row at once) — prefill, whose many rows fill the GPU;
//   attn_combine_sliced: grid (T*16, 8), a block per 32 dims of a row, a lane per dim, every
//     chunk's value requested at once — decode, whose 16 rows would occupy 16 SMs (one block
//     per row: 14 µs at 131K context, each walking 200 KB of partials; sliced: 5 µs).
//   qg [T, 16, 512] f32 (the gate is dims 256..511 of each head); align = the key tile of the
//   attend kernel that wrote the partials; out [T, 16*256] bf16.
#define COMBINE_MAX_SPLITS 256
#define COMBINE_SLICE 32
template <int SLICE>  // dims per block: HEAD_DIM or COMBINE_SLICE (blockIdx.y picks which)
__device__ __forceinline__ void combine(const float* __restrict__ part_o, const float* __restrict__ part_ml,
                                        const float* __restrict__ qg, const int* __restrict__ pos_ptr, int T,
                                        int splits, int align, bf16* __restrict__ out) {
    constexpr int PER_LANE = SLICE / 32;  // consecutive dims per lane
    __shared__ float weight[COMBINE_MAX_SPLITS];  // e^(m_s - m) of each chunk
    __shared__ float red[32];
    __shared__ __align__(16) float partial[8][SLICE];
    pdl_wait();
    pdl_trigger();  // the decode step's MoE kernel requests its weights beside this one
    const int row = blockIdx.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int t = row / ATTN_HEADS, h = row % ATTN_HEADS;
    const int d0 = blockIdx.y * SLICE + lane * PER_LANE;  // this lane's first dim
    if (t >= T) return;
    const int pos = *pos_ptr;
    const int chunk = split_chunk(pos + T, splits, align);
    // Chunks that start at or before this token's position hold at least one visible key; the
    // later ones were never written for it.
    const int used = min(splits, (pos + t) / chunk + 1);
    const size_t rows_total = (size_t)T * ATTN_HEADS;
    auto part = [&](int c) { return part_o + ((size_t)c * rows_total + row) * HEAD_DIM + d0; };

    float m_s = NEG_INF, l_s = 0.f;
    if (tid < used) {
        const size_t r = (size_t)tid * rows_total + row;
        m_s = __ldcg(part_ml + r * 2);
        l_s = __ldcg(part_ml + r * 2 + 1);
    }
    float x[SLICE == COMBINE_SLICE ? COMBINE_MAX_SPLITS / 8 : 1];  // sliced: all chunks' values at once
    if constexpr (SLICE == COMBINE_SLICE) {
#pragma unroll
        for (int i = 0; i < COMBINE_MAX_SPLITS / 8; i++) x[i] = warp + 8 * i < used ? __ldcg(part(warp + 8 * i)) : 0.f;
    }
    float m = warp_max(m_s);
    if (lane == 0) red[warp] = m;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < 8; w++) m = fmaxf(m, red[w]);
    const float w_s = tid < used ? exp2f(m_s - m) : 0.f;
    weight[tid] = w_s;
    const float den = block_sum(w_s * l_s, red);  // its barriers also publish weight[]

    float acc[PER_LANE] = {};
    if constexpr (SLICE == COMBINE_SLICE) {
#pragma unroll
        for (int i = 0; i < COMBINE_MAX_SPLITS / 8; i++)
            if (warp + 8 * i < used) acc[0] += weight[warp + 8 * i] * x[i];
    } else {
#pragma unroll 4
        for (int c = warp; c < used; c += 8) {
            const float4 x0 = __ldcg(reinterpret_cast<const float4*>(part(c))), x1 = __ldcg(reinterpret_cast<const float4*>(part(c)) + 1);
            const float wc = weight[c];
            acc[0] += wc * x0.x; acc[1] += wc * x0.y; acc[2] += wc * x0.z; acc[3] += wc * x0.w;
            acc[4] += wc * x1.x; acc[5] += wc * x1.y; acc[6] += wc * x1.z; acc[7] += wc * x1.w;
        }
    }
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) partial[warp][lane * PER_LANE + i] = acc[i];
    __syncthreads();
    if (tid >= SLICE) return;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < 8; w++) o += partial[w][tid];
    const int d = blockIdx.y * SLICE + tid;
    const float gate = qg[(size_t)t * (ATTN_HEADS * 2 * HEAD_DIM) + h * 2 * HEAD_DIM + HEAD_DIM + d];
    out[(size_t)t * (ATTN_HEADS * HEAD_DIM) + h * HEAD_DIM + d] = __float2bfloat16(o / den / (1.f + expf(-gate)));
}

extern "C" __global__ void __launch_bounds__(256)
    attn_combine(const float* __restrict__ part_o, const float* __restrict__ part_ml, const float* __restrict__ qg,
                 const int* __restrict__ pos_ptr, int T, int splits, int align, bf16* __restrict__ out) {
    combine<HEAD_DIM>(part_o, part_ml, qg, pos_ptr, T, splits, align, out);
}

// attn_combine_sliced for the batched decode step: blockIdx.z = s combines sequence s's partials
// (as attn_decode_batch wrote them), its gate in qg + s·qg_stride, into out row s (bf16 [n, 4096]).
// Grid (16, 8, n).
extern "C" __global__ void __launch_bounds__(256)
    attn_combine_batch(const float* __restrict__ part_o, const float* __restrict__ part_ml, const float* __restrict__ qg,
                       const int* __restrict__ pos, int splits, int align, int qg_stride, bf16* __restrict__ out) {
    const int s = blockIdx.z;
    const size_t rows = (size_t)splits * ATTN_HEADS;
    combine<COMBINE_SLICE>(part_o + s * rows * HEAD_DIM, part_ml + s * rows * 2, qg + (size_t)s * qg_stride, pos + s,
                           1, splits, align, out + (size_t)s * ATTN_HEADS * HEAD_DIM);
}

extern "C" __global__ void __launch_bounds__(256)
    attn_combine_sliced(const float* __restrict__ part_o, const float* __restrict__ part_ml, const float* __restrict__ qg,
                        const int* __restrict__ pos_ptr, int T, int splits, int align, bf16* __restrict__ out) {
    combine<COMBINE_SLICE>(part_o, part_ml, qg, pos_ptr, T, splits, align, out);
}
