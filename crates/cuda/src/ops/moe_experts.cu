// MoE experts: y = Σ_slot w_slot · down_e(silu(gate_e·x) ∘ up_e·x) over the 9
// slots of each token (8 routed experts + the shared expert, index 256).
//
// Weights: gate_up bf16 [257, 1024, 2048] (per expert 512 gate rows then 512 up rows), down bf16
// [257, 2048, 512]. Routing comes from moe_router.cu as ids/weights [T, 9].
//
// Decode (few tokens): moe_gate_up_gemv and moe_down_gemv stream the selected experts' weights
// once, as 16-byte cp.async pieces all in flight at once. Prefill: the (token, slot) pairs are
// grouped by expert (moe_plan, moe_permute) and the grouped GEMMs below run on the tensor cores
// (mma.sync bf16, f32 accumulate) over (expert tile of 128 rows) x (column tile); tiles past the
// device-side tile count exit. FP8 experts (e4m3, f32 scales per 128 x 128 block) are read as
// they are stored, half the bytes, and widened to bf16 in shared memory (`Fp8Rows`).

#define GEMM_BM 128     // rows per tile: equals GEMM_BM in moe_router.cu and TILE_ROWS in moe.rs
#define GEMM_BN 128     // B rows (weight rows) per tile
#define GEMM_BK 64      // k per pipeline stage
#if SOLO_BIG_SHARED
#define GEMM_STAGES 3
#else
#define GEMM_STAGES 2  // 99 KB of shared memory: two stages (73,728 bytes; FP8 71,680)
#endif
#define AS_STRIDE (GEMM_BK + 8)  // shared row stride in bf16 (144 bytes): conflict-free fragments

// ---------------------------------------------------------------------------------------------
// Decode (`dot8`: common.cuh)

// Decode GEMVs: every 16-byte piece of a warp's weight rows is requested (cp.async into shared
// memory) before the first is used, and consumed group by group as it lands.

// act[t, slot, i] = silu(gate_e[i]·x_t) * (up_e[i]·x_t), e = ids[t, slot]. f32 [T, 9, 512]. delta: a
// LoRA adapter's term of the routed gate/up sums, or null (lora.cuh: lora_add_gate_up).
// Grid (512/8, 9, T), 256 threads: one warp per intermediate row i, its gate and up rows (2 × 4 KB)
// copied to shared memory with cp.async (in registers, ptxas interleaved the loads with the dots
// and kept only a few in flight); x_t (bf16) staged as f32 meanwhile.
// Dynamic shared memory: 8 warps × 2 rows × 2048 bf16 + 2048 f32 = 73,728 bytes.
extern "C" __global__ void __launch_bounds__(256)
    moe_gate_up_gemv(const bf16* __restrict__ x, const bf16* __restrict__ gate_up, const int* __restrict__ ids,
                     const float* __restrict__ delta, float* __restrict__ act) {
    extern __shared__ __align__(16) unsigned char smem[];
    bf16 (*w_s)[2][HIDDEN] = reinterpret_cast<bf16 (*)[2][HIDDEN]>(smem);
    float* xs = reinterpret_cast<float*>(smem + 8 * 2 * HIDDEN * sizeof(bf16));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i = blockIdx.x * 8 + warp, slot = blockIdx.y, t = blockIdx.z;
    pdl_wait();
    pdl_trigger();  // after the wait: moe_down_gemv reads the routing before its own wait
    const int e = ids[t * SLOTS + slot];
    const bf16* wg = gate_up + ((size_t)e * 2 * EXPERT_DIM + i) * HIDDEN;
    const bf16* wu = wg + (size_t)EXPERT_DIM * HIDDEN;
#pragma unroll
    for (int j = 0; j < HIDDEN / 256; j++) {
        const int col = j * 256 + lane * 8;
        cp_async16(&w_s[warp][0][col], wg + col, true);
        cp_async16(&w_s[warp][1][col], wu + col, true);
        cp_async_commit();  // one group per piece pair, consumed as it lands
    }
    stage_bf16<HIDDEN>(x + (size_t)t * HIDDEN, xs);
    float g = 0.f, u = 0.f;
#pragma unroll
    for (int j = 0; j < HIDDEN / 256; j++) {
        cp_async_wait_pending(HIDDEN / 256 - 1 - j);  // each lane reads back only what it copied
        const int col = j * 256 + lane * 8;
        const float4 a = *reinterpret_cast<const float4*>(xs + col), b = *reinterpret_cast<const float4*>(xs + col + 4);
        const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        g += dot8(*reinterpret_cast<const uint4*>(&w_s[warp][0][col]), xv);
        u += dot8(*reinterpret_cast<const uint4*>(&w_s[warp][1][col]), xv);
    }
    g = warp_sum(g);
    u = warp_sum(u);
    lora_add_gate_up(delta, t * SLOTS + slot, i, g, u);
    if (lane == 0) act[((size_t)t * SLOTS + slot) * EXPERT_DIM + i] = silu(g) * u;
}

