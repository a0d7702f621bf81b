// Gated DeltaNet after the conv (model-spec §3.1.4–9): gates, q/k l2-norm, the delta rule with
// an fp32 state, and the gated RMSNorm. Value head h reads key head h / 2 (pitfall 2).
//
// Layouts shared by every kernel here:
//   mixed  f32 [T, 8192]   conv+SiLU output, [q 16×128 | k 16×128 | v 32×128] per token
//   S      f32 [32, 128, 128]  S[h][r][c]: key dim r → value dim c (model-spec §3.1.7)
//   z      f32 [T, 4096];  b, a  f32 [T, 32];  a_log, dt_bias f32 [32];  norm_w f32 [128] (plain w)
//   gates  f32 [T, GATES_STRIDE]  per token: g[32] | beta[32] | kq[16] (k·q of each key head,
//          after normalisation and the q scale), written by gdn_prep for the prefill scan
//
// Decode (T == 1): gdn_decode_step does everything from `mixed` to the bf16 out_proj input.
// Prefill (T >= 1): gdn_prep (l2norm in place + gates) → gdn_prefill_scan (state on chip, serial
// over tokens, raw o) → gdn_gated_norm (o, z → bf16).
#define GDN_KEY_DIM 2048                   // 16 key heads × 128
#define GDN_VALUE_DIM 4096                 // 32 value heads × 128
#define GDN_Q_SCALE 0.08838834764831845f  // 1 / sqrt(128)
#define GDN_L2_EPS 1e-6f                  // inside the sum (pitfall 6)
#define GATES_STRIDE 80
#define GATE_BETA 32
#define GATE_KQ 64

// beta = σ(b); g = −exp(A_log) · softplus(a + dt_bias), softplus linear above 20 like torch.
// Accurate expf/log1pf: the decay exp(g) of slow heads is 1 − tiny and must not lose it.
__device__ __forceinline__ void gdn_gates(float a, float b, float a_log, float dt_bias, float& g, float& beta) {
    const float x = a + dt_bias;
    const float sp = x > 20.f ? x : log1pf(expf(x));
    g = -expf(a_log) * sp;
    beta = 1.f / (1.f + expf(-b));
}

