// step_probe: does a whole decode step in one persistent kernel, whose weight stream runs on
// through the step's dependency barriers, beat a kernel per link (bench/NOTES.md, issue 5
// session 8)? Not part of solo: a standalone program for the GPU machine:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/step_probe bench/probes/step_probe.cu
//   /tmp/step_probe
//
// The step is a synthetic stand-in for Qwen3.6-35B-A3B's decode step with the model's byte
// counts (6.10 GB: 40 GDN-shaped layers and the lm_head), every matrix read as 4 KB rows
// (2048 bf16) and dotted with an f32 vector, as solo's GEMVs do. Per layer, six links, each
// needing every output of the link before (a grid barrier or a kernel boundary between):
//   0 in-projection          12,352 rows   x = the layer's input
//   1 GDN step                  512 rows   then `spin` cycles of serial math per warp
//   2 W_o                     4,096 rows
//   3 router + shared gate/up 1,280 rows   outputs 0..255 are the router logits
//   4 shared down               512 rows   + the 8 routed experts' (gate, up): 8 × 1,024 rows,
//                                           experts = top-8 of link 3's logits (addresses known
//                                           only after the barrier)
//   5 routed down                          8 × 512 rows of the same experts
// then the lm_head, 248,320 rows. The experts of a layer are 256 × 1,536 rows (6 MB each), so
// the weights are 68.5 GB: every step is cold in L2.
//
// Each warp owns two rings in shared memory: S slots for the static rows (addresses known
// before the step) and R slots for the routed rows. Warp gw of W takes rows gw, gw + W, ... of
// every link. With lookahead, a warp keeps its static ring full across link boundaries: while
// it waits at a barrier (or for the routing, or in the GDN step's math) the next links' rows
// are already on the way. Without it, a link's rows are requested once the link starts (or just
// before its barrier, as solo's kernels request theirs before pdl_wait). After each barrier a
// block stages x (8 KB, the link before's outputs) from L2 into shared memory: the exchange.
// Cases: a kernel per link (241 launches in a graph); one kernel, rows requested after / before
// the barrier / with lookahead, in several ring shapes; timing-only runs that skip the barriers,
// the exchange, both, or the dot products (their results are wrong, and the check says so); the
// barriers alone. Session 11 added two other ways to meet: the tagged exchange (no barrier; the
// outputs are (value, tag) words that the next link polls) and the barrier's arrivals spread over
// 8 counters; `step_probe tagged` runs only those cases and the ones to compare them with.
// Every correct case's logits must equal the first case's bit for bit (checked). Block 0's
// breakdown of its time (barrier, exchange and routing, rows) and warp 0's time waiting for rows
// to land follow each case. The results and what they say: bench/NOTES.md, "Issue 5, session 8"
// and "session 11".
#include <vector>

#define PROBE_LAUNCHES 20  // steps per graph (a step reads 6 GB)
#include "probe.cuh"

constexpr int ROW = 2048;  // bf16 in a 4 KB row
constexpr int LAYERS = 40;
constexpr int PER_LAYER = 6;
constexpr int NLINKS = LAYERS * PER_LAYER + 1;
constexpr int EXPERTS = 256;
constexpr int EXPERT_ROWS = 1536;  // (gate, up) 1,024 rows, then down 512
constexpr int LM_ROWS = 248320;
constexpr int YMAX = LM_ROWS;  // the longest output of a link

struct Link {
    const bf16* w;      // static rows [rows][2048]
    int rows;           // static rows (0: none)
    int routed;         // 0: none; 1: routed (gate, up), 8 × 1,024 rows; 2: routed down, 8 × 512
    int spin;           // cycles of serial math per warp after its static rows
    int in_rows;        // outputs of the link before: x[c] = softsign(y[c % in_rows])
    const bf16* pool;   // routed: the layer's experts [256][1536][2048]
    float* logits;      // link 3 writes its first 256 outputs here; links 4 and 5 route from it
};
__constant__ Link c_links[NLINKS];

__device__ __forceinline__ int routed_rows(int kind) { return kind == 1 ? 8 * 1024 : kind == 2 ? 8 * 512 : 0; }

