#!/usr/bin/env bash
# Runs the GPU checks from the bundle tools/gpu-bundle.sh made, on the GPU
# machine (repository root, the bundle carried as build/gpu-bundle and
# unpacked there first): the machine's C library, driver and GPUs, then every
# CUDA test binary (conformance against the CPU oracle, transfers, the engine
# on the GPU against the CPU engine), then the GPU benchmarks
# (docs/BENCHMARKS.md, "GPU check"): `colibri bench pcie` and `colibri bench
# compute --compute cuda`, their JSON and the hardware profiles they write
# (profiles/) into $OUT, and `colibri calibrate --quick` (calibrate/).
#
# Output goes to stdout and to build/gpu-check-out/ (gpu-check.log, one gtest
# XML per binary, the benchmarks' JSON and stderr, profiles/). When $OUT is
# set (the device tool's output folder, which returns at most 8 files) it
# receives gpu-check.log, gpu-check-results.tar.gz (all of
# build/gpu-check-out) and profiles/*.json (the measured hardware profiles).
#
# The skip rule: when `nvidia-smi -L` lists a GPU, nothing may pass by
# skipping. COLIBRI_REQUIRE_CUDA_DEVICE=1 is exported, so a test that would
# skip for want of a device fails (tests/cuda/cuda_test_util.h); any skipped
# test in the gtest XML whose message does not start with "not applicable: "
# is a failure; and a benchmark's "no CUDA device" is a failure. Without a
# listed GPU (this development machine), those skips are expected.
#
# Usage: tools/gpu-check.sh                  the bundle in build/gpu-bundle
#        tools/gpu-check.sh --from-build DIR the binaries of a build tree (the
#                                            test of this script; no bundle)
# Exit status: 2 when it cannot start (no bundle, a C library older than the
# bundle needs), else the number of failing steps (0 = all passed).
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=build/gpu-bundle
from_build=""
case "${1:-}" in
  "") ;;
  --from-build)
    from_build=${2:?"gpu-check: --from-build needs a build directory"} ;;
  *) echo "gpu-check: unknown argument '$1' (usage: tools/gpu-check.sh [--from-build DIR])" >&2; exit 2 ;;
esac

glibc_version=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9]\+\.[0-9]\+$')
if [ -n "$from_build" ]; then
  [ -x "$from_build/colibri" ] || { echo "gpu-check: no $from_build/colibri" >&2; exit 2; }
  colibri="$from_build/colibri"
  test_bin="$from_build/tests/cuda"
else
  [ -f "$bundle/bundle.tar.gz" ] || { echo "gpu-check: no $bundle/bundle.tar.gz (run tools/gpu-bundle.sh and carry $bundle)" >&2; exit 2; }
  rm -rf "$bundle/bin" "$bundle/lib" "$bundle/glibc-required"
  tar -C "$bundle" -xzf "$bundle/bundle.tar.gz" || { echo "gpu-check: cannot unpack $bundle/bundle.tar.gz" >&2; exit 2; }
  required=$(cat "$bundle/glibc-required" 2>/dev/null)
  if [ -n "$required" ] && [ -n "$glibc_version" ] &&
     [ "$(printf '%s\n%s\n' "$required" "$glibc_version" | sort -V | tail -1)" != "$glibc_version" ]; then
    echo "gpu-check: this machine's glibc is $glibc_version, the bundle needs $required or newer (rebuild it with COLIBRI_BUNDLE_MAX_GLIBC=$glibc_version tools/gpu-bundle.sh)" >&2
    exit 2
  fi
  export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  colibri="$bundle/bin/colibri"
  test_bin="$bundle/bin"
fi
out=build/gpu-check-out
rm -rf "$out"
mkdir -p "$out"
log="$out/gpu-check.log"

# Whether nvidia-smi lists a GPU ("GPU 0: NVIDIA H200 (UUID: ...)").
gpu_listed=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; then
  gpu_listed=1
  export COLIBRI_REQUIRE_CUDA_DEVICE=1
fi

