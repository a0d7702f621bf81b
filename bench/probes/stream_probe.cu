// stream_probe: how fast short weight streams run on this GPU, by size, access pattern and
// L2 prefetching (bench/NOTES.md, issue 5 sessions 6 and 9; the "placed" cases of session 9
// give every kernel's blocks their rows by the SM they run on). Not part of solo: a standalone
// program for the GPU machine (the test command only compiles it):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/stream_probe bench/probes/stream_probe.cu
//   /tmp/stream_probe
// Every figure is one kernel (or a pair) captured 120 times into a CUDA graph over distinct
// regions of a 16 GB buffer (so L2 is cold unless a case says otherwise); the best of 5 graph
// launches, divided by 120. Reads are 4 KB rows (2048 bf16, a weight row of the model) copied with
// cp.async through shared memory and reduced, as solo's decode GEMVs do.
#include <algorithm>
#include <vector>

#include "probe.cuh"

__device__ __forceinline__ float sum8(uint4 w) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __bfloat1622float2(h[i]);
        s += f.x * 0.5f + f.y * 0.25f;
    }
    return s;
}

// Rows of 4 KB through a DEPTH-row ring per warp (solo's GemvStream). Warp gw of W takes
//   experts == nullptr: rows gw, gw + W, ... of a contiguous matrix of `rows` rows;
//   experts != nullptr: the routed (gate, up) row pairs of 8 experts [1024 rows each], pair
//     p = gw, gw + W, ... (slot p / 512, row p % 512 and 512 + p % 512), as moe_decode_block.
// Where a block works: blockIdx.x, or (place != nullptr) by the SM it landed on, so that two
// kernels' blocks on one SM take the same rows (see `block_place`).
struct Place {
    const int* sm_index;  // %smid -> 0 .. SMs - 1
    int* counters;        // per launch, per %smid: blocks seen so far
    int shift;            // work as if on SM (index + shift) % SMs
};  // placed kernels run 2 blocks per SM: a grid of 2 × SMs
__device__ __forceinline__ int block_place(const Place* place) {
    if (!place) return blockIdx.x;
    __shared__ int b;
    if (threadIdx.x == 0) {
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        const int sms = gridDim.x / 2;
        const int slot = atomicAdd(&place->counters[id], 1) & 1;
        b = 2 * ((place->sm_index[id] + place->shift) % sms) + slot;
    }
    __syncthreads();
    return b;
}

// Records each block's %smid (to build Place::sm_index on the host).
__global__ void record_smid(int* ids) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    if (threadIdx.x == 0) ids[blockIdx.x] = id;
}

template <int DEPTH>
__global__ void __launch_bounds__(256) ring_read(const bf16* __restrict__ base, int rows, const int* __restrict__ experts,
                                                 float* out, const Place* place = nullptr) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int W = gridDim.x * 8, gw = block_place(place) * 8 + warp;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * DEPTH * 2048;
    auto row = [&](int k) -> long long {
        if (!experts) return gw + k * W < rows ? gw + k * W : -1;
        const int p = gw + (k >> 1) * W;
        if (2 * p >= rows) return -1;
        return (long long)experts[p / 512] * 1024 + p % 512 + (k & 1) * 512;
    };
    auto request = [&](int k, int d) {
        const long long r = row(k);
        if (r >= 0) {
#pragma unroll
            for (int j = 0; j < 8; j++) cp_async16(ring + d * 2048 + j * 256 + lane * 8, base + r * 2048 + j * 256 + lane * 8);
        }
        commit();
    };
    int n = 0;
    while (row(n) >= 0) n++;
#pragma unroll
    for (int d = 0; d < DEPTH; d++) request(d, d);
    float acc = 0.f;
    for (int k = 0; k < n; k++) {
        wait_groups<DEPTH - 1>();
        const int d = k % DEPTH;
#pragma unroll
        for (int j = 0; j < 8; j++) acc += sum8(*reinterpret_cast<const uint4*>(ring + d * 2048 + j * 256 + lane * 8));
        request(k + DEPTH, d);
    }
    if (lane == 0) out[gw] = acc;
}

