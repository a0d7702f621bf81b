// Gated DeltaNet: the causal depthwise conv over time, then SiLU:
// out[t][c] = silu(Σ_{j<K} w[c][j] · x[t − K + 1 + j][c]), earlier positions from the window.
//
// gdn_conv_silu
//   qkv   f32 [T, 8192]  pre-conv rows (the in_proj_qkv output), qkv_stride floats apart (8192,
//                        or the multi-token step's 12352: the stacked in-projection's rows)
//   state_in  f32 [3, 8192]  the 3 pre-conv rows before this call, oldest first
//   state_out f32 [3, 8192]  the last 3 rows of [state_in; qkv] (raw pre-conv values, not post-SiLU);
//                            state_in itself (in place), or another window (the multi-token
//                            decode step keeps the window after each token)
//   taps  f32 [8192, 4]  channel-major; tap 3 multiplies the current token
//   out   f32 [T, 8192]  silu(Σ_j taps[c, j] · row_{t-3+j}[c]), rows before the call from `state`
//   windows f32 [T, 3, 8192] or null: the window after each token (the multi-token step keeps
//                        them; needs T <= CONV_TOKENS, one block row)
// Geometry: grid (8192 / 256, ceil(T / CONV_TOKENS)), 256 threads. A thread owns one channel over
// CONV_TOKENS consecutive tokens and slides the 4-row window through registers; a warp reads 128
// contiguous bytes of each row. Only blocks with blockIdx.y == 0 read the old state (CONV_TOKENS
// >= 3), and the thread that reads a channel's old state is the one that writes its new state, so
// an in-place update needs no second kernel. T == 1 (decode) is one 32-block launch.
#define CONV_TOKENS 16
#define CONV_THREADS 256

// (No __launch_bounds__: with it ptxas caps this kernel at 32 registers and spills the unrolled loop.)
extern "C" __global__ void gdn_conv_silu(const float* __restrict__ qkv, int qkv_stride, const float* state_in, float* state_out,
                                         float* __restrict__ windows, const float* __restrict__ taps, float* __restrict__ out,
                                         int T) {
    pdl_trigger();
    pdl_wait();
    const int c = blockIdx.x * CONV_THREADS + threadIdx.x;
    const int t0 = blockIdx.y * CONV_TOKENS;
    const int t1 = min(t0 + CONV_TOKENS, T);
    const float4 w = *reinterpret_cast<const float4*>(taps + 4 * c);

    // Window: rows t0-3, t0-2, t0-1 (from the state when they precede this call).
    float x0, x1, x2;
    if (t0 == 0) {
        x0 = state_in[c];
        x1 = state_in[GDN_CONV_DIM + c];
        x2 = state_in[2 * GDN_CONV_DIM + c];
    } else {
        x0 = qkv[(size_t)(t0 - 3) * qkv_stride + c];
        x1 = qkv[(size_t)(t0 - 2) * qkv_stride + c];
        x2 = qkv[(size_t)(t0 - 1) * qkv_stride + c];
    }
    const float s1 = x1, s2 = x2;  // old state rows 1, 2 (row 0 never survives: T >= 1)

#pragma unroll 4
    for (int t = t0; t < t1; t++) {
        const float x3 = qkv[(size_t)t * qkv_stride + c];
        const float y = w.x * x0 + w.y * x1 + w.z * x2 + w.w * x3;
        out[(size_t)t * GDN_CONV_DIM + c] = silu(y);
        x0 = x1;
        x1 = x2;
        x2 = x3;
        if (windows) {
            float* win = windows + (size_t)t * 3 * GDN_CONV_DIM + c;
            win[0] = x0;
            win[GDN_CONV_DIM] = x1;
            win[2 * GDN_CONV_DIM] = x2;
        }
    }

    if (t0 == 0) {
        // New state row i is row T + i of [old state (3 rows); qkv (T rows)]; T >= 1.
#pragma unroll
        for (int i = 0; i < 3; i++) {
            const int j = T + i;
            const float v = j >= 3 ? qkv[(size_t)(j - 3) * qkv_stride + c] : (j == 1 ? s1 : s2);
            state_out[i * GDN_CONV_DIM + c] = v;
        }
    }
}

// gdn_conv_batch: one token of each of n sequences (the batched decode step), block row b for
// sequence b: out[b] = silu(taps · [window_b; qkv[b]]) and sequence b's window (f32 [3, 8192] at
// states[b]) shifted in place, with gdn_conv_silu's arithmetic. qkv rows qkv_stride floats apart.
// Grid (8192 / 256, n), 256 threads.
extern "C" __global__ void gdn_conv_batch(const float* __restrict__ qkv, int qkv_stride,
                                          const unsigned long long* __restrict__ states,
                                          const float* __restrict__ taps, float* __restrict__ out) {
    pdl_trigger();
    pdl_wait();
    const int c = blockIdx.x * CONV_THREADS + threadIdx.x, b = blockIdx.y;
    float* state = reinterpret_cast<float*>(states[b]);
    const float4 w = *reinterpret_cast<const float4*>(taps + 4 * c);
    const float x0 = state[c], x1 = state[GDN_CONV_DIM + c], x2 = state[2 * GDN_CONV_DIM + c];
    const float x3 = qkv[(size_t)b * qkv_stride + c];
    const float y = w.x * x0 + w.y * x1 + w.z * x2 + w.w * x3;
    out[(size_t)b * GDN_CONV_DIM + c] = silu(y);
    state[c] = x1;
    state[GDN_CONV_DIM + c] = x2;
    state[2 * GDN_CONV_DIM + c] = x3;
}
