// Greedy sampling on the device: the index of the largest logit (lowest index on ties).
// argmax_partial: each of the grid's blocks reduces a strided slice of one row to (max, index).
// argmax_final: one block reduces the partials and writes the token id (i32) for the next step.
// Geometry: ARGMAX_PARTS blocks × 256 threads, then 1 block × 256 threads.
#define ARGMAX_PARTS 256

__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
}

__device__ __forceinline__ void block_argmax(float& v, int& i) {
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sv[warp] = v; si[warp] = i; }
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        v = lane < warps ? sv[lane] : -INFINITY;
        i = lane < warps ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    }
}

extern "C" __global__ void argmax_partial(const float* __restrict__ logits, int n,
                                          float* __restrict__ part_val, int* __restrict__ part_idx) {
    pdl_trigger();
    pdl_wait();
    float v = -INFINITY;
    int i = 0x7fffffff;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) better(v, i, logits[k], k);
    block_argmax(v, i);
    if (threadIdx.x == 0) { part_val[blockIdx.x] = v; part_idx[blockIdx.x] = i; }
}

extern "C" __global__ void argmax_final(const float* __restrict__ part_val, const int* __restrict__ part_idx,
                                        int parts, int* __restrict__ out) {
    pdl_trigger();
    pdl_wait();
    float v = -INFINITY;
    int i = 0x7fffffff;
    for (int k = threadIdx.x; k < parts; k += blockDim.x) better(v, i, part_val[k], part_idx[k]);
    block_argmax(v, i);
    if (threadIdx.x == 0) *out = i;
}

// advance_position: *pos += n (the decode step's last kernel, so replays see the new length).
extern "C" __global__ void advance_position(int* pos, int n) { pdl_trigger(); pdl_wait(); *pos += n; }
