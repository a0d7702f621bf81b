#!/usr/bin/env bash
# Builds and runs the stream probe (issue 41, item 1) on a GPU machine with nvcc on PATH.
# Prints the results table and writes it to $OUT/stream_probe.txt when OUT is set.
# Arguments go to the probe: --quick (16 KB pages, cap 4 only), --lm ROWS.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)/stream_probe
nvcc -O3 -arch=sm_90a -std=c++17 -o "$bin" "$here/stream_probe.cu"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader || true
out=${OUT:-}
if [ -n "$out" ]; then
    timeout 300 "$bin" "$@" 2>&1 | tee "$out/stream_probe.txt"
else
    timeout 300 "$bin" "$@"
fi
