// LoRA in the kernels (ops/lora.rs): the device side of an adapter's sites, after common.cuh in
// the files that take adapters (gemv_mma.cu, lora.cu, moe_decode.cu, moe_experts.cu,
// moe_gemv_q.cu).

// ---- LoRA in the decode steps' kernels (ops/lora.rs): an adapted site's term y += s · B (A x),
// computed beside the product. A LoraSite (device memory, built by lora.rs: `Site::device`) is
// the site's A stacked [rank_sum, in] and its parts: part p adds its term into output rows
// [first, first + rows), with B [rows, rank] and u's entries [u_col, u_col + rank). The kernels
// take a site per token (`const LoraSite* const* sites`, a device array; a null entry: that
// token's sequence has no adapter), so the batched step's sequences each run their own.
#define LORA_PARTS 4
#define LORA_FUSED_RANKS 64  // most of u a fused kernel keeps per token (Σ rank of a site)
struct LoraPart {
    int first, rows, rank, u_col;
    float scale;
    int pad;
    const bf16* b;
};
struct LoraSite {
    const bf16* a;
    int rank_sum, parts;
    LoraPart part[LORA_PARTS];
};
static_assert(sizeof(LoraPart) == 32 && sizeof(LoraSite) == 144, "LoraSite::device in lora.rs");

// Row j of a site's A (bf16 [in]) · x (bf16 [in]) by one warp: lane l takes columns 8l .. 8l + 8
// of every 256, then the warp. in % 256 == 0.
__device__ __forceinline__ float lora_row_dot(const bf16* __restrict__ row, const bf16* x, int in) {
    const int lane = threadIdx.x & 31;
    float acc = 0.f;
    for (int c = lane * 8; c < in; c += 256) {
        float w[8], xv[8];
        unpack8(__ldg(reinterpret_cast<const uint4*>(row + c)), w);
        unpack8(*reinterpret_cast<const uint4*>(x + c), xv);
#pragma unroll
        for (int k = 0; k < 8; k++) acc += w[k] * xv[k];
    }
    return warp_sum(acc);
}