// out[t, c] += Σ_slot weights[t, slot] · (down_e[c] · act[t, slot]). f32 [T, 2048]: in decode the
// residual stream itself (the residual add folded in).
// Grid (2048/4, 1, T), 384 threads = 12 warps: warp w takes column c = 4·blockIdx.x + w % 4 and
// the 3 slots 3·(w / 4) .. +3 of it (3 rows of 1 KB, copied to shared memory with cp.async, one
// group per slot consumed as it lands); a column's three partial sums meet in shared memory.
// (One warp per column over all 9 slots: 11.3 µs; with the slots spread over 3 warps the
// column's rows are fetched and summed three times as parallel.)
#define DOWN_COLUMNS 4
#define DOWN_GROUPS 3
#define DOWN_SLOTS_PER_WARP (SLOTS / DOWN_GROUPS)
extern "C" __global__ void __launch_bounds__(DOWN_COLUMNS * DOWN_GROUPS * 32)
    moe_down_gemv(const float* __restrict__ act, const bf16* __restrict__ down, const int* __restrict__ ids,
                  const float* __restrict__ weights, float* __restrict__ out) {
    __shared__ __align__(16) bf16 w_s[DOWN_COLUMNS * DOWN_GROUPS][DOWN_SLOTS_PER_WARP][EXPERT_DIM];
    __shared__ float partial[DOWN_GROUPS][DOWN_COLUMNS];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int column = warp % DOWN_COLUMNS, group = warp / DOWN_COLUMNS;
    const int c = blockIdx.x * DOWN_COLUMNS + column, t = blockIdx.z;
    // The weights are requested before pdl_wait(), overlapping moe_gate_up_gemv. The expert ids
    // come from the routing kernel before it, already complete: moe_gate_up_gemv lets this
    // kernel start only after its own pdl_wait(). Read them from L2 (__ldcg), not a stale L1.
#pragma unroll
    for (int s = 0; s < DOWN_SLOTS_PER_WARP; s++) {
        const int slot = group * DOWN_SLOTS_PER_WARP + s;
        const bf16* row = down + ((size_t)__ldcg(ids + t * SLOTS + slot) * HIDDEN + c) * EXPERT_DIM;
#pragma unroll
        for (int j = 0; j < EXPERT_DIM / 256; j++) {
            const int col = j * 256 + lane * 8;
            cp_async16(&w_s[warp][s][col], row + col, true);
        }
        cp_async_commit();
    }
    pdl_wait();
    pdl_trigger();
    // fetched while the weights stream in
    const float old = group == 0 && lane == 0 ? out[(size_t)t * HIDDEN + c] : 0.f;
    float acc = 0.f;
#pragma unroll
    for (int s = 0; s < DOWN_SLOTS_PER_WARP; s++) {
        const int slot = group * DOWN_SLOTS_PER_WARP + s;
        cp_async_wait_pending(DOWN_SLOTS_PER_WARP - 1 - s);  // each lane reads back only what it copied
        const float* a = act + ((size_t)t * SLOTS + slot) * EXPERT_DIM + lane * 8;
        float part = 0.f;
#pragma unroll
        for (int j = 0; j < EXPERT_DIM / 256; j++) {
            // act_t is read by every warp of the SM: through L1 (__ldg), not from L2 each time
            // (that doubled this kernel's time).
            const float4 a0 = __ldg(reinterpret_cast<const float4*>(a + j * 256));
            const float4 a1 = __ldg(reinterpret_cast<const float4*>(a + j * 256 + 4));
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            part += dot8(*reinterpret_cast<const uint4*>(&w_s[warp][s][j * 256 + lane * 8]), av);
        }
        acc += weights[t * SLOTS + slot] * part;
    }
    acc = warp_sum(acc);
    if (lane == 0) partial[group][column] = acc;
    __syncthreads();
    if (group == 0 && lane == 0) {
        float sum = 0.f;
#pragma unroll
        for (int g = 0; g < DOWN_GROUPS; g++) sum += partial[g][column];
        out[(size_t)t * HIDDEN + c] = old + sum;
    }
}

// ---------------------------------------------------------------------------------------------
// Prefill: grouped GEMMs
//
// A block of 256 threads (8 warps) computes a 128 x 128 tile: 128 (token, slot) rows of one
// expert by 128 B rows (weight rows), K in GEMM_BK steps through a GEMM_STAGES-deep cp.async
// pipeline. Warp w takes rows 32·(w % 4) .. +32 and B rows 64·(w / 4) .. +64: per 16-wide k step
// 2 A and 4 B ldmatrix_x4 for 16 MMAs. (The 64 x 128 / 64 x 64 tiles of 4 warps before read
// 3.9 GB of L2 per layer for gate/up at 4K tokens and were bound by it.) A warp whose 32 rows
// are all past the expert's last row skips its MMAs (small prefills: ~8 rows an expert).

