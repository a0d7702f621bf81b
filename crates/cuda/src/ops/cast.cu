// cast_f32_to_bf16: dst[i] = bf16(src[i]) (round to nearest even), n elements, grid-stride.
extern "C" __global__ void cast_f32_to_bf16(const float* __restrict__ src, bf16* __restrict__ dst, int n) {
    pdl_wait();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}