// Thread-block clusters by PTX (cooperative_groups needs CCCL headers NVRTC does not get here).
// Every thread of every block of the cluster must call cluster_sync (release/acquire barrier).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Reads the float at `p` (a __shared__ address of this block) in block `rank` of the cluster.
__device__ __forceinline__ float ld_shared_cluster(const float* p, unsigned rank) {
    const unsigned local = (unsigned)__cvta_generic_to_shared(p);
    unsigned remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    return v;
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
// gdn_decode_step: one token, everything after the conv, in one kernel.
//   mixed f32 [8192], z f32 [4096], b/a f32 [32], S f32 [32,128,128] (read and written once),
//   out bf16 [4096] = gated RMSNorm(o) · silu(z), the out_proj input.
// Geometry: 128 blocks of 128 threads in clusters of 4; block = (value head h = blockIdx.x / 4,
// column group = blockIdx.x % 4 = its rank in the cluster) owns S[h][:, 32·group .. +32].
// Thread (cq = tid % 8, rs = tid / 8) holds columns 4cq..4cq+3 of the group for rows rs + 16i,
// i < 8: 8 float4 registers; a warp reads 4 whole 128-byte row segments per load.
// Every block normalises q, k of key head h/2 itself (256 floats, cheaper than a launch) and
// computes its gates. With the old S, Sᵀk and Sᵀq are reduced in one pass; then
//   u = β (v − e^g Sᵀk),  o = Sᵀ_new q = e^g Sᵀq + (k·q) u,  S_new = e^g S + k uᵀ,
// so S is read once, written once, and the output needs no second reduction. The gated norm's
// Σo² over the head's 128 columns is exchanged between the 4 blocks through distributed shared
// memory (cluster barrier).
extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(128)
gdn_decode_step(const float* __restrict__ mixed, const float* __restrict__ z, const float* __restrict__ b,
                const float* __restrict__ a, const float* __restrict__ a_log, const float* __restrict__ dt_bias,
                const float* __restrict__ norm_w, float* __restrict__ S, bf16* __restrict__ out, float eps) {
    __shared__ float qs[128], ks[128];
    __shared__ __align__(16) float red_k[4][32];
    __shared__ __align__(16) float red_q[4][32];
    __shared__ float part[4][3];
    __shared__ float sumsq;

    const int h = blockIdx.x >> 2, group = blockIdx.x & 3, kh = h >> 1;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int cq = tid & 7, rs = tid >> 3;
    const int col = group * 32 + cq * 4;  // this thread's first column within the head
    float* Sh = S + (size_t)h * 128 * 128 + col;

    // The state first: 8 independent 16-byte loads in flight per thread.
    float4 s[8];
#pragma unroll
    for (int i = 0; i < 8; i++) s[i] = *reinterpret_cast<const float4*>(Sh + (rs + 16 * i) * 128);

    // l2norm of q and k (eps inside the sum), and k·q, over the 128 dims of key head kh.
    const float qv = mixed[kh * 128 + tid];
    const float kv = mixed[GDN_KEY_DIM + kh * 128 + tid];
    float sq = warp_sum(qv * qv), sk = warp_sum(kv * kv), sqk = warp_sum(qv * kv);
    if (lane == 0) {
        part[warp][0] = sq;
        part[warp][1] = sk;
        part[warp][2] = sqk;
    }
    __syncthreads();
    sq = part[0][0] + part[1][0] + part[2][0] + part[3][0];
    sk = part[0][1] + part[1][1] + part[2][1] + part[3][1];
    sqk = part[0][2] + part[1][2] + part[2][2] + part[3][2];
    const float inv_q = rsqrtf(sq + GDN_L2_EPS) * GDN_Q_SCALE, inv_k = rsqrtf(sk + GDN_L2_EPS);
    qs[tid] = qv * inv_q;
    ks[tid] = kv * inv_k;
    const float kq = sqk * inv_q * inv_k;
    float g, beta;
    gdn_gates(a[h], b[h], a_log[h], dt_bias[h], g, beta);
    const float decay = expf(g);
    __syncthreads();

    // Partial Sᵀk and Sᵀq of the old state over this thread's 8 rows.
    float4 pk = make_float4(0.f, 0.f, 0.f, 0.f), pq = pk;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float kr = ks[rs + 16 * i], qr = qs[rs + 16 * i];
        pk.x += s[i].x * kr; pk.y += s[i].y * kr; pk.z += s[i].z * kr; pk.w += s[i].w * kr;
        pq.x += s[i].x * qr; pq.y += s[i].y * qr; pq.z += s[i].z * qr; pq.w += s[i].w * qr;
    }
    // Sum over the 4 row sets of this warp (lanes differing in bits 3 and 4), then over the warps.
#pragma unroll
    for (int off = 8; off <= 16; off <<= 1) {
        pk.x += __shfl_xor_sync(0xffffffffu, pk.x, off); pk.y += __shfl_xor_sync(0xffffffffu, pk.y, off);
        pk.z += __shfl_xor_sync(0xffffffffu, pk.z, off); pk.w += __shfl_xor_sync(0xffffffffu, pk.w, off);
        pq.x += __shfl_xor_sync(0xffffffffu, pq.x, off); pq.y += __shfl_xor_sync(0xffffffffu, pq.y, off);
        pq.z += __shfl_xor_sync(0xffffffffu, pq.z, off); pq.w += __shfl_xor_sync(0xffffffffu, pq.w, off);
    }
    if (lane < 8) {
        *reinterpret_cast<float4*>(&red_k[warp][cq * 4]) = pk;
        *reinterpret_cast<float4*>(&red_q[warp][cq * 4]) = pq;
    }
    __syncthreads();
    float4 stk = make_float4(0.f, 0.f, 0.f, 0.f), stq = stk;
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const float4 rk = *reinterpret_cast<const float4*>(&red_k[w][cq * 4]);
        const float4 rq = *reinterpret_cast<const float4*>(&red_q[w][cq * 4]);
        stk.x += rk.x; stk.y += rk.y; stk.z += rk.z; stk.w += rk.w;
        stq.x += rq.x; stq.y += rq.y; stq.z += rq.z; stq.w += rq.w;
    }

    const float4 v = *reinterpret_cast<const float4*>(mixed + 2 * GDN_KEY_DIM + h * 128 + col);
    float4 u, o;
    u.x = beta * (v.x - decay * stk.x); u.y = beta * (v.y - decay * stk.y);
    u.z = beta * (v.z - decay * stk.z); u.w = beta * (v.w - decay * stk.w);
    o.x = decay * stq.x + kq * u.x; o.y = decay * stq.y + kq * u.y;
    o.z = decay * stq.z + kq * u.z; o.w = decay * stq.w + kq * u.w;

