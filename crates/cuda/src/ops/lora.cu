// LoRA's low-rank term, y += s · B (A x), outside the projections' own kernels (lora.rs says
// where each runs): lora_shrink (u = A x for one token; more tokens: a cuBLAS GEMM) and lora_expand
// (y += s · B u, a launch per adapted matrix) for the layer-by-layer forward; lora_shrink_sites and
// lora_expand_sites (a site per token) for the several-token steps' output projection; the routed
// experts' adapters (lora_experts_*), the shared expert apart (lora_take_gate, lora_swiglu,
// lora_add_gated).

// lora_shrink: u[j] = a[j] · x for one token: x bf16 [in_dim], a bf16 [rows, in_dim] (the site's
// A matrices stacked), u f32 [rows]; a warp per row j (lora_row_dot), 8 a block.
extern "C" __global__ void __launch_bounds__(256) lora_shrink(const bf16* __restrict__ x, const bf16* __restrict__ a,
                                                              float* __restrict__ u, int rows, int in_dim) {
    pdl_wait();
    const int j = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (j >= rows) return;
    const float v = lora_row_dot(a + (size_t)j * in_dim, x, in_dim);
    if ((threadIdx.x & 31) == 0) u[j] = v;
}

#define LORA_TOKENS 8
#define LORA_MAX_RANK 256

// lora_expand: y[t, i] += scale · Σ_k b[i, k] · u[t, k] for i < rows, t < tokens: b bf16
// [rows, rank] (rank ≤ 256), u f32 rows u_stride apart, y f32 rows y_stride apart. A thread per
// output row i; a block's 8 tokens' u in shared memory (grid: rows / 256 × tokens / 8).
extern "C" __global__ void __launch_bounds__(256)
    lora_expand(const float* __restrict__ u, int u_stride, const bf16* __restrict__ b, int rank, float scale,
                float* __restrict__ y, int y_stride, int rows, int tokens) {
    __shared__ float us[LORA_TOKENS][LORA_MAX_RANK];
    pdl_wait();
    const int t0 = blockIdx.y * LORA_TOKENS, nt = min(LORA_TOKENS, tokens - t0);
    for (int e = threadIdx.x; e < LORA_TOKENS * rank; e += blockDim.x) {
        const int t = e / rank, k = e % rank;
        us[t][k] = t < nt ? u[(size_t)(t0 + t) * u_stride + k] : 0.f;
    }
    __syncthreads();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float acc[LORA_TOKENS] = {};
    const bf16* row = b + (size_t)i * rank;
    for (int k = 0; k < rank; k++) {
        const float bk = __bfloat162float(row[k]);
#pragma unroll
        for (int t = 0; t < LORA_TOKENS; t++) acc[t] += bk * us[t][k];
    }
    for (int t = 0; t < nt; t++) y[(size_t)(t0 + t) * y_stride + i] += scale * acc[t];
}

// The several-token decode steps' output-projection term (moe.rs: moe_decode_kernels), a site per
// token (sites: a device array, null entries for tokens without one):
// lora_shrink_sites: u[t·LORA_FUSED_RANKS + j] = A_t[j] · x[t], x bf16 [tokens, in]; a warp per
//   row j (grid: LORA_FUSED_RANKS / 8 × tokens).
extern "C" __global__ void __launch_bounds__(256) lora_shrink_sites(const bf16* __restrict__ x, int in_dim,
                                                                    const LoraSite* const* __restrict__ sites,
                                                                    float* __restrict__ u) {
    pdl_wait();
    const int t = blockIdx.y, j = blockIdx.x * 8 + (threadIdx.x >> 5);
    const LoraSite* site = sites[t];
    if (site == nullptr || j >= site->rank_sum) return;
    const float v = lora_row_dot(site->a + (size_t)j * in_dim, x + (size_t)t * in_dim, in_dim);
    if ((threadIdx.x & 31) == 0) u[t * LORA_FUSED_RANKS + j] = v;
}

// lora_expand_sites: y[t·y_stride + r] += lora_term(sites, u, r, t) for r < rows (grid: rows / 256
//   × tokens).
extern "C" __global__ void __launch_bounds__(256) lora_expand_sites(const float* __restrict__ u,
                                                                    const LoraSite* const* __restrict__ sites,
                                                                    float* __restrict__ y, int y_stride, int rows) {
    pdl_wait();
    const int t = blockIdx.y, r = blockIdx.x * blockDim.x + threadIdx.x;
    if (sites[t] == nullptr || r >= rows) return;
    y[(size_t)t * y_stride + r] += lora_term(sites, u, r, t);
}

// The shared expert apart, when an adapter adapts it (lora.rs: `shared_expert`; the layer-by-layer
// forward): the expert kernels run with its slot's weight 0, and it runs as plain products.
// lora_take_gate: gates[t] = weights[t·SLOTS + TOP_K] (its gate, sigmoid of the gate logit), then
//   0 there (grid: tokens / 256).
extern "C" __global__ void lora_take_gate(float* __restrict__ weights, float* __restrict__ gates, int tokens) {
    pdl_wait();
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= tokens) return;
    gates[t] = weights[t * SLOTS + TOP_K];
    weights[t * SLOTS + TOP_K] = 0.f;
}

// lora_swiglu: act[t, i] = bf16(silu(gu[t, i]) · gu[t, EXPERT_DIM + i]), gu f32 [tokens, 2 ·
//   EXPERT_DIM] (gate rows, then up rows), as the expert kernels round their activations (grid:
//   tokens · EXPERT_DIM / 256).
extern "C" __global__ void lora_swiglu(const float* __restrict__ gu, bf16* __restrict__ act, int tokens) {
    pdl_wait();
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= tokens * EXPERT_DIM) return;
    const int t = e / EXPERT_DIM, i = e % EXPERT_DIM;
    const float* row = gu + (size_t)t * 2 * EXPERT_DIM;
    act[e] = __float2bfloat16(silu(row[i]) * row[EXPERT_DIM + i]);
}

