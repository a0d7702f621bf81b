// packed_probe: does a decode GEMV stream faster when its bf16 weights are stored losslessly in
// 12.25 bits each (bench/NOTES.md, issue 5 session 12)? Not part of solo: a standalone program for
// the GPU machine (the test command only compiles it):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/packed_probe bench/probes/packed_probe.cu
//   /tmp/packed_probe
//
// The packed row (2048 weights: 3,072 bytes of data and a 64-byte tail, 76.6 % of 4 KB). A trained
// matrix's weights are Gaussian-like, so a row's bf16 exponents sit in a narrow window: the row
// keeps one base exponent and each weight the offset o = e - base in [1, 15] (4 bits) next to its
// sign and 7 mantissa bits. A weight outside the window (zero, tiny or huge: ~0.3 a row) is an
// escape, stored whole in the row's tail (at most 15 a row) with o = 0. Lane l of a warp reads
// back exactly the 16-byte chunks it copied (chunk q·32 + l, q = 0..5), which hold its 8 pieces
// (piece j = columns j·256 + l·8 ..+8, as solo's GemvStream assigns them):
//   chunks q = 0..3: pieces 2q, 2q + 1, 8 bytes each: LA = the low bf16 bytes [o0 m6..m0] of the
//     piece's weights 0, 2, 4, 6, then LB of weights 1, 3, 5, 7;
//   chunks q = 4, 5: piece j's word N at chunk 4 + j / 4, word j % 4; byte b of N holds
//     bit 7 sign(2b), bits 6..4 o3o2o1(2((b + 1) % 4) + 1), bit 3 sign(2b + 1), bits 2..0 o3o2o1(2b),
//     so that N & 0x87878787 and rotl(N, 4) & 0x87878787 are the high bytes [s 0000 o3 o2 o1] of the
//     even and the odd weights (3 instructions for 8 weights), and 4 byte permutes give 4 bf16x2.
//   tail (its own array, 64 bytes a row, so data rows stay 128-byte aligned; copied by lanes 0..3
//     behind the row's data in the ring slot): u8 base, u8 escapes, u16 0, then (u16 column, u16
//     bf16 bits) per escape.
// The decoded value is the weight scaled by 2^-base (its exponent field is o); x is staged scaled by
// 2^96, so every product and partial sum is the bf16 GEMV's scaled by 2^(96 - base) exactly, and the
// warp's sum times 2^(base - 96) is the bf16 GEMV's result bit for bit (unless a product falls
// below 2^-107, which the probe's check would show). The escapes are handled in several ways
// (`mode` of `gemv`, all exact): an escape's piece redone with the true weights against
// x · 2^(96 - base); the escape's value (w · 2^-base, an exact f32, normal or subnormal) injected
// into the pieces; the escaped piece decoded again with its escapes put in place, before or after
// the slot's refill. Mode 13 is a form without escapes (5-bit offsets, 13 bits a weight, below).
// The probe checks every weight decoded whole and every row's result against the bf16 GEMV's bits,
// then times each form cold (bench/NOTES.md, session 12, has the numbers).
#include <cstring>
#include <vector>

#include "probe.cuh"

#define ROW 2048
#define DATA 3072
#define TAIL 64
#define SLOT (DATA + TAIL)
#define ESC_MAX 15
#define WARPS 8

__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Gaussian bf16 weights N(0, sigma²) (Box–Muller on two hashes of the index), or with laplace
// Laplace weights of the same standard deviation (heavier tails, more mass near zero).
__global__ void fill_gauss(bf16* w, long long n, unsigned long long seed, float sigma, int laplace = 0) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const unsigned long long h = mix(seed * 0x9E3779B97F4A7C15ull + i);
        const float u1 = ((h >> 40) + 1) * (1.0f / 16777216.0f), u2 = ((h >> 8) & 0xffffff) * (1.0f / 16777216.0f);
        w[i] = __float2bfloat16(laplace ? (u2 < 0.5f ? -1.f : 1.f) * sigma * 0.70710678f * -logf(u1)
                                        : sigma * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
    }
}

__global__ void fill_uniform(bf16* w, long long n, unsigned long long seed, float a) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        w[i] = __float2bfloat16(a * ((mix(seed * 0x9E3779B97F4A7C15ull + i) >> 40) * (2.0f / 16777216.0f) - 1.0f));
}