__device__ __forceinline__ void wait_dyn(int n) {  // cp.async.wait_group n, n clamped to 0..7
    switch (n < 0 ? 0 : n > 7 ? 7 : n) {
        case 0: wait_groups<0>(); break;
        case 1: wait_groups<1>(); break;
        case 2: wait_groups<2>(); break;
        case 3: wait_groups<3>(); break;
        case 4: wait_groups<4>(); break;
        case 5: wait_groups<5>(); break;
        case 6: wait_groups<6>(); break;
        default: wait_groups<7>(); break;
    }
}



// A warp's place in its stream of rows: the link and the row (static) or routed index p.
struct Cursor {
    int link, row;
};

template <int NW, int S, int R>
struct Warp {
    int gw, W, lane, last;
    bf16* sring;  // [S][2048]
    bf16* rring;  // [R][2048]
    int* seq;     // the commit-group number of each slot: [S + R]
    int* experts; // [8]
    int committed = 0;
    int s_issued = 0, s_used = 0, r_issued = 0, r_used = 0;
    Cursor s_next, r_next;
    int routed_known = -1;  // the last link whose routed rows have known addresses

    __device__ void copy_row(bf16* dst, const bf16* src) {
#pragma unroll
        for (int j = 0; j < 8; j++) cp_async16(dst + j * 256 + lane * 8, src + j * 256 + lane * 8);
        commit();
    }
    // The first static row at or after (link, row).
    __device__ void settle_static(Cursor& c) {
        while (c.link < last && c.row >= c_links[c.link].rows) c.link++, c.row = gw;
    }
    __device__ void settle_routed(Cursor& c) {
        while (c.link < last && c.row >= routed_rows(c_links[c.link].routed)) c.link++, c.row = gw;
    }
    // Fills the static ring up to S rows ahead, no further than link `limit`.
    __device__ void top_up_static(int limit) {
        while (s_issued - s_used < S && s_next.link < last && s_next.link <= limit) {
            const int slot = s_issued % S;
            copy_row(sring + slot * ROW, c_links[s_next.link].w + (long long)s_next.row * ROW);
            seq[slot] = committed++;
            s_issued++;
            s_next.row += W;
            settle_static(s_next);
        }
    }
    __device__ void top_up_routed(int limit) {
        while (r_issued - r_used < R && r_next.link < last && r_next.link <= limit && r_next.link <= routed_known) {
            const Link& L = c_links[r_next.link];
            const int p = r_next.row;
            const long long row = L.routed == 1 ? (long long)experts[p >> 10] * EXPERT_ROWS + (p & 1023)
                                                : (long long)experts[p >> 9] * EXPERT_ROWS + 1024 + (p & 511);
            const int slot = r_issued % R;
            copy_row(rring + slot * ROW, L.pool + row * ROW);
            seq[S + slot] = committed++;
            r_issued++;
            r_next.row += W;
            settle_routed(r_next);
        }
    }
};

__device__ __forceinline__ float softsign(float v) { return __fdividef(v, 1.f + fabsf(v)); }

// The tagged exchange (mode & 32, no grid barriers): a link's outputs are 64-bit words, the f32
// value in the low half and the link's tag in the high half, stored whole (single-copy atomic),
// so a reader that sees the tag sees the value; the next link's blocks poll the words they need
// until every tag is the one they expect. Each link has its own buffer (a block may be links
// ahead of another that has nothing to produce), and the tag carries the launch's epoch.
constexpr int LL_STRIDE = 12352;  // the longest output of a link before the lm_head
__device__ __forceinline__ void st_tagged(unsigned long long* p, float v, unsigned tag) {
    const unsigned long long w = ((unsigned long long)tag << 32) | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ unsigned long long ld_tagged(const unsigned long long* p) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    return w;
}
// mode & 64: waits until the 8 words at b .. b + 7 carry `tag`, all 8 requested at once (16-byte
// loads), backing off between tries; their values.
__device__ __forceinline__ void poll8(const unsigned long long* b, unsigned tag, float (&v)[8]) {
    unsigned long long w[8];
    for (;;) {
#pragma unroll
        for (int k = 0; k < 4; k++)
            asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(w[2 * k]), "=l"(w[2 * k + 1]) : "l"(b + 2 * k) : "memory");
        bool ok = true;
#pragma unroll
        for (int k = 0; k < 8; k++) ok &= (unsigned)(w[k] >> 32) == tag;
        if (ok) break;
        __nanosleep(64);
    }
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = __uint_as_float((unsigned)w[k]);
}
// Waits until the 4 words at c, c + 1, c + 2, c + 3 (mod n) of buffer b carry `tag`; their values.
__device__ __forceinline__ float4 poll4(const unsigned long long* b, int c, int n, unsigned tag) {
    unsigned long long w[4];
    for (;;) {
        bool ok = true;
#pragma unroll
        for (int k = 0; k < 4; k++) w[k] = ld_tagged(b + (c + k) % n);
#pragma unroll
        for (int k = 0; k < 4; k++) ok &= (unsigned)(w[k] >> 32) == tag;
        if (ok) break;
        __nanosleep(32);
    }
    return make_float4(__uint_as_float((unsigned)w[0]), __uint_as_float((unsigned)w[1]), __uint_as_float((unsigned)w[2]),
                       __uint_as_float((unsigned)w[3]));
}

