// Mixer matrices, lm_head and embedding in a row format as stored (common.cuh's "4- to 8-bit
// expert rows": int4 rows of int4.rs, a GGUF file's Q4_K, Q5_K, Q6_K, Q8_0 rows of kquant.rs):
//
// gemv_norm_q_*:    one token, y[r] = W[r] · x for x = bf16-rounded RMSNorm(h)·w1p (what
//                   gemv_norm_mma_bf16 multiplies), or for w1p null x = h read as bf16 [2048]
//                   (prefill's normalised rows), W [rows, 2048] in the format. With a conv
//                   (conv_state not null: the GDN decode step's in-projection, W = [qkv 8192 | z
//                   4096] and `tail` the bf16 [b 32 | a 32] rows after them) the causal conv +
//                   SiLU is folded into the qkv rows as gemv_norm_conv_mma_bf16 folds it: mixed
//                   [8192] = silu(conv), conv_state shifted, y gets z, b, a (its qkv part unwritten).
// out_proj_tokens_q: h[i] += W_o · y[i] for a few tokens, W_o [2048, 4096] (out_proj, o_proj).
// dequantize_q:     out (bf16 [rows, cols]) = W dequantised, w = q·s − m in f32 then rounded: the
//                   copy prefill's cuBLAS GEMMs multiply.
// embed_q:          h[t] (f32 [t, 2048]) = W[ids[t]] dequantised (the token embedding).
//
// Geometry of gemv_norm_q: blocks of 8 warps, two an SM; warp gw takes rows gw·4 .. +4, then
// 4 more a grid of warps further on. A lane owns columns j·1024 + 32·lane .. +32 (j = 0, 1) of a
// row: its two 16-byte pieces of the low bits (and their high bits) are contiguous with its
// neighbours', so a warp reads each plane of a row in whole 512-byte runs. The four rows' loads
// are in flight together; x sits in registers as scaled f16 pairs (LaneX4), the dots are
// format_dot's (the expert kernels' arithmetic), the lanes' sums meet by warp_sum.

#define QG_WARPS 8
#define QG_ROWS 4

// Column c of a row in format `format` (0 Q4_K, 1 Q5_K, 2 Q6_K, 3 Q8_0, 4 int4), K columns: the
// value kquant.rs's (or int4.rs's) decode_row computes, as it computes it (no fused multiply-add,
// so the bits agree; for the GGUF types, ggml's value).
__device__ __forceinline__ float kquant_value(const unsigned char* row, int K, int c, int format) {
    if (format == 3) {
        const int at = 4 * (c / 4) + ((c & 1) << 1 | (c & 2) >> 1);  // (c, c + 2, c + 1, c + 3)
        const int q = (int)row[at] - 128;
        return __fmul_rn((float)q, Q8Format::affine(row, K, c).s);
    }
    const unsigned int word = reinterpret_cast<const unsigned int*>(row)[c / 8];
    const int p = (c & 1) ? 4 + (c % 8) / 2 : (c % 8) / 2;  // kquant.rs's nibble position
    int q = (word >> (4 * p)) & 15;
    if (format == 2) {
        const unsigned int high = reinterpret_cast<const unsigned int*>(row + K / 2)[c / 16];
        const int u = (c % 16) / 8, within = c % 8;
        q |= ((high >> (2 * (4 * u + within / 2) + 16 * (within % 2))) & 3) << 4;
        return __fmul_rn(Q6KFormat::affine(row, K, c).s, (float)(q - 32));
    }
    if (format == 4) {
        const Affine a = Int4Format::affine(row, K, c);  // shift = 8 − z: (q − z) · s
        return __fmul_rn((float)(q - 8 + (int)a.shift), a.s);
    }
    Affine a;
    if (format == 1) {
        const unsigned int high = reinterpret_cast<const unsigned int*>(row + K / 2)[c / 32];
        const int u = (c % 32) / 8, within = c % 8;
        q |= ((high >> (4 * u + within / 2 + 16 * (within % 2))) & 1) << 4;
        a = Q5KFormat::affine(row, K, c);
    } else {
        a = Q4KFormat::affine(row, K, c);
    }
    return __fsub_rn(__fmul_rn(a.s, (float)q), a.m);
}

__device__ __forceinline__ int kquant_row_bytes(int K, int format) {
    switch (format) {
        case 0: return Q4KFormat::row_bytes(K);
        case 1: return Q5KFormat::row_bytes(K);
        case 2: return Q6KFormat::row_bytes(K);
        case 3: return Q8Format::row_bytes(K);
        default: return Int4Format::row_bytes(K);
    }
}

// A bf16 row of the tail · xs: lane l's columns j·1024 + 32l .. +32 in order, then the warp.
__device__ __forceinline__ float tail_row_dot(const bf16* __restrict__ row, const float* xs) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int k = 0; k < 4; k++)
            acc += dot8(*reinterpret_cast<const uint4*>(row + j * 1024 + lane * 32 + k * 8), xs + j * 1024 + lane * 32 + k * 8);
    return warp_sum(acc);
}

