// gemv_bf16: y[out] = W[out, in] · x[in] for one token (decode projections).
// W bf16 row-major, x bf16, y f32; f32 accumulation.
// Geometry: one warp per output row, 8 rows per 256-thread block; x staged once per block in
// shared memory as f32; each lane streams 16-byte chunks of its row (in % 256 == 0), so a row of
// 2048 is 8 independent 16-byte loads per lane in flight.
// Next step (issue 5): split-K for short rows, RMSNorm folded into the x staging, PDL.
extern "C" __global__ void gemv_bf16(const bf16* __restrict__ w, const bf16* __restrict__ x,
                                     float* __restrict__ y, int out_dim, int in_dim) {
    pdl_trigger();
    pdl_wait();
    extern __shared__ float xs[];
    for (int i = threadIdx.x; i < in_dim; i += blockDim.x) xs[i] = __bfloat162float(x[i]);
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + warp;
    if (row >= out_dim) return;
    const bf16* wr = w + (size_t)row * in_dim;
    float acc = 0.f;
    for (int k = lane * 8; k < in_dim; k += 256) {
        float wv[8];
        load8(wr + k, wv);
        const float4 a = *reinterpret_cast<const float4*>(xs + k);
        const float4 b = *reinterpret_cast<const float4*>(xs + k + 4);
        acc += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w;
        acc += wv[4] * b.x + wv[5] * b.y + wv[6] * b.z + wv[7] * b.w;
    }
    acc = warp_sum(acc);
    if (lane == 0) y[row] = acc;
}
