#!/usr/bin/env bash
# libsolo (crates/capi) end to end, against the built-in demo checkpoint: builds the library,
# compiles examples/c/chat.c and examples/c/leak.c with cc and runs them (the leak check with
# LEAK_CYCLES open/chat/close cycles, default 200), builds the Python wheel and runs its pytest
# tests, runs the Node tests. scripts/test calls it; SOLO_PYTHON names a Python with pip (a venv).
# (The header's drift check is a cargo test: crates/capi/tests/header.rs.)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${SOLO_PYTHON:-python3}"
out=target/capi
mkdir -p "$out"

# The test profile and every target of the workspace, as `cargo test --workspace` builds them:
# the same features, so after it (scripts/test) nothing but libsolo itself is built here.
# (`-p solo-capi` alone resolves features for fewer crates and rebuilds most dependencies.)
cargo build -q --profile test --workspace --all-targets
lib="$PWD/target/debug/libsolo.so"
export SOLO_LIB="$lib" LD_LIBRARY_PATH="$PWD/target/debug${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Each engine opened on the demo writes it to the cache once; keep it inside target/.
export SOLO_CACHE="${SOLO_CACHE:-$PWD/$out/cache}"

echo "== C example"
cc -std=c11 -D_DEFAULT_SOURCE -pthread -Wall -Wextra -Werror -I include examples/c/chat.c -L target/debug -lsolo -o "$out/chat"
"$out/chat"
echo "== C leak check"
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -I include examples/c/leak.c -L target/debug -lsolo -o "$out/leak"
"$out/leak" "${LEAK_CYCLES:-200}" "${LEAK_BOUND_MIB:-8}"

echo "== Python wheel and tests"
rm -rf "$out/wheel" "$out/pybuild"
cp -r bindings/python "$out/pybuild"
# (without its debug info: a wheel a quarter of the size, made in a fraction of the time)
strip --strip-debug -o "$out/pybuild/solo/libsolo.so" "$lib" 2>/dev/null || cp "$lib" "$out/pybuild/solo/"
"$python" -m pip install -q --disable-pip-version-check setuptools wheel pytest
"$python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation "$out/pybuild" -w "$out/wheel"
"$python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$out"/wheel/solo_engine-*.whl
# The installed wheel's copy of libsolo, not $SOLO_LIB, is what the tests load.
tests="$PWD/bindings/python/tests"
(cd "$out" && env -u SOLO_LIB "$python" -m pytest -q "$tests" -p no:cacheprovider)

echo "== Node tests"
(cd bindings/node && npm install --no-audit --no-fund --silent && node --test test/engine.test.js)