// lora_add_gated: out[t, c] += gates[t] · d[t, c], f32 [tokens, HIDDEN] (grid: tokens · HIDDEN / 256).
extern "C" __global__ void lora_add_gated(float* __restrict__ out, const float* __restrict__ d,
                                          const float* __restrict__ gates, int tokens) {
    pdl_wait();
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= tokens * HIDDEN) return;
    out[e] += gates[e / HIDDEN] * d[e];
}

// ---- The routed experts' adapters (lora.rs: `ExpertsSite`; the layer-by-layer forward). Per
// expert tensor, A bf16 [256·rank, in] (expert e's rows e·rank ..) and B bf16 [256, out, rank]. u
// f32 [T, 8, rank] (a routed pair's A x); pair = t·9 + slot, e = ids[pair].
// lora_experts_shrink: u[t, slot] = A_e x for each routed pair. x by `mode`: 0, bf16 [T, in] a row a
//   token (the experts' input); 1, f32 [T·9, in] a row a pair (the expert GEMVs' activations); 2,
//   bf16 [T·9, in] a row a pair in the grouped GEMMs' order (row q is pair perm[q]). A warp per row
//   k of A (lora_row_dot's order); grid (T·9, rank / 8 up).
extern "C" __global__ void __launch_bounds__(256)
    lora_experts_shrink(const void* __restrict__ x, int mode, const int* __restrict__ perm, const int* __restrict__ ids,
                        const bf16* __restrict__ a, int rank, int in_dim, float* __restrict__ u) {
    pdl_wait();
    const int q = blockIdx.x, k = blockIdx.y * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    const int pair = mode == 2 ? perm[q] : q, t = pair / SLOTS, slot = pair % SLOTS;
    if (slot >= TOP_K || k >= rank) return;
    const bf16* row = a + ((size_t)ids[pair] * rank + k) * in_dim;
    float acc;
    if (mode == 1) {  // f32 activations: lora_row_dot's order over f32 x
        acc = 0.f;
        for (int c = lane * 8; c < in_dim; c += 256) {
            float w[8];
            unpack8(__ldg(reinterpret_cast<const uint4*>(row + c)), w);
            const float4* xf = reinterpret_cast<const float4*>(static_cast<const float*>(x) + (size_t)q * in_dim + c);
            const float4 x0 = xf[0], x1 = xf[1];
            const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int j = 0; j < 8; j++) acc += w[j] * xv[j];
        }
        acc = warp_sum(acc);
    } else {
        acc = lora_row_dot(row, static_cast<const bf16*>(x) + (size_t)(mode == 0 ? t : q) * in_dim, in_dim);
    }
    if (lane == 0) u[((size_t)t * TOP_K + slot) * rank + k] = acc;
}

// lora_experts_gate_up: delta[t, slot, j] = scale · B_e[j] · u[t, slot] for j < 1024 (the gate rows,
//   then the up rows: what the gate/up kernels add, lora.cuh's lora_add_gate_up); a thread per
//   j; grid (T·8, 1024 / 256).
extern "C" __global__ void __launch_bounds__(256)
    lora_experts_gate_up(const float* __restrict__ u, const int* __restrict__ ids, const bf16* __restrict__ b, int rank,
                         float scale, float* __restrict__ delta) {
    __shared__ float us[LORA_MAX_RANK];
    pdl_wait();
    const int p = blockIdx.x, t = p / TOP_K, slot = p % TOP_K, j = blockIdx.y * 256 + threadIdx.x;
    for (int k = threadIdx.x; k < rank; k += 256) us[k] = u[(size_t)p * rank + k];
    __syncthreads();
    const bf16* row = b + ((size_t)ids[t * SLOTS + slot] * 2 * EXPERT_DIM + j) * rank;
    float acc = 0.f;
    for (int k = 0; k < rank; k++) acc += __bfloat162float(row[k]) * us[k];
    delta[(size_t)p * 2 * EXPERT_DIM + j] = scale * acc;
}

// lora_experts_down: out[t, c] += scale · Σ_slot weights[t, slot] · B_e[c] · u[t, slot] over the 8
//   routed slots, out f32 [T, 2048]; a thread per column c; grid (T, 2048 / 256).
extern "C" __global__ void __launch_bounds__(256)
    lora_experts_down(const float* __restrict__ u, const int* __restrict__ ids, const float* __restrict__ weights,
                      const bf16* __restrict__ b, int rank, float scale, float* __restrict__ out) {
    __shared__ float us[TOP_K][LORA_MAX_RANK];
    pdl_wait();
    const int t = blockIdx.x, c = blockIdx.y * 256 + threadIdx.x;
    for (int e = threadIdx.x; e < TOP_K * rank; e += 256) us[e / rank][e % rank] = u[(size_t)t * TOP_K * rank + e];
    __syncthreads();
    float acc = 0.f;
    for (int slot = 0; slot < TOP_K; slot++) {
        const bf16* row = b + ((size_t)ids[t * SLOTS + slot] * HIDDEN + c) * rank;
        float d = 0.f;
        for (int k = 0; k < rank; k++) d += __bfloat162float(row[k]) * us[slot][k];
        acc += weights[t * SLOTS + slot] * d;
    }
    out[(size_t)t * HIDDEN + c] += scale * acc;
}
