// Gated DeltaNet after the conv (the formulas: crates/cpu/src/gdn.rs): gates, q/k l2-norm, the delta rule with
// an fp32 state, and the gated RMSNorm. Value head h reads key head h / 2 (interleaved, not tiled).
//
// Layouts shared by every kernel here:
//   mixed  f32 [T, 8192]   conv+SiLU output, [q 16×128 | k 16×128 | v 32×128] per token
//   S      f32 [32, 128, 128]  S[h][r][c]: key dim r → value dim c
//   z      f32 [T, 4096];  b, a  f32 [T, 32];  a_log, dt_bias f32 [32];  norm_w f32 [128] (plain w)
//   gates  f32 [T, GATES_STRIDE]  per token: g[32] | beta[32] | kq[16] (k·q of each key head,
//          after normalisation and the q scale) | kk[16] | kqn[16] (for an even token t with a
//          token t+1: k_t·k_{t+1} and k_t·q_{t+1}, normalised; the scan's token pairs), written
//          by gdn_prep for the prefill scan
//
// Decode (T == 1): gdn_decode_step does everything from `mixed` to the bf16 out_proj input.
// Prefill (T >= 1): gdn_prep (l2norm in place + gates) → gdn_prefill_scan (state on chip, serial
// over tokens, raw o) → gdn_gated_norm (o, z → bf16).
#define GDN_KEY_DIM 2048                   // 16 key heads × 128
#define GDN_VALUE_DIM 4096                 // 32 value heads × 128
#define GDN_Q_SCALE 0.08838834764831845f  // 1 / sqrt(128)
#define GDN_L2_EPS 1e-6f                  // inside the sum: x / √(Σx² + eps), as FLA
#define GATES_STRIDE 112
#define GATE_BETA 32
#define GATE_KQ 64
#define GATE_PAIR_KK 80
#define GATE_PAIR_KQ 96

// beta = σ(b); g = −exp(A_log) · softplus(a + dt_bias), softplus linear above 20 like torch.
// Accurate expf/log1pf: the decay exp(g) of slow heads is 1 − tiny and must not lose it.
__device__ __forceinline__ void gdn_gates(float a, float b, float a_log, float dt_bias, float& g, float& beta) {
    const float x = a + dt_bias;
    const float sp = x > 20.f ? x : log1pf(expf(x));
    g = -expf(a_log) * sp;
    beta = 1.f / (1.f + expf(-b));
}

// Thread-block clusters by PTX (cooperative_groups needs CCCL headers NVRTC does not get here).
// Every thread of every block of the cluster takes part in each barrier phase: arrive, then wait.
// Clusters are sm_90: the portable form of gdn_decode_step runs a head's 4 column groups as one
// 512-thread block instead, the same arithmetic, its exchange in plain shared memory
// (GDN_CLUSTER 0; gdn.rs launches it so).
#if __CUDA_ARCH__ >= 900
#define GDN_CLUSTER 1
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
// All 16 partials have landed in every block of the head.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
#else
#define GDN_CLUSTER 0
__device__ __forceinline__ void cluster_arrive_relaxed() {}
__device__ __forceinline__ void cluster_wait() {}
__device__ __forceinline__ void cluster_sync() { __syncthreads(); }
#endif

__device__ __forceinline__ void st_shared_cluster(float* p, unsigned rank, float v) {
#if GDN_CLUSTER
    const unsigned local = (unsigned)__cvta_generic_to_shared(p);
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote), "f"(v) : "memory");
#else
    if (rank == 0) *p = v;  // one block: its own shared memory
#endif
}

// 4 floats → 4 bf16 in one 8-byte store.
__device__ __forceinline__ void store_bf16x4(bf16* dst, float a, float b, float c, float d) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
    uint2 packed;
    packed.x = *reinterpret_cast<unsigned*>(&lo);
    packed.y = *reinterpret_cast<unsigned*>(&hi);
    *reinterpret_cast<uint2*>(dst) = packed;
}

