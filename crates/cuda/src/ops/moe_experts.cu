// MoE experts: y = Σ_slot w_slot · down_e(silu(gate_e·x) ∘ up_e·x) over the 9
// slots of each token (8 routed experts + the shared expert, index 256).
//
// Weights: gate_up bf16 [257, 1024, 2048] (per expert 512 gate rows then 512 up rows), down bf16
// [257, 2048, 512]. Routing comes from moe_router.cu as ids/weights [T, 9].
//
// Decode (few tokens): moe_gate_up_gemv and moe_down_gemv stream the selected experts' weights
// once, as 16-byte cp.async pieces all in flight at once. Prefill: the (token, slot) pairs are
// grouped by expert (moe_plan, moe_permute) and the grouped GEMMs below run on the tensor cores
// (mma.sync bf16, f32 accumulate) over (expert tile of 64 rows) x (column tile); tiles past the
// device-side tile count exit. FP8 experts (e4m3, f32 scales per 128 x 128 block) are read as
// they are stored, half the bytes, and widened to bf16 in shared memory (`Fp8Rows`).

#define GEMM_BM 64      // rows per tile: equals GEMM_BM in moe_router.cu and TILE_ROWS in moe.rs
#define GEMM_BN 64      // output columns per tile
#define GEMM_BK 64      // k per pipeline stage
#define GEMM_STAGES 3      // bf16 weights
#define GEMM_STAGES_FP8 4  // FP8 weights: a stage of B is half the bytes, so one more in flight
#define AS_STRIDE (GEMM_BK + 8)  // shared row stride in bf16 (144 bytes): conflict-free fragments

// ---------------------------------------------------------------------------------------------
// Decode (`dot8`: common.cuh)

// Decode GEMVs: every 16-byte piece of a warp's weight rows is requested (cp.async into shared
// memory) before the first is used, and consumed group by group as it lands.

