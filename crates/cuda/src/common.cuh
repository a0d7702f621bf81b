// Shared by every solo kernel file (pasted in front of each by kernels.rs).
// Conventions: weights bf16 row-major [out, in]; activations between kernels f32 unless a
// kernel's comment says bf16 (inputs of matrix products are bf16); all accumulation in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef __nv_bfloat16 bf16;

// NVRTC has no system headers: the fixed-width types and INFINITY kernels use.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef long long int64_t;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// The real model's widths (HIDDEN, VOCAB, ATTN_HEADS, KV_HEADS, HEAD_DIM, ROTARY_DIM, GDN_K_HEADS,
// GDN_V_HEADS, GDN_HEAD_DIM, GDN_CONV_DIM, GDN_KERNEL, EXPERTS, TOP_K, EXPERT_DIM) are #defines
// pasted in front of this header from the Rust constants (kernels.rs, `widths`). Kernels may rely
// on them; the CUDA backend refuses checkpoints with other widths.

// Programmatic dependent launch (runtime.rs launches every kernel with it). Every kernel starts
// with pdl_trigger() (the next kernel may be scheduled now; it still waits for this one) and
// calls pdl_wait() — which returns once the previous kernel has finished and its writes are
// visible — before it touches anything but weights, on every path through the kernel. Work that
// only reads weights (a GEMV's weight loads) may go between the two, overlapping the previous
// kernel's tail. Without PDL both are no-ops; below sm_90 (the portable forms, launched without
// PDL) they compile to nothing.
#if __CUDA_ARCH__ >= 900
#define SOLO_HOPPER 1
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#else
#define SOLO_HOPPER 0
__device__ __forceinline__ void pdl_trigger() {}
__device__ __forceinline__ void pdl_wait() {}
#endif

// The big-shared-memory forms (227 KB a block: sm_90, sm_100, sm_103) or the forms that fit the
// consumer cards' 99 KB (sm_80's portable forms, sm_86, sm_89, sm_120). runtime.rs's
// `Target::big_shared` makes the same choice for the launches.
#if __CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030
#define SOLO_BIG_SHARED 1
#else
#define SOLO_BIG_SHARED 0
#endif

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// A barrier of the block (THREADS = 0), or of its first THREADS threads alone (named barrier 1;
// the rest of the block does not take part).
template <int THREADS = 0>
__device__ __forceinline__ void sync_threads() {
    if constexpr (THREADS == 0) __syncthreads();
    else asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory");
}

// The block's reduction of v by WarpOp (warp_sum or warp_max), `empty` standing in for the
// missing warps; `scratch` holds 32 floats. Every thread gets the result. (THREADS: only the
// block's first THREADS threads take part, as sync_threads says.)
template <float (*WarpOp)(float), int THREADS = 0>
__device__ __forceinline__ float block_reduce(float v, float* scratch, float empty) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = WarpOp(v);
    sync_threads<THREADS>();
    if (lane == 0) scratch[warp] = v;
    sync_threads<THREADS>();
    const int warps = THREADS != 0 ? THREADS / 32 : (blockDim.x + 31) >> 5;
    v = lane < warps ? scratch[lane] : empty;
    return WarpOp(v);
}
template <int THREADS = 0>
__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<warp_sum, THREADS>(v, scratch, 0.f); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce<warp_max>(v, scratch, -INFINITY); }

__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }
__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + __expf(-x)); }

// 8 bf16 packed in 16 bytes, widened to f32.
__device__ __forceinline__ void unpack8(uint4 raw, float out[8]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

// Asynchronous global → shared copies (sm_80+), completed by commit/wait groups. A 16-byte copy
// with valid = false writes 16 zero bytes instead (out-of-range rows of a tile).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const int n = valid ? 16 : 0;  // 0 source bytes: the 16 destination bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// Waits until at most `pending` (0..8) of this thread's groups are in flight; `pending` must be a
// constant once the caller's loop is unrolled (the switch then folds away). Lets a GEMV consume
// its weights piece by piece as they land instead of after the last one.
__device__ __forceinline__ void cp_async_wait_pending(int pending) {
    switch (pending) {
        case 8: cp_async_wait<8>(); break;
        case 7: cp_async_wait<7>(); break;
        case 6: cp_async_wait<6>(); break;
        case 5: cp_async_wait<5>(); break;
        case 4: cp_async_wait<4>(); break;
        case 3: cp_async_wait<3>(); break;
        case 2: cp_async_wait<2>(); break;
        case 1: cp_async_wait<1>(); break;
        default: cp_async_wait<0>(); break;
    }
}

// Tensor-core fragments for mma.sync m16n8k16 (bf16 in, f32 accumulate).
// Two f32 as the bf16 pair of one fragment register (lo in the low half).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

// d += a * b for a 16x16 (row-major) by 16x8 (column-major) bf16 tile, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices from shared memory (lane i gives the row address of matrix i/8): lane
// (g, tq) receives elements (g, 2tq) and (g, 2tq+1) of each, the mma fragment layout.
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, const bf16* p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}

