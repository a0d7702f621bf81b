// The 4- to 8-bit experts' decode GEMVs (helpers: moe_decode.cuh), the four-kernel form of
// moe_decode_block_int4 and its GGUF forms (moe.rs `moe_decode_kernels`) for GPUs where its grid
// cannot be resident (fewer than 129 SMs, or 99 KB of shared memory: one block an SM), and the
// few-token expert path: the same row formats and dots as its phases 2 and 3. An instance per
// format (_int4, _q4k, _q5k, _q6k, _q8_0).
//
// moe_gate_up_gemv_*: act[t, slot, i] = silu(gate_e[i]·x_t) * (up_e[i]·x_t), e = ids[t, slot]
// (slot 8: the shared expert, bf16 shared_gate_up [1024, 2048], or with shared_rows expert
// SHARED_EXPERT of gate_up, as the fused kernel's head takes it). Grid (512/8, 9, T), 256
// threads, a warp per intermediate row i: its two rows through its own ring. x bf16 [T, 2048].
// delta: a LoRA adapter's term of the routed sums, or null (lora.cuh: lora_add_gate_up).
// Dynamic shared memory: 8 warps × 8 KB + x f32 [2048] = 73,728 bytes.
template <typename F>
__device__ __forceinline__ void moe_gate_up_gemv_q(const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up,
                                                   const bf16* __restrict__ shared_gate_up,
                                                   const int* __restrict__ ids, const float* __restrict__ delta,
                                                   float* __restrict__ act, int shared_rows) {
    constexpr int GU_ROW = F::row_bytes(HIDDEN);
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned char* ring = smem + warp * 2 * HIDDEN * sizeof(bf16);
    float* xs = reinterpret_cast<float*>(smem + MOE_WARPS * 2 * HIDDEN * sizeof(bf16));
    const int i = blockIdx.x * MOE_WARPS + warp, slot = blockIdx.y, t = blockIdx.z;
    pdl_wait();
    pdl_trigger();
    float g, u;
    if (slot < TOP_K || shared_rows) {
        const int e = slot < TOP_K ? __ldcg(ids + t * SLOTS + slot) : SHARED_EXPERT;
        request_row_bytes<GU_ROW>(ring, gate_row_q<F>(gate_up, e, i));
        request_row_bytes<GU_ROW>(ring + GU_ROW, gate_row_q<F>(gate_up, e, EXPERT_DIM + i));
        stage_bf16<HIDDEN>(x + (size_t)t * HIDDEN, xs);
        LaneX4 xv;
        xv.load(xs);
        cp_async_wait<0>();
        __syncwarp();  // (lanes read pieces other lanes copied)
        g = expert_row_dot_q<F>(ring, xv);
        u = expert_row_dot_q<F>(ring + GU_ROW, xv);
    } else {
        bf16* rows = reinterpret_cast<bf16*>(ring);
        request_row(rows, shared_gate_up + (size_t)i * HIDDEN);
        request_row(rows + HIDDEN, shared_gate_up + (size_t)(EXPERT_DIM + i) * HIDDEN);
        stage_bf16<HIDDEN>(x + (size_t)t * HIDDEN, xs);
        LaneX xv;
        xv.load(xs);
        cp_async_wait<0>();  // each lane reads back only what it copied
        g = expert_row_dot(rows, xv);
        u = expert_row_dot(rows + HIDDEN, xv);
    }
    lora_add_gate_up(delta, t * SLOTS + slot, i, g, u);
    if (lane == 0) act[((size_t)t * SLOTS + slot) * EXPERT_DIM + i] = silu(g) * u;
}

