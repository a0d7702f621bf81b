// Decode projections, one token: y[out] = W[out, in] · x[in], W bf16 row-major, f32 accumulation.
//
// gemv_bf16:       y = W · x            (x bf16 [in], in = 2048 or 4096); with accumulate,
//                  y += W · x           (the residual add of out_proj / o_proj folded in)
// gemv_norm_bf16:  y = W · RMSNorm(h)   (h f32 [2048], the residual stream: the sub-layer's input
//                  norm folded into its first projection; each block normalises h itself)
// (The projections of the residual stream in the decode steps — q/k/v, the GDN in-projection —
// run on the tensor cores: gemv_mma.cu. gemv_norm_bf16 remains the lm_head's.)
//
// Geometry, in 2048 (the in-projections, q/k/v, lm_head: streaming): two blocks of 8 warps
// per SM (grid = 2 × the SM count); the grid's warps take the rows round-robin (warp g of G: rows
// g, g + G, ...). Each warp keeps DEPTH = 2 rows in flight in its own shared-memory ring
// (cp.async, 8 KB), takes the dot of the older while the other lands, and refills the slot with
// the row DEPTH further on: one ramp and a one-row tail whatever the row count, where a grid of
// fixed tiles paid a ramp and a tail per wave. The first rows are requested before pdl_wait();
// each lane reads back only the pieces it copied itself (no warp barrier) and keeps its 64 x
// values in registers (ncu: with x re-read from shared memory per row and 8 warps per SM, the
// dots were latency-bound at 8.7 cycles per instruction). Dynamic shared memory 72 KB.
// In 4096 (out_proj / o_proj): tiles of 8 rows, see gemv_tiles_4096.

#define GEMV_WARPS 8

template <int IN>  // 2048 (x in registers: 64 floats per lane)
struct GemvStream {
    static constexpr int DEPTH = 4096 / IN;    // rows in flight per warp (2 for in 2048)
    static constexpr int PIECES = IN / 256;    // 16-byte pieces per lane and row
    bf16* ring;                                // this warp's [DEPTH][IN]
    int first, stride, rows;                   // rows first, first + stride, ... < rows

    // Where x is staged (f32 [IN]): after the 8 warps' rings in the dynamic shared memory.
    static __device__ __forceinline__ float* staging(unsigned char* smem) {
        return reinterpret_cast<float*>(smem + GEMV_WARPS * DEPTH * IN * sizeof(bf16));
    }

    __device__ __forceinline__ GemvStream(unsigned char* smem, int rows_) : rows(rows_) {
        const int warp = threadIdx.x >> 5;
        ring = reinterpret_cast<bf16*>(smem) + (size_t)warp * DEPTH * IN;
        first = blockIdx.x * GEMV_WARPS + warp;
        stride = gridDim.x * GEMV_WARPS;
    }

    // Requests row r (if it exists) into ring slot d, as one commit group (empty past the end,
    // so the group count stays uniform).
    __device__ __forceinline__ void request(const bf16* __restrict__ W, int r, int d) const {
        const int lane = threadIdx.x & 31;
        if (r < rows) {
#pragma unroll
            for (int j = 0; j < PIECES; j++)
                cp_async16(ring + d * IN + j * 256 + lane * 8, W + (size_t)r * IN + j * 256 + lane * 8, true);
        }
        cp_async_commit();
    }

    __device__ __forceinline__ void prologue(const bf16* __restrict__ W) const {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) request(W, first + d * stride, d);
    }

    // For every row of this warp, in order: store(row, d, dot of the row with xs), d = the ring
    // slot the row came through. Call after prologue() and after xs is staged; before_refill(rn, d)
    // runs when slot d is about to receive row rn (to fetch per-row data ahead, e.g. an old y).
    template <class Store, class Ahead>
    __device__ __forceinline__ void run(const bf16* __restrict__ W, const float* xs, Store store, Ahead before_refill) const {
        const int lane = threadIdx.x & 31;
        // This lane always multiplies the same columns (j·256 + lane·8 ..+8): their x values are
        // read from shared memory once, into registers (8 × PIECES floats).
        float4 xa[PIECES], xb[PIECES];
#pragma unroll
        for (int j = 0; j < PIECES; j++) {
            xa[j] = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8);
            xb[j] = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8 + 4);
        }
        for (int k0 = 0; first + k0 * stride < rows; k0 += DEPTH) {
#pragma unroll
            for (int d = 0; d < DEPTH; d++) {
                const int r = first + (k0 + d) * stride;
                if (r >= rows) break;
                cp_async_wait<DEPTH - 1>();  // the oldest of the DEPTH groups in flight has landed
                float acc = 0.f;
#pragma unroll
                for (int j = 0; j < PIECES; j++)
                    acc += dot_piece(*reinterpret_cast<const uint4*>(ring + d * IN + j * 256 + lane * 8), xa[j], xb[j]);
                acc = warp_sum(acc);  // its shuffles also finish this lane's reads of slot d
                store(r, d, acc);
                const int rn = r + DEPTH * stride;
                before_refill(rn, d);
                request(W, rn, d);
            }
        }
    }
};

