// stream_probe: issue 41, item 1. Does a loader warp with a deep pool of TMA pages stream the
// decode step's weights *through* its ~240 grid-wide dependencies, where session 8's step probe
// (one ring of cp.async rows per warp, a grid barrier per link) added ~3.2 µs for each? Not part
// of solo: a standalone program for the GPU machine (bench/probes/stream/run.sh builds and runs it):
//   nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/stream_probe bench/probes/stream/stream_probe.cu
//   /tmp/stream_probe [--lm ROWS] [--quick]
// The step and its links: common.cuh. The old kernel: old_chain.cuh. The new one: pool.cuh.
// Cases, each timed as a CUDA graph of STEPS steps (µs a step: the median of RUNS graph runs after
// one warm-up, CUDA events), every correct one checked (below):
//   old-stream  the old kernel, lookahead, no barriers, no exchange (timing only): its stream alone
//   old-chain   the old kernel, lookahead, a grid barrier and the exchange at every link
//   stream      the new kernel with no dependencies (no waits, signals or exchange; timing only)
//   chain       the new kernel with its 240 dependencies
// for every pool shape of the sweep (page 8 / 16 KB × ring 8 / 12 / 14 pages × cap 2 / 4 / 6;
// 14 × 16 KB does not fit beside x, so the most that fits runs instead), then side pages (K of
// the most that fit hold the next layer's first pages, issued while the loader waits for the
// router), then diagnostics on the best shape: experts fixed in advance (the loader never waits
// on the router; timing only), the L2 evict-first hint, and session 8's full 6.10 GB step.
// The sweep's columns:
//   page, pages (ring + side), cap (pages in flight at most), poolKB
//   stream, chain    µs a step (median); GB/s: the step's bytes / chain
//   gap              chain - stream (the dependencies' cost); vs old-s: chain - old-stream
//   pass             gap < 350 µs, stream no slower than old-stream (+1 %), check ok
//   check            ok: logits equal old-chain's bit for bit and the host's dot; MISMATCH; HUNG
//   wait us          mean time one thread of a CTA polled for the link before (per dependency)
//   KBlnd0, KBlanded landed-but-unused weight bytes per SM when that wait began / ended (mean)
//   KBissued         ring bytes issued for links not begun, landed or not, when it ended
//   ld-full, ld-cap, ld-rte   µs a step (mean over SMs) the loader waited for a free page, for
//                    the arrival cap, for the router (from an extra untimed step with samples on)
// Checks: every correct case's lm_head outputs must equal old-chain's bit for bit, and 64 of them
// must match a double-precision dot on the host from the final routed-down outputs. Link 0's input
// changes with every step, so a link that read its input too early would differ.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "old_chain.cuh"
#include "pool.cuh"

constexpr int STEPS = 20;  // steps per graph (a step reads 5.4 GB: every step is cold in L2)
constexpr int RUNS = 7;

__global__ void clock_rate(unsigned long long* out) {  // SM cycles over 5 ms of globaltimer
    unsigned long long g0, g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    const long long c0 = clock64();
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    while (g1 - g0 < 5000000);
    out[0] = clock64() - c0, out[1] = g1 - g0;
}

struct Timing {
    double median = 0, best = 0;
    bool ok = true;
};

// Captures launch() STEPS times into a graph; one warm-up run, then RUNS timed ones.
template <class Launch>
Timing time_graph(cudaStream_t st, Launch launch) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < STEPS; i++) launch();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<double> us;
    for (int rep = 0; rep < RUNS; rep++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        us.push_back(ms * 1000.0 / STEPS);
    }
    std::sort(us.begin(), us.end());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    Timing t;
    t.median = us[us.size() / 2], t.best = us[0];
    return t;
}

struct Device {
    int sms = 0;
    double mhz = 0;  // SM clock under load, measured
    bf16 *stat = nullptr, *pool = nullptr;
    float *ys = nullptr, *logits = nullptr;
    unsigned *counters = nullptr, *epoch = nullptr, *link_stats = nullptr;
    unsigned long long *arrivals = nullptr, *cta_stats = nullptr;
    int* abort = nullptr;
    cudaStream_t st;
};