// One block of 256 threads per row: thread t is lane t % 32, piece t / 32.
// stats: [0] escapes, [1] rows with escapes, [2] most escapes in a row, [3] rows over ESC_MAX.
__global__ void __launch_bounds__(256) pack_rows(const bf16* __restrict__ w, unsigned char* __restrict__ out,
                                                 unsigned char* __restrict__ tails, int rows, int* stats) {
    __shared__ int hist[256], nesc, base_s;
    __shared__ unsigned esc[ESC_MAX];
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        hist[threadIdx.x] = 0;
        if (threadIdx.x == 0) nesc = 0;
        __syncthreads();
        unsigned short bits[8];
        const unsigned short* src = reinterpret_cast<const unsigned short*>(w) + (size_t)r * ROW + j * 256 + lane * 8;
        for (int i = 0; i < 8; i++) {
            bits[i] = src[i];
            if (bits[i] & 0x7fff) atomicAdd(&hist[(bits[i] >> 7) & 0xff], 1);
        }
        __syncthreads();
        if (threadIdx.x == 0) {  // the window [base + 1, base + 15] holding the most weights
            int best = -1, bb = 0;
            for (int b = 0; b <= 126; b++) {
                int c = 0;
                for (int e = b + 1; e <= b + 15; e++) c += hist[e];
                if (c > best) best = c, bb = b;
            }
            base_s = bb;
        }
        __syncthreads();
        const int base = base_s;
        unsigned o[8], s[8], lo[8];
        for (int i = 0; i < 8; i++) {
            const int e = (bits[i] >> 7) & 0xff;
            int oi = e - base;
            if (!(bits[i] & 0x7fff) || oi < 1 || oi > 15) {
                const int k = atomicAdd(&nesc, 1);
                if (k < ESC_MAX) esc[k] = (unsigned)(j * 256 + lane * 8 + i) | (unsigned)bits[i] << 16;
                oi = 0;
            }
            o[i] = oi;
            s[i] = bits[i] >> 15;
            lo[i] = ((oi & 1) << 7) | (bits[i] & 0x7f);
        }
        unsigned la = 0, lb = 0, n = 0;
        for (int b = 0; b < 4; b++) {
            la |= lo[2 * b] << (8 * b);
            lb |= lo[2 * b + 1] << (8 * b);
            const unsigned byte = s[2 * b] << 7 | (o[2 * ((b + 1) % 4) + 1] >> 1) << 4 | s[2 * b + 1] << 3 | o[2 * b] >> 1;
            n |= byte << (8 * b);
        }
        unsigned char* row = out + (size_t)r * DATA;
        unsigned* l8 = reinterpret_cast<unsigned*>(row + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8);
        l8[0] = la;
        l8[1] = lb;
        *reinterpret_cast<unsigned*>(row + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4) = n;
        __syncthreads();
        if (threadIdx.x < 16) {
            unsigned* tail = reinterpret_cast<unsigned*>(tails + (size_t)r * TAIL);
            const int ne = min(nesc, ESC_MAX);
            tail[threadIdx.x] = threadIdx.x == 0 ? (unsigned)base | (unsigned)ne << 8 : (threadIdx.x <= ne ? esc[threadIdx.x - 1] : 0u);
        }
        if (threadIdx.x == 0 && nesc) {
            atomicAdd(&stats[0], nesc);
            atomicAdd(&stats[1], 1);
            atomicMax(&stats[2], nesc);
            if (nesc > ESC_MAX) atomicAdd(&stats[3], 1);
        }
        __syncthreads();
    }
}

// The same expression as solo's dot_piece, over 8 f32 weights.
__device__ __forceinline__ float dot8f(const float w[8], float4 a, float4 b) {
    return (w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w) + (w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w);
}
__device__ __forceinline__ float dot_bf16(uint4 v, float4 a, float4 b) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
    float w[8];
    for (int i = 0; i < 4; i++) {
        const float2 f = __bfloat1622float2(h[i]);
        w[2 * i] = f.x, w[2 * i + 1] = f.y;
    }
    return dot8f(w, a, b);
}

// Piece decode: 8 weights · 2^-base as f32.
__device__ __forceinline__ void unpack_piece(unsigned la, unsigned lb, unsigned n, float w[8]) {
    const unsigned ha = n & 0x87878787u, hb = __funnelshift_l(n, n, 4) & 0x87878787u;
    const unsigned a02 = __byte_perm(la, ha, 0x5140), a46 = __byte_perm(la, ha, 0x7362);
    const unsigned b13 = __byte_perm(lb, hb, 0x5140), b57 = __byte_perm(lb, hb, 0x7362);
    w[0] = __uint_as_float(a02 << 16), w[2] = __uint_as_float(a02 & 0xffff0000u);
    w[4] = __uint_as_float(a46 << 16), w[6] = __uint_as_float(a46 & 0xffff0000u);
    w[1] = __uint_as_float(b13 << 16), w[3] = __uint_as_float(b13 & 0xffff0000u);
    w[5] = __uint_as_float(b57 << 16), w[7] = __uint_as_float(b57 & 0xffff0000u);
}
// The piece's true weights (bf16 bits as f32), escapes from the tail (u32 words: [0] base | count << 8).
__device__ __forceinline__ void true_piece(unsigned la, unsigned lb, unsigned n, const unsigned* tail, int col0, float w[8]) {
    const unsigned ha = n & 0x87878787u, hb = __funnelshift_l(n, n, 4) & 0x87878787u;
    const int base = tail[0] & 0xff, ne = (tail[0] >> 8) & 0xff;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned l = ((i & 1) ? lb : la) >> (8 * (i / 2)) & 0xff, h = ((i & 1) ? hb : ha) >> (8 * (i / 2)) & 0xff;
        const unsigned o = (h & 7) << 1 | l >> 7;
        unsigned bits;
        if (o) {
            bits = (h >> 7) << 15 | (o + base) << 7 | (l & 0x7f);
        } else {
            bits = 0;
            for (int k = 0; k < ne; k++)
                if ((tail[1 + k] & 0xffff) == (unsigned)(col0 + i)) bits = tail[1 + k] >> 16;
        }
        w[i] = __uint_as_float(bits << 16);
    }
}

__device__ __forceinline__ float pow2(int k) { return __uint_as_float((unsigned)(k + 127) << 23); }

// The piece of this lane holding the escape at `col`, redone with the true weights (w' · 2^base,
// exact, and the escapes from the tail) against x · 2^(96 - base) (xs: x · 2^96).
__device__ __forceinline__ float redo_piece(const unsigned char* slot, const float* xs, int col) {
    const int lane = threadIdx.x & 31, j = col >> 8, col0 = col & ~7;
    const unsigned* tail = reinterpret_cast<const unsigned*>(slot + DATA);
    const unsigned char* c = slot + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8;
    const unsigned la = *reinterpret_cast<const unsigned*>(c), lb = *reinterpret_cast<const unsigned*>(c + 4);
    const unsigned n = *reinterpret_cast<const unsigned*>(slot + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4);
    float t[8];
    true_piece(la, lb, n, tail, col0, t);
    const float down = pow2(-(int)(tail[0] & 0xff));
    const float* xp = xs + col0;
    return dot8f(t, make_float4(xp[0] * down, xp[1] * down, xp[2] * down, xp[3] * down),
                 make_float4(xp[4] * down, xp[5] * down, xp[6] * down, xp[7] * down));
}
// ---- The 13-bit form: 5-bit offsets, no escapes --------------------------------------------------
// Row: the 3,072 bytes above (o's bits 0..3 as there) plus X, 8 bytes a lane at 3072 + 8·lane
// (byte j: the fifth offset bit, o4, of piece j's weights 0, 2, 4, 6 in bits 0..3 and 1, 3, 5, 7
// in bits 4..7): 3,328 bytes (81.25 %), 128-byte aligned; the base in its own array (u32 a row).
// base = (the row's largest exponent) − 31, o = e − base in [1, 31]; a zero is o = 0, m = 0 and
// decodes to ±0. A nonzero weight 2^30 below the row's largest cannot be stored: the row is
// counted as unpackable (a matrix with one would stay bf16); none of the probe's rows is.
#define DATA13 3328
#define SLOT13 (DATA13 + 16)