// GemvStream::run for several tokens at once (gemv_norm_tokens_bf16): each row, once landed, is
// read into registers and dotted with every token's x (bf16 [tokens][IN] in shared memory: the
// bf16-rounded values run() reads as f32, in half the shared-memory traffic, which bounds this
// loop), each dot summed exactly as run() sums it; store(row, token, dot).
template <int IN, class Store>
__device__ __forceinline__ void run_tokens(const GemvStream<IN>& s, const bf16* __restrict__ W, const bf16* xb,
                                           int tokens, Store store) {
    constexpr int DEPTH = GemvStream<IN>::DEPTH, PIECES = GemvStream<IN>::PIECES;
    const int lane = threadIdx.x & 31;
    for (int k0 = 0; s.first + k0 * s.stride < s.rows; k0 += DEPTH) {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) {
            const int r = s.first + (k0 + d) * s.stride;
            if (r >= s.rows) break;
            cp_async_wait<DEPTH - 1>();
            uint4 wv[PIECES];
#pragma unroll
            for (int j = 0; j < PIECES; j++) wv[j] = *reinterpret_cast<const uint4*>(s.ring + d * IN + j * 256 + lane * 8);
            for (int t = 0; t < tokens; t++) {
                const bf16* x = xb + t * IN + lane * 8;
                float acc = 0.f;
#pragma unroll
                for (int j = 0; j < PIECES; j++) {
                    float f[8];
                    unpack8(*reinterpret_cast<const uint4*>(x + j * 256), f);
                    acc += dot_piece(wv[j], make_float4(f[0], f[1], f[2], f[3]), make_float4(f[4], f[5], f[6], f[7]));
                }
                store(r, t, warp_sum(acc));  // the shuffles also finish this lane's reads of wv
            }
            s.request(W, r + DEPTH * s.stride, d);
        }
    }
}

template <int IN>
__device__ __forceinline__ void gemv_x(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                       float* __restrict__ y, int out_dim, bool accumulate) {
    extern __shared__ __align__(16) unsigned char smem[];
    float* xs = GemvStream<IN>::staging(smem);
    const GemvStream<IN> s(smem, out_dim);
    s.prologue(w);
    pdl_wait();
    pdl_trigger();
    // With accumulate, each row's old y is fetched when the row is requested, not after its dot.
    const bool lead = (threadIdx.x & 31) == 0;
    float old[GemvStream<IN>::DEPTH];
#pragma unroll
    for (int d = 0; d < GemvStream<IN>::DEPTH; d++) {
        const int r = s.first + d * s.stride;
        old[d] = accumulate && lead && r < out_dim ? y[r] : 0.f;
    }
    stage_bf16<IN>(x, xs);
    s.run(
        w, xs, [&](int r, int d, float v) { if (lead) y[r] = accumulate ? old[d] + v : v; },
        [&](int rn, int d) { old[d] = accumulate && lead && rn < out_dim ? y[rn] : 0.f; });
}

// in 4096 (out_proj, o_proj: 2048 rows, ~2 per warp of a streaming grid) runs faster as plain
// tiles: GemvTile<4096>, 8 rows per block, every block's weights requested at once
// (11.1 against 11.5 µs, H200, bench/RESULTS.md). Grid ceil(out / 8); dynamic shared memory 16 KB.
__device__ __forceinline__ void gemv_tiles_4096(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                                float* __restrict__ y, int out_dim, bool accumulate) {
    extern __shared__ __align__(16) float xs[];
    GemvTile<4096> tile;
    tile.load(w, out_dim);
    pdl_wait();
    const int row = tile.row(0);
    const bool lead = (threadIdx.x & 31) == 0 && row < out_dim;
    const float old = accumulate && lead ? y[row] : 0.f;  // fetched while the weights stream in
    stage_bf16<4096>(x, xs);
    pdl_trigger();
    const float v = tile.dot(0, xs);
    if (lead) y[row] = accumulate ? old + v : v;
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y, int out_dim,
              int in_dim, int accumulate) {
    if (in_dim == 2048)
        gemv_x<2048>(w, x, y, out_dim, accumulate);
    else
        gemv_tiles_4096(w, x, y, out_dim, accumulate);
}