failed=0
fail() {
  echo "== FAILED: $*"
  failed=$((failed + 1))
}
run() {
  echo "== $*"
  "$@"
  local rc=$?
  [ $rc -eq 0 ] || fail "exit $rc: $*"
}
# skipped_tests XML: the messages of the skipped tests that are not "not
# applicable: ...", one per line (gtest writes <skipped message="FILE:LINE&#x0A;MESSAGE">).
skipped_tests() {
  grep -o '<skipped message="[^"]*"' "$1" 2>/dev/null | grep -v '&#x0A;not applicable: ' |
    sed -e 's/^<skipped message="//' -e 's/"$//' -e 's/&#x0A;/: /g'
}
# test NAME: one gtest binary, its XML in $out; skips checked by the skip rule.
test_binary() {
  local name=$1
  local xml="$out/$name.xml"
  rm -f "$xml"
  run "$test_bin/$name" --gtest_output=xml:"$xml"
  if [ ! -f "$xml" ]; then
    fail "$name wrote no $xml"
    return
  fi
  local skipped
  skipped=$(skipped_tests "$xml")
  local count=0
  [ -z "$skipped" ] || count=$(printf '%s\n' "$skipped" | wc -l)
  if [ "$count" -gt 0 ]; then
    if [ $gpu_listed -eq 1 ]; then
      fail "$name: $count test(s) skipped although nvidia-smi lists a GPU:"
      printf '%s\n' "$skipped" | head -5 | sed 's/^/   /'
    else
      echo "== $name: $count test(s) skipped (no GPU listed by nvidia-smi)"
    fi
  fi
}
# bench NAME ARGS...: colibri ARGS (a --json bench), stdout into $out/NAME.json;
# exit 2 with "no CUDA device" is a skip when no GPU is listed, else a failure.
bench() {
  local name=$1
  shift
  echo "== colibri $* > $out/$name.json"
  "$colibri" "$@" >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  cat "$out/$name.err"
  if [ $rc -eq 2 ] && grep -q "no CUDA device" "$out/$name.err"; then
    if [ $gpu_listed -eq 1 ]; then
      fail "colibri $* says 'no CUDA device' although nvidia-smi lists a GPU"
    else
      echo "== skipped (no CUDA device): colibri $*"
    fi
  elif [ $rc -ne 0 ]; then
    fail "exit $rc: colibri $*"
  fi
}
{
  date -u +"gpu-check %Y-%m-%dT%H:%M:%SZ"
  echo "glibc: $(ldd --version 2>/dev/null | head -1)"
  [ -z "$from_build" ] && echo "bundle needs glibc: $(cat "$bundle/glibc-required" 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "nvidia-smi -L:"
    nvidia-smi -L 2>&1 | sed 's/^/  /'
    echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)"
    nvidia-smi --query-gpu=name,memory.total,driver_version,mig.mode.current --format=csv 2>&1
  else
    echo "nvidia-smi: not found"
  fi
  if [ $gpu_listed -eq 1 ]; then
    echo "skip rule: a GPU is listed, so COLIBRI_REQUIRE_CUDA_DEVICE=1 and every skip for want of a device fails"
  else
    echo "skip rule: no GPU listed, so the tests that need one skip"
  fi
  for t in cuda_test cuda_compute_test cuda_transfer_test cuda_engine_test; do
    test_binary "$t"
  done
  run "$colibri" hw list --json
  # The GPU benchmarks, kept short (estimated well under a minute each on an H200, not yet measured):
  # pcie 4 sizes x 3 methods x 3 repeats x 50 copies; compute 4 dtypes x 4 batches, 3 windows of
  # 0.1 s for ours and for cuBLAS each.
  bench bench-pcie bench pcie --json --profile-out "$out/profiles"
  bench bench-compute-cuda bench compute --compute cuda --json --seconds 0.1 --repeats 3 --profile-out "$out/profiles"
  # This machine's host side as `colibri calibrate --quick` measures it (storage, CPU kernels, the
  # engine's own work): a measured profile of the lent machine in the same run (docs/FIDELITY.md).
  if [ $gpu_listed -eq 1 ]; then
    run "$colibri" calibrate --quick --dir "${TMPDIR:-/tmp}" -o "$out/calibrate"
  else
    echo "== skipped (no GPU listed): colibri calibrate --quick"
  fi
  # The profiles they wrote must load (measured-h200.json, or measured-<device>.json, names both parts).
  if compgen -G "$out/profiles/*.json" >/dev/null; then
    hw_files=()
    for f in "$out"/profiles/*.json; do hw_files+=(--hw-file "$f"); done
    run "$colibri" hw list "${hw_files[@]}"
  fi
  echo "gpu-check: $failed failing step(s)"
  exit "$failed"
} 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp "$log" "$OUT/gpu-check.log"
  tar -C "$out" -czf "$OUT/gpu-check-results.tar.gz" .
  if compgen -G "$out/profiles/*.json" >/dev/null; then
    mkdir -p "$OUT/profiles"
    cp "$out"/profiles/*.json "$OUT/profiles/"
  fi
fi
exit "$rc"
