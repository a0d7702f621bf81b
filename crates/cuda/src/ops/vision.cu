// The vision tower's small kernels (the formulas: crates/cpu/src/vision.rs); its matrix products
// are cuBLAS (vision.rs). Widths are arguments, not the text model's #defines: the same kernels
// run the release's tower (1152 wide, 16 heads of 72) and the fixtures' tiny ones.
//
// Patches come in merge-block order: patch p of an h × w grid, merge m, sits at
//   row = (p / m² / (w/m))·m + (p % m²) / m,  col = (p / m² % (w/m))·m + p % m.
// One block of 256 threads per row unless said otherwise.

__device__ __forceinline__ void patch_row_col(int p, int w, int m, int* row, int* col) {
    const int block = p / (m * m), within = p % (m * m);
    *row = block / (w / m) * m + within / m;
    *col = block % (w / m) * m + within % m;
}

// x[N, d] (the patch embedding's product, f32) += bias + the learned s × s position grid
// (bf16 [s², d]) resampled to the image's h × w patches: bilinear, align_corners.
extern "C" __global__ void vision_embed_finish(float* __restrict__ x, const float* __restrict__ bias,
                                               const bf16* __restrict__ pos, int d, int h, int w, int m, int s) {
    const int p = blockIdx.x;
    int r, c;
    patch_row_col(p, w, m, &r, &c);
    // Taps and weights per axis, as solo_cpu::vision::position_embeddings.
    int ti[2][2];
    float tw[2][2];
    const int idx[2] = {r, c}, size[2] = {h, w};
    for (int a = 0; a < 2; a++) {
        const float src = (float)idx[a] * (float)(s - 1) / (float)(max(size[a], 2) - 1);
        const float fl = floorf(src);
        for (int o = 0; o < 2; o++) {
            const int raw = (int)fl + o;
            tw[a][o] = fmaxf(1.f - fabsf(src - fl - (float)o), 0.f);
            ti[a][o] = min(max(raw, 0), s - 1);
        }
    }
    float* row = x + (size_t)p * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0.f;
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                acc += __bfloat162float(pos[(size_t)(ti[0][a] * s + ti[1][b]) * d + i]) * (tw[0][a] * tw[1][b]);
        row[i] += bias[i] + acc;
    }
}

// out (bf16 [rows, d]) = LayerNorm(x (f32 [rows, d])) · weight + bias; eps 1e-6, biased variance.
extern "C" __global__ void vision_layer_norm(const float* __restrict__ x, const float* __restrict__ weight,
                                             const float* __restrict__ bias, bf16* __restrict__ out, int d) {
    __shared__ float red[32];
    const float* row = x + (size_t)blockIdx.x * d;
    float sum = 0.f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) sum += row[i];
    const float mean = block_sum(sum, red) / d;
    float sq = 0.f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) sq += (row[i] - mean) * (row[i] - mean);
    __syncthreads();  // `red` is reused
    const float inv = 1.f / sqrtf(block_sum(sq, red) / d + 1e-6f);
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        out[(size_t)blockIdx.x * d + i] = __float2bfloat16((row[i] - mean) * inv * weight[i] + bias[i]);
}

// qkv (f32 [N, 3·heads·dh], the product without its bias) + bias → q, k, v (bf16, each
// [heads, N, dh]), q and k rotated by the patch's 2-D angles: pair (i, i + dh/2), the first dh/4
// frequencies by the row, the next dh/4 by the column, θ_j = theta^(−2j/(dh/2)). The patch's dh/2
// cosines and sines are made once, into shared memory (dh ≤ VR_DHMAX), not per element.
#define VR_DHMAX 256
extern "C" __global__ void vision_qkv_rope(const float* __restrict__ qkv, const float* __restrict__ bias,
                                           bf16* __restrict__ q, bf16* __restrict__ k, bf16* __restrict__ v,
                                           int n, int heads, int dh, int w, int m, float theta) {
    __shared__ float cs[VR_DHMAX / 2], sn[VR_DHMAX / 2];
    const int p = blockIdx.x, d = heads * dh, half = dh / 2, quarter = dh / 4;
    int r, c;
    patch_row_col(p, w, m, &r, &c);
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
        const float inv_freq = (float)pow((double)theta, -(double)(2 * (j % quarter)) / (double)half);
        const float angle = (float)(j < quarter ? r : c) * inv_freq;
        cs[j] = cosf(angle);
        sn[j] = sinf(angle);
    }
    __syncthreads();
    const float* row = qkv + (size_t)p * 3 * d;
    for (int e = threadIdx.x; e < 3 * d; e += blockDim.x) {
        const int part = e / d, within = e % d, head = within / dh, i = within % dh;
        const float x = row[e] + bias[e];
        float y = x;
        if (part < 2) {
            const int j = i % half;
            if (i < half) {
                y = x * cs[j] - (row[e + half] + bias[e + half]) * sn[j];
            } else {
                y = x * cs[j] + (row[e - half] + bias[e - half]) * sn[j];
            }
        }
        bf16* dst = part == 0 ? q : (part == 1 ? k : v);
        dst[((size_t)head * n + p) * dh + i] = __float2bfloat16(y);
    }
}

