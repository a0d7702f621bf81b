#!/usr/bin/env bash
# Builds llama.cpp's CPU tools once, for the GGUF fixtures (scripts/make_gguf_fixtures.py): NOT
# part of CI, whose tests read only the committed outputs (fixtures/gguf/).
#
# The source is the llama.cpp tree shipped inside the `llama-cpp-sys-2` crate on crates.io (the
# registry is the only network this needs): `cargo fetch` in a scratch project downloads it into
# cargo's registry cache. The crate ships libllama's and ggml's source but not the tools', so this
# builds the library alone (-j2) and scripts/llama_logits.cpp against it: the logits recorder,
# tokenizer and quantizer (llama_model_quantize, what llama-quantize calls). AVX2 rather than
# -march=native: ggml's AMX kernels (picked on CPUs that report AMX) die with SIGILL where the
# kernel does not grant AMX state, as in containers.
#
# Usage: scripts/build_llama_cpp.sh [VERSION]   (default below; prints the path of llama-logits)
set -euo pipefail
VERSION="${1:-0.1.161}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$ROOT/target/llama.cpp"
mkdir -p "$WORK/fetch"
cd "$WORK/fetch"
cat > Cargo.toml <<TOML
[package]
name = "fetch-llama-cpp"
version = "0.0.0"
edition = "2021"
[workspace]
[dependencies]
llama-cpp-sys-2 = "=$VERSION"
TOML
mkdir -p src && echo 'fn main() {}' > src/main.rs
cargo fetch -q
SRC="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/llama-cpp-sys-2-"$VERSION"/llama.cpp | head -1)"
echo "llama.cpp source: $SRC" >&2
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_CUDA=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >&2
cmake --build "$WORK/build" -j2 --target llama >&2
BIN="$WORK/build/bin"
g++ -O2 -std=c++17 -I"$SRC/include" -I"$SRC/ggml/include" "$ROOT/scripts/llama_logits.cpp" \
    -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN" -o "$BIN/llama-logits"
echo "$BIN/llama-logits"