// act[t, slot, i] = silu(gate_e[i]·x_t) * (up_e[i]·x_t), e = ids[t, slot]. f32 [T, 9, 512].
// Grid (512/8, 9, T), 256 threads: one warp per intermediate row i, its gate and up rows (2 × 4 KB)
// copied to shared memory with cp.async (in registers, ptxas interleaved the loads with the dots
// and kept only a few in flight); x_t (bf16) staged as f32 meanwhile.
// Dynamic shared memory: 8 warps × 2 rows × 2048 bf16 + 2048 f32 = 73,728 bytes.
extern "C" __global__ void __launch_bounds__(256)
    moe_gate_up_gemv(const bf16* __restrict__ x, const bf16* __restrict__ gate_up, const int* __restrict__ ids,
                     float* __restrict__ act) {
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



// The B operand (weight rows) of one GEMM tile, by weight format. Each form copies its pieces of
// a pipeline stage with cp.async (`load`), makes the stage a bf16 tile once they have landed
// (`convert`: each thread its own pieces, before the stage's __syncthreads) and names that tile
// (`tile`). ROWS: B rows per tile; src(i): the weight row of this thread's i-th piece.
//
// bf16: rows tid/8 + 16 i, 16-byte column piece tid%8 (8 weights), straight into the stage.
template <int ROWS, typename Src>
struct Bf16Rows {
    bf16* stages;  // GEMM_STAGES x ROWS x AS_STRIDE
    Src src;       // src(i) → const bf16*: row start + this thread's column piece
    __device__ __forceinline__ void load(int k0, int s) {
        const int prow = threadIdx.x >> 3, pcol = (threadIdx.x & 7) * 8;
#pragma unroll
        for (int i = 0; i < ROWS / 16; i++)
            cp_async16(stages + (s * ROWS + prow + 16 * i) * AS_STRIDE + pcol, src(i) + k0, true);
    }
    __device__ __forceinline__ void convert(int, int) {}
    __device__ __forceinline__ const bf16* tile(int, int s) const { return stages + s * ROWS * AS_STRIDE; }
};

// FP8 (e4m3, one f32 scale per 128 x 128 block): rows tid/4 + 32 i, 16-byte piece tid%4 (16
// weights) copied as bytes, then w = q · s rounded to bf16 -- dequantize_fp8's arithmetic (gemv_fp8.cu), so
// the products are those of the dequantised bf16 copy -- into one of two bf16 tiles (stage kt's
// tile is read while stage kt+1's is written; the stage's __syncthreads keeps kt-1's readers out).
template <int ROWS, typename Src>
struct Fp8Rows {
    unsigned char* stages;  // GEMM_STAGES_FP8 x ROWS x GEMM_BK bytes
    bf16* tiles;            // 2 x ROWS x AS_STRIDE
    Src src;                // src(i) → {const unsigned char* row start + this thread's piece, const float* row's block scales}
    __device__ __forceinline__ void load(int k0, int s) {
        const int prow = threadIdx.x >> 2, pcol = (threadIdx.x & 3) * 16;
#pragma unroll
        for (int i = 0; i < ROWS / 32; i++)
            cp_async16(stages + (s * ROWS + prow + 32 * i) * GEMM_BK + pcol, src(i).w + k0, true);
    }
    __device__ __forceinline__ void convert(int kt, int s) {
        const int prow = threadIdx.x >> 2, pcol = (threadIdx.x & 3) * 16;
        const int k0 = kt * GEMM_BK;
#pragma unroll
        for (int i = 0; i < ROWS / 32; i++) {
            const int row = prow + 32 * i;
            const float scale = __ldg(src(i).s + k0 / 128);
            const uint4 raw = *reinterpret_cast<const uint4*>(stages + (s * ROWS + row) * GEMM_BK + pcol);
            const unsigned int words[4] = {raw.x, raw.y, raw.z, raw.w};
            __nv_bfloat162 o[8];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 a = fp8x2_to_float2((unsigned short)(words[j] & 0xffff));
                const float2 b = fp8x2_to_float2((unsigned short)(words[j] >> 16));
                o[2 * j] = __floats2bfloat162_rn(a.x * scale, a.y * scale);
                o[2 * j + 1] = __floats2bfloat162_rn(b.x * scale, b.y * scale);
            }
            uint4* dst = reinterpret_cast<uint4*>(tiles + ((kt & 1) * ROWS + row) * AS_STRIDE + pcol);
            dst[0] = *reinterpret_cast<uint4*>(&o[0]);
            dst[1] = *reinterpret_cast<uint4*>(&o[4]);
        }
    }
    __device__ __forceinline__ const bf16* tile(int kt, int) const { return tiles + (kt & 1) * ROWS * AS_STRIDE; }
};

// p[0..4] += a, b, c, d as one reduction (p 16-byte aligned, global memory).
__device__ __forceinline__ void red_add_f32x4(float* p, float a, float b, float c, float d) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// Where an FP8 weight piece comes from: its bytes and its row's block scales.
struct Fp8Piece {
    const unsigned char* w;
    const float* s;
};

