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
// frequencies by the row, the next dh/4 by the column, θ_j = theta^(−2j/(dh/2)).
extern "C" __global__ void vision_qkv_rope(const float* __restrict__ qkv, const float* __restrict__ bias,
                                           bf16* __restrict__ q, bf16* __restrict__ k, bf16* __restrict__ v,
                                           int n, int heads, int dh, int w, int m, float theta) {
    const int p = blockIdx.x, d = heads * dh, half = dh / 2, quarter = dh / 4;
    int r, c;
    patch_row_col(p, w, m, &r, &c);
    const float* row = qkv + (size_t)p * 3 * d;
    for (int e = threadIdx.x; e < 3 * d; e += blockDim.x) {
        const int part = e / d, within = e % d, head = within / dh, i = within % dh;
        const float x = row[e] + bias[e];
        float y = x;
        if (part < 2) {
            const int j = i % half;
            const float inv_freq = (float)pow((double)theta, -(double)(2 * (j % quarter)) / (double)half);
            const float angle = (float)(j < quarter ? r : c) * inv_freq;
            const float cs = cosf(angle), sn = sinf(angle);
            if (i < half) {
                y = x * cs - (row[e + half] + bias[e + half]) * sn;
            } else {
                y = x * cs + (row[e - half] + bias[e - half]) * sn;
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

// out (bf16 [rows, d]) = GELU(y (f32 [rows, d]) + bias): the tanh form when `tanh_form`, else
// the error function's.
extern "C" __global__ void vision_bias_gelu(const float* __restrict__ y, const float* __restrict__ bias,
                                            bf16* __restrict__ out, int d, int tanh_form) {
    const size_t base = (size_t)blockIdx.x * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        const float x = y[base + i] + bias[i];
        const float g = tanh_form ? 0.5f * x * (1.f + tanhf(0.7978846f * (x + 0.044715f * x * x * x)))
                                  : (float)(0.5 * (double)x * (1.0 + erf((double)x * 0.7071067811865476)));
        out[base + i] = __float2bfloat16(g);
    }
}

// x (f32 [rows, d]) += y + bias; with x null, y += bias.
extern "C" __global__ void vision_add_bias(float* __restrict__ x, float* __restrict__ y, const float* __restrict__ bias,
                                           int d) {
    const size_t base = (size_t)blockIdx.x * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        if (x) {
            x[base + i] += y[base + i] + bias[i];
        } else {
            y[base + i] += bias[i];
        }
    }
}