// Decode attention's reads: one-warp blocks, block (split, head) streams `npos` positions of one KV
// head in tiles of 32 through a 2-stage ring, then spins `work` cycles per tile (the tile's math).
// layout 0: keys and values in separate buffers [pos][2 heads][512 B] (solo's cache);
// layout 1: one buffer [pos][2 heads][keys 512 B | values 512 B]; layout 2: head-major [2][pos][K | V].
__global__ void __launch_bounds__(32) kv_read(const char* __restrict__ kbuf, const char* __restrict__ vbuf, int npos,
                                              int layout, long long work, float* out) {
    extern __shared__ __align__(16) unsigned char smem[];
    const int lane = threadIdx.x, head = blockIdx.y;
    const long long first = (long long)blockIdx.x * npos, total = (long long)gridDim.x * npos;
    const int n = npos / 32;
    auto addr = [&](long long p, int kv) -> const char* {
        if (layout == 0) return (kv ? vbuf : kbuf) + (p * 2 + head) * 512;
        if (layout == 1) return kbuf + (p * 2 + head) * 1024 + kv * 512;
        return kbuf + (head * total + p) * 1024 + kv * 512;
    };
    auto request = [&](int t) {
        if (t < n) {
#pragma unroll 4
            for (int r = 0; r < 32; r++) {
                const long long p = first + (long long)t * 32 + r;
                cp_async16(smem + (t & 1) * 32768 + r * 512 + lane * 16, addr(p, 0) + lane * 16);
                cp_async16(smem + (t & 1) * 32768 + 16384 + r * 512 + lane * 16, addr(p, 1) + lane * 16);
            }
        }
        commit();
    };
    request(0);
    float acc = 0.f;
    for (int t = 0; t < n; t++) {
        request(t + 1);
        wait_groups<1>();
        __syncwarp();
        acc += *reinterpret_cast<const float*>(smem + (t & 1) * 32768 + lane * 16);
        const long long t0 = clock64();
        while (clock64() - t0 < work) {
        }
        __syncwarp();
    }
    if (lane == 0) out[blockIdx.x] = acc;
}

// A latency chain with HBM idle: every block spins `cycles`, after asking for the first pf_rows
// rows of `next` (in ring_read's row order: block b's warps take rows 8b.., 8b + W..) to be pulled
// into L2 — by the copy engine (bulk = 1) or one prefetch per 128-byte line (bulk = 0).
__global__ void spin_prefetch(const bf16* next, int pf_rows, long long cycles, int bulk) {
    const long long t0 = clock64();
    const int W = gridDim.x * 8;
    if (threadIdx.x < 32) {
        for (int k = threadIdx.x;; k += 32) {
            const int r = 8 * blockIdx.x + k * W;
            if (r >= pf_rows) break;
            const char* a = reinterpret_cast<const char*>(next + (long long)r * 2048);
            const int bytes = min(8, pf_rows - r) * 4096;
            if (bulk)
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(bytes) : "memory");
            else
                for (int o = 0; o < bytes; o += 128) asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(a + o));
        }
    }
    while (clock64() - t0 < cycles) {
    }
}

// The same chain, warming L2 with real copies instead: each thread copies its share of the rows
// 16 bytes at a time into one scratch slot of shared memory (never read; the copies only pass
// through L2, where they stay).
__global__ void spin_warm(const bf16* next, int pf_rows, long long cycles) {
    __shared__ __align__(16) unsigned char slot[256 * 16];
    const long long t0 = clock64();
    const int W = gridDim.x * 8;
    for (int k = 0;; k++) {
        const int r = 8 * blockIdx.x + k * W;
        if (r >= pf_rows) break;
        const char* a = reinterpret_cast<const char*>(next + (long long)r * 2048);
        const int bytes = min(8, pf_rows - r) * 4096;
        for (int o = threadIdx.x * 16; o < bytes; o += 256 * 16) cp_async16(slot + threadIdx.x * 16, a + o);
    }
    commit();
    while (clock64() - t0 < cycles) {
    }
    wait_groups<0>();
}