// `ldmatrix_x4`, each matrix transposed: lane (g, tq) receives elements (2tq, g) and (2tq+1, g),
// the B fragment of a row-major [k, n] tile (attention's V).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, const bf16* p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}

// ---------------------------------------------------------------------------------------------
// Decode GEMV building blocks (gemv.cu, moe_router.cu): one token, y = W · x, W bf16 [rows, IN].
//
// A block of 256 threads (8 warps) owns GemvTile<IN>::ROWS consecutive rows: each warp 4096/IN
// of them, each lane 16 pieces of 16 bytes of those rows in registers (pieces j·32 + lane, so a
// warp reads 512 contiguous bytes per request). The kernels request all their weights first —
// before pdl_wait(), since weights never depend on the previous kernel — then stage x in shared
// memory as f32, then take the dots; every lane sums its pieces in column order, then the warp.

// 16 bytes of weights, read once: not kept in L1. `volatile` keeps the loads ahead of pdl_wait().
__device__ __forceinline__ uint4 load_weights16(const bf16* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// A compiler barrier after a burst of load_weights16: nothing that follows (the staging of x, the
// dots) is scheduled between the loads, so they are all in flight at once.
__device__ __forceinline__ void weights_requested() { asm volatile("" ::: "memory"); }

// w (8 bf16) · (a, b) (8 f32). Every decode GEMV sums its pieces with this one expression, in
// column order, so they all give the same bits for the same row.
__device__ __forceinline__ float dot_piece(uint4 w, float4 a, float4 b) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
    const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
    const float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
    return (w0.x * a.x + w0.y * a.y + w1.x * a.z + w1.y * a.w) + (w2.x * b.x + w2.y * b.y + w3.x * b.z + w3.y * b.w);
}

template <int IN>
struct GemvTile {
    static constexpr int ROWS_PER_WARP = 4096 / IN;
    static constexpr int ROWS = 8 * ROWS_PER_WARP;  // per block
    static constexpr int PIECES = IN / 256;         // per lane and row
    uint4 w[ROWS_PER_WARP][PIECES];

    __device__ __forceinline__ int row(int r) const {
        return blockIdx.x * ROWS + (threadIdx.x >> 5) * ROWS_PER_WARP + r;
    }

    // Requests this block's rows of W [rows, IN]; rows at or past `rows` are zeros.
    __device__ __forceinline__ void load(const bf16* __restrict__ W, int rows) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < ROWS_PER_WARP; r++) {
            const bool ok = row(r) < rows;
            const bf16* wr = W + (size_t)(ok ? row(r) : 0) * IN + lane * 8;
#pragma unroll
            for (int j = 0; j < PIECES; j++) w[r][j] = ok ? load_weights16(wr + j * 256) : make_uint4(0, 0, 0, 0);
        }
        weights_requested();
    }

    // The dot of row r with xs (f32 [IN], shared memory), complete in every lane of the warp.
    __device__ __forceinline__ float dot(int r, const float* xs) const {
        const int lane = threadIdx.x & 31;
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < PIECES; j++) {
            const float* x = xs + j * 256 + lane * 8;
            acc += dot_piece(w[r][j], *reinterpret_cast<const float4*>(x), *reinterpret_cast<const float4*>(x + 4));
        }
        return warp_sum(acc);
    }
};

// The norm and staging helpers below assume blocks of 256 threads and unroll their loops, so
// every thread's loads are in flight at once (a rolled loop pays one L2 round trip per step).
#define STAGE_THREADS 256

// Zero-centred RMSNorm's scale for one row of HIDDEN f32 values: rsqrt(mean(h²) + eps). Thread t
// sums h[i]² for i = t, t + 256, ... (the order norm.cu also uses, so both give the same bits),
// keeping its 8 values in `hv`. Every thread gets the result; `red` holds 32 floats. (PART: a
// block of more than 256 threads, whose first 256 alone call it.)
template <bool PART = false>
__device__ __forceinline__ float rms_scale(const float* __restrict__ h, float eps, float* red,
                                           float (&hv)[HIDDEN / STAGE_THREADS]) {
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) hv[k] = __ldcg(h + threadIdx.x + k * STAGE_THREADS);
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) ss += hv[k] * hv[k];
    return rsqrtf(block_sum<PART ? STAGE_THREADS : 0>(ss, red) / HIDDEN + eps);
}