// ---------------------------------------------------------------------------------------------
// gdn_decode_step: `tokens` consecutive tokens of one sequence (1 in the decode step, up to 8 in
// the multi-token step), everything after the conv, in one kernel. Per token t:
//   mixed f32 [t][8192]; z, b, a: token t's at z + t·zba_stride (f32 [4096]), b/a + t·zba_stride
//   (f32 [32]); out bf16 [t][4096] = gated RMSNorm(o) · silu(z), the out_proj input.
//   S_in f32 [32,128,128] is read once; the state after token t is written to
//   S_out + t·s_stride (S_out = S_in, s_stride 0: in place; the multi-token step keeps them all).
//   With `states` (u64 [n], the batched decode step: one token of each of n sequences), block
//   row b takes token b of sequence b, whose state at states[b] it updates in place (S_in, S_out,
//   tokens and s_stride unused).
// Geometry: 128 blocks of 128 threads in clusters of 4; block = (value head h = blockIdx.x / 4,
// column group = blockIdx.x % 4 = its rank in the cluster) owns S[h][:, 32·group .. +32]; warp w
// owns 8 of those columns over all 128 rows; lane = 2·rq + cq holds columns 4cq..4cq+3 of them
// for rows rq + 16i, i < 8 (8 float4 registers, kept there from token to token; per load a warp
// reads 16 rows × 32 bytes). No block barrier: every global load is issued first (one memory
// round trip); each warp computes the q, k norms of key head h/2 itself (3 warp sums over 128
// values), reduces its partial Sᵀk and Sᵀq of the old state over the 16 row lanes by shuffles,
// and then
//   u = β (v − e^g Sᵀk),  o = Sᵀ_new q = e^g Sᵀq + (k·q) u,  S_new = e^g S + k uᵀ,
// so S is read once and written once a token and o needs no second reduction. The gated norm's
// Σo² over the head's 128 columns: each warp stores its 8-column partial into all 4 blocks'
// shared memory (distributed shared memory), one cluster barrier, each sums the 16 partials
// (two slots, alternating by token: a slot is rewritten only after every block has passed the
// next token's barrier, so after its reads). S is stored last.
// H200 (ncu, one token): 5.2 µs with 2.6 µs of SM-active time, state in L2; a trivial kernel
// measures ~3 µs. (One 512-thread block per head, 32 blocks, measured 10.4 µs.)
#if GDN_CLUSTER
#define GDN_STEP_SHAPE __cluster_dims__(4, 1, 1) __launch_bounds__(128)
#else
#define GDN_STEP_SHAPE __launch_bounds__(512)  // the portable form: one block a head
#endif
extern "C" __global__ void GDN_STEP_SHAPE
gdn_decode_step(const float* __restrict__ mixed, const float* __restrict__ z, const float* __restrict__ b,
                const float* __restrict__ a, const float* __restrict__ a_log, const float* __restrict__ dt_bias,
                const float* __restrict__ norm_w, const float* S_in, float* S_out, bf16* __restrict__ out, float eps,
                int tokens, int zba_stride, long long s_stride, const unsigned long long* __restrict__ states) {
    __shared__ float sumsq[2][16];  // Σo² of the head's 16 warps (4 blocks × 4), slot 4·rank + warp
    const unsigned FULL = 0xffffffffu;
#if GDN_CLUSTER
    const int h = blockIdx.x >> 2, group = blockIdx.x & 3;
#else
    const int h = blockIdx.x, group = threadIdx.x >> 7;
#endif
    const int kh = h >> 1;
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int cq = lane & 1, rq = lane >> 1;
    const int col = group * 32 + warp * 8 + cq * 4;  // this lane's first column within the head
    int first = 0;  // the first of this block's tokens
    if (states) {
        first = blockIdx.y;
        tokens = 1;
        S_out = reinterpret_cast<float*>(states[first]);
        S_in = S_out;
        s_stride = 0;
    }
    const float* Sh = S_in + (size_t)h * 128 * 128 + col;
    // Distributed shared memory may be touched only once every block of the cluster runs: arrive
    // now, wait just before the first remote store (by then nobody waits).
    cluster_arrive_relaxed();

    // Every global load first.
    float4 s[8];
#pragma unroll
    for (int i = 0; i < 8; i++) s[i] = __ldcg(reinterpret_cast<const float4*>(Sh + (rq + 16 * i) * 128));
    // S is this kernel's own state (written one step ago, from L2): read before pdl_wait(),
    // overlapping the kernel before. Everything below comes from the kernels just before.
    pdl_wait();
    pdl_trigger();
    const float4 nw = *reinterpret_cast<const float4*>(norm_w + col);
    const float a_log_h = a_log[h], dt_bias_h = dt_bias[h];
    for (int t = first; t < first + tokens; t++) {
        const float* mt = mixed + (size_t)t * GDN_CONV_DIM;
        const float* qh = mt + kh * 128;
        const float* kh_ = mt + GDN_KEY_DIM + kh * 128;
        float qr[8], kr[8];  // raw q, k at this lane's rows
#pragma unroll
        for (int i = 0; i < 8; i++) {
            qr[i] = qh[rq + 16 * i];
            kr[i] = kh_[rq + 16 * i];
        }
        const float4 qa = reinterpret_cast<const float4*>(qh)[lane];  // the whole head, for the norms
        const float4 ka = reinterpret_cast<const float4*>(kh_)[lane];
        const float4 v = *reinterpret_cast<const float4*>(mt + 2 * GDN_KEY_DIM + h * 128 + col);
        const size_t zba = (size_t)t * zba_stride;
        const float4 zz = *reinterpret_cast<const float4*>(z + zba + h * 128 + col);
        const float a_h = a[zba + h], b_h = b[zba + h];

        // l2norm of q and k (eps inside the sum) and the normalised k·q, per warp.
        const float sq = warp_sum(qa.x * qa.x + qa.y * qa.y + qa.z * qa.z + qa.w * qa.w);
        const float sk = warp_sum(ka.x * ka.x + ka.y * ka.y + ka.z * ka.z + ka.w * ka.w);
        const float sqk = warp_sum(qa.x * ka.x + qa.y * ka.y + qa.z * ka.z + qa.w * ka.w);
        const float inv_q = rsqrtf(sq + GDN_L2_EPS) * GDN_Q_SCALE, inv_k = rsqrtf(sk + GDN_L2_EPS);
        const float kq = sqk * inv_q * inv_k;
        float g, beta;
        gdn_gates(a_h, b_h, a_log_h, dt_bias_h, g, beta);
        const float decay = expf(g);

        // Sᵀk and Sᵀq of the old state (raw k, q; scaled after the sum).
        float4 pk = make_float4(0.f, 0.f, 0.f, 0.f), pq = pk;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            pk.x += s[i].x * kr[i]; pk.y += s[i].y * kr[i]; pk.z += s[i].z * kr[i]; pk.w += s[i].w * kr[i];
            pq.x += s[i].x * qr[i]; pq.y += s[i].y * qr[i]; pq.z += s[i].z * qr[i]; pq.w += s[i].w * qr[i];
        }
#pragma unroll
        for (int off = 2; off < 32; off <<= 1) {
            pk.x += __shfl_xor_sync(FULL, pk.x, off); pk.y += __shfl_xor_sync(FULL, pk.y, off);
            pk.z += __shfl_xor_sync(FULL, pk.z, off); pk.w += __shfl_xor_sync(FULL, pk.w, off);
            pq.x += __shfl_xor_sync(FULL, pq.x, off); pq.y += __shfl_xor_sync(FULL, pq.y, off);
            pq.z += __shfl_xor_sync(FULL, pq.z, off); pq.w += __shfl_xor_sync(FULL, pq.w, off);
        }

        float4 u, o;
        u.x = beta * (v.x - decay * inv_k * pk.x); u.y = beta * (v.y - decay * inv_k * pk.y);
        u.z = beta * (v.z - decay * inv_k * pk.z); u.w = beta * (v.w - decay * inv_k * pk.w);
        o.x = decay * inv_q * pq.x + kq * u.x; o.y = decay * inv_q * pq.y + kq * u.y;
        o.z = decay * inv_q * pq.z + kq * u.z; o.w = decay * inv_q * pq.w + kq * u.w;

        // Gated RMSNorm over the head's 128 columns. Every lane holds the o of its 4 columns
        // (lanes with the same cq agree); one shuffle gives the warp's 8 columns, lanes 0..3 send
        // it to the 4 blocks of the cluster.
        float p = o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w;
        p += __shfl_xor_sync(FULL, p, 1);
        if (t == first) cluster_wait();
        float* slot = sumsq[t & 1];
        if (lane < 4) st_shared_cluster(&slot[group * 4 + warp], lane, p);
        cluster_sync();  // all 16 partials have landed in every block; no remote access follows
        if (rq == 0) {
            float total = 0.f;
#pragma unroll
            for (int w = 0; w < 16; w++) total += slot[w];
            const float inv = rsqrtf(total * (1.f / 128.f) + eps);
            store_bf16x4(out + (size_t)t * GDN_VALUE_DIM + h * 128 + col, nw.x * (o.x * inv) * silu(zz.x),
                         nw.y * (o.y * inv) * silu(zz.y), nw.z * (o.z * inv) * silu(zz.z),
                         nw.w * (o.w * inv) * silu(zz.w));
        }

        // S ← e^g S + k uᵀ (normalised k), stored after the barrier so it does not wait on the stores.
        float* Sh_out = S_out + (size_t)(t - first) * s_stride + (size_t)h * 128 * 128 + col;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float kn = kr[i] * inv_k;
            float4 n;
            n.x = fmaf(kn, u.x, decay * s[i].x); n.y = fmaf(kn, u.y, decay * s[i].y);
            n.z = fmaf(kn, u.z, decay * s[i].z); n.w = fmaf(kn, u.w, decay * s[i].w);
            *reinterpret_cast<float4*>(Sh_out + (rq + 16 * i) * 128) = n;
            s[i] = n;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// gdn_prep: per token, l2-normalise q (and scale by 1/√128) and k in place in `mixed`, and write
// the gates row [g | beta | kq | kk | kqn] (kq: the normalised k·q of each key head; kk, kqn:
// the pair products of an even token with the next, used by the scan's token pairs).
// Geometry: grid ⌈T/2⌉, 256 threads, block b takes tokens 2b and 2b+1 (< T); warp w owns key
// heads 2w and 2w+1 (q and k of the same head in one warp, so the products come from the same
// pass, from the raw vectors times the inverse norms); warp 0 also computes the 32 value heads'
// gates.
extern "C" __global__ void __launch_bounds__(256)
gdn_prep(float* __restrict__ mixed, const float* __restrict__ b, const float* __restrict__ a,
         const float* __restrict__ a_log, const float* __restrict__ dt_bias, float* __restrict__ gates, int T) {
    pdl_wait();
    const int t0 = 2 * blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = min(2, T - t0);
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int kh = 2 * warp + j;
        float4 q[2], k[2];
        float inv_q[2], inv_k[2];
#pragma unroll
        for (int p = 0; p < 2; p++) {
            if (p >= n) break;
            float* row = mixed + (size_t)(t0 + p) * GDN_CONV_DIM;
            float4* qp = reinterpret_cast<float4*>(row + kh * 128) + lane;
            float4* kp = reinterpret_cast<float4*>(row + GDN_KEY_DIM + kh * 128) + lane;
            q[p] = *qp;
            k[p] = *kp;
            const float4 x = q[p], y = k[p];
            const float sq = warp_sum(x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w);
            const float sk = warp_sum(y.x * y.x + y.y * y.y + y.z * y.z + y.w * y.w);
            const float sqk = warp_sum(x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w);
            inv_q[p] = rsqrtf(sq + GDN_L2_EPS) * GDN_Q_SCALE;
            inv_k[p] = rsqrtf(sk + GDN_L2_EPS);
            *qp = make_float4(x.x * inv_q[p], x.y * inv_q[p], x.z * inv_q[p], x.w * inv_q[p]);
            *kp = make_float4(y.x * inv_k[p], y.y * inv_k[p], y.z * inv_k[p], y.w * inv_k[p]);
            if (lane == 0) gates[(size_t)(t0 + p) * GATES_STRIDE + GATE_KQ + kh] = sqk * inv_q[p] * inv_k[p];
        }
        if (n == 2) {
            const float4 x = k[0], y = k[1], z = q[1];
            const float kk = warp_sum(x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w);
            const float kqn = warp_sum(x.x * z.x + x.y * z.y + x.z * z.z + x.w * z.w);
            if (lane == 0) {
                gates[(size_t)t0 * GATES_STRIDE + GATE_PAIR_KK + kh] = kk * inv_k[0] * inv_k[1];
                gates[(size_t)t0 * GATES_STRIDE + GATE_PAIR_KQ + kh] = kqn * inv_k[0] * inv_q[1];
            }
        }
    }
    if (warp == 0) {
        for (int p = 0; p < n; p++) {
            const int t = t0 + p;
            float g, beta;
            gdn_gates(a[t * GDN_V_HEADS + lane], b[t * GDN_V_HEADS + lane], a_log[lane], dt_bias[lane], g, beta);
            gates[(size_t)t * GATES_STRIDE + lane] = g;
            gates[(size_t)t * GATES_STRIDE + GATE_BETA + lane] = beta;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// gdn_prefill_scan: the delta rule token by token with the state on chip (Lily's register scan).
//   mixed: after gdn_prep (q, k normalised); gates from gdn_prep; S read at the start, written at
//   the end; o f32 [T, 4096] raw (before the gated norm).
// Token inputs (k, q, the block's v slice, g, β, k·q) are staged in shared memory SCAN_TOKENS
// tokens at a time by cp.async, double-buffered: the next chunk loads while this one runs.
// The scan is bound by instruction issue and latency (~4 flops per state element per token on
// the CUDA cores, one warp per scheduler): H200, all 32 heads, 213 ns/token at T = 4096 with the
// tokens in pairs (257 one at a time), so ~0.84 s for 131K tokens × 30 layers. The chunked form on tensor cores (the WY/UT form, crates/cpu/src/gdn.rs) is the
// way past it.
#define SCAN_TOKENS 16

struct ScanStage {
    float k[SCAN_TOKENS][128];
    float q[SCAN_TOKENS][128];
    float v[SCAN_TOKENS][32];
    float g[SCAN_TOKENS];
    float beta[SCAN_TOKENS];
    float kq[SCAN_TOKENS];
    float kk[SCAN_TOKENS];   // at even j: k_j·k_{j+1}
    float kqn[SCAN_TOKENS];  // at even j: k_j·q_{j+1}
};

__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem) : "memory");
}