// stats: [0] unpackable rows.
__global__ void __launch_bounds__(256) pack_rows13(const bf16* __restrict__ w, unsigned char* __restrict__ out,
                                                   unsigned* __restrict__ bases, int rows, int* stats) {
    __shared__ int emax_s, bad_s;
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        if (threadIdx.x == 0) emax_s = 0, bad_s = 0;
        __syncthreads();
        unsigned short bits[8];
        const unsigned short* src = reinterpret_cast<const unsigned short*>(w) + (size_t)r * ROW + j * 256 + lane * 8;
        for (int i = 0; i < 8; i++) {
            bits[i] = src[i];
            if (bits[i] & 0x7fff) atomicMax(&emax_s, (bits[i] >> 7) & 0xff);
        }
        __syncthreads();
        const int base = max(emax_s - 31, 0);
        unsigned o[8], s[8], lo[8];
        for (int i = 0; i < 8; i++) {
            int oi = 0;
            if (bits[i] & 0x7fff) {
                oi = ((bits[i] >> 7) & 0xff) - base;
                if (oi < 1 || base > 126) atomicAdd(&bad_s, 1), oi = 0;
            }
            o[i] = oi;
            s[i] = bits[i] >> 15;
            lo[i] = ((oi & 1) << 7) | (oi ? bits[i] & 0x7f : 0);
        }
        unsigned la = 0, lb = 0, n = 0, x = 0;
        for (int b = 0; b < 4; b++) {
            la |= lo[2 * b] << (8 * b);
            lb |= lo[2 * b + 1] << (8 * b);
            const unsigned byte = s[2 * b] << 7 | ((o[2 * ((b + 1) % 4) + 1] >> 1) & 7) << 4 | s[2 * b + 1] << 3 | ((o[2 * b] >> 1) & 7);
            n |= byte << (8 * b);
            x |= (o[2 * b] >> 4 & 1) << b | (o[2 * b + 1] >> 4 & 1) << (4 + b);
        }
        unsigned char* row = out + (size_t)r * DATA13;
        unsigned* l8 = reinterpret_cast<unsigned*>(row + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8);
        l8[0] = la;
        l8[1] = lb;
        *reinterpret_cast<unsigned*>(row + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4) = n;
        row[3072 + lane * 8 + j] = (unsigned char)x;
        __syncthreads();
        if (threadIdx.x == 0) {
            bases[r] = (unsigned)base;
            if (bad_s) atomicAdd(&stats[0], 1);
        }
    }
}

// Piece decode, 13-bit form: 8 weights · 2^-base as f32 (x: the piece's X byte).
__device__ __forceinline__ void unpack_piece13(unsigned la, unsigned lb, unsigned n, unsigned x, float w[8]) {
    const unsigned ha = (n & 0x87878787u) | ((x & 0xfu) * 0x01020408u & 0x08080808u);
    const unsigned hb = (__funnelshift_l(n, n, 4) & 0x87878787u) | ((x >> 4 & 0xfu) * 0x01020408u & 0x08080808u);
    const unsigned a02 = __byte_perm(la, ha, 0x5140), a46 = __byte_perm(la, ha, 0x7362);
    const unsigned b13 = __byte_perm(lb, hb, 0x5140), b57 = __byte_perm(lb, hb, 0x7362);
    w[0] = __uint_as_float(a02 << 16), w[2] = __uint_as_float(a02 & 0xffff0000u);
    w[4] = __uint_as_float(a46 << 16), w[6] = __uint_as_float(a46 & 0xffff0000u);
    w[1] = __uint_as_float(b13 << 16), w[3] = __uint_as_float(b13 & 0xffff0000u);
    w[5] = __uint_as_float(b57 << 16), w[7] = __uint_as_float(b57 & 0xffff0000u);
}

__device__ __forceinline__ void cp_async_ca(void* smem, const void* gmem, int bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    if (bytes == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem) : "memory");
}

// Every weight decoded (times 2^base, exact) against the bf16 original: mismatches counted.
__global__ void unpack_check13(const unsigned char* __restrict__ packed, const unsigned* __restrict__ bases,
                               const bf16* __restrict__ w, int rows, int* bad) {
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const unsigned char* row = packed + (size_t)r * DATA13;
        const unsigned* l8 = reinterpret_cast<const unsigned*>(row + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8);
        const unsigned n = *reinterpret_cast<const unsigned*>(row + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4);
        float t[8];
        unpack_piece13(l8[0], l8[1], n, row[3072 + lane * 8 + j], t);
        const float up = pow2((int)bases[r]);
        const unsigned short* src = reinterpret_cast<const unsigned short*>(w) + (size_t)r * ROW + j * 256 + lane * 8;
        for (int i = 0; i < 8; i++)
            if ((__float_as_uint(t[i] * up) >> 16) != src[i]) atomicAdd(bad, 1);
    }
}