// xs (f32 [HIDDEN], shared) = bf16-rounded RMSNorm(h)·w1p: the normalised input a sub-layer
// reads, exactly as rms_norm_bf16 writes it. Ends with a barrier. (A block of BLOCK > 256
// threads: its first 256 do it, the block's barrier after.)
template <int BLOCK = STAGE_THREADS>
__device__ __forceinline__ void stage_rms_norm(const float* __restrict__ h, const float* __restrict__ w1p, float eps,
                                               float* xs, float* red) {
    if (BLOCK == STAGE_THREADS || threadIdx.x < STAGE_THREADS) {
        float hv[HIDDEN / STAGE_THREADS], wv[HIDDEN / STAGE_THREADS];
#pragma unroll
        for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) wv[k] = w1p[threadIdx.x + k * STAGE_THREADS];
        const float inv = rms_scale<(BLOCK > STAGE_THREADS)>(h, eps, red, hv);
#pragma unroll
        for (int k = 0; k < HIDDEN / STAGE_THREADS; k++)
            xs[threadIdx.x + k * STAGE_THREADS] = __bfloat162float(__float2bfloat16(hv[k] * inv * wv[k]));
    }
    __syncthreads();
}

// stage_rms_norm keeping x as bf16 (xb bf16 [HIDDEN], shared): the same values in half the bytes.
// Ends with a barrier.
__device__ __forceinline__ void stage_rms_norm_bf16(const float* __restrict__ h, const float* __restrict__ w1p,
                                                    float eps, bf16* xb, float* red) {
    float hv[HIDDEN / STAGE_THREADS], wv[HIDDEN / STAGE_THREADS];
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) wv[k] = w1p[threadIdx.x + k * STAGE_THREADS];
    const float inv = rms_scale(h, eps, red, hv);
#pragma unroll
    for (int k = 0; k < HIDDEN / STAGE_THREADS; k++) xb[threadIdx.x + k * STAGE_THREADS] = __float2bfloat16(hv[k] * inv * wv[k]);
    __syncthreads();
}

// xs (f32 [N], shared) = x (bf16 [N]), N a multiple of 2048: 16-byte loads, all in flight.
// Ends with a barrier.
// Activations written by the previous kernel are read from L2 (__ldcg) by the kernels that may
// start early under PDL, so no line an SM cached before can be stale.
template <int N>
__device__ __forceinline__ void stage_bf16(const bf16* __restrict__ x, float* xs) {
    float v[N / (8 * STAGE_THREADS)][8];
#pragma unroll
    for (int k = 0; k < N / (8 * STAGE_THREADS); k++)
        unpack8(__ldcg(reinterpret_cast<const uint4*>(x + (threadIdx.x + k * STAGE_THREADS) * 8)), v[k]);
#pragma unroll
    for (int k = 0; k < N / (8 * STAGE_THREADS); k++) {
        float4* d = reinterpret_cast<float4*>(xs + (threadIdx.x + k * STAGE_THREADS) * 8);
        d[0] = make_float4(v[k][0], v[k][1], v[k][2], v[k][3]);
        d[1] = make_float4(v[k][4], v[k][5], v[k][6], v[k][7]);
    }
    __syncthreads();
}

// ---------------------------------------------------------------------------------------------
// MoE (moe_router.cu, moe_experts.cu, moe_decode.cu): every token has SLOTS = 9 (expert, weight)
// pairs, 8 routed, then the shared expert (index 256 in the fused expert tensors) with weight
// sigmoid(x . w_sg), w_sg being row 256 of the router.

#define SLOTS (TOP_K + 1)
#define SHARED_EXPERT EXPERTS
// Rows of the router matrix: the experts, then the shared expert's gate.
#define ROUTER_ROWS (EXPERTS + 1)

// Routing of one token by one warp, from its ROUTER_ROWS logits (256 experts, then the shared
// expert's gate): ids [9], weights [9]; counts [257] or null: per-expert token counts are added
// to it (prefill grouping; the caller zeroes it). Lane l holds experts l + 32i, i < 8. The softmax
// sums like a 256-thread block_sum (each i over the lanes, then the 8 partials), so it keeps the
// bits of the block-wide version it replaces. Top-8 over the probabilities, ties to the lower
// expert index, the kept probabilities summed in selection order: exactly solo_cpu::moe::route.
// Each round takes the warp's best with two redux instructions (the value's bits, then the
// lowest index holding it). SHARED_LOGITS: logits in shared memory (a block's own copy).
template <bool SHARED_LOGITS = false>
__device__ __forceinline__ void route_token(const float* __restrict__ logits, int* __restrict__ ids,
                                            float* __restrict__ weights, int* __restrict__ counts) {
    const unsigned FULL = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    constexpr int PER_LANE = EXPERTS / 32;
    float v[PER_LANE];
#pragma unroll
    for (int i = 0; i < PER_LANE; i++)  // from L2 (other blocks wrote them), or shared memory
        v[i] = SHARED_LOGITS ? logits[lane + 32 * i] : __ldcg(logits + lane + 32 * i);
    const float gate_logit = SHARED_LOGITS ? logits[EXPERTS] : __ldcg(logits + EXPERTS);
    float mx = v[0];
#pragma unroll
    for (int i = 1; i < PER_LANE; i++) mx = fmaxf(mx, v[i]);
    mx = warp_max(mx);
    float partial = 0.f;  // lane i < 8: Σ over the lanes of exp(v[i] − mx)
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) {
        v[i] = expf(v[i] - mx);
        const float s = warp_sum(v[i]);
        if (lane == i) partial = s;
    }
    const float sum = warp_sum(partial);
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) v[i] /= sum;

    // Probabilities are >= 0, so their bits order like them; key 0 marks a taken one.
    auto key = [](float p) { return p >= 0.f ? __float_as_uint(p) + 1u : 0u; };
    float bv = -1.f;  // this lane's best not yet taken, ascending index: ties keep the lower one
    int bi = 0;
    auto local_best = [&]() {
        bv = -1.f;
#pragma unroll
        for (int i = 0; i < PER_LANE; i++)
            if (v[i] > bv) {
                bv = v[i];
                bi = lane + 32 * i;
            }
    };
    local_best();
    float sel_w[TOP_K];
    int sel_e[TOP_K];
