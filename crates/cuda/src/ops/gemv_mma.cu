// Decode projections of 1 to 8 tokens on the tensor cores (mma.sync m16n8k16, bf16 × bf16, f32
// accumulation): y[t, r] = W[r] · x[t], x[t] = bf16(RMSNorm(h[t])), W bf16 [rows, 2048].
//
// The tokens are the MMA's n = 8 side: each weight tile is read once for all of them, and a
// token's sums are those of its own column of the MMA, whatever the other columns hold. So a token
// gets the same bits alone as beside up to 7 others: the one-token decode step and the batched /
// multi-token steps run these same kernels, and each sequence's row of a batch is its own step's.
// (On the CUDA cores several tokens cost one dot per token per weight: the batched step's
// in-projection ran at 1.0 TB/s at 8 tokens, bench/RESULTS.md.)
//
// gemv_norm_mma_bf16:      y[t·y_stride + r] for every row (the attention q/k/v, the several-token
//                          GDN in-projection).
// gemv_mma_bf16:           the same for x given (bf16 [tokens, 2048]): the one-token forward pass
//                          (prefill of one token) projects with it, so it gets the decode step's bits.
// gemv_norm_conv_mma_bf16: one token, the GDN decode step's in-projection (rows [qkv 8192 | z 4096
//                          | b 32 | a 32]) with the causal conv + SiLU folded into the qkv rows, as
//                          gemv_fp8.cu's gemv_norm_conv_fp8 folds it (the arithmetic of gdn_conv.cu).
//
// Geometry (gemv_fp8.cu's fp8_tiles, with bf16 tiles): a block of 8 warps, one block per SM, takes
// 16-row tiles (blockIdx.x, + gridDim.x, ...); warp w takes columns [256w, 256w + 256) of each
// tile (16 rows × 512 bytes = 8 KB), streamed through its own 2-tile cp.async ring (16-byte chunks
// XOR-swizzled by row, so that ldmatrix reads them without bank conflicts), and keeps its B
// fragments (its column range of every token's x: 16 k-steps × 2 registers) for the whole
// kernel. The 8 warps' partial sums meet in shared memory and are added in warp order.
// Dynamic shared memory: the rings (128 KB), then x bf16 [tokens][2048], then with LoRA sites
// (`lora`: one per token, else null) u f32 [tokens][LORA_FUSED_RANKS]: the grid computes u = A x
// once (MmaLora: a row of A a warp; the blocks wait for it under the stream), each block copies it
// and adds each row's term s · B[r] · u as it stores the row. The forms for 99 KB of shared memory (SOLO_BIG_SHARED 0) give each warp a 1-tile ring (64 KB): a warp requests its
// next tile once it has read this one, and a launch takes at most 6 tokens (linear.rs splits).

#define MMA_WARPS 8
#define MMA_TOKENS 8
#define MMA_TILE_BYTES (16 * 512)
#if SOLO_BIG_SHARED
#define MMA_DEPTH 2
#else
#define MMA_DEPTH 1
#endif
#define MMA_RING_BYTES (MMA_WARPS * MMA_DEPTH * MMA_TILE_BYTES)

__device__ __forceinline__ unsigned char* mma_slot(unsigned char* smem, int warp, int slot) {
    return smem + (warp * MMA_DEPTH + slot % MMA_DEPTH) * MMA_TILE_BYTES;
}

// Warp `warp`'s slice of tile `tile` (rows tile·16 .., columns 256·warp ..) into `slot`: copy c
// of every lane is row c, lane l its 16-byte chunk l (stored at chunk l ^ (c % 8)), so each copy
// instruction reads 512 contiguous bytes. One commit group; rows at or past `rows` are zeros.
__device__ __forceinline__ void mma_request_tile(unsigned char* slot, const bf16* __restrict__ W, int tile, int rows) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int row = 0; row < 16; row++) {
        const int r = tile * 16 + row;
        cp_async16(slot + row * 512 + ((lane ^ (row & 7)) << 4),
                   W + (size_t)(r < rows ? r : 0) * HIDDEN + warp * 256 + lane * 8, r < rows);
    }
    cp_async_commit();
}

