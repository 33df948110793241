#!/usr/bin/env bash
# Builds, here (no GPU needed), a self-contained bundle for the GPU machine
# lent by the `device` tool (docs/BENCHMARKS.md, "GPU check"): the CUDA test
# binaries and the `colibri` binary for sm_90 (COLIBRI_CUDA_ARCH to change it),
# stripped, plus the non-CUDA shared libraries they load that such a machine
# lacks (it has the CUDA 13 runtime and cuBLAS, CMake and ninja, but none of
# the project's Debian packages). The bundle is build/gpu-bundle/bundle.tar.gz
# (gzip: OpenBLAS alone is 36 MiB unpacked; tools/gpu-check.sh unpacks it
# there); build/gpu-bundle is ignored by git: pass it as `carry`. The script
# fails when the working tree plus the bundle exceed 64 MiB, the transfer
# limit.
# Usage: tools/gpu-bundle.sh        Idempotent; reuses build/default.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bundle="$root/build/gpu-bundle"
arch=${COLIBRI_CUDA_ARCH:-90}

command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-bundle: nvcc not found" >&2; exit 2; }
cmake --preset default -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build build/default -j"$(nproc)" --target colibri cuda_test cuda_compute_test cuda_transfer_test cuda_engine_test

staging="$root/build/gpu-bundle-files"
rm -rf "$bundle" "$staging"
mkdir -p "$bundle" "$staging/bin" "$staging/lib"
binaries=(build/default/colibri build/default/tests/cuda/cuda_test build/default/tests/cuda/cuda_compute_test
          build/default/tests/cuda/cuda_transfer_test build/default/tests/cuda/cuda_engine_test)
for b in "${binaries[@]}"; do
  strip -o "$staging/bin/$(basename "$b")" "$b"
done
# Shared libraries: everything ldd resolves except the C library family and
# the kernel's vDSO (present on any Linux), and CUDA's own (present there).
for b in "$staging"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so.*|libcudart.so.*|libcublas*) ;;
    *) cp -L "$lib" "$staging/lib/" ;;
  esac
done
tar -C "$staging" -czf "$bundle/bundle.tar.gz" bin lib
rm -rf "$staging"
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
bundle_bytes=$(du -sb "$bundle" | cut -f1)
total=$((tree_bytes + bundle_bytes))
awk -v b="$bundle_bytes" -v t="$tree_bytes" -v dir="$bundle" -v arch="$arch" 'BEGIN {
  printf "gpu-bundle: %s (sm_%s): bundle %.1f MiB, working tree %.1f MiB, together %.1f MiB of 64 MiB\n",
         dir, arch, b / 1048576, t / 1048576, (b + t) / 1048576 }'
if [ "$total" -gt $((64 * 1048576)) ]; then
  echo "gpu-bundle: over the 64 MiB the device tool carries" >&2
  exit 1
fi