#pragma unroll
    for (int k = 0; k < TOP_K; k++) {
        const unsigned best = __reduce_max_sync(FULL, key(bv));
        const int e = (int)__reduce_min_sync(FULL, key(bv) == best ? (unsigned)bi : 0xffffffffu);
        sel_w[k] = __uint_as_float(best - 1u);
        sel_e[k] = e;
        if (bi == e) {
#pragma unroll
            for (int i = 0; i < PER_LANE; i++)
                if (lane + 32 * i == e) v[i] = -1.f;
            local_best();
        }
    }
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < TOP_K; k++) total += sel_w[k];
#pragma unroll
    for (int k = 0; k < TOP_K; k++) {
        if (lane == k) {
            ids[k] = sel_e[k];
            weights[k] = sel_w[k] / total;
            if (counts) atomicAdd(&counts[sel_e[k]], 1);
        }
    }
    if (lane == 0) {
        ids[TOP_K] = SHARED_EXPERT;
        weights[TOP_K] = 1.f / (1.f + expf(-gate_logit));
    }
}

// Σ_i w[i] * x[i] for 8 bf16 weights packed in a uint4.
__device__ __forceinline__ float dot8(uint4 w, const float x[8]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __bfloat1622float2(h[i]);
        acc += f.x * x[2 * i] + f.y * x[2 * i + 1];
    }
    return acc;
}

// The GPU sampler's parameters (sample_topk.cu; the screened lm_head reads top_k): written by
// the host (SamplingParamsGpu in sample.rs), read at every launch; 32 bytes.
struct SamplingParams {
    float temperature;
    int top_k;
    float top_p;
    int pad;
    uint64_t seed;
    uint64_t step;  // draws made so far
};

// ---------------------------------------------------------------------------------------------
// FP8 weights (the official block format: e4m3 row-major, one f32 scale per 128×128 block,
// w = q · s). Every e4m3 value is exact in f16 and f32, so the conversion adds no rounding.

// Two e4m3 (the low byte is the first) → an exact f16 pair (the low half is the first). sm_89
// converts in one instruction; below it, each byte's sign, exponent and mantissa are moved into
// an f16's fields (the exponent bias differs by 8: the value is then 2^-8 too small, subnormals
// included) and one multiply by 2^8 makes it exact. (e4m3's NaN, never a weight, is not kept.)
__device__ __forceinline__ unsigned int e4m3x2_to_f16x2(unsigned short two) {
#if __CUDA_ARCH__ >= 890
    unsigned int h2;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(two));
    return h2;
#else
    const unsigned int b = two;
    const unsigned int bits = ((b & 0x80u) << 8) | ((b & 0x7fu) << 7) | ((b & 0x8000u) << 16) | ((b & 0x7f00u) << 15);
    __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(256.f));
    return *reinterpret_cast<unsigned int*>(&h);
#endif
}

// Two e4m3 (the low byte is the first) → two f32.
__device__ __forceinline__ float2 fp8x2_to_float2(unsigned short two) {
    const unsigned int h2 = e4m3x2_to_f16x2(two);
    float lo, hi;
    asm("{.reg .f16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;}"
        : "=f"(lo), "=f"(hi)
        : "r"(h2));
    return make_float2(lo, hi);
}

// The FP8 dots run on the half-precision units: two e4m3 weights become an exact f16 pair in one
// conversion, and one HFMA2 multiplies and adds two of them, where widening every weight to f32
// first makes the conversions, not the bytes, the decode GEMVs' bound. x is held as f16 pairs
// scaled by FP8_X_SCALE = 2^-4 (exact), so that a piece's sum of 8 products per half stays far
// from f16's 65504 (|q| ≤ 448); each piece's f16 sum is widened to f32 and the caller multiplies
// it by its block scale · 16. The f16 products and sums round to 11 bits (≈ 5e-4 relative per
// piece), below the 8 bits bf16 weights are rounded to.
#define FP8_X_SCALE 0.0625f
#define FP8_X_UNSCALE 16.f