// The B operand (weight rows) of one GEMM tile, by weight format. Each form copies its pieces of
// a pipeline stage with cp.async (`load`), makes the stage a bf16 tile once they have landed
// (`convert`: each thread its own pieces, between the stage's two __syncthreads) and names that
// tile (`tile`). src(i): the weight row of this thread's i-th piece.
//
// bf16: rows tid/8 + 32 i, 16-byte column piece tid%8 (8 weights), straight into the stage.
template <typename Src>
struct Bf16Rows {
    static constexpr bool CONVERTS = false;
    bf16* stages;  // GEMM_STAGES x GEMM_BN x AS_STRIDE
    Src src;       // src(i) → const bf16*: row start + this thread's column piece
    __device__ __forceinline__ void load(int k0, int s) {
        const int prow = threadIdx.x >> 3, pcol = (threadIdx.x & 7) * 8;
#pragma unroll
        for (int i = 0; i < GEMM_BN / 32; i++)
            cp_async16(stages + (s * GEMM_BN + prow + 32 * i) * AS_STRIDE + pcol, src(i) + k0, true);
    }
    __device__ __forceinline__ void convert(int, int) {}
    __device__ __forceinline__ const bf16* tile(int s) const { return stages + s * GEMM_BN * AS_STRIDE; }
};

// FP8 (e4m3, one f32 scale per 128 x 128 block): rows tid/4 + 64 i, 16-byte piece tid%4 (16
// weights) copied as bytes, then w = q · s rounded to bf16 -- dequantize_fp8's arithmetic
// (gemv_fp8.cu), so the products are those of the dequantised bf16 copy -- into the one bf16
// tile (the first __syncthreads of a stage keeps the previous stage's readers out of it).
template <typename Src>
struct Fp8Rows {
    static constexpr bool CONVERTS = true;
    unsigned char* stages;  // GEMM_STAGES x GEMM_BN x GEMM_BK bytes
    bf16* tile_s;           // GEMM_BN x AS_STRIDE
    Src src;                // src(i) → {const unsigned char* row start + this thread's piece, const float* row's block scales}
    __device__ __forceinline__ void load(int k0, int s) {
        const int prow = threadIdx.x >> 2, pcol = (threadIdx.x & 3) * 16;
#pragma unroll
        for (int i = 0; i < GEMM_BN / 64; i++)
            cp_async16(stages + (s * GEMM_BN + prow + 64 * i) * GEMM_BK + pcol, src(i).w + k0, true);
    }
    __device__ __forceinline__ void convert(int kt, int s) {
        const int prow = threadIdx.x >> 2, pcol = (threadIdx.x & 3) * 16;
        const int k0 = kt * GEMM_BK;
#pragma unroll
        for (int i = 0; i < GEMM_BN / 64; i++) {
            const int row = prow + 64 * i;
            const float scale = __ldg(src(i).s + k0 / 128);
            const uint4 raw = *reinterpret_cast<const uint4*>(stages + (s * GEMM_BN + row) * GEMM_BK + pcol);
            const unsigned int words[4] = {raw.x, raw.y, raw.z, raw.w};
            __nv_bfloat162 o[8];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 a = fp8x2_to_float2((unsigned short)(words[j] & 0xffff));
                const float2 b = fp8x2_to_float2((unsigned short)(words[j] >> 16));
                o[2 * j] = __floats2bfloat162_rn(a.x * scale, a.y * scale);
                o[2 * j + 1] = __floats2bfloat162_rn(b.x * scale, b.y * scale);
            }
            uint4* dst = reinterpret_cast<uint4*>(tile_s + row * AS_STRIDE + pcol);
            dst[0] = *reinterpret_cast<uint4*>(&o[0]);
            dst[1] = *reinterpret_cast<uint4*>(&o[4]);
        }
    }
    __device__ __forceinline__ const bf16* tile(int) const { return tile_s; }
};

