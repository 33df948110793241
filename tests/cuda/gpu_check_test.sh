#!/usr/bin/env bash
# The skip rule of tools/gpu-check.sh, on a machine without a GPU, over the
# build tree's binaries (--from-build): with a stub nvidia-smi that lists a
# GPU, every test that needs a device and every GPU benchmark must count as a
# failure (non-zero exit naming them); with a stub that lists none, the same
# run passes (skips are expected). Exit 77 (ctest: skipped) when this machine
# has a usable GPU, where the stubs would not describe it.
# Usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source_dir=$1
build_dir=$2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; then
  echo "a GPU is listed here: the stubs would lie"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gpu" "$work/none" "$work/out-gpu" "$work/out-none"
cat >"$work/gpu/nvidia-smi" <<'STUB'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "NVIDIA H200, 143771 MiB, 580.159.04, Disabled" ;;
esac
STUB
cat >"$work/none/nvidia-smi" <<'STUB'
#!/bin/sh
echo "No devices were found"
exit 6
STUB
chmod +x "$work/gpu/nvidia-smi" "$work/none/nvidia-smi"
failures=0
check() {
  if ! "$@"; then
    echo "FAILED: $*"
    failures=$((failures + 1))
  fi
}

PATH="$work/gpu:$PATH" OUT="$work/out-gpu" "$source_dir/tools/gpu-check.sh" --from-build "$build_dir" >"$work/gpu.log" 2>&1
rc=$?
echo "--- with a GPU listed: exit $rc"
grep '^== FAILED\|^skip rule\|^gpu-check:' "$work/gpu.log"
# 4 test binaries and 2 benchmarks, each a failure.
check test "$rc" -ge 6
check grep -q "skip rule: a GPU is listed" "$work/gpu.log"
check grep -q "COLIBRI_REQUIRE_CUDA_DEVICE is set but: no CUDA device" "$work/gpu.log"
check grep -q "FAILED: colibri bench pcie .* says 'no CUDA device' although nvidia-smi lists a GPU" "$work/gpu.log"
check grep -q "FAILED: colibri bench compute .* says 'no CUDA device' although nvidia-smi lists a GPU" "$work/gpu.log"
for t in cuda_test cuda_compute_test cuda_transfer_test cuda_engine_test; do
  check tar -tzf "$work/out-gpu/gpu-check-results.tar.gz" "./$t.xml"
  check grep -q "FAILED: exit [0-9]*: $build_dir/tests/cuda/$t" "$work/gpu.log"
done

PATH="$work/none:$PATH" OUT="$work/out-none" "$source_dir/tools/gpu-check.sh" --from-build "$build_dir" >"$work/none.log" 2>&1
rc=$?
echo "--- with no GPU listed: exit $rc"
grep '^== FAILED\|^skip rule\|^gpu-check:\|skipped' "$work/none.log"
check test "$rc" -eq 0
check grep -q "skip rule: no GPU listed" "$work/none.log"
check test -f "$work/out-none/gpu-check.log"
check test "$(find "$work/out-none" -type f | wc -l)" -le 8  # what the device tool returns
check grep -q "== skipped (no CUDA device): colibri bench pcie" "$work/none.log"
check grep -q "cuda_compute_test: [0-9]* test(s) skipped (no GPU listed by nvidia-smi)" "$work/none.log"

if [ $failures -ne 0 ]; then
  echo "--- gpu-check log with a GPU listed:"
  cat "$work/gpu.log"
  echo "--- gpu-check log with none:"
  cat "$work/none.log"
fi
exit $failures
