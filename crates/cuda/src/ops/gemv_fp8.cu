// Decode projections with FP8 weights, one token: y[out] = W[out, in] · x[in], W e4m3 row-major
// [out, 2048] with scales f32 [out/128, 16] (w = q · s of its 128×128 block), f32 accumulation:
// the FP8 forms of gemv.cu's gemv_norm_bf16 and gemv_mma.cu's gemv_norm_conv_mma_bf16 (same inputs and outputs),
// and the dequantisation prefill multiplies.

#define FP8_WARPS 8

// ---------------------------------------------------------------------------------------------
// The FP8 decode GEMV on the tensor cores (mma.sync m16n8k32, e4m3 × e4m3, f32 accumulation), so
// that no weight is converted at all: widening every weight on the CUDA cores (even two at a time
// to f16) costs more than streaming its byte.
//
// x is given to the MMA as two e4m3 parts: per 128-column group a power-of-two scale sx
// (≥ amax/448), p1 = e4m3(x/sx), p2 = e4m3((x/sx − p1) · 16). For a bf16 x the two parts are
// exact (p1 holds 4 of its 8 significant bits, the remainder is a multiple of x's last bit no
// larger than 8 of them), so x = sx · (p1 + p2/16) but for elements 2^15 below the group's
// largest (e4m3 subnormals). Products and sums are then the tensor cores' f32.
//
// Geometry: a block of 8 warps takes 16-row tiles (tiles blockIdx.x, + gridDim.x, ...); warp w
// takes columns [256w, 256w + 256) of each tile (two scale blocks), streams them (16 rows × 256
// bytes = 4 KB) through a 2-tile cp.async ring in shared memory (16-byte chunks XOR-swizzled by
// row, so that ldmatrix reads them without bank conflicts) and keeps its B fragments (its x
// parts, 32 registers) for the whole kernel; the 8 warps' partial sums meet in shared memory and
// 16 threads write the tile's rows. Dynamic shared memory: the rings (64 KB), then xs f32 [2048],
// the parts e4m3 [2][2048], the group scales f32 [16] and the partial sums f32 [8][16].

#define FP8_TILE_BYTES (16 * 256)
struct Fp8Smem {
    unsigned char ring[FP8_WARPS][2][FP8_TILE_BYTES];
    float xs[HIDDEN];
    unsigned char xq[2][HIDDEN];
    float sx[HIDDEN / 128];
    float part[FP8_WARPS][16];
};

// FP8 tensor-core products and conversions are sm_89 instructions: below that (where solo refuses
// FP8 weights, weights.rs) these compile to a trap.
__device__ __forceinline__ void mma_fp8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ < 890
    __trap();
#else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two f32 → two e4m3 (round to nearest even, saturating), `lo` in the low byte.
__device__ __forceinline__ unsigned short f32x2_to_fp8x2(float lo, float hi) {
    unsigned short two = 0;
#if __CUDA_ARCH__ < 890
    __trap();
#else
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(two) : "f"(hi), "f"(lo));
#endif
    return two;
}

// Warp `warp`'s slice of tile `tile` (rows tile·16 .., columns 256·warp ..) into ring slot
// `slot`: lane l copies chunks l + 32c (row chunk/16, 16-byte column chunk%16, stored at column
// chunk (chunk%16) ^ (row % 8)). One commit group; rows at or past `rows` are zeros.
__device__ __forceinline__ void fp8_request_tile(unsigned char* slot, const unsigned char* __restrict__ W, int tile,
                                                 int rows) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int c = 0; c < 8; c++) {
        const int chunk = lane + 32 * c, row = chunk >> 4, col = chunk & 15;
        const int r = tile * 16 + row;
        cp_async16(slot + row * 256 + ((col ^ (row & 7)) << 4), W + (size_t)(r < rows ? r : 0) * HIDDEN + warp * 256 + col * 16,
                   r < rows);
    }
    cp_async_commit();
}

// xs (f32 [2048], shared, staged) → the e4m3 parts and group scales above. Warp w does groups
// 2w and 2w + 1 (lane l: elements 4l .. 4l + 3 of each). Ends with a barrier.
__device__ __forceinline__ void fp8_split_x(Fp8Smem& s) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < 2; q++) {
        const int g = 2 * warp + q, k = g * 128 + 4 * lane;
        const float4 v = *reinterpret_cast<const float4*>(&s.xs[k]);
        const float amax = warp_max(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        int e = 0;
        frexpf(amax / 448.f, &e);  // amax/448 = m · 2^e, m in [0.5, 1): 2^e ≥ amax/448
        const float sx = amax > 0.f ? ldexpf(1.f, e) : 1.f, inv = 1.f / sx;
        const float x[4] = {v.x * inv, v.y * inv, v.z * inv, v.w * inv};
        const unsigned short a = f32x2_to_fp8x2(x[0], x[1]), b = f32x2_to_fp8x2(x[2], x[3]);
        const float2 pa = fp8x2_to_float2(a), pb = fp8x2_to_float2(b);
        const unsigned short c = f32x2_to_fp8x2((x[0] - pa.x) * 16.f, (x[1] - pa.y) * 16.f);
        const unsigned short d = f32x2_to_fp8x2((x[2] - pb.x) * 16.f, (x[3] - pb.y) * 16.f);
        *reinterpret_cast<uint32_t*>(&s.xq[0][k]) = a | ((uint32_t)b << 16);
        *reinterpret_cast<uint32_t*>(&s.xq[1][k]) = c | ((uint32_t)d << 16);
        if (lane == 0) s.sx[g] = sx;
    }
    __syncthreads();
}

