// The design under test (issue 41): one CTA per SM, warp-specialised.
// - One loader warp (one lane) only issues TMA bulk copies (cp.async.bulk, global → shared) into
//   a ring of N fixed pages, one "full" mbarrier per page (expect_tx + complete_tx) and one
//   "empty" mbarrier per page (the consuming warp arrives). It walks the CTA's pages of every
//   link in order and never waits on a dependency: only on a free page, on the arrival cap (page
//   k + cap is issued once page k has landed, so at most `cap` pages are in flight while landed
//   pages pile up) and, for a layer's routed rows, on the router link (their addresses are the
//   router's top 8: the one dependency the data forces on it).
// - NC compute warps. At a link: one thread polls the link before's counter (ld.acquire), then a
//   named barrier of the compute warps only (bar.sync 1), x staged from L2 into shared memory,
//   the named barrier again; each warp then dots whole pages (the CTA's pages of the link taken
//   round-robin), lane 0 stores the outputs, frees the page, and when the warp is through the
//   link it signals: __threadfence, atomicAdd on the link's counter (every warp of every CTA
//   adds one: the link is complete at gridDim.x · NC). No __syncthreads, no grid barrier.
// Pages of a link go round-robin over the CTAs, starting where the link before ended.
#pragma once
#include <cstdint>

#include "common.cuh"

constexpr int NC = 8;                  // compute warps
constexpr int POOL_THREADS = (NC + 1) * 32;
constexpr int MAX_PAGES = 32;
constexpr int CTR_STRIDE = 32;         // u32 words between two links' counters (128 bytes)
constexpr long long SPIN_LIMIT = 1000000000LL;  // cycles (~0.5 s): a wait this long is a probe bug

enum PoolFlags {
    NODEPS = 1,      // the stream alone: no waits, no signals, no exchange (timing only)
    STATS = 2,       // sample the pool at each dependency (a separate, untimed launch)
    FIXED_ROUTE = 4, // the loader takes experts 0..7 without waiting for the router (timing only)
    EVICT_FIRST = 8, // weights loaded with an L2 evict-first policy
};

struct PoolCfg {
    int page_bytes;  // 8 or 16 KB: 2 or 4 rows
    int npages;      // ring depth N
    int cap;         // pages in flight at most (≤ 8)
    int flags;
    int side;        // side pages (≤ 8), beyond the ring's npages
};

struct PoolArgs {
    float* ys;                      // [2][YMAX], link l writes ys[l & 1]
    unsigned* counters;             // [NLINKS * CTR_STRIDE], zero at launch
    unsigned* epoch;                // link 0's input; CTA 0 adds one at the end
    int* abort;                     // set by any wait past SPIN_LIMIT; every wait then gives up
    unsigned* link_stats;           // STATS: [gridDim.x][NLINKS][4]
    unsigned long long* cta_stats;  // STATS: [gridDim.x][4]
};

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t* b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}
// Whether the phase of `parity` has completed (non-blocking).
__device__ __forceinline__ bool mbar_test(uint64_t* b, unsigned parity) {
    unsigned ok;
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(ok)
        : "r"(smem_addr(b)), "r"(parity)
        : "memory");
    return ok;
}
__device__ __forceinline__ bool mbar_try(uint64_t* b, unsigned parity) {
    unsigned ok;
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(ok)
        : "r"(smem_addr(b)), "r"(parity)
        : "memory");
    return ok;
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
__device__ __forceinline__ void bulk_load_hint(void* dst, const void* src, unsigned bytes, uint64_t* bar, uint64_t policy) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
        : "memory");
}
__device__ __forceinline__ uint64_t evict_first_policy() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void compute_bar() { asm volatile("bar.sync 1, %0;" ::"n"(NC * 32) : "memory"); }

// Spins until done() or SPIN_LIMIT cycles (then sets *abort) or another wait gave up; whether done.
template <class F>
__device__ __forceinline__ bool spin(F done, int* abort) {
    if (done()) return true;
    const long long t0 = clock64();
    for (unsigned i = 1;; i++) {
        if (done()) return true;
        if ((i & 255) == 0) {
            if (*(volatile int*)abort) return false;
            if (clock64() - t0 > SPIN_LIMIT) {
                atomicExch(abort, 1);
                return false;
            }
        }
    }
}