// Each block: stage x [2048] f32 (scaled by 2^96 when packed), 8 warps, each D rows in flight.
// mode (packed): 0 exact, an escape's piece redone; 1 escapes ignored (timing only); 2 no decode
// (timing only); 4 exact, the escapes injected into the pieces; 5 the same, one code path for every row;
// 6 exact, an escape's piece decoded again with its escapes put in place; 7 the same, after the refill;
// 13 the 13-bit form (tails: its bases, u32 a row). XS: x read from shared memory for every piece
// instead of held in 64 registers a lane.
template <bool PACKED_ROWS, int MODE, int D, bool XS = false>
__global__ void __launch_bounds__(256) gemv(const unsigned char* __restrict__ wbase, const unsigned char* __restrict__ tails,
                                            const float* __restrict__ x, int rows, float* __restrict__ y) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int RB = PACKED_ROWS ? (MODE == 13 ? SLOT13 : SLOT) : 4096;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned char* ring = smem + warp * D * RB;
    float* xs = reinterpret_cast<float*>(smem + WARPS * D * RB);
    const int first = blockIdx.x * WARPS + warp, stride = gridDim.x * WARPS;
    auto request = [&](int r, int d) {
        if (r < rows) {
            const unsigned char* src = wbase + (size_t)r * (PACKED_ROWS ? (MODE == 13 ? DATA13 : DATA) : 4096);
            unsigned char* dst = ring + d * RB;
            if (PACKED_ROWS) {
#pragma unroll
                for (int q = 0; q < 6; q++) cp_async16(dst + (q * 32 + lane) * 16, src + (q * 32 + lane) * 16);
                if (MODE == 13) {
                    cp_async_ca(dst + 3072 + lane * 8, src + 3072 + lane * 8, 8);
                    if (lane == 0) cp_async_ca(dst + DATA13, tails + (size_t)r * 4, 4);
                } else if (lane < 4) {
                    cp_async16(dst + DATA + lane * 16, tails + (size_t)r * TAIL + lane * 16);
                }
            } else {
#pragma unroll
                for (int q = 0; q < 8; q++) cp_async16(dst + (q * 32 + lane) * 16, src + (q * 32 + lane) * 16);
            }
        }
        commit();
    };
#pragma unroll
    for (int d = 0; d < D; d++) request(first + d * stride, d);
    for (int i = threadIdx.x; i < ROW; i += 256) xs[i] = PACKED_ROWS ? x[i] * pow2(96) : x[i];
    __syncthreads();
    float4 xr[16];