// The chain warming the first pf_rows rows in the reader's order, block by block as `place` says:
// how = 0: copies into one 16-byte slot per thread; 1: copies into a per-warp 2-row ring like the
// reader's (each warp its own rows); 2: one prefetch.global.L2::evict_last per 128-byte line.
__global__ void __launch_bounds__(256) spin_warm_placed(const bf16* next, int pf_rows, long long cycles, int how,
                                                        const Place* place) {
    extern __shared__ __align__(16) unsigned char smem[];
    const long long t0 = clock64();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int W = gridDim.x * 8, gw = block_place(place) * 8 + warp;
    bf16* ring = reinterpret_cast<bf16*>(smem) + warp * 2 * 2048;
    for (int k = 0; gw + k * W < pf_rows; k++) {
        const bf16* r = next + (long long)(gw + k * W) * 2048;
        if (how == 2) {  // lane l: the row's l-th 128-byte line
            asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(r + lane * 64));
            continue;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            void* dst = how == 0 ? (void*)(smem + threadIdx.x * 16) : (void*)(ring + (k & 1) * 2048 + j * 256 + lane * 8);
            cp_async16(dst, r + j * 256 + lane * 8);
        }
        commit();
    }
    while (clock64() - t0 < cycles) {
    }
    wait_groups<0>();
}