// The step's links for an lm_head of `lm` rows; its bytes.
double set_links(const Device& d, int lm) {
    std::vector<Link> links(NLINKS);
    const bf16* w = d.stat;
    double bytes = 0;
    for (int layer = 0; layer < LAYERS; layer++)
        for (int k = 0; k < PER_LAYER; k++) {
            Link& L = links[layer * PER_LAYER + k];
            L.w = w;
            L.rows = LAYER_ROWS[k];
            L.routed = LAYER_ROUTED[k];
            L.pool = d.pool + (long long)layer * EXPERTS * EXPERT_ROWS * ROW;
            L.logits = k >= ROUTER ? d.logits + layer * 256 : nullptr;
            w += (long long)L.rows * ROW;
            bytes += (double)ROW_BYTES * (L.rows + routed_rows(L.routed));
        }
    links[NLINKS - 1] = {w, lm, 0, 0, nullptr, nullptr};
    bytes += (double)ROW_BYTES * lm;
    for (int l = 0; l < NLINKS; l++) {
        const Link& P = links[l > 0 ? l - 1 : 0];
        links[l].in_rows = l == 0 ? ROW : P.rows + routed_rows(P.routed);
    }
    CK(cudaMemcpyToSymbol(c_links, links.data(), sizeof(Link) * NLINKS));
    return bytes;
}

