// What the standalone probes in this folder share (stream_probe.cu, moe_probe.cu,
// step_probe.cu): error checks, cp.async, a warp sum, a grid barrier and the graph timer. Not
// part of solo.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
typedef __nv_bfloat16 bf16;

#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e = (x);                                                    \
        if (e != cudaSuccess) {                                                 \
            printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));     \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Every block of the grid (all resident) waits here until `target` blocks have arrived in all;
// `arrivals` only grows (a launch's k-th barrier waits for base + k · gridDim.x).
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

// grid_barrier with the arrivals spread over 8 counters 128 bytes apart (block b adds to counter
// b % 8; thread t < 8 of every block waits on counter t): `arrivals` u64 [128], the k-th barrier
// of a launch (all counters zero at launch).
__device__ __forceinline__ void grid_barrier_split(unsigned long long* arrivals, unsigned long long k) {
    __syncthreads();
    if (threadIdx.x == 0)
        asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(arrivals + 16 * (blockIdx.x % 8)) : "memory");
    if (threadIdx.x < 8) {
        const unsigned t = threadIdx.x;
        const unsigned long long target = k * (gridDim.x / 8 + (t < gridDim.x % 8));
        unsigned long long now;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(now) : "l"(arrivals + 16 * t) : "memory");
        } while (now < target);
    }
    __syncthreads();
}

// Launches per graph: launch(i) for i < PROBE_LAUNCHES each works on its own region (cold L2).
#ifndef PROBE_LAUNCHES
#define PROBE_LAUNCHES 120
#endif

// Captures launch(0 .. PROBE_LAUNCHES - 1) into one CUDA graph, runs it once to warm up, then
// prints the best of 5 runs divided by PROBE_LAUNCHES (and mb / µs = TB/s when mb > 0).
template <class Launch>
void time_graph(cudaStream_t st, const char* name, double mb, Launch launch) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < PROBE_LAUNCHES; i++) launch(i);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float best = 1e9f;
    for (int rep = 0; rep < 5; rep++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = ms < best ? ms : best;
    }
    const double us = best * 1000.0 / PROBE_LAUNCHES;
    if (mb > 0) printf("%-58s %8.2f us  %5.2f TB/s\n", name, us, mb / us);  // MB per µs = TB/s
    else printf("%-58s %8.2f us\n", name, us);
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
}