// Each row of scores (f32 [rows, n], already scaled) → its softmax, bf16.
extern "C" __global__ void vision_softmax(const float* __restrict__ scores, bf16* __restrict__ probs, int n) {
    __shared__ float red[32];
    const float* row = scores + (size_t)blockIdx.x * n;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, row[i]);
    mx = block_max(mx, red);
    float sum = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += expf(row[i] - mx);
    __syncthreads();  // `red` is reused
    const float inv = 1.f / block_sum(sum, red);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        probs[(size_t)blockIdx.x * n + i] = __float2bfloat16(expf(row[i] - mx) * inv);
}

// p is a multiple of `bytes` (null is)
__device__ __forceinline__ bool is_aligned(const void* p, unsigned bytes) { return (size_t)p % bytes == 0; }

// GELU(x): the tanh form when `tanh_form`, else the error function's.
__device__ __forceinline__ float vision_gelu(float x, int tanh_form) {
    return tanh_form ? 0.5f * x * (1.f + tanhf(0.7978846f * (x + 0.044715f * x * x * x)))
                     : (float)(0.5 * (double)x * (1.0 + erf((double)x * 0.7071067811865476)));
}

// out (bf16 [rows, d]) = GELU(y (f32 [rows, d]) + bias). Rows of a multiple of 4 go 16 bytes a
// load (the same values; the bandwidth of the scalar loop was ~55 %).
extern "C" __global__ void vision_bias_gelu(const float* __restrict__ y, const float* __restrict__ bias,
                                            bf16* __restrict__ out, int d, int tanh_form) {
    const size_t base = (size_t)blockIdx.x * d;
    if (d % 4 == 0 && is_aligned(y, 16) && is_aligned(bias, 16) && is_aligned(out, 8)) {
        const float4* y4 = reinterpret_cast<const float4*>(y + base);
        const float4* b4 = reinterpret_cast<const float4*>(bias);
        for (int i = threadIdx.x; i < d / 4; i += blockDim.x) {
            const float4 v = y4[i], bb = b4[i];
            *reinterpret_cast<uint2*>(out + base + 4 * i) =
                make_uint2(pack_bf16(vision_gelu(v.x + bb.x, tanh_form), vision_gelu(v.y + bb.y, tanh_form)),
                           pack_bf16(vision_gelu(v.z + bb.z, tanh_form), vision_gelu(v.w + bb.w, tanh_form)));
        }
        return;
    }
    for (int i = threadIdx.x; i < d; i += blockDim.x) out[base + i] = __float2bfloat16(vision_gelu(y[base + i] + bias[i], tanh_form));
}

// x (f32 [rows, d]) += y + bias; with x null, y += bias. Rows of a multiple of 4: 16 bytes a load.
extern "C" __global__ void vision_add_bias(float* __restrict__ x, float* __restrict__ y, const float* __restrict__ bias,
                                           int d) {
    const size_t base = (size_t)blockIdx.x * d;
    if (d % 4 == 0 && is_aligned(x, 16) && is_aligned(y, 16) && is_aligned(bias, 16)) {
        float4* x4 = reinterpret_cast<float4*>(x + base);
        float4* y4 = reinterpret_cast<float4*>(y + base);
        const float4* b4 = reinterpret_cast<const float4*>(bias);
        for (int i = threadIdx.x; i < d / 4; i += blockDim.x) {
            const float4 v = y4[i], bb = b4[i];
            if (x) {
                float4 o = x4[i];
                o.x += v.x + bb.x, o.y += v.y + bb.y, o.z += v.z + bb.z, o.w += v.w + bb.w;
                x4[i] = o;
            } else {
                y4[i] = make_float4(v.x + bb.x, v.y + bb.y, v.z + bb.z, v.w + bb.w);
            }
        }
        return;
    }
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        if (x) {
            x[base + i] += y[base + i] + bias[i];
        } else {
            y[base + i] += bias[i];
        }
    }
}