// Σ_i q[i] · x[i] · 2^-4 for 16 e4m3 weights packed in a uint4 and x as 8 f16 pairs (scaled).
__device__ __forceinline__ float dot16_fp8(uint4 w, const __half2 (&x)[8]) {
    const unsigned int words[4] = {w.x, w.y, w.z, w.w};
    __half2 acc = __float2half2_rn(0.f);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const unsigned int lo = e4m3x2_to_f16x2((unsigned short)(words[i] & 0xffff));
        const unsigned int hi = e4m3x2_to_f16x2((unsigned short)(words[i] >> 16));
        acc = __hfma2(*reinterpret_cast<const __half2*>(&lo), x[2 * i], acc);
        acc = __hfma2(*reinterpret_cast<const __half2*>(&hi), x[2 * i + 1], acc);
    }
    const float2 f = __half22float2(acc);
    return f.x + f.y;
}

// 16 f32 (consecutive, or as given) → the 8 scaled f16 pairs dot16_fp8 takes.
__device__ __forceinline__ void to_x16(const float (&v)[16], __half2 (&out)[8]) {
#pragma unroll
    for (int i = 0; i < 8; i++) out[i] = __floats2half2_rn(v[2 * i] * FP8_X_SCALE, v[2 * i + 1] * FP8_X_SCALE);
}

// 16 consecutive f32 from shared memory (16-byte aligned) into registers.
__device__ __forceinline__ void load16(const float* p, float (&out)[16]) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float4 v = reinterpret_cast<const float4*>(p)[i];
        out[4 * i] = v.x, out[4 * i + 1] = v.y, out[4 * i + 2] = v.z, out[4 * i + 3] = v.w;
    }
}

// ---------------------------------------------------------------------------------------------
// int4 weights (GPTQ, AWQ, compressed-tensors W4A16: `weights.rs` repacks all of them into this
// one layout at load). A matrix [rows, K] is rows of INT4_ROW_BYTES(K) bytes each:
//   - K/2 bytes of 4-bit values q (0..15). 32-bit word w holds columns 8w .. 8w+7, ordered so that
//     (word >> 4s) & 0x000F000F holds columns 8w + 2s (bits 0-3) and 8w + 2s + 1 (bits 16-19);
//   - then one 32-bit word per group of 128 columns: bits 0-15 the f16 scale s, bits 16-23 the
//     zero point z (0..16; 8 for symmetric formats, 16 for GPTQ v1's stored 15): w = (q − z) · s.
// The scales sit in the row, so a row streams as one piece and its scales land with it.
#define INT4_GROUP 128
#define INT4_ROW_BYTES(K) ((K) / 2 + (K) / 32)

// The dots run like the FP8 ones: two 4-bit weights become the f16 pair (1024 + q) by one LOP3
// (the value in the low mantissa bits of 1024), one HSUB2 takes 1032 off (q − 8, exact), one
// HFMA2 multiplies and adds; x is held as f16 pairs scaled by FP8_X_SCALE. The caller multiplies
// the sum by s · FP8_X_UNSCALE and adds s · (8 − z) · Σx for a zero point other than 8.
__device__ __forceinline__ __half2 int4_pair(unsigned int word, int s) {
    const unsigned int v = ((word >> (4 * s)) & 0x000F000Fu) | 0x64006400u;
    return __hsub2(*reinterpret_cast<const __half2*>(&v), __halves2half2(__ushort_as_half(0x6408), __ushort_as_half(0x6408)));
}

// Σ (q[i] − 8) · x[i] · 2^-4 over the 8·N columns of N words, x as 4·N f16 pairs (scaled).
template <int N>
__device__ __forceinline__ float dot_int4(const unsigned int (&words)[N], const __half2* x) {
    __half2 acc = __float2half2_rn(0.f);
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int s = 0; s < 4; s++) acc = __hfma2(int4_pair(words[i], s), x[4 * i + s], acc);
    const float2 f = __half22float2(acc);
    return f.x + f.y;
}

// A group word → (s · FP8_X_UNSCALE, s · (8 − z)): the piece's dot d (dot_int4) over columns
// whose true-valued sum is xsum contributes d · a.x + xsum · a.y.
__device__ __forceinline__ float2 int4_group(unsigned int word) {
    const float s = __half2float(__ushort_as_half((unsigned short)(word & 0xffff)));
    return make_float2(s * FP8_X_UNSCALE, s * (float)(8 - (int)((word >> 16) & 0xff)));
}