#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float kr = ks[rs + 16 * i];
        float4 n;
        n.x = fmaf(kr, u.x, decay * s[i].x); n.y = fmaf(kr, u.y, decay * s[i].y);
        n.z = fmaf(kr, u.z, decay * s[i].z); n.w = fmaf(kr, u.w, decay * s[i].w);
        *reinterpret_cast<float4*>(Sh + (rs + 16 * i) * 128) = n;
    }

    // Gated RMSNorm over the head's 128 columns: threads 0..7 hold this block's 32 outputs.
    if (warp == 0) {
        float p = lane < 8 ? o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w : 0.f;
        p = warp_sum(p);
        if (lane == 0) sumsq = p;
    }
    cluster_sync();
    float total = 0.f;
#pragma unroll
    for (int r = 0; r < 4; r++) total += ld_shared_cluster(&sumsq, r);
    cluster_sync();  // no block leaves while another still reads its shared memory
    if (tid < 8) {
        const float inv = rsqrtf(total * (1.f / 128.f) + eps);
        const float4 zz = *reinterpret_cast<const float4*>(z + h * 128 + col);
        const float4 w = *reinterpret_cast<const float4*>(norm_w + col);
        store_bf16x4(out + h * 128 + col, w.x * (o.x * inv) * silu(zz.x), w.y * (o.y * inv) * silu(zz.y),
                     w.z * (o.z * inv) * silu(zz.z), w.w * (o.w * inv) * silu(zz.w));
    }
}

// ---------------------------------------------------------------------------------------------
// gdn_prep: per token, l2-normalise q (and scale by 1/√128) and k in place in `mixed`, and write
// the gates row [g | beta | kq] (kq: the normalised k·q of each key head, used by the scan).
// Geometry: grid T, 256 threads; warp w owns key heads 2w and 2w+1 (q and k of the same head in
// one warp, so k·q comes from the same pass); warp 0 also computes the 32 value heads' gates.
extern "C" __global__ void __launch_bounds__(256)
gdn_prep(float* __restrict__ mixed, const float* __restrict__ b, const float* __restrict__ a,
         const float* __restrict__ a_log, const float* __restrict__ dt_bias, float* __restrict__ gates) {
    const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float* row = mixed + (size_t)t * GDN_CONV_DIM;
    float* gate_row = gates + (size_t)t * GATES_STRIDE;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int kh = 2 * warp + j;
        float4* qp = reinterpret_cast<float4*>(row + kh * 128) + lane;
        float4* kp = reinterpret_cast<float4*>(row + GDN_KEY_DIM + kh * 128) + lane;
        float4 q = *qp, k = *kp;
        const float sq = warp_sum(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w);
        const float sk = warp_sum(k.x * k.x + k.y * k.y + k.z * k.z + k.w * k.w);
        const float sqk = warp_sum(q.x * k.x + q.y * k.y + q.z * k.z + q.w * k.w);
        const float inv_q = rsqrtf(sq + GDN_L2_EPS) * GDN_Q_SCALE, inv_k = rsqrtf(sk + GDN_L2_EPS);
        q.x *= inv_q; q.y *= inv_q; q.z *= inv_q; q.w *= inv_q;
        k.x *= inv_k; k.y *= inv_k; k.z *= inv_k; k.w *= inv_k;
        *qp = q;
        *kp = k;
        if (lane == 0) gate_row[GATE_KQ + kh] = sqk * inv_q * inv_k;
    }
    if (warp == 0) {
        float g, beta;
        gdn_gates(a[t * GDN_V_HEADS + lane], b[t * GDN_V_HEADS + lane], a_log[lane], dt_bias[lane], g, beta);
        gate_row[lane] = g;
        gate_row[GATE_BETA + lane] = beta;
    }
}

// ---------------------------------------------------------------------------------------------
// gdn_prefill_scan: the delta rule token by token with the state on chip (Lily's register scan).
//   mixed: after gdn_prep (q, k normalised); gates from gdn_prep; S read at the start, written at
//   the end; o f32 [T, 4096] raw (before the gated norm).
// Geometry: 128 blocks × 128 threads; block = (value head h = blockIdx.x / 4, group of 32 columns);
// warp w owns 8 columns (c0 = 32·group + 8w) over all 128 rows; lane l holds rows 4l..4l+3 of
// them: 32 registers. Warps never synchronise with each other inside a token: per token a warp
//   1. forms 16 partials (Sᵀk and Sᵀq of the old state, 8 columns each, over its 4 rows),
//   2. reduce-scatters them over the 32 lanes in 5 butterfly steps (16 shuffles): lane l ends
//      with the full sum of kind (l >> 4) (0: Sᵀk, 1: Sᵀq) for column (l >> 1) & 7,
//   3. u = β (v − e^g Sᵀk) on the Sᵀk lanes; o = e^g Sᵀq + (k·q) u on the Sᵀq lanes,
//   4. gathers the 8 u values (8 shuffles) and updates S ← e^g S + k uᵀ.
// Token inputs (k, q, v slice, g, β, k·q) are staged in shared memory SCAN_TOKENS tokens at a
// time by cp.async, double-buffered: the next chunk loads while this one is processed.
#define SCAN_TOKENS 16
#define SCAN_THREADS 128