__global__ void empty_kernel() {}

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t pool = 16ull << 30;  // 4096 "experts" of 4 MB
    bf16* buf;
    CK(cudaMalloc(&buf, pool));
    CK(cudaMemset(buf, 0x3c, pool));
    float* out;
    CK(cudaMalloc(&out, 1 << 20));
    const int L = PROBE_LAUNCHES;
    int* experts;
    CK(cudaMalloc(&experts, L * 8 * sizeof(int)));
    std::vector<int> chosen(L * 8);
    srand(1);
    for (int& e : chosen) e = rand() % (int)(pool / (4 << 20));
    CK(cudaMemcpy(experts, chosen.data(), chosen.size() * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(ring_read<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * 2 * 4096));
    CK(cudaFuncSetAttribute(ring_read<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * 3 * 4096));
    CK(cudaFuncSetAttribute(kv_read, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    auto timeit = [&](const char* name, double mb, auto launch) { time_graph(st, name, mb, launch); };
    // region i: distinct for every launch of a graph, far apart
    auto region = [&](int i, size_t bytes) {
        const size_t stride = ((pool - bytes) / L) & ~4095ull;
        return buf + i * stride / sizeof(bf16);
    };
    char name[128];

    timeit("empty kernel, 264 blocks of 256", 0, [&](int) { empty_kernel<<<2 * sms, 256, 0, st>>>(); });

    printf("-- a cold matrix of 4 KB rows, one kernel (solo's streaming GEMV)\n");
    for (int rows : {4224, 8192, 12352, 24704, 65536}) {
        const double mb = rows * 4096.0 / 1e6;
        snprintf(name, sizeof name, "%.1f MB, 2 rows in flight per warp", mb);
        timeit(name, mb, [&](int i) { ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(region(i, rows * 4096ull), rows, nullptr, out); });
        snprintf(name, sizeof name, "%.1f MB, 3 rows in flight per warp", mb);
        timeit(name, mb, [&](int i) { ring_read<3><<<2 * sms, 256, 8 * 3 * 4096, st>>>(region(i, rows * 4096ull), rows, nullptr, out); });
    }

    printf("-- 8 random experts' (gate, up) rows, 33.5 MB (moe_decode_block's routed phase)\n");
    timeit("experts, 2 rows in flight per warp", 33.55, [&](int i) {
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(buf, 8192, experts + 8 * i, out);
    });

    printf("-- decode attention's reads at 131K: 396 one-warp blocks, 32-position tiles, 2 stages\n");
    for (long long work : {0LL, 1500LL, 3000LL, 5000LL})
        for (int layout : {0, 1, 2}) {
            const int npos = 672;  // 198 splits x 2 KV heads
            const double mb = 198.0 * npos * 2 * 1024 / 1e6;
            snprintf(name, sizeof name, "layout %d, %lld cycles of math a tile", layout, work);
            timeit(name, mb, [&](int i) {
                const char* k = reinterpret_cast<const char*>(region(i, 2 * 198ull * npos * 2048));
                kv_read<<<dim3(198, 2), 32, 65536, st>>>(k, k + 198ull * npos * 1024, npos, layout, work, out);
            });
        }

    printf("-- a 10 us latency chain, then a cold 50.6 MB matrix; the chain pulls the matrix's first rows into L2\n");
    const int in_proj = 12352;  // rows of the GDN in-projection
    timeit("chain alone", 0, [&](int) { spin_prefetch<<<2 * sms, 256, 0, st>>>(buf, 0, 19800, 1); });
    for (int pf : {0, 4224, 8448})
        for (int bulk : {1, 0}) {
            if (pf == 0 && !bulk) continue;
            snprintf(name, sizeof name, "chain + 50.6 MB, %.1f MB prefetched (%s)", pf * 4096.0 / 1e6, bulk ? "bulk" : "lines");
            timeit(name, 0, [&](int i) {
                const bf16* m = region(i, in_proj * 4096ull);
                spin_prefetch<<<2 * sms, 256, 0, st>>>(m, pf, 19800, bulk);
                ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, in_proj, nullptr, out);
            });
        }
    for (int pf : {0, 4224}) {
        snprintf(name, sizeof name, "chain + the prefetched 17.3 MB only (%.1f MB prefetched)", pf * 4096.0 / 1e6);
        timeit(name, 0, [&](int i) {
            const bf16* m = region(i, in_proj * 4096ull);
            spin_prefetch<<<2 * sms, 256, 0, st>>>(m, pf, 19800, 1);
            ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
        });
    }
    for (int pf : {4224, 8448}) {
        snprintf(name, sizeof name, "chain + 50.6 MB, %.1f MB warmed by copies", pf * 4096.0 / 1e6);
        timeit(name, 0, [&](int i) {
            const bf16* m = region(i, in_proj * 4096ull);
            spin_warm<<<2 * sms, 256, 0, st>>>(m, pf, 19800);
            ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, in_proj, nullptr, out);
        });
    }
    timeit("chain + the 17.3 MB it warmed by copies", 0, [&](int i) {
        const bf16* m = region(i, in_proj * 4096ull);
        spin_warm<<<2 * sms, 256, 0, st>>>(m, 4224, 19800);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
    });
    // the warming kernel with the reader's footprint (64 KB of shared memory a block), so that block
    // b lands where the reader's block b will
    CK(cudaFuncSetAttribute(spin_warm, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * 2 * 4096));
    timeit("chain (reader's footprint) + the 17.3 MB it warmed", 0, [&](int i) {
        const bf16* m = region(i, in_proj * 4096ull);
        spin_warm<<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, 19800);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
    });
    timeit("chain (reader's footprint) + 50.6 MB, 17.3 MB warmed", 0, [&](int i) {
        const bf16* m = region(i, in_proj * 4096ull);
        spin_warm<<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, 19800);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, in_proj, nullptr, out);
    });
    // the reader itself as the warmer: a cold read of 17.3 MB, then the same rows again
    timeit("17.3 MB cold, then the same rows again (the pair)", 0, [&](int i) {
        const bf16* m = region(i, in_proj * 4096ull);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
    });
    timeit("17.3 MB cold, the chain, the same rows again", 0, [&](int i) {
        const bf16* m = region(i, in_proj * 4096ull);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
        spin_prefetch<<<2 * sms, 256, 0, st>>>(m, 0, 19800, 1);
        ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(m, 4224, nullptr, out);
    });
    timeit("chain warming 17.3 MB by copies, alone", 0, [&](int i) {
        spin_warm<<<2 * sms, 256, 0, st>>>(region(i, in_proj * 4096ull), 4224, 19800);
    });

    printf("-- L2 staging with the reader's blocks placed by SM (block b of every kernel on the same SM)\n");
    {
        int* ids;
        const int grid = 2 * sms;
        CK(cudaMalloc(&ids, grid * sizeof(int)));
        // 100 KB of shared memory a block in every placed kernel: at most 2 blocks on an SM
        const int fat = 100 * 1024;
        CK(cudaFuncSetAttribute(spin_warm_placed, cudaFuncAttributeMaxDynamicSharedMemorySize, fat));
        CK(cudaFuncSetAttribute(ring_read<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, fat));
        CK(cudaFuncSetAttribute(record_smid, cudaFuncAttributeMaxDynamicSharedMemorySize, fat));
        record_smid<<<grid, 256, fat, st>>>(ids);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(st));
        std::vector<int> seen(grid);
        CK(cudaMemcpy(seen.data(), ids, grid * sizeof(int), cudaMemcpyDeviceToHost));
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        std::vector<int> index(1024, 0);
        for (size_t j = 0; j < seen.size(); j++) index[seen[j]] = (int)j;
        printf("distinct SMs %zu (of %d), smid %d .. %d\n", seen.size(), sms, seen.front(), seen.back());
        int* sm_index;
        int* counters;
        CK(cudaMalloc(&sm_index, 1024 * sizeof(int)));
        CK(cudaMemcpy(sm_index, index.data(), 1024 * sizeof(int), cudaMemcpyHostToDevice));
        // places[k * L + i], kernel k of launch i (0: the reader, 1: the second reader, 2: the
        // warmer): its own counters; shift 0, or `shift2` for the second reader
        const int kinds = 3;
        CK(cudaMalloc(&counters, kinds * L * 1024 * sizeof(int)));
        CK(cudaMemset(counters, 0, kinds * L * 1024 * sizeof(int)));
        Place* places;
        CK(cudaMalloc(&places, kinds * L * sizeof(Place)));
        auto make_places = [&](int shift2) {
            std::vector<Place> hp(kinds * L);
            for (int k = 0; k < kinds; k++)
                for (int i = 0; i < L; i++) hp[k * L + i] = {sm_index, counters + (k * L + i) * 1024, k == 1 ? shift2 : 0};
            CK(cudaMemcpy(places, hp.data(), hp.size() * sizeof(Place), cudaMemcpyHostToDevice));
        };
        make_places(0);
        auto P = [&](int k, int i) -> const Place* { return places + k * L + i; };
        const int hot = 4224;  // 17.3 MB
        timeit("placed: 17.3 MB cold", 17.3, [&](int i) {
            ring_read<2><<<grid, 256, fat, st>>>(region(i, in_proj * 4096ull), hot, nullptr, out, P(0, i));
        });
        timeit("placed: 17.3 MB hot (the same rows every launch)", 17.3, [&](int i) {
            ring_read<2><<<grid, 256, fat, st>>>(buf, hot, nullptr, out, P(0, i));
        });
        timeit("placed: chain alone", 0, [&](int i) {
            spin_warm_placed<<<grid, 256, fat, st>>>(region(i, in_proj * 4096ull), 0, 19800, 1, P(2, i));
        });
        for (int shift : {0, 1, 33, 66}) {
            make_places(shift);
            snprintf(name, sizeof name, "placed: 17.3 MB cold, the same rows again, shifted %d SMs", shift);
            timeit(name, 0, [&](int i) {
                const bf16* m = region(i, in_proj * 4096ull);
                ring_read<2><<<grid, 256, fat, st>>>(m, hot, nullptr, out, P(0, i));
                ring_read<2><<<grid, 256, fat, st>>>(m, hot, nullptr, out, P(1, i));
            });
        }
        make_places(0);
        const char* hows[3] = {"one slot", "a ring", "prefetch lines"};
        for (int how : {0, 1, 2})
            for (int placed : {0, 1}) {
                snprintf(name, sizeof name, "chain warming by %s (%s) + the 17.3 MB", hows[how], placed ? "placed" : "blockIdx");
                timeit(name, 0, [&](int i) {
                    const bf16* m = region(i, in_proj * 4096ull);
                    spin_warm_placed<<<grid, 256, fat, st>>>(m, hot, 19800, how, placed ? P(2, i) : nullptr);
                    ring_read<2><<<grid, 256, fat, st>>>(m, hot, nullptr, out, placed ? P(0, i) : nullptr);
                });
            }
        for (int pf : {0, 4224, 8448}) {
            snprintf(name, sizeof name, "placed: chain + 50.6 MB, %.1f MB warmed by a ring", pf * 4096.0 / 1e6);
            timeit(name, 0, [&](int i) {
                const bf16* m = region(i, in_proj * 4096ull);
                spin_warm_placed<<<grid, 256, fat, st>>>(m, pf, 19800, 1, P(2, i));
                ring_read<2><<<grid, 256, fat, st>>>(m, in_proj, nullptr, out, P(0, i));
            });
        }
        // every SM must have had exactly 2 blocks of every placed launch: the counts stay even
        CK(cudaDeviceSynchronize());
        std::vector<int> hc(kinds * L * 1024);
        CK(cudaMemcpy(hc.data(), counters, hc.size() * sizeof(int), cudaMemcpyDeviceToHost));
        int odd = 0;
        for (int c : hc) odd += c & 1;
        printf("placed counters left odd (an SM with other than 2 blocks of a launch): %d\n", odd);
    }
    timeit("17.3 MB hot in L2 (the same rows every launch)", 17.3,
           [&](int) { ring_read<2><<<2 * sms, 256, 8 * 2 * 4096, st>>>(buf, 4224, nullptr, out); });
    CK(cudaDeviceSynchronize());
    return 0;
}
