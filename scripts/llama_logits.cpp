// Records llama.cpp's logits for the GGUF parity fixtures (built by scripts/build_llama_cpp.sh,
// run by scripts/make_gguf_fixtures.py; not part of CI).
//
//   llama-logits MODEL.gguf TOKENS PREFILL OUT.f32
//     TOKENS: comma-separated ids. The first PREFILL tokens go through one llama_decode (prefill),
//     the rest one token per llama_decode (decode steps). OUT.f32: one vocab-sized f32 row per
//     token, little-endian, row i predicting token i + 1 (solo's `logits` command's layout).
//   llama-logits MODEL.gguf --tokenize TEXT
//     prints llama.cpp's token ids of TEXT (no BOS added, special tokens parsed), comma-separated.
//   llama-logits --bench MODEL.gguf PROMPT DEPTHS DECODE
//     llama-bench's two numbers on every GPU layer (the crate does not ship llama-bench's source):
//     prompt processing of PROMPT tokens (batches of 2048, micro-batches of 512, flash attention
//     on auto, f16 KV cache: llama-bench's defaults), and for each comma-separated depth D,
//     DECODE tokens generated one at a time after D tokens of context. Random tokens; the median
//     of 3 runs; one JSON line per number.
//   llama-logits --quantize IN.gguf OUT.gguf FTYPE [REGEX=TYPE ...]
//     llama-quantize's work through libllama's llama_model_quantize (the crate ships the library
//     but not the tool's source): FTYPE is a llama_ftype number (15 = Q4_K_M), each REGEX=TYPE
//     forces the tensors whose names match REGEX to the ggml_type number TYPE.
//
// Threads: LLAMA_THREADS (default 2) for the quantizer and the logits recorder.
//
// The KV cache is f32 and flash attention off, so that on f32 weights the only differences from
// solo's f32 reference are the order of sums.
#include "llama.h"
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static int threads() {
    const char * s = getenv("LLAMA_THREADS");
    return s && atoi(s) > 0 ? atoi(s) : 2;
}

static void quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// Decodes `tokens` from position `pos` in batches of at most `batch`; false on failure.
static bool feed(llama_context * ctx, const std::vector<llama_token> & tokens, int pos, int batch) {
    for (size_t at = 0; at < tokens.size(); at += batch) {
        const int n = (int) std::min<size_t>(batch, tokens.size() - at);
        llama_batch b = llama_batch_init(n, 0, 1);
        b.n_tokens = n;
        for (int i = 0; i < n; i++) {
            b.token[i] = tokens[at + i];
            b.pos[i] = pos + (int) at + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = i == n - 1;
        }
        const int rc = llama_decode(ctx, b);
        llama_batch_free(b);
        if (rc != 0) return false;
    }
    llama_synchronize(ctx);
    return true;
}

static double median3(double a, double b, double c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); }