// Fused attention over one image's patches (FlashAttention-2 with mma.sync m16n8k16): scores
// stay in registers, never in memory. q, k, v bf16 [heads, n, dh] (dh a multiple of 8, ≤ 80);
// o bf16 [n, heads·dh] (head h's dims at h·dh). Grid (ceil(n / 128), heads), 256 threads: each warp
// owns 16 query rows; the block's 8 warps share key/value tiles of 64 patches in shared memory,
// double-buffered: the next tile's rows land by cp.async (16 bytes a copy) while this one is
// used. K's fragments come by ldmatrix, V's by its transposing form. Dims dh..79 of the shared
// rows stay zero (written once), so every product runs over 80 dims whatever dh is.
// Fragment lanes: g = lane / 4 (a row of the 16), t = lane % 4 (a column pair).
#define VA_WARPS 8  // 16 query rows each: every key/value tile staged serves 128 rows
#define VA_KEYS 64
#define VA_DHMAX 80
#define VA_STRIDE (VA_DHMAX + 8)  // bf16 per shared row: 176 bytes, the 8 rows of an ldmatrix in distinct banks
#define VA_TILE (VA_KEYS * VA_STRIDE)

extern "C" __global__ void __launch_bounds__(VA_WARPS * 32, 2) vision_attention(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                                                   const bf16* __restrict__ v, bf16* __restrict__ o,
                                                                   int n, int heads, int dh, float scale) {
    __shared__ __align__(16) bf16 ks[2 * VA_TILE];
    __shared__ __align__(16) bf16 vs[2 * VA_TILE];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int head = blockIdx.y;
    const int r0 = blockIdx.x * (16 * VA_WARPS) + warp * 16;  // this warp's first query row
    const bf16* qh = q + (size_t)head * n * dh;
    const bf16* kh = k + (size_t)head * n * dh;
    const bf16* vh = v + (size_t)head * n * dh;
    const int chunks = dh / 8;  // 16-byte pieces of a row
    const float scale_log2 = scale * 1.4426950408889634f;

    // The padding dims of both buffers, zero for good.
    for (int i = threadIdx.x; i < 2 * VA_KEYS * (VA_STRIDE - dh); i += blockDim.x) {
        const int row = i / (VA_STRIDE - dh), col = dh + i % (VA_STRIDE - dh);
        ks[row * VA_STRIDE + col] = __float2bfloat16(0.f);
        vs[row * VA_STRIDE + col] = __float2bfloat16(0.f);
    }
    // Rows first .. first + 63 of K and V into buffer b (zeros past n).
    auto stage = [&](int first, int b) {
        for (int i = threadIdx.x; i < VA_KEYS * chunks; i += blockDim.x) {
            const int row = i / chunks, col = 8 * (i % chunks);
            const bool ok = first + row < n;
            const size_t at = (size_t)(ok ? first + row : 0) * dh + col;
            cp_async16(ks + b * VA_TILE + row * VA_STRIDE + col, kh + at, ok);
            cp_async16(vs + b * VA_TILE + row * VA_STRIDE + col, vh + at, ok);
        }
        cp_async_commit();
    };
    stage(0, 0);

    // Q's A fragments for every 16 dims (zero past dh and past n).
    auto q_pair = [&](int row, int col) -> uint32_t {
        if (row >= n || col >= dh) return 0u;
        return *reinterpret_cast<const uint32_t*>(qh + (size_t)row * dh + col);
    };
    uint32_t qa[VA_DHMAX / 16][4];
#pragma unroll
    for (int st = 0; st < VA_DHMAX / 16; st++) {
        qa[st][0] = q_pair(r0 + g, 16 * st + 2 * t);
        qa[st][1] = q_pair(r0 + g + 8, 16 * st + 2 * t);
        qa[st][2] = q_pair(r0 + g, 16 * st + 2 * t + 8);
        qa[st][3] = q_pair(r0 + g + 8, 16 * st + 2 * t + 8);
    }
    float acc[VA_DHMAX / 8][4];
#pragma unroll
    for (int j = 0; j < VA_DHMAX / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};

    // ldmatrix row addresses: K (keys by 8 + lane % 8 and lane / 16, dims by (lane / 8) % 2), V
    // transposed (keys by lane % 8 and (lane / 8) % 2, dims by lane / 16).
    const int k_row = (lane & 7) + ((lane >> 4) & 1) * 8, k_col = ((lane >> 3) & 1) * 8;
    const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;

    for (int first = 0, b = 0; first < n; first += VA_KEYS, b ^= 1) {
        if (first + VA_KEYS < n) {
            stage(first + VA_KEYS, b ^ 1);  // the next tile, while this one is used
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const bf16* kt = ks + b * VA_TILE;
        const bf16* vt = vs + b * VA_TILE;

        // S (16 rows × 64 keys) = Q Kᵀ: eight 8-key column tiles, two per ldmatrix.
        float s[VA_KEYS / 8][4];
#pragma unroll
        for (int j = 0; j < VA_KEYS / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
        for (int jp = 0; jp < VA_KEYS / 16; jp++) {
#pragma unroll
            for (int st = 0; st < VA_DHMAX / 16; st++) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4(b0, b1, b2, b3, kt + (16 * jp + k_row) * VA_STRIDE + 16 * st + k_col);
                mma_bf16(s[2 * jp], qa[st][0], qa[st][1], qa[st][2], qa[st][3], b0, b1);
                mma_bf16(s[2 * jp + 1], qa[st][0], qa[st][1], qa[st][2], qa[st][3], b2, b3);
            }
        }
        // Online softmax in log2 units; keys past n do not count.
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < VA_KEYS / 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = first + 8 * j + 2 * t + (e & 1);
                s[j][e] = key < n ? s[j][e] * scale_log2 : -INFINITY;
                tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[j][e]);
            }
        }
        float corr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
            const float m_new = fmaxf(mx[r], tile_max[r]);
            corr[r] = exp2f(mx[r] - m_new);  // 0 on the first tile (mx = −inf)
            mx[r] = m_new;
            sum[r] *= corr[r];
        }
