// Decode projections with FP8 weights, one token: y[out] = W[out, in] · x[in], W e4m3 row-major
// [out, in] with scales f32 [out/128, in/128] (w = q · s of its 128×128 block), f32 accumulation.
// The FP8 forms of gemv.cu's gemv_norm_bf16 and gemv_norm_conv_bf16, with the same geometry:
// two blocks of 8 warps per SM, the grid's warps take the rows round-robin (warp g of G: rows
// g, g + G, ...), each warp streams its rows through its own cp.async ring in shared memory.
// A row is half the bytes of a bf16 one, so the ring holds DEPTH = 4 rows (8 KB per warp, as
// the bf16 ring's 2): the same bytes in flight.
//
// Lane l owns the 16-byte pieces j·512 + 16·l (16 weights, columns j·512 + 16·l ..+16) of every
// row: each piece lies inside one 128-column block, whose scale multiplies the piece's dot
// (block 4·j + l/8 of the row's block row r/128; dot16_fp8 in common.cuh). The lane keeps its
// 64 x values in registers (f16 pairs) and the scales of the rows in flight (fetched when a row
// is requested).

#define FP8_WARPS 8

template <int IN>
struct Fp8Stream {
    static constexpr int DEPTH = 8192 / IN;  // rows in flight per warp
    static constexpr int PIECES = IN / 512;  // 16-byte pieces per lane and row
    static constexpr int BLOCKS = IN / 128;  // scale blocks per row
    unsigned char* ring;                     // this warp's [DEPTH][IN] bytes
    int first, stride, rows;                 // rows first, first + stride, ... < rows

    // Where x is staged (f32 [IN]): after the 8 warps' rings.
    static __device__ __forceinline__ float* staging(unsigned char* smem) {
        return reinterpret_cast<float*>(smem + FP8_WARPS * DEPTH * IN);
    }

    __device__ __forceinline__ Fp8Stream(unsigned char* smem, int rows_) : rows(rows_) {
        const int warp = threadIdx.x >> 5;
        ring = smem + (size_t)warp * DEPTH * IN;
        first = blockIdx.x * FP8_WARPS + warp;
        stride = gridDim.x * FP8_WARPS;
    }

    // Requests row r (if it exists) into ring slot d as one commit group, and returns this
    // lane's scales of the row.
    __device__ __forceinline__ void request(const unsigned char* __restrict__ W, const float* __restrict__ scales,
                                            int r, int d, float (&s)[PIECES]) const {
        const int lane = threadIdx.x & 31;
        if (r < rows) {
#pragma unroll
            for (int j = 0; j < PIECES; j++)
                cp_async16(ring + d * IN + j * 512 + lane * 16, W + (size_t)r * IN + j * 512 + lane * 16, true);
            const float* sr = scales + (r / 128) * BLOCKS + (lane >> 3);
#pragma unroll
            for (int j = 0; j < PIECES; j++) s[j] = __ldg(sr + 4 * j) * FP8_X_UNSCALE;
        }
        cp_async_commit();
    }

    // For every row of this warp, in order: store(row, d, dot of the row with xs); d is the ring
    // slot the row came through; before_refill(rn, d) runs when slot d is about to receive row rn.
    // The prologue's requests (rows first .. first + (DEPTH-1)·stride) come from the caller
    // (before pdl_wait), with their scales in s.
    template <class Store, class Ahead>
    __device__ __forceinline__ void run(const unsigned char* __restrict__ W, const float* __restrict__ scales,
                                        const float* xs, float (&s)[DEPTH][PIECES], Store store,
                                        Ahead before_refill) const {
        const int lane = threadIdx.x & 31;
        __half2 xv[PIECES][8];
#pragma unroll
        for (int j = 0; j < PIECES; j++) {
            float v[16];
            load16(xs + j * 512 + lane * 16, v);
            to_x16(v, xv[j]);
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
                    acc += s[d][j] * dot16_fp8(*reinterpret_cast<const uint4*>(ring + d * IN + j * 512 + lane * 16), xv[j]);
                acc = warp_sum(acc);  // its shuffles also finish this lane's reads of slot d
                store(r, d, acc);
                const int rn = r + DEPTH * stride;
                before_refill(rn, d);
                request(W, scales, rn, d, s[d]);
            }
        }
    }

    __device__ __forceinline__ void prologue(const unsigned char* __restrict__ W, const float* __restrict__ scales,
                                             float (&s)[DEPTH][PIECES]) const {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) request(W, scales, first + d * stride, d, s[d]);
    }
};

