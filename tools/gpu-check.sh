#!/usr/bin/env bash
# Runs the GPU checks from the bundle tools/gpu-bundle.sh made, on the GPU
# machine (repository root, the bundle carried as build/gpu-bundle): the
# device probe, then every CUDA test binary (conformance against the CPU
# oracle, transfers). Output goes to stdout and, when $OUT is set (the device
# tool's output folder), to $OUT/gpu-check.log and one gtest XML per binary.
# Exit status: the number of failing steps (0 = all passed). Without a GPU
# every GPU test skips, which is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=build/gpu-bundle
[ -d "$bundle/bin" ] || { echo "gpu-check: no $bundle (run tools/gpu-bundle.sh and carry it)" >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=${OUT:+$OUT/gpu-check.log}
failed=0
run() {
  echo "== $*"
  "$@"
  local rc=$?
  [ $rc -eq 0 ] || { echo "== exit $rc: $*"; failed=$((failed + 1)); }
}
{
  date -u +"gpu-check %Y-%m-%dT%H:%M:%SZ"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,mig.mode.current --format=csv
  for t in cuda_test cuda_compute_test cuda_transfer_test; do
    run "$bundle/bin/$t" ${OUT:+--gtest_output=xml:$OUT/$t.xml}
  done
  run "$bundle/bin/colibri" hw list --json
  echo "gpu-check: $failed failing step(s)"
  exit "$failed"
} 2>&1 | if [ -n "$log" ]; then tee "$log"; else cat; fi
exit "${PIPESTATUS[0]}"
