// The baseline: session 8's step kernel (git show 1fb7a2e:bench/probes/step_probe.cu), cut to the
// cases this probe compares against: one CTA per SM, every warp with its own cp.async rings (S
// static rows, R routed rows of 4 KB), refilled after each row is used, and a grid barrier
// (every warp joins its __syncthreads) before each link. Changes: the routing is top-8 of 16
// (common.cuh), link 0's input follows the epoch, the tagged exchange and the marks are gone.
#pragma once
#include "common.cuh"

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
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

// Every block of the grid (all resident) waits here until `target` blocks have arrived in all;
// `arrivals` only grows (a launch's k-th barrier waits for k · gridDim.x).
__device__ __forceinline__ void grid_barrier(unsigned long long* arrivals, unsigned long long target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(arrivals) : "memory");
        unsigned long long now;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(now) : "l"(arrivals) : "memory");
        } while (now < target);
    }
    __syncthreads();
}

// A warp's place in its stream of rows: the link and the row (static) or routed index p.
struct Cursor {
    int link, row;
};

template <int NW, int S, int R>
struct Warp {
    int gw, W, lane, last;
    bf16* sring;   // [S][2048]
    bf16* rring;   // [R][2048]
    int* seq;      // the commit-group number of each slot: [S + R]
    int* experts;  // [8]
    int committed = 0;
    int s_issued = 0, s_used = 0, r_issued = 0, r_used = 0;
    Cursor s_next, r_next;
    int routed_known = -1;  // the last link whose routed rows have known addresses

    __device__ void copy_row(bf16* dst, const bf16* src) {
#pragma unroll
        for (int j = 0; j < 8; j++) cp_async16(dst + j * 256 + lane * 8, src + j * 256 + lane * 8);
        commit();
    }
    __device__ void settle_static(Cursor& c) {  // the first static row at or after (link, row)
        while (c.link < last && c.row >= c_links[c.link].rows) c.link++, c.row = gw;
    }
    __device__ void settle_routed(Cursor& c) {
        while (c.link < last && c.row >= routed_rows(c_links[c.link].routed)) c.link++, c.row = gw;
    }
    __device__ void top_up_static(int limit) {  // the static ring up to S rows ahead, to link `limit`
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
            const int slot = r_issued % R;
            copy_row(rring + slot * ROW, L.pool + routed_row(L.routed, experts, r_next.row) * ROW);
            seq[S + slot] = committed++;
            r_issued++;
            r_next.row += W;
            settle_routed(r_next);
        }
    }
};

// The whole step. ys: two output buffers [2][YMAX] (link l writes ys[l & 1]); arrivals: the grid
// barrier's count (zero at launch). mode & 3, the lookahead: 0, a link's rows are requested after
// its barrier; 1, before it; 2, across links, the static ring always full. mode & 4: no exchange
// (x kept from link 0), mode & 8: no barriers; mode & 16: no dot products; all three timing only.
// epoch: link 0's input; block 0 adds one at the end (every block has read it by then).
template <int NW, int S, int R>
__global__ void __launch_bounds__(NW * 32, 1) old_step_kernel(int mode, unsigned long long* arrivals, float* ys, unsigned* epoch) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int seq_all[NW][S + R];
    __shared__ int experts_all[NW][8];
    __shared__ __align__(16) float xs[ROW];  // the link's x
    __shared__ float logits_s[16];
    const int warp = threadIdx.x >> 5;
    const int first = 0, last = NLINKS;
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
    const unsigned ep = *(volatile unsigned*)epoch;
    unsigned long long barriers = 0;
    float x[64];
    for (int l = first; l < last; l++) {
        const Link& L = c_links[l];
        const int lookahead = mode & 3;
        const int limit = lookahead == 2 ? last : l;
        if (lookahead) w.top_up_static(limit);  // before the barrier: these rows do not depend on the link before
        if (l > first && !(mode & 8)) grid_barrier(arrivals, ++barriers * gridDim.x);
        w.top_up_static(limit);
        // x from the link before's outputs, staged once per block
        const float* yprev = ys + ((l - 1) & 1) * YMAX;
        const bool route = L.routed == 1 || (L.routed == 2 && l == first);
        for (int i = threadIdx.x; i < ((mode & 4) && l > first ? 0 : ROW); i += NW * 32)
            xs[i] = softsign(l == 0 ? x0_of(ep) : __ldcg(yprev + i % L.in_rows));
        if (route && threadIdx.x < 16) logits_s[threadIdx.x] = __ldcg(L.logits + threadIdx.x);
        __syncthreads();
        load_x(x, xs, lane);
        if (route) {
            if (lane == 0) top8_of16(logits_s, w.experts);
            __syncwarp();
            w.routed_known = L.routed == 1 ? l + 1 : l;
        }
        w.top_up_routed(limit);
        float* y = ys + (l & 1) * YMAX;
        for (int row = w.gw; row < L.rows; row += w.W) {
            const int slot = w.s_used % S;
            wait_dyn(w.committed - 1 - w.seq[slot]);
            const float acc = (mode & 16) ? __bfloat162float(w.sring[slot * ROW + lane * 8]) : slot_dot(w.sring + slot * ROW, x, lane);
            if (lane == 0) {
                y[row] = acc;
                if (L.logits && !L.routed && row < 256) L.logits[row] = acc;
            }
            w.s_used++;
            w.top_up_static(limit);
            w.top_up_routed(limit);
        }
        const int nr = routed_rows(L.routed);
        for (int p = w.gw; p < nr; p += w.W) {
            const int slot = w.r_used % R;
            wait_dyn(w.committed - 1 - w.seq[S + slot]);
            const float acc = (mode & 16) ? __bfloat162float(w.rring[slot * ROW + lane * 8]) : slot_dot(w.rring + slot * ROW, x, lane);
            if (lane == 0) y[L.rows + p] = acc;
            w.r_used++;
            w.top_up_routed(limit);
            w.top_up_static(limit);
        }
    }
    wait_groups<0>();
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(epoch, 1u);
}