static int bench(const char * path, int prompt, const char * depths, int decode) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 999;
    llama_model * model = llama_model_load_from_file(path, mp);
    if (!model) { fprintf(stderr, "llama.cpp could not load %s\n", path); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<int> ds;
    for (const char * p = depths; *p;) {
        ds.push_back((int) strtol(p, (char **) &p, 10));
        if (*p == ',') p++;
    }
    int most = prompt;
    for (int d : ds) most = std::max(most, d + decode);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = most + 16;
    cp.n_batch = 2048;
    cp.n_ubatch = 512;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "no context\n"); return 1; }
    unsigned seed = 12345;
    auto random_tokens = [&](int n) {
        std::vector<llama_token> t(n);
        for (auto & x : t) x = (llama_token) ((seed = seed * 1103515245u + 12345u) >> 8) % n_vocab;
        return t;
    };
    auto clear = [&]() { llama_memory_clear(llama_get_memory(ctx), true); };
    // warm-up
    clear();
    if (!feed(ctx, random_tokens(std::min(prompt, 512)), 0, 2048)) return 1;
    double pp[3];
    for (double & r : pp) {
        clear();
        auto t = random_tokens(prompt);
        const int64_t t0 = ggml_time_us();
        if (!feed(ctx, t, 0, 2048)) return 1;
        r = prompt / ((ggml_time_us() - t0) / 1e6);
    }
    printf("{\"test\": \"pp%d\", \"tok_s\": %.1f}\n", prompt, median3(pp[0], pp[1], pp[2]));
    for (int d : ds) {
        double tg[3];
        for (double & r : tg) {
            clear();
            if (d > 0 && !feed(ctx, random_tokens(d), 0, 2048)) return 1;
            const int64_t t0 = ggml_time_us();
            for (int i = 0; i < decode; i++) {
                if (!feed(ctx, random_tokens(1), d + i, 1)) return 1;
            }
            r = decode / ((ggml_time_us() - t0) / 1e6);
        }
        printf("{\"test\": \"tg%d @ d%d\", \"tok_s\": %.1f}\n", decode, d, median3(tg[0], tg[1], tg[2]));
        fflush(stdout);
    }
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.gguf TOKENS PREFILL OUT.f32 | MODEL.gguf --tokenize TEXT\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    if (std::string(argv[1]) == "--quantize") {
        if (argc < 5) { fprintf(stderr, "usage: --quantize IN OUT FTYPE [REGEX=TYPE ...]\n"); return 2; }
        std::vector<std::string> patterns;
        std::vector<llama_model_tensor_override> overrides;
        for (int i = 5; i < argc; i++) {
            std::string arg = argv[i];
            size_t eq = arg.rfind('=');
            patterns.push_back(arg.substr(0, eq));
            overrides.push_back({nullptr, (ggml_type) atoi(arg.substr(eq + 1).c_str())});
        }
        for (size_t i = 0; i < overrides.size(); i++) overrides[i].pattern = patterns[i].c_str();
        overrides.push_back({nullptr, GGML_TYPE_COUNT});
        llama_model_quantize_params qp = llama_model_quantize_default_params();
        qp.nthread = threads();
        qp.ftype = (llama_ftype) atoi(argv[4]);
        qp.tt_overrides = overrides.size() > 1 ? overrides.data() : nullptr;
        return llama_model_quantize(argv[2], argv[3], &qp) == 0 ? 0 : 1;
    }
    if (std::string(argv[1]) == "--bench") {
        if (argc < 6) { fprintf(stderr, "usage: --bench MODEL PROMPT DEPTHS DECODE\n"); return 2; }
        return bench(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
    }
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "llama.cpp could not load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    if (std::string(argv[2]) == "--tokenize") {
        std::string text = argv[3];
        std::vector<llama_token> ids(text.size() + 16);
        int n = llama_tokenize(vocab, text.data(), (int) text.size(), ids.data(), (int) ids.size(), false, true);
        if (n < 0) { fprintf(stderr, "tokenize failed\n"); return 1; }
        for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
        return 0;
    }
    if (argc < 5) { fprintf(stderr, "missing OUT.f32\n"); return 2; }

    std::vector<llama_token> tokens;
    for (char * p = argv[2]; *p;) {
        tokens.push_back((llama_token) strtol(p, &p, 10));
        if (*p == ',') p++;
    }
    const int n = (int) tokens.size();
    const int prefill = atoi(argv[3]);
    if (prefill < 1 || prefill > n) { fprintf(stderr, "PREFILL must be in 1..%d\n", n); return 2; }

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = cp.n_ubatch = 256;
    cp.n_threads = cp.n_threads_batch = threads();
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "no context\n"); return 1; }
    const int n_vocab = llama_vocab_n_tokens(vocab);

    std::vector<float> out((size_t) n * n_vocab);
    llama_batch batch = llama_batch_init(n, 0, 1);
    int done = 0;
    while (done < n) {
        const int count = done == 0 ? prefill : 1;
        batch.n_tokens = count;
        for (int i = 0; i < count; i++) {
            batch.token[i] = tokens[done + i];
            batch.pos[i] = done + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "llama_decode failed at %d\n", done); return 1; }
        for (int i = 0; i < count; i++) {
            memcpy(&out[(size_t) (done + i) * n_vocab], llama_get_logits_ith(ctx, i), sizeof(float) * n_vocab);
        }
        done += count;
    }
    FILE * f = fopen(argv[4], "wb");
    if (!f || fwrite(out.data(), sizeof(float), out.size(), f) != out.size()) { fprintf(stderr, "cannot write %s\n", argv[4]); return 1; }
    fclose(f);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
