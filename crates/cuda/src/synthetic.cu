// Random weights made on the device (solo bench --synthetic): the full model is 70 GB of bf16,
// more than the GPU machine's disk, and speed does not depend on the values.
// Values: center + scale · u with u uniform in [-1, 1) from a per-element hash of (seed, index).

__device__ __forceinline__ float hash_uniform(unsigned long long seed, unsigned long long i) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + i;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

extern "C" __global__ void fill_random_bf16(bf16* __restrict__ dst, long long n, unsigned long long seed,
                                            float center, float scale) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(center + scale * hash_uniform(seed, i));
}

extern "C" __global__ void fill_random_f32(float* __restrict__ dst, long long n, unsigned long long seed,
                                           float center, float scale) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = center + scale * hash_uniform(seed, i);
}

// FP8 e4m3 weights: q = e4m3(448 · u), u uniform in [-1, 1) (their block scales are filled with
// fill_random_f32, centre scale/448, spread 0, so w = q · s spans ±scale like the bf16 fill).
extern "C" __global__ void fill_random_fp8(unsigned char* __restrict__ dst, long long n, unsigned long long seed,
                                           float center, float scale) {
    pdl_wait();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float v = center + scale * hash_uniform(seed, i);
        unsigned short two = 0;
#if __CUDA_ARCH__ < 890
        __trap();  // FP8 weights need sm_89 (refused before this runs)
#else
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(two) : "f"(0.f), "f"(v));  // low byte: v
#endif
        dst[i] = (unsigned char)(two & 0xff);
    }
}

// int4 rows (common.cuh's layout) of `cols` columns: random values q (0..15), every group word
// the f16 `scale` with zero point 8, so w = (q − 8) · s spans about ±8 s.
extern "C" __global__ void fill_random_int4_rows(unsigned int* __restrict__ dst, long long rows, int cols,
                                                 unsigned long long seed, float scale) {
    pdl_wait();
    const int values = cols / 8, words = values + cols / INT4_GROUP;
    const unsigned int group = (unsigned int)__half_as_ushort(__float2half_rn(scale)) | (8u << 16);
    const long long n = rows * words;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int w = (int)(i % words);
        // 16 random bits from each of two draws (hash_uniform has 24)
        const unsigned int hi = (unsigned int)((hash_uniform(seed, 2 * i) + 1.f) * 8388608.f) & 0xffffu;
        const unsigned int lo = (unsigned int)((hash_uniform(seed, 2 * i + 1) + 1.f) * 8388608.f) & 0xffffu;
        dst[i] = w < values ? hi << 16 | lo : group;
    }
}

// GGUF rows (kquant.rs: `format` 0 Q4_K, 1 Q5_K, 2 Q6_K) of `cols` columns: random values (and
// high bits, and the K formats' packed 6-bit scales and mins, Q6_K's i8 scales), every block's d
// the f16 `scale` (Q4_K's and Q5_K's dmin 8 · scale), so the weights span about ±8 · 63 · scale
// (Q4_K; twice that for Q5_K) or ±32 · 128 · scale (Q6_K).
extern "C" __global__ void fill_random_kquant_rows(unsigned int* __restrict__ dst, long long rows, int cols, int format,
                                                   unsigned long long seed, float scale) {
    pdl_wait();
    const int row_bytes = format == 2 ? Q6KFormat::row_bytes(cols) : format == 1 ? Q5KFormat::row_bytes(cols) : Q4KFormat::row_bytes(cols);
    const int row_words = row_bytes / 4;
    const int headers = format == 1 ? cols / 2 + cols / 8 : cols / 2;  // Q4_K/Q5_K: the blocks' 16 bytes
    const unsigned int d = (unsigned int)__half_as_ushort(__float2half_rn(scale));
    const unsigned int dmin = (unsigned int)__half_as_ushort(__float2half_rn(8.f * scale));
    const long long n = rows * row_words;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const int o = 4 * (int)(i % row_words);  // byte offset in the row
        const unsigned int hi = (unsigned int)((hash_uniform(seed, 2 * i) + 1.f) * 8388608.f) & 0xffffu;
        const unsigned int lo = (unsigned int)((hash_uniform(seed, 2 * i + 1) + 1.f) * 8388608.f) & 0xffffu;
        unsigned int word = hi << 16 | lo;
        if (format == 2) {
            const int ds = cols / 2 + cols / 4 + cols / 16;
            if (o >= ds) word = o < ds + cols / 128 ? d | d << 16 : 0u;
        } else if (o >= headers && (o - headers) % 16 == 0) {
            word = d | dmin << 16;
        }
        dst[i] = word;
    }
}