// y = W · RMSNorm(h) (h f32 [2048], w1p the norm weight 1 + w): gemv_norm_bf16 for FP8 rows.
// Dynamic shared memory 72 KB.
extern "C" __global__ void __launch_bounds__(256, 2)
    gemv_norm_fp8(const unsigned char* __restrict__ w, const float* __restrict__ scales, const float* __restrict__ h,
                  const float* __restrict__ w1p, float* __restrict__ y, int out_dim, float eps) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    using S = Fp8Stream<HIDDEN>;
    float* xs = S::staging(smem);
    const S st(smem, out_dim);
    float s[S::DEPTH][S::PIECES];
    st.prologue(w, scales, s);
    pdl_wait();
    pdl_trigger();
    stage_rms_norm(h, w1p, eps, xs, red);
    const bool lead = (threadIdx.x & 31) == 0;
    st.run(w, scales, xs, s, [&](int r, int, float v) { if (lead) y[r] = v; }, [](int, int) {});
}

// The GDN decode step's in-projection with FP8 rows [qkv 8192 | z 4096] (out_dim = 12288) and
// the bf16 rows [b 32 | a 32] (`tail`, kept bf16 by the format) written to y[12288 ..12352];
// the causal conv + SiLU folded into the qkv rows as in gemv_norm_conv_bf16 (the same arithmetic):
//   conv_state f32 [3, 8192] (oldest first), taps f32 [8192, 4], mixed f32 [8192] = silu(conv),
//   y f32 [12352] gets z, b, a (its qkv part is left unwritten).
// The 64 tail rows go to the grid's last 64 warps (they have the fewest FP8 rows), which load
// their row into registers before pdl_wait and take its dot before their stream.
// (2 blocks per SM: at most 128 registers, or the SM holds half the bytes in flight.)
#define GDN_TAIL_ROWS 64
extern "C" __global__ void __launch_bounds__(256, 2)
    gemv_norm_conv_fp8(const unsigned char* __restrict__ w, const float* __restrict__ scales,
                       const bf16* __restrict__ tail, const float* __restrict__ h, const float* __restrict__ w1p,
                       float* __restrict__ y, int out_dim, float eps, float* __restrict__ conv_state,
                       const float* __restrict__ taps, float* __restrict__ mixed) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ float red[32];
    using S = Fp8Stream<HIDDEN>;
    constexpr int DEPTH = S::DEPTH;
    float* xs = S::staging(smem);
    const S st(smem, out_dim);
    float s[DEPTH][S::PIECES];
    st.prologue(w, scales, s);
    const int lane = threadIdx.x & 31;
    const int tail_row = st.first - (st.stride - GDN_TAIL_ROWS);  // ≥ 0: this warp's tail row
    uint4 tw[HIDDEN / 256];
    if (tail_row >= 0) {
#pragma unroll
        for (int j = 0; j < HIDDEN / 256; j++) tw[j] = load_weights16(tail + (size_t)tail_row * HIDDEN + j * 256 + lane * 8);
        weights_requested();
    }
    pdl_wait();
    pdl_trigger();
    const bool lead = lane == 0;
    float4 tap[DEPTH];
    float s0[DEPTH], s1[DEPTH], s2[DEPTH];
    auto fetch_window = [&](int r, int d) {
        if (lead && r < GDN_CONV_DIM) {
            tap[d] = *reinterpret_cast<const float4*>(taps + 4 * r);
            s0[d] = conv_state[r];
            s1[d] = conv_state[GDN_CONV_DIM + r];
            s2[d] = conv_state[2 * GDN_CONV_DIM + r];
        }
    };
#pragma unroll
    for (int d = 0; d < DEPTH; d++) fetch_window(st.first + d * st.stride, d);
    stage_rms_norm(h, w1p, eps, xs, red);
    if (tail_row >= 0) {  // first, so that its registers are free for the stream
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < HIDDEN / 256; j++) {
            const float* x = xs + j * 256 + lane * 8;
            acc += dot_piece(tw[j], *reinterpret_cast<const float4*>(x), *reinterpret_cast<const float4*>(x + 4));
        }
        acc = warp_sum(acc);
        if (lead) y[out_dim + tail_row] = acc;
    }
    st.run(
        w, scales, xs, s,
        [&](int r, int d, float v) {
            if (!lead) return;
            if (r < GDN_CONV_DIM) {
                const float c = tap[d].x * s0[d] + tap[d].y * s1[d] + tap[d].z * s2[d] + tap[d].w * v;
                mixed[r] = silu(c);
                conv_state[r] = s1[d];
                conv_state[GDN_CONV_DIM + r] = s2[d];
                conv_state[2 * GDN_CONV_DIM + r] = v;
            } else {
                y[r] = v;
            }
        },
        fetch_window);
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