// ---------------------------------------------------------------------------------------------
// 4- to 8-bit expert rows: the int4 layout above and GGUF's Q4_K, Q5_K, Q6_K and Q8_0 repacked at
// load (`kquant.rs`), the first four with their low 4 bits in the int4 word order. A format F gives
//   F::HIGH                         the bits above the low 4 (0, Q5_K's 1, Q6_K's 2), in a plane
//                                   after the low bits; 8 for Q8_0, whose bytes are whole values
//                                   (q + 128, 4 columns a word in the order c, c + 2, c + 1, c + 3);
//   F::row_bytes(K)                 bytes of a row of K columns (a multiple of 16);
//   F::affine(row, K, col)          the affine map of the column group holding `col`:
//                                   w = (f + shift) · s − m, f the pair's f16 value (q − 8 for the
//                                   4-bit formats, q − 16 for Q5_K, q − 32 for Q6_K, q for Q8_0);
//   F::dot(row, K, col, x, xsum)    Σ w · x over the 8·N columns col .. col + 8N (N = 2 or 4
//                                   words, inside one group; Q6_K's scales are per 16), x as 4N
//                                   scaled f16 pairs (to_x16's order) and xsum their true sum.
// `row` is the row's start, in shared or global memory. The int4 form's sums are the ones its
// kernels had before the formats were shared (dot · s·UNSCALE + xsum · s·(8 − z)).
struct Affine {
    float s, shift, m;
};

struct Int4Format {
    static constexpr int HIGH = 0;  // no high-bit plane
    __host__ __device__ static constexpr int row_bytes(int K) { return INT4_ROW_BYTES(K); }
    __device__ static __forceinline__ Affine affine(const unsigned char* row, int K, int col) {
        const unsigned int word = reinterpret_cast<const unsigned int*>(row + K / 2)[col / INT4_GROUP];
        const float s = __half2float(__ushort_as_half((unsigned short)(word & 0xffff)));
        return Affine{s, (float)(8 - (int)((word >> 16) & 0xff)), 0.f};
    }
};