#pragma unroll
    for (int j = 0; j < 8 && !XS; j++) {
        xr[2 * j] = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8);
        xr[2 * j + 1] = *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8 + 4);
    }
    // This lane's x for piece j (columns j·256 + lane·8 ..+4 and ..+8).
    auto xa = [&](int j) { return XS ? *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8) : xr[2 * j]; };
    auto xb = [&](int j) { return XS ? *reinterpret_cast<const float4*>(xs + j * 256 + lane * 8 + 4) : xr[2 * j + 1]; };
    for (int k0 = 0; first + k0 * stride < rows; k0 += D) {
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int r = first + (k0 + d) * stride;
            if (r >= rows) break;
            wait_groups<D - 1>();
            const unsigned char* slot = ring + d * RB;
            float acc = 0.f;
            bool refilled = false;  // mode 7 refills the slot before its last fix-ups
            if (!PACKED_ROWS) {
#pragma unroll
                for (int j = 0; j < 8; j++) acc += dot_bf16(*reinterpret_cast<const uint4*>(slot + (j * 32 + lane) * 16), xa(j), xb(j));
                acc = warp_sum(acc);
                if (lane == 0) y[r] = acc;
            } else if (MODE == 13) {
                const uint2 xw = *reinterpret_cast<const uint2*>(slot + 3072 + lane * 8);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const uint2 l = *reinterpret_cast<const uint2*>(slot + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8);
                    const unsigned n = *reinterpret_cast<const unsigned*>(slot + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4);
                    float w[8];
                    unpack_piece13(l.x, l.y, n, ((j < 4 ? xw.x : xw.y) >> (8 * (j % 4))) & 0xff, w);
                    acc += dot8f(w, xa(j), xb(j));
                }
                acc = warp_sum(acc);
                if (lane == 0) y[r] = acc * pow2((int)*reinterpret_cast<const unsigned*>(slot + DATA13) - 96);
            } else {
                const unsigned* tail = reinterpret_cast<const unsigned*>(slot + DATA);
                const unsigned head = __shfl_sync(0xffffffffu, lane == 0 ? tail[0] : 0u, 0);
                auto piece = [&](int j, unsigned& la, unsigned& lb, unsigned& n) {
                    const uint2 l = *reinterpret_cast<const uint2*>(slot + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8);
                    la = l.x, lb = l.y;
                    n = *reinterpret_cast<const unsigned*>(slot + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4);
                };
                if (MODE == 4 || MODE == 5) {
                    // Escapes injected: each lane takes its escape's value scaled like the decoded
                    // weights (w · 2^-base, exact as an f32 normal or subnormal) from the tail, and
                    // the pieces put it in place of the decoded one. A lane with two escapes, or one
                    // whose scaled value is not exact, redoes its pieces with the true weights.
                    // Mode 5 runs the same code for every row (no branch on the row's escapes).
                    const int base = head & 0xff;
                    int esc_col = -1;
                    float esc_val = 0.f;
                    bool slow = false;
                    if (MODE == 5 || (head >> 8)) {  // warp-uniform
                        __syncwarp();  // the tail, copied by lanes 0..3, is read by any lane
                        const int ne = (head >> 8) & 0xff;
                        for (int k = 0; k < ne; k++) {
                            const unsigned ent = tail[1 + k];
                            const int col = ent & 0xffff;
                            if (((col >> 3) & 31) != lane) continue;
                            const float wt = __uint_as_float(ent >> 16 << 16);
                            slow |= esc_col >= 0;
                            esc_col = col;
                            esc_val = wt * pow2(-base);
                            slow |= esc_val * pow2(base) != wt;
                        }
                    }
                    if (MODE == 4 && !(head >> 8)) {
#pragma unroll
                        for (int j = 0; j < 8; j++) {
                            unsigned la, lb, n;
                            piece(j, la, lb, n);
                            float w[8];
                            unpack_piece(la, lb, n, w);
                            acc += dot8f(w, xa(j), xb(j));
                        }
                    } else if (!slow) {
#pragma unroll
                        for (int j = 0; j < 8; j++) {
                            unsigned la, lb, n;
                            piece(j, la, lb, n);
                            float w[8];
                            unpack_piece(la, lb, n, w);
                            const bool here = (esc_col >> 3) == j * 32 + lane;
#pragma unroll
                            for (int i = 0; i < 8; i++) w[i] = here && (esc_col & 7) == i ? esc_val : w[i];
                            acc += dot8f(w, xa(j), xb(j));
                        }
                    } else {
                        const float down = pow2(-base);
                        for (int j = 0; j < 8; j++) {
                            unsigned la, lb, n;
                            piece(j, la, lb, n);
                            float t[8];
                            true_piece(la, lb, n, tail, j * 256 + lane * 8, t);
                            const float* xp = xs + j * 256 + lane * 8;
                            acc += dot8f(t, make_float4(xp[0] * down, xp[1] * down, xp[2] * down, xp[3] * down),
                                         make_float4(xp[4] * down, xp[5] * down, xp[6] * down, xp[7] * down));
                        }
                    }
                } else {
                    // Each piece's dot kept apart (p[j]; solo adds them to acc in order, so the sum of
                    // the p[j] in order is its sum) so that an escape's piece can be redone alone.
                    float p[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        unsigned la, lb, n;
                        piece(j, la, lb, n);
                        if (MODE == 2) {
                            p[j] = dot_bf16(make_uint4(la, lb, n, la ^ n), xa(j), xb(j));
                        } else {
                            float w[8];
                            unpack_piece(la, lb, n, w);
                            p[j] = dot8f(w, xa(j), xb(j));
                        }
                    }
                    // Mode 7: the escapes found and their pieces' words copied to registers, then the
                    // slot refilled, then the pieces fixed while the refill is in flight.
                    bool slow = false;
                    if (MODE == 7 && (head >> 8)) {  // warp-uniform: this row has escapes
                        __syncwarp();                 // the tail, copied by lanes 0..3, is read by any lane
                        const int ne = (head >> 8) & 0xff;
                        int ej = -1, count = 0;       // this lane's escaped piece, its escapes (at most 2 here)
                        unsigned e1 = 0, e2 = 0, wa = 0, wb = 0, wn = 0;
                        for (int k = 0; k < ne; k++) {
                            const unsigned ent = tail[1 + k];
                            const int col = ent & 0xffff;
                            if (((col >> 3) & 31) != lane) continue;
                            if (ej < 0) {
                                ej = col >> 8;
                                const unsigned char* c = slot + ((ej / 2) * 32 + lane) * 16 + (ej % 2) * 8;
                                wa = *reinterpret_cast<const unsigned*>(c);
                                wb = *reinterpret_cast<const unsigned*>(c + 4);
                                wn = *reinterpret_cast<const unsigned*>(slot + ((4 + ej / 4) * 32 + lane) * 16 + (ej % 4) * 4);
                            }
                            slow |= (col >> 8) != ej || count == 2;
                            (count == 0 ? e1 : e2) = ent;
                            count++;
                        }
                        const float down = pow2(-(int)(head & 0xff)), up = pow2(head & 0xff);
                        auto scaled = [&](unsigned ent, bool& exact) {
                            const float wt = __uint_as_float(ent >> 16 << 16), v = wt * down;
                            exact &= v * up == wt;
                            return v;
                        };
                        bool exact = true;
                        const float v1 = count > 0 ? scaled(e1, exact) : 0.f, v2 = count > 1 ? scaled(e2, exact) : 0.f;
                        slow = __any_sync(0xffffffffu, slow || !exact);  // then mode 6's path, before the refill
                        if (!slow) {
                            asm volatile("" ::"r"(wa), "r"(wb), "r"(wn), "r"(e1), "r"(e2));  // read before the slot is refilled
                            request(r + D * stride, d);
                            refilled = true;
                            if (ej >= 0) {
                                float w[8];
                                unpack_piece(wa, wb, wn, w);
#pragma unroll
                                for (int i = 0; i < 8; i++) {
                                    w[i] = (e1 & 7) == (unsigned)i ? v1 : w[i];
                                    w[i] = count > 1 && (e2 & 7) == (unsigned)i ? v2 : w[i];
                                }
                                const float* xp = xs + ej * 256 + lane * 8;
                                const float v = dot8f(w, *reinterpret_cast<const float4*>(xp), *reinterpret_cast<const float4*>(xp + 4));
#pragma unroll
                                for (int q = 0; q < 8; q++)
                                    if (q == ej) p[q] = v;
                            }
                        }
                    }
                    if ((MODE == 6 || slow) && (head >> 8)) {  // warp-uniform: this row has escapes
                        __syncwarp();  // the tail, copied by lanes 0..3, is read by any lane
                        const int ne = (head >> 8) & 0xff;
                        const float down = pow2(-(int)(head & 0xff)), up = pow2(head & 0xff);
                        for (int k = 0; k < ne; k++) {
                            const int col = tail[1 + k] & 0xffff;
                            if (((col >> 3) & 31) != lane) continue;
                            // Piece j decoded again, every escape of it put in place as w · 2^-base (exact
                            // unless a weight is 2^15 below the window: then redone with the true weights).
                            const int j = col >> 8;
                            const unsigned char* c = slot + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8;
                            float w[8];
                            unpack_piece(*reinterpret_cast<const unsigned*>(c), *reinterpret_cast<const unsigned*>(c + 4),
                                         *reinterpret_cast<const unsigned*>(slot + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4), w);
                            bool exact = true;
                            for (int k2 = 0; k2 < ne; k2++) {
                                const unsigned ent = tail[1 + k2];
                                if (((ent & 0xffff) >> 3) != (unsigned)(col >> 3)) continue;
                                const float wt = __uint_as_float(ent >> 16 << 16), v = wt * down;
                                exact &= v * up == wt;
#pragma unroll
                                for (int i = 0; i < 8; i++) w[i] = (ent & 7) == (unsigned)i ? v : w[i];
                            }
                            const float* xp = xs + (col & ~7);
                            const float v = exact ? dot8f(w, *reinterpret_cast<const float4*>(xp), *reinterpret_cast<const float4*>(xp + 4))
                                                  : redo_piece(slot, xs, col);
#pragma unroll
                            for (int q = 0; q < 8; q++)
                                if (q == j) p[q] = v;
                        }
                    }
                    if (MODE == 0 && (head >> 8)) {  // warp-uniform: this row has escapes
                        __syncwarp();  // the tail, copied by lanes 0..3, is read by any lane
                        const int ne = (head >> 8) & 0xff;
                        for (int k = 0; k < ne; k++) {
                            const int col = tail[1 + k] & 0xffff;
                            if (((col >> 3) & 31) != lane) continue;
                            const float v = redo_piece(slot, xs, col);
#pragma unroll
                            for (int q = 0; q < 8; q++)
                                if (q == (col >> 8)) p[q] = v;
                        }
                    }
#pragma unroll
                    for (int j = 0; j < 8; j++) acc += p[j];
                }
                acc = warp_sum(acc);
                if (lane == 0) y[r] = acc * pow2((int)(head & 0xff) - 96);
                if (refilled) continue;
            }
            request(r + D * stride, d);
        }
    }
}