// The 4- to 8-bit formats (common.cuh's "4- to 8-bit expert rows": int4, Q4_K, Q5_K, Q6_K, Q8_0):
// a stage's 64 columns of a row are 32 bytes of low 4 bits (and for Q6_K 16 bytes of high bits;
// Q8_0: 64 bytes, two 16-byte copies a thread);
// thread tid copies row tid/2's 16-byte piece tid%2 (32 weights; the even thread also the high
// bits), then widens them, (f + shift) · s − m rounded to bf16, into the one bf16 tile. Q5_K's
// fifth bits (a word per 32 columns) are read from the row as the scales are.
template <int K, typename Src, typename F>
struct QuantRows {
    static constexpr bool CONVERTS = true;
    // bytes a row a stage: the low 4 bits (+ Q6_K's 2), or Q8_0's whole bytes
    static constexpr int STAGE_ROW = F::HIGH == 8 ? GEMM_BK : GEMM_BK / 2 + (F::HIGH == 2 ? GEMM_BK / 4 : 0);
    unsigned char* stages;  // GEMM_STAGES x GEMM_BN x STAGE_ROW bytes
    bf16* tile_s;           // GEMM_BN x AS_STRIDE
    Src src;                // src() → const unsigned char*: the start of this thread's row
    __device__ __forceinline__ void load(int k0, int s) {
        const int prow = threadIdx.x >> 1, piece = threadIdx.x & 1;
        unsigned char* dst = stages + (s * GEMM_BN + prow) * STAGE_ROW;
        if constexpr (F::HIGH == 8) {
            cp_async16(dst + piece * 32, src() + k0 + piece * 32, true);
            cp_async16(dst + piece * 32 + 16, src() + k0 + piece * 32 + 16, true);
            return;
        }
        cp_async16(dst + piece * 16, src() + k0 / 2 + piece * 16, true);
        if constexpr (F::HIGH == 2) {
            if (piece == 0) cp_async16(dst + GEMM_BK / 2, src() + K / 2 + k0 / 4, true);
        }
    }
    __device__ __forceinline__ void convert(int kt, int s) {
        const int row = threadIdx.x >> 1, piece = threadIdx.x & 1;
        const int col = kt * GEMM_BK + piece * 32;
        const unsigned char* staged = stages + (s * GEMM_BN + row) * STAGE_ROW;
        __nv_bfloat162 o[16];
        if constexpr (F::HIGH == 8) {
            // 32 columns: 8 words of 4, pairs (c, c + 1), (c + 2, c + 3)
            const Affine a = F::affine(src(), K, col);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint4 raw = *reinterpret_cast<const uint4*>(staged + piece * 32 + 16 * h);
                const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
                for (int k = 0; k < 4; k++)
#pragma unroll
                    for (int p = 0; p < 2; p++) {
                        const float2 f = __half22float2(q8_pair(w[k], p));
                        o[8 * h + 2 * k + p] = __floats2bfloat162_rn(f.x * a.s, f.y * a.s);
                    }
            }
        } else {
            const uint4 raw = *reinterpret_cast<const uint4*>(staged + piece * 16);
            const unsigned int words[4] = {raw.x, raw.y, raw.z, raw.w};
            if constexpr (F::HIGH == 2) {
                const uint2 hw = *reinterpret_cast<const uint2*>(staged + GEMM_BK / 2 + piece * 8);
                const unsigned int high[2] = {hw.x, hw.y};
#pragma unroll
                for (int g = 0; g < 2; g++) {
                    const Affine a = F::affine(src(), K, col + 16 * g);
#pragma unroll
                    for (int i = 2 * g; i < 2 * g + 2; i++)
#pragma unroll
                        for (int p = 0; p < 4; p++) {
                            const float2 f = __half22float2(q6_pair(words[i], high[g], i & 1, p));
                            o[4 * i + p] = __floats2bfloat162_rn((f.x + a.shift) * a.s - a.m, (f.y + a.shift) * a.s - a.m);
                        }
                }
            } else {
                const Affine a = F::affine(src(), K, col);
                // Q5_K: the piece's 32 columns' fifth bits, one word (read from the row, not staged)
                const unsigned int high = F::HIGH == 1 ? __ldg(reinterpret_cast<const unsigned int*>(src() + K / 2) + col / 32) : 0u;
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int p = 0; p < 4; p++) {
                        const float2 f = __half22float2(F::HIGH == 1 ? q5_pair(words[i], high, i, p) : int4_pair(words[i], p));
                        o[4 * i + p] = __floats2bfloat162_rn((f.x + a.shift) * a.s - a.m, (f.y + a.shift) * a.s - a.m);
                    }
            }
        }
        uint4* dst = reinterpret_cast<uint4*>(tile_s + row * AS_STRIDE + piece * 32);
#pragma unroll
        for (int q = 0; q < 4; q++) dst[q] = *reinterpret_cast<uint4*>(&o[4 * q]);
    }
    __device__ __forceinline__ const bf16* tile(int) const { return tile_s; }
};

// p[0..4] += a, b, c, d as one reduction (p 16-byte aligned, global memory); four f32 atomics
// below sm_90 (the same sums: each element gets one addition either way).
__device__ __forceinline__ void red_add_f32x4(float* p, float a, float b, float c, float d) {
#if SOLO_HOPPER
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#else
    atomicAdd(p, a), atomicAdd(p + 1, b), atomicAdd(p + 2, c), atomicAdd(p + 3, d);
#endif
}