// Stages tokens [t0, min(t0 + SCAN_TOKENS, T)) of head h, column group `group`; NT threads.
template <int NT>
__device__ __forceinline__ void scan_stage(ScanStage& st, const float* __restrict__ mixed,
                                           const float* __restrict__ gates, int t0, int T, int h, int group) {
    const int tid = threadIdx.x, kh = h >> 1;
    // k and q: SCAN_TOKENS × 32 float4 each.
#pragma unroll
    for (int m = 0; m < SCAN_TOKENS * 32 / NT; m++) {
        const int i = tid + m * NT, j = i >> 5, f = i & 31;
        if (t0 + j < T) {
            const float* row = mixed + (size_t)(t0 + j) * GDN_CONV_DIM;
            cp_async16(&st.q[j][4 * f], row + kh * 128 + 4 * f, true);
            cp_async16(&st.k[j][4 * f], row + GDN_KEY_DIM + kh * 128 + 4 * f, true);
        }
    }
    // v: SCAN_TOKENS × 8 float4 (this block's 32 columns).
    for (int i = tid; i < SCAN_TOKENS * 8; i += NT) {
        const int j = i >> 3, f = i & 7;
        if (t0 + j < T)
            cp_async16(&st.v[j][4 * f], mixed + (size_t)(t0 + j) * GDN_CONV_DIM + 2 * GDN_KEY_DIM + h * 128 +
                                            group * 32 + 4 * f, true);
    }
    // g, beta, kq, and at even tokens with a successor kk, kqn: one float each per token.
    static_assert(NT >= 5 * SCAN_TOKENS, "scan_stage: a thread per scalar");
    if (tid < 5 * SCAN_TOKENS) {
        const int kind = tid / SCAN_TOKENS, j = tid % SCAN_TOKENS;
        const bool pair = (j & 1) == 0 && t0 + j + 1 < T;
        if (t0 + j < T) {
            const float* gr = gates + (size_t)(t0 + j) * GATES_STRIDE;
            if (kind == 0) cp_async4(&st.g[j], gr + h);
            else if (kind == 1) cp_async4(&st.beta[j], gr + GATE_BETA + h);
            else if (kind == 2) cp_async4(&st.kq[j], gr + GATE_KQ + kh);
            else if (kind == 3 && pair) cp_async4(&st.kk[j], gr + GATE_PAIR_KK + kh);
            else if (kind == 4 && pair) cp_async4(&st.kqn[j], gr + GATE_PAIR_KQ + kh);
        }
    }
}