// The block's first MMA_DEPTH tiles into each warp's ring (before pdl_wait: weights only).
__device__ __forceinline__ void mma_prologue(unsigned char* smem, const bf16* __restrict__ W, int rows) {
    const int warp = threadIdx.x >> 5;
#pragma unroll
    for (int d = 0; d < MMA_DEPTH; d++) mma_request_tile(mma_slot(smem, warp, d), W, blockIdx.x + d * gridDim.x, rows);
}

// For every 16-row tile of this block: store(row, token, W[row] · x[token]) for its rows < rows
// and tokens < tokens (threads 0..127: row = thread / 8, token = thread % 8). ahead(tile) runs on
// every thread for the block's first tile and, after each tile's stores, for its next one: per-row
// inputs of the stores (the conv's window, a LoRA site's B rows) are fetched a tile early, off the
// tiles' path. first() runs on every thread once, before the first tile's stores, while the next
// tiles stream in (a LoRA site's wait for u). Call after mma_prologue and with xb (bf16
// [tokens][2048], shared) staged. `part` holds two tiles' partial sums, so one barrier a tile
// suffices.
template <class Store, class Ahead, class First>
__device__ __forceinline__ void mma_tiles(unsigned char* smem, const bf16* __restrict__ W, int rows, int tokens,
                                          float (*part)[MMA_WARPS][16][MMA_TOKENS], Store store, Ahead ahead,
                                          First first) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, j = lane & 3;  // the fragments' group (row / token) and lane in it
    const bf16* xb = reinterpret_cast<const bf16*>(smem + MMA_RING_BYTES);
    // B[k][n] = x[n][k]: this lane holds x[g][k, k+1] and x[g][k+8, k+9], k = 256·warp + 16·step + 2j
    uint32_t b[16][2];
#pragma unroll
    for (int st = 0; st < 16; st++) {
        const int k = warp * 256 + st * 16 + 2 * j;
        b[st][0] = g < tokens ? *reinterpret_cast<const uint32_t*>(xb + g * HIDDEN + k) : 0u;
        b[st][1] = g < tokens ? *reinterpret_cast<const uint32_t*>(xb + g * HIDDEN + k + 8) : 0u;
    }
    // ldmatrix.x4: lane gives row (lane & 7) + 8·((lane >> 3) & 1) of matrix lane / 8, whose 16
    // bytes are the k-step's first (matrices 0, 1) or second (2, 3) eight columns: a0..a3 of the
    // row-major A fragment
    const int lrow = (lane & 7) + 8 * ((lane >> 3) & 1), lhalf = lane >> 4;
    const int tiles = (rows + 15) / 16;
    ahead(blockIdx.x);
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, it++) {
        unsigned char* slot = mma_slot(smem, warp, it);
        cp_async_wait<MMA_DEPTH - 1>();  // this tile's group has landed (the next may be in flight)
        __syncwarp();
        // (row g, token 2j), (g, 2j+1), (g+8, 2j), (g+8, 2j+1); the even and odd k-steps in two
        // chains of MMAs, so that each waits on half as many
        float d[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int st = 0; st < 16; st++) {
            const int chunk = 2 * st + lhalf;
            uint32_t a[4];
            ldmatrix_x4(a[0], a[1], a[2], a[3],
                        reinterpret_cast<const bf16*>(slot + lrow * 512 + ((chunk ^ (lrow & 7)) << 4)));
            mma_bf16(d[st & 1], a[0], a[1], a[2], a[3], b[st][0], b[st][1]);
        }
        __syncwarp();  // every lane's ldmatrix reads of the slot are done
        mma_request_tile(slot, W, tile + MMA_DEPTH * gridDim.x, rows);
        float(*p)[16][MMA_TOKENS] = part[it & 1];
        p[warp][g][2 * j] = d[0][0] + d[1][0];
        p[warp][g][2 * j + 1] = d[0][1] + d[1][1];
        p[warp][g + 8][2 * j] = d[0][2] + d[1][2];
        p[warp][g + 8][2 * j + 1] = d[0][3] + d[1][3];
        if (it == 0) first();
        // (this tile's sums are complete after the barrier; the other half of `part` was last
        // read before it, in the previous tile)
        __syncthreads();
        if (threadIdx.x < 16 * MMA_TOKENS) {
            const int row = threadIdx.x / MMA_TOKENS, t = threadIdx.x % MMA_TOKENS, r = tile * 16 + row;
            if (t < tokens && r < rows) {
                float v = 0.f;
#pragma unroll
                for (int w = 0; w < MMA_WARPS; w++) v += p[w][row][t];
                store(r, t, v);
            }
        }
        ahead(tile + gridDim.x);
    }
    cp_async_wait<0>();  // no copy into shared memory outlives the block
}

