#!/usr/bin/env bash
# What a session runs on the GPU machine, in one call (it keeps nothing between calls):
#   scripts/gpu_run.sh [tests] [parity] [bench CONTEXTS ROUNDS]
# Expects the binaries built on the CPU machine and carried in gpu-bin/:
#   gpu-bin/solo             (cargo build --release -p solo)
#   gpu-bin/solo_cuda_tests  (the solo-cuda unit-test binary: cargo test --release -p solo-cuda --no-run)
# Writes logs and JSON under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/solo-out}
mkdir -p "$OUT"
export SOLO_CACHE=/tmp/solo-cache
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
status=0
while [ $# -gt 0 ]; do
    case "$1" in
        tests)
            ./gpu-bin/solo_cuda_tests --ignored --test-threads=1 2>&1 | tee "$OUT/kernel_tests.log" || status=1
            shift ;;
        parity)
            PYTHONUNBUFFERED=1 python3 scripts/slice_parity.py --solo gpu-bin/solo --dir /tmp/solo-slice --out "$OUT" 2>&1 | tee "$OUT/parity.log" || status=1
            shift ;;
        bench)
            ./gpu-bin/solo bench --synthetic --contexts "$2" --rounds "$3" --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" || status=1
            shift 3 ;;
        *) echo "unknown step $1"; exit 2 ;;
    esac
done
exit $status