// lora_row_dot of ROWS rows of A at once (r[i] null: none; the sums as lora_row_dot orders them),
// the loads of CHUNK pieces a row in flight before their first FMA: a row is IN / (256 · CHUNK)
// L2 round trips, not IN / 256.
template <int IN, int ROWS, int CHUNK>
__device__ __forceinline__ void lora_rows_dot(const bf16* const (&r)[ROWS], const bf16* x, float (&v)[ROWS]) {
    static_assert(IN % (256 * CHUNK) == 0, "whole chunks");
    const int lane = threadIdx.x & 31;
    float acc[ROWS] = {};
#pragma unroll
    for (int c0 = 0; c0 < IN; c0 += 256 * CHUNK) {
        uint4 w[ROWS][CHUNK];
#pragma unroll
        for (int i = 0; i < ROWS; i++)
#pragma unroll
            for (int p = 0; p < CHUNK; p++)
                w[i][p] = r[i] != nullptr ? __ldg(reinterpret_cast<const uint4*>(r[i] + c0 + p * 256 + lane * 8)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int p = 0; p < CHUNK; p++) {
            float xv[8];
            unpack8(*reinterpret_cast<const uint4*>(x + c0 + p * 256 + lane * 8), xv);
#pragma unroll
            for (int i = 0; i < ROWS; i++) {
                float wv[8];
                unpack8(w[i][p], wv);
#pragma unroll
                for (int k = 0; k < 8; k++) acc[i] += wv[k] * xv[k];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ROWS; i++) v[i] = warp_sum(acc[i]);
}

// A fused site's u = A x, computed once for the grid rather than by every block (each block
// reading all of A from L2 cost its input site ~6 µs a layer on the H100): the grid's warps each
// take rows of the [tokens][LORA_FUSED_RANKS] list into u (lora_rows_dot), arrive on `count`
// (grid_arrive; launch_base gives the launch's start, as for a grid barrier), and each block
// reads u back once all have arrived (grid_wait; every block of the grid resident). In
// ops::Scratch's tickets: the MoE kernel's past its barrier count, the in-projection GEMVs' after
// it.
#define LORA_ONCE_TOKENS 8
struct LoraOnce {
    unsigned long long count, pad;
    float u[LORA_ONCE_TOKENS * LORA_FUSED_RANKS];
};
static_assert(sizeof(LoraOnce) == 2064, "LORA_ONCE_BYTES in ops/mod.rs");

// A site's term for output row r: s · B[r − first] · u of the part that holds r (0 where none
// does), u the site's [Σr]; L2: u written by other blocks before a grid barrier (read from L2).
template <bool L2 = false>
__device__ __forceinline__ float lora_site_term(const LoraSite* __restrict__ site, const float* u, int r) {
    for (int p = 0; p < site->parts; p++) {
        const LoraPart& q = site->part[p];
        if (r >= q.first && r < q.first + q.rows) {
            const bf16* b = q.b + (size_t)(r - q.first) * q.rank;
            const float* uq = u + q.u_col;
            float acc = 0.f;
            for (int k = 0; k < q.rank; k++) acc += __bfloat162float(b[k]) * (L2 ? __ldcg(uq + k) : uq[k]);
            return q.scale * acc;
        }
    }
    return 0.f;
}

// lora_site_term with B's row fetched ahead of its use: fetch(site, r) issues the loads (parts of
// rank 8 or 16: one or two 16-byte loads into registers; others are read by lora_site_term at
// term()), term() adds them up in lora_site_term's order, so both give the same bits.
struct LoraRowAhead {
    uint4 b[2];
    float scale;
    int u_col, rank;  // rank 0: r in no part; -1: lora_site_term
    __device__ __forceinline__ void fetch(const LoraSite* __restrict__ site, int r) {
        rank = 0;
        for (int p = 0; p < site->parts; p++) {
            const LoraPart& q = site->part[p];
            if (r >= q.first && r < q.first + q.rows) {
                if (q.rank != 8 && q.rank != 16) {
                    rank = -1;
                    return;
                }
                const uint4* row = reinterpret_cast<const uint4*>(q.b + (size_t)(r - q.first) * q.rank);
                b[0] = __ldg(row);
                if (q.rank == 16) b[1] = __ldg(row + 1);
                scale = q.scale;
                u_col = q.u_col;
                rank = q.rank;
                return;
            }
        }
    }
    __device__ __forceinline__ float term(const LoraSite* __restrict__ site, const float* u, int r) const {
        if (rank <= 0) return rank == 0 ? 0.f : lora_site_term(site, u, r);
        const float* uq = u + u_col;
        float acc = 0.f;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (i * 8 < rank) {
                float w[8];
                unpack8(b[i], w);
#pragma unroll
                for (int k = 0; k < 8; k++) acc += w[k] * uq[i * 8 + k];
            }
        }
        return scale * acc;
    }
};

// The term of token t's site (`sites[t]`, null: 0) for output row r, u per token
// LORA_FUSED_RANKS apart.
__device__ __forceinline__ float lora_term(const LoraSite* const* __restrict__ sites, const float* u, int r, int t) {
    const LoraSite* site = sites[t];
    return site == nullptr ? 0.f : lora_site_term(site, u + t * LORA_FUSED_RANKS, r);
}

// ---- LoRA of the routed experts (ops/lora.rs: `ExpertsSite`). The gate/up kernels take its
// term precomputed, delta f32 [T, 8, 1024] (token t's routed slot's s · B_e (A_e x_t): the gate
// rows, then the up rows), and add it to their sums g, u of row i before the activation; null:
// no adapter (the sums untouched). pair = t·9 + slot (the shared expert's slot 8 has none).
__device__ __forceinline__ void lora_add_gate_up(const float* __restrict__ delta, int pair, int i, float& g, float& u) {
    const int slot = pair % SLOTS;
    if (delta == nullptr || slot >= TOP_K) return;
    const float* d = delta + ((size_t)(pair / SLOTS) * TOP_K + slot) * 2 * EXPERT_DIM;
    g += __ldcg(d + i);
    u += __ldcg(d + EXPERT_DIM + i);
}

// A LoRA adapter of the MoE block as the one-token MoE kernel takes it (moe_decode_block_lora;
// lora.rs: `MoeLora::device`): the router's site (its 256 rows and the shared expert's gate, row
// 256; Σr ≤ 32) and the shared expert's gate|up site (rows 0..512 | 512..1024; Σr ≤ 32), each null
// when not adapted; the shared expert's down_proj (A bf16 [r, 512], B bf16 [2048, r]); the routed
// experts' gate_up_proj and down_proj, per tensor A bf16 [256·r, in] (expert e's rows e·r ..)
// and B bf16 [256, out, r]. Ranks ≤ 32; rank 0: that matrix not adapted.
struct LoraMoe {
    const LoraSite* router;
    const LoraSite* shared;
    const bf16* a_sd;
    const bf16* b_sd;
    const bf16* a_gu;
    const bf16* b_gu;
    const bf16* a_down;
    const bf16* b_down;
    int rank_sd, rank_gu, rank_down, pad;
    float scale_sd, scale_gu, scale_down, pad2;
};
static_assert(sizeof(LoraMoe) == 96, "MoeLora::device in lora.rs");
