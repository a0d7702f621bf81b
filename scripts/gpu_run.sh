#!/usr/bin/env bash
# What the GPU machine runs, in one call (it keeps nothing between calls):
#   scripts/gpu_run.sh [tests] [test NAME [N]] [tests-portable] [anycard] [formats] [targets] [kernels] [parity] [parity-portable] [lora-parity] [image-parity WxH] [bench CONTEXTS ROUNDS] [image WxH] [batch COUNTS] [serve] [serve24] [ttft] [load] [llama-build] [gguf MIX] [gguf-quality] [gguf-slice-quality]
# (env: BENCH_ARGS, e.g. --profile; BENCH_TAG names the bench's output files; PARITY_ARGS and
# IMAGE_PARITY_ARGS: more flags for slice_parity.py and slice_parity_image.py)
# Expects the binaries built on the CPU machine and carried in gpu-bin/:
#   gpu-bin/solo             (cargo build --release -p solo)
#   gpu-bin/solo_cuda_tests  (the solo-cuda unit-test binary: cargo test --release -p solo-cuda --no-run)
#   gpu-bin/llama-src.tgz, gpu-bin/llama_logits.cpp, gpu-bin/pylib  (for llama-build and the gguf steps:
#   scripts/pack_llama_cpp.sh)
#   gpu-bin/kernel-cache.tgz  (optional: the kernels compiled here, so a fresh machine starts
#   without ~1 min of NVRTC: `SOLO_CACHE=DIR solo kernels --arch sm_90a --arch sm_80`, then
#   `tar czf gpu-bin/kernel-cache.tgz -C DIR kernels`; sm_80 is the portable forms')
#   A branch's kernels ride on these binaries as a cache overlay (scripts/kernel_overlay.sh): no
#   second binary to carry.
# Writes logs and JSON under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/solo-out}
mkdir -p "$OUT"
export SOLO_CACHE=/tmp/solo-cache
if [ -f gpu-bin/kernel-cache.tgz ]; then mkdir -p "$SOLO_CACHE" && tar xzf gpu-bin/kernel-cache.tgz -C "$SOLO_CACHE"; fi
# libcublas/libnvrtc: the system's CUDA, else the pip wheels next to PyTorch.
wheels=$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${wheels}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
status=0
# A 4-layer full-width slice (random weights, a tokenizer of the real vocabulary) for solo serve.
slice=/tmp/solo-serve-slice
make_serve_slice() {
    [ -f "$slice/tokenizer.json" ] && return
    (cd scripts && python3 -c "import torch; from slice_parity import real_config, randomise; from transformers import Qwen3_5MoeForCausalLM
torch.manual_seed(0)
with torch.device('cuda'): m = Qwen3_5MoeForCausalLM(real_config(4)).to(torch.bfloat16)
randomise(m, 0, 'hf-router'); m.save_pretrained('$slice')") > "$OUT/slice.log" 2>&1 || status=1
    cp fixtures/tiny-a/chat_template.jinja "$slice/" && python3 scripts/serve_load.py --make-tokenizer "$slice"
}
# llama.cpp built for the CPU from the carried source (scripts/pack_llama_cpp.sh), kept in
# /tmp/llama-cpu while the machine stays warm: the gguf-quality steps' llama-logits.
cpu=/tmp/llama-cpu
build_llama_cpu() {
    [ -x $cpu/build/bin/llama-logits ] && return
    mkdir -p $cpu && tar xzf gpu-bin/llama-src.tgz -C $cpu
    (cmake -S $cpu -B $cpu/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_CUDA=OFF \
        -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        && timeout 300 cmake --build $cpu/build -j"$(nproc)" --target llama \
        && g++ -O2 -std=c++17 -I$cpu/include -I$cpu/ggml/include gpu-bin/llama_logits.cpp -L$cpu/build/bin \
            -lllama -lggml -lggml-base -Wl,-rpath,$cpu/build/bin -o $cpu/build/bin/llama-logits) \
        > "$OUT/llama_cpu_build.log" 2>&1 || { tail -20 "$OUT/llama_cpu_build.log"; status=1; }
}
while [ $# -gt 0 ]; do
    case "$1" in
        tests)
            timeout 300 ./gpu-bin/solo_cuda_tests --include-ignored --test-threads=1 2>&1 | tee "$OUT/kernel_tests.log" || status=1
            shift ;;
        test)
            # one GPU test (a name filter) with its printout, N times (`test adapted_steps 2`: its
            # numbers run to run); SOLO_PORTABLE_KERNELS / SOLO_SM_LIMIT pass through
            n=1; [[ "${3:-}" =~ ^[0-9]+$ ]] && n=$3
            for i in $(seq "$n"); do
                echo "== test $2, run $i"
                timeout 300 ./gpu-bin/solo_cuda_tests --include-ignored --test-threads=1 --nocapture "$2" > "$OUT/test_$2_$i.log" 2>&1 || status=1
                grep -aE "^test |^test result|panicked|row [0-9]+:|decode vs|miswired" "$OUT/test_$2_$i.log" | cut -c1-300 | tail -40
            done
            if [ "$n" = "${3:-}" ]; then shift 3; else shift 2; fi ;;
        tests-portable)
            # the same tests on the kernels' portable forms, under an RTX 3090's limits (82 SMs,
            # 99 KB of shared memory a block)
            SOLO_PORTABLE_KERNELS=1 SOLO_SM_LIMIT=82 timeout 300 ./gpu-bin/solo_cuda_tests --include-ignored --test-threads=1 2>&1 | tee "$OUT/kernel_tests_portable.log" || status=1
            shift ;;
        anycard)
            # issue #43's breakdown (int4, batch 1, 256, --profile): the Hopper forms, the portable
            # forms under an RTX 3090's limits, the Hopper forms on 82 SMs, the portable forms on
            # every SM (bench/RESULTS.md "Any card")
            for form in "hopper" "portable82 --portable-kernels --sm-limit 82 --gpu-memory 24GiB" \
                "hopper82 --sm-limit 82" "portable --portable-kernels"; do
                tag=${form%% *}; flags=${form#"$tag"}
                # shellcheck disable=SC2086
                timeout 120 ./gpu-bin/solo bench --synthetic --precision int4 --contexts 256 --rounds 3 --profile $flags \
                    --json "$OUT/anycard_$tag.json" > "$OUT/anycard_$tag.log" 2>&1 || status=1
                echo "anycard $tag: $(grep -m1 'context 256:' "$OUT/anycard_$tag.log")"
            done
            shift ;;
        formats)
            # the weight formats' decode step side by side (batch 1, 256, --profile): bf16, int4
            # (the official shape), the synthetic Q4_K_M (bench/RESULTS.md "GGUF Q4_K_M on CUDA")
            for p in bf16 int4 q4_k_m; do
                timeout 120 ./gpu-bin/solo bench --synthetic --precision $p --contexts 256 --rounds 3 --profile \
                    --json "$OUT/formats_$p.json" > "$OUT/formats_$p.log" 2>&1 || status=1
                echo "formats $p: $(grep -m1 'context 256:' "$OUT/formats_$p.log")"
            done
            shift ;;
        targets)
            # the open issues' target figures in one call (bench/RESULTS.md; the targets are H200
            # figures): int4 and int4-all (#40: decode 256 / 32K, prefill 4K), bf16 and FP8 beside
            # them, rank-16 adapters (#47), Q4_K_M (#48), a 1024² image (#45)
            for run in "int4 --precision int4 --contexts 256,4096,32768" \
                "int4all --precision int4-all --contexts 256,4096,32768" "bf16 --contexts 256" \
                "fp8 --precision fp8 --contexts 256" "lora_attn --contexts 256 --lora-rank 16 --lora-targets attn" \
                "lora_all --contexts 256 --lora-rank 16 --lora-targets all" \
                "q4km --precision q4_k_m --contexts 256,4096,32768" "image --contexts 8192 --image 1024x1024"; do
                tag=${run%% *}; flags=${run#"$tag"}
                # shellcheck disable=SC2086
                timeout 150 ./gpu-bin/solo bench --synthetic --rounds 3 $flags --json "$OUT/targets_$tag.json" \
                    > "$OUT/targets_$tag.log" 2>&1 || status=1
                echo "targets $tag:"; grep -E 'context [0-9]+:|tower|first token|decode after' "$OUT/targets_$tag.log" | head -5
            done
            shift ;;
        kernels)
            timeout 300 ./gpu-bin/solo bench --synthetic --kernels --json "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log" || status=1
            shift ;;
        parity)
            PYTHONUNBUFFERED=1 timeout 400 python3 scripts/slice_parity.py --cpu ${PARITY_ARGS:-} --solo gpu-bin/solo --dir /tmp/solo-slice --out "$OUT" 2>&1 | tee "$OUT/parity.log" || status=1
            shift ;;
        parity-portable)
            # the same slice parity with the kernels' portable forms under an RTX 3090's limits (82
            # SMs, 99 KB of shared memory a block: issue #43), through a wrapper that adds the flags
            printf '#!/bin/sh\nexec "%s" --portable-kernels --sm-limit 82 "$@"\n' "$PWD/gpu-bin/solo" > /tmp/solo-portable
            chmod +x /tmp/solo-portable
            mkdir -p "$OUT/portable"
            PYTHONUNBUFFERED=1 timeout 400 python3 scripts/slice_parity.py ${PARITY_ARGS:-} --solo /tmp/solo-portable --dir /tmp/solo-slice --out "$OUT/portable" 2>&1 | tee "$OUT/parity_portable.log" || status=1
            shift ;;
        lora-parity)
            # a random rank-16 PEFT adapter on a 4-layer slice: solo logits --lora (CUDA) against
            # PEFT fp32, PEFT bf16 as the floor (gpu-bin/peftlib: PEFT where the machine lacks it)
            PYTHONUNBUFFERED=1 timeout 500 python3 scripts/slice_parity_lora.py ${LORA_PARITY_ARGS:-} --solo gpu-bin/solo --dir /tmp/solo-slice --out "$OUT" 2>&1 | tee "$OUT/lora_parity.log" || status=1
            shift ;;
        image-parity)
            # the release's vision tower + a 4-layer slice on a W×H random picture: solo logits
            # --image (CUDA and the CPU reference) against HF fp32, HF bf16 as the floor
            PYTHONUNBUFFERED=1 timeout 580 python3 scripts/slice_parity_image.py --image "$2" --cpu ${IMAGE_PARITY_ARGS:-} --solo gpu-bin/solo --dir /tmp/solo-slice-image --out "$OUT" 2>&1 | tee "$OUT/image_parity_$2.log" || status=1
            shift 2 ;;
        bench)
            timeout 400 ./gpu-bin/solo bench --synthetic --contexts "$2" --rounds "$3" ${BENCH_ARGS:-} --json "$OUT/bench${BENCH_TAG:-}.json" 2>&1 | tee "$OUT/bench${BENCH_TAG:-}.log" || status=1
            shift 3 ;;
        image)
            # the vision tower on a W×H image and TTFT of image + 256 tokens: the fused attention,
            # then the cuBLAS form with 1 GiB and 32 MiB (L2-resident) query blocks of scores
            for mb in fused 1024 32; do
                if [ $mb = fused ]; then unset SOLO_VISION_SCORES_MB; else export SOLO_VISION_SCORES_MB=$mb; fi
                timeout 300 ./gpu-bin/solo bench --synthetic --contexts 8192 --image "$2" --rounds 5 2>&1 | tee "$OUT/image_$2_$mb.log" || status=1
            done
            unset SOLO_VISION_SCORES_MB
            shift 2 ;;
        batch)
            timeout 300 ./gpu-bin/solo bench --synthetic --contexts 4096 --batch "$2" --rounds 3 ${BENCH_ARGS:-} --json "$OUT/batch.json" 2>&1 | tee "$OUT/batch.log" || status=1
            shift 2 ;;
        serve)
            # solo serve on a 4-layer full-width slice (random weights, a tokenizer of the real
            # vocabulary): streaming clients at once, batched and in turns, against solo bench --model
            make_serve_slice
            for mode in "" --no-batch-decode; do
                ./gpu-bin/solo serve --model "$slice" --backend cuda --max-seq 40960 --port 8000 $mode > "$OUT/serve$mode.log" 2>&1 &
                for _ in $(seq 60); do curl -sf localhost:8000/health > /dev/null && break; sleep 1; done
                for n in 1 2 4 8; do
                    python3 scripts/serve_load.py --clients $n --prompt-tokens 4096 --json "$OUT/load${mode}_$n.json" | tail -1 | sed "s/^/${mode:-batched} $n clients: /" | tee -a "$OUT/serve_load.log"
                done
                python3 scripts/serve_load.py --clients 1 --prompt-tokens 32768 | tail -1 | sed "s/^/${mode:-batched} 1 client at 32K: /" | tee -a "$OUT/serve_load.log"
                kill %1; wait
            done
            ./gpu-bin/solo bench --model "$slice" --contexts 4096,32768 --rounds 3 2>&1 | tee "$OUT/bench_slice.log" || status=1
            shift ;;
        serve24)
            # issue #43's 24 GiB run: a full-size GPTQ-Int4 checkpoint of random weights (the
            # official shape, ~22 GB, written once in /tmp/solo-int4-full by make_int4_full.py), solo
            # serve --gpu-memory 24GiB on it, and a conversation through the stock openai client until
            # the prompt holds 32K tokens, then a request past the context and one after it
            # (serve_conversation.py); the GPU memory in use while the server holds its state. The
            # GPU machine has no openai package: carry .whl (.whl/openai/: its wheels for Python 3.12,
            # pip download --no-deps --only-binary=:all: --python-version 3.12 of openai and its
            # needs). The whole step ends within ~540 s.
            end=$((SECONDS + 540))
            int4=/tmp/solo-int4-full
            [ -f $int4/model.safetensors.index.json ] || PYTHONUNBUFFERED=1 timeout 300 python3 scripts/make_int4_full.py $int4 2>&1 \
                | tee "$OUT/make_int4_full.log" || status=1
            site=
            if ! python3 -c "import openai" 2> /dev/null; then
                site=/tmp/openai-site
                python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $site .whl/openai/*.whl \
                    > "$OUT/openai_wheels.log" 2>&1 || { echo "serve24: no openai package here and .whl/openai/ did not install"; status=1; }
            fi
            if [ -f $int4/model.safetensors.index.json ]; then
                ./gpu-bin/solo serve --model $int4 --backend cuda --gpu-memory 24GiB --port 8000 > "$OUT/serve24.log" 2>&1 &
                server=$!
                up=0
                for _ in $(seq 300); do
                    curl -sf localhost:8000/health > /dev/null && { up=1; break; }
                    kill -0 $server 2> /dev/null && [ $SECONDS -lt $((end - 120)) ] || break
                    sleep 1
                done
                # the load and the plan: weights, context, sequences
                grep -aE "^solo: |weights on the GPU|rror" "$OUT/serve24.log" | cut -c1-400
                if [ $up = 1 ]; then
                    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$OUT/serve24_mem.csv" 2> /dev/null &
                    smi=$!
                    PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 timeout $(( end - SECONDS > 30 ? end - SECONDS : 30 )) \
                        python3 scripts/serve_conversation.py --url http://127.0.0.1:8000/v1 --target-tokens 32768 \
                        --json "$OUT/serve24.json" 2>&1 | tee "$OUT/serve24_conversation.log" || status=1
                    echo "serve24: GPU memory in use with the server's state: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader) now, $(sort -n "$OUT/serve24_mem.csv" | tail -1) MiB at most during the conversation"
                    kill $smi; wait $smi 2> /dev/null
                else
                    echo "serve24: the server did not answer /health"; tail -5 "$OUT/serve24.log" | cut -c1-400; status=1
                fi
                kill $server 2> /dev/null
                for _ in $(seq 20); do kill -0 $server 2> /dev/null || break; sleep 0.5; done
                kill -9 $server 2> /dev/null; wait $server 2> /dev/null
            else
                echo "serve24: no checkpoint in $int4 ($OUT/make_int4_full.log)"; status=1
            fi
            shift ;;
        ttft)
            # one client's time to first token through solo serve, 4 requests a length (the first
            # of a length pays once), and the /metrics differences over the last 3
            make_serve_slice
            for n in 4096 32768; do
                ./gpu-bin/solo serve --model "$slice" --backend cuda --max-seq 40960 --port 8000 > "$OUT/serve_ttft_$n.log" 2>&1 &
                for _ in $(seq 60); do curl -sf localhost:8000/health > /dev/null && break; sleep 1; done
                python3 scripts/serve_load.py --clients 1 --prompt-tokens $n --max-tokens 4 | tail -1 | sed "s/^/$n, first: /" | tee -a "$OUT/ttft.log"
                curl -s localhost:8000/metrics > "$OUT/metrics_before_$n"
                for _ in 1 2 3; do
                    python3 scripts/serve_load.py --clients 1 --prompt-tokens $n --max-tokens 4 | tail -1 | sed "s/^/$n: /" | tee -a "$OUT/ttft.log"
                done
                curl -s localhost:8000/metrics > "$OUT/metrics_after_$n"
                python3 scripts/metrics_diff.py "$OUT/metrics_before_$n" "$OUT/metrics_after_$n" | tee -a "$OUT/ttft.log"
                kill %1; wait
            done
            ./gpu-bin/solo bench --model "$slice" --contexts 4096,32768 --rounds 3 2>&1 | tee "$OUT/bench_slice.log" || status=1
            shift ;;
        load)
            # start-up on 4-layer full-width slices, bf16 (8.2 GB) and FP8 (5.1 GB): solo bench --model
            # three times each, the later runs reading the files from the page cache
            slices=/tmp/solo-load-slices
            (cd scripts && python3 -c "import torch; from slice_parity import real_config, randomise; from fp8_parity import make_fp8_checkpoint; from transformers import Qwen3_5MoeForCausalLM
torch.manual_seed(0)
cfg = real_config(4)
with torch.device('cuda'): m = Qwen3_5MoeForCausalLM(cfg).to(torch.bfloat16)
randomise(m, 0, 'hf-router'); m.save_pretrained('$slices/bf16'); make_fp8_checkpoint(m, cfg, '$slices/fp8')") > "$OUT/load_slices.log" 2>&1 || status=1
            for p in bf16 fp8; do
                for i in 1 2 3; do
                    start=$(date +%s%N)
                    ./gpu-bin/solo bench --model "$slices/$p" --contexts 256 --rounds 1 2>&1 \
                        | grep -E "solo: checkpoint|weights on the GPU|model ready" | sed "s/^/$p run $i: /" | tee -a "$OUT/load.log"
                    echo "$p run $i: $(( ($(date +%s%N) - start) / 1000000 )) ms from start to exit" | tee -a "$OUT/load.log"
                done
            done
            shift ;;
        llama-build)
            # llama.cpp with CUDA for this GPU from the carried source (scripts/pack_llama_cpp.sh),
            # and scripts/llama_logits.cpp's --bench against it (llama-bench's source is not in the
            # crate); kept in /tmp/llama while the machine stays warm
            llama=/tmp/llama
            if [ ! -x $llama/build/bin/llama-logits ]; then
                for tool in cmake nvcc g++; do
                    command -v $tool > /dev/null || { echo "llama-build: no $tool on this machine" | tee "$OUT/llama_build.log"; exit 1; }
                done
                mkdir -p $llama && tar xzf gpu-bin/llama-src.tgz -C $llama
                arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
                (cmake -S $llama -B $llama/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_CUDA=ON \
                    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMON=OFF \
                    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
                    -DLLAMA_BUILD_APP=OFF && timeout 540 cmake --build $llama/build -j"$(nproc)" --target llama \
                    && g++ -O2 -std=c++17 -I$llama/include -I$llama/ggml/include gpu-bin/llama_logits.cpp -L$llama/build/bin \
                        -lllama -lggml -lggml-base -Wl,-rpath,$llama/build/bin -o $llama/build/bin/llama-logits) \
                    > "$OUT/llama_build.log" 2>&1 || { tail -20 "$OUT/llama_build.log"; status=1; }
            fi
            shift ;;
        gguf-quality)
            # a 4-layer full-width random GGUF file in llama.cpp's Q4_K_M mix: llama.cpp (built for
            # the CPU from the carried source, kept in /tmp/llama-cpu while the machine stays warm),
            # solo's CPU reference and solo's CUDA kernels on the same 64 tokens (48 prefilled, 16
            # decoded): top-1 agreement and mean KL against llama.cpp (scripts/gguf_quality.py). A
            # wiring check between solo's CPU and CUDA forms; against llama.cpp it measures the
            # random file's ties (bench/RESULTS.md), not quality
            build_llama_cpu
            file=/tmp/solo-quality-q4_k_m.gguf
            [ -f $file ] || ./gpu-bin/solo random-gguf $file --mix q4_k_m --layers 4 > "$OUT/gguf_quality.log" 2>&1
            tokens=$(python3 -c "print(','.join(str((i * 7919 + 11) % 240000) for i in range(64)))")
            timeout 200 $cpu/build/bin/llama-logits $file "$tokens" 48 /tmp/q_llama.f32 >> "$OUT/gguf_quality.log" 2>&1 || status=1
            for backend in cuda cpu; do
                timeout 300 ./gpu-bin/solo logits --model $file --tokens "$tokens" --prefill 48 --backend $backend \
                    --out /tmp/q_solo_$backend.safetensors >> "$OUT/gguf_quality.log" 2>&1 || status=1
            done
            python3 scripts/gguf_quality.py llama.cpp-cpu=/tmp/q_llama.f32 solo-cuda=/tmp/q_solo_cuda.safetensors \
                solo-cpu=/tmp/q_solo_cpu.safetensors 2>&1 | tee -a "$OUT/gguf_quality.log" || status=1
            python3 scripts/gguf_quality.py solo-cpu=/tmp/q_solo_cpu.safetensors solo-cuda=/tmp/q_solo_cuda.safetensors \
                2>&1 | tee -a "$OUT/gguf_quality.log" || status=1
            shift ;;
        gguf-slice-quality)
            # issue #48's quality line: a 4-layer full-width slice with the release's 256 experts
            # (slice_parity.py's hf-router-confident weights) written as a BF16 GGUF and quantized
            # to Q4_K_M by libllama; transformers fp32 (the reference) and bf16 on the GPU,
            # llama.cpp's CPU build, solo's CPU reference and solo's CUDA kernels on the Q4_K_M
            # and BF16 files, 64 tokens (48 prefilled, 16 decoded): top-1 and mean KL to HF fp32,
            # and solo against llama.cpp (scripts/gguf_slice_quality.py; gpu-bin/pylib: the
            # `gguf` package, from scripts/pack_llama_cpp.sh)
            build_llama_cpu
            PYTHONPATH=gpu-bin/pylib LLAMA_THREADS=$(nproc) PYTHONUNBUFFERED=1 timeout 480 python3 scripts/gguf_slice_quality.py \
                --solo gpu-bin/solo --llama $cpu/build/bin/llama-logits --experts 256 --backends cpu,cuda \
                --dir /tmp/solo-gguf-slice --out "$OUT" 2>&1 | grep -v '^\.*$' | tee "$OUT/gguf_slice_quality.log" || status=1
            shift ;;
        gguf)
            # one full-size random GGUF file (solo random-gguf: llama.cpp's Q4_K_M or Q8_0 mix), then
            # on that same file: llama.cpp (if llama-build ran) and solo, prefill at 4K and decode
            # at 256 and 32K; and the GPU memory the weights take against the file's size
            file=/tmp/solo-random-$2.gguf
            [ -f $file ] || ./gpu-bin/solo random-gguf $file --mix "$2" 2>&1 | tee "$OUT/gguf_$2.log"
            ls -l $file | tee -a "$OUT/gguf_$2.log"
            if [ -x /tmp/llama/build/bin/llama-logits ]; then
                timeout 400 /tmp/llama/build/bin/llama-logits --bench $file 4096 256,32768 128 2>&1 \
                    | grep '^{' | sed 's/^/llama.cpp: /' | tee -a "$OUT/gguf_$2.log" || status=1
            fi
            timeout 400 ./gpu-bin/solo bench --model $file --contexts 256,4096,32768 --rounds 3 ${BENCH_ARGS:-} \
                --json "$OUT/gguf_$2.json" 2>&1 | tee -a "$OUT/gguf_$2.log" || status=1
            shift 2 ;;
        *) echo "unknown step $1"; exit 2 ;;
    esac
done
exit $status
