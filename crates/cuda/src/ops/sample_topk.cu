// Sampling on the device with temperature, top-k and top-p: the semantics of the CPU sampler
// (`solo_model::sampler::Sampler::sample`), with no host round trip, so a captured decode graph
// can end with it.
//
// Candidates are 64-bit keys that sort like the CPU's order (logit descending by total order,
// ties to the lower index): high word = the logit's bits mapped to an order-preserving unsigned
// integer, low word = 0xffffffff − index. Key 0 is padding (below every real key).
//
// sample_topk_partial: SAMPLE_PARTS blocks × 1024 threads. Block b takes the contiguous slice
//   [b·chunk, (b+1)·chunk) (chunk = ceil(n / SAMPLE_PARTS); 1940 for the real vocabulary), and
//   bitonic-sorts it in shared memory, SORT_N keys per round (later rounds keep the best
//   SAMPLE_CAND in front and refill the rest), and writes its best SAMPLE_CAND keys, sorted
//   descending, to parts[b·SAMPLE_CAND ..].
// sample_topk_final: 1 block × 1024 threads. Merges the sorted lists pairwise (bitonic
//   half-cleaner + bitonic merge keeps the best 64 of two sorted 64-lists) down to the global
//   top 64, then one thread does what the CPU does, in the CPU's order of f32 operations:
//   softmax((l − max) / T) over the top k, the smallest prefix whose mass reaches top_p, then a
//   draw r = u · (kept mass) and the first candidate whose running mass exceeds r. The uniform u
//   is SplitMix64 at counter step + 1 from the seed (exactly the CPU `SplitMix(seed)` stream:
//   draw number step + 1), and step is incremented, so graph replays draw fresh numbers.
//   Temperature ≤ 0 (or NaN) is greedy: the top candidate, no draw (the argmax, ties to the
//   lower index). Optionally appends the id to a history (i32 [1 + cap]: count, then ids) and
//   writes the 64 candidates (i32 ids [64], then f32 logits [64]) for tests.
#define SAMPLE_PARTS 128
#define SAMPLE_CAND 64
#define SORT_N 2048
#define SAMPLE_THREADS 1024

__device__ __forceinline__ uint64_t sample_key(float v, int i) {
    const uint32_t b = __float_as_uint(v);
    const uint32_t o = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((uint64_t)o << 32) | (uint64_t)(0xffffffffu - (uint32_t)i);
}

__device__ __forceinline__ float key_logit(uint64_t k) {
    const uint32_t o = (uint32_t)(k >> 32);
    return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

__device__ __forceinline__ int key_index(uint64_t k) { return (int)(0xffffffffu - (uint32_t)k); }

// Sorts s[0, len) descending (len a power of two); every thread of the block calls it.
// Ends with __syncthreads.
__device__ void bitonic_sort_desc(uint64_t* s, int len) {
    for (int k = 2; k <= len; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int p = threadIdx.x; p < len / 2; p += blockDim.x) {
                const int i = ((p & ~(j - 1)) << 1) | (p & (j - 1));
                const uint64_t a = s[i], b = s[i + j];
                const bool desc = (i & k) == 0;
                if (desc ? a < b : a > b) { s[i] = b; s[i + j] = a; }
            }
            __syncthreads();
        }
    }
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
sample_topk_partial(const float* __restrict__ logits, int n, uint64_t* __restrict__ parts) {
    pdl_trigger();
    pdl_wait();
    __shared__ uint64_t s[SORT_N];
    const int chunk = (n + SAMPLE_PARTS - 1) / SAMPLE_PARTS;
    const int begin = blockIdx.x * chunk;
    const int end = min(n, begin + chunk);
    int next = begin;  // first slice element not yet loaded
    int keep = 0;      // sorted keys carried over from the previous round
    do {
        for (int j = keep + threadIdx.x; j < SORT_N; j += blockDim.x) {
            const int i = next + (j - keep);
            s[j] = i < end ? sample_key(logits[i], i) : 0ull;
        }
        next += SORT_N - keep;
        keep = SAMPLE_CAND;
        __syncthreads();
        bitonic_sort_desc(s, SORT_N);
    } while (next < end);
    for (int j = threadIdx.x; j < SAMPLE_CAND; j += blockDim.x) parts[blockIdx.x * SAMPLE_CAND + j] = s[j];
}