// The lm_head's outputs after a case; compared with the reference, and 64 of them with the host.
struct Check {
    std::vector<float> ref;
    int lm = 0;
    const Device* d;
    std::string run(const char* what) {
        std::vector<float> out(lm), prev(4096);
        CK(cudaMemcpy(out.data(), d->ys + ((NLINKS - 1) & 1) * YMAX, lm * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(prev.data(), d->ys + ((NLINKS - 2) & 1) * YMAX, 4096 * sizeof(float), cudaMemcpyDeviceToHost));
        // the host's dot of 64 rows with x from the routed down's outputs (the lm_head's in_rows: 4,096)
        std::vector<double> x(ROW);
        for (int c = 0; c < ROW; c++) x[c] = prev[c % 4096] / (1.0 + std::fabs(prev[c % 4096]));
        long long layer_rows = 0;
        for (int r : LAYER_ROWS) layer_rows += r;
        const bf16* lm_w = d->stat + LAYERS * layer_rows * ROW;  // the lm_head follows the layers' static rows
        std::vector<bf16> row(ROW);
        int bad_host = 0;
        for (int k = 0; k < 64; k++) {
            const long long r = (long long)k * (lm / 64) + k % 7;
            CK(cudaMemcpy(row.data(), lm_w + r * ROW, ROW_BYTES, cudaMemcpyDeviceToHost));
            double dot = 0, mag = 0;
            for (int c = 0; c < ROW; c++) {
                const double w = (double)__bfloat162float(row[c]);
                dot += w * x[c], mag += std::fabs(w * x[c]);
            }
            if (!(std::fabs(dot - out[r]) <= 1e-4 * mag + 1e-6)) bad_host++;
        }
        double sum = 0;
        for (float v : out) sum += v;
        char s[200];
        if (ref.empty()) {
            ref = out;
            snprintf(s, sizeof s, "reference (sum %.6g)%s", sum, bad_host ? ", HOST MISMATCH" : ", host ok");
            if (bad_host) printf("   !! %s: %d of 64 lm_head outputs differ from the host's dot\n", what, bad_host);
            return s;
        }
        int differ = 0;
        for (int i = 0; i < lm; i++) differ += memcmp(&out[i], &ref[i], 4) != 0;
        if (differ || bad_host)
            printf("   !! %s: %d of %d logits differ from the reference, %d of 64 from the host's dot\n", what, differ, lm,
                   bad_host);
        snprintf(s, sizeof s, "%s", differ || bad_host ? "MISMATCH" : "ok");
        return s;
    }
};

// One old-kernel case (8 warps, S 2 R 2: session 8's best shape).
Timing run_old(Device& d, int mode) {
    const int smem = 8 * (2 + 2) * ROW_BYTES;
    CK(cudaFuncSetAttribute(old_step_kernel<8, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaMemset(d.epoch, 0, 4));
    Timing t = time_graph(d.st, [&] {
        CK(cudaMemsetAsync(d.arrivals, 0, 8, d.st));
        old_step_kernel<8, 2, 2><<<d.sms, 256, smem, d.st>>>(mode, d.arrivals, d.ys, d.epoch);
    });
    CK(cudaGetLastError());
    return t;
}

struct PoolStats {
    double wait_us = 0, landed_start_kb = 0, landed_kb = 0, issued_kb = 0;  // per dependency and SM, mean
    double full_us = 0, cap_us = 0, route_us = 0, starved_us = 0;           // per step and SM, mean
    double kind_wait[PER_LAYER + 1] = {}, kind_landed[PER_LAYER + 1] = {};  // by the link waited for
};

int pool_smem(const PoolCfg& c) { return std::max((c.npages + c.side) * c.page_bytes, 120 * 1024); }  // > half an SM: one CTA each

void pool_launch(Device& d, const PoolCfg& c) {
    CK(cudaMemsetAsync(d.counters, 0, NLINKS * CTR_STRIDE * 4, d.st));
    PoolArgs a{d.ys, d.counters, d.epoch, d.abort, d.link_stats, d.cta_stats};
    pool_kernel<<<d.sms, POOL_THREADS, pool_smem(c), d.st>>>(c, a);
}

bool take_abort(Device& d) {
    int ab = 0;
    CK(cudaMemcpy(&ab, d.abort, 4, cudaMemcpyDeviceToHost));
    if (ab) CK(cudaMemset(d.abort, 0, 4));
    return ab != 0;
}

Timing run_pool(Device& d, PoolCfg c) {
    CK(cudaFuncSetAttribute(pool_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, pool_smem(c)));
    CK(cudaMemset(d.epoch, 0, 4));
    Timing t = time_graph(d.st, [&] { pool_launch(d, c); });
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (take_abort(d)) t.ok = false;
    return t;
}

// One untimed step with the samples on (after the case's check: it moves the epoch on).
PoolStats sample_pool(Device& d, PoolCfg c) {
    c.flags |= STATS;
    const int G = d.sms;
    CK(cudaMemset(d.link_stats, 0, (size_t)G * NLINKS * 4 * 4));
    pool_launch(d, c);
    CK(cudaDeviceSynchronize());
    PoolStats p;
    if (take_abort(d)) return p;
    std::vector<unsigned> ls((size_t)G * NLINKS * 4);
    std::vector<unsigned long long> cs((size_t)G * 4);
    CK(cudaMemcpy(ls.data(), d.link_stats, ls.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(cs.data(), d.cta_stats, cs.size() * 8, cudaMemcpyDeviceToHost));
    const double kb = c.page_bytes / 1024.0, n = (double)G * (NLINKS - 1);
    double kind_n[PER_LAYER + 1] = {};
    for (int b = 0; b < G; b++) {
        for (int l = 1; l < NLINKS; l++) {
            const unsigned* s = &ls[((size_t)b * NLINKS + l) * 4];
            p.wait_us += s[0] / d.mhz / n;
            p.landed_start_kb += s[1] * kb / n;
            p.landed_kb += s[2] * kb / n;
            p.issued_kb += s[3] * kb / n;
            const int k = l == NLINKS - 1 ? PER_LAYER : l % PER_LAYER;  // the link that waits
            p.kind_wait[k] += s[0] / d.mhz, p.kind_landed[k] += s[2] * kb, kind_n[k] += 1;
        }
        p.full_us += cs[b * 4 + 0] / d.mhz / G;
        p.cap_us += cs[b * 4 + 1] / d.mhz / G;
        p.route_us += cs[b * 4 + 2] / d.mhz / G;
        p.starved_us += cs[b * 4 + 3] / d.mhz / G;
    }
    for (int k = 0; k <= PER_LAYER; k++) p.kind_wait[k] /= kind_n[k], p.kind_landed[k] /= kind_n[k];
    return p;
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out at once (through a pipe, and if killed)
    int lm = 71936;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lm") && i + 1 < argc) lm = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else {
            printf("usage: stream_probe [--lm ROWS (4..%d, a multiple of 4)] [--quick]\n", LM_MAX);
            return 2;
        }
    }
    if (lm < 4 || lm > LM_MAX || lm % 4) {
        printf("--lm %d: want a multiple of 4 in 4..%d\n", lm, LM_MAX);
        return 2;
    }
    Device d;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0));
    int smem_optin = 0;
    CK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    {
        unsigned long long* m;
        CK(cudaMalloc(&m, 16));
        clock_rate<<<1, 1>>>(m);
        unsigned long long h[2];
        CK(cudaMemcpy(h, m, 16, cudaMemcpyDeviceToHost));
        d.mhz = (double)h[0] / (double)h[1] * 1000.0;
        CK(cudaFree(m));
    }
    printf("GPU %s, %d SMs, SM clock %.0f MHz (measured), L2 %d MB, %d KB shared memory a block at most\n", prop.name,
           d.sms, d.mhz, prop.l2CacheSize >> 20, smem_optin / 1024);

    long long static_rows = LM_MAX;
    for (int r : LAYER_ROWS) static_rows += (long long)r * LAYERS;
    const long long pool_rows = (long long)LAYERS * EXPERTS * EXPERT_ROWS;
    CK(cudaMalloc(&d.stat, static_rows * ROW_BYTES));
    CK(cudaMalloc(&d.pool, pool_rows * ROW_BYTES));
    fill<<<4 * d.sms, 1024>>>(d.stat, static_rows * ROW);
    fill<<<4 * d.sms, 1024>>>(d.pool, pool_rows * ROW);
    CK(cudaGetLastError());
    CK(cudaMalloc(&d.ys, 2 * YMAX * sizeof(float)));
    CK(cudaMemset(d.ys, 0, 2 * YMAX * sizeof(float)));
    CK(cudaMalloc(&d.logits, LAYERS * 256 * sizeof(float)));
    CK(cudaMemset(d.logits, 0, LAYERS * 256 * sizeof(float)));
    CK(cudaMalloc(&d.arrivals, 128 * 8));
    CK(cudaMalloc(&d.counters, NLINKS * CTR_STRIDE * 4));
    CK(cudaMalloc(&d.epoch, 4));
    CK(cudaMalloc(&d.abort, 4));
    CK(cudaMemset(d.abort, 0, 4));
    CK(cudaMalloc(&d.link_stats, (size_t)d.sms * NLINKS * 4 * 4));
    CK(cudaMalloc(&d.cta_stats, (size_t)d.sms * 4 * 8));
    CK(cudaStreamCreateWithFlags(&d.st, cudaStreamNonBlocking));
    CK(cudaDeviceSynchronize());
    printf("weights allocated: %.2f GB (static %.2f, experts %.2f)\n", (static_rows + pool_rows) * 4096e-9,
           static_rows * 4096e-9, pool_rows * 4096e-9);

    // The steps to run: the 5.38 GB one (--lm), and session 8's 6.10 GB one for a diagnostic.
    const double bytes = set_links(d, lm);
    printf("the step: %.0f MB over %d dependencies (lm_head %d rows); %d steps a graph, median of %d runs\n\n", bytes / 1e6,
           NLINKS - 1, lm, STEPS, RUNS);
    Check check;
    check.lm = lm, check.d = &d;
    auto gbs = [&](double us) { return bytes / us / 1e3; };

    printf("%-52s %9s %9s %8s  %s\n", "case", "median us", "best us", "GB/s", "check");
    const Timing old_chain = run_old(d, 2);
    printf("%-52s %9.1f %9.1f %8.0f  %s\n", "old-chain (8 warps S2 R2, grid barrier per link)", old_chain.median,
           old_chain.best, gbs(old_chain.median), check.run("old-chain").c_str());
    const Timing old_stream = run_old(d, 2 | 4 | 8);
    printf("%-52s %9.1f %9.1f %8.0f  %s\n", "old-stream (no barriers, no exchange)", old_stream.median, old_stream.best,
           gbs(old_stream.median), "timing only");
    const double old_gap = old_chain.median - old_stream.median;
    printf("old gap (old-chain - old-stream): %.1f us, %.2f us a dependency\n\n", old_gap, old_gap / (NLINKS - 1));

    // The sweep. Columns: the pool's shape (ring pages + side pages); both times; the gaps; the
    // check; then the pool sampled at each dependency (means over SMs and the 240 waits): the
    // wait, the landed-but-unused bytes when the wait began and when it ended, the ring's issued
    // bytes of later links at its end; and per step and SM, the loader's time blocked on a free
    // page, on the cap, on the router.
    printf("%5s %6s %4s %6s | %9s %9s %8s | %8s %8s %6s | %-8s | %7s %7s %7s %7s | %7s %7s %7s\n", "page", "pages", "cap",
           "poolKB", "stream", "chain", "GB/s", "gap", "vs old-s", "pass", "check", "wait us", "KBlnd0", "KBlanded",
           "KBissued", "ld-full", "ld-cap", "ld-rte");
    struct Row {
        PoolCfg c;
        Timing stream, chain;
        PoolStats p;
    };
    std::vector<Row> rows;
    auto with = [](PoolCfg c, int flags) {
        c.flags = flags;
        return c;
    };
    auto fits = [&](const PoolCfg& c) { return (c.npages + c.side) * c.page_bytes + 9 * 1024 <= smem_optin; };
    // (the cap must stay below the ring's depth: the loader tells the landing of page t - cap by its
    // barrier's phase, which is ambiguous once that page's slot has been reused)
    auto case_row = [&](const PoolCfg& c) {
        if (c.cap >= c.npages || c.cap > 8 || c.side > 8 || c.npages + c.side > MAX_PAGES) {
            printf("%4dK %4d+%d %4d: not a shape the kernel takes (cap < pages, cap and side <= 8)\n", c.page_bytes / 1024,
                   c.npages, c.side, c.cap);
            return;
        }
        Row r{c, {}, {}, {}};
        r.stream = run_pool(d, with(c, NODEPS));
        r.chain = run_pool(d, c);
        const std::string ck = r.chain.ok ? check.run("chain") : "HUNG";
        if (r.chain.ok) r.p = sample_pool(d, c);
        const double gap = r.chain.median - r.stream.median, vs_old = r.chain.median - old_stream.median;
        const bool pass = r.chain.ok && r.stream.ok && gap < 350 && r.stream.median <= old_stream.median * 1.01 && ck == "ok";
        char shape[16];
        snprintf(shape, sizeof shape, c.side ? "%d+%d" : "%d", c.npages, c.side);
        printf("%4dK %6s %4d %6d | %9.1f %9.1f %8.0f | %8.1f %8.1f %6s | %-8s | %7.2f %7.1f %7.1f %7.1f | %7.1f %7.1f %7.1f%s\n",
               c.page_bytes / 1024, shape, c.cap, (c.npages + c.side) * c.page_bytes / 1024, r.stream.median, r.chain.median,
               gbs(r.chain.median), gap, vs_old, pass ? "PASS" : "fail", ck.c_str(), r.p.wait_us, r.p.landed_start_kb,
               r.p.landed_kb, r.p.issued_kb, r.p.full_us, r.p.cap_us, r.p.route_us, r.stream.ok ? "" : "  (stream HUNG)");
        fflush(stdout);
        rows.push_back(r);
    };
    const std::vector<int> page_kb = {8, 16}, depths = {8, 12, 14}, caps = {2, 4, 6};
    for (int pk : page_kb)
        for (int np : depths)
            for (int cap : caps) {
                if (quick && !(pk == 16 && cap == 4)) continue;
                PoolCfg c{pk * 1024, np, cap, 0, 0};
                if (!fits(c)) {
                    const int most = (smem_optin - 9 * 1024) / c.page_bytes;
                    const bool instead = np == depths.back() && most > depths[depths.size() - 2];
                    printf("%4dK %6d %4d %6d | does not fit (pool + 9 KB of x and barriers > %d KB)%s\n", pk, np, cap, np * pk,
                           smem_optin / 1024, instead ? "; the most that fits instead:" : "");
                    if (!instead) continue;
                    c.npages = most;
                }
                case_row(c);
            }
    if (rows.empty()) return 1;
    // Side pages: the most pages that fit, K of them for the next layer's first link (filled
    // while the loader waits for the router), at each page size's best cap.
    for (int pk : page_kb) {
        const Row* b = nullptr;
        for (const Row& r : rows)
            if (r.c.page_bytes == pk * 1024 && r.chain.ok && (!b || r.chain.median < b->chain.median)) b = &r;
        if (!b) continue;
        const int most = (smem_optin - 9 * 1024) / (pk * 1024), cap = b->c.cap;
        for (int k : {2, 4, pk == 8 ? 8 : 6}) case_row({pk * 1024, most - k, cap, 0, k});
    }

    // The best chain's pool, by the link that waits (0: in-projection waits for the layer before's
    // routed down ... 6: the lm_head).
    const Row* best = &rows[0];
    for (const Row& r : rows)
        if (r.chain.ok && r.chain.median < best->chain.median) best = &r;
    const PoolCfg bc = best->c;
    printf("\nbest chain: %d KB pages, %d + %d side pages, cap %d: %.1f us; per dependency, by the link that waits:\n",
           bc.page_bytes / 1024, bc.npages, bc.side, bc.cap, best->chain.median);
    const char* kinds[PER_LAYER + 1] = {"in-proj", "GDN", "W_o", "router", "sh-down+routed-gu", "routed-down", "lm_head"};
    for (int k = 0; k <= PER_LAYER; k++)
        printf("   %-18s wait %6.2f us, landed %6.1f KB per SM when it ends\n", kinds[k], best->p.kind_wait[k], best->p.kind_landed[k]);
    printf("   compute warp 0 waited %.1f us a step for pages to land\n", best->p.starved_us);

    // Diagnostics on the best shape.
    printf("\ndiagnostics on the best shape (chain, us a step):\n");
    {
        const Timing t = run_pool(d, with(bc, FIXED_ROUTE));
        printf("   experts fixed in advance (loader never waits on the router; timing only): %.1f (%+.1f)%s\n", t.median,
               t.median - best->chain.median, t.ok ? "" : " HUNG");
    }
    {
        const Timing t = run_pool(d, with(bc, EVICT_FIRST));
        const std::string ck = t.ok ? check.run("evict-first") : "HUNG";
        const Timing s = run_pool(d, with(bc, EVICT_FIRST | NODEPS));
        printf("   weights with an L2 evict-first hint: chain %.1f (%+.1f), stream %.1f, check %s\n", t.median,
               t.median - best->chain.median, s.median, ck.c_str());
    }
    if (!quick && lm != LM_MAX) {
        const double b6 = set_links(d, LM_MAX);
        const Timing oc = run_old(d, 2), os = run_old(d, 2 | 4 | 8);
        const Timing s = run_pool(d, with(bc, NODEPS)), c = run_pool(d, bc);
        printf("   session 8's %.0f MB step (full lm_head): old-chain %.1f, old-stream %.1f (gap %.1f; session 8: 2,286 - "
               "1,511); stream %.1f, chain %.1f (gap %.1f)%s\n",
               b6 / 1e6, oc.median, os.median, oc.median - os.median, s.median, c.median, c.median - s.median,
               c.ok ? "" : " HUNG");
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
