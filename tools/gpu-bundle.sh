#!/usr/bin/env bash
# Builds, here (no GPU needed), a self-contained bundle for the GPU machine
# lent by the `device` tool (docs/BENCHMARKS.md, "GPU check"): the CUDA test
# binaries and the `colibri` binary for sm_90 (COLIBRI_CUDA_ARCH to change it),
# stripped, plus the non-CUDA shared libraries they load that such a machine
# lacks (it has the CUDA 13 runtime and cuBLAS, CMake and ninja, but none of
# the project's Debian packages). The bundle is build/gpu-bundle/bundle.tar.gz
# (gzip: OpenBLAS alone is 36 MiB unpacked; tools/gpu-check.sh unpacks it
# there); build/gpu-bundle is ignored by git: pass it as `carry`.
#
# The GPU machine's C library may be older than this one's (Debian 12 has
# glibc 2.36; Ubuntu 22.04 images have 2.35): Debian's libstdc++.so.6 needs
# GLIBC_2.36 and libgcc_s.so.1 GLIBC_2.35, so the bundle's binaries are built
# in their own tree (build/gpu-build) with libstdc++ and libgcc linked
# statically, and protobuf too (Debian's libprotobuf.so would load
# libstdc++.so.6 again); libstdc++ is never bundled. libgcc_s.so.1 still comes
# along for libgfortran (OpenBLAS's), within the ceiling. libstdc++'s static
# archive references arc4random (GLIBC_2.36) from std::random_device; the
# binaries link with -Wl,--wrap=arc4random and tools/gpu_bundle_arc4random.c
# (the same contract on getrandom, glibc 2.25). The script then reads the
# GLIBC symbol versions every bundled file needs (objdump -p, "Version
# References") and fails when any exceeds COLIBRI_BUNDLE_MAX_GLIBC (default
# 2.35); the highest one is written to the bundle as glibc-required, which
# gpu-check.sh compares with the machine's own before running anything.
# It also fails when the working tree plus the bundle exceed 64 MiB, the
# transfer limit.
# Usage: tools/gpu-bundle.sh        Idempotent; reuses build/gpu-build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bundle="$root/build/gpu-bundle"
build="$root/build/gpu-build"
arch=${COLIBRI_CUDA_ARCH:-90}
max_glibc=${COLIBRI_BUNDLE_MAX_GLIBC:-2.35}

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null || { echo "gpu-bundle: nvcc not found" >&2; exit 2; }
command -v objdump >/dev/null || { echo "gpu-bundle: objdump not found (binutils)" >&2; exit 2; }
mkdir -p "$build"
gcc -O2 -Wall -Wextra -c tools/gpu_bundle_arc4random.c -o "$build/gpu_bundle_arc4random.o"
cmake --preset default -B "$build" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc -Wl,--wrap=arc4random $build/gpu_bundle_arc4random.o" \
  -DProtobuf_USE_STATIC_LIBS=ON -U 'Protobuf_LIBRAR*' -U 'Protobuf_PROTOC_LIBRAR*' -U 'Protobuf_LITE_LIBRAR*' >/dev/null
cmake --build "$build" -j"$(nproc)" --target colibri cuda_test cuda_compute_test cuda_transfer_test cuda_engine_test

staging="$root/build/gpu-bundle-files"
rm -rf "$bundle" "$staging"
mkdir -p "$bundle" "$staging/bin" "$staging/lib"
binaries=("$build/colibri" "$build/tests/cuda/cuda_test" "$build/tests/cuda/cuda_compute_test"
          "$build/tests/cuda/cuda_transfer_test" "$build/tests/cuda/cuda_engine_test")
for b in "${binaries[@]}"; do
  strip -o "$staging/bin/$(basename "$b")" "$b"
done
# Shared libraries: everything ldd resolves except the C library family and
# the kernel's vDSO (present on any Linux), and CUDA's own (present there).
# libstdc++ must not appear: it is linked in statically (and needs GLIBC_2.36).
for b in "$staging"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so.*|libcudart.so.*|libcublas*) ;;
    libstdc++.so.*)
      echo "gpu-bundle: $(basename "$lib") is still loaded (by a binary or a bundled library: link it statically)" >&2
      exit 1 ;;
    *) cp -L "$lib" "$staging/lib/" ;;
  esac
done

# The GLIBC versions each bundled file needs, from its version references.
glibc_needed() { objdump -p "$1" | awk '$NF ~ /^GLIBC_[0-9.]+$/ {sub("GLIBC_", "", $NF); print $NF}'; }
highest=0
over=()
for f in "$staging"/bin/* "$staging"/lib/*; do
  need=$(glibc_needed "$f" | sort -uV | tail -1)
  [ -n "$need" ] || continue
  printf 'gpu-bundle: %-28s needs GLIBC_%s\n' "$(basename "$f")" "$need"
  highest=$(printf '%s\n%s\n' "$highest" "$need" | sort -V | tail -1)
  if [ "$(printf '%s\n%s\n' "$need" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
    over+=("$(basename "$f") needs GLIBC_$need")
  fi
done
if [ ${#over[@]} -gt 0 ]; then
  printf 'gpu-bundle: over the GLIBC_%s ceiling (COLIBRI_BUNDLE_MAX_GLIBC): %s\n' "$max_glibc" "${over[*]}" >&2
  exit 1
fi
echo "$highest" >"$staging/glibc-required"
echo "gpu-bundle: the bundle needs glibc $highest or newer (ceiling $max_glibc)"

tar -C "$staging" -czf "$bundle/bundle.tar.gz" bin lib glibc-required
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
