#!/usr/bin/env bash
# A branch's kernels for a GPU call without the branch's binaries: solo's kernel cache is keyed by
# file name and a hash of the file's source (`{file}-{arch}-{hash}.ptx`, runtime.rs), and a cached
# file is loaded as found. So a branch's PTX put under the base's name is what the base's `solo`
# and `solo_cuda_tests` run. Only for branches whose kernel signatures are the base's (the
# launchers are compiled into the binary) and whose other changes are in .cu/.cuh files.
#
# Usage: scripts/kernel_overlay.sh BASE_SOLO BRANCH_SOLO ARCH OUT
#   BASE_SOLO, BRANCH_SOLO: the two `solo` binaries (cargo build --release -p solo, one from each)
#   OUT/base/kernels: the base's cache; OUT/overlay/kernels: the same with every file the branch
#   changed replaced by the branch's PTX under the base's name. On the GPU machine:
#   SOLO_CACHE=OUT/overlay gpu-bin/solo ... (or solo_cuda_tests) runs the branch's kernels.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BASE_SOLO BRANCH_SOLO ARCH OUT" >&2; exit 2; }
base_bin=$1 branch_bin=$2 arch=$3 out=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out/base"  # (an earlier base's files, left there, would read as changed)
SOLO_CACHE="$out/base" "$base_bin" kernels --arch "$arch" >&2
SOLO_CACHE="$tmp" "$branch_bin" kernels --arch "$arch" >&2
rm -rf "$out/overlay" && mkdir -p "$out/overlay/kernels"
cp "$out/base/kernels/"*"-$arch-"*.ptx "$out/overlay/kernels/"
changed=0
for base in "$out/base/kernels/"*"-$arch-"*.ptx; do
    name=$(basename "$base")
    stem=${name%-*}  # {file}-{arch}
    if [ ! -f "$tmp/kernels/$name" ]; then
        branch=$(ls "$tmp/kernels/$stem-"*.ptx 2>/dev/null | head -1)
        [ -n "$branch" ] || { echo "the branch has no $stem" >&2; exit 1; }
        cp "$branch" "$out/overlay/kernels/$name"
        echo "overlay: $stem (the branch's $(basename "$branch"))" >&2
        changed=$((changed + 1))
    fi
done
[ "$changed" -gt 0 ] || echo "the branch's kernels are the base's" >&2