#pragma unroll
        for (int j = 0; j < VA_DHMAX / 8; j++) {
            acc[j][0] *= corr[0];
            acc[j][1] *= corr[0];
            acc[j][2] *= corr[1];
            acc[j][3] *= corr[1];
        }
#pragma unroll
        for (int j = 0; j < VA_KEYS / 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[j][e] = exp2f(s[j][e] - mx[e >> 1]);
                sum[e >> 1] += s[j][e];
            }
        }
        // O += P V: P's C fragments are the A fragments of four 16-key steps.
#pragma unroll
        for (int kk = 0; kk < VA_KEYS / 16; kk++) {
            const uint32_t a0 = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
            const uint32_t a1 = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
            const uint32_t a2 = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            const uint32_t a3 = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
            const bf16* vrow = vt + (16 * kk + v_row) * VA_STRIDE + v_col;
#pragma unroll
            for (int np = 0; np < VA_DHMAX / 16; np++) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4_trans(b0, b1, b2, b3, vrow + 16 * np);
                mma_bf16(acc[2 * np], a0, a1, a2, a3, b0, b1);
                mma_bf16(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
            }
        }
        __syncthreads();  // this buffer is refilled by the next iteration's stage
    }
    // The row sums are split over the quad's 4 lanes.
#pragma unroll
    for (int r = 0; r < 2; r++) {
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
        sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
    }
    const size_t width = (size_t)heads * dh;
#pragma unroll
    for (int j = 0; j < VA_DHMAX / 8; j++) {
        if (j < chunks) {
            const int col = head * dh + 8 * j + 2 * t;
            if (r0 + g < n)
                *reinterpret_cast<__nv_bfloat162*>(o + (size_t)(r0 + g) * width + col) =
                    __floats2bfloat162_rn(acc[j][0] / sum[0], acc[j][1] / sum[0]);
            if (r0 + g + 8 < n)
                *reinterpret_cast<__nv_bfloat162*>(o + (size_t)(r0 + g + 8) * width + col) =
                    __floats2bfloat162_rn(acc[j][2] / sum[1], acc[j][3] / sum[1]);
        }
    }
}