// For every 16-row tile of this block: store(row, W[row] · x) for its rows < rows (threads 0..15,
// one row each). Call with x split (fp8_split_x) and the first two tiles requested (before
// pdl_wait, fp8_request_tile into ring slots 0 and 1).
template <class Store>
__device__ __forceinline__ void fp8_tiles(Fp8Smem& s, const unsigned char* __restrict__ W,
                                          const float* __restrict__ scales, int rows, Store store) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, j = lane & 3;
    uint32_t b[2][8][2];  // [part][k-step][reg]: this lane's x bytes 32·step + 4j (+16)
#pragma unroll
    for (int p = 0; p < 2; p++)
#pragma unroll
        for (int st = 0; st < 8; st++) {
            const int k = warp * 256 + st * 32 + 4 * j;
            b[p][st][0] = *reinterpret_cast<const uint32_t*>(&s.xq[p][k]);
            b[p][st][1] = *reinterpret_cast<const uint32_t*>(&s.xq[p][k + 16]);
        }
    const float sx0 = s.sx[2 * warp], sx1 = s.sx[2 * warp + 1];
    const int tiles = (rows + 15) / 16;
    // ldmatrix.x4 addresses: lane gives row (lane & 7) + 8·((lane >> 3) & 1) of matrix lane/8,
    // whose 16 bytes are the k-step's first (matrices 0, 1) or second (2, 3) half
    const int lrow = (lane & 7) + 8 * ((lane >> 3) & 1), lhalf = lane >> 4;
    int it = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, it++) {
        unsigned char* slot = s.ring[warp][it & 1];
        cp_async_wait<1>();  // this tile's group has landed (the next may be in flight)
        __syncwarp();
        float acc_lo = 0.f, acc_hi = 0.f;  // rows g and g + 8
        const float* srow = scales + (size_t)(tile * 16 / 128) * (HIDDEN / 128) + warp * 2;
#pragma unroll
        for (int kb = 0; kb < 2; kb++) {
            float d1[4] = {0.f, 0.f, 0.f, 0.f}, d2[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int st = kb * 4 + q, col = 2 * st + lhalf;
                uint32_t a[4];
                ldmatrix_x4(a[0], a[1], a[2], a[3],
                            reinterpret_cast<const bf16*>(slot + lrow * 256 + ((col ^ (lrow & 7)) << 4)));
                mma_fp8(d1, a, b[0][st][0], b[0][st][1]);
                mma_fp8(d2, a, b[1][st][0], b[1][st][1]);
            }
            const float sc = __ldg(srow + kb) * (kb ? sx1 : sx0);
            acc_lo += sc * (d1[0] + d2[0] * 0.0625f);
            acc_hi += sc * (d1[2] + d2[2] * 0.0625f);
        }
        __syncwarp();  // every lane's ldmatrix reads of the slot are done
        fp8_request_tile(slot, W, tile + 2 * gridDim.x, rows);
        if (j == 0) {
            s.part[warp][g] = acc_lo;
            s.part[warp][g + 8] = acc_hi;
        }
        __syncthreads();
        if (threadIdx.x < 16) {
            float v = 0.f;
#pragma unroll
            for (int w = 0; w < FP8_WARPS; w++) v += s.part[w][threadIdx.x];
            const int r = tile * 16 + threadIdx.x;
            if (r < rows) store(r, v);
        }
        __syncthreads();
    }
}

// y = W · RMSNorm(h) (h f32 [2048], w1p the norm weight 1 + w): gemv_norm_bf16 for FP8 rows.
extern "C" __global__ void __launch_bounds__(256)
    gemv_norm_fp8(const unsigned char* __restrict__ w, const float* __restrict__ scales, const float* __restrict__ h,
                  const float* __restrict__ w1p, float* __restrict__ y, int out_dim, float eps) {
    extern __shared__ __align__(16) unsigned char smem[];
    Fp8Smem& s = *reinterpret_cast<Fp8Smem*>(smem);
    __shared__ float red[32];
    const int warp = threadIdx.x >> 5;
    fp8_request_tile(s.ring[warp][0], w, blockIdx.x, out_dim);
    fp8_request_tile(s.ring[warp][1], w, blockIdx.x + gridDim.x, out_dim);
    pdl_wait();
    pdl_trigger();
    stage_rms_norm(h, w1p, eps, s.xs, red);
    fp8_split_x(s);
    fp8_tiles(s, w, scales, out_dim, [&](int r, float v) { y[r] = v; });
}