// No per-row inputs to fetch ahead; nothing to do before the first stores.
struct NothingAhead {
    __device__ __forceinline__ void operator()(int) const {}
};
struct NothingFirst {
    __device__ __forceinline__ void operator()() const {}
};

// A block's LoRA sites (see the top), u = A x computed once for the grid (lora.cuh's
// LoraOnce) in two halves around the tiles: start(), with x staged, has warp gw of the grid take
// entries gw, gw + 8·G, ... of the [tokens][LORA_FUSED_RANKS] list (a row of A each, 4 KB) and
// the block arrive; first() (mma_tiles' first, while the next tiles stream in) waits for every
// block's arrival and copies u into shared memory after x. Each storing thread (`site`: its
// token's, or null) fetches its next tile's B row a tile ahead (LoraRowAhead) and adds the term
// as it stores the row. (Waiting before the tiles instead left the ring idle for the barrier:
// ~9 µs a site on the H100.)
struct MmaLora {
    const LoraSite* const* lora;
    LoraOnce* once;
    float* u;
    const LoraSite* site;
    unsigned long long base;
    int tokens;
    LoraRowAhead row;

    __device__ __forceinline__ MmaLora(unsigned char* smem, const LoraSite* const* lora, LoraOnce* once, int tokens)
        : lora(lora), once(once), tokens(tokens) {
        u = reinterpret_cast<float*>(smem + MMA_RING_BYTES + tokens * HIDDEN * 2);
        const int t = threadIdx.x % MMA_TOKENS;
        site = lora != nullptr && threadIdx.x < 16 * MMA_TOKENS && t < tokens ? lora[t] : nullptr;
    }
    __device__ __forceinline__ void start(const bf16* xb) {
        if (lora == nullptr) return;
        const int G = gridDim.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        base = launch_base(&once->count, G);
        for (int q = blockIdx.x * 8 + warp; q < tokens * LORA_FUSED_RANKS; q += 8 * G) {
            const int t = q / LORA_FUSED_RANKS, j = q % LORA_FUSED_RANKS;
            const LoraSite* s = lora[t];
            if (s == nullptr || j >= s->rank_sum) continue;
            const bf16* a[1] = {s->a + (size_t)j * HIDDEN};
            float v[1];
            lora_rows_dot<HIDDEN, 1, 8>(a, xb + (size_t)t * HIDDEN, v);
            if (lane == 0) once->u[q] = v[0];
        }
        grid_arrive(&once->count);
    }
    __device__ __forceinline__ void first() {
        if (lora == nullptr) return;
        grid_wait(&once->count, base + gridDim.x);
        for (int i = threadIdx.x; i < tokens * LORA_FUSED_RANKS; i += blockDim.x) u[i] = __ldcg(once->u + i);
    }
    __device__ __forceinline__ void fetch(int tile) {
        if (site != nullptr) row.fetch(site, tile * 16 + threadIdx.x / MMA_TOKENS);
    }
    // v (row r, token t) with the term added where the token has a site
    __device__ __forceinline__ float add(float v, int r, int t) const {
        return site == nullptr ? v : v + row.term(site, u + t * LORA_FUSED_RANKS, r);
    }
};

