// embed_rows: h[t] = f32(table[ids[t]]) for each token; one block per token, width 2048.
// ids live on the device (the decode step's token never visits the host).
extern "C" __global__ void embed_rows(const bf16* __restrict__ table, const int* __restrict__ ids,
                                      float* __restrict__ h, int width) {
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x;
    const bf16* row = table + (size_t)ids[t] * width;
    float* out = h + (size_t)t * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) out[i] = __bfloat162float(row[i]);
}