// The GDN decode step's in-projection with FP8 rows [qkv 8192 | z 4096] (out_dim = 12288) and
// the bf16 rows [b 32 | a 32] (`tail`, kept bf16 by the format) written to y[12288 ..12352];
// the causal conv + SiLU folded into the qkv rows as in gemv_norm_conv_mma_bf16 (the same arithmetic):
//   conv_state f32 [3, 8192] (oldest first), taps f32 [8192, 4], mixed f32 [8192] = silu(conv),
//   y f32 [12352] gets z, b, a (its qkv part is left unwritten).
// The 64 tail rows go to warps of the last blocks (they have the fewest tiles: 768 tiles over
// the grid), one row each, loaded into registers before pdl_wait and summed like gemv.cu's rows.
// (At most 128 registers: two blocks per SM.)
#define GDN_TAIL_ROWS 64
extern "C" __global__ void __launch_bounds__(256, 2)
    gemv_norm_conv_fp8(const unsigned char* __restrict__ w, const float* __restrict__ scales,
                       const bf16* __restrict__ tail, const float* __restrict__ h, const float* __restrict__ w1p,
                       float* __restrict__ y, int out_dim, float eps, float* __restrict__ conv_state,
                       const float* __restrict__ taps, float* __restrict__ mixed) {
    extern __shared__ __align__(16) unsigned char smem[];
    Fp8Smem& s = *reinterpret_cast<Fp8Smem*>(smem);
    __shared__ float red[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    fp8_request_tile(s.ring[warp][0], w, blockIdx.x, out_dim);
    fp8_request_tile(s.ring[warp][1], w, blockIdx.x + gridDim.x, out_dim);
    const int tail_row = (gridDim.x - 1 - blockIdx.x) * FP8_WARPS + warp;  // < 64: this warp's tail row
    uint4 tw[HIDDEN / 256];
    if (tail_row < GDN_TAIL_ROWS) {
#pragma unroll
        for (int j = 0; j < HIDDEN / 256; j++) tw[j] = load_weights16(tail + (size_t)tail_row * HIDDEN + j * 256 + lane * 8);
        weights_requested();
    }
    pdl_wait();
    pdl_trigger();
    stage_rms_norm(h, w1p, eps, s.xs, red);
    if (tail_row < GDN_TAIL_ROWS) {
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < HIDDEN / 256; j++) {
            const float* x = s.xs + j * 256 + lane * 8;
            acc += dot_piece(tw[j], *reinterpret_cast<const float4*>(x), *reinterpret_cast<const float4*>(x + 4));
        }
        acc = warp_sum(acc);
        if (lane == 0) y[out_dim + tail_row] = acc;
    }
    fp8_split_x(s);
    fp8_tiles(s, w, scales, out_dim, [&](int r, float v) {
        if (r < GDN_CONV_DIM) {
            const float4 t = *reinterpret_cast<const float4*>(taps + 4 * r);
            const float s0 = conv_state[r], s1 = conv_state[GDN_CONV_DIM + r], s2 = conv_state[2 * GDN_CONV_DIM + r];
            mixed[r] = silu(t.x * s0 + t.y * s1 + t.z * s2 + t.w * v);
            conv_state[r] = s1;
            conv_state[GDN_CONV_DIM + r] = s2;
            conv_state[2 * GDN_CONV_DIM + r] = v;
        } else {
            y[r] = v;
        }
    });
}

// Prefill reads bf16 weights: out (bf16 [rows, cols]) = q · s, for an FP8 matrix q (e4m3
// [rows, cols], cols a multiple of 16) with scales f32 [ceil(rows/128), ceil(cols/128)].
// Each thread converts 16 weights (one 16-byte piece) per step of a grid-stride loop.
extern "C" __global__ void __launch_bounds__(256)
    dequantize_fp8(const unsigned char* __restrict__ q, const float* __restrict__ scales, bf16* __restrict__ out,
                   long long rows, int cols) {
    const long long pieces = rows * (cols / 16);
    const int block_cols = (cols + 127) / 128;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < pieces;
         p += (long long)gridDim.x * blockDim.x) {
        const long long r = p / (cols / 16);
        const int c = (int)(p % (cols / 16)) * 16;
        const float s = scales[(r / 128) * block_cols + c / 128];
        const uint4 raw = *reinterpret_cast<const uint4*>(q + r * cols + c);
        const unsigned int words[4] = {raw.x, raw.y, raw.z, raw.w};
        __nv_bfloat162 o[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 a = fp8x2_to_float2((unsigned short)(words[i] & 0xffff));
            const float2 b = fp8x2_to_float2((unsigned short)(words[i] >> 16));
            o[2 * i] = __floats2bfloat162_rn(a.x * s, a.y * s);
            o[2 * i + 1] = __floats2bfloat162_rn(b.x * s, b.y * s);
        }
        uint4* dst = reinterpret_cast<uint4*>(out + r * cols + c);
        dst[0] = *reinterpret_cast<uint4*>(&o[0]);
        dst[1] = *reinterpret_cast<uint4*>(&o[4]);
    }
}