// gemv_tokens_4096_bf16: out_proj / o_proj for `tokens` ≤ 8 tokens at once (the multi-token and
// batched steps): y[t, r] += W[r] · x[t], x bf16 [tokens, 4096], y f32 [tokens, out]. Each block's
// 8 rows come into registers once (GemvTile<4096>) and are dotted with every token's x in turn
// (staged as bf16, 8 KB a token, and widened exactly as stage_bf16 widens it), each dot summed as
// gemv_tiles_4096 sums it: every token gets the bits of its own launch, for one read of W.
// Grid ceil(out / 8); dynamic shared memory 8 KB a token.
extern "C" __global__ void __launch_bounds__(256)
    gemv_tokens_4096_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y, int out_dim,
                          int tokens) {
    extern __shared__ __align__(16) bf16 xb[];
    GemvTile<4096> tile;
    tile.load(w, out_dim);
    pdl_wait();
    const int row = tile.row(0);
    const bool lead = (threadIdx.x & 31) == 0 && row < out_dim;
    for (int i = threadIdx.x; i < tokens * 512; i += 256)
        reinterpret_cast<uint4*>(xb)[i] = __ldcg(reinterpret_cast<const uint4*>(x) + i);
    __syncthreads();
    pdl_trigger();
    const int lane = threadIdx.x & 31;
    for (int t = 0; t < tokens; t++) {
        const float old = lead ? y[(size_t)t * out_dim + row] : 0.f;
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < GemvTile<4096>::PIECES; j++) {
            float f[8];
            unpack8(*reinterpret_cast<const uint4*>(xb + t * 4096 + j * 256 + lane * 8), f);
            acc += dot_piece(tile.w[0][j], make_float4(f[0], f[1], f[2], f[3]), make_float4(f[4], f[5], f[6], f[7]));
        }
        const float v = warp_sum(acc);
        if (lead) y[(size_t)t * out_dim + row] = old + v;
    }
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_norm_bf16(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p,
                   float* __restrict__ y, int out_dim, float eps) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    float* xs = GemvStream<HIDDEN>::staging(smem);
    const GemvStream<HIDDEN> s(smem, out_dim);
    s.prologue(w);
    pdl_wait();
    pdl_trigger();
    stage_rms_norm(h, w1p, eps, xs, red);
    const bool lead = (threadIdx.x & 31) == 0;
    s.run(w, xs, [&](int r, int, float v) { if (lead) y[r] = v; }, [](int, int) {});
}

// gemv_norm_tokens_bf16: gemv_norm_bf16 for `tokens` ≤ 8 tokens at once (the multi-token decode
// step): y[t·y_stride + r] = W[r] · RMSNorm(h[t]) for t < tokens, h f32 [tokens, 2048]. Each row
// streams through the ring once for all the tokens; each token's x is staged as gemv_norm_bf16
// stages it (after the rings, as bf16: 4 KB a token) and each dot is summed as it sums it, so every token
// gets the bits of its own gemv_norm_bf16 launch. Dynamic shared memory 64 KB + 4 KB a token.
extern "C" __global__ void __launch_bounds__(256)
    gemv_norm_tokens_bf16(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p,
                          float* __restrict__ y, int out_dim, int y_stride, int tokens, float eps) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    bf16* xb = reinterpret_cast<bf16*>(GemvStream<HIDDEN>::staging(smem));
    const GemvStream<HIDDEN> s(smem, out_dim);
    s.prologue(w);
    pdl_wait();
    pdl_trigger();
    for (int t = 0; t < tokens; t++) stage_rms_norm_bf16(h + (size_t)t * HIDDEN, w1p, eps, xb + t * HIDDEN, red);
    const bool lead = (threadIdx.x & 31) == 0;
    run_tokens<HIDDEN>(s, w, xb, tokens, [&](int r, int t, float v) { if (lead) y[(size_t)t * y_stride + r] = v; });
}