// Q4_K: after the values, each 256-column block's 16 bytes as ggml stores them (d, dmin f16,
// then the 12 bytes of 6-bit (sc, m) pairs, one per 32 columns): w = d·sc·q − dmin·m. Q5_K: the
// same with q's fifth bits in a plane between (a word per 32 columns: the pair at nibble
// position p of low word u has its bits at 4u + p and 16 + 4u + p).
__device__ __forceinline__ Affine k_block_affine(const unsigned char* b, int col, float shift) {
    const unsigned int dm = *reinterpret_cast<const unsigned int*>(b);
    const unsigned char* q = b + 4;
    const int j = (col % 256) / 32;
    int sc, m;
    if (j < 4) {
        sc = q[j] & 63, m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
    const float d = __half2float(__ushort_as_half((unsigned short)(dm & 0xffff)));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
    return Affine{d * (float)sc, shift, dmin * (float)m};  // (q − shift + shift)·d·sc − dmin·m
}

struct Q4KFormat {
    static constexpr int HIGH = 0;
    __host__ __device__ static constexpr int row_bytes(int K) { return K / 2 + K / 16; }
    __device__ static __forceinline__ Affine affine(const unsigned char* row, int K, int col) {
        return k_block_affine(row + K / 2 + 16 * (col / 256), col, 8.f);
    }
};

struct Q5KFormat {
    static constexpr int HIGH = 1;
    __host__ __device__ static constexpr int row_bytes(int K) { return K / 2 + K / 8 + K / 16; }
    __device__ static __forceinline__ Affine affine(const unsigned char* row, int K, int col) {
        return k_block_affine(row + K / 2 + K / 8 + 16 * (col / 256), col, 16.f);
    }
};

// Q6_K: after the low 4 bits (int4 word order), the high 2 bits (a word per 16 columns: the
// pair at nibble position p of low word u has its bits at 2(4u + p) and 16 + 2(4u + p)), the i8
// scale of every 16 columns, the f16 d of every 256: w = d·sc·(q − 32).
struct Q6KFormat {
    static constexpr int HIGH = 2;
    __host__ __device__ static constexpr int row_bytes(int K) { return (K / 2 + K / 4 + K / 16 + K / 128 + 15) / 16 * 16; }
    __device__ static __forceinline__ Affine affine(const unsigned char* row, int K, int col) {
        const float sc = (float)(signed char)row[K / 2 + K / 4 + col / 16];
        const float d = __half2float(*reinterpret_cast<const __half*>(row + K / 2 + K / 4 + K / 16 + 2 * (col / 256)));
        return Affine{d * sc, 0.f, 0.f};
    }
};

// Q8_0: the values' bytes, then an f16 d per 32 columns: w = d·q.
struct Q8Format {
    static constexpr int HIGH = 8;
    __host__ __device__ static constexpr int row_bytes(int K) { return K + K / 16; }
    __device__ static __forceinline__ Affine affine(const unsigned char* row, int K, int col) {
        return Affine{__half2float(*reinterpret_cast<const __half*>(row + K + 2 * (col / 32))), 0.f, 0.f};
    }
};

// A Q8_0 pair: word w's columns (c, c + 1) (s = 0) or (c + 2, c + 3) (s = 1) as the f16 pair q.
__device__ __forceinline__ __half2 q8_pair(unsigned int w, int s) {
    const unsigned int v = ((w >> (8 * s)) & 0x00FF00FFu) | 0x64006400u;
    return __hsub2(*reinterpret_cast<const __half2*>(&v), __halves2half2(__ushort_as_half(0x6480), __ushort_as_half(0x6480)));
}

// A Q6_K pair: the low-bit pair (int4_pair's columns) with its high bits, as the f16 pair q − 32.
__device__ __forceinline__ __half2 q6_pair(unsigned int low, unsigned int high, int u, int s) {
    const unsigned int v =
        ((low >> (4 * s)) & 0x000F000Fu) | (((high >> (2 * (4 * u + s))) & 0x00030003u) << 4) | 0x64006400u;
    return __hsub2(*reinterpret_cast<const __half2*>(&v), __halves2half2(__ushort_as_half(0x6420), __ushort_as_half(0x6420)));
}

// A Q5_K pair: the low-bit pair of low word u (of a 32-column group) with its fifth bits, as the
// f16 pair q − 16.
__device__ __forceinline__ __half2 q5_pair(unsigned int low, unsigned int high, int u, int s) {
    const unsigned int v = ((low >> (4 * s)) & 0x000F000Fu) | (((high >> (4 * u + s)) & 0x00010001u) << 4) | 0x64006400u;
    return __hsub2(*reinterpret_cast<const __half2*>(&v), __halves2half2(__ushort_as_half(0x6410), __ushort_as_half(0x6410)));
}

// Σ (q − 32) · x · 2^-4 over the 16 columns of low words w0, w1 and their high word.
__device__ __forceinline__ float dot_q6(unsigned int w0, unsigned int w1, unsigned int high, const __half2* x) {
    __half2 acc = __float2half2_rn(0.f);
#pragma unroll
    for (int s = 0; s < 4; s++) acc = __hfma2(q6_pair(w0, high, 0, s), x[s], acc);
#pragma unroll
    for (int s = 0; s < 4; s++) acc = __hfma2(q6_pair(w1, high, 1, s), x[4 + s], acc);
    const float2 f = __half22float2(acc);
    return f.x + f.y;
}

// This lane's x for rows of HIDDEN: columns j·1024 + 32·lane .. +32 as scaled f16 pairs, and
// their true-valued sums (the affine formats' offsets).
struct LaneX4 {
    __half2 v[2][16];
    float sum[2];
    __device__ __forceinline__ void load(const float* xs) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            float total = 0.f;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float f[16];
                load16(xs + j * 1024 + lane * 32 + h * 16, f);
                to_x16(f, *reinterpret_cast<__half2(*)[8]>(&v[j][8 * h]));
#pragma unroll
                for (int i = 0; i < 16; i++) total += f[i];
            }
            sum[j] = total;
        }
    }
};

// Σ w · x over the 8·N columns from `col` of a row in format F (see above). The int4, Q4_K and
// Q5_K formats' N words share one group (int4: 128 columns, Q4_K and Q5_K: 32); Q6_K takes 16
// columns a scale.
template <typename F, int N>
__device__ __forceinline__ float format_dot(const unsigned char* row, int K, int col, const __half2 (&x)[4 * N],
                                            float xsum) {
    if constexpr (F::HIGH == 8) {
        // 8·N columns are 2N words of 4; word k's pairs are x[2k], x[2k + 1]
        const uint4* v = reinterpret_cast<const uint4*>(row + col);
        __half2 acc = __float2half2_rn(0.f);
#pragma unroll
        for (int h = 0; h < N / 2; h++) {
            const uint4 q = v[h];
            const unsigned int w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 4; k++)
#pragma unroll
                for (int s = 0; s < 2; s++) acc = __hfma2(q8_pair(w[k], s), x[8 * h + 2 * k + s], acc);
        }
        const float2 f = __half22float2(acc);
        return (f.x + f.y) * (F::affine(row, K, col).s * FP8_X_UNSCALE);
    }
    const unsigned int* words = reinterpret_cast<const unsigned int*>(row + col / 2);
    if constexpr (F::HIGH == 2) {
        const unsigned int* high = reinterpret_cast<const unsigned int*>(row + K / 2 + col / 4);
        float acc = 0.f;
#pragma unroll
        for (int g = 0; g < N / 2; g++)
            acc += dot_q6(words[2 * g], words[2 * g + 1], high[g], x + 8 * g) *
                   (F::affine(row, K, col + 16 * g).s * FP8_X_UNSCALE);
        return acc;
    } else {
        unsigned int w[N];
        if constexpr (N == 4) {
            const uint4 v = *reinterpret_cast<const uint4*>(words);
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        } else {
            const uint2 v = *reinterpret_cast<const uint2*>(words);
            w[0] = v.x, w[1] = v.y;
        }
        const Affine a = F::affine(row, K, col);
        float dot;
        if constexpr (F::HIGH == 1) {
            // the 32-column group's fifth bits; this piece's words are u0 .. u0 + N of its four
            const unsigned int high = *reinterpret_cast<const unsigned int*>(row + K / 2 + (col / 32) * 4);
            const int u0 = (col % 32) / 8;
            __half2 acc = __float2half2_rn(0.f);
#pragma unroll
            for (int i = 0; i < N; i++)
#pragma unroll
                for (int s = 0; s < 4; s++) acc = __hfma2(q5_pair(w[i], high, u0 + i, s), x[4 * i + s], acc);
            const float2 f = __half22float2(acc);
            dot = f.x + f.y;
        } else {
            dot = dot_int4<N>(w, x);
        }
        return dot * (a.s * FP8_X_UNSCALE) + xsum * (a.shift * a.s - a.m);
    }
}