// The row in `slot` (once its group has landed) · x.
__device__ __forceinline__ float slot_dot(const bf16* slot, const float (&x)[64], int lane) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};  // four chains, not one of 64 dependent FMAs
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const uint4 w = *reinterpret_cast<const uint4*>(slot + j * 256 + lane * 8);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __bfloat1622float2(h[i]);
            acc[i] = fmaf(f.x, x[j * 8 + 2 * i], fmaf(f.y, x[j * 8 + 2 * i + 1], acc[i]));
        }
    }
    return warp_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
}

// Links first .. last - 1 of the step. ys: two output buffers [2][YMAX] (link l writes ys[l & 1]).
// arrivals: the grid barrier's count (u64 [128], zero at launch). mode & 3, the lookahead: 0, a
// link's rows are requested after its barrier; 1, before it (as solo's kernels do before
// pdl_wait); 2, across links, the static ring always full. mode & 4: no exchange (x kept from the
// first link), mode & 8: no barriers; mode & 16: no dot products (each row's slot read once, not
// multiplied); all three for timing only. mode & 32: the tagged exchange instead of barriers
// (outputs into ll, one buffer per link, tagged with *epoch and the link); with mode & 64 each
// thread polls 8 words at once (poll8), else 4 at a time (poll4). mode & 128: the barrier over 8
// counters (grid_barrier_split). marks: block 0's clock at 4 points of every link, then warp 0's
// cycles waiting for rows and its row count.
template <int NW, int S, int R>
__global__ void __launch_bounds__(NW * 32, 1)
    step_kernel(int first, int last, int mode, unsigned long long* arrivals, float* ys, unsigned long long* marks,
                unsigned long long* ll, const unsigned* epoch) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int seq_all[NW][S + R];
    __shared__ int experts_all[NW][8];
    __shared__ __align__(16) float xs[ROW];  // the link's x
    __shared__ float logits_s[256];
    const int warp = threadIdx.x >> 5;
    Warp<NW, S, R> w;
    w.lane = threadIdx.x & 31;
    w.W = gridDim.x * NW;
    w.gw = blockIdx.x * NW + warp;
    w.last = last;
    w.sring = reinterpret_cast<bf16*>(smem) + warp * (S + R) * ROW;
    w.rring = w.sring + S * ROW;
    w.seq = seq_all[warp];
    w.experts = experts_all[warp];
    w.s_next = {first, w.gw};
    w.settle_static(w.s_next);
    w.r_next = {first, w.gw};
    w.settle_routed(w.r_next);
    const int lane = w.lane;
    unsigned long long barriers = 0;
    float x[64];
    const bool tagged = mode & 32;
    const unsigned ep = tagged ? *epoch : 0;
    auto tag_of = [&](int l) { return (ep << 8) | (unsigned)l; };
    long long waited = 0, rows_done = 0;  // block 0 warp 0: cycles waiting for rows to land

    auto mark = [&](int l, int k) {  // block 0's clock at point k of link l (for the breakdown)
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            marks[l * 4 + k] = t;
        }
    };
    for (int l = first; l < last; l++) {
        const Link& L = c_links[l];
        mark(l, 0);
        const int lookahead = mode & 3;
        const int limit = lookahead == 2 ? last : l;
        if (lookahead) w.top_up_static(limit);  // before the barrier: these rows do not depend on the link before
        if (l > first && !(mode & 8) && !tagged) {
            if (mode & 128) grid_barrier_split(arrivals, ++barriers);
            else grid_barrier(arrivals, ++barriers * gridDim.x);
        }
        w.top_up_static(limit);
        mark(l, 1);
        // x from the link before's outputs, staged once per block (L2: other blocks wrote them;
        // one read per block, not per warp: 1,056 warps reading the same 8 KB contend in L2)
        const float* yprev = ys + ((l - 1) & 1) * YMAX;
        const bool route = L.routed == 1 || (L.routed == 2 && l == first);
        if (tagged && (mode & 64) && l > first)
            for (int c = threadIdx.x * 8; c < ROW; c += NW * 32 * 8) {
                float v[8];
                poll8(ll + (long long)(l - 1) * LL_STRIDE + c % L.in_rows, tag_of(l - 1), v);
#pragma unroll
                for (int k = 0; k < 8; k++) xs[c + k] = softsign(v[k]);
            }
        else
        for (int i = threadIdx.x; i < ((mode & 4) && l > first ? 0 : ROW / 4); i += NW * 32) {
            float4 v;
            if (l == 0) v = make_float4(0.5f, 0.5f, 0.5f, 0.5f);
            else if (tagged) v = poll4(ll + (long long)(l - 1) * LL_STRIDE, 4 * i, L.in_rows, tag_of(l - 1));
            else if (L.in_rows >= ROW) v = __ldcg(reinterpret_cast<const float4*>(yprev) + i);
            else v = make_float4(__ldcg(yprev + (4 * i) % L.in_rows), __ldcg(yprev + (4 * i + 1) % L.in_rows),
                                 __ldcg(yprev + (4 * i + 2) % L.in_rows), __ldcg(yprev + (4 * i + 3) % L.in_rows));
            xs[4 * i] = softsign(v.x), xs[4 * i + 1] = softsign(v.y), xs[4 * i + 2] = softsign(v.z), xs[4 * i + 3] = softsign(v.w);
        }
        if (route && threadIdx.x < 256)
            logits_s[threadIdx.x] = tagged ? poll4(ll + (long long)(l - 1) * LL_STRIDE, threadIdx.x, 1 << 30, tag_of(l - 1)).x
                                           : __ldcg(L.logits + threadIdx.x);
        __syncthreads();
#pragma unroll
        for (int j = 0; j < 16; j++)
            *reinterpret_cast<float4*>(&x[4 * j]) = *reinterpret_cast<const float4*>(&xs[(j >> 1) * 256 + lane * 8 + (j & 1) * 4]);
        if (route) {
            // top-8 of the layer's 256 router logits, the same in every warp
            float v[8];
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = logits_s[lane * 8 + i];
            for (int k = 0; k < 8; k++) {
                float best = -INFINITY;
                int at = 0;
#pragma unroll
                for (int i = 0; i < 8; i++)
                    if (v[i] > best) best = v[i], at = lane * 8 + i;
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) {
                    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
                    const int oa = __shfl_xor_sync(0xffffffffu, at, o);
                    if (ob > best || (ob == best && oa < at)) best = ob, at = oa;
                }
#pragma unroll
                for (int i = 0; i < 8; i++)
                    if (lane * 8 + i == at) v[i] = -INFINITY;
                if (lane == 0) w.experts[k] = at;
            }
            __syncwarp();
            w.routed_known = L.routed == 1 ? l + 1 : l;
        }
        w.top_up_routed(limit);
        mark(l, 2);
        float* y = ys + (l & 1) * YMAX;
        const bool out_tagged = tagged && l < NLINKS - 1;  // the lm_head writes plain floats (the check reads them)
        unsigned long long* yt = ll + (long long)l * LL_STRIDE;
        if (out_tagged && L.rows == 0 && !L.routed)  // an empty link (the barriers-alone case) still hands on 2,048 words
            for (int r = w.gw; r < ROW; r += w.W)
                if (lane == 0) st_tagged(yt + r, 0.f, tag_of(l));
        for (int row = w.gw; row < L.rows; row += w.W) {
            const int slot = w.s_used % S;
            const long long t0 = clock64();
            wait_dyn(w.committed - 1 - w.seq[slot]);
            waited += clock64() - t0;
            rows_done++;
            const float acc = (mode & 16) ? __bfloat162float(w.sring[slot * ROW + lane * 8]) : slot_dot(w.sring + slot * ROW, x, lane);
            if (lane == 0 && out_tagged) st_tagged(yt + row, acc, tag_of(l));
            else if (lane == 0) {
                y[row] = acc;
                if (L.logits && !L.routed && row < 256) L.logits[row] = acc;
            }
            w.s_used++;
            w.top_up_static(limit);
            w.top_up_routed(limit);
        }
        if (L.spin) {
            const long long t0 = clock64();
            while (clock64() - t0 < L.spin) {
            }
        }
        const int nr = routed_rows(L.routed);
        for (int p = w.gw; p < nr; p += w.W) {
            const int slot = w.r_used % R;
            const long long t0 = clock64();
            wait_dyn(w.committed - 1 - w.seq[S + slot]);
            waited += clock64() - t0;
            rows_done++;
            const float acc = (mode & 16) ? __bfloat162float(w.rring[slot * ROW + lane * 8]) : slot_dot(w.rring + slot * ROW, x, lane);
            if (lane == 0 && out_tagged) st_tagged(yt + L.rows + p, acc, tag_of(l));
            else if (lane == 0) y[L.rows + p] = acc;
            w.r_used++;
            w.top_up_routed(limit);
            w.top_up_static(limit);
        }
        mark(l, 3);
    }
    wait_groups<0>();
    if (blockIdx.x == 0 && threadIdx.x == 0) marks[NLINKS * 4] = waited, marks[NLINKS * 4 + 1] = rows_done;
}

