#!/usr/bin/env bash
# Packs llama.cpp's source (the tree inside the `llama-cpp-sys-2` crate, as build_llama_cpp.sh
# fetches it: libllama, ggml's CPU and CUDA backends, no other backend) into
# gpu-bin/llama-src.tgz (~3.5 MB) for the GPU machine, which has no network: `gpu_run.sh
# llama-build` builds it there with CUDA, `gpu_run.sh gguf` runs it beside solo on one file.
# Also the `gguf` Python package (pure Python, not on the GPU machine) into gpu-bin/pylib for
# `gpu_run.sh gguf-slice-quality`. Not part of CI.
#
# Usage: scripts/pack_llama_cpp.sh [VERSION]
set -euo pipefail
VERSION="${1:-0.1.161}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SRC="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/llama-cpp-sys-2-"$VERSION"/llama.cpp 2>/dev/null | head -1)"
if [ -z "$SRC" ]; then
    echo "llama.cpp $VERSION is not in cargo's registry cache: run scripts/build_llama_cpp.sh first" >&2
    exit 1
fi
mkdir -p "$ROOT/gpu-bin"
others=(sycl vulkan opencl metal hexagon cann musa hip openvino et webgpu zdnn rpc blas kompute)
tar czf "$ROOT/gpu-bin/llama-src.tgz" -C "$SRC" "${others[@]/#/--exclude=ggml/src/ggml-}" \
    CMakeLists.txt cmake ggml src include vendor LICENSE
cp "$ROOT/scripts/llama_logits.cpp" "$ROOT/gpu-bin/"
python3 -m pip install -q --no-deps --upgrade --target "$ROOT/gpu-bin/pylib" gguf==0.19.0
ls -l "$ROOT/gpu-bin/llama-src.tgz" >&2