// The scan, column-owner layout, templated on RQ = lanes per value column (4 or 8).
// Geometry: 128 blocks × 32·RQ threads; block = (value head h = blockIdx.x / 4, group of 32 value
// columns); a warp owns 32 / RQ columns; lane = (32 / RQ)·qq + cc owns column cc of its warp over
// the 128 / RQ rows {4·RQ·i + 4·qq + e : e < 4} (S in registers, 128 / RQ of them). Per token a
// lane forms its partial Sᵀk and Sᵀq over its rows (4 accumulators each), log2(RQ) butterfly
// steps over the RQ lanes of its column finish them, and then u, o and the update are local:
//   u = β (v − e^g Sᵀk),  o = e^g Sᵀq + (k·q) u,  S ← e^g S + k uᵀ.
// Tokens go in pairs (the two steps from one reduction, below; gdn_prep gives the pair's k·k and
// k·q), an odd count's last one alone.
// Reading k and q: for each i the RQ row groups of a warp read RQ consecutive float4 of the
// staged row (conflict-free, the columns' lanes share them by broadcast).
template <int RQ>
__device__ __forceinline__ void scan_cols(const float* __restrict__ mixed, const float* __restrict__ gates,
                                          float* __restrict__ S, float* __restrict__ o, int T) {
    constexpr int CPW = 32 / RQ;          // columns per warp
    constexpr int NT = 32 * RQ;           // threads per block (32 columns)
    constexpr int RI = 128 / (4 * RQ);    // float4 row groups per lane
    __shared__ __align__(16) ScanStage stage[2];
    const int h = blockIdx.x >> 2, group = blockIdx.x & 3;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int qq = lane / CPW, cc = lane % CPW;
    const int vcol = warp * CPW + cc;  // column within the block's 32
    const int col = group * 32 + vcol;
    const unsigned FULL = 0xffffffffu;

    float s[RI][4];
    float* Sh = S + (size_t)h * 128 * 128 + col;
#pragma unroll
    for (int i = 0; i < RI; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[i][e] = Sh[(4 * RQ * i + 4 * qq + e) * 128];
    float* o_out = o + h * 128 + col;

    const int chunks = (T + SCAN_TOKENS - 1) / SCAN_TOKENS;
    scan_stage<NT>(stage[0], mixed, gates, 0, T, h, group);
    cp_async_commit();
    for (int ch = 0; ch < chunks; ch++) {
        if (ch + 1 < chunks) scan_stage<NT>(stage[(ch + 1) & 1], mixed, gates, (ch + 1) * SCAN_TOKENS, T, h, group);
        cp_async_commit();
        cp_async_wait<1>();  // chunk ch has landed (only the group just committed may be in flight)
        __syncthreads();
        const ScanStage& st = stage[ch & 1];
        const int n = min(SCAN_TOKENS, T - ch * SCAN_TOKENS);
        int j = 0;
        for (; j + 1 < n; j += 2) {
            // Tokens a = j and b = j + 1 from the old state S (their four products Sᵀk_a, Sᵀq_a,
            // Sᵀk_b, Sᵀq_b in one pass and one butterfly), then
            //   u_a = β_a (v_a − d_a Sᵀk_a),            o_a = d_a Sᵀq_a + (k_a·q_a) u_a,
            //   u_b = β_b (v_b − d_b (d_a Sᵀk_b + (k_a·k_b) u_a)),
            //   o_b = d_b (d_a Sᵀq_b + (k_a·q_b) u_a) + (k_b·q_b) u_b,
            //   S ← d_a d_b S + k_a (d_b u_a)ᵀ + k_b u_bᵀ      (d = e^g),
            // the two steps of the token form, with one reduction's latency instead of two.
            float pka[4] = {0.f, 0.f, 0.f, 0.f}, pqa[4] = {0.f, 0.f, 0.f, 0.f};
            float pkb[4] = {0.f, 0.f, 0.f, 0.f}, pqb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < RI; i++) {
                const int r = 4 * RQ * i + 4 * qq;
                const float4 ka = *reinterpret_cast<const float4*>(&st.k[j][r]);
                const float4 qa = *reinterpret_cast<const float4*>(&st.q[j][r]);
                const float4 kb = *reinterpret_cast<const float4*>(&st.k[j + 1][r]);
                const float4 qb = *reinterpret_cast<const float4*>(&st.q[j + 1][r]);
                const float kar[4] = {ka.x, ka.y, ka.z, ka.w}, qar[4] = {qa.x, qa.y, qa.z, qa.w};
                const float kbr[4] = {kb.x, kb.y, kb.z, kb.w}, qbr[4] = {qb.x, qb.y, qb.z, qb.w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    pka[e] = fmaf(s[i][e], kar[e], pka[e]);
                    pqa[e] = fmaf(s[i][e], qar[e], pqa[e]);
                    pkb[e] = fmaf(s[i][e], kbr[e], pkb[e]);
                    pqb[e] = fmaf(s[i][e], qbr[e], pqb[e]);
                }
            }
            float ska = (pka[0] + pka[1]) + (pka[2] + pka[3]), sqa = (pqa[0] + pqa[1]) + (pqa[2] + pqa[3]);
            float skb = (pkb[0] + pkb[1]) + (pkb[2] + pkb[3]), sqb = (pqb[0] + pqb[1]) + (pqb[2] + pqb[3]);
#pragma unroll
            for (int off = CPW; off < 32; off <<= 1) {
                ska += __shfl_xor_sync(FULL, ska, off);
                sqa += __shfl_xor_sync(FULL, sqa, off);
                skb += __shfl_xor_sync(FULL, skb, off);
                sqb += __shfl_xor_sync(FULL, sqb, off);
            }
            const float da = expf(st.g[j]), db = expf(st.g[j + 1]);
            const float ua = st.beta[j] * (st.v[j][vcol] - da * ska);
            const float ub = st.beta[j + 1] * (st.v[j + 1][vcol] - db * (da * skb + st.kk[j] * ua));
            if (qq == 0) {
                float* out = o_out + (size_t)(ch * SCAN_TOKENS + j) * GDN_VALUE_DIM;
                out[0] = da * sqa + st.kq[j] * ua;
                out[GDN_VALUE_DIM] = db * (da * sqb + st.kqn[j] * ua) + st.kq[j + 1] * ub;
            }
            const float dab = da * db, ca = db * ua;
#pragma unroll
            for (int i = 0; i < RI; i++) {
                const int r = 4 * RQ * i + 4 * qq;
                const float4 ka = *reinterpret_cast<const float4*>(&st.k[j][r]);
                const float4 kb = *reinterpret_cast<const float4*>(&st.k[j + 1][r]);
                const float kar[4] = {ka.x, ka.y, ka.z, ka.w}, kbr[4] = {kb.x, kb.y, kb.z, kb.w};
#pragma unroll
                for (int e = 0; e < 4; e++) s[i][e] = fmaf(kbr[e], ub, fmaf(kar[e], ca, dab * s[i][e]));
            }
        }
        if (j < n) {  // an odd token count's last token, alone
            float4 k4[RI], q4[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) {
                k4[i] = *reinterpret_cast<const float4*>(&st.k[j][4 * RQ * i + 4 * qq]);
                q4[i] = *reinterpret_cast<const float4*>(&st.q[j][4 * RQ * i + 4 * qq]);
            }
            const float decay = expf(st.g[j]), beta = st.beta[j], kq = st.kq[j], v = st.v[j][vcol];
            float pk[4] = {0.f, 0.f, 0.f, 0.f}, pq[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < RI; i++) {
                const float kr[4] = {k4[i].x, k4[i].y, k4[i].z, k4[i].w};
                const float qr[4] = {q4[i].x, q4[i].y, q4[i].z, q4[i].w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    pk[e] = fmaf(s[i][e], kr[e], pk[e]);
                    pq[e] = fmaf(s[i][e], qr[e], pq[e]);
                }
            }
            float sk = (pk[0] + pk[1]) + (pk[2] + pk[3]);
            float sq = (pq[0] + pq[1]) + (pq[2] + pq[3]);
#pragma unroll
            for (int off = CPW; off < 32; off <<= 1) {
                sk += __shfl_xor_sync(FULL, sk, off);
                sq += __shfl_xor_sync(FULL, sq, off);
            }
            const float u = beta * (v - decay * sk);
            if (qq == 0) o_out[(size_t)(ch * SCAN_TOKENS + j) * GDN_VALUE_DIM] = decay * sq + kq * u;
#pragma unroll
            for (int i = 0; i < RI; i++) {
                const float kr[4] = {k4[i].x, k4[i].y, k4[i].z, k4[i].w};
#pragma unroll
                for (int e = 0; e < 4; e++) s[i][e] = fmaf(kr[e], u, decay * s[i][e]);
            }
        }
        __syncthreads();  // stage[ch & 1] is refilled in the next iteration
    }

#pragma unroll
    for (int i = 0; i < RI; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) Sh[(4 * RQ * i + 4 * qq + e) * 128] = s[i][e];
}

