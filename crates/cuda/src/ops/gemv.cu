// Decode projections, one token: y[out] = W[out, in] · x[in], W bf16 row-major, f32 accumulation
// (GemvTile in common.cuh: 256 threads, the block's weight rows requested into registers before
// pdl_wait(), so they stream in while the previous kernel finishes).
//
// gemv_bf16:       y = W · x            (x bf16 [in], in = 2048 or 4096); with accumulate,
//                  y += W · x           (the residual add of out_proj / o_proj folded in)
// gemv_norm_bf16:  y = W · RMSNorm(h)   (h f32 [2048], the residual stream: the sub-layer's input
//                  norm folded into its first projection; each block normalises h itself)
// Grid: ceil(out / GemvTile<in>::ROWS) blocks (16 rows per block for in 2048, 8 for 4096); at
// most 80 registers (__launch_bounds__(256, 3)), so 3 blocks share an SM: 196 KB of weights in
// flight per SM (with 2, the 2048-wide GEMVs ran in 3 waves).
// Dynamic shared memory: in × 4 bytes (x staged as f32).

template <int IN>
__device__ __forceinline__ void gemv_x(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                       float* __restrict__ y, int out_dim, bool accumulate) {
    extern __shared__ __align__(16) float xs[];
    GemvTile<IN> tile;
    tile.load(w, out_dim);
    pdl_wait();
    // With accumulate, the old y is fetched now, while the weights stream in, not after the dots.
    float old[GemvTile<IN>::ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < GemvTile<IN>::ROWS_PER_WARP; r++)
        old[r] = accumulate && (threadIdx.x & 31) == 0 && tile.row(r) < out_dim ? y[tile.row(r)] : 0.f;
    stage_bf16<IN>(x, xs);
    pdl_trigger();
#pragma unroll
    for (int r = 0; r < GemvTile<IN>::ROWS_PER_WARP; r++) {
        const float v = tile.dot(r, xs);
        const int row = tile.row(r);
        if ((threadIdx.x & 31) == 0 && row < out_dim) y[row] = accumulate ? old[r] + v : v;
    }
}

extern "C" __global__ void __launch_bounds__(256, 3)
    gemv_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x, float* __restrict__ y, int out_dim,
              int in_dim, int accumulate) {
    if (in_dim == 2048)
        gemv_x<2048>(w, x, y, out_dim, accumulate);
    else
        gemv_x<4096>(w, x, y, out_dim, accumulate);
}

extern "C" __global__ void __launch_bounds__(256, 3)
    gemv_norm_bf16(const bf16* __restrict__ w, const float* __restrict__ h, const float* __restrict__ w1p,
                   float* __restrict__ y, int out_dim, float eps) {
    extern __shared__ __align__(16) float xs[];
    __shared__ float red[32];
    GemvTile<HIDDEN> tile;
    tile.load(w, out_dim);
    pdl_wait();
    stage_rms_norm(h, w1p, eps, xs, red);
    pdl_trigger();
#pragma unroll
    for (int r = 0; r < GemvTile<HIDDEN>::ROWS_PER_WARP; r++) {
        const float v = tile.dot(r, xs);
        const int row = tile.row(r);
        if ((threadIdx.x & 31) == 0 && row < out_dim) y[row] = v;
    }
}
