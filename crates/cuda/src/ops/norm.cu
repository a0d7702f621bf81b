// Zero-centred RMSNorm: out = bf16(h · rsqrt(mean(h²) + eps) · w1p), where w1p
// already holds 1 + w; rows of HIDDEN. One block per token row; the row's statistics in f32
// (`rms_scale` in common.cuh, which the decode GEMVs that fold the norm in use too).
//
// rms_norm_bf16:      out = norm(h)
// add_rms_norm_bf16:  h += delta (the residual add of the previous sub-layer), then out = norm(h)
// rms_norm_twice_bf16: out = norm(norm(h; w1p); w2p), the inner norm in f32 (the MTP head's
//                      input: the main model's final norm, then the head's pre_fc_norm_hidden)
// Geometry: one block of 256 threads (STAGE_THREADS) per row (8 values per thread).

__device__ __forceinline__ void norm_row(const float* __restrict__ h, const float* __restrict__ w1p,
                                         bf16* __restrict__ out, float eps) {
    __shared__ float red[32];
    float hv[HIDDEN / STAGE_THREADS];
    const float inv = rms_scale(h, eps, red, hv);
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) {
        const int i = threadIdx.x + k * STAGE_THREADS;
        out[i] = __float2bfloat16(hv[k] * inv * w1p[i]);
    }
}

extern "C" __global__ void rms_norm_bf16(const float* __restrict__ h, const float* __restrict__ w1p,
                                         bf16* __restrict__ out, float eps) {
    pdl_wait();
    const size_t row = blockIdx.x;
    norm_row(h + row * HIDDEN, w1p, out + row * HIDDEN, eps);
}

extern "C" __global__ void add_rms_norm_bf16(float* __restrict__ h, const float* __restrict__ delta,
                                             const float* __restrict__ w1p, bf16* __restrict__ out, float eps) {
    pdl_wait();
    const size_t row = blockIdx.x;
    float* hr = h + row * HIDDEN;
    const float* dr = delta + row * HIDDEN;
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) hr[threadIdx.x + k * STAGE_THREADS] += dr[threadIdx.x + k * STAGE_THREADS];
    __syncthreads();
    norm_row(hr, w1p, out + row * HIDDEN, eps);
}

extern "C" __global__ void rms_norm_twice_bf16(const float* __restrict__ h, const float* __restrict__ w1p,
                                               const float* __restrict__ w2p, bf16* __restrict__ out, float eps) {
    pdl_wait();
    __shared__ float red[32];
    const size_t row = blockIdx.x;
    float v[HIDDEN / STAGE_THREADS];
    const float inv = rms_scale(h + row * HIDDEN, eps, red, v);
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) {
        v[k] *= inv * w1p[threadIdx.x + k * STAGE_THREADS];
        ss += v[k] * v[k];
    }
    __syncthreads();  // `red` is reused
    const float inv2 = rsqrtf(block_sum(ss, red) / HIDDEN + eps);
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) {
        const int i = threadIdx.x + k * STAGE_THREADS;
        out[row * HIDDEN + i] = __float2bfloat16(v[k] * inv2 * w2p[i]);
    }
}