// A kernel's template argument for "bf16 rows, no row format" where it takes a row format F or
// bf16 (HasRows<F>::value tells which, for `if constexpr`).
struct Bf16Only {};
template <typename F>
struct HasRows {
    static constexpr bool value = true;
};
template <>
struct HasRows<Bf16Only> {
    static constexpr bool value = false;
};

// Width of the mixers' outputs, the input of W_o (out_proj / o_proj): GDN 32 heads × 128,
// attention 16 heads × 256.
#define MIXER_OUT 4096

// The piece (8 columns) of a mixer's output y that W_o's stored piece q multiplies. A GGUF
// file's GDN out_proj may keep its 128-column groups in the converter's tiled value-head order
// (r value heads a key head; r = 1: in order): stored group g is value head (g % hk) · r + g / hk
// of the release's order, hk = 32 / r.
__device__ __forceinline__ int tiled_piece(int q, int r) {
    const int hk = (MIXER_OUT / 128) / r, g = q / 16;
    return ((g % hk) * r + g / hk) * 16 + q % 16;
}

// W_o's row in format F (MIXER_OUT columns) · y, for ys y's 512 pieces in W_o's column order
// (bf16, shared memory): lane l takes columns j·1024 + 32l .. +32 (j = 0..3) in order, x as
// LaneX4 makes it, then the warp. Phase 0 of moe_decode_block_q and gemv_q.cu's
// out_proj_tokens_q share it, so both give a token the same bits.
template <typename F>
__device__ __forceinline__ float w_o_row_dot(const unsigned char* row, const uint4* ys) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < MIXER_OUT / 1024; j++) {
        __half2 v[16];
        float total = 0.f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float f[16];
            const int piece = (j * 1024 + lane * 32 + h * 16) / 8;
            unpack8(ys[piece], f);
            unpack8(ys[piece + 1], f + 8);
            to_x16(f, *reinterpret_cast<__half2(*)[8]>(&v[8 * h]));
#pragma unroll
            for (int i = 0; i < 16; i++) total += f[i];
        }
        acc += format_dot<F, 4>(row, MIXER_OUT, j * 1024 + lane * 32, v, total);
    }
    return warp_sum(acc);
}

// ---- Grid barriers (kernels whose every block is resident: the fused MoE decode kernel, the
// LoRA sites' u computed once)
// grid_barrier in two halves, for work that needs no other block in between: grid_arrive
// publishes this block's writes and counts it in; grid_wait returns once the count reaches
// `target` (all blocks arrived).
__device__ __forceinline__ void grid_arrive(unsigned long long* arrivals) {
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(arrivals) : "memory");
}
__device__ __forceinline__ void grid_wait(unsigned long long* arrivals, unsigned long long target) {
    if (threadIdx.x == 0) {
        unsigned long long now;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(now) : "l"(arrivals) : "memory");
        } while (now < target);
    }
    __syncthreads();
}

// All blocks of the grid (every one resident) meet here. Writes before it are visible to every
// block after it (read them from L2: __ldcg). `arrivals` (u64) only ever grows: barrier k of a
// launch waits until it reaches base + k·gridDim.x, base being its value when the launch began
// (every launch has the same grid). One release-add per block, no reset, no read-back of the add.
__device__ __forceinline__ void grid_barrier(unsigned long long* arrivals, unsigned long long target) {
    grid_arrive(arrivals);
    grid_wait(arrivals, target);
}

// The barrier count at a launch's start: the last launch is done, so a multiple of the grid G
// (a block that starts late may already see some of this launch's arrivals: rounded down).
__device__ __forceinline__ unsigned long long launch_base(unsigned long long* arrivals, int G) {
    unsigned long long base;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(base) : "l"(arrivals) : "memory");
    return base - base % G;
}
