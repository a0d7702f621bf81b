#!/usr/bin/env bash
# The issue's leak check in full: 10,000 open/chat/close cycles of the demo engine through
# libsolo (examples/c/leak.c), RSS growth after the first tenth bounded (default 8 MiB).
# CI runs the same program with 200 cycles (scripts/capi_check.sh). ~minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
# PROFILE=test reuses what `cargo test` built (target/debug, opt-level 2).
profile="${PROFILE:-release}"
dir=target/$([ "$profile" = release ] && echo release || echo debug)
cargo build -q --profile "$profile" -p solo-capi
mkdir -p target/capi
cc -std=c11 -D_DEFAULT_SOURCE -O2 -I include examples/c/leak.c -L "$dir" -lsolo -o target/capi/leak-$profile
SOLO_CACHE="${SOLO_CACHE:-$PWD/target/capi/cache}" LD_LIBRARY_PATH="$PWD/$dir" \
    target/capi/leak-$profile "${1:-10000}" "${2:-8}"