// Where an FP8 weight piece comes from: its bytes and its row's block scales.
struct Fp8Piece {
    const unsigned char* w;
    const float* s;
};

// This thread's A pieces: rows tid/8 + 32 i of the tile (16-byte column piece tid%8), their
// source rows and whether they exist (else zeros).
struct ARows {
    const bf16* src[GEMM_BM / 32];
    bool ok[GEMM_BM / 32];
};

// Warp tile accumulators: 2 row blocks of 16 x 8 column blocks of 8 (the mma C fragments).
typedef float WarpAcc[2][8][4];

// acc += A[128 x K] · B[128 x K]ᵀ for this warp's 32 x 64 part (see the section's head). live:
// whether any of the warp's rows exist.
template <int K, typename B>
__device__ __forceinline__ void gemm_tile(const ARows& a, B& b, bf16* As, bool live, WarpAcc& acc) {
    constexpr int KT = K / GEMM_BK;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int prow = tid >> 3, pcol = (tid & 7) * 8;
    auto load_stage = [&](int kt, int s) {
        const int k0 = kt * GEMM_BK;
        bf16* ad = As + s * GEMM_BM * AS_STRIDE;
#pragma unroll
        for (int i = 0; i < GEMM_BM / 32; i++) cp_async16(ad + (prow + 32 * i) * AS_STRIDE + pcol, a.src[i] + k0, a.ok[i]);
        b.load(k0, s);
    };
#pragma unroll
    for (int s = 0; s < GEMM_STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }
    // ldmatrix row addresses: A as matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) = a0..a3; B two
    // 8-row column tiles per load: (rows 0-7: k 0-7, k 8-15 | rows 8-15: ...) = b0, b1 of n, n+1.
    const int a_off = ((warp & 3) * 32 + (lane & 7) + ((lane >> 3) & 1) * 8) * AS_STRIDE + (lane >> 4) * 8;
    const int b_off = ((warp >> 2) * 64 + (lane & 7) + (lane >> 4) * 8) * AS_STRIDE + ((lane >> 3) & 1) * 8;
    for (int kt = 0; kt < KT; kt++) {
        const int s = kt % GEMM_STAGES;
        cp_async_wait<GEMM_STAGES - 2>();
        if constexpr (B::CONVERTS) {
            __syncthreads();  // everyone is done with the bf16 tile of stage kt - 1
            b.convert(kt, s);
        }
        __syncthreads();  // stage kt is visible, and everyone is done with the stage refilled next
        if (kt + GEMM_STAGES - 1 < KT) load_stage(kt + GEMM_STAGES - 1, (kt + GEMM_STAGES - 1) % GEMM_STAGES);
        cp_async_commit();
        if (!live) continue;
        const bf16* at = As + s * GEMM_BM * AS_STRIDE + a_off;
        const bf16* bt = b.tile(s) + b_off;
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; kk++) {
            uint32_t af[2][4];
#pragma unroll
            for (int m = 0; m < 2; m++) ldmatrix_x4(af[m][0], af[m][1], af[m][2], af[m][3], at + m * 16 * AS_STRIDE + kk * 16);
#pragma unroll
            for (int n = 0; n < 8; n += 2) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4(b0, b1, b2, b3, bt + n * 8 * AS_STRIDE + kk * 16);
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    mma_bf16(acc[m][n], af[m][0], af[m][1], af[m][2], af[m][3], b0, b1);
                    mma_bf16(acc[m][n + 1], af[m][0], af[m][1], af[m][2], af[m][3], b2, b3);
                }
            }
        }
    }
    cp_async_wait<0>();
}

// The dynamic shared memory of both grouped GEMMs: GEMM_STAGES stages of A (128 x AS_STRIDE
// bf16), then the B form's buffers: bf16 stages (128 x AS_STRIDE) -- 110,592 bytes -- or FP8
// stages (128 x 64 bytes) and one bf16 tile -- 98,304 bytes. Two blocks an SM either way.
__device__ __forceinline__ bf16* a_stages(unsigned char* smem) { return reinterpret_cast<bf16*>(smem); }
__device__ __forceinline__ unsigned char* b_buffers(unsigned char* smem) {
    return smem + GEMM_STAGES * GEMM_BM * AS_STRIDE * sizeof(bf16);
}

// The expert weights' formats (the grouped GEMMs' template argument).
#define FMT_BF16 0
#define FMT_FP8 1
#define FMT_INT4 2
#define FMT_Q4K 3
#define FMT_Q5K 4
#define FMT_Q6K 5
#define FMT_Q8_0 6

