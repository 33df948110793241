#!/usr/bin/env bash
# Runs the GPU checks from the bundle tools/gpu-bundle.sh made, on the GPU
# machine (repository root, the bundle carried as build/gpu-bundle and
# unpacked there first): the device probe, then every CUDA test binary
# (conformance against the CPU oracle, transfers, the engine on the GPU
# against the CPU engine), then the GPU benchmarks (docs/BENCHMARKS.md, "GPU
# check"): `colibri bench pcie` and `colibri bench compute --compute cuda`,
# their JSON and the hardware profiles they write (profiles/) into $OUT.
# Output goes to stdout and, when $OUT is set (the device tool's output
# folder), to $OUT/gpu-check.log and one gtest XML per binary; without $OUT
# the benchmarks' files go to build/gpu-check-out/. Exit status: the number
# of failing steps (0 = all passed). Without a GPU every GPU test skips and
# the benchmarks say "no CUDA device", which is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=build/gpu-bundle
[ -f "$bundle/bundle.tar.gz" ] || { echo "gpu-check: no $bundle/bundle.tar.gz (run tools/gpu-bundle.sh and carry $bundle)" >&2; exit 2; }
rm -rf "$bundle/bin" "$bundle/lib"
tar -C "$bundle" -xzf "$bundle/bundle.tar.gz" || { echo "gpu-check: cannot unpack $bundle/bundle.tar.gz" >&2; exit 2; }
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=${OUT:+$OUT/gpu-check.log}
out=${OUT:-build/gpu-check-out}
mkdir -p "$out"
failed=0
run() {
  echo "== $*"
  "$@"
  local rc=$?
  [ $rc -eq 0 ] || { echo "== exit $rc: $*"; failed=$((failed + 1)); }
}
# bench NAME ARGS...: colibri ARGS (a --json bench), stdout into $out/NAME.json;
# exit 2 with "no CUDA device" (no GPU here) is a skip, not a failure.
bench() {
  local name=$1
  shift
  echo "== colibri $* > $out/$name.json"
  "$bundle/bin/colibri" "$@" >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  cat "$out/$name.err"
  if [ $rc -eq 2 ] && grep -q "no CUDA device" "$out/$name.err"; then
    echo "== skipped (no CUDA device): colibri $*"
  elif [ $rc -ne 0 ]; then
    echo "== exit $rc: colibri $*"
    failed=$((failed + 1))
  fi
}
{
  date -u +"gpu-check %Y-%m-%dT%H:%M:%SZ"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,mig.mode.current --format=csv
  for t in cuda_test cuda_compute_test cuda_transfer_test cuda_engine_test; do
    run "$bundle/bin/$t" ${OUT:+--gtest_output=xml:$OUT/$t.xml}
  done
  run "$bundle/bin/colibri" hw list --json
  # The GPU benchmarks, kept short (estimated well under a minute each on an H200, not yet measured):
  # pcie 4 sizes x 3 methods x 3 repeats x 50 copies; compute 4 dtypes x 4 batches, 3 windows of
  # 0.1 s for ours and for cuBLAS each.
  bench bench-pcie bench pcie --json --profile-out "$out/profiles"
  bench bench-compute-cuda bench compute --compute cuda --json --seconds 0.1 --repeats 3 --profile-out "$out/profiles"
  # The profiles they wrote must load (measured-h200.json, or measured-<device>.json, names both parts).
  if compgen -G "$out/profiles/*.json" >/dev/null; then
    hw_files=()
    for f in "$out"/profiles/*.json; do hw_files+=(--hw-file "$f"); done
    run "$bundle/bin/colibri" hw list "${hw_files[@]}"
  fi
  echo "gpu-check: $failed failing step(s)"
  exit "$failed"
} 2>&1 | if [ -n "$log" ]; then tee "$log"; else cat; fi
exit "${PIPESTATUS[0]}"