// C[64 x 8*NT] += A[64 x K] · B[8*NT x K]ᵀ, 4 warps of 16 rows each, K in GEMM_BK steps through a
// STAGES-deep cp.async pipeline. a_src[i] / a_ok[i]: the source row of this thread's i-th A
// piece (row tid/8 + 16 i, 16-byte column piece tid%8) and whether it exists (else zeros);
// b: the B operand (Bf16Rows or Fp8Rows of 8*NT rows).
template <int NT, int K, int STAGES, typename B>
__device__ __forceinline__ void gemm_tile(const bf16* const (&a_src)[4], const bool (&a_ok)[4], B& b, bf16* As,
                                          float (&acc)[NT][4]) {
    constexpr int KT = K / GEMM_BK;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int prow = tid >> 3, pcol = (tid & 7) * 8;
    auto load_stage = [&](int kt, int s) {
        const int k0 = kt * GEMM_BK;
        bf16* ad = As + s * GEMM_BM * AS_STRIDE;
#pragma unroll
        for (int i = 0; i < 4; i++) cp_async16(ad + (prow + 16 * i) * AS_STRIDE + pcol, a_src[i] + k0, a_ok[i]);
        b.load(k0, s);
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        const int s = kt % STAGES;
        cp_async_wait<STAGES - 2>();
        b.convert(kt, s);
        __syncthreads();  // stage kt is visible, and everyone is done with the stage refilled next
        if (kt + STAGES - 1 < KT) load_stage(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        cp_async_commit();
        // ldmatrix row addresses: A as matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) = a0..a3; B two
        // 8-row column tiles per load: (rows 0-7: k 0-7, k 8-15 | rows 8-15: ...) = b0, b1 of n, n+1.
        const bf16* at = As + s * GEMM_BM * AS_STRIDE + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * AS_STRIDE +
                         (lane >> 4) * 8;
        const bf16* bt = b.tile(kt, s) + ((lane & 7) + (lane >> 4) * 8) * AS_STRIDE + ((lane >> 3) & 1) * 8;
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; kk++) {
            uint32_t a0, a1, a2, a3;
            ldmatrix_x4(a0, a1, a2, a3, at + kk * 16);
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                uint32_t b0, b1, b2, b3;
                ldmatrix_x4(b0, b1, b2, b3, bt + n * 8 * AS_STRIDE + kk * 16);
                mma_bf16(acc[n], a0, a1, a2, a3, b0, b1);
                mma_bf16(acc[n + 1], a0, a1, a2, a3, b2, b3);
            }
        }
    }
    cp_async_wait<0>();
}