// The row format of a quantised FMT.
template <int FMT>
struct FormatOf {
    typedef Int4Format F;
};
template <>
struct FormatOf<FMT_Q4K> {
    typedef Q4KFormat F;
};
template <>
struct FormatOf<FMT_Q5K> {
    typedef Q5KFormat F;
};
template <>
struct FormatOf<FMT_Q6K> {
    typedef Q6KFormat F;
};
template <>
struct FormatOf<FMT_Q8_0> {
    typedef Q8Format F;
};

// Runs the tile with B rows br → weight row `weight_row(br)` of `w` (row length K): bf16, FP8
// (scales: f32 per 128 x 128 block, K / 128 a block row) or a 4- to 6-bit format (rows of
// F::row_bytes(K)).
template <int K, int FMT, typename RowOf>
__device__ __forceinline__ void expert_tile(const ARows& a, const void* w, const float* scales, RowOf weight_row,
                                            unsigned char* smem, bool live, WarpAcc& acc) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 8; n++) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;
    unsigned char* raw = b_buffers(smem);
    if constexpr (FMT == FMT_FP8) {
        const unsigned char* wq = static_cast<const unsigned char*>(w);
        auto src = [&](int i) {
            const int wr = weight_row((tid >> 2) + 64 * i);
            return Fp8Piece{wq + (size_t)wr * K + (tid & 3) * 16, scales + (wr / 128) * (K / 128)};
        };
        Fp8Rows<decltype(src)> b{raw, reinterpret_cast<bf16*>(raw + GEMM_STAGES * GEMM_BN * GEMM_BK), src};
        gemm_tile<K>(a, b, a_stages(smem), live, acc);
    } else if constexpr (FMT >= FMT_INT4) {
        typedef typename FormatOf<FMT>::F F;
        const unsigned char* row = static_cast<const unsigned char*>(w) + (size_t)weight_row(tid >> 1) * F::row_bytes(K);
        auto src = [=]() { return row; };
        typedef QuantRows<K, decltype(src), F> Rows;
        Rows b{raw, reinterpret_cast<bf16*>(raw + GEMM_STAGES * GEMM_BN * Rows::STAGE_ROW), src};
        gemm_tile<K>(a, b, a_stages(smem), live, acc);
    } else {
        const bf16* wb = static_cast<const bf16*>(w);
        auto src = [&](int i) { return wb + (size_t)weight_row((tid >> 3) + 32 * i) * K + (tid & 7) * 8; };
        Bf16Rows<decltype(src)> b{reinterpret_cast<bf16*>(raw), src};
        gemm_tile<K>(a, b, a_stages(smem), live, acc);
    }
}

// An expert's tile in the format of its layer: 4- to 6-bit layers keep the shared expert (e = 256) in
// bf16 apart (`shared`, its rows from 0), the other formats as expert 256 of `w`.
template <int K, int FMT, typename RowOf>
__device__ __forceinline__ void layer_expert_tile(int e, int rows_per_expert, const ARows& a, const void* w,
                                                  const float* scales, const bf16* shared, RowOf weight_row,
                                                  unsigned char* smem, bool live, WarpAcc& acc) {
    if (FMT >= FMT_INT4 && e == SHARED_EXPERT) {
        auto shared_row = [&](int br) { return weight_row(br) - SHARED_EXPERT * rows_per_expert; };
        expert_tile<K, FMT_BF16>(a, shared, nullptr, shared_row, smem, live, acc);
    } else {
        expert_tile<K, FMT>(a, w, scales, weight_row, smem, live, acc);
    }
}