// Sorts each of `lists` bitonic 64-key lists, list m at s + m·stride·64, descending.
// Ends with __syncthreads.
__device__ void bitonic_merge_lists(uint64_t* s, int lists, int stride) {
    for (int j = SAMPLE_CAND / 2; j > 0; j >>= 1) {
        for (int p = threadIdx.x; p < lists * (SAMPLE_CAND / 2); p += blockDim.x) {
            const int m = p / (SAMPLE_CAND / 2), q = p % (SAMPLE_CAND / 2);
            const int i = ((q & ~(j - 1)) << 1) | (q & (j - 1));
            uint64_t* l = s + m * stride * SAMPLE_CAND;
            const uint64_t a = l[i], b = l[i + j];
            if (a < b) { l[i] = b; l[i + j] = a; }
        }
        __syncthreads();
    }
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
sample_topk_final(const uint64_t* __restrict__ parts, int n, SamplingParams* __restrict__ params,
                  int* __restrict__ out, int* __restrict__ history, int history_cap,
                  int* __restrict__ candidates) {
    pdl_trigger();
    pdl_wait();
    // The first merge level happens while loading: best 64 of lists 2m and 2m+1 (half-cleaner:
    // max(a[i], b[63 − i]) is bitonic and holds the best 64 of the two).
    __shared__ uint64_t s[SAMPLE_PARTS / 2 * SAMPLE_CAND];
    __shared__ float weight[SAMPLE_CAND];
    int lists = SAMPLE_PARTS / 2;
    for (int p = threadIdx.x; p < lists * SAMPLE_CAND; p += blockDim.x) {
        const int m = p / SAMPLE_CAND, i = p % SAMPLE_CAND;
        const uint64_t a = parts[(2 * m) * SAMPLE_CAND + i], b = parts[(2 * m + 1) * SAMPLE_CAND + SAMPLE_CAND - 1 - i];
        s[p] = a > b ? a : b;
    }
    __syncthreads();
    for (int stride = 1;; stride <<= 1) {
        bitonic_merge_lists(s, lists, stride);
        if (lists == 1) break;
        lists >>= 1;
        for (int p = threadIdx.x; p < lists * SAMPLE_CAND; p += blockDim.x) {
            const int m = p / SAMPLE_CAND, i = p % SAMPLE_CAND;
            uint64_t* a = s + (2 * m) * stride * SAMPLE_CAND;
            const uint64_t* b = a + stride * SAMPLE_CAND;
            const uint64_t x = a[i], y = b[SAMPLE_CAND - 1 - i];
            a[i] = x > y ? x : y;
        }
        __syncthreads();
    }
    // s[0, 64): the global top 64, sorted.
    if (candidates != nullptr && threadIdx.x < SAMPLE_CAND) {
        candidates[threadIdx.x] = key_index(s[threadIdx.x]);
        reinterpret_cast<float*>(candidates)[SAMPLE_CAND + threadIdx.x] = key_logit(s[threadIdx.x]);
    }
    const float temperature = params->temperature;
    const bool greedy = !(temperature > 0.f);
    const int k = max(1, min(params->top_k, min(n, SAMPLE_CAND)));
    if (!greedy && threadIdx.x < k) weight[threadIdx.x] = expf((key_logit(s[threadIdx.x]) - key_logit(s[0])) / temperature);
    __syncthreads();
    if (threadIdx.x != 0) return;
    int id = key_index(s[0]);
    if (!greedy) {
        // Sequential, in the CPU's order: probabilities normalised over the top k ...
        float total = 0.f;
        for (int i = 0; i < k; i++) total += weight[i];
        // ... the smallest prefix whose mass reaches top_p (at least one) ...
        const float top_p = params->top_p;
        int keep = k;
        float mass = 0.f;
        for (int i = 0; i < k; i++) {
            mass += weight[i] / total;
            if (mass >= top_p) { keep = i + 1; break; }
        }
        float kept = 0.f;
        for (int i = 0; i < keep; i++) kept += weight[i] / total;
        // ... and r = u · kept, u from SplitMix64 draw number step + 1.
        const uint64_t step = params->step;
        const uint64_t z = splitmix64(params->seed + (step + 1) * 0x9e3779b97f4a7c15ull);
        const float r = (float)(z >> 40) * (1.f / 16777216.f) * kept;
        id = key_index(s[keep - 1]);
        float acc = 0.f;
        for (int i = 0; i < keep; i++) {
            acc += weight[i] / total;
            if (r < acc) { id = key_index(s[i]); break; }
        }
        params->step = step + 1;
    }
    *out = id;
    if (history != nullptr) {
        const int c = history[0];
        if (c < history_cap) {
            history[1 + c] = id;
            history[0] = c + 1;
        }
    }
}
