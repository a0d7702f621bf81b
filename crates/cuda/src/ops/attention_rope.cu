// Gated attention, step 2 (the formulas: crates/cpu/src/attention.rs): q/k RMSNorm, partial NeoX RoPE, KV-cache append.
//
// The current position is read from device memory (`pos`: the position of the first token of
// this call), never passed by value, so a captured decode graph replays for any position.
//
// Rotary positions are multimodal (crates/cpu/src/attention.rs `Rope`): frequency i turns by the
// temporal, height or width position (`rope_axis`). A text token's three are its cache row plus
// the sequence's `*delta` (0 until an image; a null `delta` is 0); a prefill whose tokens hold an
// image gives each token's three in `mrope` [T, 3] instead (null otherwise).

// rope_parameters.rope_theta of the real checkpoint (the CUDA backend runs only that model).
#define ROPE_THETA 10000000.0
// rope_parameters.mrope_section of the real checkpoint, interleaved (temporal, height, width).
#define MROPE_H 11
#define MROPE_W 10

// Which axis (0 temporal, 1 height, 2 width) rotary frequency i reads (ModelConfig::mrope_axis).
__device__ __forceinline__ int rope_axis(int i) {
    return (i % 3 == 1 && i < 3 * MROPE_H) ? 1 : (i % 3 == 2 && i < 3 * MROPE_W) ? 2 : 0;
}

// One block per (token, head): heads 0..15 are query heads, 16..17 key heads (which also copy the
// matching value head into the cache). 256 threads, one per dim.
//   qg [T, 16, 512] f32: q_proj output, per head [256 query | 256 gate]
//   k, v [T, 2, 256] f32: k_proj / v_proj outputs
//   q_norm, k_norm [256] f32: zero-centred weights stored as 1 + w
//   q_out [T, 16, 256] bf16: normalised, rotated queries (unscaled)
//   k_cache, v_cache [max_seq, 2, 256] bf16: rows pos..pos+T-1 written (rows >= max_seq dropped)
// Head h = blockIdx.y of one token at cache row p and rotary positions rp (temporal, height,
// width): qg_t [16, 512], k_t / v_t [2, 256] its rows, q_t [16, 256] its output row.
__device__ __forceinline__ void qk_norm_rope_token(const float* __restrict__ qg_t, const float* __restrict__ k_t,
                                                   const float* __restrict__ v_t, const float* __restrict__ q_norm,
                                                   const float* __restrict__ k_norm, int p, int3 rp, int max_seq,
                                                   bf16* __restrict__ q_t, bf16* __restrict__ k_cache,
                                                   bf16* __restrict__ v_cache) {
    __shared__ float red[32];
    __shared__ float ys[HEAD_DIM];
    const int h = blockIdx.y, d = threadIdx.x;
    const bool is_q = h < ATTN_HEADS;
    const int kh = h - ATTN_HEADS;

    const float x = is_q ? qg_t[h * 2 * HEAD_DIM + d] : k_t[kh * HEAD_DIM + d];
    const float ss = block_sum(x * x, red);
    const float inv = 1.f / sqrtf(ss / (float)HEAD_DIM + 1e-6f);
    float y = x * (inv * (is_q ? q_norm[d] : k_norm[d]));
    ys[d] = y;
    __syncthreads();

    if (d < ROTARY_DIM) {
        const int half = ROTARY_DIM / 2;
        const int i = d < half ? d : d - half;
        // inv_freq_i = theta^(-2i/R), computed in f64 and rounded to f32 like the CPU reference;
        // the angle is an f32 product, like HF's (position_ids.float() @ inv_freq).
        const float inv_freq = (float)(1.0 / pow(ROPE_THETA, (double)(2 * i) / (double)ROTARY_DIM));
        const int axis = rope_axis(i);
        const int r = axis == 0 ? rp.x : axis == 1 ? rp.y : rp.z;
        const float angle = __fmul_rn((float)r, inv_freq);
        float s, c;
        sincosf(angle, &s, &c);
        const float a = ys[i], b = ys[i + half];
        y = d < half ? __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)) : __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    }

    if (is_q) {
        q_t[h * HEAD_DIM + d] = __float2bfloat16(y);
    } else if (p < max_seq) {
        const size_t row = ((size_t)p * KV_HEADS + kh) * HEAD_DIM + d;
        k_cache[row] = __float2bfloat16(y);
        v_cache[row] = __float2bfloat16(v_t[kh * HEAD_DIM + d]);
    }
}

extern "C" __global__ void __launch_bounds__(HEAD_DIM) qk_norm_rope(
    const float* __restrict__ qg, const float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ q_norm, const float* __restrict__ k_norm, const int* __restrict__ pos,
    const int* __restrict__ delta, const int* __restrict__ mrope, int T, int max_seq, bf16* __restrict__ q_out,
    bf16* __restrict__ k_cache, bf16* __restrict__ v_cache) {
    pdl_trigger();
    pdl_wait();
    const int t = blockIdx.x;
    if (t >= T) return;
    const size_t kv = (size_t)t * KV_HEADS * HEAD_DIM;
    const int p = *pos + t, text = p + (delta ? *delta : 0);
    const int3 rp = mrope ? make_int3(mrope[3 * t], mrope[3 * t + 1], mrope[3 * t + 2]) : make_int3(text, text, text);
    qk_norm_rope_token(qg + (size_t)t * ATTN_HEADS * 2 * HEAD_DIM, k + kv, v + kv, q_norm, k_norm, p, rp, max_seq,
                       q_out + (size_t)t * ATTN_HEADS * HEAD_DIM, k_cache, v_cache);
}

// qk_norm_rope for one token of each of n sequences (the batched decode step): blockIdx.x = s,
// its projections at proj + s·proj_stride ([q and gate 16·512 | k 512 | v 512]), its position
// pos[s] and rotary delta deltas[s], its cache k_caches[s] / v_caches[s] (each max_seq rows), its
// queries q_out row s.
// Grid (n, 18).
extern "C" __global__ void __launch_bounds__(HEAD_DIM) qk_norm_rope_batch(
    const float* __restrict__ proj, int proj_stride, const float* __restrict__ q_norm, const float* __restrict__ k_norm,
    const int* __restrict__ pos, const int* __restrict__ deltas, int max_seq, bf16* __restrict__ q_out,
    bf16* const* __restrict__ k_caches, bf16* const* __restrict__ v_caches) {
    pdl_trigger();
    pdl_wait();
    const int s = blockIdx.x;
    const float* qg = proj + (size_t)s * proj_stride;
    const float* k = qg + ATTN_HEADS * 2 * HEAD_DIM;
    const int text = pos[s] + deltas[s];
    qk_norm_rope_token(qg, k, k + KV_HEADS * HEAD_DIM, q_norm, k_norm, pos[s], make_int3(text, text, text), max_seq,
                       q_out + (size_t)s * ATTN_HEADS * HEAD_DIM, k_caches[s], v_caches[s]);
}
