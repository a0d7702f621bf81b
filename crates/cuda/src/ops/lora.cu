// LoRA's low-rank term, y += s · B (A x), in two steps (lora.rs says where they run):
//   lora_shrink: u = A x for one token (more tokens: a cuBLAS GEMM),
//   lora_expand: y += s · B u for each adapted matrix of the site.

// lora_shrink: u[j] = Σ_c a[j, c] · x[c] for one token: x bf16 [in], a bf16 [rows, in] (the site's
// A matrices stacked), u f32 [rows]. A warp per row j (8 per block), 8 columns a lane a step;
// in_dim % 256 == 0.
extern "C" __global__ void __launch_bounds__(256) lora_shrink(const bf16* __restrict__ x, const bf16* __restrict__ a,
                                                              float* __restrict__ u, int rows, int in_dim) {
    pdl_wait();
    const int lane = threadIdx.x & 31, j = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (j >= rows) return;
    const bf16* row = a + (size_t)j * in_dim;
    float sum = 0.f;
    for (int c = lane * 8; c < in_dim; c += 256) {
        const uint4 wv = *reinterpret_cast<const uint4*>(row + c);
        const uint4 xv = *reinterpret_cast<const uint4*>(x + c);
        const bf16* w8 = reinterpret_cast<const bf16*>(&wv);
        const bf16* x8 = reinterpret_cast<const bf16*>(&xv);
#pragma unroll
        for (int k = 0; k < 8; k++) sum += __bfloat162float(w8[k]) * __bfloat162float(x8[k]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) u[j] = sum;
}

#define LORA_TOKENS 8
#define LORA_MAX_RANK 256

// lora_expand: y[t, i] += scale · Σ_k b[i, k] · u[t, k] for i < rows, t < tokens: b bf16
// [rows, rank] (rank ≤ 256), u f32 rows u_stride apart, y f32 rows y_stride apart. A thread per
// output row i; a block's 8 tokens' u in shared memory (grid: rows / 256 × tokens / 8).
extern "C" __global__ void __launch_bounds__(256)
    lora_expand(const float* __restrict__ u, int u_stride, const bf16* __restrict__ b, int rank, float scale,
                float* __restrict__ y, int y_stride, int rows, int tokens) {
    __shared__ float us[LORA_TOKENS][LORA_MAX_RANK];
    pdl_wait();
    const int t0 = blockIdx.y * LORA_TOKENS, nt = min(LORA_TOKENS, tokens - t0);
    for (int e = threadIdx.x; e < LORA_TOKENS * rank; e += blockDim.x) {
        const int t = e / rank, k = e % rank;
        us[t][k] = t < nt ? u[(size_t)(t0 + t) * u_stride + k] : 0.f;
    }
    __syncthreads();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float acc[LORA_TOKENS] = {};
    const bf16* row = b + (size_t)i * rank;
    for (int k = 0; k < rank; k++) {
        const float bk = __bfloat162float(row[k]);
#pragma unroll
        for (int t = 0; t < LORA_TOKENS; t++) acc[t] += bk * us[t][k];
    }
    for (int t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + i] += scale * acc[t];
}