extern "C" __global__ void __launch_bounds__(256, 1)
    gemv_norm_mma_bf16(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p,
                       float* __restrict__ y, int out_dim, int y_stride, int tokens, float eps,
                       const LoraSite* const* __restrict__ lora, LoraOnce* __restrict__ once) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    __shared__ float part[2][MMA_WARPS][16][MMA_TOKENS];
    mma_prologue(smem, w, out_dim);
    pdl_wait();
    pdl_trigger();
    bf16* xb = reinterpret_cast<bf16*>(smem + MMA_RING_BYTES);
    for (int t = 0; t < tokens; t++) stage_rms_norm_bf16(h + (size_t)t * HIDDEN, w1p, eps, xb + t * HIDDEN, red);
    MmaLora l(smem, lora, once, tokens);
    l.start(xb);
    mma_tiles(
        smem, w, out_dim, tokens, part, [&](int r, int t, float v) { y[(size_t)t * y_stride + r] = l.add(v, r, t); },
        [&](int tile) { l.fetch(tile); }, [&]() { l.first(); });
}

extern "C" __global__ void __launch_bounds__(256, 1)
    gemv_mma_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y, int out_dim,
                  int y_stride, int tokens) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float part[2][MMA_WARPS][16][MMA_TOKENS];
    mma_prologue(smem, w, out_dim);
    pdl_wait();
    pdl_trigger();
    uint4* xb = reinterpret_cast<uint4*>(smem + MMA_RING_BYTES);
    for (int i = threadIdx.x; i < tokens * (HIDDEN / 8); i += blockDim.x) xb[i] = __ldcg(reinterpret_cast<const uint4*>(x) + i);
    __syncthreads();
    mma_tiles(smem, w, out_dim, tokens, part, [&](int r, int t, float v) { y[(size_t)t * y_stride + r] = v; },
              NothingAhead(), NothingFirst());
}

//   conv_state f32 [3, 8192] (oldest first), taps f32 [8192, 4], mixed f32 [8192] = silu(conv);
//   y f32 [12352] gets z, b, a (its qkv part is left unwritten); a LoRA site's term joins each
//   row before the conv.
extern "C" __global__ void __launch_bounds__(256, 1)
    gemv_norm_conv_mma_bf16(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p,
                            float* __restrict__ y, int out_dim, float eps, float* __restrict__ conv_state,
                            const float* __restrict__ taps, float* __restrict__ mixed,
                            const LoraSite* const* __restrict__ lora, LoraOnce* __restrict__ once) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    __shared__ float part[2][MMA_WARPS][16][MMA_TOKENS];
    mma_prologue(smem, w, out_dim);
    pdl_wait();
    pdl_trigger();
    const bf16* xb = reinterpret_cast<bf16*>(smem + MMA_RING_BYTES);
    stage_rms_norm_bf16(h, w1p, eps, const_cast<bf16*>(xb), red);
    MmaLora l(smem, lora, once, 1);
    l.start(xb);
    // the window of the row this thread stores (threads 8·row of a tile), fetched a tile ahead
    float4 tap = make_float4(0.f, 0.f, 0.f, 0.f);
    float s0 = 0.f, s1 = 0.f, s2 = 0.f;
    auto fetch_window = [&](int tile) {
        const int r = tile * 16 + threadIdx.x / MMA_TOKENS;
        if (threadIdx.x < 16 * MMA_TOKENS && threadIdx.x % MMA_TOKENS == 0 && r < GDN_CONV_DIM) {
            tap = *reinterpret_cast<const float4*>(taps + 4 * r);
            s0 = conv_state[r];
            s1 = conv_state[GDN_CONV_DIM + r];
            s2 = conv_state[2 * GDN_CONV_DIM + r];
        }
    };
    mma_tiles(
        smem, w, out_dim, 1, part,
        [&](int r, int, float v) {
            v = l.add(v, r, 0);
            if (r < GDN_CONV_DIM) {
                mixed[r] = silu(tap.x * s0 + tap.y * s1 + tap.z * s2 + tap.w * v);
                conv_state[r] = s1;
                conv_state[GDN_CONV_DIM + r] = s2;
                conv_state[2 * GDN_CONV_DIM + r] = v;
            } else {
                y[r] = v;
            }
        },
        [&](int tile) {
            fetch_window(tile);
            l.fetch(tile);
        },
        [&]() { l.first(); });
}