// Every packed weight decoded whole (true_piece) against the bf16 original: mismatches counted.
__global__ void unpack_check(const unsigned char* __restrict__ packed, const unsigned char* __restrict__ tails,
                             const bf16* __restrict__ w, int rows, int* bad) {
    const int lane = threadIdx.x & 31, j = threadIdx.x >> 5;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const unsigned char* row = packed + (size_t)r * DATA;
        const unsigned* l8 = reinterpret_cast<const unsigned*>(row + ((j / 2) * 32 + lane) * 16 + (j % 2) * 8);
        const unsigned n = *reinterpret_cast<const unsigned*>(row + ((4 + j / 4) * 32 + lane) * 16 + (j % 4) * 4);
        float t[8];
        true_piece(l8[0], l8[1], n, reinterpret_cast<const unsigned*>(tails + (size_t)r * TAIL), j * 256 + lane * 8, t);
        const unsigned short* src = reinterpret_cast<const unsigned short*>(w) + (size_t)r * ROW + j * 256 + lane * 8;
        for (int i = 0; i < 8; i++)
            if ((__float_as_uint(t[i]) >> 16) != src[i]) atomicAdd(bad, 1);
    }
}


int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int pool_rows = 248320;  // the lm_head's rows: 2 × 124,160 or 20 × 12,352
    bf16* w;
    unsigned char *packed, *tails;
    float *x, *y0, *y1;
    int *stats, *bad;
    CK(cudaMalloc(&w, (size_t)pool_rows * 4096));
    CK(cudaMalloc(&packed, (size_t)pool_rows * DATA));
    CK(cudaMalloc(&tails, (size_t)pool_rows * TAIL));
    CK(cudaMalloc(&x, ROW * 4));
    CK(cudaMalloc(&y0, pool_rows * 4));
    CK(cudaMalloc(&y1, pool_rows * 4));
    CK(cudaMalloc(&stats, 64));
    CK(cudaMalloc(&bad, 4));
    {  // x: N(0, 1) with a few large columns, as a hidden state
        bf16* xb;
        CK(cudaMalloc(&xb, ROW * 2));
        fill_gauss<<<8, 256>>>(xb, ROW, 7, 1.0f);
        std::vector<unsigned short> hb(ROW);
        CK(cudaMemcpy(hb.data(), xb, ROW * 2, cudaMemcpyDeviceToHost));
        std::vector<float> hx(ROW);
        for (int i = 0; i < ROW; i++) {
            unsigned u = (unsigned)hb[i] << 16;
            memcpy(&hx[i], &u, 4);
        }
        hx[5] = 150.f, hx[700] = -90.f;
        CK(cudaMemcpy(x, hx.data(), ROW * 4, cudaMemcpyHostToDevice));
    }
    for (int laplace : {1, 0}) {  // the Gaussian pool last: the timings below use it
        CK(cudaMemset(stats, 0, 64));
        CK(cudaMemset(bad, 0, 4));
        fill_gauss<<<4096, 256>>>(w, (long long)pool_rows * ROW, 1, 0.02f, laplace);
        pack_rows<<<4096, 256>>>(w, packed, tails, pool_rows, stats);
        unpack_check<<<4096, 256>>>(packed, tails, w, pool_rows, bad);
        CK(cudaDeviceSynchronize());
        int hs[4], hbad;
        CK(cudaMemcpy(hs, stats, 16, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&hbad, bad, 4, cudaMemcpyDeviceToHost));
        printf("%s rows (sd 0.02), %d rows: %d escapes (%.3f a row), %d rows with any, at most %d in a row, %d rows over %d\n",
               laplace ? "Laplace" : "Gaussian", pool_rows, hs[0], (double)hs[0] / pool_rows, hs[1], hs[2], hs[3], ESC_MAX);
        printf("weights decoded whole that differ from the bf16 original: %d\n", hbad);
    }

    const int grid = 2 * sms;
    auto smem_of = [](bool packed_rows, int d) { return WARPS * d * (packed_rows ? SLOT : 4096) + ROW * 4; };
    CK(cudaFuncSetAttribute(gemv<false, 0, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(false, 2)));
    CK(cudaFuncSetAttribute(gemv<false, 0, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(false, 3)));
