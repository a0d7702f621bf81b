#!/usr/bin/env bash
# What the GPU machine runs, in one call (it keeps nothing between calls):
#   scripts/gpu_run.sh [tests] [kernels] [parity] [bench CONTEXTS ROUNDS] [batch COUNTS]
# (env: BENCH_ARGS, e.g. --profile; BENCH_TAG names the bench's output files)
# Expects the binaries built on the CPU machine and carried in gpu-bin/:
#   gpu-bin/solo             (cargo build --release -p solo)
#   gpu-bin/solo_cuda_tests  (the solo-cuda unit-test binary: cargo test --release -p solo-cuda --no-run)
# Writes logs and JSON under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/solo-out}
mkdir -p "$OUT"
export SOLO_CACHE=/tmp/solo-cache
# libcublas/libnvrtc: the system's CUDA, else the pip wheels next to PyTorch.
wheels=$(python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${wheels}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
status=0
while [ $# -gt 0 ]; do
    case "$1" in
        tests)
            timeout 300 ./gpu-bin/solo_cuda_tests --include-ignored --test-threads=1 2>&1 | tee "$OUT/kernel_tests.log" || status=1
            shift ;;
        kernels)
            timeout 300 ./gpu-bin/solo bench --synthetic --kernels --json "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log" || status=1
            shift ;;
        parity)
            PYTHONUNBUFFERED=1 timeout 400 python3 scripts/slice_parity.py --cpu ${PARITY_ARGS:-} --solo gpu-bin/solo --dir /tmp/solo-slice --out "$OUT" 2>&1 | tee "$OUT/parity.log" || status=1
            shift ;;
        bench)
            timeout 400 ./gpu-bin/solo bench --synthetic --contexts "$2" --rounds "$3" ${BENCH_ARGS:-} --json "$OUT/bench${BENCH_TAG:-}.json" 2>&1 | tee "$OUT/bench${BENCH_TAG:-}.log" || status=1
            shift 3 ;;
        batch)
            timeout 300 ./gpu-bin/solo bench --synthetic --contexts 4096 --batch "$2" --rounds 3 ${BENCH_ARGS:-} --json "$OUT/batch.json" 2>&1 | tee "$OUT/batch.log" || status=1
            shift 2 ;;
        *) echo "unknown step $1"; exit 2 ;;
    esac
done
exit $status