// act[row, n0 + j] = silu(gate_e[n0+j]·x) * (up_e[n0+j]·x) for the rows of one expert tile, in the
// permuted row order; bf16 [T*9, 512]. x rows are gathered through perm (row → t*9 + slot).
// Grid (max tiles, 512/64), 128 threads. B = 64 gate rows then the 64 matching up rows, so each
// thread holds both halves. Shared memory: the stages of A (64 x AS_STRIDE bf16), then the B
// form's buffers: 82,944 bytes for bf16 (3 stages), 106,496 for FP8 (4 stages).
// bf16 weights: gate_up bf16 [257, 1024, 2048]. FP8: e4m3 of that shape, scales f32 [257, 8, 16].
template <bool FP8>
__device__ __forceinline__ void gate_up_grouped(const bf16* __restrict__ x, const void* __restrict__ gate_up,
                                                const float* __restrict__ scales, const int* __restrict__ perm,
                                                const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
                                                bf16* __restrict__ act) {
    pdl_wait();
    const int tile = blockIdx.x;
    if (tile >= *total_tiles) return;
    const int4 info = tiles[tile];
    const int e = info.x, r0 = info.y, r1 = info.z;
    const int n0 = blockIdx.y * GEMM_BN;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* As = reinterpret_cast<bf16*>(smem_raw);
    constexpr int STAGES = FP8 ? GEMM_STAGES_FP8 : GEMM_STAGES;
    unsigned char* b_smem = smem_raw + STAGES * GEMM_BM * AS_STRIDE * sizeof(bf16);

    const int tid = threadIdx.x, prow = tid >> 3, pcol = (tid & 7) * 8;
    const bf16* a_src[4];
    bool a_ok[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = r0 + prow + 16 * i;
        a_ok[i] = r < r1;
        const int token = a_ok[i] ? perm[r] / SLOTS : 0;
        a_src[i] = x + (size_t)token * HIDDEN + pcol;
    }
    // B row br: 0..63 gate rows n0.., 64..127 up rows 512+n0.. of expert e.
    auto weight_row = [&](int br) { return e * 2 * EXPERT_DIM + (br < GEMM_BN ? n0 + br : EXPERT_DIM + n0 + (br - GEMM_BN)); };
    float acc[2 * GEMM_BN / 8][4];
#pragma unroll
    for (int n = 0; n < 2 * GEMM_BN / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    if constexpr (FP8) {
        const unsigned char* w = static_cast<const unsigned char*>(gate_up);
        auto src = [&](int i) {
            const int wr = weight_row((tid >> 2) + 32 * i);
            return Fp8Piece{w + (size_t)wr * HIDDEN + (tid & 3) * 16, scales + (wr / 128) * (HIDDEN / 128)};
        };
        Fp8Rows<2 * GEMM_BN, decltype(src)> b{b_smem, reinterpret_cast<bf16*>(b_smem + STAGES * 2 * GEMM_BN * GEMM_BK), src};
        gemm_tile<2 * GEMM_BN / 8, HIDDEN, STAGES>(a_src, a_ok, b, As, acc);
    } else {
        const bf16* w = static_cast<const bf16*>(gate_up);
        auto src = [&](int i) { return w + (size_t)weight_row(prow + 16 * i) * HIDDEN + pcol; };
        Bf16Rows<2 * GEMM_BN, decltype(src)> b{reinterpret_cast<bf16*>(b_smem), src};
        gemm_tile<2 * GEMM_BN / 8, HIDDEN, STAGES>(a_src, a_ok, b, As, acc);
    }

    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int ra = r0 + warp * 16 + g, rb = ra + 8;
#pragma unroll
    for (int n = 0; n < GEMM_BN / 8; n++) {
        const int col = n0 + n * 8 + 2 * tq;
        if (ra < r1)
            *reinterpret_cast<__nv_bfloat162*>(act + (size_t)ra * EXPERT_DIM + col) = __floats2bfloat162_rn(
                silu(acc[n][0]) * acc[n + GEMM_BN / 8][0], silu(acc[n][1]) * acc[n + GEMM_BN / 8][1]);
        if (rb < r1)
            *reinterpret_cast<__nv_bfloat162*>(act + (size_t)rb * EXPERT_DIM + col) = __floats2bfloat162_rn(
                silu(acc[n][2]) * acc[n + GEMM_BN / 8][2], silu(acc[n][3]) * acc[n + GEMM_BN / 8][3]);
    }
}

extern "C" __global__ void __launch_bounds__(128)
    moe_gate_up_grouped(const bf16* __restrict__ x, const bf16* __restrict__ gate_up, const int* __restrict__ perm,
                        const int4* __restrict__ tiles, const int* __restrict__ total_tiles, bf16* __restrict__ act) {
    gate_up_grouped<false>(x, gate_up, nullptr, perm, tiles, total_tiles, act);
}

extern "C" __global__ void __launch_bounds__(128)
    moe_gate_up_grouped_fp8(const bf16* __restrict__ x, const unsigned char* __restrict__ gate_up,
                            const float* __restrict__ scales, const int* __restrict__ perm,
                            const int4* __restrict__ tiles, const int* __restrict__ total_tiles,
                            bf16* __restrict__ act) {
    gate_up_grouped<true>(x, gate_up, scales, perm, tiles, total_tiles, act);
}

// out[t, n0 + j] += weights[t, slot] * (down_e[n0+j] · act[row]) for the rows of one expert tile
// (row → t*9 + slot through perm). out f32 [T, 2048], zeroed by the caller; f32 atomics.
// Grid (max tiles, 2048/64), 128 threads. Shared memory: the stages of A, then the B form's
// buffers: 55,296 bytes for bf16 (3 stages), 71,680 for FP8 (4 stages).
// bf16 weights: down bf16 [257, 2048, 512]. FP8: e4m3 of that shape, scales f32 [257, 16, 4].
template <bool FP8>
__device__ __forceinline__ void down_grouped(const bf16* __restrict__ act, const void* __restrict__ down,
                                             const float* __restrict__ scales, const int* __restrict__ perm,
                                             const float* __restrict__ weights, const int4* __restrict__ tiles,
                                             const int* __restrict__ total_tiles, float* __restrict__ out) {
    pdl_wait();
    const int tile = blockIdx.x;
    if (tile >= *total_tiles) return;
    const int4 info = tiles[tile];
    const int e = info.x, r0 = info.y, r1 = info.z;
    const int n0 = blockIdx.y * GEMM_BN;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* As = reinterpret_cast<bf16*>(smem_raw);
    constexpr int STAGES = FP8 ? GEMM_STAGES_FP8 : GEMM_STAGES;
    unsigned char* b_smem = smem_raw + STAGES * GEMM_BM * AS_STRIDE * sizeof(bf16);

    const int tid = threadIdx.x, prow = tid >> 3, pcol = (tid & 7) * 8;
    const bf16* a_src[4];
    bool a_ok[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = r0 + prow + 16 * i;
        a_ok[i] = r < r1;
        a_src[i] = act + (size_t)(a_ok[i] ? r : r0) * EXPERT_DIM + pcol;
    }
    float acc[GEMM_BN / 8][4];
#pragma unroll
    for (int n = 0; n < GEMM_BN / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    const int row0 = e * HIDDEN + n0;  // B row br is weight row row0 + br
    if constexpr (FP8) {
        const unsigned char* w = static_cast<const unsigned char*>(down);
        auto src = [&](int i) {
            const int wr = row0 + (tid >> 2) + 32 * i;
            return Fp8Piece{w + (size_t)wr * EXPERT_DIM + (tid & 3) * 16, scales + (wr / 128) * (EXPERT_DIM / 128)};
        };
        Fp8Rows<GEMM_BN, decltype(src)> b{b_smem, reinterpret_cast<bf16*>(b_smem + STAGES * GEMM_BN * GEMM_BK), src};
        gemm_tile<GEMM_BN / 8, EXPERT_DIM, STAGES>(a_src, a_ok, b, As, acc);
    } else {
        const bf16* w = static_cast<const bf16*>(down);
        auto src = [&](int i) { return w + (size_t)(row0 + prow + 16 * i) * EXPERT_DIM + pcol; };
        Bf16Rows<GEMM_BN, decltype(src)> b{reinterpret_cast<bf16*>(b_smem), src};
        gemm_tile<GEMM_BN / 8, EXPERT_DIM, STAGES>(a_src, a_ok, b, As, acc);
    }

    // Vector reductions (red.global.add.v4.f32, sm_90): the scatter-add was bound by the count of
    // f32 atomics. Lanes tq and tq ^ 1 (same rows ra, rb) swap halves: the even lane adds 4
    // columns 2tq .. of row ra, the odd one 4 columns 2(tq − 1) .. of row rb.
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int ra = r0 + warp * 16 + g, rb = ra + 8;
    const int pa = ra < r1 ? perm[ra] : -1, pb = rb < r1 ? perm[rb] : -1;
    const float wa = pa >= 0 ? weights[pa] : 0.f, wb = pb >= 0 ? weights[pb] : 0.f;
    const bool even = (tq & 1) == 0;
    const int row = even ? pa : pb;
    float* dst = out + (size_t)(row / SLOTS) * HIDDEN + n0 + 2 * (tq & 2);
#pragma unroll
    for (int n = 0; n < GEMM_BN / 8; n++) {
        const float a0 = wa * acc[n][0], a1 = wa * acc[n][1], b0 = wb * acc[n][2], b1 = wb * acc[n][3];
        const float give0 = even ? b0 : a0, give1 = even ? b1 : a1;
        const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1), got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
        if (row >= 0) {
            if (even) red_add_f32x4(dst + n * 8, a0, a1, got0, got1);
            else red_add_f32x4(dst + n * 8, got0, got1, b0, b1);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128)
    moe_down_grouped(const bf16* __restrict__ act, const bf16* __restrict__ down, const int* __restrict__ perm,
                     const float* __restrict__ weights, const int4* __restrict__ tiles,
                     const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<false>(act, down, nullptr, perm, weights, tiles, total_tiles, out);
}

extern "C" __global__ void __launch_bounds__(128)
    moe_down_grouped_fp8(const bf16* __restrict__ act, const unsigned char* __restrict__ down,
                         const float* __restrict__ scales, const int* __restrict__ perm,
                         const float* __restrict__ weights, const int4* __restrict__ tiles,
                         const int* __restrict__ total_tiles, float* __restrict__ out) {
    down_grouped<true>(act, down, scales, perm, weights, tiles, total_tiles, out);
}