#define PACKED_KERNELS(D)                                                                                          \
    CK(cudaFuncSetAttribute(gemv<true, 0, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));     \
    CK(cudaFuncSetAttribute(gemv<true, 1, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));     \
    CK(cudaFuncSetAttribute(gemv<true, 2, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));     \
    CK(cudaFuncSetAttribute(gemv<true, 4, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));     \
    CK(cudaFuncSetAttribute(gemv<true, 5, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));     \
    CK(cudaFuncSetAttribute(gemv<true, 6, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));     \
    CK(cudaFuncSetAttribute(gemv<true, 7, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(true, D)));
    PACKED_KERNELS(2)
    PACKED_KERNELS(3)
    auto packed_gemv = [&](int mode, int d, const unsigned char* p, const unsigned char* t, int rows, float* out, cudaStream_t s) {
        const int sm = smem_of(true, d);
#define LAUNCH(M, D) if (mode == M && d == D) gemv<true, M, D><<<grid, 256, sm, s>>>(p, t, x, rows, out);
        LAUNCH(0, 2) LAUNCH(1, 2) LAUNCH(2, 2) LAUNCH(4, 2) LAUNCH(5, 2) LAUNCH(6, 2) LAUNCH(7, 2)
        LAUNCH(0, 3) LAUNCH(1, 3) LAUNCH(2, 3) LAUNCH(4, 3) LAUNCH(5, 3) LAUNCH(6, 3) LAUNCH(7, 3)
#undef LAUNCH
    };

    // Rows of the pool whose result in y1 differs from y0's in any bit.
    auto rows_differing = [&]() {
        std::vector<unsigned> a(pool_rows), b(pool_rows);
        CK(cudaMemcpy(a.data(), y0, pool_rows * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), y1, pool_rows * 4, cudaMemcpyDeviceToHost));
        int diff = 0;
        for (int i = 0; i < pool_rows; i++) diff += a[i] != b[i];
        return diff;
    };

    // Bit-exactness: every row of the pool, bf16 GEMV against the packed one (each ring depth).
    gemv<false, 0, 2><<<grid, 256, smem_of(false, 2)>>>(reinterpret_cast<const unsigned char*>(w), nullptr, x, pool_rows, y0);
    for (int dm : {20, 30, 24, 34, 25, 35, 26, 36, 27, 37}) {  // (rows in flight, mode)
        const int d = dm / 10, mode = dm % 10;
        CK(cudaMemset(y1, 0, pool_rows * 4));
        packed_gemv(mode, d, packed, tails, pool_rows, y1, 0);
        CK(cudaDeviceSynchronize());
        const int diff = rows_differing();
        printf("%d rows in flight, mode %d: rows whose packed GEMV result differs from the bf16 GEMV's in any bit: %d of %d\n", d, mode, diff, pool_rows);
    }

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const char* names[8] = {"exact, escaped pieces redone", "escapes ignored (timing only)", "no decode (timing only)", "",
                            "exact, escapes injected", "exact, injected, one path", "exact, escaped piece decoded again",
                            "exact, decoded again after the refill"};
    char name[128];
    for (int rows : {8192, 12352, 124160}) {
        const int regions = pool_rows / rows;  // launch i reads region i % regions (≥ 2 regions, each ≥ 33 MB: cold)
        const double mb = rows * 4096.0 / 1e6, pmb = rows * (double)(DATA + TAIL) / 1e6;
        printf("-- %d rows: %.1f MB as bf16, %.1f MB packed (TB/s below: bytes moved)\n", rows, mb, pmb);
        for (int d : {2, 3}) {
            snprintf(name, sizeof name, "bf16 rows, %d in flight a warp", d);
            time_graph(st, name, mb, [&](int i) {
                const unsigned char* p = reinterpret_cast<const unsigned char*>(w) + (size_t)(i % regions) * rows * 4096;
                if (d == 2) gemv<false, 0, 2><<<grid, 256, smem_of(false, 2), st>>>(p, nullptr, x, rows, y0);
                else gemv<false, 0, 3><<<grid, 256, smem_of(false, 3), st>>>(p, nullptr, x, rows, y0);
            });
        }
        const int same = (int)(rows * (double)(DATA + TAIL) / 4096);
        snprintf(name, sizeof name, "bf16 rows, %d of them (the packed bytes)", same);
        time_graph(st, name, same * 4096.0 / 1e6, [&](int i) {
            gemv<false, 0, 2><<<grid, 256, smem_of(false, 2), st>>>(reinterpret_cast<const unsigned char*>(w) + (size_t)(i % regions) * rows * 4096, nullptr, x, same, y0);
        });
        for (int d : {2, 3})
            for (int mode : {7, 6, 5, 4, 0, 1, 2}) {
                snprintf(name, sizeof name, "packed, %d in flight a warp, %s", d, names[mode]);
                time_graph(st, name, pmb, [&](int i) { const size_t r0 = (size_t)(i % regions) * rows;
                    packed_gemv(mode, d, packed + r0 * DATA, tails + r0 * TAIL, rows, y1, st); });
            }
    }
    {  // the 13-bit form (no escapes), Gaussian and Laplace rows
        unsigned char* p13;
        unsigned* b13;
        CK(cudaMalloc(&p13, (size_t)pool_rows * DATA13));
        CK(cudaMalloc(&b13, (size_t)pool_rows * 4));
        const int sm13 = WARPS * 2 * SLOT13 + ROW * 4, sm13_3 = WARPS * 3 * SLOT13 + ROW * 4;
        CK(cudaFuncSetAttribute(gemv<true, 13, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm13));
        CK(cudaFuncSetAttribute(gemv<true, 13, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm13_3));
        const unsigned char* b13c = reinterpret_cast<const unsigned char*>(b13);
        for (int laplace : {1, 0}) {
            CK(cudaMemset(stats, 0, 64));
            CK(cudaMemset(bad, 0, 4));
            fill_gauss<<<4096, 256>>>(w, (long long)pool_rows * ROW, 1, 0.02f, laplace);
            pack_rows13<<<4096, 256>>>(w, p13, b13, pool_rows, stats);
            unpack_check13<<<4096, 256>>>(p13, b13, w, pool_rows, bad);
            gemv<false, 0, 2><<<grid, 256, smem_of(false, 2)>>>(reinterpret_cast<const unsigned char*>(w), nullptr, x, pool_rows, y0);
            CK(cudaMemset(y1, 0, pool_rows * 4));
            gemv<true, 13, 2><<<grid, 256, sm13>>>(p13, b13c, x, pool_rows, y1);
            CK(cudaDeviceSynchronize());
            int hs[1], hbad;
            CK(cudaMemcpy(hs, stats, 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(&hbad, bad, 4, cudaMemcpyDeviceToHost));
            printf("13-bit form, %s rows: %d unpackable rows, %d weights decoded wrong, %d rows whose GEMV result differs in any bit\n",
                   laplace ? "Laplace" : "Gaussian", hs[0], hbad, rows_differing());
        }
        for (int rows : {8192, 12352, 124160}) {
            const int regions = pool_rows / rows;
            printf("-- %d rows, the 13-bit form (%.1f MB)\n", rows, rows * (DATA13 + 4.0) / 1e6);
            for (int d : {2, 3}) {
                snprintf(name, sizeof name, "13-bit rows, %d in flight a warp", d);
                time_graph(st, name, rows * (DATA13 + 4.0) / 1e6, [&](int i) {
                    const size_t r0 = (size_t)(i % regions) * rows;
                    if (d == 2) gemv<true, 13, 2><<<grid, 256, sm13, st>>>(p13 + r0 * DATA13, b13c + r0 * 4, x, rows, y1);
                    else gemv<true, 13, 3><<<grid, 256, sm13_3, st>>>(p13 + r0 * DATA13, b13c + r0 * 4, x, rows, y1);
                });
            }
        }
    }
    {  // x from shared memory instead of registers (the exact forms sit at the register cap)
        auto set = [&](auto k, int sm) { CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); };
        set(gemv<false, 0, 2, true>, smem_of(false, 2));
        set(gemv<true, 0, 2, true>, smem_of(true, 2));
        set(gemv<true, 1, 2, true>, smem_of(true, 2));
        set(gemv<true, 4, 2, true>, smem_of(true, 2));
        auto launch_xs = [&](int mode, const unsigned char* p, const unsigned char* t, int rows, cudaStream_t s) {
            if (mode == -1) gemv<false, 0, 2, true><<<grid, 256, smem_of(false, 2), s>>>(p, t, x, rows, y0);
            if (mode == 0) gemv<true, 0, 2, true><<<grid, 256, smem_of(true, 2), s>>>(p, t, x, rows, y1);
            if (mode == 1) gemv<true, 1, 2, true><<<grid, 256, smem_of(true, 2), s>>>(p, t, x, rows, y1);
            if (mode == 4) gemv<true, 4, 2, true><<<grid, 256, smem_of(true, 2), s>>>(p, t, x, rows, y1);
        };
        gemv<false, 0, 2><<<grid, 256, smem_of(false, 2)>>>(reinterpret_cast<const unsigned char*>(w), nullptr, x, pool_rows, y0);
        for (int mode : {0, 4}) {
            CK(cudaMemset(y1, 0, pool_rows * 4));
            launch_xs(mode, packed, tails, pool_rows, 0);
            CK(cudaDeviceSynchronize());
            printf("x from shared memory, mode %d: rows whose result differs from the bf16 GEMV's in any bit: %d of %d\n", mode,
                   rows_differing(), pool_rows);
        }
        for (int rows : {8192, 12352}) {
            const int regions = pool_rows / rows;
            printf("-- %d rows, x from shared memory, 2 rows in flight a warp\n", rows);
            time_graph(st, "bf16 rows", rows * 4096.0 / 1e6, [&](int i) {
                launch_xs(-1, reinterpret_cast<const unsigned char*>(w) + (size_t)(i % regions) * rows * 4096, nullptr, rows, st);
            });
            for (int mode : {4, 0, 1}) {
                time_graph(st, names[mode], rows * (double)(DATA + TAIL) / 1e6, [&](int i) {
                    const size_t r0 = (size_t)(i % regions) * rows;
                    launch_xs(mode, packed + r0 * DATA, tails + r0 * TAIL, rows, st);
                });
            }
        }
    }
    {  // the same weights without escapes (uniform, as solo's synthetic ones): is it the escapes' work or the code?
        CK(cudaMemset(stats, 0, 64));
        fill_uniform<<<4096, 256>>>(w, (long long)pool_rows * ROW, 3, 0.0383f);
        pack_rows<<<4096, 256>>>(w, packed, tails, pool_rows, stats);
        CK(cudaDeviceSynchronize());
        int hs[4];
        CK(cudaMemcpy(hs, stats, 16, cudaMemcpyDeviceToHost));
        const int rows = 12352, regions = pool_rows / rows;
        printf("-- uniform rows (U(-0.0383, 0.0383)): %d escapes in %d rows; %d rows\n", hs[0], pool_rows, rows);
        gemv<false, 0, 2><<<grid, 256, smem_of(false, 2)>>>(reinterpret_cast<const unsigned char*>(w), nullptr, x, pool_rows, y0);
        packed_gemv(5, 2, packed, tails, pool_rows, y1, 0);
        CK(cudaDeviceSynchronize());
        const int diff = rows_differing();
        printf("escapes injected, one path: rows whose result differs from the bf16 GEMV's in any bit: %d of %d\n", diff, pool_rows);
        for (int d : {2, 3})
            for (int mode : {7, 6, 5, 4, 0, 1}) {
                snprintf(name, sizeof name, "packed, %d in flight a warp, %s", d, names[mode]);
                time_graph(st, name, rows * (double)(DATA + TAIL) / 1e6, [&](int i) {
                    const size_t r0 = (size_t)(i % regions) * rows;
                    packed_gemv(mode, d, packed + r0 * DATA, tails + r0 * TAIL, rows, y1, st);
                });
            }
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