struct ScanStage {
    float k[SCAN_TOKENS][128];
    float q[SCAN_TOKENS][128];
    float v[SCAN_TOKENS][32];
    float g[SCAN_TOKENS];
    float beta[SCAN_TOKENS];
    float kq[SCAN_TOKENS];
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Stages tokens [t0, min(t0 + SCAN_TOKENS, T)) of head h, column group `group`.
__device__ __forceinline__ void scan_stage(ScanStage& st, const float* __restrict__ mixed,
                                           const float* __restrict__ gates, int t0, int T, int h, int group) {
    const int tid = threadIdx.x, kh = h >> 1;
    // k and q: SCAN_TOKENS × 32 float4 each.
#pragma unroll
    for (int m = 0; m < SCAN_TOKENS * 32 / SCAN_THREADS; m++) {
        const int i = tid + m * SCAN_THREADS, j = i >> 5, f = i & 31;
        if (t0 + j < T) {
            const float* row = mixed + (size_t)(t0 + j) * GDN_CONV_DIM;
            cp_async16(&st.q[j][4 * f], row + kh * 128 + 4 * f);
            cp_async16(&st.k[j][4 * f], row + GDN_KEY_DIM + kh * 128 + 4 * f);
        }
    }
    // v: SCAN_TOKENS × 8 float4 (this block's 32 columns).
    {
        const int j = tid >> 3, f = tid & 7;
        if (j < SCAN_TOKENS && t0 + j < T)
            cp_async16(&st.v[j][4 * f], mixed + (size_t)(t0 + j) * GDN_CONV_DIM + 2 * GDN_KEY_DIM + h * 128 +
                                            group * 32 + 4 * f);
    }
    // g, beta, kq: one float each per token.
    if (tid < 3 * SCAN_TOKENS) {
        const int kind = tid / SCAN_TOKENS, j = tid % SCAN_TOKENS;
        if (t0 + j < T) {
            const float* gr = gates + (size_t)(t0 + j) * GATES_STRIDE;
            if (kind == 0) cp_async4(&st.g[j], gr + h);
            else if (kind == 1) cp_async4(&st.beta[j], gr + GATE_BETA + h);
            else cp_async4(&st.kq[j], gr + GATE_KQ + kh);
        }
    }
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
gdn_prefill_scan(const float* __restrict__ mixed, const float* __restrict__ gates, float* __restrict__ S,
                 float* __restrict__ o, int T) {
    __shared__ __align__(16) ScanStage stage[2];
    const int h = blockIdx.x >> 2, group = blockIdx.x & 3;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c0 = group * 32 + warp * 8;
    const unsigned FULL = 0xffffffffu;

    // This lane's 4 rows × 8 columns of S[h].
    float s[4][8];
    float* Sh = S + (size_t)h * 128 * 128 + (4 * lane) * 128 + c0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float4 lo = *reinterpret_cast<const float4*>(Sh + i * 128);
        const float4 hi = *reinterpret_cast<const float4*>(Sh + i * 128 + 4);
        s[i][0] = lo.x; s[i][1] = lo.y; s[i][2] = lo.z; s[i][3] = lo.w;
        s[i][4] = hi.x; s[i][5] = hi.y; s[i][6] = hi.z; s[i][7] = hi.w;
    }

    const int my_col = (lane >> 1) & 7;      // the column this lane's reduced value belongs to
    const bool q_lane = (lane & 16) != 0;    // reduced value is Sᵀq (else Sᵀk)
    float* o_out = o + h * 128 + c0 + my_col;

    const int chunks = (T + SCAN_TOKENS - 1) / SCAN_TOKENS;
    scan_stage(stage[0], mixed, gates, 0, T, h, group);
    cp_async_commit();
    for (int ch = 0; ch < chunks; ch++) {
        if (ch + 1 < chunks) scan_stage(stage[(ch + 1) & 1], mixed, gates, (ch + 1) * SCAN_TOKENS, T, h, group);
        cp_async_commit();
        cp_async_wait_1();  // chunk ch has landed (only the group just committed may be in flight)
        __syncthreads();
        const ScanStage& st = stage[ch & 1];
        const int n = min(SCAN_TOKENS, T - ch * SCAN_TOKENS);
        for (int j = 0; j < n; j++) {
            const int t = ch * SCAN_TOKENS + j;
            const float4 k4 = *reinterpret_cast<const float4*>(&st.k[j][4 * lane]);
            const float4 q4 = *reinterpret_cast<const float4*>(&st.q[j][4 * lane]);
            const float kr[4] = {k4.x, k4.y, k4.z, k4.w}, qr[4] = {q4.x, q4.y, q4.z, q4.w};
            const float decay = expf(st.g[j]), beta = st.beta[j], kq = st.kq[j];
            const float v = st.v[j][warp * 8 + my_col];

            // 1. partials: P[0..8] = Sᵀk, P[8..16] = Sᵀq over this lane's rows (old S).
            float P[16];
#pragma unroll
            for (int c = 0; c < 8; c++) {
                P[c] = s[0][c] * kr[0] + s[1][c] * kr[1] + s[2][c] * kr[2] + s[3][c] * kr[3];
                P[8 + c] = s[0][c] * qr[0] + s[1][c] * qr[1] + s[2][c] * qr[2] + s[3][c] * qr[3];
            }
            // 2. reduce-scatter: each step keeps the half selected by one lane bit and adds the
            //    partner's copy of it.
            {
                const bool hi = (lane & 16) != 0;  // kind
#pragma unroll
                for (int c = 0; c < 8; c++) {
                    const float send = hi ? P[c] : P[c + 8], keep = hi ? P[c + 8] : P[c];
                    P[c] = keep + __shfl_xor_sync(FULL, send, 16);
                }
            }
            {
                const bool hi = (lane & 8) != 0;  // columns 4..7
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const float send = hi ? P[c] : P[c + 4], keep = hi ? P[c + 4] : P[c];
                    P[c] = keep + __shfl_xor_sync(FULL, send, 8);
                }
            }
            {
                const bool hi = (lane & 4) != 0;
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const float send = hi ? P[c] : P[c + 2], keep = hi ? P[c + 2] : P[c];
                    P[c] = keep + __shfl_xor_sync(FULL, send, 4);
                }
            }
            {
                const bool hi = (lane & 2) != 0;
                const float send = hi ? P[0] : P[1], keep = hi ? P[1] : P[0];
                P[0] = keep + __shfl_xor_sync(FULL, send, 2);
            }
            const float r = P[0] + __shfl_xor_sync(FULL, P[0], 1);

            // 3. u on the Sᵀk lanes, o on the Sᵀq lanes (u from the partner lane l ^ 16).
            const float uu = beta * (v - decay * r);
            const float u_partner = __shfl_xor_sync(FULL, uu, 16);
            if (q_lane && (lane & 1) == 0) o_out[(size_t)t * GDN_VALUE_DIM] = decay * r + kq * u_partner;

            // 4. S ← e^g S + k uᵀ, with u of column c from lane 2c.
#pragma unroll
            for (int c = 0; c < 8; c++) {
                const float uc = __shfl_sync(FULL, uu, 2 * c);
#pragma unroll
                for (int i = 0; i < 4; i++) s[i][c] = fmaf(kr[i], uc, decay * s[i][c]);
            }
        }
        __syncthreads();  // stage[ch & 1] is refilled in the next iteration
    }

#pragma unroll
    for (int i = 0; i < 4; i++) {
        *reinterpret_cast<float4*>(Sh + i * 128) = make_float4(s[i][0], s[i][1], s[i][2], s[i][3]);
        *reinterpret_cast<float4*>(Sh + i * 128 + 4) = make_float4(s[i][4], s[i][5], s[i][6], s[i][7]);
    }
}

// ---------------------------------------------------------------------------------------------
// gdn_gated_norm: out[t, h, :] = bf16( w · (o · rsqrt(mean(o²) + eps)) · silu(z) ) per token and
// value head (model-spec §3 "Gated RMSNorm"; plain w, norm first, then the gate).
// Geometry: one warp per (token, head) row of 128, lane holds 4; 8 rows per 256-thread block.
extern "C" __global__ void __launch_bounds__(256)
gdn_gated_norm(const float* __restrict__ o, const float* __restrict__ z, const float* __restrict__ norm_w,
               bf16* __restrict__ out, int rows, float eps) {
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