// act[row, c] = silu(gate_e[c]·x) * (up_e[c]·x) for the rows of one expert tile, in the permuted
// row order; bf16 [T*9, 512]. x rows are gathered through perm (row → t*9 + slot). delta: a LoRA
// adapter's term of the routed sums, or null (lora.cuh: lora_add_gate_up).
// Grid (max tiles, 512/64), 256 threads: a block's 64 output columns c0 .. c0+64 are B rows
// [gate c0 .. +32, up c0 .. +32, gate c0+32 .. +32, up c0+32 .. +32], so each warp's 64 B rows
// are the gate and up rows of the same 32 columns.
// bf16 weights: gate_up bf16 [257, 1024, 2048]. FP8: e4m3 of that shape, scales f32 [257, 8, 16].
template <int FMT>
__device__ __forceinline__ void gate_up_grouped(const bf16* __restrict__ x, const void* __restrict__ gate_up,
                                                const float* __restrict__ scales, const bf16* __restrict__ shared,
                                                const int* __restrict__ perm,
                                                const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
                                                const float* __restrict__ delta, bf16* __restrict__ act) {
    pdl_wait();
    const int tile = blockIdx.x;
    if (tile >= *total_tiles) return;
    const int4 info = tiles[tile];
    const int e = info.x, r0 = info.y, r1 = info.z;
    const int c0 = blockIdx.y * 64;
    extern __shared__ __align__(16) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    ARows a;
#pragma unroll
    for (int i = 0; i < GEMM_BM / 32; i++) {
        const int r = r0 + (tid >> 3) + 32 * i;
        a.ok[i] = r < r1;
        const int token = a.ok[i] ? perm[r] / SLOTS : 0;
        a.src[i] = x + (size_t)token * HIDDEN + (tid & 7) * 8;
    }
    auto weight_row = [&](int br) {
        const int c = c0 + (br >> 6) * 32 + (br & 31);
        return e * 2 * EXPERT_DIM + ((br & 32) ? EXPERT_DIM : 0) + c;
    };
    const int rows = (warp & 3) * 32;  // this warp's first row in the tile
    WarpAcc acc;
    layer_expert_tile<HIDDEN, FMT>(e, 2 * EXPERT_DIM, a, gate_up, scales, shared, weight_row, smem, r0 + rows < r1, acc);

    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int m = 0; m < 2; m++) {
        const int ra = r0 + rows + m * 16 + g, rb = ra + 8;
        if (delta != nullptr) {  // a LoRA adapter's term (lora_add_gate_up), rows ra and rb
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = half ? rb : ra;
                if (r >= r1) continue;
                const int pair = perm[r];
#pragma unroll
                for (int n = 0; n < 4; n++) {
                    const int col = c0 + (warp >> 2) * 32 + n * 8 + 2 * tq;
                    lora_add_gate_up(delta, pair, col, acc[m][n][2 * half], acc[m][n + 4][2 * half]);
                    lora_add_gate_up(delta, pair, col + 1, acc[m][n][2 * half + 1], acc[m][n + 4][2 * half + 1]);
                }
            }
        }
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int col = c0 + (warp >> 2) * 32 + n * 8 + 2 * tq;
            if (ra < r1)
                *reinterpret_cast<__nv_bfloat162*>(act + (size_t)ra * EXPERT_DIM + col) = __floats2bfloat162_rn(
                    silu(acc[m][n][0]) * acc[m][n + 4][0], silu(acc[m][n][1]) * acc[m][n + 4][1]);
            if (rb < r1)
                *reinterpret_cast<__nv_bfloat162*>(act + (size_t)rb * EXPERT_DIM + col) = __floats2bfloat162_rn(
                    silu(acc[m][n][2]) * acc[m][n + 4][2], silu(acc[m][n][3]) * acc[m][n + 4][3]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 2)
    moe_gate_up_grouped(const bf16* __restrict__ x, const bf16* __restrict__ gate_up, const int* __restrict__ perm,
                        const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
                        const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_BF16>(x, gate_up, nullptr, nullptr, perm, tiles, total_tiles, delta, act);
}

extern "C" __global__ void __launch_bounds__(256, 2)
    moe_gate_up_grouped_fp8(const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up,
                            const float* __restrict__ scales, const int* __restrict__ perm,
                            const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
                            const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_FP8>(x, gate_up, scales, nullptr, perm, tiles, total_tiles, delta, act);
}