// A tail row in format T (landed in global memory) · x, as gemv_norm_q dots its own rows.
template <typename T>
__device__ __forceinline__ float tail_row_dot_q(const unsigned char* __restrict__ row, const LaneX4& x) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < 2; j++) acc += format_dot<T, 4>(row, HIDDEN, j * 1024 + lane * 32, x.v[j], x.sum[j]);
    return warp_sum(acc);
}

// TAIL: the tail rows' form, bf16 (Bf16Only: the GDN's b | a) or a row format (an attention
// layer's v rows in Q6_K beside q and k in Q4_K or Q5_K, as llama.cpp's Q4_K_M and Q5_K_M give
// half the layers).
template <typename F, typename TAIL = Bf16Only>
__device__ __forceinline__ void gemv_norm_q(const unsigned char* __restrict__ w, int rows, const void* __restrict__ tail,
                                            int tail_rows, const float* __restrict__ h, const float* __restrict__ w1p,
                                            float eps, float* __restrict__ y, float* __restrict__ conv_state,
                                            const float* __restrict__ taps, float* __restrict__ mixed) {
    constexpr int ROW = F::row_bytes(HIDDEN);
    __shared__ __align__(16) float xs[HIDDEN];
    __shared__ float red[32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gw = blockIdx.x * QG_WARPS + warp, stride = gridDim.x * QG_WARPS * QG_ROWS;
    pdl_wait();
    pdl_trigger();
    if (w1p != nullptr) stage_rms_norm(h, w1p, eps, xs, red);
    else stage_bf16<HIDDEN>(reinterpret_cast<const bf16*>(h), xs);  // x given (bf16)
    LaneX4 x;
    x.load(xs);
    const int total = rows + tail_rows;
    for (int r0 = gw * QG_ROWS; r0 < total; r0 += stride) {
        // lane i < QG_ROWS stores row r0 + i; a conv row's window is fetched before the dots
        const int mine = r0 + lane;
        float4 tap = make_float4(0.f, 0.f, 0.f, 0.f);
        float s0 = 0.f, s1 = 0.f, s2 = 0.f;
        if (conv_state != nullptr && lane < QG_ROWS && mine < GDN_CONV_DIM) {
            tap = *reinterpret_cast<const float4*>(taps + 4 * mine);
            s0 = conv_state[mine];
            s1 = conv_state[GDN_CONV_DIM + mine];
            s2 = conv_state[2 * GDN_CONV_DIM + mine];
        }
        float acc[QG_ROWS];
#pragma unroll
        for (int i = 0; i < QG_ROWS; i++) {
            const int r = r0 + i;
            acc[i] = 0.f;
            if (r < rows) {
                const unsigned char* row = w + (size_t)r * ROW;
#pragma unroll
                for (int j = 0; j < 2; j++) acc[i] += format_dot<F, 4>(row, HIDDEN, j * 1024 + lane * 32, x.v[j], x.sum[j]);
            }
        }
        float mine_v = 0.f;
#pragma unroll
        for (int i = 0; i < QG_ROWS; i++) {
            const int r = r0 + i;
            float v;
            if (r < rows) v = warp_sum(acc[i]);
            else if (r < total) {
                if constexpr (HasRows<TAIL>::value)
                    v = tail_row_dot_q<TAIL>(
                        reinterpret_cast<const unsigned char*>(tail) + (size_t)(r - rows) * TAIL::row_bytes(HIDDEN), x);
                else v = tail_row_dot(reinterpret_cast<const bf16*>(tail) + (size_t)(r - rows) * HIDDEN, xs);
            } else v = 0.f;
            if (lane == i) mine_v = v;
        }
        if (lane < QG_ROWS && mine < total) {
            if (conv_state != nullptr && mine < GDN_CONV_DIM) {
                mixed[mine] = silu(tap.x * s0 + tap.y * s1 + tap.z * s2 + tap.w * mine_v);
                conv_state[mine] = s1;
                conv_state[GDN_CONV_DIM + mine] = s2;
                conv_state[2 * GDN_CONV_DIM + mine] = mine_v;
            } else {
                y[mine] = mine_v;
            }
        }
    }
}

// (each instance written out: kernels.rs checks the launchers against these signatures as written)
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_int4(
        const unsigned char* __restrict__ w, int rows, const bf16* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Int4Format>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_q4k(
        const unsigned char* __restrict__ w, int rows, const bf16* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Q4KFormat>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_q5k(
        const unsigned char* __restrict__ w, int rows, const bf16* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Q5KFormat>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_q6k(
        const unsigned char* __restrict__ w, int rows, const bf16* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Q6KFormat>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_q8_0(
        const unsigned char* __restrict__ w, int rows, const bf16* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Q8Format>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}

// q and k in Q4_K or Q5_K with v's rows in Q6_K as the tail (conv_state null)
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_q4k_tail_q6k(
        const unsigned char* __restrict__ w, int rows, const unsigned char* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Q4KFormat, Q6KFormat>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}
extern "C" __global__ void __launch_bounds__(256) gemv_norm_q_q5k_tail_q6k(
        const unsigned char* __restrict__ w, int rows, const unsigned char* __restrict__ tail, int tail_rows,
        const float* __restrict__ h, const float* __restrict__ w1p, float eps, float* __restrict__ y,
        float* __restrict__ conv_state, const float* __restrict__ taps, float* __restrict__ mixed) {
    gemv_norm_q<Q5KFormat, Q6KFormat>(w, rows, tail, tail_rows, h, w1p, eps, y, conv_state, taps, mixed);
}

// out_proj_tokens_q_*: h[i] += W_o · y[i] for t tokens (the MoE block's four-kernel form, the
// several-token steps), W_o [2048, 4096] in the format, its columns maybe in tiled value-head
// order (y_tile_r: common.cuh's tiled_piece), y bf16 [t, 4096], h f32 [t, 2048]. Warp c of the
// grid takes column c and each token gets the bits of moe_decode_block_q's phase 0 (w_o_row_dot).
template <typename F>
__device__ __forceinline__ void out_proj_tokens_q(const unsigned char* __restrict__ w, const bf16* __restrict__ y,
                                                  int t, int y_tile_r, float* __restrict__ h) {
    __shared__ __align__(16) uint4 ys[MIXER_OUT / 8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c = blockIdx.x * QG_WARPS + warp;
    const unsigned char* row = w + (size_t)c * F::row_bytes(MIXER_OUT);
    pdl_wait();
    for (int i = 0; i < t; i++) {
        __syncthreads();  // every warp is done with the last token's y
        for (int q = threadIdx.x; q < MIXER_OUT / 8; q += blockDim.x)
            ys[q] = __ldcg(reinterpret_cast<const uint4*>(y + (size_t)i * MIXER_OUT) + tiled_piece(q, y_tile_r));
        __syncthreads();
        const float v = w_o_row_dot<F>(row, ys);
        if (lane == 0 && c < HIDDEN) h[(size_t)i * HIDDEN + c] += v;
    }
}

extern "C" __global__ void __launch_bounds__(256) out_proj_tokens_q_int4(
        const unsigned char* __restrict__ w, const bf16* __restrict__ y, int t, int y_tile_r, float* __restrict__ h) {
    out_proj_tokens_q<Int4Format>(w, y, t, y_tile_r, h);
}
extern "C" __global__ void __launch_bounds__(256) out_proj_tokens_q_q4k(
        const unsigned char* __restrict__ w, const bf16* __restrict__ y, int t, int y_tile_r, float* __restrict__ h) {
    out_proj_tokens_q<Q4KFormat>(w, y, t, y_tile_r, h);
}
extern "C" __global__ void __launch_bounds__(256) out_proj_tokens_q_q5k(
        const unsigned char* __restrict__ w, const bf16* __restrict__ y, int t, int y_tile_r, float* __restrict__ h) {
    out_proj_tokens_q<Q5KFormat>(w, y, t, y_tile_r, h);
}
extern "C" __global__ void __launch_bounds__(256) out_proj_tokens_q_q6k(
        const unsigned char* __restrict__ w, const bf16* __restrict__ y, int t, int y_tile_r, float* __restrict__ h) {
    out_proj_tokens_q<Q6KFormat>(w, y, t, y_tile_r, h);
}
extern "C" __global__ void __launch_bounds__(256) out_proj_tokens_q_q8_0(
        const unsigned char* __restrict__ w, const bf16* __restrict__ y, int t, int y_tile_r, float* __restrict__ h) {
    out_proj_tokens_q<Q8Format>(w, y, t, y_tile_r, h);
}

// Grid-stride over the rows × cols elements, 8 consecutive columns a thread. An output
// projection whose columns are in tiled value-head order (tile_r > 1: MIXER_OUT columns,
// `tiled_piece`) comes out in the release's order: stored piece q goes to y's piece.
extern "C" __global__ void dequantize_q(const unsigned char* __restrict__ w, long long rows, int cols, int format,
                                        int tile_r, bf16* __restrict__ out) {
    const int row_bytes = kquant_row_bytes(cols, format);
    const long long pieces = rows * (cols / 8);
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < pieces; p += (long long)gridDim.x * blockDim.x) {
        const long long r = p / (cols / 8);
        const int c0 = (int)(p % (cols / 8)) * 8;
        const int to = tile_r == 1 ? c0 : tiled_piece(c0 / 8, tile_r) * 8;
        const unsigned char* row = w + r * row_bytes;
        __align__(16) bf16 v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __float2bfloat16(kquant_value(row, cols, c0 + i, format));
        *reinterpret_cast<uint4*>(out + r * cols + to) = *reinterpret_cast<const uint4*>(v);
    }
}

// One block a token.
extern "C" __global__ void embed_q(const unsigned char* __restrict__ w, const int* __restrict__ ids, int cols,
                                   int format, float* __restrict__ h) {
    pdl_trigger();
    pdl_wait();
    const unsigned char* row = w + (size_t)ids[blockIdx.x] * kquant_row_bytes(cols, format);
    float* out = h + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = kquant_value(row, cols, c, format);
}