// The CTA's share of a link: pages q0, q0 + G, ... < P; the link's first ps pages are its static
// rows (rpp a page, the last maybe fewer), the rest its routed rows. off: the pages of all links
// before (a link's first page goes to the CTA after the one that took the link before's last).
struct Share {
    int ps, P, q0, n;
    __device__ Share(const Link& L, int rpp, int off) {
        const int G = gridDim.x;
        ps = (L.rows + rpp - 1) / rpp;
        P = ps + routed_rows(L.routed) / rpp;
        q0 = ((int)blockIdx.x - off % G + G) % G;
        n = q0 < P ? (P - q0 + G - 1) / G : 0;
    }
};

// With side pages (cfg.side = K > 0): the first min(K, n) pages of the CTA's share of each
// layer's first link (and of the lm_head) go to K side pages outside the ring, issued while the
// layer before waits for its router, so that the pool fills while the loader cannot go on.
__device__ __forceinline__ bool side_link(int l) { return l > 0 && l % PER_LAYER == 0; }

__device__ void pool_loader(const PoolCfg& cfg, const PoolArgs& a, unsigned char* pages, uint64_t* full, uint64_t* empty,
                            int* issued) {
    const int N = cfg.npages, K = cfg.side, rpp = cfg.page_bytes / ROW_BYTES;
    const unsigned target = gridDim.x * NC;
    const uint64_t policy = evict_first_policy();
    // The arrival cap: the barriers (and phases) of the last 8 pages issued, ring and side alike;
    // page t waits for page t - cap to land.
    uint64_t* hist_bar[8] = {};
    unsigned hist_par[8] = {};
    int t = 0;
    int side_use[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // rounds each side page has been issued
    int experts[8];
    long long t_full = 0, t_cap = 0, t_route = 0;
    // Waits for the slot (free) and the cap, then copies `rows` rows from src into page `page`
    // (ring pages 0..N-1, side pages N..N+K-1) whose barriers' phase is `phase`.
    auto issue = [&](int page, int phase, const bf16* src, int rows) -> bool {
        long long t0 = clock64();
        if (phase > 0 && !spin([&] { return mbar_try(&empty[page], (phase - 1) & 1); }, a.abort)) return false;
        long long t1 = clock64();
        t_full += t1 - t0;
        if (t >= cfg.cap) {
            uint64_t* b = hist_bar[(t - cfg.cap) & 7];
            const unsigned par = hist_par[(t - cfg.cap) & 7];
            if (!spin([&] { return mbar_try(b, par); }, a.abort)) return false;
        }
        t_cap += clock64() - t1;
        mbar_expect_tx(&full[page], rows * ROW_BYTES);
        unsigned char* dst = pages + (size_t)page * cfg.page_bytes;
        if (cfg.flags & EVICT_FIRST) bulk_load_hint(dst, src, rows * ROW_BYTES, &full[page], policy);
        else bulk_load(dst, src, rows * ROW_BYTES, &full[page]);
        hist_bar[t & 7] = &full[page], hist_par[t & 7] = phase & 1;
        t++;
        return true;
    };
    // Issues the side pages of link ln (the next layer's first link) whose share begins at off.
    auto issue_side = [&](int ln, int off) -> bool {
        const Link& L = c_links[ln];
        const Share sh(L, rpp, off);
        for (int i = 0; i < min(K, sh.n); i++) {
            const int q = sh.q0 + i * gridDim.x;
            if (!issue(N + i, side_use[i]++, L.w + (long long)q * rpp * ROW, min(rpp, L.rows - q * rpp))) return false;
        }
        return true;
    };
    int seq = 0, off = 0, known = -1;
    for (int l = 0; l < NLINKS; l++) {
        const Link& L = c_links[l];
        const Share sh(L, rpp, off);
        const int j0 = K > 0 && side_link(l) ? min(K, sh.n) : 0;  // those went to the side pages
        bool side_done = !(K > 0 && L.routed == 1);
        for (int j = j0, q = sh.q0 + j0 * gridDim.x; j <= sh.n; j++, q += gridDim.x) {
            if (!side_done && (j == sh.n || q >= sh.ps)) {  // the first routed page (or the link's end)
                int off_next = off;
                for (int k = l; k < (l / PER_LAYER + 1) * PER_LAYER; k++) off_next += Share(c_links[k], rpp, 0).P;
                if (!issue_side((l / PER_LAYER + 1) * PER_LAYER, off_next)) return;
                side_done = true;
            }
            if (j == sh.n) break;
            const bf16* src;
            int rows;
            if (q < sh.ps) {
                src = L.w + (long long)q * rpp * ROW;
                rows = min(rpp, L.rows - q * rpp);
            } else {
                const int layer = l / PER_LAYER;
                if (known != layer) {  // the router's top 8: wait for its link, as every consumer of it does
                    const long long t0 = clock64();
                    const unsigned* ctr = a.counters + (layer * PER_LAYER + ROUTER) * CTR_STRIDE;
                    if (!(cfg.flags & (NODEPS | FIXED_ROUTE)) && !spin([&] { return ld_acquire(ctr) >= target; }, a.abort)) return;
                    float v[16];
                    for (int i = 0; i < 16; i++) v[i] = __ldcg(L.logits + i);
                    if (cfg.flags & FIXED_ROUTE)
                        for (int i = 0; i < 8; i++) experts[i] = i;
                    else
                        top8_of16(v, experts);
                    known = layer;
                    t_route += clock64() - t0;
                }
                src = L.pool + routed_row(L.routed, experts, (q - sh.ps) * rpp) * ROW;
                rows = rpp;
            }
            if (!issue(seq % N, seq / N, src, rows)) return;
            seq++;
            *(volatile int*)issued = seq;
        }
        off += sh.P;
    }
    if (cfg.flags & STATS) {
        unsigned long long* s = a.cta_stats + blockIdx.x * 4;
        s[0] = t_full, s[1] = t_cap, s[2] = t_route;
    }
}

// Landed, unconsumed pages: ring pages seq .. issued - 1 (they belong to links not begun) and side
// pages of the round not yet consumed.
__device__ int landed(uint64_t* full, int seq, int issued, int N, int K, const int* side_use) {
    int c = 0;
    for (int s = seq; s < issued; s++) c += mbar_test(&full[s % N], (s / N) & 1);
    for (int i = 0; i < K; i++) c += mbar_test(&full[N + i], side_use[i] & 1);
    return c;
}

__device__ void pool_consumer(const PoolCfg& cfg, const PoolArgs& a, unsigned char* pages, uint64_t* full, uint64_t* empty,
                              const int* issued, float* xs, int* dead) {
    const int N = cfg.npages, K = cfg.side, rpp = cfg.page_bytes / ROW_BYTES;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool deps = !(cfg.flags & NODEPS), stats = cfg.flags & STATS;
    const unsigned target = gridDim.x * NC;
    const unsigned ep = *(volatile unsigned*)a.epoch;
    float x[64];
    int seq = 0, off = 0, turn = 0;  // ring pages used; rows of all pages (whose warp's turn)
    int side_use[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long long starved = 0;  // warp 0's cycles waiting for pages to land
    for (int l = 0; l < NLINKS; l++) {
        const Link& L = c_links[l];
        const Share sh(L, rpp, off);
        if (l == 0 || deps) {
            if (l > 0 && threadIdx.x == 0) {
                const unsigned* ctr = a.counters + (l - 1) * CTR_STRIDE;
                int at_start = 0;
                if (stats) at_start = landed(full, seq, *(volatile int*)issued, N, K, side_use);
                const long long t0 = clock64();
                if (!spin([&] { return ld_acquire(ctr) >= target; }, a.abort)) *dead = 1;
                if (stats) {
                    const long long waited = clock64() - t0;
                    const int is = *(volatile int*)issued;
                    unsigned* s = a.link_stats + ((size_t)blockIdx.x * NLINKS + l) * 4;
                    s[0] = (unsigned)waited, s[1] = at_start, s[2] = landed(full, seq, is, N, K, side_use), s[3] = is - seq;
                }
            }
            __syncwarp();  // warp 0 whole again after its lane 0 polled
            compute_bar();
            if (*(volatile int*)dead) return;  // every compute thread, after the same barrier
            const float* yprev = a.ys + ((l - 1) & 1) * YMAX;
            for (int i = threadIdx.x; i < ROW; i += NC * 32) xs[i] = softsign(l == 0 ? x0_of(ep) : __ldcg(yprev + i % L.in_rows));
            compute_bar();
            load_x(x, xs, lane);
        }
        float* y = a.ys + (l & 1) * YMAX;
        const int j0 = K > 0 && side_link(l) ? min(K, sh.n) : 0;  // pages 0 .. j0 - 1 are side pages
        for (int j = 0; j < sh.n; j++) {
            // Row i of the page is warp (turn + j · rpp + i) % NC's: a link of one page a CTA still
            // has its rows dotted at once, by rpp warps.
            const int first = (turn + j * rpp) % NC, i = (warp - first + NC) % NC;
            if (i >= rpp) continue;
            const int page = j < j0 ? N + j : (seq + j - j0) % N;
            const int phase = j < j0 ? side_use[j] : (seq + j - j0) / N;
            const int q = sh.q0 + j * gridDim.x;
            const long long t0 = clock64();
            const bool ok = spin([&] { return mbar_try(&full[page], phase & 1); }, a.abort);
            if (warp == 0) starved += clock64() - t0;
            const bf16* w = reinterpret_cast<const bf16*>(pages + (size_t)page * cfg.page_bytes);
            const int base = q < sh.ps ? q * rpp : L.rows + (q - sh.ps) * rpp;
            const int rows = q < sh.ps ? min(rpp, L.rows - base) : rpp;  // a short last page: its missing rows' warps only free it
            if (ok && i < rows) {
                const float acc = slot_dot(w + i * ROW, x, lane);
                if (lane == 0) {
                    y[base + i] = acc;
                    if (L.logits && !L.routed && base + i < 256) L.logits[base + i] = acc;
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[page]);  // the page is free once all rpp of its warps arrive
        }
        for (int i = 0; i < j0; i++) side_use[i]++;
        seq += sh.n - j0;
        turn += sh.n * rpp;
        off += sh.P;
        if (deps) {
            __syncwarp();
            if (lane == 0) {
                __threadfence();
                atomicAdd(a.counters + l * CTR_STRIDE, 1u);
            }
        }
    }
    if (stats && threadIdx.x == 0) a.cta_stats[blockIdx.x * 4 + 3] = starved;
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(a.epoch, 1u);
}

// Dynamic shared memory: the pages ((cfg.npages + cfg.side) × cfg.page_bytes, 128-aligned).
__global__ void __launch_bounds__(POOL_THREADS, 1) pool_kernel(PoolCfg cfg, PoolArgs a) {
    extern __shared__ __align__(128) unsigned char pages[];
    __shared__ __align__(8) uint64_t full[MAX_PAGES], empty[MAX_PAGES];
    __shared__ __align__(16) float xs[ROW];
    __shared__ int issued, dead;
    if (*(volatile int*)a.abort) return;  // a case that hung once is not run again
    if (threadIdx.x == 0) {
        for (int i = 0; i < cfg.npages + cfg.side; i++) mbar_init(&full[i], 1), mbar_init(&empty[i], cfg.page_bytes / ROW_BYTES);
        issued = 0, dead = 0;
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // the only one: from here the loader and the compute warps never meet
    if (threadIdx.x >> 5 == NC) {
        if ((threadIdx.x & 31) == 0) pool_loader(cfg, a, pages, full, empty, &issued);
        return;
    }
    pool_consumer(cfg, a, pages, full, empty, &issued, xs, &dead);
}