// 4- to 8-bit routed experts (int4, Q4_K, Q5_K, Q6_K, Q8_0): gate_up [256 × 1024] rows of the format; the shared
// expert bf16 [1024, 2048] apart.
// (each instance written out: kernels.rs checks the launchers against these signatures as written)
extern "C" __global__ void __launch_bounds__(256, 2) moe_gate_up_grouped_int4(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
        const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_INT4>(x, gate_up, nullptr, shared, perm, tiles, total_tiles, delta, act);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_gate_up_grouped_q4k(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
        const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_Q4K>(x, gate_up, nullptr, shared, perm, tiles, total_tiles, delta, act);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_gate_up_grouped_q5k(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
        const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_Q5K>(x, gate_up, nullptr, shared, perm, tiles, total_tiles, delta, act);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_gate_up_grouped_q6k(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
        const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_Q6K>(x, gate_up, nullptr, shared, perm, tiles, total_tiles, delta, act);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_gate_up_grouped_q8_0(
        const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
        const float* __restrict__ delta, bf16* __restrict__ act) {
    gate_up_grouped<FMT_Q8_0>(x, gate_up, nullptr, shared, perm, tiles, total_tiles, delta, act);
}

// out[t, c] += weights[t, slot] * (down_e[c] · act[row]) for the rows of one expert tile (row →
// t*9 + slot through perm), c = n0 .. n0+128. out f32 [T, 2048], zeroed by the caller.
// Grid (max tiles, 2048/128), 256 threads.
// bf16 weights: down bf16 [257, 2048, 512]. FP8: e4m3 of that shape, scales f32 [257, 16, 4].
template <int FMT>
__device__ __forceinline__ void down_grouped(const bf16* __restrict__ act, const void* __restrict__ down,
                                             const float* __restrict__ scales, const bf16* __restrict__ shared,
                                             const int* __restrict__ perm,
                                             const float* __restrict__ weights, const int4* __restrict__ tiles,
                                             const int* __restrict__ total_tiles, float* __restrict__ out) {
    pdl_wait();
    const int tile = blockIdx.x;
    if (tile >= *total_tiles) return;
    const int4 info = tiles[tile];
    const int e = info.x, r0 = info.y, r1 = info.z;
    const int n0 = blockIdx.y * GEMM_BN;
    extern __shared__ __align__(16) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    ARows a;
#pragma unroll
    for (int i = 0; i < GEMM_BM / 32; i++) {
        const int r = r0 + (tid >> 3) + 32 * i;
        a.ok[i] = r < r1;
        a.src[i] = act + (size_t)(a.ok[i] ? r : r0) * EXPERT_DIM + (tid & 7) * 8;
    }
    const int row0 = e * HIDDEN + n0;  // B row br is weight row row0 + br
    auto weight_row = [&](int br) { return row0 + br; };
    const int rows = (warp & 3) * 32;
    WarpAcc acc;
    layer_expert_tile<EXPERT_DIM, FMT>(e, HIDDEN, a, down, scales, shared, weight_row, smem, r0 + rows < r1, acc);

    // Vector reductions (red.global.add.v4.f32, sm_90): the scatter-add was bound by the count of
    // f32 atomics. Lanes tq and tq ^ 1 (same rows ra, rb) swap halves: the even lane adds 4
    // columns 2tq .. of row ra, the odd one 4 columns 2(tq − 1) .. of row rb.
    const int g = lane >> 2, tq = lane & 3;
    const bool even = (tq & 1) == 0;
#pragma unroll
    for (int m = 0; m < 2; m++) {
        const int ra = r0 + rows + m * 16 + g, rb = ra + 8;
        const int pa = ra < r1 ? perm[ra] : -1, pb = rb < r1 ? perm[rb] : -1;
        const float wa = pa >= 0 ? weights[pa] : 0.f, wb = pb >= 0 ? weights[pb] : 0.f;
        const int row = even ? pa : pb;
        float* dst = out + (size_t)(row / SLOTS) * HIDDEN + n0 + (warp >> 2) * 64 + 2 * (tq & 2);
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const float a0 = wa * acc[m][n][0], a1 = wa * acc[m][n][1], b0 = wb * acc[m][n][2], b1 = wb * acc[m][n][3];
            const float give0 = even ? b0 : a0, give1 = even ? b1 : a1;
            const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1), got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
            if (row >= 0) {
                if (even) red_add_f32x4(dst + n * 8, a0, a1, got0, got1);
                else red_add_f32x4(dst + n * 8, got0, got1, b0, b1);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 2)
    moe_down_grouped(const bf16* __restrict__ act, const bf16* __restrict__ down, const int* __restrict__ perm,
                     const float* __restrict__ weights, const int4* __restrict__ tiles,
                     const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_BF16>(act, down, nullptr, nullptr, perm, weights, tiles, total_tiles, out);
}

extern "C" __global__ void __launch_bounds__(256, 2)
    moe_down_grouped_fp8(const bf16* __restrict__ act, const unsigned char* __restrict__ down,
                         const float* __restrict__ scales, const int* __restrict__ perm,
                         const float* __restrict__ weights, const int4* __restrict__ tiles,
                         const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_FP8>(act, down, scales, nullptr, perm, weights, tiles, total_tiles, out);
}

// 4- to 8-bit routed experts: down [256 × 2048] rows of the format; the shared expert bf16 [2048, 512]
// apart.
extern "C" __global__ void __launch_bounds__(256, 2) moe_down_grouped_int4(
        const bf16* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const float* __restrict__ weights, const int4* __restrict__ tiles,
        const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_INT4>(act, down, nullptr, shared, perm, weights, tiles, total_tiles, out);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_down_grouped_q4k(
        const bf16* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const float* __restrict__ weights, const int4* __restrict__ tiles,
        const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_Q4K>(act, down, nullptr, shared, perm, weights, tiles, total_tiles, out);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_down_grouped_q5k(
        const bf16* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const float* __restrict__ weights, const int4* __restrict__ tiles,
        const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_Q5K>(act, down, nullptr, shared, perm, weights, tiles, total_tiles, out);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_down_grouped_q6k(
        const bf16* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const float* __restrict__ weights, const int4* __restrict__ tiles,
        const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_Q6K>(act, down, nullptr, shared, perm, weights, tiles, total_tiles, out);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_down_grouped_q8_0(
        const bf16* __restrict__ act, const unsigned char* __restrict__ down, const bf16* __restrict__ shared,
        const int* __restrict__ perm, const float* __restrict__ weights, const int4* __restrict__ tiles,
        const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<FMT_Q8_0>(act, down, nullptr, shared, perm, weights, tiles, total_tiles, out);
}