// moe_down_gemv_*: out[t, c] += Σ_slot weights[t, slot] · (down_e[c] · act[t, slot]), the 8
// routed rows in the format, the shared expert's bf16 (shared_down [2048, 512]) or with
// shared_rows its row in `down` (expert SHARED_EXPERT); phase 3's sums in its order. Grid
// (2048/8, 1, T), 256 threads, a warp per output column c.
template <typename F>
__device__ __forceinline__ void moe_down_gemv_q(const float* __restrict__ act, const unsigned char* __restrict__ down,
                                                const bf16* __restrict__ shared_down, const int* __restrict__ ids,
                                                const float* __restrict__ weights, float* __restrict__ out,
                                                int shared_rows) {
    constexpr int DOWN_ROW = F::row_bytes(EXPERT_DIM);
    __shared__ __align__(16) unsigned char rows[MOE_WARPS][(TOP_K + 1) * DOWN_ROW];
    __shared__ int slot_ids[MOE_WARPS][TOP_K];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c = blockIdx.x * MOE_WARPS + warp, t = blockIdx.z;
    pdl_wait();
    pdl_trigger();
    if (lane < TOP_K) slot_ids[warp][lane] = __ldcg(ids + t * SLOTS + lane);
    __syncwarp();
    request_down_rows<F>(rows[warp], down, slot_ids[warp], c);
    unsigned char* shared_row = rows[warp] + TOP_K * DOWN_ROW;
    if (shared_rows) request_row_bytes<DOWN_ROW>(shared_row, down + ((size_t)SHARED_EXPERT * HIDDEN + c) * DOWN_ROW);
    const bf16* sd = shared_down + (size_t)c * EXPERT_DIM + lane * 16;
    uint4 sw0 = make_uint4(0, 0, 0, 0), sw1 = sw0;
    if (!shared_rows) sw0 = *reinterpret_cast<const uint4*>(sd), sw1 = *reinterpret_cast<const uint4*>(sd + 8);
    cp_async_wait<0>();
    __syncwarp();
    float acc = 0.f;
#pragma unroll
    for (int slot = 0; slot < SLOTS; slot++) {
        const float4* ap = reinterpret_cast<const float4*>(act + ((size_t)t * SLOTS + slot) * EXPERT_DIM + lane * 16);
        float a[16];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float4 v = __ldcg(ap + k);
            a[4 * k] = v.x, a[4 * k + 1] = v.y, a[4 * k + 2] = v.z, a[4 * k + 3] = v.w;
        }
        float part;
        if (slot < TOP_K) {
            part = down_lane_dot_q<F>(rows[warp] + slot * DOWN_ROW, lane, a);
        } else if (shared_rows) {
            part = down_lane_dot_q<F>(shared_row, lane, a);
        } else {
            part = dot8(sw0, a) + dot8(sw1, a + 8);
        }
        acc += __ldcg(weights + t * SLOTS + slot) * part;
    }
    acc = warp_sum(acc);
    if (lane == 0) out[(size_t)t * HIDDEN + c] += acc;
}

extern "C" __global__ void __launch_bounds__(256) moe_gate_up_gemv_int4(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared_gate_up,
        const int* __restrict__ ids, const float* __restrict__ delta, float* __restrict__ act, int shared_rows) {
    moe_gate_up_gemv_q<Int4Format>(x, gate_up, shared_gate_up, ids, delta, act, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_down_gemv_int4(
        const float* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared_down,
        const int* __restrict__ ids, const float* __restrict__ weights, float* __restrict__ out, int shared_rows) {
    moe_down_gemv_q<Int4Format>(act, down, shared_down, ids, weights, out, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_gate_up_gemv_q4k(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared_gate_up,
        const int* __restrict__ ids, const float* __restrict__ delta, float* __restrict__ act, int shared_rows) {
    moe_gate_up_gemv_q<Q4KFormat>(x, gate_up, shared_gate_up, ids, delta, act, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_down_gemv_q4k(
        const float* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared_down,
        const int* __restrict__ ids, const float* __restrict__ weights, float* __restrict__ out, int shared_rows) {
    moe_down_gemv_q<Q4KFormat>(act, down, shared_down, ids, weights, out, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_gate_up_gemv_q5k(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared_gate_up,
        const int* __restrict__ ids, const float* __restrict__ delta, float* __restrict__ act, int shared_rows) {
    moe_gate_up_gemv_q<Q5KFormat>(x, gate_up, shared_gate_up, ids, delta, act, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_down_gemv_q5k(
        const float* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared_down,
        const int* __restrict__ ids, const float* __restrict__ weights, float* __restrict__ out, int shared_rows) {
    moe_down_gemv_q<Q5KFormat>(act, down, shared_down, ids, weights, out, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_gate_up_gemv_q6k(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared_gate_up,
        const int* __restrict__ ids, const float* __restrict__ delta, float* __restrict__ act, int shared_rows) {
    moe_gate_up_gemv_q<Q6KFormat>(x, gate_up, shared_gate_up, ids, delta, act, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_down_gemv_q6k(
        const float* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared_down,
        const int* __restrict__ ids, const float* __restrict__ weights, float* __restrict__ out, int shared_rows) {
    moe_down_gemv_q<Q6KFormat>(act, down, shared_down, ids, weights, out, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_gate_up_gemv_q8_0(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared_gate_up,
        const int* __restrict__ ids, const float* __restrict__ delta, float* __restrict__ act, int shared_rows) {
    moe_gate_up_gemv_q<Q8Format>(x, gate_up, shared_gate_up, ids, delta, act, shared_rows);
}
extern "C" __global__ void __launch_bounds__(256) moe_down_gemv_q8_0(
        const float* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared_down,
        const int* __restrict__ ids, const float* __restrict__ weights, float* __restrict__ out, int shared_rows) {
    moe_down_gemv_q<Q8Format>(act, down, shared_down, ids, weights, out, shared_rows);
}