// gdn_prefill_scan: RQ = 4, 128 threads. (RQ = 8 with 256 threads measured 4% slower; a
// row-split layout with a reduce-scatter over all 32 lanes about the same: 250–265 ns/token.)
extern "C" __global__ void __launch_bounds__(128)
gdn_prefill_scan(const float* __restrict__ mixed, const float* __restrict__ gates, float* __restrict__ S,
                 float* __restrict__ o, int T) {
    pdl_wait();
    scan_cols<4>(mixed, gates, S, o, T);
}

// ---------------------------------------------------------------------------------------------
// gdn_gated_norm: out[t, h, :] = bf16( w · (o · rsqrt(mean(o²) + eps)) · silu(z) ) per token and
// value head (out = RMSNorm(o) · w ∘ silu(z): plain w, norm first, then the gate).
// Geometry: one warp per (token, head) row of 128, lane holds 4; 8 rows per 256-thread block.
extern "C" __global__ void __launch_bounds__(256)
gdn_gated_norm(const float* __restrict__ o, const float* __restrict__ z, const float* __restrict__ norm_w,
               bf16* __restrict__ out, int rows, float eps) {
    pdl_wait();
    const int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    const size_t at = (size_t)row * 128 + 4 * lane;
    const float4 x = *reinterpret_cast<const float4*>(o + at);
    const float ss = warp_sum(x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w);
    const float inv = rsqrtf(ss * (1.f / 128.f) + eps);
    const float4 zz = *reinterpret_cast<const float4*>(z + at);
    const float4 w = *reinterpret_cast<const float4*>(norm_w + 4 * lane);
    store_bf16x4(out + at, w.x * (x.x * inv) * silu(zz.x), w.y * (x.y * inv) * silu(zz.y),
                 w.z * (x.z * inv) * silu(zz.z), w.w * (x.w * inv) * silu(zz.w));
}