__global__ void bump(unsigned* epoch) { epoch[0]++; }

// Weights: bf16 in ±1/64 from a hash of the index.
__global__ void fill(bf16* p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)(i * 2654435761ull) ^ (unsigned)(i >> 29);
        h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12;
        p[i] = __float2bfloat16(((h & 0xffff) / 65536.f - 0.5f) / 32.f);
    }
}

int main(int argc, char** argv) {
    const bool tagged_only = argc > 1;  // `step_probe tagged`: the session-11 cases only
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int layer_rows[PER_LAYER] = {12352, 512, 4096, 1280, 512, 0};
    const int layer_routed[PER_LAYER] = {0, 0, 0, 0, 1, 2};
    long long static_rows = LM_ROWS;
    for (int r : layer_rows) static_rows += (long long)r * LAYERS;
    const long long pool_rows = (long long)LAYERS * EXPERTS * EXPERT_ROWS;
    bf16 *stat, *pool;
    CK(cudaMalloc(&stat, static_rows * ROW * sizeof(bf16)));
    CK(cudaMalloc(&pool, pool_rows * ROW * sizeof(bf16)));
    fill<<<4 * sms, 1024>>>(stat, static_rows * ROW);
    fill<<<4 * sms, 1024>>>(pool, pool_rows * ROW);
    CK(cudaGetLastError());
    float *ys, *logits;
    unsigned long long* arrivals;
    CK(cudaMalloc(&ys, 2 * YMAX * sizeof(float)));
    CK(cudaMemset(ys, 0, 2 * YMAX * sizeof(float)));
    CK(cudaMalloc(&logits, LAYERS * 256 * sizeof(float)));
    CK(cudaMalloc(&arrivals, 128 * sizeof(unsigned long long)));
    unsigned long long* ll;
    unsigned* epoch;
    CK(cudaMalloc(&ll, (size_t)NLINKS * LL_STRIDE * sizeof(unsigned long long)));
    CK(cudaMemset(ll, 0, (size_t)NLINKS * LL_STRIDE * sizeof(unsigned long long)));
    CK(cudaMalloc(&epoch, sizeof(unsigned)));
    CK(cudaMemset(epoch, 0, sizeof(unsigned)));
    unsigned long long* marks;
    CK(cudaMalloc(&marks, (NLINKS * 4 + 2) * sizeof(unsigned long long)));

    // The step's links (spin: cycles of the GDN step's serial math per warp).
    auto links_for = [&](bool empty, int spin) {
        std::vector<Link> links(NLINKS);
        const bf16* w = stat;
        double bytes = 0;
        for (int layer = 0; layer < LAYERS; layer++)
            for (int k = 0; k < PER_LAYER; k++) {
                Link& L = links[layer * PER_LAYER + k];
                L.w = w;
                L.rows = empty ? 0 : layer_rows[k];
                L.routed = empty ? 0 : layer_routed[k];
                L.spin = k == 1 ? spin : 0;
                L.pool = pool + (long long)layer * EXPERTS * EXPERT_ROWS * ROW;
                L.logits = k >= 3 ? logits + layer * 256 : nullptr;
                w += (long long)layer_rows[k] * ROW;
                bytes += 4096.0 * (L.rows + (L.routed == 1 ? 8192 : L.routed == 2 ? 4096 : 0));
            }
        Link& lm = links[NLINKS - 1];
        lm = {w, empty ? 0 : LM_ROWS, 0, 0, 0, nullptr, nullptr};
        bytes += 4096.0 * lm.rows;
        for (int l = 0; l < NLINKS; l++) {  // in_rows: the outputs of the link before
            if (l == 0) { links[l].in_rows = ROW; continue; }
            const Link& P = links[l - 1];
            const int n = P.rows + (P.routed == 1 ? 8192 : P.routed == 2 ? 4096 : 0);
            links[l].in_rows = n > 0 ? n : empty ? ROW : 1;
        }
        CK(cudaMemcpyToSymbol(c_links, links.data(), sizeof(Link) * NLINKS));
        return bytes / 1e6;  // MB
    };

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char name[128];
    std::vector<float> ref;  // the lm_head outputs of the first case (cleared for each new step)
    auto run = [&](const char* what, double mb, auto kernel, int nw, int s, int r, bool per_link, int mode) {
        const int smem = nw * (s + r) * 4096;
        CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        snprintf(name, sizeof name, "%s, %d warps, S %d R %d", what, nw, s, r);
        time_graph(st, name, mb, [&](int) {
            if (per_link) {
                for (int l = 0; l < NLINKS; l++) kernel<<<sms, nw * 32, smem, st>>>(l, l + 1, 0, arrivals, ys, marks, ll, epoch);
            } else {
                CK(cudaMemsetAsync(arrivals, 0, 128 * sizeof(unsigned long long), st));
                if (mode & 32) bump<<<1, 1, 0, st>>>(epoch);
                kernel<<<sms, nw * 32, smem, st>>>(0, NLINKS, mode, arrivals, ys, marks, ll, epoch);
            }
        });
        CK(cudaGetLastError());
        // block 0's time in the last step: to the barrier's end, x and routing, rows; and in all
        std::vector<unsigned long long> m(NLINKS * 4 + 2);
        CK(cudaMemcpy(m.data(), marks, m.size() * sizeof(m[0]), cudaMemcpyDeviceToHost));
        double part[3] = {0, 0, 0};
        for (int l = 0; l < NLINKS; l++)
            for (int k = 0; k < 3; k++) part[k] += (m[l * 4 + k + 1] - m[l * 4 + k]) * 1e-3;
        printf("   block 0: barrier %.1f us, x and routing %.1f us, rows %.1f us; first mark to last %.1f us\n", part[0],
               part[1], part[2], (m[NLINKS * 4 - 1] - m[0]) * 1e-3);
        if (!per_link) printf("   block 0 warp 0: %llu rows, waited %.1f us for them to land\n", m[NLINKS * 4 + 1], m[NLINKS * 4] / 1980.0);
        // The step's logits must not depend on how it ran: compare with the first case's.
        std::vector<float> out(LM_ROWS);
        CK(cudaMemcpy(out.data(), ys + ((NLINKS - 1) & 1) * YMAX, LM_ROWS * sizeof(float), cudaMemcpyDeviceToHost));
        if (ref.empty()) {
            ref = out;
            return;
        }
        int differ = 0;
        for (int i = 0; i < LM_ROWS; i++) differ += out[i] != ref[i];
        if (differ) printf("   !! %d of %d logits differ from the first case's\n", differ, LM_ROWS);
    };

    {
        links_for(false, 0);
        ref.clear();
        const int smem = 8 * 6 * 4096;
        CK(cudaFuncSetAttribute(step_kernel<8, 3, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        time_graph(st, "-- for scale: the lm_head alone, 1017 MB", 4096.0 * LM_ROWS / 1e6, [&](int) {
            step_kernel<8, 3, 3><<<sms, 256, smem, st>>>(NLINKS - 1, NLINKS, 0, arrivals, ys, marks, ll, epoch);
        });
    }
    for (int spin : {0, 4000}) {
        const double mb = links_for(false, spin);
        ref.clear();
        printf("-- the step, %.0f MB (at 4.64 TB/s: %.0f us), GDN step's math %d cycles per warp\n", mb, mb / 4.64, spin);
        if (tagged_only) {
            run("one kernel, lookahead across links", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2);
            run("one kernel, rows requested before the barrier", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 1);
            run("one kernel, lookahead, barrier over 8 counters", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 128);
            run("one kernel, tagged exchange, rows requested at the link", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 32);
            run("one kernel, tagged exchange, lookahead", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 32);
            run("one kernel, tagged exchange (8 words a thread at once), lookahead", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 32 | 64);
            run("one kernel, tagged exchange (8 words a thread at once), at the link", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 32 | 64);
            run("(timing only) lookahead, neither", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 4 | 8);
            continue;
        }
        run("a kernel per link", mb, step_kernel<8, 3, 3>, 8, 3, 3, true, 0);
        run("one kernel, rows requested after the barrier", mb, step_kernel<8, 3, 3>, 8, 3, 3, false, 0);
        run("one kernel, rows requested before the barrier", mb, step_kernel<8, 3, 3>, 8, 3, 3, false, 1);
        run("one kernel, lookahead across links", mb, step_kernel<8, 3, 3>, 8, 3, 3, false, 2);
        run("one kernel, lookahead across links", mb, step_kernel<8, 4, 2>, 8, 4, 2, false, 2);
        run("one kernel, lookahead across links", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2);
        run("one kernel, rows requested after the barrier", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 0);
        run("one kernel, rows requested before the barrier", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 1);
        run("a kernel per link", mb, step_kernel<8, 2, 2>, 8, 2, 2, true, 0);
        run("one kernel, lookahead across links", mb, step_kernel<4, 4, 4>, 4, 4, 4, false, 2);
        run("one kernel, lookahead across links", mb, step_kernel<12, 2, 2>, 12, 2, 2, false, 2);
        run("one kernel, lookahead across links", mb, step_kernel<8, 2, 1>, 8, 2, 1, false, 2);
        run("one kernel, lookahead across links", mb, step_kernel<8, 1, 1>, 8, 1, 1, false, 2);
        run("one kernel, lookahead across links", mb, step_kernel<16, 2, 1>, 16, 2, 1, false, 2);
        run("(timing only) lookahead, no x exchange", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 4);
        run("(timing only) lookahead, no barriers", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 8);
        run("(timing only) lookahead, neither", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 4 | 8);
        run("(timing only) lookahead, neither", mb, step_kernel<8, 3, 3>, 8, 3, 3, false, 2 | 4 | 8);
        run("(timing only) no dots, lookahead", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 16);
        run("(timing only) no dots, lookahead", mb, step_kernel<8, 3, 3>, 8, 3, 3, false, 2 | 16);
        run("(timing only) no dots, lookahead", mb, step_kernel<8, 4, 2>, 8, 4, 2, false, 2 | 16);
        run("(timing only) no dots, rows requested before the barrier", mb, step_kernel<8, 4, 2>, 8, 4, 2, false, 1 | 16);
        run("(timing only) no dots, lookahead, neither", mb, step_kernel<8, 2, 2>, 8, 2, 2, false, 2 | 4 | 8 | 16);
        run("(timing only) no dots, lookahead, neither", mb, step_kernel<8, 4, 2>, 8, 4, 2, false, 2 | 4 | 8 | 16);
    }
    links_for(true, 0);
    ref.clear();
    printf("-- the barriers alone (240 grid barriers, no rows)\n");
    run("one kernel", 0, step_kernel<8, 3, 3>, 8, 3, 3, false, 1);
    run("one kernel, tagged exchange", 0, step_kernel<8, 3, 3>, 8, 3, 3, false, 1 | 32);
    run("one kernel, tagged exchange (8 words a thread at once)", 0, step_kernel<8, 3, 3>, 8, 3, 3, false, 1 | 32 | 64);
    run("one kernel, tagged exchange (8 words a thread at once)", 0, step_kernel<8, 2, 2>, 8, 2, 2, false, 1 | 32 | 64);
    run("one kernel", 0, step_kernel<8, 2, 2>, 8, 2, 2, false, 1);
    run("one kernel, barrier over 8 counters", 0, step_kernel<8, 2, 2>, 8, 2, 2, false, 1 | 128);
    run("a kernel per link", 0, step_kernel<8, 3, 3>, 8, 3, 3, true, 0);
    CK(cudaDeviceSynchronize());
    return 0;
}
